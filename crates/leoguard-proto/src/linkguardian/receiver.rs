//! The downstream side of a LinkGuardian link: hole detection, leading ACKs with loss notifications,
//! ordered or unordered delivery, bounded waiting for holes.

use super::{LgAck, LgConfig, LgConfigError};
use leoguard_core::{Instant, Seq16};
use std::collections::VecDeque;

/// One sequence number at or after the next expected one.
#[derive(Debug)]
enum Slot<T> {
    /// Not received; the hole was detected at this instant.
    Missing(Instant),
    /// Received, held for in-order release (ordered mode).
    Held(T),
    /// Received and already delivered (unordered mode).
    Done,
}

/// Receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Data packets received (copies included).
    pub received: u64,
    /// Packets delivered to the host.
    pub delivered: u64,
    /// Copies of packets already received (retransmission copies, spurious retransmissions).
    pub duplicates: u64,
    /// Dummies received.
    pub dummies: u64,
    /// Holes detected (each notified when detected).
    pub holes: u64,
    /// ACKs handed out by [`LgReceiver::poll_ack`].
    pub acks: u64,
    /// Of those, carrying a loss notification.
    pub notifications: u64,
    /// Sequence numbers given up after `hole_timeout`.
    pub skipped: u64,
    /// Packets too far ahead of the expected sequence number (dropped).
    pub out_of_window: u64,
    /// Most packets held at once (ordered mode).
    pub max_held: u64,
}

/// The downstream side of one link.
#[derive(Debug)]
pub struct LgReceiver<T> {
    cfg: LgConfig,
    expected: Seq16,
    /// Slots from `expected` on; the front is always `Missing` when non-empty.
    window: VecDeque<Slot<T>>,
    held: u64,
    deliver: VecDeque<T>,
    losses: VecDeque<(Seq16, u16)>,
    /// Open holes (first seq, size) in order; filled or passed ones are dropped when met.
    open: VecDeque<(Seq16, u16)>,
    /// Which open hole the next repeated notification names (round robin).
    cursor: usize,
    /// Fixed-timer (shared) links: packets received and not yet acknowledged one by one.
    to_ack: VecDeque<Seq16>,
    ack_pending: bool,
    stats: ReceiverStats,
}

impl<T> LgReceiver<T> {
    /// A receiver expecting sequence number 0; fails on an invalid configuration.
    pub fn new(cfg: LgConfig) -> Result<Self, LgConfigError> {
        cfg.validate()?;
        Ok(LgReceiver {
            cfg,
            expected: Seq16(0),
            window: VecDeque::new(),
            held: 0,
            deliver: VecDeque::new(),
            losses: VecDeque::new(),
            open: VecDeque::new(),
            cursor: 0,
            to_ack: VecDeque::new(),
            ack_pending: false,
            stats: ReceiverStats::default(),
        })
    }

    /// Whether this is a shared link: per-packet ACKs, no loss notifications (module docs, "Loss
    /// detection").
    fn shared(&self) -> bool {
        self.cfg.fixed_timeout.is_some()
    }

    /// Handles a data packet (original or retransmitted copy).
    pub fn on_receive(&mut self, now: Instant, seq: Seq16, item: T) {
        self.stats.received += 1;
        self.ack_pending = true;
        let off = seq.diff(self.expected);
        if self.shared() && off < i32::from(self.cfg.max_window) {
            // Acknowledged one by one; a copy received again is acknowledged again (the first ACK
            // may have been lost).
            self.to_ack.push_back(seq);
        }
        if off < 0 {
            self.stats.duplicates += 1;
        } else if off >= i32::from(self.cfg.max_window) {
            self.stats.out_of_window += 1;
        } else {
            let off = off as usize;
            self.open_holes(now, off);
            if self.window.len() == off {
                self.window.push_back(Slot::Missing(now));
            }
            match self.window[off] {
                Slot::Missing(_) if self.cfg.ordered => {
                    self.window[off] = Slot::Held(item);
                    self.held += 1;
                    self.stats.max_held = self.stats.max_held.max(self.held);
                }
                Slot::Missing(_) => {
                    // Unordered mode: released at once (REFERENCE.md, "optional ordered mode").
                    self.window[off] = Slot::Done;
                    self.deliver.push_back(item);
                    self.stats.delivered += 1;
                }
                _ => self.stats.duplicates += 1,
            }
            self.advance();
        }
        self.renotify();
    }

    /// Handles a dummy carrying `next`, the sender's next unused sequence number: everything before
    /// it was sent, so anything missing there is a (tail) loss.
    pub fn on_dummy(&mut self, now: Instant, next: Seq16) {
        self.stats.dummies += 1;
        self.ack_pending = true;
        let off = next.diff(self.expected);
        if off > 0 && off <= i32::from(self.cfg.max_window) {
            self.open_holes(now, off as usize);
        }
        self.renotify();
    }

    /// Marks slots up to `off` (exclusive) that were never seen as missing and notifies the new hole.
    fn open_holes(&mut self, now: Instant, off: usize) {
        let len = self.window.len();
        if off > len {
            let first = self.expected.plus(len as u16);
            let size = (off - len) as u16;
            self.window.extend((len..off).map(|_| Slot::Missing(now)));
            if !self.shared() {
                self.losses.push_back((first, size));
                self.open.push_back((first, size));
            }
            self.stats.holes += 1;
        }
    }

    /// Whether `seq` is an open hole.
    fn missing(&self, seq: Seq16) -> bool {
        let off = seq.diff(self.expected);
        off >= 0 && matches!(self.window.get(off as usize), Some(Slot::Missing(_)))
    }

    /// While holes are open and no fresh notification is queued, the ACK repeats one of them, in
    /// turn, so that a lost notification is repaired by a later one whichever hole it named (the
    /// sender's 1-RTT guard filters repeats). Repeating only the head hole would leave a later hole
    /// whose notification was lost unrepaired until every hole before it is.
    fn renotify(&mut self) {
        if !self.losses.is_empty() || self.shared() {
            return;
        }
        while !self.open.is_empty() {
            if self.cursor >= self.open.len() {
                self.cursor = 0;
            }
            let (first, n) = self.open[self.cursor];
            let Some(k) = (0..n).find(|&k| self.missing(first.plus(k))) else {
                // Filled, or given up by the hole timeout.
                self.open.remove(self.cursor);
                continue;
            };
            let start = first.plus(k);
            let run = (k..n).take_while(|&j| self.missing(first.plus(j))).count() as u16;
            self.open[self.cursor] = (start, n - k);
            self.losses.push_back((start, run));
            self.cursor += 1;
            return;
        }
    }

    /// Releases the in-order prefix.
    fn advance(&mut self) {
        while let Some(front) = self.window.front() {
            if matches!(front, Slot::Missing(_)) {
                break;
            }
            if let Some(Slot::Held(item)) = self.window.pop_front() {
                self.held -= 1;
                self.deliver.push_back(item);
                self.stats.delivered += 1;
            }
            self.expected = self.expected.next();
        }
    }

    /// Next ACK to send; each one carries at most one loss notification, or on a shared link the one
    /// packet it acknowledges.
    pub fn poll_ack(&mut self) -> Option<LgAck> {
        let loss = self.losses.pop_front();
        let received = if loss.is_none() { self.to_ack.pop_front() } else { None };
        if loss.is_none() && received.is_none() && !self.ack_pending {
            return None;
        }
        if self.losses.is_empty() && self.to_ack.is_empty() {
            self.ack_pending = false;
        }
        self.stats.acks += 1;
        if loss.is_some() {
            self.stats.notifications += 1;
        }
        Some(LgAck { leading_ack: self.expected.plus(u16::MAX), loss, received })
    }

    /// Next packet for the host (in order in ordered mode).
    pub fn poll_deliver(&mut self) -> Option<T> {
        self.deliver.pop_front()
    }

    /// When the oldest open hole will be given up.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.window.front() {
            Some(Slot::Missing(t)) => Some(*t + self.cfg.hole_timeout),
            _ => None,
        }
    }

    /// Gives up holes older than `hole_timeout`, releasing what they held back; the leading ACK moves.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&Slot::Missing(t)) = self.window.front() {
            if t + self.cfg.hole_timeout > now {
                break;
            }
            self.window.pop_front();
            self.expected = self.expected.next();
            self.stats.skipped += 1;
            self.ack_pending = true;
            self.advance();
        }
    }

    /// The link changed (no handover awareness): held packets are discarded and the receiver expects
    /// sequence number 0 again, like a fresh sender. Returns how many held packets were dropped.
    pub fn reset(&mut self) -> usize {
        let n = self.held as usize;
        self.window.clear();
        self.held = 0;
        self.losses.clear();
        self.open.clear();
        self.cursor = 0;
        self.to_ack.clear();
        self.ack_pending = false;
        self.expected = Seq16(0);
        n
    }

    /// The leading ACK (highest in-order sequence number received).
    pub fn leading_ack(&self) -> Seq16 {
        self.expected.plus(u16::MAX)
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }
}
