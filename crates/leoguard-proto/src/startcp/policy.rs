//! How far ahead of a predicted handover the sender stalls (StarTCP §2.2), behind one small trait:
//! the drain-time heuristic, a fixed lead, or the learnt actor ([`super::MlpPolicy`]).

use super::StartcpConfig;
use leoguard_core::{Bps, Duration};
use std::fmt::Debug;

/// Names and units of the learnt policy's inputs, in order ([`LeadState::features`]). A weights file
/// must list exactly these in its `inputs`.
pub const FEATURES: [&str; 5] = ["mean_rtt_ms", "rtt_var_ms2", "ack_rate_mbps", "owd_ms", "time_to_handover_ms"];

/// What the sender knows when it chooses a lead (StarTCP §2.2 (i), plus what the heuristic needs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeadState {
    /// Mean of the RTT samples in the last n state intervals (SRTT when there were none).
    pub mean_rtt: Duration,
    /// Population variance of those samples, ms².
    pub rtt_var_ms2: f64,
    /// Bytes acknowledged over the last n state intervals divided by their length.
    pub ack_rate: Bps,
    /// Estimated one-way delay (half the minimum RTT: [`super::SenderSnapshot::owd`]).
    pub owd: Duration,
    /// From now to the predicted handover.
    pub time_to_handover: Duration,
    /// Bytes in flight.
    pub in_flight: u64,
    /// The highest delivery-rate sample in the last n state intervals, if any.
    pub delivery_rate: Option<Bps>,
    /// Smoothed RTT (RFC 6298), zero before the first sample.
    pub srtt: Duration,
    /// Smoothed RTT deviation (RFC 6298 RTTVAR).
    pub rttvar: Duration,
}

impl LeadState {
    /// The learnt policy's input vector, in [`FEATURES`] order and units: mean RTT (ms), RTT
    /// variance (ms²), ACK rate (Mbit/s), OWD (ms), time to the next handover (ms). Raw values: the
    /// weights file's `input_mean` and `input_scale` normalise them.
    pub fn features(&self) -> [f64; 5] {
        [
            self.mean_rtt.as_millis_f64(),
            self.rtt_var_ms2,
            self.ack_rate.0 as f64 / 1e6,
            self.owd.as_millis_f64(),
            self.time_to_handover.as_millis_f64(),
        ]
    }
}

/// A lead-time policy: how long before the predicted handover sending stops. The controller clamps
/// the answer to [0, `max_lead`].
pub trait LeadPolicy: Debug + Send {
    /// A short name for telemetry ("heuristic", "fixed", "mlp").
    fn name(&self) -> &'static str;
    /// The lead for the sender's state now.
    fn lead(&mut self, state: &LeadState) -> Duration;
    /// Whether the policy decides once per handover, `max_lead` before it (the learnt and scripted
    /// policies: one action per handover, as trained), rather than on every ACK until the stall.
    fn once(&self) -> bool {
        false
    }
}

/// StarTCP's heuristic lead (§2.2 "empty the inflight packets before t_handover"): the time the
/// bytes in flight take to drain at the current delivery rate, at least the one-way delay (what is
/// sent later is on the path when the handover comes), plus `gain` smoothed RTT deviations and a
/// fixed `margin`.
///
/// The rate is the highest delivery-rate sample of the last n state intervals (the bottleneck rate
/// as BBR sees it), else the ACK rate; with neither, the drain time is one SRTT, and with no RTT
/// sample either the lead is `max_lead` (stall as early as allowed rather than lose a window).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeuristicLead {
    /// Smoothed RTT deviations added (`StartcpConfig::lead_rttvar_gain`).
    pub gain: f64,
    /// Fixed time added (`StartcpConfig::lead_margin`).
    pub margin: Duration,
    /// The lead when nothing is known yet (`StartcpConfig::max_lead`).
    pub max_lead: Duration,
}

impl HeuristicLead {
    /// The heuristic with the configuration's margins.
    pub fn new(cfg: &StartcpConfig) -> Self {
        HeuristicLead { gain: cfg.lead_rttvar_gain, margin: cfg.lead_margin, max_lead: cfg.max_lead }
    }
}

impl LeadPolicy for HeuristicLead {
    fn name(&self) -> &'static str {
        "heuristic"
    }

    fn lead(&mut self, s: &LeadState) -> Duration {
        let rate = s.delivery_rate.filter(|r| r.0 > 0).or((s.ack_rate.0 > 0).then_some(s.ack_rate));
        let drain = match rate {
            Some(r) => Duration(
                u64::try_from(u128::from(s.in_flight) * 8 * 1_000_000_000 / u128::from(r.0)).unwrap_or(u64::MAX),
            ),
            None if s.srtt > Duration::ZERO => s.srtt,
            None => return self.max_lead,
        };
        // A packet sent less than one OWD before the handover is still on the path when it goes:
        // with few bytes in flight (BBR's ProbeRTT, a window just reopened) the drain time alone
        // would stall too late.
        let drain = drain.max(s.owd);
        let var = Duration::from_secs_f64(s.rttvar.as_secs_f64() * self.gain);
        Duration(drain.0.saturating_add(var.0).saturating_add(self.margin.0))
    }
}

/// A constant lead (ablations, and a baseline for the learnt policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedLead(pub Duration);

impl LeadPolicy for FixedLead {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn lead(&mut self, _: &LeadState) -> Duration {
        self.0
    }
}

/// Leads given in advance, one per handover in order (the training environment's actions); after
/// the last, the last one again. Decides once per handover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedLeads {
    leads: Vec<Duration>,
    next: usize,
}

impl ScriptedLeads {
    /// The leads in handover order (at least one).
    pub fn new(leads: Vec<Duration>) -> Option<Self> {
        (!leads.is_empty()).then_some(ScriptedLeads { leads, next: 0 })
    }
}

impl LeadPolicy for ScriptedLeads {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn lead(&mut self, _: &LeadState) -> Duration {
        let i = self.next.min(self.leads.len() - 1);
        self.next += 1;
        self.leads[i]
    }

    fn once(&self) -> bool {
        true
    }
}
