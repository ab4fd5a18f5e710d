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
    /// A TLE file could not be parsed.
    #[error("malformed TLE at line {line}: {reason}")]
    Tle {
        /// 1-based line number in the file.
        line: usize,
        /// What is wrong with it.
        reason: String,
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
    pub fn invalid(field: &'static str, value: impl ToString, reason: &'static str) -> Self {
        OrbitError::InvalidParameter { field, value: value.to_string(), reason }
    }
}
