//! BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00) as Linux `net/ipv4/tcp_bbr.c` does it:
//! a windowed-max bottleneck-bandwidth filter over 10 rounds, a 10 s min_rtt filter, the
//! STARTUP / DRAIN / PROBE_BW / PROBE_RTT state machine, cwnd = 2·BDP plus a quantisation budget, and
//! loss handling as `bbr_set_cwnd_to_recover_or_restore`: each ACK takes the bytes it newly marked
//! lost off cwnd, the first round of recovery (counted from the ACK that entered it) conserves
//! packets, and leaving recovery restores the window saved before it.
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
    /// Recovery was entered since the last ACK: the next ACK starts its conservation round (Linux
    /// compares `prev_ca_state` with the socket's state there).
    recovery_entered: bool,
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
            recovery_entered: false,
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

    /// Linux `bbr_set_cwnd` with `bbr_set_cwnd_to_recover_or_restore`: the bytes this ACK marked lost
    /// come off cwnd; the ACK that finds recovery newly entered starts a round there (its own
    /// deliveries counted, so the round ends only when data sent after it is acknowledged) and cuts
    /// cwnd to what is in flight plus what it acknowledged; during that round each ACK releases as
    /// much as it acknowledged (packet conservation); otherwise cwnd slow-starts towards 2·BDP +
    /// quantisation budget.
    fn set_cwnd(&mut self, ack: &AckEvent) {
        let acked = ack.bytes_acked;
        if acked > 0 {
            let mut cwnd = self.cwnd;
            if ack.lost_bytes > 0 {
                cwnd = cwnd.saturating_sub(ack.lost_bytes).max(self.mss);
            }
            if self.recovery_entered {
                self.recovery_entered = false;
                self.packet_conservation = true;
                self.next_round_delivered = self.delivered;
                cwnd = ack.in_flight + acked;
            }
            if self.packet_conservation {
                // Draft §4.2.3.4: send one segment per segment acked in the first recovery round.
                self.cwnd = cwnd.max(ack.in_flight + acked);
            } else {
                let target = self.quantization_budget(self.bdp(self.bw.get(), self.cwnd_gain));
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || self.delivered < self.init_cwnd {
                    cwnd += acked;
                }
                self.cwnd = cwnd.max(CWND_MIN_SEGMENTS * self.mss);
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

    fn on_handshake_rtt(&mut self, _now: Instant, srtt: Duration) {
        // Linux `bbr_init` -> `bbr_init_pacing_rate_from_rtt` with the handshake's srtt.
        if !self.has_seen_rtt && srtt > Duration::ZERO {
            self.has_seen_rtt = true;
            self.init_pacing_rate(srtt);
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

    fn on_congestion_event(&mut self, _now: Instant, _in_flight: u64) {
        // Linux `bbr_ssthresh` saves the window; the window itself is BBR's to set on the next ACK
        // (`set_cwnd`), which starts packet conservation and a new round. Until then (recovery entered
        // by the reordering timer) cwnd stays as it was, as in Linux.
        self.save_cwnd();
        self.ca_state = CaState::Recovery;
        self.recovery_entered = true;
        self.loss_pending = true;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        // Linux: leaving recovery restores the window saved before it, so isolated losses cost one
        // round of conservation and nothing after.
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.packet_conservation = false;
        self.recovery_entered = false;
        self.ca_state = CaState::Open;
    }

    fn owns_recovery_window(&self) -> bool {
        true
    }

    fn undo(&mut self, _now: Instant, _prior_cwnd: u64, _prior_ssthresh: u64) {
        // Linux `bbr_undo_cwnd`: full-pipe detection starts over; the window stays BBR's own (the
        // sender's `on_recovery_end` before this already restored the window saved at the loss).
        self.full_bw = 0;
        self.full_bw_cnt = 0;
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
        self.recovery_entered = false;
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
mod tests;
