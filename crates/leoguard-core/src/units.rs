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
        let bits = u128::from(b.0) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.0));
        Some(Duration(u64::try_from(ns).unwrap_or(u64::MAX)))
    }

    /// Bytes that this rate carries in `d` (rounded down).
    pub fn bytes_in(self, d: Duration) -> Bytes {
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
}
