//! The sender's timers: the Tail Loss Probe's schedule, the next wake-up the caller must arm, and what
//! happens when one fires (RACK's reordering timer, the Tail Loss Probe, the retransmission timer).

use super::{Probe, TcpSender};
use leoguard_core::{Duration, Instant};

impl TcpSender {
    /// Linux `tcp_schedule_loss_probe`: a probe 2 SRTT after the last send or ACK (plus the delayed-ACK
    /// allowance when one segment is out), never after the RTO would fire; only in the Open state
    /// (Linux: Open or CWR, so not in Disorder, while anything is SACKed or a retransmission is out).
    pub(super) fn schedule_probe(&mut self, now: Instant) {
        self.pto_deadline = None;
        let disorder = self.sacked_segs > 0 || self.retrans_out > 0;
        if !self.rec.tlp
            || self.in_recovery
            || self.in_loss
            || disorder
            || self.tlp_high.is_some()
            || self.flight.is_empty()
        {
            return;
        }
        let Some(srtt) = self.srtt else { return };
        let extra = if self.flight.len() == 1 { self.cfg.min_rto } else { Duration::from_millis(2) };
        let mut at = now + Duration(2 * srtt.as_nanos()) + extra;
        if let Some(r) = self.rto_deadline {
            at = at.min(r);
        }
        self.pto_deadline = Some(at);
    }

    /// When the sender next needs `handle_timeout` (RTO, probe, reordering timer) or can send again
    /// (pacing).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Pacing only matters while there is something to send.
        // Pacing only matters while it is what holds sending back: a pacing time that has passed while
        // the window is full is no wake-up (returned, it would hide the retransmission timer from a
        // caller that ignores deadlines in the past, and a sender whose ACKs all stop would never time
        // out).
        let has_data = !self.lost.is_empty() || self.probe.is_some() || self.snd_nxt < self.limit.unwrap_or(u64::MAX);
        let pace = (self.paced && self.cc.pacing_rate().is_some() && has_data).then_some(self.pacing_next);
        let due = [self.rto_deadline, self.pto_deadline, self.reo_deadline, pace].into_iter().flatten().min();
        match &self.star {
            None => due,
            // Stalled: the probes, the resume timeout and RACK's timer; the RTO, the Tail Loss Probe
            // and pacing wait for the resume.
            Some(star) if star.is_stalled() => {
                [self.star_stalled_timeout(), self.reo_deadline].into_iter().flatten().min()
            }
            Some(star) => [due, star.poll_timeout()].into_iter().flatten().min(),
        }
    }

    /// Handles the timers: the reordering timer (RACK), the Tail Loss Probe, and the retransmission
    /// timer (RFC 6298 backoff, everything outstanding marked lost, F-RTO armed).
    pub fn handle_timeout(&mut self, now: Instant) {
        let stalled = self.star.is_some() && self.star_update(now);
        if self.reo_deadline.is_some_and(|d| now >= d) {
            self.reo_deadline = None;
            if self.rack_detect(now) {
                self.on_new_losses(now, 0);
            }
        }
        if stalled {
            // StarTCP: a stall is no loss. The Tail Loss Probe and the RTO are held (re-armed at the
            // resume); RACK above marks only what a later-sent segment's delivery proves lost, which
            // the stall itself cannot cause (nothing is sent during it).
            return;
        }
        if self.pto_deadline.is_some_and(|d| now >= d) {
            self.pto_deadline = None;
            let end = self.limit.unwrap_or(u64::MAX);
            let new_ok = self.snd_nxt < end && self.snd_nxt < self.snd_una + self.peer_rwnd;
            self.probe = if new_ok {
                Some(Probe::New)
            } else {
                self.flight.iter().rev().find(|s| !s.sacked).map(|s| Probe::Retransmit(s.seq))
            };
            if self.probe.is_some() {
                // Linux has one transmit timer (`icsk_pending`): the probe stands in for the RTO
                // due at the same time, which `tcp_send_loss_probe` re-arms from the probe.
                return;
            }
        }
        let Some(deadline) = self.rto_deadline else {
            return;
        };
        if now < deadline {
            return;
        }
        if self.flight.is_empty() {
            self.rto_deadline = None;
            return;
        }
        self.enter_loss(now);
    }
}
