//! Virtual and real time as integer nanoseconds (STYLE.md rule 2: one time type, never floats as keys).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time: nanoseconds since the start of a run (or of the real-time engine's epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A non-negative span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Instant {
    /// Time zero of a run.
    pub const ZERO: Instant = Instant(0);

    /// Nanoseconds since time zero.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since time zero, as a float (for reports and orbit maths only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// The instant `secs` seconds after zero, rounded to the nearest nanosecond; negative clamps to zero.
    pub fn from_secs_f64(secs: f64) -> Instant {
        Instant(Duration::from_secs_f64(secs).0)
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` on overflow.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d.0).map(Instant)
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);

    /// `n` nanoseconds.
    pub const fn from_nanos(n: u64) -> Duration {
        Duration(n)
    }

    /// `n` microseconds.
    pub const fn from_micros(n: u64) -> Duration {
        Duration(n * 1_000)
    }

    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Duration {
        Duration(n * 1_000_000)
    }

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Duration {
        Duration(n * 1_000_000_000)
    }

    /// `secs` seconds rounded to the nearest nanosecond; negative or NaN clamps to zero.
    pub fn from_secs_f64(secs: f64) -> Duration {
        if secs.is_nan() || secs <= 0.0 {
            Duration(0)
        } else {
            Duration((secs * 1e9).round() as u64)
        }
    }

    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// Milliseconds as a float.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d.0)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d.0;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Panics in debug builds if `rhs` is later; use `saturating_duration_since` where that can happen.
    fn sub(self, rhs: Instant) -> Duration {
        Duration(self.0 - rhs.0)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0 + d.0)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.as_millis_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_round_trip_is_nanosecond_exact() {
        let t = Instant::from_secs_f64(12.345_678_901);
        assert_eq!(t.as_nanos(), 12_345_678_901);
        assert_eq!(Duration::from_secs_f64(-1.0), Duration::ZERO);
        assert_eq!(Duration::from_secs_f64(f64::NAN), Duration::ZERO);
    }

    #[test]
    fn arithmetic() {
        let t = Instant::ZERO + Duration::from_millis(15);
        assert_eq!(t - Instant(5_000_000), Duration::from_millis(10));
        assert_eq!(Instant(3).saturating_duration_since(Instant(9)), Duration::ZERO);
        assert!(Instant(u64::MAX).checked_add(Duration(1)).is_none());
    }
}
