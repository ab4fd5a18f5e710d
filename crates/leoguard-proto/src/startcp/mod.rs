//! StarTCP (APNet'24, papers/startcp.txt): handover-aware TCP for Starlink. Sans-IO, in two parts.
//!
//! - The receiver's [`HandoverManager`] (§2.1, §2.3) watches packet arrivals, takes a gap longer than
//!   the expected inter-arrival time plus 11 ms for an interruption, finds the handover phase as the
//!   densest residue of interruption start times modulo T = 15 s (a circular kernel density estimate,
//!   [`kde`]), predicts the next handover and notices link recovery from the first packet after an
//!   interruption that hit a stalled sender. Its output is a [`Signal`] carried back on ACKs.
//! - The sender's [`SendingController`] (§2.2, §2.3) stalls sending from `predicted handover - lead`
//!   on, sends a probe every 1 ms while stalled and resumes on the receiver's recovery notice (or a
//!   timeout). The lead comes from a [`LeadPolicy`]: the drain-time heuristic ([`HeuristicLead`]) or a
//!   learnt actor ([`MlpPolicy`], §2.2's actor-critic, evaluated from a JSON weights file).
//!
//! The TCP model carries both ([`crate::tcp::TcpSender::with_startcp`],
//! [`crate::tcp::TcpReceiver::with_startcp`]); a UDP transport can drive the two parts directly. On
//! the wire the signals travel in a TCP option (leoguard-wire `startcp`).
//!
//! Clocks: the receiver's prediction travels as an offset from the ACK's own send time
//! ([`Signal::next_handover`]), so no clock synchronisation is needed; the sender turns it into its own
//! clock as `ack arrival - OWD + offset`, with OWD estimated as half the minimum RTT
//! ([`SenderSnapshot::owd`]).

use leoguard_core::Duration;

pub mod kde;
mod manager;
mod mlp;
mod policy;
mod sender;
mod spec;
mod state;
#[cfg(test)]
mod tests;

pub use manager::{HandoverManager, Interruption, AFTERMATH};
pub use mlp::{Activation, MlpLayer, MlpPolicy, PolicyError, POLICY_FORMAT, POLICY_VERSION};
pub use policy::{FixedLead, HeuristicLead, LeadPolicy, LeadState, ScriptedLeads, FEATURES};
pub use sender::{HandoverRecord, ResumeReason, SenderSnapshot, SendingController, Transition};
pub use spec::{StartcpPolicy, StartcpSpec};
pub use state::StateTracker;

/// Longest handover period accepted (an hour: anything longer is not a periodic handover schedule).
pub const MAX_PERIOD: Duration = Duration::from_secs(3600);
/// Shortest handover period accepted.
pub const MIN_PERIOD: Duration = Duration::from_millis(100);
/// Most interruption start times the KDE may keep.
pub const MAX_EVENTS: u32 = 4096;
/// Most state intervals the policy's state may span.
pub const MAX_STATE_INTERVALS: u32 = 256;

/// StarTCP's parameters (defaults from the paper where it gives one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartcpConfig {
    /// Handover period T (Starlink: 15 s, §1).
    pub period: Duration,
    /// A gap in arrivals longer than the expected inter-arrival time plus this is an interruption
    /// (§1 footnote: a handover interrupts the link for at least 11 ms).
    pub gap_threshold: Duration,
    /// Standard deviation of the KDE's kernel, as time (30 ms: wider than the ±20 ms jitter of
    /// detected interruption starts, far narrower than T).
    pub kde_bandwidth: Duration,
    /// Handover periods with an interruption within two bandwidths of the densest phase needed
    /// before predicting (2; a burst of gaps inside one period counts once, see [`kde`]). The
    /// paper's StarTCP acts from the second handover on, which is `min_events = 1`.
    pub min_events: u32,
    /// Most recent interruption start times the KDE keeps (32: eight minutes of 15 s handovers).
    pub max_events: u32,
    /// Probe interval while stalled (§2.3: 1 ms). Must be below `gap_threshold`, or the receiver
    /// would take the gaps between probes for interruptions.
    pub probe_interval: Duration,
    /// Resume sending this long after the predicted handover if no recovery notice came (300 ms:
    /// the longest interruptions of Fig 1b are 200 ms).
    pub resume_timeout: Duration,
    /// Largest lead any policy may choose (1 s).
    pub max_lead: Duration,
    /// Heuristic lead margin: this many smoothed RTT deviations on top of the drain time (1.0).
    pub lead_rttvar_gain: f64,
    /// Heuristic lead margin: plus this fixed time (0).
    pub lead_margin: Duration,
    /// Length of one interval of the policy's state (100 ms).
    pub state_interval: Duration,
    /// Intervals n the state's RTT statistics and ACK rate span (10).
    pub state_intervals: u32,
    /// The congestion controller under StarTCP, a registry name (`bbr`, as in the paper's §3).
    pub base_cc: &'static str,
}

impl Default for StartcpConfig {
    fn default() -> Self {
        StartcpConfig {
            period: Duration::from_secs(15),
            gap_threshold: Duration::from_millis(11),
            kde_bandwidth: Duration::from_millis(30),
            min_events: 2,
            max_events: 32,
            probe_interval: Duration::from_millis(1),
            resume_timeout: Duration::from_millis(300),
            max_lead: Duration::from_secs(1),
            lead_rttvar_gain: 1.0,
            lead_margin: Duration::ZERO,
            state_interval: Duration::from_millis(100),
            state_intervals: 10,
            base_cc: "bbr",
        }
    }
}

/// A StarTCP configuration that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StartcpError {
    /// A field is out of range.
    #[error("invalid startcp.{field} = {value}: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// The value.
        value: String,
        /// The rule.
        reason: &'static str,
    },
    /// [`StartcpConfig::set`] got a name that is no field.
    #[error("unknown field startcp.{0} (known: {known})", known = StartcpConfig::FIELDS.join(", "))]
    UnknownField(String),
}

fn invalid(field: &'static str, value: impl std::fmt::Display, reason: &'static str) -> StartcpError {
    StartcpError::Invalid { field, value: value.to_string(), reason }
}

impl StartcpConfig {
    /// The fields [`StartcpConfig::set`] accepts: durations in seconds, counts and gains as numbers.
    pub const FIELDS: [&'static str; 12] = [
        "period",
        "gap_threshold",
        "kde_bandwidth",
        "min_events",
        "max_events",
        "probe_interval",
        "resume_timeout",
        "max_lead",
        "lead_rttvar_gain",
        "lead_margin",
        "state_interval",
        "state_intervals",
    ];

    /// Sets the numeric field `field` from `value` (durations in seconds, counts and gains as they
    /// are), as a scenario file gives them: a negative, fractional-count or non-finite value is a
    /// field-named error here, where a [`Duration`] could not even hold it. Cross-field rules are
    /// [`StartcpConfig::validate`]'s.
    pub fn set(&mut self, field: &str, value: f64) -> Result<(), StartcpError> {
        let Some(&name) = Self::FIELDS.iter().find(|&&f| f == field) else {
            return Err(StartcpError::UnknownField(field.to_string()));
        };
        if !value.is_finite() {
            return Err(invalid(name, value, "must be a finite number"));
        }
        if value < 0.0 {
            return Err(invalid(name, value, "must be >= 0"));
        }
        let secs = || Duration::from_secs_f64(value);
        let count = || {
            if value.fract() != 0.0 || value > f64::from(u32::MAX) {
                Err(invalid(name, value, "must be a whole number"))
            } else {
                Ok(value as u32)
            }
        };
        match name {
            "period" => self.period = secs(),
            "gap_threshold" => self.gap_threshold = secs(),
            "kde_bandwidth" => self.kde_bandwidth = secs(),
            "min_events" => self.min_events = count()?,
            "max_events" => self.max_events = count()?,
            "probe_interval" => self.probe_interval = secs(),
            "resume_timeout" => self.resume_timeout = secs(),
            "max_lead" => self.max_lead = secs(),
            "lead_rttvar_gain" => self.lead_rttvar_gain = value,
            "lead_margin" => self.lead_margin = secs(),
            "state_interval" => self.state_interval = secs(),
            _ => self.state_intervals = count()?,
        }
        Ok(())
    }

    /// Sets the congestion controller under StarTCP by registry name ([`crate::cc::ALGORITHMS`],
    /// `startcp` itself excluded).
    pub fn set_base_cc(&mut self, name: &str) -> Result<(), StartcpError> {
        match crate::cc::ALGORITHMS.iter().find(|&&a| a == name && a != "startcp") {
            Some(&a) => {
                self.base_cc = a;
                Ok(())
            }
            None => {
                Err(invalid("base_cc", name, "must name a congestion controller of the registry other than startcp"))
            }
        }
    }

    /// Checks every field and the rules between them.
    pub fn validate(&self) -> Result<(), StartcpError> {
        let half = Duration(self.period.0 / 2);
        if self.period < MIN_PERIOD || self.period > MAX_PERIOD {
            return Err(invalid("period", self.period, "must be within 100 ms and 1 h"));
        }
        if self.gap_threshold == Duration::ZERO || self.gap_threshold >= half {
            return Err(invalid("gap_threshold", self.gap_threshold, "must be > 0 and below half the period"));
        }
        if self.kde_bandwidth == Duration::ZERO || self.kde_bandwidth.0 > self.period.0 / 8 {
            return Err(invalid("kde_bandwidth", self.kde_bandwidth, "must be > 0 and at most period / 8"));
        }
        if self.max_events == 0 || self.max_events > MAX_EVENTS {
            return Err(invalid("max_events", self.max_events, "must be within 1 and 4096"));
        }
        if self.min_events == 0 || self.min_events > self.max_events {
            return Err(invalid("min_events", self.min_events, "must be within 1 and max_events"));
        }
        if self.probe_interval == Duration::ZERO || self.probe_interval >= self.gap_threshold {
            return Err(invalid("probe_interval", self.probe_interval, "must be > 0 and below gap_threshold"));
        }
        if self.max_lead > half {
            return Err(invalid("max_lead", self.max_lead, "must be at most half the period"));
        }
        if self.resume_timeout == Duration::ZERO || self.resume_timeout >= half {
            return Err(invalid("resume_timeout", self.resume_timeout, "must be > 0 and below half the period"));
        }
        if !(self.lead_rttvar_gain.is_finite() && (0.0..=16.0).contains(&self.lead_rttvar_gain)) {
            return Err(invalid("lead_rttvar_gain", self.lead_rttvar_gain, "must be within 0 and 16"));
        }
        if self.lead_margin > self.max_lead {
            return Err(invalid("lead_margin", self.lead_margin, "must be at most max_lead"));
        }
        if self.state_interval == Duration::ZERO || self.state_interval > self.period {
            return Err(invalid("state_interval", self.state_interval, "must be > 0 and at most the period"));
        }
        if self.state_intervals == 0 || self.state_intervals > MAX_STATE_INTERVALS {
            return Err(invalid("state_intervals", self.state_intervals, "must be within 1 and 256"));
        }
        if !crate::cc::ALGORITHMS.contains(&self.base_cc) || self.base_cc == "startcp" {
            return Err(invalid(
                "base_cc",
                self.base_cc,
                "must name a congestion controller of the registry other than startcp",
            ));
        }
        Ok(())
    }
}

/// What a packet arriving at the receiver was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalKind {
    /// A data segment.
    Data,
    /// A StarTCP probe from a stalled sender (§2.3).
    Probe,
}

/// StarTCP's receiver-to-sender signals, carried on ACKs ([`crate::tcp::Ack::startcp`]); the default
/// carries nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signal {
    /// The next predicted handover, as an offset from when this ACK left the receiver (no clock
    /// synchronisation needed; the wire carries it in microseconds).
    pub next_handover: Option<Duration>,
    /// Recovery notice: the link came back after an interruption that hit a stalled sender; resume
    /// (§2.3).
    pub recovered: bool,
}

impl Signal {
    /// No prediction, no notice.
    pub const NONE: Signal = Signal { next_handover: None, recovered: false };

    /// Whether the signal carries nothing.
    pub fn is_none(&self) -> bool {
        *self == Signal::NONE
    }

    /// The prediction in whole microseconds as the wire carries it (rounded down, saturating at
    /// `u32::MAX`, about 71 minutes).
    pub fn next_handover_us(&self) -> Option<u32> {
        self.next_handover.map(|d| u32::try_from(d.as_nanos() / 1000).unwrap_or(u32::MAX))
    }

    /// A signal from the wire's fields (prediction in microseconds).
    pub fn from_wire(next_handover_us: Option<u32>, recovered: bool) -> Signal {
        Signal { next_handover: next_handover_us.map(|us| Duration::from_micros(u64::from(us))), recovered }
    }
}

/// A congestion controller under StarTCP: `cfg.base_cc` from the registry, wrapped so it reports
/// itself as `startcp` ([`crate::cc::startcp::StartcpCc`]).
pub fn build_cc(
    cfg: &StartcpConfig,
    mss: u64,
    init_cwnd_segments: u64,
) -> Result<Box<dyn crate::cc::CongestionControl>, crate::cc::UnknownAlgorithm> {
    if cfg.base_cc == "startcp" {
        return Err(crate::cc::UnknownAlgorithm(cfg.base_cc.to_string()));
    }
    let inner = crate::cc::build(cfg.base_cc, mss, init_cwnd_segments)?;
    Ok(Box::new(crate::cc::startcp::StartcpCc::new(inner)))
}
