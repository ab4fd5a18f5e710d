//! Congestion control behind one narrow trait (STYLE.md rule 5), one file per algorithm, names mapped
//! to configurations in one registry ([`build`]). Every hook takes `now`.
//!
//! The TCP sender owns loss detection, RTT estimation and delivery-rate sampling; a controller only
//! turns those signals into a congestion window and, where it wants one, a pacing rate.

use leoguard_core::{Bps, Duration, Instant};
use std::fmt::Debug;

pub mod bbr;
pub mod cubic;
pub mod hybla;
pub mod newreno;
pub mod pcc;
pub mod pcc_allegro;
pub mod pcc_vivace;
pub mod satcp;
pub mod startcp;

/// What the sender knows when new data is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckEvent {
    /// Bytes newly acknowledged (cumulatively or by SACK) by this ACK.
    pub bytes_acked: u64,
    /// Bytes in flight before this ACK was processed.
    pub prior_in_flight: u64,
    /// Bytes in flight after it.
    pub in_flight: u64,
    /// Bytes newly marked lost while this ACK was processed (Linux `rs->losses`, in bytes).
    pub lost_bytes: u64,
    /// The latest RTT sample, if this ACK gave one (Karn's rule: none for retransmitted data).
    pub rtt: Option<Duration>,
    /// Smoothed RTT (RFC 6298).
    pub srtt: Duration,
    /// Minimum RTT seen on the connection.
    pub min_rtt: Duration,
    /// Delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation), if any.
    pub rate: Option<RateSample>,
    /// True while the sender is in fast recovery (ACKs during recovery must not grow cwnd for
    /// NewReno/CUBIC).
    pub in_recovery: bool,
    /// Whether the window limited sending lately (Linux `tcp_is_cwnd_limited`): window-based
    /// controllers grow only then, so an application-limited or stalled sender does not inflate it.
    pub cwnd_limited: bool,
}

#[cfg(test)]
impl AckEvent {
    /// (Tests) an ACK of `bytes` with an RTT sample of `rtt` (also the smoothed and minimum RTT),
    /// nothing left in flight, no rate sample, outside recovery.
    pub(crate) fn sample(bytes: u64, rtt: Duration) -> AckEvent {
        AckEvent {
            bytes_acked: bytes,
            prior_in_flight: 0,
            in_flight: 0,
            lost_bytes: 0,
            rtt: Some(rtt),
            srtt: rtt,
            min_rtt: rtt,
            rate: None,
            in_recovery: false,
            cwnd_limited: true,
        }
    }
}

/// One delivery-rate sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// The sampling interval (max of send and ACK intervals).
    pub interval: Duration,
    /// Total bytes delivered on the connection when the sample's packet was sent (BBR's round counting).
    pub prior_delivered: u64,
    /// Total bytes delivered on the connection now.
    pub total_delivered: u64,
    /// Whether the sender was application-limited when the packet was sent.
    pub is_app_limited: bool,
}

impl RateSample {
    /// delivered / interval, or `None` for an empty interval.
    pub fn rate(&self) -> Option<Bps> {
        let ns = self.interval.as_nanos();
        (ns > 0).then(|| Bps((u128::from(self.delivered) * 8 * 1_000_000_000 / u128::from(ns)) as u64))
    }
}

/// A congestion controller. `mss` is the sender's maximum segment size in bytes.
pub trait CongestionControl: Debug + Send {
    /// Registry name ("newreno", "cubic", "bbr").
    fn name(&self) -> &'static str;
    /// A segment of `bytes` left the sender at `now` with `in_flight` bytes outstanding after it.
    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64);
    /// New data was acknowledged.
    fn on_ack(&mut self, now: Instant, ack: &AckEvent);
    /// Loss was detected (fast retransmit / SACK loss marking) and the sender enters recovery; called
    /// once per recovery episode. `in_flight` is the bytes in flight at detection.
    fn on_congestion_event(&mut self, now: Instant, in_flight: u64);
    /// The sender left fast recovery (all data outstanding at its start is acknowledged).
    fn on_recovery_end(&mut self, now: Instant);
    /// The retransmission timer fired (RFC 5681: cwnd to one segment, ssthresh from flight size).
    fn on_rto(&mut self, now: Instant, in_flight: u64);
    /// Congestion window, bytes.
    fn cwnd(&self) -> u64;
    /// Slow-start threshold, bytes (`u64::MAX` when unset).
    fn ssthresh(&self) -> u64;
    /// Pacing rate, if the algorithm paces (BBR always; others may return `None`).
    fn pacing_rate(&self) -> Option<Bps>;
    /// A short state label for telemetry (e.g. "slow_start", "probe_bw").
    fn state(&self) -> &'static str;
    /// The link layer predicts a handover (SaTCP's cross-layer report, about 0.5 s ahead). Only
    /// handover-aware controllers act on it.
    fn on_handover_report(&mut self, _now: Instant) {}
    /// The last reduction was spurious (every retransmission DSACKed, Eifel, F-RTO): return to the
    /// window and threshold before it (Linux `tcp_undo_cwnd_reduction` with `tcp_reno_undo_cwnd`:
    /// cwnd = max(cwnd, prior_cwnd), ssthresh = max(ssthresh, prior_ssthresh)).
    fn undo(&mut self, _now: Instant, _prior_cwnd: u64, _prior_ssthresh: u64) {}
    /// Whether the controller sets its own window during recovery (Linux's `cong_control`, BBR); the
    /// sender then does not apply PRR.
    fn owns_recovery_window(&self) -> bool {
        false
    }
    /// A segment of `bytes` sent (or last resent) at `sent_at` was delivered, cumulatively or by SACK;
    /// `rtt` is its RTT sample (none for a retransmission, Karn's rule). Called for each such segment
    /// before the ACK's [`CongestionControl::on_ack`]; a segment marked lost and delivered before it
    /// was resent is not reported (its loss was). Rate-based controllers (PCC) attribute it to the
    /// monitor interval it was sent in; window-based ones ignore it.
    fn on_packet_delivered(&mut self, _now: Instant, _sent_at: Instant, _bytes: u64, _rtt: Option<Duration>) {}
    /// A segment of `bytes` sent (or last resent) at `sent_at` was marked lost (RACK, DupThresh or the
    /// retransmission timer).
    fn on_packet_lost(&mut self, _now: Instant, _sent_at: Instant, _bytes: u64) {}
    /// The connection's handshake measured `srtt` before any data was sent (Linux calls the
    /// controller's `init` after `tcp_init_transfer`, when the handshake's RTT is known: BBR's
    /// `bbr_init_pacing_rate_from_rtt` paces the first window by it).
    fn on_handshake_rtt(&mut self, _now: Instant, _srtt: Duration) {}
    /// Switches HyStart (slow start's early exit) on or off where the controller has it (CUBIC and
    /// what is built on it); others ignore it. Called once when the sender is built.
    fn set_hystart(&mut self, _on: bool) {}
    /// Whether the controller wants [`CongestionControl::on_packet_delivered`] and
    /// [`CongestionControl::on_packet_lost`]; asked once when the sender is built, so window-based
    /// controllers cost nothing per segment.
    fn wants_packet_events(&self) -> bool {
        false
    }
}

/// Names accepted by [`build`].
pub const ALGORITHMS: &[&str] = &["newreno", "cubic", "bbr", "satcp", "startcp", "hybla", "pcc-allegro", "pcc-vivace"];

/// Unknown algorithm name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown congestion control '{0}' (known: {known})", known = ALGORITHMS.join(", "))]
pub struct UnknownAlgorithm(pub String);

/// The registry: builds a controller by name for a sender with maximum segment size `mss` and an
/// initial window of `init_cwnd_segments` (Linux: 10).
pub fn build(name: &str, mss: u64, init_cwnd_segments: u64) -> Result<Box<dyn CongestionControl>, UnknownAlgorithm> {
    match name {
        "newreno" | "reno" => Ok(Box::new(newreno::NewReno::new(mss, init_cwnd_segments))),
        "cubic" => Ok(Box::new(cubic::Cubic::new(mss, init_cwnd_segments))),
        "bbr" => Ok(Box::new(bbr::Bbr::new(mss, init_cwnd_segments))),
        "satcp" => Ok(Box::new(satcp::Satcp::new(mss, init_cwnd_segments))),
        // StarTCP over BBR (the paper's §3); other bases: `startcp::build_cc`.
        "startcp" => Ok(Box::new(startcp::StartcpCc::new(Box::new(bbr::Bbr::new(mss, init_cwnd_segments))))),
        "hybla" => Ok(Box::new(hybla::Hybla::new(mss, init_cwnd_segments))),
        // Seed 0, as BBR's: deterministic; `with_seed` gives a flow its own stream.
        "pcc-allegro" => Ok(Box::new(pcc_allegro::Allegro::new(mss, init_cwnd_segments))),
        "pcc-vivace" => Ok(Box::new(pcc_vivace::Vivace::new(mss, init_cwnd_segments))),
        other => Err(UnknownAlgorithm(other.to_string())),
    }
}
