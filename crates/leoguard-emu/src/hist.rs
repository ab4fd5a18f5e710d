//! A log-linear histogram of non-negative integers (nanoseconds): 1/64 relative precision, fixed
//! memory, no allocation per sample, so the data plane can record every packet.

/// Sub-buckets per power of two (relative precision 1/SUB).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: values below SUB exactly, then SUB sub-buckets for each power of two up to 2^63.
const BUCKETS: usize = (SUB as usize) * (64 - SUB_BITS as usize + 1);

/// The histogram.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; BUCKETS], n: 0, max: 0, sum: 0 }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = exp - SUB_BITS;
    let mant = (v >> shift) - SUB; // 0..SUB
    ((shift as u64 + 1) * SUB + mant) as usize
}

/// The smallest value of bucket `i`, and its width.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let shift = i / SUB - 1;
    let mant = i % SUB;
    ((SUB + mant) << shift, 1 << shift)
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.n += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest value recorded (exact).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The mean (exact), or 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The q-quantile (0 <= q <= 1): the middle of the bucket holding it, at most the exact maximum;
    /// `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, w) = bounds(i);
                return Some((lo + w / 2).min(self.max));
            }
        }
        Some(self.max)
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.n += o.n;
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_line() {
        let mut last_end = 0;
        for i in 0..BUCKETS - 1 {
            let (lo, w) = bounds(i);
            assert_eq!(lo, last_end, "bucket {i} starts where the previous one ends");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo + w - 1), i);
            last_end = lo + w;
        }
    }

    #[test]
    fn quantiles_are_within_the_relative_precision() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        for (q, exact) in [(0.5, 50_000_000.0), (0.99, 99_000_000.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!((got - exact).abs() / exact < 1.0 / 64.0, "q{q}: {got} vs {exact}");
        }
        assert_eq!(h.max(), 100_000_000);
        assert_eq!(h.quantile(1.0), Some(100_000_000));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
