//! Injected randomness (STYLE.md rule 3): every component draws from its own stream, derived from the
//! run seed and a stable component label, so adding a component never perturbs another one's draws.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A reproducible random stream (PCG-64 MCG, pinned by the workspace lock file).
#[derive(Clone, Debug)]
pub struct RngStream {
    inner: Pcg64Mcg,
}

/// SplitMix64 finaliser: a cheap, well-mixed hash step used to derive stream seeds.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream for `component` (any stable label, e.g. "orbit/handover/New York") in run `seed`.
pub fn stream(seed: u64, component: &str) -> RngStream {
    // FNV-1a over the label, then mixed with the seed: stable across platforms and Rust versions.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in component.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    let a = splitmix(seed ^ h);
    let b = splitmix(a ^ 0x5851_F42D_4C95_7F2D);
    let seed_bytes = ((u128::from(a) << 64) | u128::from(b)).to_le_bytes();
    RngStream { inner: Pcg64Mcg::from_seed(seed_bytes) }
}

impl RngStream {
    /// A uniformly distributed `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform float in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.inner.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform float in [lo, hi).
    pub fn uniform_range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4).map(|_| 0).scan(stream(7, "x"), |s, _| Some(s.next_u64())).collect();
        let b: Vec<u64> = (0..4).map(|_| 0).scan(stream(7, "x"), |s, _| Some(s.next_u64())).collect();
        let c: Vec<u64> = (0..4).map(|_| 0).scan(stream(7, "y"), |s, _| Some(s.next_u64())).collect();
        let d: Vec<u64> = (0..4).map(|_| 0).scan(stream(8, "x"), |s, _| Some(s.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn uniform_is_in_range_with_plausible_mean() {
        let mut s = stream(1, "mean");
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let u = s.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        let mean = sum / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }
}
