//! Unit newtypes (STYLE.md rule 2): byte counts and bit rates never travel as bare integers.

use crate::time::Duration;

/// A number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

/// A bit rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bps(pub u64);

impl Bps {
    /// `n` megabits per second.
    pub const fn mbps(n: u64) -> Bps {
        Bps(n * 1_000_000)
    }

    /// `n` gigabits per second.
    pub const fn gbps(n: u64) -> Bps {
        Bps(n * 1_000_000_000)
    }

    /// Time to serialise `b` at this rate, rounded up to the next nanosecond. Zero rate gives `None`.
    pub fn transmission_time(self, b: Bytes) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        // In 64 bits whenever the product fits (any packet: up to 2.3 GB); 128-bit division is a
        // library call that showed in the simulator's profile. The same quotient either way.
        if let Some(bits) = b.0.checked_mul(8_000_000_000) {
            return Some(Duration(bits.div_ceil(self.0)));
        }
        let bits = u128::from(b.0) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.0));
        Some(Duration(u64::try_from(ns).unwrap_or(u64::MAX)))
    }

    /// Bytes that this rate carries in `d` (rounded down).
    pub fn bytes_in(self, d: Duration) -> Bytes {
        if let Some(bits) = self.0.checked_mul(d.0) {
            return Bytes(bits / 8 / 1_000_000_000);
        }
        let b = u128::from(self.0) * u128::from(d.0) / 8 / 1_000_000_000;
        Bytes(u64::try_from(b).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_time() {
        // 1500 B at 100 Mbit/s = 120 us exactly.
        assert_eq!(Bps::mbps(100).transmission_time(Bytes(1500)), Some(Duration::from_micros(120)));
        // Rounded up: 1 B at 3 bit/s = 8/3 s.
        assert_eq!(Bps(3).transmission_time(Bytes(1)), Some(Duration(2_666_666_667)));
        assert_eq!(Bps(0).transmission_time(Bytes(1)), None);
        assert_eq!(Bps::gbps(1).bytes_in(Duration::from_millis(1)), Bytes(125_000));
    }

    /// The 64-bit fast paths give the 128-bit results, on both sides of where the product overflows.
    #[test]
    fn fast_paths_equal_wide_arithmetic() {
        let wide_tx = |r: u64, b: u64| {
            let ns = (u128::from(b) * 8_000_000_000).div_ceil(u128::from(r));
            Duration(u64::try_from(ns).unwrap_or(u64::MAX))
        };
        let wide_bytes =
            |r: u64, d: u64| Bytes(u64::try_from(u128::from(r) * u128::from(d) / 8_000_000_000).unwrap_or(u64::MAX));
        let edge = u64::MAX / 8_000_000_000;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut values = vec![0, 1, 7, 1500, 9000, edge - 1, edge, edge + 1, u64::MAX / 2, u64::MAX];
        values.extend((0..200).map(|_| next() >> (next() % 64)));
        for &r in values.iter().filter(|&&r| r > 0) {
            for &v in &values {
                assert_eq!(Bps(r).transmission_time(Bytes(v)), Some(wide_tx(r, v)), "rate {r} bytes {v}");
                assert_eq!(Bps(r).bytes_in(Duration(v)), wide_bytes(r, v), "rate {r} duration {v}");
            }
        }
    }
}
