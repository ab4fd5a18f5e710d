//! A mid node's hole detection for one flow (REFERENCE.md "LEOTP"; the slides' "in-network
//! retransmission based on sequence number holes"). Data at the expected offset is in order; below
//! it, late or retransmitted (it closes the holes it overlaps); above it, it opens a hole, unless it
//! jumps more than `resync_jump_mss` MSS or is the flow's first packet here, which resynchronises.
//! Holes are kept in the order they were seen (which is also offset order) and purged after
//! `hole_purge`.

use leoguard_core::{Duration, Instant};
use std::collections::VecDeque;

/// One missing byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hole {
    pub start: u32,
    pub end: u32,
    /// When it was seen (purge and time-based confirmation count from here).
    pub seen: Instant,
    /// Data packets of the flow that arrived since (packet-count confirmation).
    pub packets: u32,
    /// Re-requested already (a hole is re-requested once).
    pub rerequested: bool,
}

/// How a Data packet (or a VPH) relates to the expected offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// At the expected offset.
    InOrder,
    /// Below it: late or retransmitted.
    Late,
    /// Above it: the gap `[start, end)` is a new hole.
    Hole { start: u32, end: u32 },
    /// The first packet, or a jump too far: the expected offset restarts after it.
    Resync,
}

/// Holes of one flow at one node.
#[derive(Clone, Debug, Default)]
pub(crate) struct Holes {
    /// The expected offset (none before the first packet).
    next: Option<u32>,
    pub holes: VecDeque<Hole>,
}

impl Holes {
    /// Classifies Data `[start, end)` and moves the expected offset; a new hole is recorded (the
    /// oldest is dropped beyond `max_holes`, returned as `true` in the second field).
    pub fn on_data(&mut self, now: Instant, start: u32, end: u32, jump_limit: u64, max_holes: u32) -> (Arrival, bool) {
        let Some(next) = self.next else {
            self.next = Some(end);
            return (Arrival::Resync, false);
        };
        if start == next {
            self.next = Some(end);
            return (Arrival::InOrder, false);
        }
        if start < next {
            self.next = Some(next.max(end));
            return (Arrival::Late, false);
        }
        self.next = Some(end);
        if u64::from(start - next) > jump_limit {
            return (Arrival::Resync, false);
        }
        let mut dropped = false;
        if self.holes.len() >= max_holes as usize {
            self.holes.pop_front();
            dropped = true;
        }
        self.holes.push_back(Hole { start: next, end: start, seen: now, packets: 0, rerequested: false });
        (Arrival::Hole { start: next, end: start }, dropped)
    }

    /// Removes `[start, end)` from every hole it overlaps (late Data filled it, or a VPH said it is
    /// recovered upstream). Returns how many holes not yet re-requested lost bytes to it.
    pub fn close(&mut self, start: u32, end: u32) -> u32 {
        if start >= end || self.holes.is_empty() {
            return 0;
        }
        let mut pending_hit = 0;
        let mut i = 0;
        while i < self.holes.len() {
            let h = self.holes[i];
            if h.end <= start || h.start >= end {
                i += 1;
                continue;
            }
            pending_hit += u32::from(!h.rerequested);
            let left = (h.start < start).then_some(Hole { end: start, ..h });
            let right = (h.end > end).then_some(Hole { start: end, ..h });
            match (left, right) {
                (Some(l), Some(r)) => {
                    self.holes[i] = l;
                    self.holes.insert(i + 1, r);
                    i += 2;
                }
                (Some(x), None) | (None, Some(x)) => {
                    self.holes[i] = x;
                    i += 1;
                }
                (None, None) => {
                    self.holes.remove(i);
                }
            }
        }
        pending_hit
    }

    /// Counts one more Data arrival on every open hole (packet-count confirmation).
    pub fn count_packet(&mut self) {
        for h in self.holes.iter_mut() {
            h.packets = h.packets.saturating_add(1);
        }
    }

    /// Drops holes seen `purge` or longer before `now`; returns how many.
    pub fn purge(&mut self, now: Instant, purge: Duration) -> u64 {
        let mut n = 0;
        while self.holes.front().is_some_and(|h| h.seen + purge <= now) {
            self.holes.pop_front();
            n += 1;
        }
        n
    }

    /// The expected offset.
    pub fn next(&self) -> Option<u32> {
        self.next
    }
}
