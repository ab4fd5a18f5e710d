//! A runner for packetdrill scripts (`.pkt`, the format Linux's TCP maintainers test the kernel
//! with) against leoguard's own TCP model: the script's local TCP is the model's [`TcpSender`], the
//! script plays the peer and checks every packet the model sends, the time it sends it, and
//! TCP_INFO-like assertions in `%{ ... }%` blocks. Everything runs on virtual time.
//!
//! The outcome of a script is a pass, the first mismatch (line, expected, got), or
//! `unsupported: <feature>` for anything the runner cannot check: never a pass for what was not
//! checked. docs/packetdrill.md lists what is supported, the defaults and the sysctl map.
//!
//! [`TcpSender`]: crate::tcp::TcpSender

mod expr;
mod parse;
mod run;
mod settings;

pub use parse::{parse, Action, Event, Time};

/// packetdrill's default timing tolerance (`--tolerance_usecs`, 4000 us).
pub const TOLERANCE_US: i64 = 4000;

/// A mismatch between the script and the model (or a syntax error: `syntax`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Script line (1-based).
    pub line: usize,
    /// What the script expected.
    pub expected: String,
    /// What the model did (for a syntax error: the token).
    pub got: String,
    /// A syntax error rather than a behavioural mismatch.
    pub syntax: bool,
}

/// Why a script did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptError {
    /// A mismatch or a syntax error.
    Fail(Failure),
    /// A feature the runner or the model does not have.
    Unsupported {
        /// Script line (1-based).
        line: usize,
        /// What.
        feature: String,
    },
}

/// The outcome of one script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every line matched.
    Pass,
    /// The first mismatch.
    Fail(Failure),
    /// Uses something not supported.
    Unsupported {
        /// Script line (1-based).
        line: usize,
        /// What.
        feature: String,
    },
}

impl Outcome {
    /// "pass", "fail" or "unsupported".
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Unsupported { .. } => "unsupported",
        }
    }

    /// One JSON object: {"outcome", "line", "expected", "got", "syntax", "feature", "message"}.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "outcome": self.kind(), "message": self.to_string() });
        match self {
            Outcome::Pass => {}
            Outcome::Fail(f) => {
                v["line"] = f.line.into();
                v["expected"] = f.expected.clone().into();
                v["got"] = f.got.clone().into();
                v["syntax"] = f.syntax.into();
            }
            Outcome::Unsupported { line, feature } => {
                v["line"] = (*line).into();
                v["feature"] = feature.clone().into();
            }
        }
        v
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Pass => write!(f, "pass"),
            Outcome::Fail(x) if x.syntax => {
                write!(f, "fail: line {}: syntax error: expected {}, got {}", x.line, x.expected, x.got)
            }
            Outcome::Fail(x) => write!(f, "fail: line {}: expected {}, got {}", x.line, x.expected, x.got),
            Outcome::Unsupported { line, feature } => write!(f, "unsupported: {feature} (line {line})"),
        }
    }
}

/// Runs a script's text against the model.
pub fn run_script(text: &str) -> Outcome {
    let result = parse(text).and_then(|events| run::Runner::new().run(&events));
    match result {
        Ok(()) => Outcome::Pass,
        Err(ScriptError::Fail(f)) => Outcome::Fail(f),
        Err(ScriptError::Unsupported { line, feature }) => Outcome::Unsupported { line, feature },
    }
}
