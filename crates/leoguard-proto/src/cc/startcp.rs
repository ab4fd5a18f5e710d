//! StarTCP's congestion control (papers/startcp.txt §3: "using BBR as its congestion control
//! algorithm"): the registry's `startcp` is BBR under a name of its own; any other registry
//! controller can be put under it ([`crate::startcp::build_cc`], `StartcpConfig::base_cc`).
//!
//! The controller itself is unchanged: StarTCP acts in the sender (stalls and probes, see
//! [`crate::startcp`]), and the sender keeps stalls from reaching the controller as loss, timeouts or
//! low rate samples. This wrapper only gives telemetry the scheme's name.

use super::{AckEvent, CongestionControl};
use leoguard_core::{Bps, Duration, Instant};

/// A registry controller reporting itself as `startcp`.
#[derive(Debug)]
pub struct StartcpCc {
    inner: Box<dyn CongestionControl>,
}

impl StartcpCc {
    /// StarTCP over `inner`.
    pub fn new(inner: Box<dyn CongestionControl>) -> Self {
        StartcpCc { inner }
    }

    /// The controller underneath.
    pub fn inner(&self) -> &dyn CongestionControl {
        self.inner.as_ref()
    }
}

impl CongestionControl for StartcpCc {
    fn name(&self) -> &'static str {
        "startcp"
    }
    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        self.inner.on_sent(now, bytes, in_flight);
    }
    fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.inner.on_ack(now, ack);
    }
    fn on_congestion_event(&mut self, now: Instant, in_flight: u64) {
        self.inner.on_congestion_event(now, in_flight);
    }
    fn on_recovery_end(&mut self, now: Instant) {
        self.inner.on_recovery_end(now);
    }
    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.inner.on_rto(now, in_flight);
    }
    fn cwnd(&self) -> u64 {
        self.inner.cwnd()
    }
    fn ssthresh(&self) -> u64 {
        self.inner.ssthresh()
    }
    fn pacing_rate(&self) -> Option<Bps> {
        self.inner.pacing_rate()
    }
    fn state(&self) -> &'static str {
        self.inner.state()
    }
    fn on_handover_report(&mut self, now: Instant) {
        self.inner.on_handover_report(now);
    }
    fn undo(&mut self, now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        self.inner.undo(now, prior_cwnd, prior_ssthresh);
    }
    fn owns_recovery_window(&self) -> bool {
        self.inner.owns_recovery_window()
    }
    fn on_packet_delivered(&mut self, now: Instant, sent_at: Instant, bytes: u64, rtt: Option<Duration>) {
        self.inner.on_packet_delivered(now, sent_at, bytes, rtt);
    }
    fn on_packet_lost(&mut self, now: Instant, sent_at: Instant, bytes: u64) {
        self.inner.on_packet_lost(now, sent_at, bytes);
    }
    fn wants_packet_events(&self) -> bool {
        self.inner.wants_packet_events()
    }
    fn set_hystart(&mut self, on: bool) {
        self.inner.set_hystart(on);
    }
}
