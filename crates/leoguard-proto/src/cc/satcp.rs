//! SaTCP (INFOCOM'23; a baseline of the SATGUARD paper): CUBIC told of handovers ahead of time by the
//! link layer (REFERENCE.md "Baselines").
//!
//! - A handover report (`on_handover_report`, about 0.5 s before the predicted handover, with the
//!   prediction's error) raises a *handover flag* for `hold` (2.3 s) after the latest report.
//! - While the flag is up an RTO is taken for the handover it most likely is, not for congestion: the
//!   sender does not fall back to one segment and forget CUBIC's state; it makes the ordinary 0.7
//!   multiplicative decrease of a loss event instead (SaTCP leaves β unchanged).
//! - An epoch that starts while the flag is up divides K by `k_divisor` (9), so the window regains
//!   W_max about nine times faster.
//!
//! Outside the flag SaTCP is CUBIC.

use super::cubic::Cubic;
use super::{AckEvent, CongestionControl};
use leoguard_core::{Bps, Duration, Instant};

/// SaTCP's handover flag lasts this long after the latest report.
pub const FLAG_HOLD: Duration = Duration::from_millis(2300);

/// K is divided by this while the flag is up.
pub const K_DIVISOR: f64 = 9.0;

/// CUBIC with SaTCP's handover rules.
#[derive(Clone, Debug)]
pub struct Satcp {
    cubic: Cubic,
    flag_until: Option<Instant>,
    /// RTOs taken for handovers (state kept) so far.
    pub handover_rtos: u64,
}

impl Satcp {
    /// SaTCP over a CUBIC with HyStart (the Linux default).
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Satcp {
        Satcp { cubic: Cubic::new(mss, init_cwnd_segments), flag_until: None, handover_rtos: 0 }
    }

    /// Whether the handover flag is up at `now`.
    pub fn flag(&self, now: Instant) -> bool {
        self.flag_until.is_some_and(|t| now < t)
    }

    /// The CUBIC underneath (K, W_max), for inspection.
    pub fn cubic(&self) -> &Cubic {
        &self.cubic
    }

    fn sync_flag(&mut self, now: Instant) {
        self.cubic.k_divisor = if self.flag(now) { K_DIVISOR } else { 1.0 };
    }
}

impl CongestionControl for Satcp {
    fn name(&self) -> &'static str {
        "satcp"
    }

    fn set_hystart(&mut self, on: bool) {
        self.cubic.set_hystart(on);
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        self.cubic.on_sent(now, bytes, in_flight);
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.sync_flag(now);
        self.cubic.on_ack(now, ack);
    }

    fn on_congestion_event(&mut self, now: Instant, in_flight: u64) {
        self.sync_flag(now);
        self.cubic.on_congestion_event(now, in_flight);
    }

    fn on_recovery_end(&mut self, now: Instant) {
        self.cubic.on_recovery_end(now);
    }

    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.sync_flag(now);
        if self.flag(now) {
            // The handover, not congestion: keep CUBIC's state, make one ordinary decrease.
            self.handover_rtos += 1;
            self.cubic.on_congestion_event(now, in_flight);
            self.cubic.on_recovery_end(now);
        } else {
            self.cubic.on_rto(now, in_flight);
        }
    }

    fn cwnd(&self) -> u64 {
        self.cubic.cwnd()
    }

    fn ssthresh(&self) -> u64 {
        self.cubic.ssthresh()
    }

    fn pacing_rate(&self) -> Option<Bps> {
        None
    }

    fn state(&self) -> &'static str {
        self.cubic.state()
    }

    fn on_handover_report(&mut self, now: Instant) {
        self.flag_until = Some(now + FLAG_HOLD);
        self.sync_flag(now);
    }

    fn undo(&mut self, now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        self.cubic.undo(now, prior_cwnd, prior_ssthresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn ack(bytes: u64) -> AckEvent {
        AckEvent::sample(bytes, Duration::from_millis(50))
    }

    fn at(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }

    /// A flow at 100 segments in congestion avoidance (after one loss at 100 and regrowth).
    fn grown() -> Satcp {
        let mut s = Satcp::new(MSS, 100);
        s.on_congestion_event(at(0), 100 * MSS);
        s.on_recovery_end(at(0));
        s
    }

    #[test]
    fn without_a_report_an_rto_is_cubics() {
        let mut s = grown();
        s.on_rto(at(1000), 70 * MSS);
        assert_eq!(s.cwnd(), MSS, "one segment, state forgotten");
        assert_eq!(s.handover_rtos, 0);
    }

    #[test]
    fn an_rto_within_the_flag_keeps_state_and_decreases_by_beta() {
        let mut s = grown();
        s.on_handover_report(at(1000));
        assert!(s.flag(at(3299)) && !s.flag(at(3300)), "flag held 2.3 s after the report");
        let before = s.cwnd();
        s.on_rto(at(1500), before);
        assert_eq!(s.cwnd(), (before as f64 * 0.7) as u64, "0.7 decrease, not one segment");
        assert_eq!(s.handover_rtos, 1);
        // W_max is remembered (with CUBIC's fast convergence: 70 · 1.7 / 2), not reset to zero.
        assert!((s.cubic().w_last_max_segments() - 59.5).abs() < 1e-9, "W_max kept");
        // After the flag, an RTO is CUBIC's again.
        s.on_rto(at(4000), s.cwnd());
        assert_eq!(s.cwnd(), MSS);
    }

    #[test]
    fn k_shrinks_ninefold_while_the_flag_is_up() {
        let (mut plain, mut flagged) = (grown(), grown());
        flagged.on_handover_report(at(0));
        plain.on_ack(at(10), &ack(MSS));
        flagged.on_ack(at(10), &ack(MSS));
        let (k, k9) = (plain.cubic().k_secs(), flagged.cubic().k_secs());
        assert!(k > 1.0, "{k}");
        assert!((k / k9 - 9.0).abs() < 1e-9, "{k} vs {k9}");
    }

    #[test]
    fn the_registry_builds_it() {
        let c = crate::cc::build("satcp", MSS, 10).expect("registered");
        assert_eq!(c.name(), "satcp");
    }
}
