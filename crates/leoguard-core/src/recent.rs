//! The last `window` distinct keys seen, for duplicate suppression on per-packet paths.
//!
//! Packet identities are `(flow << 16) | sequence`, so the keys live at any moment cluster in a few
//! runs of consecutive integers. A hash set of single keys spreads them over a table of the window's
//! size (about 256 KiB for 16 384 keys) and pays a cache miss on nearly every insert, removal and
//! lookup; here keys are grouped into blocks of 512 consecutive integers, one bitmap of a cache line
//! each, so a bulk flow's window is a few dozen blocks and a lookup touches one small table entry.
//! Keys that do not cluster still work (one block each), at the cost of a block per key.

use crate::keys::KeyMap;
use std::collections::VecDeque;

const BLOCK_BITS: u32 = 9;
const WORDS: usize = (1 << BLOCK_BITS) / 64;

#[derive(Clone, Debug, Default)]
struct Block {
    bits: [u64; WORDS],
    live: u16,
}

/// The set of the most recent `window` distinct keys inserted (older ones are forgotten in insertion
/// order).
#[derive(Clone, Debug)]
pub struct RecentKeys {
    blocks: KeyMap<Block>,
    order: VecDeque<u64>,
    window: usize,
}

#[inline]
fn split(key: u64) -> (u64, usize, u64) {
    let bit = (key & ((1 << BLOCK_BITS) - 1)) as usize;
    (key >> BLOCK_BITS, bit / 64, 1 << (bit % 64))
}

impl RecentKeys {
    /// An empty set remembering at most `window` keys (at least 1).
    pub fn new(window: usize) -> RecentKeys {
        RecentKeys { blocks: KeyMap::default(), order: VecDeque::new(), window: window.max(1) }
    }

    /// Whether `key` is among the remembered keys.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        let (b, w, m) = split(key);
        self.blocks.get(&b).is_some_and(|blk| blk.bits[w] & m != 0)
    }

    /// Remembers `key`; false if it was already remembered (nothing changes then). Beyond the window,
    /// the oldest key is forgotten.
    #[inline]
    pub fn insert(&mut self, key: u64) -> bool {
        let (b, w, m) = split(key);
        let blk = self.blocks.entry(b).or_default();
        if blk.bits[w] & m != 0 {
            return false;
        }
        blk.bits[w] |= m;
        blk.live += 1;
        self.order.push_back(key);
        if self.order.len() > self.window {
            if let Some(old) = self.order.pop_front() {
                self.forget(old);
            }
        }
        true
    }

    fn forget(&mut self, key: u64) {
        let (b, w, m) = split(key);
        if let Some(blk) = self.blocks.get_mut(&b) {
            blk.bits[w] &= !m;
            blk.live -= 1;
            if blk.live == 0 {
                self.blocks.remove(&b);
            }
        }
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream;
    use std::collections::HashSet;

    /// The same answers as a plain hash set with a FIFO of insertions, on clustered and on scattered
    /// keys, across block boundaries and evictions.
    #[test]
    fn agrees_with_a_hash_set_and_fifo() {
        let mut rng = stream(7, "recent-keys");
        for window in [1usize, 5, 600, 4096] {
            let mut ours = RecentKeys::new(window);
            let mut set = HashSet::new();
            let mut fifo = VecDeque::new();
            for i in 0..40_000u64 {
                let r = rng.next_u64();
                let key = match r % 4 {
                    0 => r >> 8,                                 // scattered
                    1 => (3 << 16) | (i & 0xFFFF),               // a flow, in order
                    _ => (5 << 16) | ((i + (r >> 60)) & 0xFFFF), // a flow, with repeats nearby
                };
                assert_eq!(ours.contains(key), set.contains(&key), "contains {key} at {i}");
                let fresh = set.insert(key);
                if fresh {
                    fifo.push_back(key);
                    if fifo.len() > window {
                        set.remove(&fifo.pop_front().unwrap());
                    }
                }
                assert_eq!(ours.insert(key), fresh, "insert {key} at {i}");
                assert_eq!(ours.len(), set.len());
            }
            // Every block of forgotten keys is freed.
            let live: u32 = ours.blocks.values().map(|b| u32::from(b.live)).sum();
            assert_eq!(live as usize, ours.len());
            assert!(ours.blocks.values().all(|b| b.live > 0));
        }
    }
}
