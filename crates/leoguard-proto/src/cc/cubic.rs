//! CUBIC (RFC 9438) with the semantics of Linux `net/ipv4/tcp_cubic.c`: β = 0.7, C = 0.4, fast
//! convergence, the TCP-friendly (Reno-estimate) region, per-ACK growth through Linux's `cnt`, and
//! HyStart (ACK-train and delay-increase detection) to leave slow start early.
//!
//! The window is kept in bytes for the trait; the cubic curve is evaluated in segments and seconds,
//! which is the only place floats appear (STYLE.md rule 2).

use super::{AckEvent, CongestionControl};
use leoguard_core::{Bps, Duration, Instant};

/// RFC 9438 §4.6 / Linux `beta = 717/1024`: multiplicative decrease factor.
const BETA: f64 = 0.7;
/// RFC 9438 §4.2 / Linux `bic_scale = 41` (41·10/1024 ≈ 0.4): cubic scaling constant, segments/s³.
const C: f64 = 0.4;
/// RFC 9438 §4.3: α_cubic = 3(1-β)/(1+β), the Reno-estimate additive increase per RTT.
const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// Linux `hystart_low_window`: HyStart only acts once cwnd reaches 16 segments.
const HYSTART_LOW_WINDOW: u64 = 16;
/// Linux `HYSTART_MIN_SAMPLES`: RTT samples per round before the delay test may fire.
const HYSTART_MIN_SAMPLES: u32 = 8;
/// Linux `HYSTART_DELAY_MIN`: lower clamp of the delay-increase threshold.
const HYSTART_DELAY_MIN: Duration = Duration::from_millis(4);
/// Linux `HYSTART_DELAY_MAX`: upper clamp of the delay-increase threshold.
const HYSTART_DELAY_MAX: Duration = Duration::from_millis(16);
/// Linux `hystart_ack_delta_us`: ACKs closer than this belong to one ACK train.
const HYSTART_ACK_DELTA: Duration = Duration::from_millis(2);
/// Linux `cubictcp_acked`: delay samples within 1 s (HZ) of an epoch start are discarded.
const DELAY_SAMPLE_HOLDOFF: Duration = Duration::from_secs(1);

/// HyStart's per-round state (Linux `bictcp_hystart_reset`).
#[derive(Clone, Debug)]
struct HyStart {
    enabled: bool,
    /// An exit point was found; HyStart stays off until the next RTO (Linux `ca->found`).
    found: bool,
    round_start: Instant,
    last_ack: Instant,
    /// Bytes sent when the round started; the round ends once they are all acknowledged.
    end_seq: u64,
    /// Minimum RTT among this round's first samples (Linux `curr_rtt`).
    curr_rtt: Option<Duration>,
    sample_cnt: u32,
}

/// The CUBIC congestion controller.
#[derive(Clone, Debug)]
pub struct Cubic {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Window growth accumulator in bytes (Linux `snd_cwnd_cnt`, per segment acked).
    cwnd_acked: u64,
    /// Segments to be acked per one-segment increase (Linux `ca->cnt`).
    cnt: u64,
    /// W_max in segments before the last reduction, after fast convergence (Linux `last_max_cwnd`).
    w_last_max: f64,
    /// Start of the current congestion-avoidance epoch (None until the first ACK after a reduction).
    epoch_start: Option<Instant>,
    /// K in seconds for this epoch.
    k: f64,
    /// W_max (the plateau) of this epoch, segments (Linux `bic_origin_point`).
    origin: f64,
    /// Reno-estimate window, segments (RFC 9438 §4.3 W_est, Linux `tcp_cwnd`).
    w_est: f64,
    /// Minimum RTT seen by CUBIC (Linux `delay_min`), forgotten on RTO like Linux's `bictcp_reset`.
    delay_min: Option<Duration>,
    hystart: HyStart,
    in_recovery: bool,
    /// In Linux's Loss state (after a timeout, until the sender leaves it).
    in_loss: bool,
    /// Total bytes handed to `on_sent` and acknowledged: HyStart's stand-in for snd_nxt / snd_una.
    sent_total: u64,
    acked_total: u64,
    last_send: Option<Instant>,
    /// Divides K of an epoch that starts while set (SaTCP's fast return to W_max; 1 = plain CUBIC).
    pub(crate) k_divisor: f64,
}

impl Cubic {
    /// CUBIC with HyStart on (the Linux default).
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Cubic {
        Cubic::with_hystart(mss, init_cwnd_segments, true)
    }

    /// CUBIC with HyStart switched on or off.
    pub fn with_hystart(mss: u64, init_cwnd_segments: u64, hystart: bool) -> Cubic {
        let mss = mss.max(1);
        Cubic {
            mss,
            cwnd: init_cwnd_segments.max(1) * mss,
            ssthresh: u64::MAX,
            cwnd_acked: 0,
            cnt: 2,
            w_last_max: 0.0,
            epoch_start: None,
            k: 0.0,
            origin: 0.0,
            w_est: 0.0,
            delay_min: None,
            hystart: HyStart {
                enabled: hystart,
                found: false,
                round_start: Instant::ZERO,
                last_ack: Instant::ZERO,
                end_seq: 0,
                curr_rtt: None,
                sample_cnt: 0,
            },
            in_recovery: false,
            in_loss: false,
            sent_total: 0,
            acked_total: 0,
            last_send: None,
            k_divisor: 1.0,
        }
    }

    /// W_max of the last reduction in segments (after fast convergence).
    pub fn w_last_max_segments(&self) -> f64 {
        self.w_last_max
    }

    /// K of the current epoch in seconds (zero before the first epoch).
    pub fn k_secs(&self) -> f64 {
        self.k
    }

    fn cwnd_segments(&self) -> f64 {
        self.cwnd as f64 / self.mss as f64
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Linux `bictcp_hystart_reset`: a new HyStart round begins at `now`.
    fn hystart_reset(&mut self, now: Instant) {
        let h = &mut self.hystart;
        h.round_start = now;
        h.last_ack = now;
        h.end_seq = self.sent_total;
        h.curr_rtt = None;
        h.sample_cnt = 0;
    }

    /// HyStart found the exit: slow start ends with ssthresh at the current window.
    fn hystart_exit(&mut self) {
        self.hystart.found = true;
        self.ssthresh = self.cwnd;
    }

    /// Linux `hystart_update`: ACK-train and delay-increase detection for one RTT sample.
    fn hystart_update(&mut self, now: Instant, delay: Duration, delay_min: Duration) {
        if self.acked_total > self.hystart.end_seq {
            self.hystart_reset(now);
        }
        // ACK train: closely spaced ACKs stretching over more than min_rtt/2 mean the window already
        // fills the pipe (Linux halves the threshold when the sender does not pace).
        if now.saturating_duration_since(self.hystart.last_ack) <= HYSTART_ACK_DELTA {
            self.hystart.last_ack = now;
            let threshold = Duration(delay_min.as_nanos() / 2);
            if now.saturating_duration_since(self.hystart.round_start) > threshold {
                self.hystart_exit();
                return;
            }
        }
        // Delay increase: the round's minimum RTT over the first 8 samples exceeds the connection's
        // minimum by clamp(min_rtt/8, 4 ms, 16 ms).
        let h = &mut self.hystart;
        if h.curr_rtt.is_none_or(|c| c > delay) {
            h.curr_rtt = Some(delay);
        }
        if h.sample_cnt < HYSTART_MIN_SAMPLES {
            h.sample_cnt += 1;
        } else {
            let eta = Duration(delay_min.as_nanos() / 8).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX);
            if h.curr_rtt.is_some_and(|c| c > delay_min + eta) {
                self.hystart_exit();
            }
        }
    }

    /// Linux `cubictcp_acked`: track the minimum delay and feed HyStart.
    fn on_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        // Right after a reduction the queue is still draining; Linux ignores those samples.
        if self.epoch_start.is_some_and(|e| now.saturating_duration_since(e) < DELAY_SAMPLE_HOLDOFF) {
            return;
        }
        let delay = rtt.max(Duration(1));
        let delay_min = match self.delay_min {
            Some(d) if d <= delay => d,
            _ => delay,
        };
        self.delay_min = Some(delay_min);
        if self.hystart.enabled
            && !self.hystart.found
            && self.in_slow_start()
            && self.cwnd >= HYSTART_LOW_WINDOW * self.mss
        {
            self.hystart_update(now, delay, delay_min);
        }
    }

    /// W_cubic(t) = C·(t-K)³ + W_max in segments, t in seconds since the epoch start (RFC 9438 eq. 1).
    pub fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.origin
    }

    /// Linux `bictcp_update`: recompute `cnt` from the cubic target one RTT ahead and the Reno estimate.
    fn update(&mut self, now: Instant, acked_segs: f64) {
        let cwnd = self.cwnd_segments();
        let epoch = match self.epoch_start {
            Some(e) => e,
            None => {
                // A new epoch starts at the first ACK after a reduction (RFC 9438 §4.2, Linux).
                self.epoch_start = Some(now);
                self.w_est = cwnd;
                if self.w_last_max <= cwnd {
                    self.k = 0.0;
                    self.origin = cwnd;
                } else {
                    // RFC 9438 eq. (2): K = cbrt((W_max - cwnd_epoch)/C).
                    self.k = ((self.w_last_max - cwnd) / C).cbrt() / self.k_divisor;
                    self.origin = self.w_last_max;
                }
                now
            }
        };
        // Linux evaluates the curve one minimum RTT ahead (RFC 9438 §4.2: W_cubic(t + RTT)).
        let rtt = self.delay_min.unwrap_or(Duration::ZERO);
        let t = now.saturating_duration_since(epoch).as_secs_f64() + rtt.as_secs_f64();
        let target = self.w_cubic(t);
        let mut cnt = if target > cwnd {
            (cwnd / (target - cwnd)).floor()
        } else {
            100.0 * cwnd // "very small increment"
        };
        // Linux: without any loss yet, grow at least 5 % per RTT.
        if self.w_last_max == 0.0 && cnt > 20.0 {
            cnt = 20.0;
        }
        // RFC 9438 §4.3 TCP-friendly region: W_est grows α_cubic segments per window acked; if Reno
        // would be ahead, grow at least as fast as it (Linux `tcp_friendliness`).
        self.w_est += ALPHA_CUBIC * acked_segs / cwnd;
        if self.w_est > cwnd {
            let max_cnt = (cwnd / (self.w_est - cwnd)).floor();
            cnt = cnt.min(max_cnt);
        }
        // Linux: at most one segment per two acked (1.5x per RTT).
        self.cnt = (cnt as u64).max(2);
    }

    /// Linux `tcp_cong_avoid_ai` with `cnt`: one segment per `cnt` segments acked, counted in bytes.
    fn cong_avoid_ai(&mut self, acked: u64) {
        let w = self.cnt.saturating_mul(self.mss);
        self.cwnd_acked += acked;
        if self.cwnd_acked >= w {
            let steps = self.cwnd_acked / w;
            self.cwnd_acked -= steps * w;
            self.cwnd += steps * self.mss;
        }
    }

    /// Linux `cubictcp_recalc_ssthresh`: end the epoch, remember W_max (fast convergence), return
    /// β·cwnd.
    fn recalc_ssthresh(&mut self) -> u64 {
        self.epoch_start = None;
        let cwnd = self.cwnd_segments();
        // RFC 9438 §4.7: a flow whose plateau keeps falling releases bandwidth to newcomers.
        self.w_last_max = if cwnd < self.w_last_max { cwnd * (1.0 + BETA) / 2.0 } else { cwnd };
        let reduced = (self.cwnd as f64 * BETA) as u64;
        reduced.max(2 * self.mss)
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn set_hystart(&mut self, on: bool) {
        self.hystart.enabled = on;
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        // Linux `cubictcp_cwnd_event(CA_EVENT_TX_START)`: after an idle period (nothing in flight)
        // shift the epoch by the idle time so the curve does not jump ahead.
        if in_flight <= bytes {
            if let (Some(epoch), Some(last)) = (self.epoch_start, self.last_send) {
                let idle = now.saturating_duration_since(last);
                self.epoch_start = Some((epoch + idle).min(now));
            }
        }
        self.sent_total += bytes;
        self.last_send = Some(now);
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.acked_total += ack.bytes_acked;
        if let Some(rtt) = ack.rtt {
            self.on_rtt_sample(now, rtt);
        }
        // Linux `cubictcp_cong_avoid`: no growth unless the window limited sending.
        if ack.in_recovery || ack.bytes_acked == 0 || !ack.cwnd_limited {
            return;
        }
        let mut acked = ack.bytes_acked;
        if self.in_slow_start() {
            // Linux `tcp_slow_start`: grow by the bytes acked up to ssthresh, carry the rest over.
            let new = (self.cwnd + acked).min(self.ssthresh);
            acked -= new - self.cwnd;
            self.cwnd = new;
            if acked == 0 {
                return;
            }
        }
        self.update(now, acked as f64 / self.mss as f64);
        self.cong_avoid_ai(acked);
    }

    fn on_congestion_event(&mut self, _now: Instant, _in_flight: u64) {
        // Linux reduces from cwnd (not flight size); PRR ends with cwnd = ssthresh.
        self.ssthresh = self.recalc_ssthresh();
        self.cwnd = self.ssthresh;
        self.cwnd_acked = 0;
        self.in_recovery = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.in_recovery = false;
        self.in_loss = false;
    }

    fn on_rto(&mut self, now: Instant, _in_flight: u64) {
        // Linux `tcp_enter_loss`: ssthresh is recomputed unless recovery already reduced it; then
        // `cubictcp_state(TCP_CA_Loss)` runs `bictcp_reset` (forgetting W_max and delay_min) and
        // `bictcp_hystart_reset`. A repeated timeout in the Loss state keeps the episode's ssthresh
        // (`tcp_enter_loss` calls `ssthresh()` only from Open/Disorder, or in Loss before any
        // retransmission timeout of it).
        if !self.in_recovery && !self.in_loss {
            self.ssthresh = self.recalc_ssthresh();
        }
        self.in_loss = true;
        self.cwnd = self.mss;
        self.cwnd_acked = 0;
        self.cnt = 2;
        self.w_last_max = 0.0;
        self.epoch_start = None;
        self.k = 0.0;
        self.origin = 0.0;
        self.w_est = 0.0;
        self.delay_min = None;
        self.hystart.found = false;
        self.hystart_reset(now);
        self.in_recovery = false;
    }

    fn undo(&mut self, _now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        // Linux: `tcp_reno_undo_cwnd` (CUBIC's undo since 4.13); the epoch restarts from the
        // restored window at the next ACK.
        self.cwnd = self.cwnd.max(prior_cwnd);
        self.ssthresh = self.ssthresh.max(prior_ssthresh);
        self.in_recovery = false;
        self.in_loss = false;
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
        } else if self.in_slow_start() {
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

    fn ack(bytes: u64, rtt: Duration) -> AckEvent {
        AckEvent::sample(bytes, rtt)
    }

    /// One RTT of ACK clocking: ACKs for one window spread evenly over the RTT, each releasing a new
    /// segment into a never-empty pipe.
    fn one_rtt(cc: &mut Cubic, now: &mut Instant, rtt: Duration) {
        let segs = cc.cwnd() / MSS;
        let gap = Duration(rtt.as_nanos() / segs.max(1));
        for _ in 0..segs {
            *now += gap;
            cc.on_ack(*now, &ack(MSS, rtt));
            cc.on_sent(*now, MSS, segs * MSS);
        }
    }

    /// A CUBIC in congestion avoidance right after a loss at `w_max` segments (HyStart off).
    fn after_loss_at(w_max: u64, now: Instant) -> Cubic {
        let mut cc = Cubic::with_hystart(MSS, w_max, false);
        cc.on_congestion_event(now, w_max * MSS);
        cc.on_recovery_end(now);
        cc
    }

    #[test]
    fn loss_reduces_to_seventy_percent() {
        let cc = after_loss_at(100, Instant::ZERO);
        assert_eq!(cc.cwnd(), 70 * MSS);
        assert_eq!(cc.ssthresh(), 70 * MSS);
        assert_eq!(cc.state(), "congestion_avoidance");
        assert!((cc.w_last_max_segments() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn k_matches_the_formula() {
        let mut cc = after_loss_at(100, Instant::ZERO);
        cc.on_ack(Instant::ZERO, &ack(MSS, Duration::from_millis(100)));
        let expect = (100.0 * (1.0 - BETA) / C).cbrt();
        assert!((cc.k_secs() - expect).abs() < 1e-9, "K {} vs {expect}", cc.k_secs());
        assert!((expect - 4.217).abs() < 1e-3);
    }

    #[test]
    fn window_follows_the_cubic_curve_and_regains_w_max_at_k() {
        // Long RTT and large window: the cubic region, not the Reno estimate, governs growth.
        let rtt = Duration::from_millis(100);
        let w_max = 1000;
        let mut now = Instant::from_secs_f64(10.0);
        let mut cc = after_loss_at(w_max, now);
        let start = now;
        let k = (w_max as f64 * (1.0 - BETA) / C).cbrt();
        let mut reached_at = None;
        while now.saturating_duration_since(start).as_secs_f64() < 1.5 * k {
            one_rtt(&mut cc, &mut now, rtt);
            let t = now.saturating_duration_since(start).as_secs_f64();
            let w = cc.cwnd() as f64 / MSS as f64;
            let curve = C * (t - k).powi(3) + w_max as f64;
            // The epoch starts at the first ACK, one ACK gap after `start`; allow 2 % + 2 segments.
            assert!((w - curve).abs() <= 0.02 * curve + 2.0, "t={t:.2} w={w:.1} curve={curve:.1}");
            if reached_at.is_none() && cc.cwnd() >= w_max * MSS {
                reached_at = Some(t);
            }
        }
        let reached = reached_at.expect("W_max re-reached");
        assert!((reached - k).abs() < 0.15 * k, "reached W_max at {reached:.2}s, K={k:.2}s");
    }

    #[test]
    fn fast_convergence_lowers_w_last_max() {
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(100, now);
        one_rtt(&mut cc, &mut now, Duration::from_millis(20));
        let w = cc.cwnd() as f64 / MSS as f64;
        assert!(w < 100.0);
        cc.on_congestion_event(now, cc.cwnd());
        let expect = w * (1.0 + BETA) / 2.0;
        assert!((cc.w_last_max_segments() - expect).abs() < 1e-9);
        assert!(cc.w_last_max_segments() < w);
    }

    #[test]
    fn reno_region_dominates_at_small_windows_and_short_rtts() {
        // W_max = 10 segments, RTT 1 ms: the cubic curve barely moves in a few hundred RTTs, while
        // the Reno estimate grows by α ≈ 0.53 segments per RTT.
        let rtt = Duration::from_millis(1);
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(10, now);
        for _ in 0..100 {
            one_rtt(&mut cc, &mut now, rtt);
        }
        let w = cc.cwnd() as f64 / MSS as f64;
        let t = now.as_secs_f64();
        let k = (10.0 * (1.0 - BETA) / C).cbrt();
        let curve = C * (t - k).powi(3) + 10.0;
        assert!(curve < 10.0);
        assert!(w > 7.0 + 0.4 * ALPHA_CUBIC * 100.0, "w={w}");
    }

    #[test]
    fn hystart_delay_increase_exits_slow_start() {
        let base = Duration::from_millis(100);
        // ACKs 3 ms apart never form an ACK train, so only the delay test can fire.
        let run = |bump: Duration| {
            let mut cc = Cubic::new(MSS, 16);
            let mut now = Instant::ZERO;
            for round in 0..4u64 {
                let segs = cc.cwnd() / MSS;
                cc.on_sent(now, segs * MSS, segs * MSS);
                let rtt = if round >= 2 { base + bump } else { base };
                for _ in 0..segs {
                    now += Duration::from_millis(3);
                    cc.on_ack(now, &ack(MSS, rtt));
                    if cc.state() != "slow_start" {
                        return Some((round, cc.cwnd(), cc.ssthresh()));
                    }
                }
            }
            None
        };
        // Threshold: clamp(100 ms / 8, 4, 16) = 12.5 ms.
        let (round, cwnd, ssthresh) = run(Duration::from_millis(13)).expect("HyStart exit");
        assert_eq!(round, 2);
        assert_eq!(cwnd, ssthresh);
        assert_eq!(run(Duration::from_millis(12)), None);
        // Switched off, the same delay rise does not end slow start.
        let mut cc = Cubic::with_hystart(MSS, 16, false);
        let mut now = Instant::ZERO;
        for _ in 0..3 {
            one_rtt(&mut cc, &mut now, base + Duration::from_millis(30));
        }
        assert_eq!(cc.state(), "slow_start");
    }

    #[test]
    fn hystart_ack_train_exits_slow_start() {
        // A 20 ms path whose ACKs arrive 0.5 ms apart: the train passes min_rtt/2 = 10 ms once the
        // window exceeds 20 segments, so slow start ends at 32 segments instead of growing on.
        let rtt = Duration::from_millis(20);
        let mut cc = Cubic::new(MSS, 16);
        let mut now = Instant::ZERO;
        for _ in 0..4 {
            let segs = cc.cwnd() / MSS;
            cc.on_sent(now, segs * MSS, segs * MSS);
            for _ in 0..segs {
                now += Duration::from_micros(500);
                cc.on_ack(now, &ack(MSS, rtt));
            }
            now += rtt;
        }
        assert_eq!(cc.state(), "congestion_avoidance");
        assert!(cc.ssthresh() <= 64 * MSS && cc.ssthresh() > 16 * MSS, "ssthresh {}", cc.ssthresh());
    }

    #[test]
    fn rto_resets_to_one_segment_and_forgets_the_epoch() {
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(100, now);
        one_rtt(&mut cc, &mut now, Duration::from_millis(20));
        cc.on_rto(now, cc.cwnd());
        assert_eq!(cc.cwnd(), MSS);
        assert!(cc.ssthresh() >= 2 * MSS && cc.ssthresh() < 70 * MSS);
        assert_eq!(cc.state(), "slow_start");
        assert_eq!(cc.w_last_max_segments(), 0.0);
    }

    #[test]
    fn idle_shifts_the_epoch() {
        let rtt = Duration::from_millis(20);
        let mut now = Instant::ZERO;
        let mut a = after_loss_at(100, now);
        let mut b = a.clone();
        for _ in 0..10 {
            one_rtt(&mut a, &mut now, rtt);
        }
        let mut now_b = Instant::ZERO;
        for _ in 0..5 {
            one_rtt(&mut b, &mut now_b, rtt);
        }
        // Ten seconds idle: without the shift the curve would have jumped far past W_max.
        now_b += Duration::from_secs(10);
        b.on_sent(now_b, MSS, MSS);
        for _ in 0..5 {
            one_rtt(&mut b, &mut now_b, rtt);
        }
        let diff = a.cwnd().abs_diff(b.cwnd());
        assert!(diff <= 2 * MSS, "a {} b {}", a.cwnd(), b.cwnd());
    }
}
