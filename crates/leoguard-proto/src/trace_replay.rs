//! Open-loop replay of a real TCP sender's trace against the model (`leoguard validate tcp-trace`,
//! docs/tcp-trace.md): the model's [`TcpSender`] gets exactly the ACKs the real sender received, at the
//! times it received them, and its own decisions are compared, send by send, with what the real sender
//! put on the wire. Open loop: the model's sends never change the ACK stream, so the comparison is
//! meaningful up to the first divergence; later ones are counted as indications only.
//!
//! Divergences, in the order the trace meets them:
//! - a different segment (the model would send another sequence range than the kernel did);
//! - a retransmission the kernel made and the model would not (it would send new data, or nothing), or
//!   one the model would make and the kernel did not;
//! - the kernel sent while the model's window was full, or the model would have sent and the kernel
//!   sent nothing within `slack` (up to the next ACK after that);
//! - the congestion window beyond the tolerance against the real sender's TCP_INFO samples (outside
//!   recovery on both sides: Linux's `snd_cwnd` follows PRR during recovery, the controller's window
//!   does not).
//!
//! Sequence numbers are byte offsets from the first data byte (the kernel's ISN + 1); the caller maps
//! the trace (captured segments split into MSS pieces, SACK blocks, timestamps) onto these events.

use crate::cc;
use crate::tcp::{Ack, Segment, SenderStats, TcpConfig, TcpSender};
use leoguard_core::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};

/// What one captured packet of the connection was, seen at the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// A data segment the sender put on the wire: bytes [seq, end), its TSval if any.
    Send {
        /// First byte.
        seq: u64,
        /// One past the last byte.
        end: u64,
        /// TSval (RFC 7323), raw.
        tsval: Option<u32>,
    },
    /// An ACK the sender received: cumulative ACK, SACK blocks as on the wire (a DSACK first), the
    /// advertised window in bytes (scaled), the echoed timestamp if any.
    Ack {
        /// Next byte expected.
        cum: u64,
        /// SACK blocks [start, end), in wire order.
        sack: [(u64, u64); 3],
        /// Valid blocks.
        n_sack: u8,
        /// Advertised window, bytes.
        rwnd: u64,
        /// TSecr (RFC 7323), raw.
        tsecr: Option<u32>,
    },
}

/// One event of the trace, at its capture time (model time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Capture time.
    pub t: Instant,
    /// What it was.
    pub kind: TraceKind,
}

/// One TCP_INFO sample of the real sender, read between `t_lo` and `t_hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InfoSample {
    /// When the read started.
    pub t_lo: Instant,
    /// When it ended.
    pub t_hi: Instant,
    /// `snd_cwnd`, segments.
    pub cwnd_segments: u64,
    /// Whether the sample shows loss recovery under way (segments marked lost or retransmissions out).
    pub in_recovery: bool,
}

/// How the replay is run.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    /// The model's TCP parameters (MSS from the trace).
    pub tcp: TcpConfig,
    /// Congestion control, a registry name ([`cc::build`]).
    pub cc: String,
    /// The application's writes: (time, bytes), in time order (iperf3: its 37-byte cookie, then the
    /// rest of what the kernel sent).
    pub writes: Vec<(Instant, u64)>,
    /// How long a model send may wait for the kernel's before it counts as one the kernel did not make.
    pub slack: Duration,
    /// Congestion-window tolerance: max(`tol_segments`, `tol_frac` x the kernel's window).
    pub tol_segments: f64,
    /// See `tol_segments`.
    pub tol_frac: f64,
    /// Divergences recorded at most (the first is what counts; later ones are indications).
    pub max_divergences: usize,
    /// The kernel's own pacing, as (slow-start ratio, congestion-avoidance ratio) in percent (Linux
    /// `tcp_update_pacing_rate`: rate = ratio x max(cwnd, in flight) / srtt, the slow-start ratio while
    /// cwnd < ssthresh / 2; sysctls `tcp_pacing_ss_ratio` = 200, `tcp_pacing_ca_ratio` = 120): a model
    /// send is due when the kernel's pacing would let it out, so a paced kernel is not late. `None`:
    /// due when the model decides it.
    pub pacing: Option<(u64, u64)>,
}

/// What kind of departure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DivergenceKind {
    /// Both would send, another sequence range.
    DifferentSegment,
    /// The kernel retransmitted; the model would send new data there.
    KernelRetransmits,
    /// The model would retransmit; the kernel sent new data there.
    ModelRetransmits,
    /// The kernel sent; the model's window (or the receiver's) held it back.
    ModelWouldNotSend,
    /// The model would have sent; the kernel sent nothing within the slack.
    KernelDidNotSend,
    /// The congestion window beyond the tolerance.
    Cwnd,
}

impl DivergenceKind {
    /// A short label.
    pub fn name(self) -> &'static str {
        match self {
            DivergenceKind::DifferentSegment => "different_segment",
            DivergenceKind::KernelRetransmits => "kernel_retransmits",
            DivergenceKind::ModelRetransmits => "model_retransmits",
            DivergenceKind::ModelWouldNotSend => "model_would_not_send",
            DivergenceKind::KernelDidNotSend => "kernel_did_not_send",
            DivergenceKind::Cwnd => "cwnd",
        }
    }
}

/// One departure of the model from the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// When.
    pub t: Instant,
    /// Index of the trace event it was found at (for cwnd: the first event after the sample).
    pub event: usize,
    /// What kind.
    pub kind: DivergenceKind,
    /// The kernel's segment: (seq, end, retransmission), if one is involved.
    pub kernel: Option<(u64, u64, bool)>,
    /// The model's segment, if one is involved, and when the model would have sent it.
    pub model: Option<(Segment, Instant)>,
    /// The kernel's window (TCP_INFO), segments, for a cwnd divergence.
    pub kernel_cwnd: Option<u64>,
    /// The model's window, bytes, in flight, bytes, and controller state, at that point.
    pub model_cwnd: u64,
    /// See `model_cwnd`.
    pub model_in_flight: u64,
    /// See `model_cwnd`.
    pub model_state: &'static str,
}

/// A TCP_INFO sample beside the model's window at the same time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlignedSample {
    /// Mid-point of the sample's read.
    pub t: Instant,
    /// The kernel's window, segments.
    pub kernel_cwnd: u64,
    /// The model's window, segments (bytes / MSS), lowest and highest over the read.
    pub model_cwnd_lo: f64,
    /// See `model_cwnd_lo`.
    pub model_cwnd_hi: f64,
    /// The model's slow-start threshold, segments (`None` unset).
    pub model_ssthresh: Option<f64>,
    /// Whether the comparison counted (neither side in recovery).
    pub compared: bool,
    /// Whether the kernel's window was within the tolerance (or not compared).
    pub within: bool,
}

/// What the replay found.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    /// Departures in trace order; the first is the finding.
    pub divergences: Vec<Divergence>,
    /// Departures found in all (beyond `max_divergences` too).
    pub divergence_count: u64,
    /// Every TCP_INFO sample beside the model's window.
    pub series: Vec<AlignedSample>,
    /// Kernel sends matched by the model's, before the first divergence.
    pub matched_before_first: u64,
    /// Kernel data sends in the trace (MSS pieces).
    pub kernel_sends: u64,
    /// Of those, retransmissions (a range the kernel had sent before).
    pub kernel_retransmissions: u64,
    /// The longest a matched kernel send came after the model's (paced) due time, before the first
    /// divergence.
    pub max_lag: Duration,
    /// When the kernel sent that one.
    pub max_lag_at: Instant,
    /// Each matched send's lag (kernel time - the model's due time, ns; negative: the kernel was
    /// earlier), before the first divergence.
    pub lags_ns: Vec<i64>,
    /// The model's counters at the end.
    pub model_stats: SenderStats,
}

/// The replay's state.
struct Replay<'a> {
    cfg: &'a ReplayConfig,
    s: TcpSender,
    /// The model's sends not yet matched, each with the time it is due (paced).
    pending: VecDeque<(Segment, Instant)>,
    /// When the pacing lets the next send out.
    pace_next: Instant,
    /// The latest time the model was given (its clock never goes back).
    last: Instant,
    /// TSval -> latest kernel send time with it (Linux's TSval clock ticks in ms, so several sends
    /// share one; the latest keeps Eifel's "echo predates the retransmission" test as strict as Linux's).
    tsval_time: BTreeMap<u32, Instant>,
    report: ReplayReport,
    high_sent: u64,
    writes: usize,
}

impl Replay<'_> {
    fn state(&self) -> (u64, u64, &'static str) {
        (self.s.cc().cwnd(), self.s.in_flight(), self.s.cc().state())
    }

    fn diverge(
        &mut self,
        t: Instant,
        event: usize,
        kind: DivergenceKind,
        kernel: Option<(u64, u64, bool)>,
        model: Option<(Segment, Instant)>,
        kernel_cwnd: Option<u64>,
    ) {
        self.report.divergence_count += 1;
        if self.report.divergences.len() < self.cfg.max_divergences {
            let (model_cwnd, model_in_flight, model_state) = self.state();
            self.report.divergences.push(Divergence {
                t,
                event,
                kind,
                kernel,
                model,
                kernel_cwnd,
                model_cwnd,
                model_in_flight,
                model_state,
            });
        }
    }

    fn clean(&self) -> bool {
        self.report.divergence_count == 0
    }

    /// The application's writes up to `t`.
    fn write_until(&mut self, t: Instant) {
        while let Some(&(at, bytes)) = self.cfg.writes.get(self.writes) {
            if at > t {
                break;
            }
            self.s.write(bytes);
            self.writes += 1;
            self.last = self.last.max(at);
        }
    }

    /// What the model sends at `t`, queued for matching, as far as the kernel's pacing lets it out
    /// (Linux decides each send when its pacing time comes, EDT, so a retransmission found meanwhile
    /// goes first); returns whether it sent.
    fn drain(&mut self, t: Instant) -> bool {
        let t = t.max(self.last);
        self.last = t;
        let mut sent = false;
        // A bound against a model that would send forever at one instant (it cannot: the window ends it).
        for _ in 0..100_000 {
            if self.cfg.pacing.is_some() && self.pace_next > t {
                break;
            }
            let Some(seg) = self.s.poll_transmit(t) else { break };
            self.pace_next = t + self.pacing_gap(seg.len);
            self.pending.push_back((seg, t));
            sent = true;
        }
        sent
    }

    /// The model's paced sends up to `t`, each at its pacing time.
    fn pace_until(&mut self, t: Instant) {
        for _ in 0..1_000_000 {
            if self.cfg.pacing.is_none() || self.pace_next > t {
                return;
            }
            let at = self.pace_next.max(self.last);
            self.timers_until(at);
            if !self.drain(at) {
                return;
            }
        }
    }

    /// The kernel sent before the model's pacing time (its rate a little higher than the model's
    /// estimate): the model's send, if the window allows one, taken now, due at its pacing time.
    fn send_early(&mut self, t: Instant) {
        if self.cfg.pacing.is_none() || self.pace_next > t + self.cfg.slack {
            return;
        }
        let t = t.max(self.last);
        self.last = t;
        if let Some(seg) = self.s.poll_transmit(t) {
            let due = self.pace_next.max(t);
            self.pace_next = due + self.pacing_gap(seg.len);
            self.pending.push_back((seg, due));
        }
    }

    /// Linux `tcp_update_pacing_rate`: the time `len` bytes take at the kernel's pacing rate.
    fn pacing_gap(&self, len: u32) -> Duration {
        let (Some((ss, ca)), Some(srtt)) = (self.cfg.pacing, self.s.srtt()) else {
            return Duration::ZERO;
        };
        // Linux `tcp_update_skb_after_send`: the first 10 data segments are not paced.
        if self.s.stats.segments_sent < 10 {
            return Duration::ZERO;
        }
        let cwnd = self.s.cc().cwnd();
        let ratio = if cwnd < self.s.cc().ssthresh() / 2 { ss } else { ca };
        let bytes_per_srtt = u128::from(cwnd.max(self.s.in_flight())) * u128::from(ratio);
        if bytes_per_srtt == 0 {
            return Duration::ZERO;
        }
        Duration((u128::from(len) * u128::from(srtt.as_nanos()) * 100 / bytes_per_srtt) as u64)
    }

    /// The model's timers up to `t` (each fired at its own deadline, its sends queued then).
    fn timers_until(&mut self, t: Instant) {
        for _ in 0..10_000 {
            match self.s.poll_timeout() {
                Some(d) if d <= t => {
                    let d = d.max(self.last);
                    self.write_until(d);
                    self.s.handle_timeout(d);
                    self.drain(d);
                }
                _ => return,
            }
        }
    }

    /// A model send older than the slack that the kernel never made.
    fn check_stale(&mut self, t: Instant, event: usize) {
        if let Some(&(seg, at)) = self.pending.front() {
            if t.saturating_duration_since(at) > self.cfg.slack {
                self.diverge(t, event, DivergenceKind::KernelDidNotSend, None, Some((seg, at)), None);
                // The model believes these sent; the kernel did not send them: nothing further to match.
                self.pending.clear();
            }
        }
    }

    fn on_send(&mut self, t: Instant, event: usize, seq: u64, end: u64) {
        let retx = seq < self.high_sent;
        self.high_sent = self.high_sent.max(end);
        self.report.kernel_sends += 1;
        self.report.kernel_retransmissions += u64::from(retx);
        if self.pending.is_empty() {
            self.drain(t);
        }
        if self.pending.is_empty() {
            self.send_early(t);
        }
        let Some((seg, at)) = self.pending.pop_front() else {
            self.diverge(t, event, DivergenceKind::ModelWouldNotSend, Some((seq, end, retx)), None, None);
            return;
        };
        // The kernel's segment further back in the model's queue: the model would have sent the ones
        // before it first (a window one or more segments wider, or another order).
        if !(seg.seq == seq && seg.retransmission == retx) {
            if let Some(k) = self.pending.iter().position(|&(p, _)| p.seq == seq && p.retransmission == retx) {
                self.diverge(t, event, DivergenceKind::KernelDidNotSend, Some((seq, end, retx)), Some((seg, at)), None);
                self.pending.drain(..=k);
                return;
            }
        }
        let kind = match (retx, seg.retransmission) {
            (true, false) => Some(DivergenceKind::KernelRetransmits),
            (false, true) => Some(DivergenceKind::ModelRetransmits),
            _ if seg.seq != seq => Some(DivergenceKind::DifferentSegment),
            _ => None,
        };
        match kind {
            Some(k) => {
                self.diverge(t, event, k, Some((seq, end, retx)), Some((seg, at)), None);
                self.pending.clear();
            }
            None if self.clean() => {
                self.report.matched_before_first += 1;
                let lag = t.saturating_duration_since(at);
                self.report.lags_ns.push(t.as_nanos() as i64 - at.as_nanos() as i64);
                if lag > self.report.max_lag {
                    self.report.max_lag = lag;
                    self.report.max_lag_at = t;
                }
            }
            None => {}
        }
    }

    fn on_ack(&mut self, t: Instant, ack: &Ack) {
        let t = t.max(self.last);
        self.last = t;
        self.s.on_ack(t, ack);
        // A timer the ACK armed for now (RACK's reordering timer with a zero window) runs before the
        // sends, as Linux marks the losses while it processes the ACK.
        self.timers_until(t);
        self.drain(t);
    }

    fn ts_time(&self, tsecr: u32) -> Option<Instant> {
        self.tsval_time.get(&tsecr).copied()
    }

    fn mss(&self) -> f64 {
        f64::from(self.cfg.tcp.mss)
    }

    fn cwnd_segments(&self) -> f64 {
        self.s.cc().cwnd() as f64 / self.mss()
    }
}

/// Replays `events` (in time order) against the model and compares the windows with `samples` (in
/// time order). Errors: an unknown controller name.
pub fn replay(
    cfg: &ReplayConfig,
    events: &[TraceEvent],
    samples: &[InfoSample],
) -> Result<ReplayReport, cc::UnknownAlgorithm> {
    let controller = cc::build(&cfg.cc, u64::from(cfg.tcp.mss), cfg.tcp.init_cwnd_segments)?;
    let mut r = Replay {
        cfg,
        s: TcpSender::new(cfg.tcp, controller, Some(0)),
        pending: VecDeque::new(),
        pace_next: Instant::ZERO,
        last: Instant::ZERO,
        tsval_time: BTreeMap::new(),
        report: ReplayReport {
            divergences: Vec::new(),
            divergence_count: 0,
            series: Vec::new(),
            matched_before_first: 0,
            kernel_sends: 0,
            kernel_retransmissions: 0,
            max_lag: Duration::ZERO,
            max_lag_at: Instant::ZERO,
            lags_ns: Vec::new(),
            model_stats: SenderStats::default(),
        },
        high_sent: 0,
        writes: 0,
    };
    // Samples: the model's window when each read starts (`lo`), compared when it ends.
    let mut next_lo = 0usize;
    let mut lo_cwnd: Vec<f64> = vec![0.0; samples.len()];
    let mut next_hi = 0usize;
    let mut sample_points = |r: &mut Replay<'_>, t: Instant, event: usize, lo_cwnd: &mut Vec<f64>| {
        while next_lo < samples.len() && samples[next_lo].t_lo <= t {
            r.timers_until(samples[next_lo].t_lo);
            lo_cwnd[next_lo] = r.cwnd_segments();
            next_lo += 1;
        }
        while next_hi < next_lo && samples[next_hi].t_hi <= t {
            let smp = samples[next_hi];
            r.timers_until(smp.t_hi);
            let hi = r.cwnd_segments();
            let (lo_c, hi_c) = (lo_cwnd[next_hi].min(hi), lo_cwnd[next_hi].max(hi));
            let kernel = smp.cwnd_segments as f64;
            let tol = cfg.tol_segments.max(cfg.tol_frac * kernel);
            let compared = !smp.in_recovery && r.s.cc().state() != "recovery";
            let within = !compared || (kernel >= lo_c - tol && kernel <= hi_c + tol);
            let ssthresh = r.s.cc().ssthresh();
            let mid = Instant(smp.t_lo.as_nanos() + (smp.t_hi.as_nanos().saturating_sub(smp.t_lo.as_nanos())) / 2);
            r.report.series.push(AlignedSample {
                t: mid,
                kernel_cwnd: smp.cwnd_segments,
                model_cwnd_lo: lo_c,
                model_cwnd_hi: hi_c,
                model_ssthresh: (ssthresh != u64::MAX).then(|| ssthresh as f64 / r.mss()),
                compared,
                within,
            });
            if !within {
                r.diverge(mid, event, DivergenceKind::Cwnd, None, None, Some(smp.cwnd_segments));
            }
            next_hi += 1;
        }
    };
    for (i, ev) in events.iter().enumerate() {
        sample_points(&mut r, ev.t, i, &mut lo_cwnd);
        r.write_until(ev.t);
        r.timers_until(ev.t);
        r.pace_until(ev.t);
        match ev.kind {
            TraceKind::Send { seq, end, tsval } => {
                if let Some(v) = tsval {
                    r.tsval_time.insert(v, ev.t);
                }
                r.on_send(ev.t, i, seq, end);
            }
            TraceKind::Ack { cum, sack, n_sack, rwnd, tsecr } => {
                r.check_stale(ev.t, i);
                let ack = Ack {
                    // The FIN's sequence number is no data byte.
                    cum: cum.min(r.high_sent),
                    sack,
                    n_sack: n_sack.min(3),
                    rwnd,
                    ts_ecr: tsecr.and_then(|v| r.ts_time(v)),
                    startcp: Default::default(),
                };
                r.on_ack(ev.t, &ack);
            }
        }
    }
    if let Some(last) = events.last() {
        sample_points(&mut r, Instant(u64::MAX), events.len(), &mut lo_cwnd);
        r.check_stale(last.t + cfg.slack + Duration(1), events.len());
    }
    r.report.model_stats = r.s.stats;
    Ok(r.report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TcpReceiver;

    const MSS: u32 = 1000;

    fn cfg(writes: Vec<(Instant, u64)>) -> ReplayConfig {
        ReplayConfig {
            tcp: TcpConfig { mss: MSS, ..TcpConfig::default() },
            cc: "cubic".into(),
            writes,
            slack: Duration::from_millis(5),
            tol_segments: 2.0,
            tol_frac: 0.1,
            max_divergences: 10,
            pacing: None,
        }
    }

    fn us(t: Instant) -> u32 {
        (t.as_nanos() / 1000) as u32
    }

    fn ms(x: u64) -> Instant {
        Instant(x * 1_000_000)
    }

    /// A closed loop of the model itself over a 40 ms path that drops the segments in `drop` (first
    /// transmissions only): the sender's view (sends, ACKs, its window every 10 ms) as a trace.
    fn model_trace(drop: &[u64], until: Instant) -> (Vec<TraceEvent>, Vec<InfoSample>) {
        let tcp = TcpConfig { mss: MSS, ..TcpConfig::default() };
        let mut s = TcpSender::new(tcp, cc::build("cubic", u64::from(MSS), 10).unwrap(), Some(0));
        s.write(u64::MAX / 4);
        let mut rx = TcpReceiver::new(tcp);
        let one_way = Duration::from_millis(20);
        let mut to_rx: VecDeque<(Instant, Segment)> = VecDeque::new();
        let mut to_tx: VecDeque<(Instant, Ack)> = VecDeque::new();
        let (mut events, mut samples) = (Vec::new(), Vec::new());
        let mut now = Instant(1);
        let mut next_sample = ms(10);
        let mut dropped = std::collections::BTreeSet::new();
        // Sends what the sender has now, as the kernel does after each ACK it processes.
        let send_all = |s: &mut TcpSender,
                        now: Instant,
                        events: &mut Vec<TraceEvent>,
                        to_rx: &mut VecDeque<_>,
                        dropped: &mut std::collections::BTreeSet<u64>| {
            while let Some(seg) = s.poll_transmit(now) {
                let end = seg.seq + u64::from(seg.len);
                let tsval = Some(us(seg.ts));
                events.push(TraceEvent { t: now, kind: TraceKind::Send { seq: seg.seq, end, tsval } });
                if drop.contains(&seg.seq) && dropped.insert(seg.seq) {
                    continue;
                }
                to_rx.push_back((now + one_way, seg));
            }
        };
        send_all(&mut s, now, &mut events, &mut to_rx, &mut dropped);
        while now < until {
            let mut next =
                [s.poll_timeout(), to_rx.front().map(|x| x.0), to_tx.front().map(|x| x.0), rx.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(until)
                    .min(next_sample);
            if next <= now {
                next = Instant(now.as_nanos() + 1);
            }
            now = next;
            if now >= next_sample {
                let c = s.cc().cwnd() / u64::from(MSS);
                let in_rec = s.cc().state() == "recovery";
                samples.push(InfoSample { t_lo: now, t_hi: now, cwnd_segments: c, in_recovery: in_rec });
                next_sample += Duration::from_millis(10);
            }
            while to_rx.front().is_some_and(|x| x.0 <= now) {
                let (_, seg) = to_rx.pop_front().unwrap();
                if let (_, Some(a)) = rx.handle_segment(now, &seg) {
                    to_tx.push_back((now + one_way, a));
                }
            }
            if let Some(a) = rx.handle_timeout(now) {
                to_tx.push_back((now + one_way, a));
            }
            if s.poll_timeout().is_some_and(|d| d <= now) {
                s.handle_timeout(now);
                send_all(&mut s, now, &mut events, &mut to_rx, &mut dropped);
            }
            while to_tx.front().is_some_and(|x| x.0 <= now) {
                let (_, a) = to_tx.pop_front().unwrap();
                events.push(TraceEvent {
                    t: now,
                    kind: TraceKind::Ack {
                        cum: a.cum,
                        sack: a.sack,
                        n_sack: a.n_sack,
                        rwnd: a.rwnd,
                        tsecr: a.ts_ecr.map(us),
                    },
                });
                s.on_ack(now, &a);
                if s.poll_timeout().is_some_and(|d| d <= now) {
                    s.handle_timeout(now);
                }
                send_all(&mut s, now, &mut events, &mut to_rx, &mut dropped);
            }
        }
        (events, samples)
    }

    #[test]
    fn the_models_own_trace_does_not_diverge() {
        let (events, samples) = model_trace(&[30_000, 31_000, 90_000], ms(1500));
        assert!(events.len() > 300, "{}", events.len());
        let rep = replay(&cfg(vec![(Instant::ZERO, u64::MAX / 4)]), &events, &samples).unwrap();
        assert!(rep.kernel_retransmissions >= 3, "{rep:?}");
        assert_eq!(rep.divergences, vec![], "first: {:?}", rep.divergences.first());
        assert_eq!(rep.matched_before_first, rep.kernel_sends);
        assert!(rep.series.len() > 100 && rep.series.iter().all(|x| x.within));
    }

    #[test]
    fn an_extra_kernel_retransmission_is_caught_where_it_happens() {
        let (mut events, samples) = model_trace(&[30_000], ms(1200));
        // The "kernel" resends segment 5 just after the 60th event: nothing asked for it.
        let at = 60;
        let t = events[at].t + Duration(1);
        events.insert(at + 1, TraceEvent { t, kind: TraceKind::Send { seq: 5000, end: 6000, tsval: None } });
        let rep = replay(&cfg(vec![(Instant::ZERO, u64::MAX / 4)]), &events, &samples).unwrap();
        let first = rep.divergences.first().expect("a divergence");
        assert_eq!(first.event, at + 1);
        assert_eq!(first.kernel, Some((5000, 6000, true)));
        assert!(matches!(first.kind, DivergenceKind::KernelRetransmits | DivergenceKind::ModelWouldNotSend));
    }

    #[test]
    fn a_missing_kernel_send_and_a_wider_window_are_caught() {
        let (mut events, mut samples) = model_trace(&[], ms(600));
        // Take out the 40th event's send: the model would send it, the kernel "did not".
        let at = events.iter().enumerate().filter(|(_, e)| matches!(e.kind, TraceKind::Send { .. })).nth(40).unwrap().0;
        let removed = events.remove(at);
        let rep = replay(&cfg(vec![(Instant::ZERO, u64::MAX / 4)]), &events, &samples).unwrap();
        let first = rep.divergences.first().expect("a divergence");
        assert!(first.t >= removed.t, "{first:?}");
        assert!(matches!(first.kind, DivergenceKind::DifferentSegment | DivergenceKind::KernelDidNotSend));
        // A kernel window twice the model's is a cwnd divergence (the sends untouched).
        let (events, _) = model_trace(&[], ms(600));
        for s in &mut samples {
            s.cwnd_segments *= 2;
        }
        let rep = replay(&cfg(vec![(Instant::ZERO, u64::MAX / 4)]), &events, &samples).unwrap();
        let first = rep.divergences.first().expect("a divergence");
        assert_eq!(first.kind, DivergenceKind::Cwnd);
    }

    #[test]
    fn the_application_writes_gate_new_data() {
        // 37 bytes first (iperf3's cookie), the rest 100 ms later: the model sends 37 bytes, then waits.
        let events = vec![
            TraceEvent { t: ms(1), kind: TraceKind::Send { seq: 0, end: 37, tsval: Some(7) } },
            TraceEvent {
                t: ms(41),
                kind: TraceKind::Ack { cum: 37, sack: [(0, 0); 3], n_sack: 0, rwnd: 1 << 20, tsecr: Some(7) },
            },
            TraceEvent { t: ms(101), kind: TraceKind::Send { seq: 37, end: 1037, tsval: Some(9) } },
        ];
        let c = cfg(vec![(ms(1), 37), (ms(100), 10_000)]);
        let rep = replay(&c, &events, &[]).unwrap();
        // The third send matches; the rest of the initial window the model would send unmatched at the end.
        assert_eq!(rep.matched_before_first, 2);
        assert_eq!(rep.divergences[0].kind, DivergenceKind::KernelDidNotSend);
        assert_eq!(rep.divergences[0].model.unwrap().0.seq, 1037);
    }

    #[test]
    fn linux_pacing_times_the_models_sends() {
        // The initial window leaves at once (Linux paces from the 10th segment on); one ACK 80 ms later
        // lets out two segments, the second one pacing gap (1000 B x 80 ms / (200 % x 11 000 B) = 3.64 ms)
        // after the first.
        let mut events: Vec<TraceEvent> = (0..10)
            .map(|k| TraceEvent {
                t: ms(1),
                kind: TraceKind::Send { seq: k * 1000, end: k * 1000 + 1000, tsval: None },
            })
            .collect();
        let ack = TraceKind::Ack { cum: 1000, sack: [(0, 0); 3], n_sack: 0, rwnd: 1 << 20, tsecr: None };
        events.push(TraceEvent { t: ms(81), kind: ack });
        let second = Instant(ms(81).as_nanos() + 3_700_000);
        events.push(TraceEvent {
            t: Instant(ms(81).as_nanos() + 50_000),
            kind: TraceKind::Send { seq: 10_000, end: 11_000, tsval: None },
        });
        events.push(TraceEvent { t: second, kind: TraceKind::Send { seq: 11_000, end: 12_000, tsval: None } });
        let mut c = cfg(vec![(ms(1), u64::MAX / 4)]);
        c.pacing = Some((200, 120));
        let rep = replay(&c, &events, &[]).unwrap();
        assert_eq!(rep.divergences, vec![]);
        assert_eq!(rep.matched_before_first, 12);
        assert!(rep.max_lag < Duration::from_micros(200), "{:?}", rep.max_lag);
        // Unpaced, the model would have sent both at 81 ms: the kernel looks 3.7 ms late.
        c.pacing = None;
        let rep = replay(&c, &events, &[]).unwrap();
        assert_eq!(rep.max_lag_at, second);
        assert!(rep.max_lag > Duration::from_millis(3), "{:?}", rep.max_lag);
    }
}
