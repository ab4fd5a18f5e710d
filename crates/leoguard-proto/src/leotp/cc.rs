//! LEOTP's hop-by-hop congestion control (REFERENCE.md "LEOTP"; the slides' "backpressure congestion
//! control"). Each hop's *requester* (the consumer, or a mid node toward its upstream) runs a
//! [`HopCc`] on the Data it receives and puts the resulting rate into its Interests; the hop's
//! *responder* (a mid node toward its downstream, or the producer) sends at that rate from a
//! [`TokenBucket`] refilled every 1 ms.
//!
//! - hopRTT = now - ts (the responder's echo; ms resolution, as on the wire); hop SRTT and RTTVAR
//!   with the 7/8 and 3/4 weights; the minimum hop RTT over `min_rtt_window` (10 s; paper 5 s).
//! - Throughput over windows of at least one hop SRTT, headers counted.
//! - Congestion signal: thr * (hopSRTT - minHopRTT) > M (3000 B), a standing queue of over M bytes.
//! - Slow start (Hybla-like): cwnd += acked * (2^min(5, hopSRTT / 30 ms) - 1), left on the signal or
//!   at cwnd >= 100; cwnd starts at 0.2 MSS, floor 0.2.
//! - Avoidance: on the signal, at most once per 2 hop SRTTs, cwnd = max(k * thr * minHopRTT / MSS,
//!   0.2) with k = 0.8; otherwise +1 per cwnd/10 MSS of data (paper: +1 per cwnd); when app-limited
//!   (thr < cwnd * MSS / (2 hopSRTT)) -0.1 per cwnd/2 MSS of data.
//! - Rate = cwnd * MSS / minHopRTT; at a mid node min(Rate, (BL_tar - queue) / hopSRTT + downstream
//!   requested rate); clamped to [0.1, 300] Mbit/s.

use super::config::{AdditiveIncrease, BackpressureSign, LeotpConfig};
use super::{bytes_per_s, ms_stamp};
use leoguard_core::{Duration, Instant};
use leoguard_wire::leotp::LEOTP_MTU;

/// Hop RTT samples above this are taken for a stale or foreign echo and ignored.
const MAX_HOP_RTT_MS: u32 = 60_000;
/// Sub-windows of the minimum-RTT filter.
const MIN_BUCKETS: usize = 10;
/// The minimum hop RTT used as a divisor is at least the timestamp resolution.
const RTT_FLOOR: Duration = Duration::from_millis(1);

/// The minimum of samples over a sliding window, kept as the minima of `MIN_BUCKETS` sub-windows
/// (bounded memory; the window is exact to one sub-window).
#[derive(Clone, Copy, Debug)]
struct WindowedMin {
    /// (sub-window index, minimum in it).
    buckets: [(u64, Duration); MIN_BUCKETS],
    width: u64,
}

impl WindowedMin {
    fn new(window: Duration) -> WindowedMin {
        WindowedMin {
            buckets: [(u64::MAX, Duration::ZERO); MIN_BUCKETS],
            width: (window.as_nanos() / MIN_BUCKETS as u64).max(1),
        }
    }

    fn insert(&mut self, now: Instant, v: Duration) {
        let idx = now.as_nanos() / self.width;
        let slot = &mut self.buckets[(idx % MIN_BUCKETS as u64) as usize];
        if slot.0 != idx {
            *slot = (idx, v);
        } else if v < slot.1 {
            slot.1 = v;
        }
    }

    fn get(&self, now: Instant) -> Option<Duration> {
        let idx = now.as_nanos() / self.width;
        self.buckets
            .iter()
            .filter(|(i, _)| *i != u64::MAX && *i <= idx && idx - *i < MIN_BUCKETS as u64)
            .map(|&(_, v)| v)
            .min()
    }
}

/// A requester's hop congestion controller.
#[derive(Clone, Debug)]
pub struct HopCc {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: WindowedMin,
    /// Last measured throughput, bytes/s (0 until the first window closes).
    thr: f64,
    win_start: Option<Instant>,
    win_bytes: u64,
    cwnd: f64,
    slow_start: bool,
    last_decrease: Option<Instant>,
    /// When this requester last sent an Interest (keep-alives count).
    pub(crate) last_interest: Option<Instant>,
}

impl HopCc {
    /// A controller in slow start at `cwnd_init`.
    pub fn new(cfg: &LeotpConfig) -> HopCc {
        HopCc {
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: WindowedMin::new(cfg.min_rtt_window),
            thr: 0.0,
            win_start: None,
            win_bytes: 0,
            cwnd: cfg.cwnd_init,
            slow_start: true,
            last_decrease: None,
            last_interest: None,
        }
    }

    /// Congestion window, MSS.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// Still in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Hop SRTT (none before the first sample).
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Minimum hop RTT over the window.
    pub fn min_rtt(&self, now: Instant) -> Option<Duration> {
        self.min_rtt.get(now)
    }

    /// Last measured throughput, bytes/s.
    pub fn throughput(&self) -> f64 {
        self.thr
    }

    /// thr * (hopSRTT - minHopRTT) > M: more than M bytes stand in the hop's queues.
    pub fn congested(&self, cfg: &LeotpConfig, now: Instant) -> bool {
        match (self.srtt, self.min_rtt.get(now)) {
            (Some(s), Some(m)) if self.thr > 0.0 => {
                self.thr * (s.as_secs_f64() - m.as_secs_f64()).max(0.0) > cfg.m_bytes
            }
            _ => false,
        }
    }

    /// Takes in one Data packet (or VPH) from the responder: `ts` is its echo, `wire_bytes` its size
    /// with the header, `payload` its data bytes (what counts as acknowledged for cwnd).
    ///
    /// Only Data with payload gives an RTT sample. A VPH is a header alone carrying the echo of the
    /// Data it replaces, so it crosses each link faster than that Data would have, and its samples
    /// pulled the min RTT below the Data's (end to end on Beijing-Hong Kong: 372-383 ms against 387),
    /// which kept `thr x (srtt - min RTT) > M` true and the rate falling (Table II's variant C).
    pub fn on_data(&mut self, cfg: &LeotpConfig, now: Instant, ts: u32, wire_bytes: usize, payload: usize) {
        let sample = ms_stamp(now).wrapping_sub(ts);
        if payload > 0 && sample <= MAX_HOP_RTT_MS {
            self.on_rtt(now, Duration::from_millis(u64::from(sample)));
        }
        // Throughput window: at least one hop SRTT long.
        let start = *self.win_start.get_or_insert(now);
        self.win_bytes += wire_bytes as u64;
        let elapsed = now.saturating_duration_since(start);
        if let Some(srtt) = self.srtt {
            if elapsed >= srtt.max(RTT_FLOOR) {
                self.thr = self.win_bytes as f64 / elapsed.as_secs_f64();
                self.win_start = Some(now);
                self.win_bytes = 0;
            }
        }
        if payload > 0 {
            self.on_acked(cfg, now, payload as f64 / f64::from(cfg.mss));
        }
    }

    /// One hop RTT sample.
    pub fn on_rtt(&mut self, now: Instant, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = Duration(rtt.0 / 2);
            }
            Some(s) => {
                let diff = s.0.abs_diff(rtt.0);
                self.rttvar = Duration((3 * self.rttvar.0 + diff) / 4);
                self.srtt = Some(Duration((7 * s.0 + rtt.0) / 8));
            }
        }
        self.min_rtt.insert(now, rtt);
    }

    /// The window update for `acked` MSS of data.
    fn on_acked(&mut self, cfg: &LeotpConfig, now: Instant, acked: f64) {
        let Some(srtt) = self.srtt else { return };
        let congested = self.congested(cfg, now);
        if self.slow_start {
            if congested {
                self.slow_start = false;
            } else {
                let exp = (srtt.as_secs_f64() / cfg.ss_rtt_unit.as_secs_f64()).min(cfg.ss_max_exp);
                self.cwnd += acked * (exp.exp2() - 1.0);
                if self.cwnd >= cfg.ss_exit_cwnd {
                    self.slow_start = false;
                }
                return;
            }
        }
        let two_srtt = Duration(srtt.0.saturating_mul(2));
        if congested {
            if self.last_decrease.is_none_or(|t| now.saturating_duration_since(t) >= two_srtt) {
                let min = self.min_rtt.get(now).unwrap_or(srtt);
                self.cwnd = (cfg.k * self.thr * min.as_secs_f64() / f64::from(cfg.mss)).max(cfg.cwnd_min);
                self.last_decrease = Some(now);
            }
            return;
        }
        let app_limited = self.thr * 2.0 * srtt.as_secs_f64().max(1e-3) < self.cwnd * f64::from(cfg.mss);
        if app_limited && self.thr > 0.0 {
            // -0.1 per cwnd/2 MSS of data.
            self.cwnd -= cfg.app_limited_decrease * acked / (self.cwnd / 2.0);
        } else {
            self.cwnd += match cfg.additive_increase {
                AdditiveIncrease::PerTenthCwnd => acked / (self.cwnd / 10.0),
                AdditiveIncrease::PerRtt => acked / self.cwnd,
            };
        }
        self.cwnd = self.cwnd.max(cfg.cwnd_min);
    }

    /// The controller's own rate, bytes/s: cwnd * MSS / minHopRTT, unclamped (the lowest rate
    /// before any RTT sample).
    pub fn cc_rate(&self, cfg: &LeotpConfig, now: Instant) -> f64 {
        match self.min_rtt.get(now).or(self.srtt) {
            Some(m) => self.cwnd * f64::from(cfg.mss) / m.max(RTT_FLOOR).as_secs_f64(),
            None => bytes_per_s(cfg.min_rate_bps),
        }
    }

    /// The rate to ask for at an endpoint, bit/s, clamped to [min_rate, max_rate].
    pub fn rate_bps(&self, cfg: &LeotpConfig, now: Instant) -> u64 {
        clamp_rate(cfg, self.cc_rate(cfg, now))
    }

    /// The rate a mid node asks for upstream, bit/s: min(own rate, backpressure term + the rate its
    /// downstream requester asks for), with `queue_bytes` waiting in its downstream queue.
    pub fn mid_rate_bps(&self, cfg: &LeotpConfig, now: Instant, queue_bytes: u64, downstream_bps: u64) -> u64 {
        let own = self.cc_rate(cfg, now);
        let rate = match self.srtt {
            Some(s) => {
                let backlog = match cfg.backpressure {
                    BackpressureSign::Code => cfg.bl_tar_bytes() - queue_bytes as f64,
                    BackpressureSign::Paper => queue_bytes as f64 - cfg.bl_tar_bytes(),
                };
                own.min(backlog / s.max(RTT_FLOOR).as_secs_f64() + bytes_per_s(downstream_bps))
            }
            None => own,
        };
        clamp_rate(cfg, rate)
    }

    /// When a keep-alive is due: 0.9 hop SRTT after the last Interest (none before an RTT sample or
    /// an Interest).
    pub fn keepalive_at(&self, cfg: &LeotpConfig) -> Option<Instant> {
        let srtt = self.srtt?;
        let last = self.last_interest?;
        Some(last + Duration::from_secs_f64(srtt.max(RTT_FLOOR).as_secs_f64() * cfg.keepalive_srtt))
    }
}

/// Bytes/s to bit/s within [min_rate, max_rate].
fn clamp_rate(cfg: &LeotpConfig, bytes_per_s: f64) -> u64 {
    let bps = if bytes_per_s.is_finite() { (bytes_per_s * 8.0).max(0.0) } else { 0.0 };
    (bps as u64).clamp(cfg.min_rate_bps, cfg.max_rate_bps)
}

/// A responder's token bucket: refilled at `rate` once per `interval` (1 ms), holding at most two
/// intervals' worth or two MTUs; a packet may go while the bucket is positive (it can dip below
/// zero by one packet, which the next refills repay, so the long-run rate is exact).
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    interval: Duration,
}

impl TokenBucket {
    /// A full bucket at `rate_bps`.
    pub fn new(now: Instant, rate_bps: u64, interval: Duration) -> TokenBucket {
        let mut b = TokenBucket { tokens: 0.0, last: now, rate: bytes_per_s(rate_bps), interval };
        b.tokens = b.cap();
        b
    }

    fn cap(&self) -> f64 {
        (2.0 * self.rate * self.interval.as_secs_f64()).max(2.0 * LEOTP_MTU as f64)
    }

    /// Sets the rate (bit/s) the requester asked for.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate = bytes_per_s(rate_bps);
    }

    /// The rate, bit/s.
    pub fn rate_bps(&self) -> u64 {
        (self.rate * 8.0) as u64
    }

    /// Adds the refills of every whole interval up to `now`.
    pub fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_nanos();
        let ticks = elapsed / self.interval.as_nanos();
        if ticks > 0 {
            self.tokens = (self.tokens + self.rate * self.interval.as_secs_f64() * ticks as f64).min(self.cap());
            self.last = Instant(self.last.as_nanos() + ticks * self.interval.as_nanos());
        }
    }

    /// Whether a packet may go now (after [`TokenBucket::refill`]).
    pub fn ready(&self) -> bool {
        self.tokens > 0.0
    }

    /// Takes `bytes` out.
    pub fn spend(&mut self, bytes: usize) {
        self.tokens -= bytes as f64;
    }

    /// The next refill instant.
    pub fn next_refill(&self) -> Instant {
        self.last + self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    /// A controller in avoidance with the given state (fields set directly: the numbers are then
    /// the formulas' and nothing else's).
    fn avoiding(cfg: &LeotpConfig, cwnd: f64, thr: f64, srtt_ms: u64, min_ms: u64) -> HopCc {
        let mut cc = HopCc::new(cfg);
        cc.min_rtt.insert(ms(1), Duration::from_millis(min_ms));
        cc.srtt = Some(Duration::from_millis(srtt_ms));
        cc.thr = thr;
        cc.cwnd = cwnd;
        cc.slow_start = false;
        cc
    }

    #[test]
    fn rtt_sample_from_the_echo_and_smoothing() {
        let cfg = LeotpConfig::default();
        let mut cc = HopCc::new(&cfg);
        assert_eq!(cc.cwnd(), 0.2);
        // Data arriving at 1060 ms with ts 1000: hop RTT 60 ms.
        cc.on_data(&cfg, ms(1060), 1000, 1472, 1453);
        assert_eq!(cc.srtt(), Some(Duration::from_millis(60)));
        assert_eq!(cc.rttvar, Duration::from_millis(30));
        // 7/8 and 3/4 weights: srtt = (7*60 + 20)/8 = 55, rttvar = (3*30 + 40)/4 = 32.5.
        cc.on_data(&cfg, ms(1080), 1060, 1472, 1453);
        assert_eq!(cc.srtt(), Some(Duration::from_millis(55)));
        assert_eq!(cc.rttvar, Duration::from_micros(32_500));
        assert_eq!(cc.min_rtt(ms(1080)), Some(Duration::from_millis(20)));
        // An echo from the future (or 60 s old) is no sample.
        cc.on_data(&cfg, ms(1081), 2000, 1472, 1453);
        assert_eq!(cc.srtt(), Some(Duration::from_millis(55)));
        // A VPH (no payload) is no sample: a 1 ms echo would move srtt and the minimum.
        cc.on_data(&cfg, ms(1082), 1081, 19, 0);
        assert_eq!(cc.srtt(), Some(Duration::from_millis(55)));
        assert_eq!(cc.min_rtt(ms(1082)), Some(Duration::from_millis(20)));
        // The minimum expires after the 10 s window.
        cc.on_rtt(ms(11_500), Duration::from_millis(40));
        assert_eq!(cc.min_rtt(ms(11_500)), Some(Duration::from_millis(40)));
        let paper = LeotpConfig::paper();
        let mut p = HopCc::new(&paper);
        p.on_rtt(ms(0), Duration::from_millis(10));
        p.on_rtt(ms(5_600), Duration::from_millis(30));
        assert_eq!(p.min_rtt(ms(5_600)), Some(Duration::from_millis(30)), "5 s window in the paper variant");
    }

    #[test]
    fn slow_start_is_hybla_like() {
        let cfg = LeotpConfig::default();
        let mut cc = HopCc::new(&cfg);
        // Hop RTT 60 ms: 2^(60/30) - 1 = 3 MSS per MSS acknowledged.
        cc.on_data(&cfg, ms(60), 0, 1472, 1453);
        assert!((cc.cwnd() - 3.2).abs() < 1e-9, "{}", cc.cwnd());
        cc.on_data(&cfg, ms(61), 1, 1472, 1453);
        assert!((cc.cwnd() - 6.2).abs() < 1e-9, "{}", cc.cwnd());
        // Half an MSS counts half.
        cc.on_data(&cfg, ms(62), 2, 745, 726);
        assert!((cc.cwnd() - (6.2 + 3.0 * 726.0 / 1453.0)).abs() < 1e-9);
        // The exponent is capped at 5: hop RTT 300 ms gives 31 per MSS.
        let mut slow = HopCc::new(&cfg);
        slow.on_rtt(ms(0), Duration::from_millis(300));
        slow.on_acked(&cfg, ms(0), 1.0);
        assert!((slow.cwnd() - 31.2).abs() < 1e-9);
        // Slow start ends at cwnd >= 100.
        for _ in 0..3 {
            slow.on_acked(&cfg, ms(0), 1.0);
        }
        assert!(slow.cwnd() >= 100.0 && !slow.in_slow_start());
    }

    #[test]
    fn slow_start_ends_on_the_congestion_signal() {
        let cfg = LeotpConfig::default();
        let mut cc = avoiding(&cfg, 10.0, 1_000_000.0, 50, 40);
        cc.slow_start = true;
        // thr * (srtt - min) = 1e6 B/s * 10 ms = 10 000 B > M = 3000 B.
        assert!(cc.congested(&cfg, ms(2)));
        cc.on_acked(&cfg, ms(2), 1.0);
        assert!(!cc.in_slow_start());
        // ... and the same packet's signal applies the avoidance decrease.
        assert!((cc.cwnd() - 0.8 * 1_000_000.0 * 0.040 / 1453.0).abs() < 1e-9);
        // 2999 B of standing queue is no signal.
        let quiet = avoiding(&cfg, 10.0, 299_900.0, 50, 40);
        assert!(!quiet.congested(&cfg, ms(2)));
    }

    #[test]
    fn avoidance_decrease_at_most_once_per_two_srtt() {
        let cfg = LeotpConfig::default();
        let mut cc = avoiding(&cfg, 50.0, 1_000_000.0, 50, 40);
        cc.on_acked(&cfg, ms(2), 1.0);
        // k * thr * minRTT / MSS = 0.8 * 1e6 * 0.04 / 1453 = 22.0234...
        let want = 32_000.0 / 1453.0;
        assert!((cc.cwnd() - want).abs() < 1e-9, "{}", cc.cwnd());
        cc.cwnd = 40.0;
        cc.on_acked(&cfg, ms(101), 1.0); // 99 ms later: within 2 srtt = 100 ms, no decrease, no increase
        assert_eq!(cc.cwnd(), 40.0);
        cc.on_acked(&cfg, ms(102), 1.0);
        assert!((cc.cwnd() - want).abs() < 1e-9);
        // The floor: no throughput measured -> 0.2.
        let mut z = avoiding(&cfg, 50.0, 1_000_000.0, 50, 40);
        z.min_rtt = WindowedMin::new(cfg.min_rtt_window);
        z.min_rtt.insert(ms(1), Duration::from_micros(1));
        z.on_acked(&cfg, ms(2), 1.0);
        assert!((z.cwnd() - (0.8 * 1_000_000.0 * 1e-6 / 1453.0_f64).max(0.2)).abs() < 1e-12);
    }

    #[test]
    fn avoidance_increase_code_and_paper() {
        let cfg = LeotpConfig::default();
        // Not congested (srtt = min), not app-limited: 1e6 * 2 * 0.04 = 80 000 >= 20 * 1453.
        let mut cc = avoiding(&cfg, 20.0, 1_000_000.0, 40, 40);
        cc.on_acked(&cfg, ms(2), 1.0);
        assert!((cc.cwnd() - 20.5).abs() < 1e-9, "+1 per cwnd/10: {}", cc.cwnd());
        let paper = LeotpConfig { additive_increase: AdditiveIncrease::PerRtt, ..cfg };
        let mut p = avoiding(&paper, 20.0, 1_000_000.0, 40, 40);
        p.on_acked(&paper, ms(2), 1.0);
        assert!((p.cwnd() - 20.05).abs() < 1e-9, "+1 per cwnd: {}", p.cwnd());
        // App-limited: 1e5 * 2 * 0.04 = 8000 < 29 060: -0.1 per cwnd/2 = 10 MSS.
        let mut a = avoiding(&cfg, 20.0, 100_000.0, 40, 40);
        a.on_acked(&cfg, ms(2), 1.0);
        assert!((a.cwnd() - 19.99).abs() < 1e-9, "{}", a.cwnd());
    }

    #[test]
    fn rates_and_backpressure() {
        let cfg = LeotpConfig::default();
        let cc = avoiding(&cfg, 20.0, 1_000_000.0, 40, 40);
        // 20 * 1453 B / 40 ms = 726 500 B/s = 5.812 Mbit/s.
        assert!(cc.rate_bps(&cfg, ms(2)).abs_diff(5_812_000) <= 1);
        // Queue 2 MSS, downstream asks 4 Mbit/s: (5 - 2) * 1453 / 0.04 * 8 + 4e6 = 4 871 800.
        assert!(cc.mid_rate_bps(&cfg, ms(2), 2 * 1453, 4_000_000).abs_diff(4_871_800) <= 1);
        // The paper's sign: (2 - 5) * ... + 4e6 = 3 128 200.
        let paper = LeotpConfig { backpressure: BackpressureSign::Paper, ..cfg };
        assert!(cc.mid_rate_bps(&paper, ms(2), 2 * 1453, 4_000_000).abs_diff(3_128_200) <= 1);
        // Own rate is the cap: downstream asks 100 Mbit/s.
        assert!(cc.mid_rate_bps(&cfg, ms(2), 0, 100_000_000).abs_diff(5_812_000) <= 1);
        // A deep queue drives the rate to the 0.1 Mbit/s floor; a huge window to the 300 Mbit/s cap.
        assert_eq!(cc.mid_rate_bps(&cfg, ms(2), 20 * 1453, 4_000_000), 100_000);
        let big = avoiding(&cfg, 1e6, 1_000_000.0, 40, 40);
        assert_eq!(big.rate_bps(&cfg, ms(2)), 300_000_000);
        // No sample yet: the floor.
        assert_eq!(HopCc::new(&cfg).rate_bps(&cfg, ms(0)), 100_000);
    }

    #[test]
    fn keepalive_after_nine_tenths_of_srtt() {
        let cfg = LeotpConfig::default();
        let mut cc = HopCc::new(&cfg);
        assert_eq!(cc.keepalive_at(&cfg), None);
        cc.on_rtt(ms(0), Duration::from_millis(20));
        cc.last_interest = Some(ms(100));
        assert_eq!(cc.keepalive_at(&cfg), Some(ms(118)));
    }

    #[test]
    fn token_bucket_refills_every_interval() {
        // 8 Mbit/s = 1000 B per ms; starts full at max(2 ms of rate, 2 MTU) = 2944 B.
        let mut b = TokenBucket::new(ms(0), 8_000_000, Duration::from_millis(1));
        let mut sent = 0;
        for t in 0..1000u64 {
            b.refill(ms(t) + Duration::from_micros(500));
            while b.ready() {
                b.spend(1472);
                sent += 1;
            }
        }
        // 2 from the full bucket + 999 refills of 1000 B at 1472 B each, give or take one packet.
        let want = 2.0 + 999_000.0 / 1472.0;
        assert!((f64::from(sent) - want).abs() <= 1.5, "{sent} vs {want}");
        assert_eq!(b.next_refill(), ms(1000));
        assert_eq!(b.rate_bps(), 8_000_000);
    }
}
