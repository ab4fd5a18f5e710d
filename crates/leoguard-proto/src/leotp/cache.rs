//! A mid node's Data cache (REFERENCE.md "LEOTP": per node, keyed by flow and 4096-byte block, LRU,
//! at most 20 000 blocks). Each block records which of its bytes it holds (Data ranges need not be
//! block-aligned) and, when payloads are carried, the bytes themselves. Slots are reused after
//! eviction, so a full cache allocates nothing.

use super::FlowKey;
use leoguard_core::keys::KeyHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Block size, bytes.
pub const BLOCK: u32 = 4096;
/// Distinct byte runs one block records; a further disjoint run is not recorded (rare: Data of a
/// flow arrives in MSS-aligned pieces, at most 4 runs per block).
const RUNS: usize = 6;
const NIL: u32 = u32::MAX;

/// The byte runs a block holds, offsets within the block, sorted and disjoint.
#[derive(Clone, Copy, Debug, Default)]
struct Runs {
    runs: [(u16, u16); RUNS],
    n: u8,
}

impl Runs {
    /// Records `[s, e)` (e <= 4096), merging with what touches it; false if it did not fit.
    fn insert(&mut self, s: u16, e: u16) -> bool {
        let (mut s, mut e) = (s, e);
        let mut out = [(0u16, 0u16); RUNS + 1];
        let mut k = 0;
        let mut placed = false;
        for &(a, b) in &self.runs[..self.n as usize] {
            if b < s {
                out[k] = (a, b);
                k += 1;
            } else if a > e {
                if !placed {
                    out[k] = (s, e);
                    k += 1;
                    placed = true;
                }
                out[k] = (a, b);
                k += 1;
            } else {
                s = s.min(a);
                e = e.max(b);
            }
        }
        if !placed {
            out[k] = (s, e);
            k += 1;
        }
        if k > RUNS {
            return false;
        }
        self.runs[..k].copy_from_slice(&out[..k]);
        self.n = k as u8;
        true
    }

    fn covers(&self, s: u16, e: u16) -> bool {
        self.runs[..self.n as usize].iter().any(|&(a, b)| a <= s && e <= b)
    }
}

#[derive(Clone, Debug)]
struct Slot {
    flow: FlowKey,
    block: u32,
    prev: u32,
    next: u32,
    runs: Runs,
    data: Vec<u8>,
}

/// The LRU block cache.
#[derive(Clone, Debug)]
pub struct BlockCache {
    map: HashMap<(FlowKey, u32), u32, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Slot>,
    capacity: u32,
    /// Most recently used slot.
    head: u32,
    /// Least recently used slot.
    tail: u32,
    carry: bool,
    /// Blocks evicted to make room.
    pub evictions: u64,
}

impl BlockCache {
    /// An empty cache of `capacity` blocks (> 0; the config checks it), storing bytes if `carry`.
    pub fn new(capacity: u32, carry: bool) -> BlockCache {
        BlockCache {
            map: HashMap::default(),
            slots: Vec::new(),
            capacity: capacity.max(1),
            head: NIL,
            tail: NIL,
            carry,
            evictions: 0,
        }
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No block held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.slots[i as usize].prev, self.slots[i as usize].next);
        if p == NIL {
            self.head = n;
        } else {
            self.slots[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.slots[n as usize].prev = p;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    /// The slot of (flow, block), created (evicting the LRU block when full) if absent.
    fn slot(&mut self, flow: FlowKey, block: u32) -> u32 {
        if let Some(&i) = self.map.get(&(flow, block)) {
            self.touch(i);
            return i;
        }
        let i = if (self.slots.len() as u32) < self.capacity {
            self.slots.push(Slot {
                flow,
                block,
                prev: NIL,
                next: NIL,
                runs: Runs::default(),
                data: if self.carry { vec![0; BLOCK as usize] } else { Vec::new() },
            });
            self.slots.len() as u32 - 1
        } else {
            let i = self.tail;
            self.unlink(i);
            let old = &self.slots[i as usize];
            self.map.remove(&(old.flow, old.block));
            self.evictions += 1;
            let s = &mut self.slots[i as usize];
            s.flow = flow;
            s.block = block;
            s.runs = Runs::default();
            i
        };
        self.map.insert((flow, block), i);
        self.push_front(i);
        i
    }

    /// Caches Data `[start, start + len)` of `flow`; `payload` is its bytes when carried (else
    /// ignored).
    pub fn insert(&mut self, flow: FlowKey, start: u32, len: u32, payload: &[u8]) {
        let end = start as u64 + len as u64;
        let mut at = start as u64;
        while at < end {
            let block = (at / BLOCK as u64) as u32;
            let base = block as u64 * BLOCK as u64;
            let e = end.min(base + BLOCK as u64);
            let i = self.slot(flow, block) as usize;
            let (s16, e16) = ((at - base) as u16, (e - base) as u16);
            let slot = &mut self.slots[i];
            if slot.runs.insert(s16, e16) && self.carry {
                let off = (at - start as u64) as usize;
                if let Some(src) = payload.get(off..off + (e - at) as usize) {
                    slot.data[s16 as usize..e16 as usize].copy_from_slice(src);
                }
            }
            at = e;
        }
    }

    /// Whether every byte of `[start, end)` of `flow` is cached (marks the blocks used).
    pub fn covers(&mut self, flow: FlowKey, start: u32, end: u32) -> bool {
        let mut at = start as u64;
        while at < end as u64 {
            let block = (at / BLOCK as u64) as u32;
            let base = block as u64 * BLOCK as u64;
            let e = (end as u64).min(base + BLOCK as u64);
            let Some(&i) = self.map.get(&(flow, block)) else { return false };
            if !self.slots[i as usize].runs.covers((at - base) as u16, (e - base) as u16) {
                return false;
            }
            self.touch(i);
            at = e;
        }
        true
    }

    /// Appends the cached bytes of `[start, end)` to `out` (call after [`BlockCache::covers`]; bytes
    /// not cached, or payloads not carried, append nothing).
    pub fn read(&self, flow: FlowKey, start: u32, end: u32, out: &mut Vec<u8>) {
        if !self.carry {
            return;
        }
        let mut at = start as u64;
        while at < end as u64 {
            let block = (at / BLOCK as u64) as u32;
            let base = block as u64 * BLOCK as u64;
            let e = (end as u64).min(base + BLOCK as u64);
            let Some(&i) = self.map.get(&(flow, block)) else { return };
            out.extend_from_slice(&self.slots[i as usize].data[(at - base) as usize..(e - base) as usize]);
            at = e;
        }
    }
}
