//! BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00) as Linux `net/ipv4/tcp_bbr.c` does it:
//! a windowed-max bottleneck-bandwidth filter over 10 rounds, a 10 s min_rtt filter, the
//! STARTUP / DRAIN / PROBE_BW / PROBE_RTT state machine, cwnd = 2·BDP plus a quantisation budget, and
//! loss handling limited to packet conservation in the first round of recovery.
//!
//! Random loss does not lower the model: only the bandwidth and RTT samples do. That is BBR v1's
//! known property (and flaw) which the project's loss experiments rely on.

use super::{AckEvent, CongestionControl, RateSample};
use leoguard_core::{Bps, Duration, Instant, RngStream};

/// Linux `bbr_high_gain`: 2/ln 2, the smallest gain that doubles the sending rate every round.
const HIGH_GAIN: f64 = 2.0 / std::f64::consts::LN_2;
/// Linux `bbr_drain_gain`: ln 2 / 2, the inverse of the startup gain, drains the startup queue.
const DRAIN_GAIN: f64 = std::f64::consts::LN_2 / 2.0;
/// Linux `bbr_cwnd_gain`: cwnd is twice the BDP in PROBE_BW, room for delayed and stretched ACKs.
const CWND_GAIN: f64 = 2.0;
/// Linux `bbr_pacing_gain`: probe up, drain, then cruise for six phases.
const PACING_GAIN: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Linux `bbr_cycle_rand`: the start phase is drawn among all but the draining one.
const CYCLE_RAND: u64 = 7;
/// Linux `bbr_bw_rtts` (CYCLE_LEN + 2): the bandwidth filter's window in rounds.
const BW_WINDOW_ROUNDS: u64 = 10;
/// Linux `bbr_min_rtt_win_sec`: min_rtt expires after 10 s without a lower sample.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// Linux `bbr_probe_rtt_mode_ms`: time spent at the minimum window in PROBE_RTT.
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// Linux `bbr_cwnd_min_target`: the smallest window BBR uses, and the PROBE_RTT window.
const CWND_MIN_SEGMENTS: u64 = 4;
/// Linux `bbr_full_bw_thresh`: bandwidth must grow by 25 % per round to stay in STARTUP.
const FULL_BW_THRESH: f64 = 1.25;
/// Linux `bbr_full_bw_cnt`: rounds without such growth before the pipe counts as full.
const FULL_BW_CNT: u32 = 3;
/// Linux `bbr_pacing_margin_percent`: pace 1 % below the estimate to keep the bottleneck queue empty.
const PACING_MARGIN: f64 = 0.99;
/// Linux `TCP_INIT_CWND`-based `bbr_init_pacing_rate_from_rtt`: RTT assumed before any sample.
const DEFAULT_RTT: Duration = Duration::from_millis(1);

/// BBR's operating mode (draft §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Drain the queue STARTUP built.
    Drain,
    /// Cruise at the estimated bandwidth, probing it with the gain cycle.
    ProbeBw,
    /// Shrink the window to re-measure the propagation RTT.
    ProbeRtt,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => "probe_bw",
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

/// The TCP congestion state as BBR sees it (Linux `icsk_ca_state` subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaState {
    Open,
    Recovery,
    Loss,
}

/// Kathleen Nichols' windowed running max (Linux `lib/minmax.c`): the best, second and third best
/// samples in ever later sub-windows, so the max of a sliding window costs O(1) memory.
#[derive(Clone, Copy, Debug, Default)]
struct MaxFilter {
    /// (round, value) triples, best first.
    s: [(u64, u64); 3],
}

impl MaxFilter {
    fn get(&self) -> u64 {
        self.s[0].1
    }

    /// Linux `minmax_running_max`.
    fn update(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let val = (t, v);
        if v >= self.s[0].1 || t.saturating_sub(self.s[2].0) > win {
            self.s = [val; 3];
            return v;
        }
        if v >= self.s[1].1 {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].1 {
            self.s[2] = val;
        }
        // Linux `minmax_subwin_update`: age out the best sample and refresh sub-window choices.
        let dt = t.saturating_sub(self.s[0].0);
        if dt > win {
            self.s = [self.s[1], self.s[2], val];
            if t.saturating_sub(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].1
    }
}

/// The BBR v1 congestion controller.
#[derive(Clone, Debug)]
pub struct Bbr {
    mss: u64,
    init_cwnd: u64,
    cwnd: u64,
    ssthresh: u64,
    mode: Mode,
    pacing_gain: f64,
    cwnd_gain: f64,
    pacing_rate: Bps,
    has_seen_rtt: bool,
    /// Max delivery rate over the last 10 rounds, bits/s.
    bw: MaxFilter,
    /// Round-trip counter (Linux `rtt_cnt`), advanced when a packet sent after the last round start
    /// is acknowledged.
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    /// Total bytes delivered as of the latest rate sample.
    delivered: u64,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    full_bw: u64,
    full_bw_cnt: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Instant,
    ca_state: CaState,
    packet_conservation: bool,
    /// The last known good cwnd, restored after recovery or PROBE_RTT (Linux `prior_cwnd`).
    prior_cwnd: u64,
    /// Loss was detected since the last ACK (stands in for Linux `rs->losses`).
    loss_pending: bool,
    idle_restart: bool,
    rng: RngStream,
}

impl Bbr {
    /// BBR with random stream seed 0.
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Bbr {
        Bbr::with_seed(mss, init_cwnd_segments, 0)
    }

    /// BBR whose random PROBE_BW start phase is drawn from `seed` (STYLE.md rule 3).
    pub fn with_seed(mss: u64, init_cwnd_segments: u64, seed: u64) -> Bbr {
        let mss = mss.max(1);
        let init_cwnd = init_cwnd_segments.max(1) * mss;
        let mut bbr = Bbr {
            mss,
            init_cwnd,
            cwnd: init_cwnd,
            ssthresh: u64::MAX,
            mode: Mode::Startup,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: Bps(0),
            has_seen_rtt: false,
            bw: MaxFilter::default(),
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            delivered: 0,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            full_bw: 0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: Instant::ZERO,
            ca_state: CaState::Open,
            packet_conservation: false,
            prior_cwnd: 0,
            loss_pending: false,
            idle_restart: false,
            rng: leoguard_core::stream(seed, "cc/bbr"),
        };
        bbr.init_pacing_rate(DEFAULT_RTT);
        bbr
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck-bandwidth estimate (windowed max of delivery-rate samples).
    pub fn bw(&self) -> Bps {
        Bps(self.bw.get())
    }

    /// The min_rtt estimate, if any RTT was sampled.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Rounds counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    /// The current PROBE_BW gain-cycle phase (0 = probe up at 1.25).
    pub fn cycle_phase(&self) -> usize {
        self.cycle_idx
    }

    /// Linux `bbr_init_pacing_rate_from_rtt`: high_gain · cwnd / rtt until bandwidth is measured.
    fn init_pacing_rate(&mut self, rtt: Duration) {
        let rtt_ns = rtt.as_nanos().max(1);
        let bw = u128::from(self.cwnd) * 8 * 1_000_000_000 / u128::from(rtt_ns);
        self.pacing_rate = Bps((bw as f64 * HIGH_GAIN * PACING_MARGIN) as u64);
    }

    /// Linux `bbr_bdp`: bw · min_rtt · gain in bytes, or the initial window without an RTT sample.
    fn bdp(&self, bw: u64, gain: f64) -> u64 {
        let Some(rtt) = self.min_rtt else {
            return self.init_cwnd;
        };
        let bytes = u128::from(bw) * u128::from(rtt.as_nanos()) / 8 / 1_000_000_000;
        (bytes as f64 * gain).ceil() as u64
    }

    /// Linux `bbr_quantization_budget`: three segments for ACK aggregation and send-side batching,
    /// an even number of segments against delayed ACKs, two more in the probe-up phase so small
    /// BDPs still get in-flight above the BDP.
    fn quantization_budget(&self, cwnd: u64) -> u64 {
        let mut segs = cwnd.div_ceil(self.mss) + 3;
        segs = (segs + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            segs += 2;
        }
        segs * self.mss
    }

    /// Linux `bbr_inflight`: the in-flight target for `gain`.
    fn inflight(&self, bw: u64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp(bw, gain))
    }

    /// Linux `bbr_update_bw`: round counting and the bandwidth filter. App-limited samples only
    /// count when they raise the estimate (draft §4.1.1.4).
    fn update_bw(&mut self, rs: &RateSample) {
        self.round_start = false;
        let Some(rate) = rs.rate() else { return };
        self.delivered = self.delivered.max(rs.total_delivered);
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        if !rs.is_app_limited || rate.0 >= self.bw.get() {
            self.bw.update(BW_WINDOW_ROUNDS, self.round_count, rate.0);
        }
    }

    /// Linux `bbr_is_next_cycle_phase`: each phase lasts one min_rtt; the probe-up phase also waits
    /// for in-flight to reach 1.25·BDP (or a loss), the drain phase ends early once in-flight is back
    /// at the BDP.
    fn is_next_cycle_phase(&self, now: Instant, prior_in_flight: u64) -> bool {
        let min_rtt = self.min_rtt.unwrap_or(Duration::ZERO);
        let full_length = now.saturating_duration_since(self.cycle_stamp) > min_rtt;
        let gain = self.pacing_gain;
        let bw = self.bw.get();
        if gain > 1.0 {
            full_length && (self.loss_pending || prior_in_flight >= self.inflight(bw, gain))
        } else if gain < 1.0 {
            full_length || prior_in_flight <= self.inflight(bw, 1.0)
        } else {
            full_length
        }
    }

    /// Linux `bbr_advance_cycle_phase`.
    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAIN.len();
        self.cycle_stamp = now;
    }

    /// Linux `bbr_reset_probe_bw_mode`: start the gain cycle at a random phase other than the drain
    /// phase, so competing flows do not probe in lockstep.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        let r = (self.rng.next_u64() % CYCLE_RAND) as usize;
        self.cycle_idx = PACING_GAIN.len() - 1 - r;
        self.advance_cycle_phase(now);
    }

    /// Linux `bbr_reset_mode`: back to STARTUP if the pipe was never filled, else PROBE_BW.
    fn reset_mode(&mut self, now: Instant) {
        if self.full_bw_reached {
            self.enter_probe_bw(now);
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// Linux `bbr_check_full_bw_reached` (draft §4.3.2.2): the pipe is full when the bandwidth has
    /// not grown by 25 % for three non-app-limited rounds.
    fn check_full_bw_reached(&mut self, app_limited: bool) {
        if self.full_bw_reached || !self.round_start || app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw as f64 >= self.full_bw as f64 * FULL_BW_THRESH {
            self.full_bw = bw;
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    /// Linux `bbr_check_drain` (draft §4.3.3): leave STARTUP for DRAIN, and DRAIN for PROBE_BW once
    /// in-flight is down to one BDP.
    fn check_drain(&mut self, now: Instant, in_flight: u64) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            self.ssthresh = self.inflight(self.bw.get(), 1.0);
        }
        if self.mode == Mode::Drain && in_flight <= self.inflight(self.bw.get(), 1.0) {
            self.enter_probe_bw(now);
        }
    }

    /// Linux `bbr_update_min_rtt` (draft §4.3.4): the min_rtt filter and PROBE_RTT entry and exit.
    fn update_min_rtt(&mut self, now: Instant, ack: &AckEvent) {
        let expired = now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(rtt) = ack.rtt {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            }
        }
        if expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            // Hold the window at 4 segments for max(200 ms, one round) once in-flight got there.
            match self.probe_rtt_done {
                None if ack.in_flight <= CWND_MIN_SEGMENTS * self.mss => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = self.delivered;
                }
                None => {}
                Some(_) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done {
                        self.check_probe_rtt_done(now);
                    }
                }
            }
        }
        if ack.bytes_acked > 0 {
            self.idle_restart = false;
        }
    }

    /// Linux `bbr_check_probe_rtt_done`: restore the window and resume after PROBE_RTT.
    fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done.is_none_or(|done| now <= done) {
            return;
        }
        // Wait a full window before the next PROBE_RTT.
        self.min_rtt_stamp = now;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.reset_mode(now);
    }

    /// Linux `bbr_update_gains`.
    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (PACING_GAIN[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// Linux `bbr_set_pacing_rate`: gain · bw less the 1 % margin; in STARTUP the rate only rises.
    fn set_pacing_rate(&mut self, gain: f64) {
        let rate = Bps((self.bw.get() as f64 * gain * PACING_MARGIN) as u64);
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// Linux `bbr_save_cwnd`: remember the last good window before recovery or PROBE_RTT cut it.
    fn save_cwnd(&mut self) {
        if self.ca_state == CaState::Open && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// Linux `bbr_set_cwnd` with `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the
    /// first recovery round, otherwise slow-start towards 2·BDP + quantisation budget.
    fn set_cwnd(&mut self, ack: &AckEvent) {
        let acked = ack.bytes_acked;
        if acked > 0 {
            if self.packet_conservation {
                // Draft §4.2.3.4: send one segment per segment acked in the first recovery round.
                self.cwnd = self.cwnd.max(ack.in_flight + acked);
            } else {
                let target = self.quantization_budget(self.bdp(self.bw.get(), self.cwnd_gain));
                if self.full_bw_reached {
                    self.cwnd = (self.cwnd + acked).min(target);
                } else if self.cwnd < target || self.delivered < self.init_cwnd {
                    self.cwnd += acked;
                }
                self.cwnd = self.cwnd.max(CWND_MIN_SEGMENTS * self.mss);
            }
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(CWND_MIN_SEGMENTS * self.mss);
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        // Linux `bbr_cwnd_event(CA_EVENT_TX_START)`: restarting from idle is not a reason to enter
        // PROBE_RTT, and an idle PROBE_RTT may already be over.
        if in_flight <= bytes {
            self.idle_restart = true;
            if self.mode == Mode::ProbeBw {
                self.set_pacing_rate(1.0);
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(now);
            }
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        // Linux `bbr_main` = `bbr_update_model` + pacing + cwnd.
        if !self.has_seen_rtt && ack.srtt > Duration::ZERO {
            self.has_seen_rtt = true;
            self.init_pacing_rate(ack.srtt);
        }
        let app_limited = ack.rate.is_some_and(|r| r.is_app_limited);
        match ack.rate {
            Some(rs) => self.update_bw(&rs),
            None => self.round_start = false,
        }
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(now, ack.prior_in_flight) {
            self.advance_cycle_phase(now);
        }
        self.check_full_bw_reached(app_limited);
        self.check_drain(now, ack.in_flight);
        self.update_min_rtt(now, ack);
        self.update_gains();
        self.set_pacing_rate(self.pacing_gain);
        self.set_cwnd(ack);
        self.loss_pending = false;
    }

    fn on_congestion_event(&mut self, _now: Instant, in_flight: u64) {
        // Linux `bbr_ssthresh` saves the window, then the first ACK in TCP_CA_Recovery starts packet
        // conservation and a new round, cutting cwnd to what is actually in flight.
        self.save_cwnd();
        self.ca_state = CaState::Recovery;
        self.packet_conservation = true;
        self.next_round_delivered = self.delivered;
        self.cwnd = in_flight.max(self.mss);
        self.loss_pending = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        // Linux: leaving recovery restores the window saved before it, so isolated losses cost one
        // round of conservation and nothing after.
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.packet_conservation = false;
        self.ca_state = CaState::Open;
    }

    fn on_rto(&mut self, _now: Instant, _in_flight: u64) {
        // Linux `tcp_enter_loss` (cwnd = packets in flight + 1, with every packet marked lost) and
        // `bbr_set_state(TCP_CA_Loss)`: the RTO ends a round and restarts full-pipe detection's
        // baseline; bw and min_rtt estimates are kept.
        if self.ca_state == CaState::Open {
            self.save_cwnd();
        }
        self.cwnd = self.mss;
        self.ca_state = CaState::Loss;
        self.packet_conservation = false;
        self.full_bw = 0;
        self.round_start = true;
        self.loss_pending = true;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn pacing_rate(&self) -> Option<Bps> {
        Some(self.pacing_rate)
    }

    fn state(&self) -> &'static str {
        self.mode.label()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const MSS: u64 = 1000;

    /// A scripted delivery-rate model with one bottleneck queue, advanced one base RTT at a time: the
    /// sender sends at its pacing rate (an unlimited source; cwnd only caps what it reports in
    /// flight), the link delivers at most `bottleneck`, the excess queues and delays RTT samples.
    struct Script {
        now: Instant,
        total: u64,
        rtt: Duration,
        bottleneck: Bps,
        queue: u64,
    }

    /// ACKs per round.
    const ACKS: u64 = 10;

    impl Script {
        fn new(rtt: Duration, bottleneck: Bps) -> Script {
            Script { now: Instant::ZERO, total: 0, rtt, bottleneck, queue: 0 }
        }

        /// One round sending at `send` (None: the pacing rate); returns the delivery rate.
        fn round_at(&mut self, cc: &mut Bbr, send: Option<Bps>, app_limited: bool) -> Bps {
            let send = send.unwrap_or_else(|| cc.pacing_rate().unwrap_or(Bps(0)));
            let sent = send.bytes_in(self.rtt).0;
            let capacity = self.bottleneck.bytes_in(self.rtt).0;
            let out = (self.queue + sent).min(capacity).max(MSS);
            self.queue = (self.queue + sent).saturating_sub(out);
            let rate = Bps(out * 8 * 1_000_000_000 / self.rtt.as_nanos());
            let queue_delay = self.bottleneck.transmission_time(leoguard_core::Bytes(self.queue));
            let rtt_sample = self.rtt + queue_delay.unwrap_or(Duration::ZERO);
            let chunk = out / ACKS;
            let round_start_total = self.total;
            for _ in 0..ACKS {
                self.now += Duration(self.rtt.as_nanos() / ACKS);
                self.total += chunk;
                let in_flight = cc.cwnd().min(sent + self.queue);
                let ack = AckEvent {
                    bytes_acked: chunk,
                    prior_in_flight: in_flight + chunk,
                    in_flight,
                    rtt: Some(rtt_sample),
                    srtt: rtt_sample,
                    min_rtt: self.rtt,
                    rate: Some(RateSample {
                        delivered: chunk * ACKS,
                        interval: self.rtt,
                        prior_delivered: round_start_total,
                        total_delivered: self.total,
                        is_app_limited: app_limited,
                    }),
                    in_recovery: false,
                };
                cc.on_ack(self.now, &ack);
            }
            rate
        }

        fn round(&mut self, cc: &mut Bbr) -> Bps {
            self.round_at(cc, None, false)
        }
    }

    fn within(a: u64, b: u64, tol: f64) -> bool {
        (a as f64 - b as f64).abs() <= tol * b as f64
    }

    #[test]
    fn max_filter_keeps_the_window_max_and_expires_it() {
        let mut f = MaxFilter::default();
        f.update(10, 1, 100);
        for t in 2..=11 {
            assert_eq!(f.update(10, t, 50), 100, "round {t}");
        }
        // Round 12 is more than 10 rounds after the max: it expires.
        assert_eq!(f.update(10, 12, 50), 50);
    }

    #[test]
    fn startup_grows_by_high_gain_then_drains_into_probe_bw_at_the_bottleneck() {
        let bottleneck = Bps::gbps(1);
        let rtt = Duration::from_millis(20);
        let mut cc = Bbr::new(MSS, 10);
        let mut s = Script::new(rtt, bottleneck);
        assert_eq!(cc.state(), "startup");
        // The first round is the initial window's worth (10 segments per RTT = 4 Mbit/s).
        let mut prev = s.round_at(&mut cc, Some(Bps(10 * MSS * 8 * 50)), false);
        let mut modes = vec![cc.mode()];
        let mut growth_rounds = 0;
        for _ in 0..40 {
            let rate = s.round(&mut cc);
            if rate.0 < bottleneck.0 / 2 && prev.0 > 0 && cc.mode() == Mode::Startup {
                // Unlimited link: each round delivers at last round's pacing rate, which is
                // 2.885 · 0.99 times the rate delivered in the round before.
                let ratio = rate.0 as f64 / prev.0 as f64;
                assert!((ratio - HIGH_GAIN * PACING_MARGIN).abs() < 0.05, "growth {ratio}");
                growth_rounds += 1;
            }
            prev = rate;
            if modes.last() != Some(&cc.mode()) {
                modes.push(cc.mode());
            }
        }
        assert!(growth_rounds >= 3, "only {growth_rounds} growth rounds");
        assert_eq!(modes, vec![Mode::Startup, Mode::Drain, Mode::ProbeBw]);
        assert!(within(cc.bw().0, bottleneck.0, 0.02), "bw {:?}", cc.bw());
        assert_eq!(cc.min_rtt(), Some(Duration::from_millis(20)));
        assert!(cc.ssthresh() < u64::MAX);
        // cwnd = 2 · BDP + quantisation budget (2.5 MB BDP at 1 Gbit/s · 20 ms).
        let bdp = 2_500_000;
        assert!(cc.cwnd() >= 2 * bdp + 3 * MSS && cc.cwnd() <= 2 * bdp + 7 * MSS, "cwnd {}", cc.cwnd());
        // Cruising pacing rate is within the gain cycle of the bottleneck, less the 1 % margin.
        let p = cc.pacing_rate().map_or(0, |p| p.0) as f64 / bottleneck.0 as f64;
        assert!((0.74..=1.24).contains(&p), "pacing/bottleneck {p}");
    }

    #[test]
    fn probe_bw_cycles_through_all_gains_from_a_seeded_phase() {
        let start_phase = |seed: u64| {
            let mut cc = Bbr::with_seed(MSS, 10, seed);
            let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
            while cc.mode() != Mode::ProbeBw {
                s.round(&mut cc);
            }
            let first = cc.cycle_phase();
            let mut seen = [false; 8];
            for _ in 0..40 {
                s.round(&mut cc);
                seen[cc.cycle_phase()] = true;
            }
            assert!(seen.iter().all(|&x| x), "phases {seen:?}");
            first
        };
        let phases: Vec<usize> = (0..16).map(start_phase).collect();
        assert!(phases.iter().all(|&p| p != 1), "never starts in the drain phase: {phases:?}");
        assert!(phases.iter().any(|&p| p != phases[0]), "start phase is random: {phases:?}");
        assert_eq!(start_phase(3), start_phase(3));
    }

    #[test]
    fn probe_rtt_after_ten_seconds_for_two_hundred_ms() {
        let rtt = Duration::from_millis(20);
        let mut cc = Bbr::new(MSS, 10);
        let mut s = Script::new(rtt, Bps::mbps(50));
        while cc.mode() != Mode::ProbeBw {
            s.round(&mut cc);
        }
        // The first sample (first ACK of the first round) is never beaten afterwards.
        let min_rtt_at = Instant(rtt.as_nanos() / ACKS);
        let good_cwnd = cc.cwnd();
        let mut entered = None;
        let mut left = None;
        while left.is_none() && s.now < Instant(Duration::from_secs(12).as_nanos()) {
            let before = cc.mode();
            s.round(&mut cc);
            if before != Mode::ProbeRtt && cc.mode() == Mode::ProbeRtt {
                entered = Some(s.now);
                assert_eq!(cc.cwnd(), CWND_MIN_SEGMENTS * MSS);
            }
            if before == Mode::ProbeRtt && cc.mode() != Mode::ProbeRtt {
                left = Some(s.now);
            }
        }
        let entered = entered.expect("entered PROBE_RTT");
        let left = left.expect("left PROBE_RTT");
        let since_sample = entered.saturating_duration_since(min_rtt_at);
        assert!(since_sample >= MIN_RTT_WINDOW && since_sample <= MIN_RTT_WINDOW + rtt + rtt);
        let dwell = left.saturating_duration_since(entered);
        assert!(dwell >= PROBE_RTT_DURATION && dwell <= PROBE_RTT_DURATION + rtt + rtt + rtt, "dwell {dwell}");
        assert_eq!(cc.mode(), Mode::ProbeBw);
        assert!(cc.cwnd() >= good_cwnd - 4 * MSS, "cwnd restored: {} vs {good_cwnd}", cc.cwnd());
    }

    #[test]
    fn random_loss_does_not_reduce_cwnd_outside_recovery() {
        let mut cc = Bbr::with_seed(MSS, 10, 9);
        let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
        for _ in 0..30 {
            s.round(&mut cc);
        }
        let mut twin = cc.clone();
        let mut s_twin = Script { now: s.now, total: s.total, rtt: s.rtt, bottleneck: s.bottleneck, queue: s.queue };
        for r in 0..50 {
            s_twin.round(&mut twin);
            if r % 5 == 0 {
                // A single random loss: one segment less in flight, one round of recovery.
                let before = cc.cwnd();
                cc.on_congestion_event(s.now, before - MSS);
                assert!(cc.cwnd() >= before - MSS, "no multiplicative cut");
                s.round(&mut cc);
                cc.on_recovery_end(s.now);
                assert!(cc.cwnd() >= before, "restored: {} < {before}", cc.cwnd());
            } else {
                s.round(&mut cc);
            }
            assert_eq!(cc.bw(), twin.bw());
            assert!(cc.cwnd() + 2 * MSS >= twin.cwnd(), "{} vs {}", cc.cwnd(), twin.cwnd());
        }
        assert_eq!(cc.mode(), Mode::ProbeBw);
    }

    #[test]
    fn app_limited_samples_do_not_lower_bw() {
        let run = |app_limited: bool| {
            let mut cc = Bbr::new(MSS, 10);
            let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
            for _ in 0..30 {
                s.round(&mut cc);
            }
            let bw = cc.bw();
            for _ in 0..3 * BW_WINDOW_ROUNDS {
                s.round_at(&mut cc, Some(Bps::mbps(10)), app_limited);
            }
            (bw, cc.bw())
        };
        let (before, after) = run(true);
        assert_eq!(before, after);
        // The same low samples, not app-limited, do age the estimate out (so the test can fail).
        let (before, after) = run(false);
        assert!(after.0 < before.0 / 2, "{before:?} -> {after:?}");
    }

    #[test]
    fn rto_cuts_to_one_segment_and_keeps_the_model() {
        let mut cc = Bbr::new(MSS, 10);
        let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
        for _ in 0..30 {
            s.round(&mut cc);
        }
        let bw = cc.bw();
        let good = cc.cwnd();
        cc.on_rto(s.now, good);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.bw(), bw);
        cc.on_recovery_end(s.now);
        assert_eq!(cc.cwnd(), good);
    }

    /// A packet-level bottleneck: FIFO at `rate`, propagation RTT `prop`, random loss with
    /// probability `loss` (detected when the packet's ACK would have arrived, as SACK would), and
    /// draft-cheng delivery-rate sampling. Returns goodput over the second half of `secs`.
    fn packet_sim(rate: Bps, prop: Duration, loss: f64, secs: u64) -> (f64, Bbr) {
        struct Pkt {
            seq: u64,
            sent: Instant,
            ack_at: Instant,
            delivered: u64,
            delivered_time: Instant,
            first_sent: Instant,
            lost: bool,
        }
        let mut cc = Bbr::with_seed(MSS, 10, 1);
        let mut rng = leoguard_core::stream(1, "test/loss");
        let tx = rate.transmission_time(leoguard_core::Bytes(MSS)).unwrap();
        let end = Instant(Duration::from_secs(secs).as_nanos());
        let half = Instant(end.as_nanos() / 2);
        let (mut now, mut link_free, mut next_send) = (Instant::ZERO, Instant::ZERO, Instant::ZERO);
        let mut pipe: VecDeque<Pkt> = VecDeque::new();
        let (mut in_flight, mut delivered, mut seq) = (0u64, 0u64, 0u64);
        let (mut delivered_time, mut first_sent) = (Instant::ZERO, Instant::ZERO);
        let (mut recovery_point, mut min_rtt, mut srtt) = (None::<u64>, Duration(u64::MAX), Duration::ZERO);
        let mut goodput_bytes = 0u64;
        while now < end {
            let ack_t = pipe.front().map(|p| p.ack_at);
            let send_t = (in_flight + MSS <= cc.cwnd()).then_some(now.max(next_send));
            match (ack_t, send_t) {
                (Some(a), s) if s.is_none_or(|s| a <= s) => {
                    now = a;
                    let p = pipe.pop_front().unwrap();
                    let prior_in_flight = in_flight;
                    in_flight -= MSS;
                    if p.lost {
                        if recovery_point.is_none() {
                            recovery_point = Some(seq);
                            cc.on_congestion_event(now, in_flight);
                        }
                        continue;
                    }
                    delivered += MSS;
                    delivered_time = now;
                    first_sent = p.sent;
                    if now >= half {
                        goodput_bytes += MSS;
                    }
                    let rtt = now - p.sent;
                    min_rtt = min_rtt.min(rtt);
                    srtt = if srtt == Duration::ZERO { rtt } else { Duration((7 * srtt.0 + rtt.0) / 8) };
                    let interval = (p.sent - p.first_sent).max(now - p.delivered_time);
                    let rs = RateSample {
                        delivered: delivered - p.delivered,
                        interval,
                        prior_delivered: p.delivered,
                        total_delivered: delivered,
                        is_app_limited: false,
                    };
                    let ack = AckEvent {
                        bytes_acked: MSS,
                        prior_in_flight,
                        in_flight,
                        rtt: Some(rtt),
                        srtt,
                        min_rtt,
                        rate: (interval >= min_rtt).then_some(rs),
                        in_recovery: recovery_point.is_some(),
                    };
                    cc.on_ack(now, &ack);
                    if recovery_point.is_some_and(|rp| p.seq >= rp) {
                        recovery_point = None;
                        cc.on_recovery_end(now);
                    }
                }
                (_, Some(s)) => {
                    now = s;
                    if in_flight == 0 {
                        first_sent = now;
                        delivered_time = now;
                    }
                    let depart = now.max(link_free) + tx;
                    link_free = depart;
                    pipe.push_back(Pkt {
                        seq,
                        sent: now,
                        ack_at: depart + prop,
                        delivered,
                        delivered_time,
                        first_sent,
                        lost: rng.bernoulli(loss),
                    });
                    seq += 1;
                    in_flight += MSS;
                    cc.on_sent(now, MSS, in_flight);
                    let pace = cc.pacing_rate().and_then(|r| r.transmission_time(leoguard_core::Bytes(MSS)));
                    next_send = now + pace.unwrap_or(Duration::ZERO);
                }
                _ => unreachable!("nothing in flight and cwnd closed"),
            }
        }
        let secs_measured = end.saturating_duration_since(half).as_secs_f64();
        let goodput = goodput_bytes as f64 * 8.0 / secs_measured / rate.0 as f64;
        (goodput, cc)
    }

    #[test]
    fn packet_level_bottleneck_is_filled_without_loss() {
        let (util, cc) = packet_sim(Bps::mbps(20), Duration::from_millis(40), 0.0, 20);
        assert!(util > 0.9, "utilisation {util}");
        assert!(within(cc.bw().0, Bps::mbps(20).0, 0.1), "bw {:?}", cc.bw());
        let min_rtt = cc.min_rtt().unwrap();
        assert!(min_rtt >= Duration::from_millis(40) && min_rtt < Duration::from_millis(42));
    }

    #[test]
    fn one_percent_random_loss_keeps_eighty_percent_of_capacity() {
        let (util, cc) = packet_sim(Bps::mbps(20), Duration::from_millis(40), 0.01, 20);
        assert!(util >= 0.8, "utilisation {util} under 1 % loss");
        assert!(within(cc.bw().0, Bps::mbps(20).0, 0.1), "bw {:?}", cc.bw());
    }
}
