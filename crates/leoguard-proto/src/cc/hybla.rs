//! TCP Hybla (Caini & Firrincieli, IJSCN 2004; a baseline of LEOTP, REFERENCE.md "Baselines LEOTP
//! uses") as Linux `net/ipv4/tcp_hybla.c` does it: the window grows as a TCP with a reference RTT
//! `RTT0` (25 ms) would, whatever the path's RTT.
//!
//! - rho = max(SRTT / RTT0, 1), kept in eighths (Linux `rho_3ls`) and recomputed only when the SRTT
//!   is the lowest seen so far (Linux `minrtt_us`): queueing delay does not inflate it.
//! - Slow start: cwnd += 2^rho - 1 segments per acknowledged segment, the fractional part of rho
//!   through Linux's table of 2^(k/8); the shift is clamped at 16 (Linux `min(rho, 16)`).
//! - Congestion avoidance: cwnd += rho^2 / cwnd per acknowledged segment, fractions carried over in
//!   1/128 of a segment (Linux `snd_cwnd_cents`), plus Linux's one segment per window of ACKs once
//!   rho^2 / cwnd rounds to nothing.
//! - Loss: as NewReno (ssthresh = max(flight / 2, 2 segments), one segment after an RTO).
//!
//! Choices that differ from Linux, for the sans-IO sender:
//! - Linux applies the increment once per ACK; here it is applied once per acknowledged segment (the
//!   Hybla paper's model, one ACK per segment), so delayed or stretched ACKs do not slow it down.
//! - Linux sets the initial window to rho from the handshake's RTT; the sender's initial window is
//!   kept here (no RTT is known when the controller is built).

use super::{AckEvent, CongestionControl};
use leoguard_core::{Bps, Duration, Instant};

/// Linux `rtt0` (module parameter, ms): the reference RTT Hybla equalises to.
pub const RTT0: Duration = Duration::from_millis(25);
/// Linux `snd_cwnd_clamp` set by `hybla_init`, segments.
const CWND_CLAMP: u64 = 65535;
/// Linux clamps the slow-start shift 2^rho at 2^16.
const MAX_SHIFT: u64 = 16;
/// 2^(k/8) in 1/128ths (Linux `fractions[]`), for rho's fractional eighths.
const FRACTIONS: [u64; 8] = [128, 139, 152, 165, 181, 197, 215, 234];
/// Fixed point of the increments: 1/128 of a segment (Linux's `>> 7`).
const ONE: u64 = 128;

/// The TCP Hybla congestion controller.
#[derive(Clone, Debug)]
pub struct Hybla {
    mss: u64,
    rtt0: Duration,
    /// Window, segments (Linux `snd_cwnd`).
    cwnd: u64,
    /// Fractions of a segment carried over, 1/128ths (Linux `snd_cwnd_cents`).
    cents: u64,
    /// ACKed segments since the window last grew (Linux `snd_cwnd_cnt`).
    cnt: u64,
    /// Slow-start threshold, segments (`u64::MAX` unset).
    ssthresh: u64,
    /// rho in eighths (Linux `rho_3ls`), at least 8 (rho >= 1).
    rho_3ls: u64,
    /// The lowest SRTT rho was computed from.
    min_srtt: Option<Duration>,
    /// Acknowledged bytes short of a whole segment, carried to the next ACK.
    carry: u64,
    in_recovery: bool,
}

impl Hybla {
    /// Hybla with the Linux reference RTT of 25 ms.
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Hybla {
        Hybla::with_rtt0(mss, init_cwnd_segments, RTT0)
    }

    /// Hybla equalising to reference RTT `rtt0` (Linux's `rtt0` module parameter).
    pub fn with_rtt0(mss: u64, init_cwnd_segments: u64, rtt0: Duration) -> Hybla {
        Hybla {
            mss: mss.max(1),
            rtt0: Duration(rtt0.as_nanos().max(1)),
            cwnd: init_cwnd_segments.max(1),
            cents: 0,
            cnt: 0,
            ssthresh: u64::MAX,
            rho_3ls: 8,
            min_srtt: None,
            carry: 0,
            in_recovery: false,
        }
    }

    /// rho, the RTT ratio the window equalises (>= 1).
    pub fn rho(&self) -> f64 {
        self.rho_3ls as f64 / 8.0
    }

    /// Linux `hybla_recalc_param`: rho_3ls = max(8 · SRTT / RTT0, 8), in integer eighths.
    fn recalc(&mut self, srtt: Duration) {
        let r = u128::from(srtt.as_nanos()) * 8 / u128::from(self.rtt0.as_nanos());
        self.rho_3ls = u64::try_from(r).unwrap_or(u64::MAX).max(8);
    }

    /// One acknowledged segment's growth (Linux `hybla_cong_avoid` body).
    fn grow_one(&mut self) {
        let rho = self.rho_3ls >> 3;
        let slow_start = self.cwnd < self.ssthresh;
        let increment = if slow_start {
            // INC = 2^rho - 1, in 1/128ths.
            ((1u64 << rho.min(MAX_SHIFT)) * FRACTIONS[(self.rho_3ls & 7) as usize]) - ONE
        } else {
            // INC = rho^2 / W, in 1/128ths: rho2_7ls = rho_3ls^2 << 1 = rho^2 · 128.
            let inc = ((self.rho_3ls * self.rho_3ls) << 1) / self.cwnd.max(1);
            if inc < ONE {
                self.cnt += 1;
            }
            inc
        };
        let odd = increment % ONE;
        self.cwnd += increment / ONE;
        self.cents += odd;
        while self.cents >= ONE {
            self.cwnd += 1;
            self.cents -= ONE;
            self.cnt = 0;
        }
        // Linux: a window that has not grown for a whole window of ACKs grows by one.
        if increment == 0 && odd == 0 && self.cnt >= self.cwnd {
            self.cwnd += 1;
            self.cnt = 0;
        }
        if slow_start {
            self.cwnd = self.cwnd.min(self.ssthresh);
        }
        self.cwnd = self.cwnd.min(CWND_CLAMP);
    }

    /// RFC 5681 eq. (4) in segments: max(FlightSize / 2, 2).
    fn halved(&self, in_flight: u64) -> u64 {
        (in_flight / 2 / self.mss).max(2)
    }
}

impl CongestionControl for Hybla {
    fn name(&self) -> &'static str {
        "hybla"
    }

    fn on_sent(&mut self, _now: Instant, _bytes: u64, _in_flight: u64) {}

    fn on_ack(&mut self, _now: Instant, ack: &AckEvent) {
        // Linux `hybla_cong_avoid`: rho is recomputed only from a new lowest SRTT.
        if ack.srtt > Duration::ZERO && self.min_srtt.is_none_or(|m| ack.srtt < m) {
            self.min_srtt = Some(ack.srtt);
            self.recalc(ack.srtt);
        }
        // Linux `hybla_state`: Hybla's growth only in the Open state; no growth in recovery (PRR
        // holds the window) nor when the window did not limit sending.
        if ack.in_recovery || ack.bytes_acked == 0 || !ack.cwnd_limited {
            return;
        }
        self.carry += ack.bytes_acked;
        let segments = self.carry / self.mss;
        self.carry %= self.mss;
        for _ in 0..segments {
            self.grow_one();
        }
    }

    fn on_congestion_event(&mut self, _now: Instant, in_flight: u64) {
        // Reno (Linux `tcp_reno_ssthresh`, with RFC 5681's flight size as the project's NewReno).
        self.ssthresh = self.halved(in_flight);
        self.cwnd = self.ssthresh;
        self.cents = 0;
        self.cnt = 0;
        self.in_recovery = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(self.ssthresh.max(1));
        self.in_recovery = false;
    }

    fn on_rto(&mut self, _now: Instant, in_flight: u64) {
        self.ssthresh = self.halved(in_flight);
        self.cwnd = 1;
        self.cents = 0;
        self.cnt = 0;
        self.in_recovery = false;
    }

    fn undo(&mut self, _now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        self.cwnd = self.cwnd.max(prior_cwnd / self.mss);
        if prior_ssthresh != u64::MAX {
            self.ssthresh = self.ssthresh.max(prior_ssthresh / self.mss);
        } else {
            self.ssthresh = u64::MAX;
        }
        self.in_recovery = false;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd * self.mss
    }

    fn ssthresh(&self) -> u64 {
        if self.ssthresh == u64::MAX {
            u64::MAX
        } else {
            self.ssthresh * self.mss
        }
    }

    fn pacing_rate(&self) -> Option<Bps> {
        None
    }

    fn state(&self) -> &'static str {
        if self.in_recovery {
            "recovery"
        } else if self.cwnd < self.ssthresh {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn ack(bytes: u64, srtt_ms: u64) -> AckEvent {
        AckEvent::sample(bytes, Duration::from_millis(srtt_ms))
    }

    /// A Hybla in congestion avoidance at `cwnd` segments, rho from `srtt_ms`.
    fn in_avoidance(cwnd: u64, srtt_ms: u64) -> Hybla {
        let mut h = Hybla::new(MSS, 10);
        h.on_congestion_event(Instant::ZERO, 2 * cwnd * MSS);
        h.on_recovery_end(Instant::ZERO);
        // An ACK outside the window's limit only sets rho.
        h.on_ack(Instant::ZERO, &AckEvent { cwnd_limited: false, ..ack(MSS, srtt_ms) });
        assert_eq!(h.cwnd(), cwnd * MSS);
        h
    }

    #[test]
    fn rho_is_srtt_over_rtt0_at_least_one_from_the_lowest_srtt() {
        let mut h = Hybla::new(MSS, 10);
        assert_eq!(h.rho(), 1.0);
        h.on_ack(Instant::ZERO, &ack(MSS, 10));
        assert_eq!(h.rho(), 1.0, "10 ms < RTT0: rho stays 1");
        h.on_ack(Instant::ZERO, &ack(MSS, 5));
        assert_eq!(h.rho(), 1.0);
        let mut h = Hybla::new(MSS, 10);
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.rho(), 4.0);
        // A larger SRTT (queueing) does not raise rho; a lower one lowers it.
        h.on_ack(Instant::ZERO, &ack(MSS, 300));
        assert_eq!(h.rho(), 4.0);
        h.on_ack(Instant::ZERO, &ack(MSS, 60));
        assert_eq!(h.rho(), 2.375, "60/25 = 2.4, floored to eighths: 19/8");
        // A 600 ms GEO-like path and a custom RTT0.
        let mut h = Hybla::with_rtt0(MSS, 10, Duration::from_millis(50));
        h.on_ack(Instant::ZERO, &ack(MSS, 600));
        assert_eq!(h.rho(), 12.0);
    }

    #[test]
    fn slow_start_adds_two_to_the_rho_minus_one_per_segment() {
        // rho = 4 (SRTT 100 ms): each acknowledged segment adds 2^4 - 1 = 15 segments.
        let mut h = Hybla::new(MSS, 10);
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.cwnd(), (10 + 15) * MSS);
        for k in 2..=5 {
            h.on_ack(Instant::ZERO, &ack(MSS, 100));
            assert_eq!(h.cwnd(), (10 + 15 * k) * MSS);
        }
        // A delayed ACK of two segments counts twice; half a segment is carried to the next ACK.
        h.on_ack(Instant::ZERO, &ack(2 * MSS, 100));
        assert_eq!(h.cwnd(), (10 + 15 * 7) * MSS);
        h.on_ack(Instant::ZERO, &ack(MSS / 2, 100));
        assert_eq!(h.cwnd(), (10 + 15 * 7) * MSS);
        h.on_ack(Instant::ZERO, &ack(MSS / 2, 100));
        assert_eq!(h.cwnd(), (10 + 15 * 8) * MSS);
        assert_eq!(h.state(), "slow_start");
    }

    #[test]
    fn slow_start_with_a_fractional_rho_uses_the_eighths_table_and_stops_at_ssthresh() {
        // SRTT 60 ms: rho = 19/8; 2^(19/8) = 4 · 2^(3/8) = 4 · 165/128 = 5.156; INC = 4.156 segments,
        // i.e. 4 segments and 20/128 carried per segment: after 7 segments 28 + 140/128 = 29 (12 left).
        let mut h = Hybla::new(MSS, 10);
        for _ in 0..7 {
            h.on_ack(Instant::ZERO, &ack(MSS, 60));
        }
        assert_eq!(h.cwnd(), (10 + 29) * MSS);
        assert_eq!(h.cents, 12);
        // rho = 1 (a short path): slow start is Reno's, one segment per segment.
        let mut h = Hybla::new(MSS, 10);
        for k in 1..=10 {
            h.on_ack(Instant::ZERO, &ack(MSS, 20));
            assert_eq!(h.cwnd(), (10 + k) * MSS);
        }
        // Slow start is clamped at ssthresh.
        let mut h = Hybla::new(MSS, 10);
        h.ssthresh = 40;
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.cwnd(), 40 * MSS);
        assert_eq!(h.state(), "congestion_avoidance");
    }

    #[test]
    fn the_slow_start_shift_is_clamped_at_sixteen() {
        // SRTT 1 s: rho = 40; Linux caps 2^rho at 2^16 and the window at 65535 segments.
        let mut h = Hybla::new(MSS, 10);
        h.on_ack(Instant::ZERO, &ack(MSS, 1000));
        assert_eq!(h.rho(), 40.0);
        assert_eq!(h.cwnd(), CWND_CLAMP * MSS);
    }

    #[test]
    fn avoidance_grows_rho_squared_over_cwnd_with_carried_fractions() {
        // rho = 4, cwnd = 100: each segment adds 16/100 = 2048/100 = 20 (1/128ths, floored), so the
        // first whole segment comes on the 7th ACKed segment (140 >= 128), carrying 12.
        let mut h = in_avoidance(100, 100);
        for k in 1..=6 {
            h.on_ack(Instant::ZERO, &ack(MSS, 100));
            assert_eq!(h.cwnd(), 100 * MSS, "after {k} segments");
        }
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.cwnd(), 101 * MSS);
        assert_eq!(h.cents, 12);
        // Over one window of ~100 segments the window grows by about rho^2 = 16 segments (vs Reno's 1).
        let mut h = in_avoidance(100, 100);
        for _ in 0..100 {
            h.on_ack(Instant::ZERO, &ack(MSS, 100));
        }
        let grown = h.cwnd() / MSS - 100;
        assert!((14..=16).contains(&grown), "{grown}");
        // rho = 1, cwnd = 50: 128/50 = 2 (floored) per segment, so Linux's Hybla takes 64 segments, not
        // Reno's 50, for the next one.
        let mut h = in_avoidance(50, 10);
        for _ in 0..63 {
            h.on_ack(Instant::ZERO, &ack(MSS, 10));
        }
        assert_eq!(h.cwnd(), 50 * MSS);
        h.on_ack(Instant::ZERO, &ack(MSS, 10));
        assert_eq!(h.cwnd(), 51 * MSS);
    }

    #[test]
    fn a_window_beyond_rho_squared_times_128_grows_by_the_window_rule() {
        // rho = 1, cwnd = 200: 128/200 rounds to 0; Linux counts ACKs and adds one per window.
        let mut h = in_avoidance(200, 10);
        for _ in 0..199 {
            h.on_ack(Instant::ZERO, &ack(MSS, 10));
        }
        assert_eq!(h.cwnd(), 200 * MSS);
        h.on_ack(Instant::ZERO, &ack(MSS, 10));
        assert_eq!(h.cwnd(), 201 * MSS);
    }

    #[test]
    fn loss_is_handled_as_reno_and_recovery_acks_do_not_grow() {
        let mut h = Hybla::new(MSS, 10);
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.cwnd(), 25 * MSS);
        h.on_congestion_event(Instant::ZERO, 24 * MSS);
        assert_eq!((h.cwnd(), h.ssthresh()), (12 * MSS, 12 * MSS));
        assert_eq!(h.state(), "recovery");
        h.on_ack(Instant::ZERO, &AckEvent { in_recovery: true, ..ack(MSS, 100) });
        assert_eq!(h.cwnd(), 12 * MSS);
        h.on_recovery_end(Instant::ZERO);
        assert_eq!(h.state(), "congestion_avoidance");
        h.undo(Instant::ZERO, 25 * MSS, u64::MAX);
        assert_eq!((h.cwnd(), h.ssthresh()), (25 * MSS, u64::MAX));
        h.on_rto(Instant::ZERO, 3 * MSS);
        assert_eq!((h.cwnd(), h.ssthresh()), (MSS, 2 * MSS));
        // After the timeout slow start resumes at 2^rho - 1 per segment, clamped at ssthresh.
        h.on_ack(Instant::ZERO, &ack(MSS, 100));
        assert_eq!(h.cwnd(), 2 * MSS);
        // An application-limited sender does not grow.
        let mut h = Hybla::new(MSS, 10);
        h.on_ack(Instant::ZERO, &AckEvent { cwnd_limited: false, ..ack(MSS, 100) });
        assert_eq!(h.cwnd(), 10 * MSS);
    }

    #[test]
    fn registered() {
        let c = crate::cc::build("hybla", MSS, 10).expect("registered");
        assert_eq!((c.name(), c.cwnd()), ("hybla", 10 * MSS));
    }
}
