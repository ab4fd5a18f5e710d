//! Hash sets and maps for integer keys (packet identities) on per-packet paths.
//!
//! std's default SipHash costs about as much as the rest of a hop's per-packet work; these use the
//! splitmix64 finaliser instead, which mixes a 64-bit key well enough for a hash table. It is not
//! keyed, so an adversary who picks the keys can force collisions: use it for keys the host derives
//! from validated fields, bounded in number, and never iterate it where order reaches the output.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for integer keys: the splitmix64 finaliser of what was written.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(17) ^ n;
    }
}

/// A set of integer keys with [`KeyHasher`].
pub type KeySet = HashSet<u64, BuildHasherDefault<KeyHasher>>;

/// A map from integer keys with [`KeyHasher`].
pub type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_keys_spread_over_buckets() {
        // Keys that differ in their low bits only (flow << 16 | seq) land in distinct low-bit buckets.
        let mut buckets = [0u32; 256];
        for flow in 0..4u64 {
            for seq in 0..1024u64 {
                let mut h = KeyHasher::default();
                h.write_u64((flow << 16) | seq);
                buckets[(h.finish() & 255) as usize] += 1;
            }
        }
        let (min, max) = (buckets.iter().min().copied().unwrap_or(0), buckets.iter().max().copied().unwrap_or(0));
        assert!(min >= 4 && max <= 32, "{min}..{max}");
        let mut s = KeySet::default();
        assert!(s.insert(7) && !s.insert(7) && s.contains(&7));
    }
}
