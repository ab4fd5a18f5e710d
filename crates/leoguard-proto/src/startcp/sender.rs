//! The sender's Sending Controller (StarTCP §2.2, §2.3): a switch over the sender's normal sending.
//! Normal → Stalled from `predicted handover - lead` on (no data, no retransmissions, a probe every
//! `probe_interval`) → Normal on the receiver's recovery notice, or `resume_timeout` after the
//! predicted handover if none comes.

use super::policy::{HeuristicLead, LeadPolicy, LeadState};
use super::state::StateTracker;
use super::{Signal, StartcpConfig, StartcpError};
use leoguard_core::{Bps, Duration, Instant};

/// Why a stall ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeReason {
    /// The receiver's recovery notice (§2.3).
    Notice,
    /// No notice within `resume_timeout` of the predicted handover.
    Timeout,
}

/// One stall, for telemetry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HandoverRecord {
    /// The predicted handover the stall was for, sender clock.
    pub predicted: Instant,
    /// When sending stopped.
    pub stall_start: Instant,
    /// When sending resumed (`None` while stalled).
    pub stall_end: Option<Instant>,
    /// Probes sent during the stall.
    pub probes: u64,
    /// Why it resumed (`None` while stalled).
    pub reason: Option<ResumeReason>,
    /// The lead the policy chose (clamped to `max_lead`).
    pub lead: Duration,
    /// The policy's input when it chose that lead ([`LeadState::features`]).
    pub state: [f64; 5],
}

/// A change of the controller's state, for the sender to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changed.
    None,
    /// Sending stopped.
    Stalled,
    /// Sending resumed.
    Resumed(ResumeReason),
}

/// What the TCP sender knows that the controller needs besides its own history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderSnapshot {
    /// Bytes in flight.
    pub in_flight: u64,
    /// Smoothed RTT, zero before the first sample.
    pub srtt: Duration,
    /// RTT deviation.
    pub rttvar: Duration,
    /// Minimum RTT, if sampled.
    pub min_rtt: Option<Duration>,
}

impl SenderSnapshot {
    /// StarTCP's one-way delay estimate ("computed by a heuristic algorithm", §2.2): half the
    /// minimum RTT, i.e. a symmetric path without queueing; half the SRTT before a minimum exists.
    pub fn owd(&self) -> Duration {
        Duration(self.min_rtt.unwrap_or(self.srtt).as_nanos() / 2)
    }
}

#[derive(Clone, Copy, Debug)]
struct Target {
    handover: Instant,
    lead: Duration,
    state: [f64; 5],
    /// The policy decides once per handover ([`LeadPolicy::once`]) and has decided.
    decided: bool,
}

#[derive(Clone, Copy, Debug)]
struct Stall {
    handover: Instant,
    next_probe: Instant,
    resume_by: Instant,
    record: usize,
}

/// The sender's Sending Controller (StarTCP §2.2, §2.3).
///
/// Predictions arrive on ACKs as offsets; [`SendingController::on_signal`] converts them to the
/// sender's clock as `now - OWD + offset` ([`SenderSnapshot::owd`]) and asks the policy for a lead
/// (again on every ACK, so the lead follows the sender's state until the stall begins). The stall
/// begins at `handover - lead` and ends on a recovery notice or `resume_timeout` after
/// `max(handover, stall start)`. Predictions within half a period of a handover already stalled for
/// are the same handover and are ignored, so a handover the receiver still predicts after an early
/// resume does not stall the sender twice.
#[derive(Debug)]
pub struct SendingController {
    cfg: StartcpConfig,
    policy: Box<dyn LeadPolicy>,
    tracker: StateTracker,
    target: Option<Target>,
    stall: Option<Stall>,
    /// The handover of the last stall begun.
    handled: Option<Instant>,
    /// The last stall, (start, end).
    last_stall: Option<(Instant, Instant)>,
    records: Vec<HandoverRecord>,
    probes: u64,
}

impl SendingController {
    /// A controller with the heuristic lead ([`HeuristicLead`]).
    pub fn new(cfg: StartcpConfig) -> Result<Self, StartcpError> {
        Self::with_policy(cfg, Box::new(HeuristicLead::new(&cfg)))
    }

    /// A controller with lead policy `policy`.
    pub fn with_policy(cfg: StartcpConfig, policy: Box<dyn LeadPolicy>) -> Result<Self, StartcpError> {
        cfg.validate()?;
        Ok(SendingController {
            cfg,
            policy,
            tracker: StateTracker::new(cfg.state_interval, cfg.state_intervals),
            target: None,
            stall: None,
            handled: None,
            last_stall: None,
            records: Vec::new(),
            probes: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StartcpConfig {
        &self.cfg
    }

    /// Replaces the lead policy.
    pub fn set_policy(&mut self, policy: Box<dyn LeadPolicy>) {
        self.policy = policy;
    }

    /// The lead policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// An RTT sample taken at `now` (the policy's state).
    pub fn on_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        self.tracker.on_rtt(now, rtt);
    }

    /// `bytes` newly delivered at `now`, with the ACK's delivery-rate sample if any (the policy's
    /// state).
    pub fn on_delivered(&mut self, now: Instant, bytes: u64, rate: Option<Bps>) {
        self.tracker.on_delivered(now, bytes, rate);
    }

    /// The policy's state for a handover at `handover`, sender clock.
    pub fn lead_state(&self, now: Instant, handover: Instant, snap: &SenderSnapshot) -> LeadState {
        let (mean, var) = self.tracker.rtt_stats().unwrap_or((snap.srtt.as_millis_f64(), 0.0));
        LeadState {
            mean_rtt: Duration::from_secs_f64(mean / 1e3),
            rtt_var_ms2: var,
            ack_rate: self.tracker.ack_rate(),
            owd: snap.owd(),
            time_to_handover: handover.saturating_duration_since(now),
            in_flight: snap.in_flight,
            delivery_rate: self.tracker.max_delivery_rate(),
            srtt: snap.srtt,
            rttvar: snap.rttvar,
        }
    }

    /// The receiver's signal arrived on an ACK at `now`: a prediction (turned into the sender's
    /// clock with the OWD estimate) and a recovery notice. Returns the transition it caused.
    pub fn on_signal(&mut self, now: Instant, sig: Signal, snap: &SenderSnapshot) -> Transition {
        if let Some(offset) = sig.next_handover {
            let at = Instant(now.as_nanos().saturating_sub(snap.owd().as_nanos()).saturating_add(offset.as_nanos()));
            self.on_prediction(now, at, snap);
        }
        if sig.recovered {
            return self.on_recovery_notice(now);
        }
        self.update(now)
    }

    /// A predicted handover at `handover` (sender clock), known at `now`: the stall target, unless a
    /// stall is under way or it is the handover of the last stall.
    pub fn on_prediction(&mut self, now: Instant, handover: Instant, snap: &SenderSnapshot) {
        if self.stall.is_some() {
            return;
        }
        let half = self.cfg.period.as_nanos() / 2;
        if self.handled.is_some_and(|h| handover.as_nanos() < h.as_nanos().saturating_add(half)) {
            return;
        }
        if self.policy.once() {
            // One decision per handover, `max_lead` before it (or at the first prediction after
            // that): the learnt policy is trained on one action per handover (StarTCP §2.2 (iii)).
            if self.target.is_some_and(|t| t.decided && t.handover.as_nanos().abs_diff(handover.as_nanos()) < half) {
                return;
            }
            if handover.saturating_duration_since(now) > self.cfg.max_lead {
                self.target = None;
                return;
            }
        }
        let state = self.lead_state(now, handover, snap);
        let lead = self.policy.lead(&state).min(self.cfg.max_lead);
        self.target = Some(Target { handover, lead, state: state.features(), decided: self.policy.once() });
    }

    /// The receiver's recovery notice: resume if stalled.
    pub fn on_recovery_notice(&mut self, now: Instant) -> Transition {
        if self.stall.is_some() {
            return self.resume(now, ResumeReason::Notice);
        }
        self.update(now)
    }

    /// Advances the state to `now`: begins a stall whose time has come, ends one whose timeout
    /// passed. Call before [`SendingController::poll_probe`] and whenever a deadline from
    /// [`SendingController::poll_timeout`] passes.
    pub fn update(&mut self, now: Instant) -> Transition {
        if let Some(s) = self.stall {
            if now >= s.resume_by {
                return self.resume(now, ResumeReason::Timeout);
            }
            return Transition::None;
        }
        let Some(t) = self.target else { return Transition::None };
        if now < self.stall_at_of(t) {
            return Transition::None;
        }
        self.target = None;
        self.handled = Some(t.handover);
        let resume_by = t.handover.max(now) + self.cfg.resume_timeout;
        if now >= t.handover + self.cfg.resume_timeout {
            return Transition::None; // that handover is long over (the sender was not polled)
        }
        self.records.push(HandoverRecord {
            predicted: t.handover,
            stall_start: now,
            stall_end: None,
            probes: 0,
            reason: None,
            lead: t.lead,
            state: t.state,
        });
        self.stall = Some(Stall { handover: t.handover, next_probe: now, resume_by, record: self.records.len() - 1 });
        Transition::Stalled
    }

    fn stall_at_of(&self, t: Target) -> Instant {
        Instant(t.handover.as_nanos().saturating_sub(t.lead.as_nanos()))
    }

    fn resume(&mut self, now: Instant, reason: ResumeReason) -> Transition {
        let Some(s) = self.stall.take() else { return Transition::None };
        let r = &mut self.records[s.record];
        r.stall_end = Some(now);
        r.reason = Some(reason);
        self.last_stall = Some((r.stall_start, now));
        Transition::Resumed(reason)
    }

    /// Whether sending is stalled (as of the last [`SendingController::update`]).
    pub fn is_stalled(&self) -> bool {
        self.stall.is_some()
    }

    /// Whether a probe is due at `now` while stalled; if so it counts as sent. Probes keep a fixed
    /// cadence from the stall's start; a caller late by more than an interval gets one probe, not a
    /// burst.
    pub fn poll_probe(&mut self, now: Instant) -> bool {
        let iv = self.cfg.probe_interval;
        let Some(s) = &mut self.stall else { return false };
        if now < s.next_probe {
            return false;
        }
        let next = s.next_probe + iv;
        s.next_probe = if next > now { next } else { now + iv };
        self.records[s.record].probes += 1;
        self.probes += 1;
        true
    }

    /// The next instant the controller needs [`SendingController::update`] or a probe: the stall's
    /// start, or while stalled the next probe or the resume timeout.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (&self.stall, &self.target) {
            (Some(s), _) => Some(s.next_probe.min(s.resume_by)),
            (None, Some(t)) => Some(self.stall_at_of(*t)),
            (None, None) => None,
        }
    }

    /// When the current stall ends at the latest (its resume timeout).
    pub fn resume_by(&self) -> Option<Instant> {
        self.stall.map(|s| s.resume_by)
    }

    /// The handover the controller is preparing for or stalled for, sender clock.
    pub fn next_handover(&self) -> Option<Instant> {
        self.stall.map(|s| s.handover).or(self.target.map(|t| t.handover))
    }

    /// When the next stall begins, if one is planned.
    pub fn stall_at(&self) -> Option<Instant> {
        self.target.map(|t| self.stall_at_of(t))
    }

    /// The last finished stall, (start, end).
    pub fn last_stall(&self) -> Option<(Instant, Instant)> {
        self.last_stall
    }

    /// One record per stall, in order.
    pub fn records(&self) -> &[HandoverRecord] {
        &self.records
    }

    /// Probes sent in all.
    pub fn probes_sent(&self) -> u64 {
        self.probes
    }
}
