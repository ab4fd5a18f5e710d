//! Typed errors of the constellation engine; each names the offending field and value.

use thiserror::Error;

/// Everything that can go wrong when building or querying a constellation.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum OrbitError {
    /// A numeric parameter is outside its valid range.
    #[error("invalid {field} = {value}: {reason}")]
    InvalidParameter {
        /// Name of the field, as a user would write it (e.g. `altitude_km`).
        field: &'static str,
        /// The value given, rendered as text.
        value: String,
        /// What the valid range is.
        reason: &'static str,
    },
    /// A TLE file could not be used: malformed, an impossible orbit, or a satellite listed twice.
    #[error("{what} in {origin} at line {line}: {reason}")]
    Tle {
        /// What kind of fault: `malformed TLE`, `impossible orbit`, `duplicate satellite`, ...
        what: &'static str,
        /// Where the text came from, e.g. `file sats.tle` (see [`crate::tle::parse_tle`]).
        origin: String,
        /// 1-based line number in the file.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A TLE text without a single satellite.
    #[error("no TLE in {origin}: {reason}")]
    TleEmpty {
        /// Where the text came from.
        origin: String,
        /// Empty, or blank lines only.
        reason: &'static str,
    },
    /// A name that no preset or registry knows.
    #[error("unknown {kind} '{name}' (known: {known})")]
    Unknown {
        /// What kind of name it is (`constellation preset`, `policy`, ...).
        kind: &'static str,
        /// The name given.
        name: String,
        /// The names that are known, comma separated.
        known: String,
    },
    /// SGP4 failed for one satellite (e.g. it decayed).
    #[error("SGP4 propagation failed for satellite '{sat}' at {minutes:.3} min from its epoch: {reason}")]
    Propagation {
        /// Satellite name or NORAD id.
        sat: String,
        /// Minutes since the TLE epoch.
        minutes: f64,
        /// The propagator's message.
        reason: String,
    },
}

impl OrbitError {
    /// Shorthand for [`OrbitError::InvalidParameter`].
    pub fn invalid(field: &'static str, value: impl FieldValue, reason: &'static str) -> Self {
        OrbitError::InvalidParameter { field, value: value.render(), reason }
    }
}

/// A value as an error message shows it.
pub trait FieldValue {
    /// The value as text; floats far from 1 in scientific notation (`1e300`, not 301 digits).
    fn render(self) -> String;
}

impl FieldValue for f64 {
    fn render(self) -> String {
        if self == 0.0 || !self.is_finite() || (1e-5..1e16).contains(&self.abs()) {
            format!("{self}")
        } else {
            format!("{self:e}")
        }
    }
}

macro_rules! display_value {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            fn render(self) -> String {
                self.to_string()
            }
        }
    )*};
}
display_value!(i32, i64, u8, u32, u64, usize, &str, String, &String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_render_compactly() {
        assert_eq!(1e300.render(), "1e300");
        assert_eq!(2.5e-9.render(), "2.5e-9");
        assert_eq!(0.5.render(), "0.5");
        assert_eq!(f64::NAN.render(), "NaN");
        assert_eq!(f64::NEG_INFINITY.render(), "-inf");
        assert_eq!(OrbitError::invalid("t", 1e300, "x").to_string(), "invalid t = 1e300: x");
    }
}
