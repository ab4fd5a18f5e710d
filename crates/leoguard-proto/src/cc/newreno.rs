//! NewReno (RFC 5681 congestion control, RFC 6582 recovery) as Linux's Reno does it: slow start with
//! appropriate byte counting (RFC 3465, L = 2·MSS), additive increase by byte counting
//! (`tcp_cong_avoid_ai`), multiplicative decrease to half the flight size, one segment after an RTO.
//!
//! The sender owns fast retransmit and the recovery episode; this controller only keeps the window.

use super::{AckEvent, CongestionControl};
use leoguard_core::{Bps, Instant};

/// RFC 3465 §2.2: the slow-start increase per ACK is capped at L·SMSS with L = 2.
const ABC_LIMIT_SEGMENTS: u64 = 2;

/// The NewReno congestion controller.
#[derive(Clone, Debug)]
pub struct NewReno {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance not yet turned into window (Linux `snd_cwnd_cnt`).
    ca_acked: u64,
    in_recovery: bool,
}

impl NewReno {
    /// A controller for segments of `mss` bytes starting at `init_cwnd_segments` segments (RFC 6928: 10).
    pub fn new(mss: u64, init_cwnd_segments: u64) -> NewReno {
        let mss = mss.max(1);
        NewReno { mss, cwnd: init_cwnd_segments.max(1) * mss, ssthresh: u64::MAX, ca_acked: 0, in_recovery: false }
    }

    /// RFC 5681 eq. (4): ssthresh = max(FlightSize / 2, 2·SMSS).
    fn halved(&self, in_flight: u64) -> u64 {
        (in_flight / 2).max(2 * self.mss)
    }

    /// Slow start (Linux `tcp_slow_start`): grow by the bytes acked, capped per ACK by RFC 3465 and at
    /// ssthresh; returns the acked bytes left over for congestion avoidance.
    fn slow_start(&mut self, acked: u64) -> u64 {
        let inc = acked.min(ABC_LIMIT_SEGMENTS * self.mss);
        let new = (self.cwnd + inc).min(self.ssthresh);
        let used = new - self.cwnd;
        self.cwnd = new;
        // Only the part of the ACK that crossed ssthresh continues in congestion avoidance.
        acked.saturating_sub(used).min(inc.saturating_sub(used))
    }

    /// Congestion avoidance (Linux `tcp_cong_avoid_ai` in bytes): one MSS per cwnd of bytes acked,
    /// i.e. RFC 5681 eq. (3) cwnd += SMSS·SMSS/cwnd per ACK without its rounding error.
    fn congestion_avoidance(&mut self, acked: u64) {
        self.ca_acked += acked;
        if self.ca_acked >= self.cwnd {
            let steps = self.ca_acked / self.cwnd;
            self.ca_acked -= steps * self.cwnd;
            self.cwnd += steps * self.mss;
        }
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn on_sent(&mut self, _now: Instant, _bytes: u64, _in_flight: u64) {}

    fn on_ack(&mut self, _now: Instant, ack: &AckEvent) {
        // RFC 6582 §3.2: the window is not grown during fast recovery (the sender inflates it).
        // Linux `tcp_reno_cong_avoid`: no growth unless the window limited sending.
        if ack.in_recovery || ack.bytes_acked == 0 || !ack.cwnd_limited {
            return;
        }
        let mut acked = ack.bytes_acked;
        if self.cwnd < self.ssthresh {
            acked = self.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.congestion_avoidance(acked);
    }

    fn on_congestion_event(&mut self, _now: Instant, in_flight: u64) {
        // RFC 5681 §3.2 step 2 and RFC 6582 §3.2 step 3 (Linux sets cwnd = ssthresh when PRR ends).
        self.ssthresh = self.halved(in_flight);
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
        self.in_recovery = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        // RFC 6582 §3.2 step 5: deflate to ssthresh (already there; keep it if the sender inflated).
        self.cwnd = self.cwnd.min(self.ssthresh.max(self.mss));
        self.in_recovery = false;
    }

    fn on_rto(&mut self, _now: Instant, in_flight: u64) {
        // RFC 5681 §3.1 eq. (4) and the loss window LW = 1 segment.
        self.ssthresh = self.halved(in_flight);
        self.cwnd = self.mss;
        self.ca_acked = 0;
        self.in_recovery = false;
    }

    fn undo(&mut self, _now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        self.cwnd = self.cwnd.max(prior_cwnd);
        self.ssthresh = self.ssthresh.max(prior_ssthresh);
        self.in_recovery = false;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
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
    use leoguard_core::Duration;

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(50);

    fn ack(bytes: u64, in_flight: u64) -> AckEvent {
        AckEvent { prior_in_flight: in_flight + bytes, in_flight, ..AckEvent::sample(bytes, RTT) }
    }

    /// One RTT of ACK clocking: every segment of the current window acked one by one.
    fn one_rtt(cc: &mut NewReno, now: &mut Instant) {
        let segs = cc.cwnd() / MSS;
        for i in 0..segs {
            cc.on_ack(*now, &ack(MSS, (segs - i - 1) * MSS));
        }
        *now += RTT;
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut cc = NewReno::new(MSS, 10);
        let mut now = Instant::ZERO;
        for expect in [20, 40, 80, 160] {
            one_rtt(&mut cc, &mut now);
            assert_eq!(cc.cwnd(), expect * MSS);
            assert_eq!(cc.state(), "slow_start");
        }
    }

    #[test]
    fn abc_caps_a_stretch_ack_at_two_segments() {
        let mut cc = NewReno::new(MSS, 10);
        cc.on_ack(Instant::ZERO, &ack(8 * MSS, 2 * MSS));
        assert_eq!(cc.cwnd(), 12 * MSS);
    }

    #[test]
    fn congestion_avoidance_grows_one_mss_per_rtt() {
        let mut cc = NewReno::new(MSS, 10);
        cc.on_congestion_event(Instant::ZERO, 80 * MSS);
        cc.on_recovery_end(Instant::ZERO);
        assert_eq!(cc.cwnd(), 40 * MSS);
        assert_eq!(cc.state(), "congestion_avoidance");
        let mut now = Instant::ZERO;
        for k in 1..=10 {
            one_rtt(&mut cc, &mut now);
            assert_eq!(cc.cwnd(), (40 + k) * MSS, "after {k} RTTs");
        }
    }

    #[test]
    fn loss_halves_flight_and_recovery_acks_do_not_grow() {
        let mut cc = NewReno::new(MSS, 10);
        let mut now = Instant::ZERO;
        for _ in 0..3 {
            one_rtt(&mut cc, &mut now);
        }
        assert_eq!(cc.cwnd(), 80 * MSS);
        cc.on_congestion_event(now, 80 * MSS);
        assert_eq!(cc.ssthresh(), 40 * MSS);
        assert_eq!(cc.cwnd(), 40 * MSS);
        assert_eq!(cc.state(), "recovery");
        let mut a = ack(MSS, 39 * MSS);
        a.in_recovery = true;
        for _ in 0..20 {
            cc.on_ack(now, &a);
        }
        assert_eq!(cc.cwnd(), 40 * MSS);
        cc.on_recovery_end(now);
        assert_eq!(cc.state(), "congestion_avoidance");
        // A tiny flight still leaves two segments.
        cc.on_congestion_event(now, MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
    }

    #[test]
    fn rto_collapses_to_one_mss_then_slow_starts_to_ssthresh() {
        let mut cc = NewReno::new(MSS, 10);
        let mut now = Instant::ZERO;
        for _ in 0..2 {
            one_rtt(&mut cc, &mut now);
        }
        cc.on_rto(now, 40 * MSS);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), 20 * MSS);
        assert_eq!(cc.state(), "slow_start");
        for _ in 0..5 {
            one_rtt(&mut cc, &mut now);
        }
        // 1, 2, 4, 8, 16, then capped at ssthresh = 20 and continuing linearly.
        assert_eq!(cc.cwnd(), 20 * MSS);
        assert_eq!(cc.state(), "congestion_avoidance");
    }
}
