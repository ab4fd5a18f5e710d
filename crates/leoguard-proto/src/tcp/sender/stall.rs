//! StarTCP in the TCP sender (papers/startcp.txt §2.2, §2.3): the Sending Controller's switch over
//! what goes out, and how a stall is kept from looking like loss or a slow path.
//!
//! - **No timeout for a stall.** While stalled, `poll_timeout` offers only the probes, the resume
//!   timeout and RACK's reordering timer, and `handle_timeout` fires neither the Tail Loss Probe nor
//!   the RTO; at the resume both are re-armed from the resume time (RFC 6298 (5.3)'s restart), so a
//!   stall longer than the RTO costs no timeout, no window collapse and no go-back-N.
//! - **No loss marking for a stall.** RACK marks a segment lost only when a segment sent *after* it
//!   was delivered; nothing is sent during a stall, so the stall gap itself cannot make RACK (or
//!   DupThresh) mark anything. Segments the handover really destroyed are found as usual once data
//!   sent after the resume is SACKed.
//! - **No low rate samples, no app-limited marks.** A delivery-rate sample whose interval
//!   (`min(first_sent_time, delivered_time)` of its packet up to now) contains the end of the last
//!   stall measured the stall's dead time as if the path were slow; it is withheld from the
//!   controller (the ACK is processed, only `AckEvent::rate` is `None`), so BBR's max filter neither
//!   takes a low sample nor counts a round for it. Samples taken while the last window drains during
//!   the stall are kept: delivery goes on at the bottleneck rate then. A stalled sender never marks
//!   anything application-limited: probes bypass the controller's `on_sent` and the scoreboard, and
//!   `poll_transmit` returns before `cwnd_validate`, so the window-limited state is left as it was
//!   before the stall (the model marks no sample app-limited in any case).

use super::{Sent, TcpSender};
use crate::cc::{CongestionControl, RateSample};
use crate::startcp::{
    HandoverRecord, LeadPolicy, SenderSnapshot, SendingController, StartcpConfig, StartcpError, Transition,
};
use crate::tcp::{Ack, Segment, TcpConfig};
use leoguard_core::{Duration, Instant};

impl TcpSender {
    /// A sender with StarTCP's Sending Controller and the heuristic lead. Its peer must be a
    /// [`crate::tcp::TcpReceiver::with_startcp`] (whose ACKs carry the predictions).
    pub fn with_startcp(
        cfg: TcpConfig,
        cc: Box<dyn CongestionControl>,
        limit: Option<u64>,
        star: StartcpConfig,
    ) -> Result<Self, StartcpError> {
        let mut tx = TcpSender::new(cfg, cc, limit);
        tx.star = Some(Box::new(SendingController::new(star)?));
        Ok(tx)
    }

    /// A sender with StarTCP's Sending Controller and lead policy `policy` (the learnt
    /// [`crate::startcp::MlpPolicy`], a [`crate::startcp::FixedLead`], ...).
    pub fn with_startcp_policy(
        cfg: TcpConfig,
        cc: Box<dyn CongestionControl>,
        limit: Option<u64>,
        star: StartcpConfig,
        policy: Box<dyn LeadPolicy>,
    ) -> Result<Self, StartcpError> {
        let mut tx = TcpSender::new(cfg, cc, limit);
        tx.star = Some(Box::new(SendingController::with_policy(star, policy)?));
        Ok(tx)
    }

    /// StarTCP's Sending Controller, when on (state, stall schedule, telemetry).
    pub fn startcp(&self) -> Option<&SendingController> {
        self.star.as_deref()
    }

    /// One record per StarTCP stall (empty without StarTCP).
    pub fn startcp_records(&self) -> &[HandoverRecord] {
        self.star.as_deref().map_or(&[], |s| s.records())
    }

    /// Whether StarTCP holds sending back now.
    pub fn is_stalled(&self) -> bool {
        self.star.as_deref().is_some_and(|s| s.is_stalled())
    }

    /// What the Sending Controller needs from the sender.
    fn star_snapshot(&self) -> SenderSnapshot {
        SenderSnapshot {
            in_flight: self.pipe,
            srtt: self.srtt.unwrap_or(Duration::ZERO),
            rttvar: self.rttvar,
            min_rtt: (self.min_rtt.0 != u64::MAX).then_some(self.min_rtt),
        }
    }

    /// Advances the Sending Controller to `now` and acts on what changed; true while stalled.
    pub(super) fn star_update(&mut self, now: Instant) -> bool {
        let Some(star) = self.star.as_mut() else { return false };
        let t = star.update(now);
        let stalled = star.is_stalled();
        self.on_star_transition(now, t);
        stalled
    }

    fn on_star_transition(&mut self, now: Instant, t: Transition) {
        if let Transition::Resumed(_) = t {
            // The timers were held during the stall: restart them from the resume.
            self.rto_deadline = (!self.flight.is_empty()).then_some(now + self.rto);
            self.schedule_probe(now);
        }
    }

    /// Whether the sender has anything outstanding or to send. An idle sender (a finished or
    /// quiet persistent connection) stalls like any other but sends no probes: it has nothing to
    /// resume, and its stall ends with the timeout.
    fn star_has_work(&self) -> bool {
        !self.flight.is_empty() || !self.lost.is_empty() || self.snd_nxt < self.limit.unwrap_or(u64::MAX)
    }

    /// While stalled: the next probe (if the sender has work) or the resume timeout.
    pub(super) fn star_stalled_timeout(&self) -> Option<Instant> {
        let star = self.star.as_deref()?;
        if self.star_has_work() {
            star.poll_timeout()
        } else {
            star.resume_by()
        }
    }

    /// A probe, if one is due (stalled, with work): zero-length at `snd_nxt`, outside the
    /// scoreboard, the pipe, the controller and pacing.
    pub(super) fn star_probe(&mut self, now: Instant) -> Option<Segment> {
        if !self.star_has_work() {
            return None;
        }
        let star = self.star.as_mut()?;
        star.poll_probe(now).then_some(Segment {
            seq: self.snd_nxt,
            len: 0,
            retransmission: false,
            ts: now,
            probe: true,
        })
    }

    /// The rate sample of packet `p` for the controller: withheld when its interval contains the end
    /// of the last stall (see the module documentation).
    pub(super) fn star_filter_rate(&self, now: Instant, p: &Sent, rate: Option<RateSample>) -> Option<RateSample> {
        let end = self.star.as_deref().and_then(|s| s.last_stall()).map(|(_, end)| end);
        match end {
            Some(end) if p.first_sent_time.min(p.delivered_time) < end && end <= now => None,
            _ => rate,
        }
    }

    /// StarTCP's part of an ACK: the policy's history, then the receiver's signal.
    pub(super) fn star_on_ack(&mut self, now: Instant, ack: &Ack, bytes_acked: u64, rate: Option<RateSample>) {
        let snap = self.star_snapshot();
        let Some(star) = self.star.as_mut() else { return };
        if bytes_acked > 0 {
            star.on_delivered(now, bytes_acked, rate.and_then(|r| r.rate()));
        }
        let t = star.on_signal(now, ack.startcp, &snap);
        self.on_star_transition(now, t);
    }
}
