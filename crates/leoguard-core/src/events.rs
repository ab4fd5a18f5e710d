//! The event queue both engines run on (the simulator's virtual clock, the emulator's data plane):
//! events in (time, order of scheduling) order, FIFO among events of one time.
//!
//! Each heap entry is one `u128`, the time in the high 64 bits, then a sequence number (38 bits) and
//! the event's index in a slab (26 bits): a sift compares one integer and moves 16 bytes, whatever
//! the event's size. Two heaps share that order and `pop` takes the earlier of their tops, so which
//! heap holds an event never changes the order: events due within `horizon` of the clock go to
//! `near`, later ones (pre-scheduled controls, retransmission timers mostly superseded before they
//! fire) to `far`, so the busy heap holds the few per-link events in flight, a few levels deep.

use crate::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bits of an entry's sequence number; the slab index has the rest of the low 64.
const SEQ_BITS: u32 = 38;
const IDX_BITS: u32 = 64 - SEQ_BITS;
const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// Pushes per adaptation of the horizon.
const ADAPT_WINDOW: u32 = 1024;

type Heap = BinaryHeap<Reverse<u128>>;

/// Events of type `E` by time.
#[derive(Debug)]
pub struct EventQueue<E> {
    near: Heap,
    far: Heap,
    /// The events, by slab index; `free` lists the unused indices.
    slab: Vec<E>,
    free: Vec<u32>,
    seq: u64,
    /// Time of the latest event popped: the queue's clock.
    clock: u64,
    /// Events due at least this far (ns) after `clock` go to `far`; adapted as the run goes.
    horizon: u64,
    /// Pushes since the last adaptation, and how many of them went to `far`.
    window_pushes: u32,
    window_far: u32,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            near: Heap::new(),
            far: Heap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            clock: 0,
            horizon: 1 << 20, // about 1 ms
            window_pushes: 0,
            window_far: 0,
        }
    }
}

#[inline]
fn time_of(e: u128) -> u64 {
    (e >> 64) as u64
}

#[inline]
fn idx_of(e: u128) -> usize {
    (e as u64 & IDX_MASK) as usize
}

impl<E: Copy> EventQueue<E> {
    /// Schedules `ev` at `at`, after every event already scheduled at `at`.
    pub fn push(&mut self, at: Instant, ev: E) {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = ev;
                i
            }
            None => {
                self.slab.push(ev);
                (self.slab.len() - 1) as u32
            }
        };
        // 2^26 events pending at once is 1 GiB of 16-byte events: checked, not assumed.
        assert!(u64::from(idx) <= IDX_MASK, "more than 2^{IDX_BITS} events pending");
        if self.seq >> SEQ_BITS != 0 {
            self.renumber();
        }
        let e = Reverse((u128::from(at.0) << 64) | u128::from(self.seq << IDX_BITS | u64::from(idx)));
        self.seq += 1;
        if at.0.saturating_sub(self.clock) < self.horizon {
            self.near.push(e);
        } else {
            self.far.push(e);
            self.window_far += 1;
        }
        self.window_pushes += 1;
        if self.window_pushes == ADAPT_WINDOW {
            self.adapt();
        }
    }

    /// Widens the horizon while many events take the far heap (they would be sifted through a large
    /// heap), narrows it while almost none do and the near heap is large. Only speed depends on it.
    fn adapt(&mut self) {
        let (pushes, far) = (self.window_pushes, self.window_far);
        if far * 8 > pushes {
            self.horizon = self.horizon.saturating_mul(2).max(1);
        } else if far * 64 < pushes && self.near.len() > 64 + 4 * self.far.len() {
            self.horizon /= 2;
        }
        self.window_pushes = 0;
        self.window_far = 0;
    }

    /// After 2^38 events (hours at tens of millions a second) the sequence numbers restart from 0
    /// in the order the entries have, across both heaps: no tie changes its order.
    fn renumber(&mut self) {
        let mut all: Vec<(u128, bool)> = self.near.drain().map(|Reverse(e)| (e, false)).collect();
        all.extend(self.far.drain().map(|Reverse(e)| (e, true)));
        all.sort_unstable();
        for (seq, (e, far)) in all.into_iter().enumerate() {
            let e = Reverse((e >> 64) << 64 | u128::from((seq as u64) << IDX_BITS | idx_of(e) as u64));
            if far {
                self.far.push(e);
            } else {
                self.near.push(e);
            }
        }
        self.seq = (self.near.len() + self.far.len()) as u64;
    }

    /// Whether the far heap holds the earliest event.
    #[inline]
    fn far_first(&self) -> bool {
        match (self.near.peek(), self.far.peek()) {
            (Some(n), Some(f)) => f.0 < n.0,
            (None, f) => f.is_some(),
            (Some(_), None) => false,
        }
    }

    #[inline]
    fn top(&self) -> Option<u128> {
        if self.far_first() { self.far.peek() } else { self.near.peek() }.map(|r| r.0)
    }

    /// The earliest event, taken: (time, event).
    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let Reverse(e) = if self.far_first() { self.far.pop() } else { self.near.pop() }?;
        self.clock = time_of(e);
        let idx = idx_of(e);
        self.free.push(idx as u32);
        Some((Instant(time_of(e)), self.slab[idx]))
    }

    /// Time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<Instant> {
        self.top().map(|e| Instant(time_of(e)))
    }

    /// The earliest event, left in place.
    #[inline]
    pub fn peek(&self) -> Option<&E> {
        self.top().map(|e| &self.slab[idx_of(e)])
    }

    /// Pending events.
    pub fn len(&self) -> usize {
        self.near.len() + self.far.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.near.is_empty() && self.far.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<E: Copy>(q: &mut EventQueue<E>) -> Vec<(u64, E)> {
        std::iter::from_fn(|| q.pop().map(|(t, e)| (t.0, e))).collect()
    }

    #[test]
    fn events_come_out_by_time_then_in_the_order_they_were_scheduled() {
        let mut q = EventQueue::default();
        for (at, id) in [(5, 'a'), (3, 'b'), (5, 'c'), (1, 'd'), (3, 'e'), (5, 'f')] {
            q.push(Instant(at), id);
        }
        assert_eq!(q.peek(), Some(&'d'));
        assert_eq!(drain(&mut q), [(1, 'd'), (3, 'b'), (3, 'e'), (5, 'a'), (5, 'c'), (5, 'f')]);
    }

    #[test]
    fn near_and_far_events_keep_one_order() {
        // A narrow horizon sends most events far; ties across the two heaps still come out in the
        // order they were scheduled, and the queue's order equals a plain sort by (time, order).
        let mut q = EventQueue { horizon: 10, ..EventQueue::default() };
        let mut want = Vec::new();
        let mut x = 12345u64;
        for i in 0..5000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = (x >> 33) % 200 + u64::from(i / 50) * 7;
            q.push(Instant(at), i);
            want.push((at, i));
            if i % 3 == 0 {
                let (t, e) = q.pop().unwrap();
                let k = want.iter().position(|&w| w == (t.0, e)).unwrap();
                let earliest = want.iter().min_by_key(|w| (w.0, w.1)).copied().unwrap();
                assert_eq!((t.0, e), earliest);
                want.remove(k);
            }
        }
        want.sort();
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn renumbering_keeps_the_order_of_ties() {
        let mut q = EventQueue { horizon: 3, ..EventQueue::default() };
        q.seq = (1 << SEQ_BITS) - 2;
        for i in 0..6u32 {
            q.push(Instant(u64::from(7 - i % 2) + u64::from(i / 4) * 10), i);
        }
        assert!(q.seq < 10, "sequence numbers restarted");
        assert_eq!(drain(&mut q), [(6, 1), (6, 3), (7, 0), (7, 2), (16, 5), (17, 4)]);
    }

    #[test]
    fn slots_are_reused() {
        let mut q = EventQueue::default();
        for round in 0..100u64 {
            q.push(Instant(round), round);
            q.push(Instant(round), round + 1);
            assert_eq!(q.pop(), Some((Instant(round), round)));
            assert_eq!(q.pop(), Some((Instant(round), round + 1)));
        }
        assert_eq!(q.slab.len(), 2);
        assert!(q.is_empty());
    }
}
