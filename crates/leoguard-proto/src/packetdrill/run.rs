//! Runs parsed events against the model on virtual time. The script's local TCP is a
//! [`TcpSender`]; the runner plays its listening socket and handshake (the model has none), turns
//! inbound ACKs into [`Ack`]s and checks what the sender emits against outbound lines.
//!
//! Timing follows packetdrill's `run.c`: a relative time counts from when the previous event
//! actually happened (for an outbound packet, when the model sent it); every event must happen
//! within `TOLERANCE_US` of its time (or inside its range; `*` is any time). Consecutive outbound
//! data segments sent within the tolerance of each other may match one line that spans them, as
//! packetdrill sees a TSO/GSO super-packet. `%{ }%` blocks read a TCP_INFO snapshot taken at their
//! time and, as in packetdrill, run after the last event.

use super::expr::{self, CodeError, Value};
use super::parse::{Action, Dir, Event, Flags, Packet, Syscall, TcpOpt, Time};
use super::settings::{cc_name, Settings};
use super::{Failure, ScriptError, TOLERANCE_US};
use crate::cc;
use crate::tcp::{Ack, CaState, Segment, TcpConfig, TcpSender};
use leoguard_core::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The MSS the local TCP advertises (Ethernet MTU 1500 - 40).
const LOCAL_MSS: u32 = 1460;
/// The window scale the local TCP offers (Linux's with packetdrill's defaults.sh tcp_rmem).
const LOCAL_WSCALE: u8 = 8;
/// Peer MSS when its SYN carries none (packetdrill scripts' usual `mss 1000`).
const DEFAULT_PEER_MSS: u32 = 1000;
/// How long a `*` outbound line waits for a packet.
const ANY_WAIT_NS: i64 = 600_000_000_000;
const TOL_NS: i64 = TOLERANCE_US * 1000;

mod syscalls;

/// What the local TCP sent.
#[derive(Clone, Copy, Debug)]
enum Out {
    Syn,
    SynAck,
    /// The active opener's handshake ACK.
    Ack,
    Data(Segment),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed,
    Listening,
    /// SYN received, SYN-ACK sent at (ns).
    SynRcvd(i64),
    /// SYN sent at (ns).
    SynSent(i64),
    Established,
}

/// What the peer's SYN (or SYN-ACK) offered.
#[derive(Clone, Copy, Debug)]
struct Peer {
    mss: u32,
    wscale: Option<u8>,
    ts: bool,
}

struct Conn {
    sender: TcpSender,
    mss: u32,
    /// The peer's window shift (its SYN's wscale, when both sides offered one).
    shift: u8,
    ts: bool,
    rwnd: u64,
    /// Model sequence numbers where a write ended (those segments carry PSH).
    write_ends: BTreeSet<u64>,
    written: u64,
}

/// The state of one script run.
pub struct Runner {
    set: Settings,
    /// Model clock, ns.
    now: i64,
    /// When the previous event happened, ns.
    anchor: i64,
    pending: VecDeque<(i64, Out)>,
    phase: Phase,
    peer: Option<Peer>,
    conn: Option<Conn>,
    fds: BTreeSet<i64>,
    conn_fd: Option<i64>,
    nodelay: bool,
    sndbuf: Option<u64>,
    /// The last TS value the peer sent (Linux `ts_recent`).
    ts_recent: u32,
    /// Script TS values of outbound lines and the model times they stand for.
    ts_map: BTreeMap<u32, i64>,
    ts_anchor: Option<(u32, i64)>,
    /// Code blocks with their snapshots, run at the end.
    code: Vec<(usize, String, BTreeMap<String, Value>)>,
}

fn fail(line: usize, expected: impl Into<String>, got: impl Into<String>) -> ScriptError {
    ScriptError::Fail(Failure { line, expected: expected.into(), got: got.into(), syntax: false })
}

fn unsupported(line: usize, feature: impl Into<String>) -> ScriptError {
    ScriptError::Unsupported { line, feature: feature.into() }
}

fn secs(ns: i64) -> String {
    format!("{:.6}", ns as f64 / 1e9)
}

fn ns(us: i64) -> i64 {
    us.saturating_mul(1000)
}

fn inst(ns: i64) -> Instant {
    Instant(ns.max(0) as u64)
}

/// A packet as it appears in messages, in script terms.
fn describe(flags: Flags, start: u32, end: u32, ack: Option<u32>, opts: &[TcpOpt]) -> String {
    let mut s = format!("{flags} {start}:{end}({})", end.wrapping_sub(start));
    if let Some(a) = ack {
        s += &format!(" ack {a}");
    }
    let shown: Vec<String> = opts
        .iter()
        .filter(|o| !matches!(o, TcpOpt::Nop | TcpOpt::Eol))
        .map(|o| match o {
            TcpOpt::Mss(m) => format!("mss {m}"),
            TcpOpt::SackOk => "sackOK".into(),
            TcpOpt::Wscale(w) => format!("wscale {w}"),
            TcpOpt::Ts(v, e) => format!("TS val {v} ecr {e}"),
            TcpOpt::Sack(b) => {
                format!("sack {}", b.iter().map(|(a, b)| format!("{a}:{b}")).collect::<Vec<_>>().join(" "))
            }
            TcpOpt::Nop | TcpOpt::Eol => String::new(),
        })
        .collect();
    if !shown.is_empty() {
        s += &format!(" <{}>", shown.join(","));
    }
    s
}

impl Runner {
    /// A runner with packetdrill's Linux defaults.
    pub fn new() -> Runner {
        Runner {
            set: Settings::default(),
            now: 0,
            anchor: 0,
            pending: VecDeque::new(),
            phase: Phase::Closed,
            peer: None,
            conn: None,
            fds: BTreeSet::new(),
            conn_fd: None,
            nodelay: false,
            sndbuf: None,
            ts_recent: 0,
            ts_map: BTreeMap::new(),
            ts_anchor: None,
            code: Vec::new(),
        }
    }

    /// Runs the events; the first mismatch or unsupported feature ends the run.
    pub fn run(mut self, events: &[Event]) -> Result<(), ScriptError> {
        if let Some(first) = events.first() {
            if !matches!(first.time, Time::Abs(0) | Time::Rel(0)) {
                return Err(fail(first.line, "the first event at time 0", "another time"));
            }
        }
        for ev in events {
            let (lo, hi) = match ev.time {
                Time::Abs(a) => (ns(a), ns(a)),
                Time::Rel(d) => (self.anchor + ns(d), self.anchor + ns(d)),
                Time::Any => (self.anchor, i64::MAX),
                Time::AbsRange(a, b) => (ns(a), ns(b)),
                Time::RelRange(a, b) => (self.anchor + ns(a), self.anchor + ns(b)),
            };
            match &ev.action {
                Action::Packet(p) if p.dir == Dir::Out => self.outbound(ev, p, lo, hi)?,
                action => {
                    let t = lo.max(self.now);
                    self.advance_to(ev.line, t)?;
                    match action {
                        Action::Packet(p) => self.inbound(ev.line, p)?,
                        Action::Syscall(s) => self.syscall(ev.line, s)?,
                        Action::Command(c) => self.command(ev.line, c)?,
                        Action::Code(c) => {
                            let snap = self.snapshot(ev.line)?;
                            self.code.push((ev.line, c.clone(), snap));
                        }
                    }
                    self.drain(ev.line)?;
                    self.anchor = t;
                }
            }
        }
        // packetdrill runs the code blocks after the last event, each with its own snapshot.
        let mut vars = BTreeMap::new();
        for (line, code, snap) in std::mem::take(&mut self.code) {
            vars.extend(snap);
            expr::run_block(&code, line, &mut vars).map_err(|e| match e {
                CodeError::Assert { line, expr, got } => {
                    let got = if got.is_empty() { "False".to_string() } else { format!("False ({got})") };
                    fail(line, format!("`{expr}` to hold"), got)
                }
                CodeError::Unsupported { line, feature } => unsupported(line, feature),
                CodeError::Syntax { line, token, expected } => {
                    ScriptError::Fail(Failure { line, expected, got: format!("'{token}'"), syntax: true })
                }
            })?;
        }
        Ok(())
    }

    /// The model's next timer, ns.
    fn next_timer(&self) -> Option<i64> {
        let c = self.conn.as_ref()?;
        c.sender.poll_timeout().map(|t| (t.0 as i64).max(self.now))
    }

    /// Fires the model's timer due at `at`.
    fn fire(&mut self, line: usize, at: i64) -> Result<(), ScriptError> {
        self.now = self.now.max(at);
        if let Some(c) = &mut self.conn {
            c.sender.handle_timeout(inst(self.now));
        }
        self.drain(line)
    }

    /// Runs the model's timers due before `t`, then sets the clock to `t`; a packet the model sent
    /// more than the tolerance before `t` was not expected.
    fn advance_to(&mut self, line: usize, t: i64) -> Result<(), ScriptError> {
        let mut same = 0;
        while let Some(d) = self.next_timer() {
            if d >= t {
                break;
            }
            if d <= self.now {
                same += 1;
                if same > 10_000 {
                    return Err(fail(line, "the model to make progress", format!("a timer stuck at {}", secs(d))));
                }
            } else {
                same = 0;
            }
            self.fire(line, d)?;
        }
        self.now = self.now.max(t);
        if let Some(&(at, out)) = self.pending.front() {
            if at < t - TOL_NS {
                return Err(fail(
                    line,
                    format!("no outbound packet before this line's event at {}", secs(t)),
                    format!("{} at {}", self.describe_out(&out), secs(at)),
                ));
            }
        }
        Ok(())
    }

    fn drain(&mut self, line: usize) -> Result<(), ScriptError> {
        let now = self.now;
        if let Some(c) = &mut self.conn {
            let mut n = 0;
            while let Some(seg) = c.sender.poll_transmit(inst(now)) {
                self.pending.push_back((now, Out::Data(seg)));
                n += 1;
                if n > 100_000 {
                    return Err(fail(line, "a bounded burst", "more than 100000 segments at one instant"));
                }
            }
        }
        Ok(())
    }

    fn describe_out(&self, out: &Out) -> String {
        match out {
            Out::Syn => describe(Flags { syn: true, ..Flags::default() }, 0, 0, None, &self.syn_opts(true)),
            Out::SynAck => {
                describe(Flags { syn: true, ack: true, ..Flags::default() }, 0, 0, Some(1), &self.syn_opts(false))
            }
            Out::Ack => describe(Flags { ack: true, ..Flags::default() }, 1, 1, Some(1), &self.data_opts()),
            Out::Data(s) => {
                let (f, a, b) = self.seg_view(s.seq, s.seq + u64::from(s.len));
                describe(f, a, b, Some(1), &self.data_opts())
            }
        }
    }

    /// Flags and script sequence numbers of model bytes [a, b).
    fn seg_view(&self, a: u64, b: u64) -> (Flags, u32, u32) {
        let psh = self.conn.as_ref().is_some_and(|c| c.write_ends.contains(&b));
        (Flags { ack: true, psh, ..Flags::default() }, (a + 1) as u32, (b + 1) as u32)
    }

    /// The options of the local SYN (`active`) or SYN-ACK.
    fn syn_opts(&self, active: bool) -> Vec<TcpOpt> {
        let mut o = vec![TcpOpt::Mss(LOCAL_MSS)];
        let peer = self.peer;
        let offered = |f: fn(&Peer) -> bool| active || peer.as_ref().is_some_and(f);
        if self.set.sack {
            o.push(TcpOpt::SackOk);
        }
        if self.set.timestamps && offered(|p| p.ts) {
            o.push(TcpOpt::Ts(0, if active { 0 } else { self.ts_recent }));
        }
        if self.set.wscale && offered(|p| p.wscale.is_some()) {
            o.push(TcpOpt::Wscale(LOCAL_WSCALE));
        }
        o
    }

    fn data_opts(&self) -> Vec<TcpOpt> {
        if self.conn.as_ref().is_some_and(|c| c.ts) || (self.conn.is_none() && self.peer.is_some_and(|p| p.ts)) {
            vec![TcpOpt::Ts(0, self.ts_recent)]
        } else {
            Vec::new()
        }
    }

    /// Compares option lists, nops aside; a TS value is free (packetdrill checks it only with
    /// `--tcp_ts_tick_usecs`) and is remembered to translate the peer's echoes.
    fn opts_match(expected: &[TcpOpt], actual: &[TcpOpt]) -> bool {
        let e: Vec<&TcpOpt> = expected.iter().filter(|o| !matches!(o, TcpOpt::Nop | TcpOpt::Eol)).collect();
        let a: Vec<&TcpOpt> = actual.iter().filter(|o| !matches!(o, TcpOpt::Nop | TcpOpt::Eol)).collect();
        e.len() == a.len()
            && e.iter().all(|x| {
                a.iter().any(|y| match (x, y) {
                    (TcpOpt::Ts(_, e1), TcpOpt::Ts(_, e2)) => e1 == e2,
                    _ => x == y,
                })
            })
    }

    fn remember_ts(&mut self, expected: &[TcpOpt], at: i64) {
        for o in expected {
            if let TcpOpt::Ts(v, _) = o {
                self.ts_map.entry(*v).or_insert(at);
                self.ts_anchor.get_or_insert((*v, at));
            }
        }
    }

    /// An outbound line: waits (running the model's timers) for the next packet the model sends,
    /// then checks it, its time and, for data, merges following segments as TSO/GSO would.
    fn outbound(&mut self, ev: &Event, p: &Packet, lo: i64, hi: i64) -> Result<(), ScriptError> {
        let line = ev.line;
        if p.win.is_some() {
            return Err(unsupported(line, "outbound window check (the model has no receive window)"));
        }
        if p.flags.fin || p.flags.rst {
            return Err(unsupported(line, "outbound FIN/RST (the model has no connection teardown)"));
        }
        let deadline = if hi == i64::MAX { self.now + ANY_WAIT_NS } else { hi + TOL_NS };
        let want_opts = p.opts.clone().unwrap_or_default();
        let expected_desc = describe(p.flags, p.start, p.end, p.ack, &want_opts);
        let when = |x: i64| if hi == i64::MAX { "any time".to_string() } else { secs(x) };
        let expected = if lo == hi || hi == i64::MAX {
            format!("`{expected_desc}` at {}", when(lo))
        } else {
            format!("`{expected_desc}` at {}~{}", secs(lo), secs(hi))
        };
        let mut same = 0;
        while self.pending.is_empty() {
            match self.next_timer() {
                Some(d) if d <= deadline => {
                    same = if d <= self.now { same + 1 } else { 0 };
                    if same > 10_000 {
                        return Err(fail(line, "the model to make progress", format!("a timer stuck at {}", secs(d))));
                    }
                    self.fire(line, d)?;
                }
                _ => {
                    let by = if hi == i64::MAX { "within 600 s".to_string() } else { format!("by {}", secs(deadline)) };
                    return Err(fail(line, expected, format!("no packet {by}")));
                }
            }
        }
        let Some((at, out)) = self.pending.pop_front() else { unreachable!("pending is not empty") };
        let time_ok = at >= lo - TOL_NS && (hi == i64::MAX || at <= hi + TOL_NS);
        let (ok, got) = match out {
            Out::Data(seg) => {
                let mut end = seg.seq + u64::from(seg.len);
                let want_end = u64::from(p.end.wrapping_sub(1));
                if u64::from(p.start) == seg.seq + 1 {
                    while end < want_end {
                        // A paced sender emits the rest of a TSO burst later: run the model up to
                        // the tolerance after the first segment to collect it.
                        if self.pending.is_empty() {
                            match self.next_timer() {
                                Some(d) if d <= at + TOL_NS => {
                                    self.fire(line, d)?;
                                    continue;
                                }
                                _ => break,
                            }
                        }
                        match self.pending.front() {
                            Some(&(t2, Out::Data(s2))) if s2.seq == end && t2 <= at + TOL_NS => {
                                end += u64::from(s2.len);
                                self.pending.pop_front();
                            }
                            _ => break,
                        }
                    }
                }
                let (f, a, b) = self.seg_view(seg.seq, end);
                let actual = self.data_opts();
                let ok = f == p.flags
                    && a == p.start
                    && b == p.end
                    && p.ack.is_none_or(|x| x == 1)
                    && Self::opts_match(&want_opts, &actual);
                (ok, describe(f, a, b, Some(1), &actual))
            }
            other => {
                let (flags, start, end, opts) = match other {
                    Out::Syn => (Flags { syn: true, ..Flags::default() }, 0, 0, self.syn_opts(true)),
                    Out::SynAck => (Flags { syn: true, ack: true, ..Flags::default() }, 0, 0, self.syn_opts(false)),
                    _ => (Flags { ack: true, ..Flags::default() }, 1, 1, self.data_opts()),
                };
                let ack = (!matches!(other, Out::Syn)).then_some(1);
                let ok = flags == p.flags
                    && start == p.start
                    && end == p.end
                    && (p.ack.is_none() || p.ack == ack)
                    && (p.opts.is_none() || Self::opts_match(&want_opts, &opts));
                (ok, describe(flags, start, end, ack, &opts))
            }
        };
        if !ok || !time_ok {
            return Err(fail(line, expected, format!("`{got}` at {}", secs(at))));
        }
        self.remember_ts(&want_opts, at);
        self.anchor = at;
        Ok(())
    }

    /// Maps an echoed TS value back to model time.
    fn ecr_time(&self, ecr: u32) -> Option<Instant> {
        if ecr == 0 {
            return None; // Linux ignores a zero echo (`tcp_packet_delayed`)
        }
        if let Some(&t) = self.ts_map.get(&ecr) {
            return Some(inst(t));
        }
        // Linux's TS clock ticks in milliseconds.
        let (v0, t0) = self.ts_anchor?;
        Some(inst(t0 + (i64::from(ecr) - i64::from(v0)) * 1_000_000))
    }

    fn inbound(&mut self, line: usize, p: &Packet) -> Result<(), ScriptError> {
        if p.flags.rst || p.flags.fin {
            return Err(unsupported(line, "inbound FIN/RST (the model has no connection teardown)"));
        }
        let opts = p.opts.clone().unwrap_or_default();
        let mut ts_val = None;
        let mut ts_ecr = None;
        let mut sack: Vec<(u32, u32)> = Vec::new();
        let mut peer = Peer { mss: DEFAULT_PEER_MSS, wscale: None, ts: false };
        let mut sack_ok = false;
        for o in &opts {
            match o {
                TcpOpt::Ts(v, e) => {
                    ts_val = Some(*v);
                    ts_ecr = Some(*e);
                    peer.ts = true;
                }
                TcpOpt::Sack(b) => sack.extend(b),
                TcpOpt::Mss(m) => peer.mss = *m,
                TcpOpt::Wscale(w) => peer.wscale = Some(*w),
                TcpOpt::SackOk => sack_ok = true,
                TcpOpt::Nop | TcpOpt::Eol => {}
            }
        }
        if p.flags.syn {
            let active = p.flags.ack;
            match (self.phase, active) {
                (Phase::Listening, false) => {}
                (Phase::SynSent(_), true) => {
                    if p.ack != Some(1) {
                        return Err(unsupported(line, "a SYN-ACK that does not acknowledge the SYN"));
                    }
                }
                _ => return Err(unsupported(line, "a SYN the local TCP does not expect (it would reset)")),
            }
            if !sack_ok || !self.set.sack {
                return Err(unsupported(line, "a peer without SACK (Reno's duplicate-ACK recovery is not modelled)"));
            }
            if peer.mss < 64 {
                return Err(unsupported(line, format!("a peer MSS of {} (below 64)", peer.mss)));
            }
            if !self.set.timestamps {
                peer.ts = false;
            }
            if !self.set.wscale {
                peer.wscale = None;
            }
            self.peer = Some(peer);
            self.ts_recent = ts_val.unwrap_or(0);
            if let Phase::SynSent(syn_at) = self.phase {
                let rtt = self.now - syn_at;
                self.establish(line, p.win.unwrap_or(65535), rtt, true)?;
                self.pending.push_back((self.now, Out::Ack));
            } else {
                self.pending.push_back((self.now, Out::SynAck));
                self.phase = Phase::SynRcvd(self.now);
            }
            return Ok(());
        }
        if p.end != p.start {
            return Err(unsupported(line, "inbound data (the model's receiver is not under test)"));
        }
        if p.start != 1 {
            return Err(unsupported(line, format!("inbound sequence number {} (the peer sends no data)", p.start)));
        }
        if !p.flags.ack {
            return Err(unsupported(line, "an inbound segment without ACK"));
        }
        if let Some(v) = ts_val {
            self.ts_recent = v;
        }
        let ack = p.ack.ok_or_else(|| unsupported(line, "an ACK line without 'ack N'"))?;
        if let Phase::SynRcvd(synack_at) = self.phase {
            if ack != 1 {
                return Err(unsupported(
                    line,
                    "a handshake ACK that does not acknowledge the SYN-ACK (it would reset)",
                ));
            }
            let rtt = self.now - synack_at;
            let win = p.win.unwrap_or(65535);
            return self.establish(line, win, rtt, false);
        }
        if self.phase != Phase::Established {
            return Err(unsupported(line, "an ACK before the connection exists"));
        }
        let ts_ecr = ts_ecr.and_then(|e| self.ecr_time(e));
        let now = inst(self.now);
        let c = self.conn.as_mut().unwrap_or_else(|| unreachable!("established"));
        if let Some(w) = p.win {
            c.rwnd = u64::from(w) << c.shift;
        }
        if sack.len() > 3 {
            return Err(unsupported(line, "more than 3 SACK blocks"));
        }
        let cum = u64::from(ack.wrapping_sub(1));
        if cum > c.sender.snd_nxt() {
            return Err(unsupported(line, "an ACK of data not sent (Linux drops it)"));
        }
        let mut a = Ack { cum, rwnd: c.rwnd, ts_ecr, n_sack: sack.len() as u8, ..Ack::default() };
        for (i, (x, y)) in sack.iter().enumerate() {
            a.sack[i] = (u64::from(x.wrapping_sub(1)), u64::from(y.wrapping_sub(1)));
        }
        c.sender.on_ack(now, &a);
        Ok(())
    }

    /// The handshake completed: the model's sender starts, with the handshake's RTT sample.
    fn establish(&mut self, line: usize, win: u32, rtt_ns: i64, active: bool) -> Result<(), ScriptError> {
        let peer = self.peer.unwrap_or(Peer { mss: DEFAULT_PEER_MSS, wscale: None, ts: false });
        let shift = match peer.wscale {
            Some(w) if self.set.wscale => w,
            _ => 0,
        };
        // Linux `tcp_mss_to_mtu`/`tcp_sync_mss`: payload per segment is the smaller MSS less the
        // timestamp option's 12 bytes.
        let ts = peer.ts && self.set.timestamps;
        let mss = peer.mss.min(LOCAL_MSS) - if ts { 12 } else { 0 };
        // The SYN-ACK's window (active open) is never scaled; the handshake ACK's is.
        let rwnd = if active { u64::from(win) } else { u64::from(win) << shift };
        let cfg = TcpConfig {
            mss,
            header_bytes: 40 + if ts { 12 } else { 0 },
            init_cwnd_segments: 10,
            rwnd,
            recovery: self.set.rec,
            ..TcpConfig::default()
        };
        let cc = cc::build(&self.set.cc, u64::from(mss), 10)
            .map_err(|e| unsupported(line, format!("congestion control: {e}")))?;
        let mut sender = TcpSender::new(cfg, cc, Some(0));
        sender.on_handshake_rtt(inst(self.now), Duration(rtt_ns.max(0) as u64));
        self.conn = Some(Conn { sender, mss, shift, ts, rwnd, write_ends: BTreeSet::new(), written: 0 });
        self.phase = Phase::Established;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::packetdrill::{run_script, Outcome};

    const HEAD: &str = "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+0 bind(3, ..., ...) = 0\n+0 listen(3, 1) = 0\n";

    #[test]
    fn odd_inputs_are_unsupported_or_failures_never_panics() {
        for (pkt, kind) in [
            ("+0 < S 0:0(0) win 100 <mss 0,sackOK>\n", "unsupported"),
            ("+0 < S 0:0(0) win 100 <mss 1000>\n", "unsupported"),
            ("+0 < . 1:1(0) ack 0 win 100\n", "unsupported"),
            ("+0 > . 0:0(0) ack 1\n", "fail"),
            ("+0 < F. 1:1(0) ack 1 win 100\n", "unsupported"),
            ("+0 < S 0:0(0) win 100 <mss 1000,sackOK,FO abcd>\n", "unsupported"),
        ] {
            let out = run_script(&format!("{HEAD}{pkt}"));
            assert_eq!(out.kind(), kind, "{pkt}: {out}");
        }
        let bad_sack = format!(
            "{HEAD}+0 < S 0:0(0) win 100 <mss 1000,sackOK>\n+0 > S. 0:0(0) ack 1 <mss 1460,sackOK>\n\
             +.1 < . 1:1(0) ack 1 win 65535\n+0 accept(3, ..., ...) = 4\n+0 write(4, ..., 2000) = 2000\n\
             +0 > P. 1:2001(2000) ack 1\n+.1 < . 1:1(0) ack 1 win 65535 <sack 0:0 4000:1>\n"
        );
        assert_eq!(run_script(&bad_sack), Outcome::Pass);
    }
}
