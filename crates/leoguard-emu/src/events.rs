//! The data plane's event queue: events in (model time, order of scheduling) order, FIFO among
//! events of one time. Each heap entry is one `u128` (time, sequence, event index), so a sift compares
//! one integer instead of a tuple; the events themselves sit in a slab whose slots are reused.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bits of an entry's sequence number; the event index has the rest of the low 64.
const SEQ_BITS: u32 = 38;
const KEY_BITS: u32 = 64 - SEQ_BITS;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;

/// Events by time; `E` is the event (small and `Copy`).
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Reverse<u128>>,
    evs: Vec<E>,
    free: Vec<u32>,
    seq: u64,
}

impl<E: Copy> EventQueue<E> {
    pub(crate) fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), evs: Vec::new(), free: Vec::new(), seq: 0 }
    }

    /// Schedules `ev` at `at`, after every event already scheduled at `at`.
    pub(crate) fn push(&mut self, at: u64, ev: E) {
        let key = match self.free.pop() {
            Some(k) => {
                self.evs[k as usize] = ev;
                k
            }
            None => {
                self.evs.push(ev);
                (self.evs.len() - 1) as u32
            }
        };
        // 2^26 events outstanding at once: more than a pool of 2^22 packets, one timer per node and
        // event per link can make (the index is checked, not assumed).
        assert!(u64::from(key) <= KEY_MASK, "more than 2^{KEY_BITS} events outstanding");
        if self.seq >> SEQ_BITS != 0 {
            self.renumber();
        }
        self.heap.push(Reverse((u128::from(at) << 64) | u128::from(self.seq << KEY_BITS | u64::from(key))));
        self.seq += 1;
    }

    /// After 2^38 events (hours at millions a second) the sequence numbers restart from 0, in the
    /// order the entries have: no tie changes its order.
    fn renumber(&mut self) {
        let mut all = std::mem::take(&mut self.heap).into_sorted_vec();
        all.reverse(); // ascending (the entries are `Reverse`d)
        self.seq = 0;
        for Reverse(e) in all {
            let key = (e as u64) & KEY_MASK;
            self.heap.push(Reverse((e >> 64) << 64 | u128::from(self.seq << KEY_BITS | key)));
            self.seq += 1;
        }
    }

    /// The time of the next event.
    #[inline]
    pub(crate) fn next_at(&self) -> Option<u64> {
        self.heap.peek().map(|r| (r.0 >> 64) as u64)
    }

    /// The next event, without taking it.
    #[inline]
    pub(crate) fn peek(&self) -> Option<&E> {
        self.heap.peek().map(|r| &self.evs[(r.0 as u64 & KEY_MASK) as usize])
    }

    /// Takes the next event: (time, event).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse(e) = self.heap.pop()?;
        let key = (e as u64 & KEY_MASK) as u32;
        self.free.push(key);
        Some(((e >> 64) as u64, self.evs[key as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_the_order_they_were_scheduled() {
        let mut q = EventQueue::new();
        for (at, id) in [(5, 'a'), (3, 'b'), (5, 'c'), (1, 'd'), (3, 'e'), (5, 'f')] {
            q.push(at, id);
        }
        let mut out = Vec::new();
        while let Some(x) = q.pop() {
            out.push(x);
        }
        assert_eq!(out, [(1, 'd'), (3, 'b'), (3, 'e'), (5, 'a'), (5, 'c'), (5, 'f')]);
    }

    #[test]
    fn renumbering_keeps_the_order_of_ties() {
        let mut q = EventQueue::new();
        q.seq = (1 << SEQ_BITS) - 2;
        for i in 0..6u32 {
            q.push(u64::from(7 - i % 2), i);
        }
        assert!(q.seq < 10, "sequence numbers restarted");
        let out: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(out, [(6, 1), (6, 3), (6, 5), (7, 0), (7, 2), (7, 4)]);
    }

    #[test]
    fn slots_are_reused() {
        let mut q = EventQueue::new();
        for round in 0..100u64 {
            q.push(round, round);
            q.push(round, round + 1);
            assert_eq!(q.pop(), Some((round, round)));
            assert_eq!(q.pop(), Some((round, round + 1)));
        }
        assert_eq!(q.evs.len(), 2);
    }
}
