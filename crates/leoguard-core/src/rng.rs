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

/// A key for counter-based draws indexed by time (common random numbers): `uniform(index, draw)` is a
/// pure function of the key and its arguments, so a process drawn this way (a loss model's per-second
/// states, say) is the same whatever else happens in the run: other traffic, another scheme, another
/// engine. Per-packet randomness stays in the [`RngStream`], which is consumed in packet order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrawKey(u64);

impl DrawKey {
    /// The key for `component` (a stable label) in run `seed`.
    pub fn new(seed: u64, component: &str) -> Self {
        DrawKey::of_stream(&stream(seed, component))
    }

    /// The key belonging to a stream, read off its state without advancing it: a link's key is a pure
    /// function of the link's stream label and seed when taken at the link's creation.
    pub fn of_stream(s: &RngStream) -> Self {
        DrawKey(splitmix(s.clone().next_u64() ^ 0xD1B5_4A32_D192_ED03))
    }

    /// An independent key for part `i` of a compound (a composite loss model's `i`-th component).
    pub fn part(self, i: u64) -> Self {
        DrawKey(splitmix(self.0 ^ splitmix(i ^ 0x8CB9_2BA7_2F3D_8DD7)))
    }

    /// Draw number `draw` at time index `index`: a uniform float in [0, 1) with 53 random bits.
    pub fn uniform(self, index: u64, draw: u64) -> f64 {
        let h = splitmix(self.0 ^ splitmix(index ^ splitmix(draw.wrapping_add(0x2545_F491_4F6C_DD1D))));
        (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
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
    fn draw_keys_are_pure_independent_and_uniform() {
        let a = DrawKey::new(7, "link/0-1/0");
        assert_eq!(a, DrawKey::new(7, "link/0-1/0"));
        assert_ne!(a, DrawKey::new(8, "link/0-1/0"));
        assert_ne!(a, DrawKey::new(7, "link/1-0/1"));
        assert_ne!(a.part(0), a.part(1));
        // Reading the key does not advance the stream.
        let s = stream(7, "link/0-1/0");
        assert_eq!(DrawKey::of_stream(&s), a);
        assert_eq!(s.clone().next_u64(), stream(7, "link/0-1/0").next_u64());
        assert_eq!(a.uniform(5, 1), a.uniform(5, 1));
        assert_ne!(a.uniform(5, 1), a.uniform(5, 0));
        assert_ne!(a.uniform(5, 1), a.uniform(6, 1));
        // Mean and lag-1 correlation over consecutive indices (what a per-second chain consumes).
        let n = 200_000u64;
        let u: Vec<f64> = (0..n).map(|i| a.uniform(i, 0)).collect();
        assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = u.iter().sum::<f64>() / n as f64;
        let cov = u.windows(2).map(|w| (w[0] - 0.5) * (w[1] - 0.5)).sum::<f64>() / (n - 1) as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
        // Var(U) = 1/12; the lag-1 correlation's SE is ~1/sqrt(n) = 0.0022.
        assert!((cov * 12.0).abs() < 0.01, "lag-1 correlation {}", cov * 12.0);
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
