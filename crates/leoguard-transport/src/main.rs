//! `leoguard-transport`: leoguard's own TCP over UDP between two hosts (docs/transport.md).
//!
//! ```text
//! leoguard-transport send --to ADDR:PORT --cc NAME (--bytes N | --seconds S) [--json-interval MS] ...
//! leoguard-transport recv --bind ADDR:PORT --out FILE.json [--json-interval MS] ...
//! leoguard-transport leotp-serve --bind ADDR:PORT [--bytes N] ...      (LEOTP producer, src/leotp_io.rs)
//! leoguard-transport leotp-fetch --from ADDR:PORT (--bytes N | --seconds S) ...   (LEOTP consumer)
//! ```
//! This file is the I/O only: the real clock (CLOCK_MONOTONIC, in whole microseconds, as leoguard
//! `Instant`s from the process's start), one nonblocking UDP socket (IPv4 or IPv6), ppoll until the
//! next deadline the sans-IO end asks for, SIGINT/SIGTERM/SIGHUP (leoguard-os's flags), and the JSON
//! reports. Every protocol decision is in `leoguard_transport::{sender, receiver}` and leoguard-proto.
//!
//! Exit codes: 0 the transfer completed or a signal stopped it; 1 a runtime failure, or --timeout
//! passed before the transfer completed; 2 a bad command line.

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;
use leoguard_core::{Duration, Instant};
use leoguard_os as sys;
use leoguard_proto::startcp::{MlpPolicy, ScriptedLeads, StartcpPolicy, StartcpSpec};
use leoguard_transport::args::{self, Command, PolicyArg, RecvArgs, SendArgs, StartcpArgs};
use leoguard_transport::receiver::Receiver;
use leoguard_transport::report::{Lateness, Rate, RecvInterval, RecvSummary, SendInterval, SendSummary};
use leoguard_transport::sender::{Amount, Sender, SenderConfig};

mod leotp_io;

/// Datagrams read per readiness before the loop sends and looks at its timers again.
const RECV_BATCH: usize = 256;
/// Socket buffers asked for (the kernel caps them at net.core.[rw]mem_max).
const SOCKET_BUFFER: i32 = 4 << 20;
/// A timed sender's default --timeout beyond its sending time.
const DRAIN: Duration = Duration::from_secs(10);

/// The real clock as leoguard `Instant`s: CLOCK_MONOTONIC since `origin_ns`, cut to whole
/// microseconds (TSval's unit, so an echoed timestamp is exactly the send time it came from).
struct Clock {
    origin_ns: u64,
}

impl Clock {
    fn start() -> Clock {
        Clock { origin_ns: sys::monotonic_ns() }
    }

    fn now(&self) -> Instant {
        Instant(sys::monotonic_ns().saturating_sub(self.origin_ns) / 1_000 * 1_000)
    }

    /// How long until `at` (zero if it has passed).
    fn until(&self, at: Instant) -> std::time::Duration {
        let now = sys::monotonic_ns().saturating_sub(self.origin_ns);
        std::time::Duration::from_nanos(at.as_nanos().saturating_sub(now))
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match args::parse(&argv) {
        Ok(Command::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Send(a)) => send(&a),
        Ok(Command::Recv(a)) => recv(&a),
        Ok(Command::LeotpServe(a)) => leotp_io::serve(&a),
        Ok(Command::LeotpFetch(a)) => leotp_io::fetch(&a),
        Err(e) => {
            eprintln!("leoguard-transport: {e}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("leoguard-transport: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b)).is_ok();
    if ok {
        u32::from_be_bytes(b)
    } else {
        (sys::monotonic_ns() as u32) ^ std::process::id().rotate_left(16)
    }
}

fn json_line(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, v)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Writes `v` to `path` through a temporary file, so a reader never sees half of it.
fn write_report(path: &Path, v: &impl serde::Serialize) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(v)?).with_context(|| format!("--out: writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("--out: renaming to {}", path.display()))?;
    Ok(())
}

fn socket(bind: SocketAddr) -> anyhow::Result<UdpSocket> {
    let sock = UdpSocket::bind(bind).with_context(|| format!("binding UDP {bind}"))?;
    sock.set_nonblocking(true)?;
    sys::set_socket_buffers(sock.as_raw_fd(), SOCKET_BUFFER);
    Ok(sock)
}

fn earliest(times: &[Option<Instant>]) -> Option<Instant> {
    times.iter().flatten().min().copied()
}

/// StarTCP's description from `--startcp`, the learnt policy's weights file read.
fn startcp_spec(a: &StartcpArgs) -> anyhow::Result<StartcpSpec> {
    let policy = match &a.policy {
        PolicyArg::Heuristic => StartcpPolicy::Heuristic,
        PolicyArg::Fixed(d) => StartcpPolicy::Fixed(*d),
        PolicyArg::Scripted(v) => StartcpPolicy::Scripted(
            ScriptedLeads::new(v.clone()).context("--startcp: leads_ms needs at least one lead")?,
        ),
        PolicyArg::Learnt(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--startcp: reading weights {}", path.display()))?;
            let m = MlpPolicy::from_json(&text)
                .map_err(|e| anyhow::anyhow!("--startcp: weights {}: {e}", path.display()))?;
            StartcpPolicy::Learnt(std::sync::Arc::new(m))
        }
    };
    Ok(StartcpSpec { config: a.config, policy })
}

fn send(a: &SendArgs) -> anyhow::Result<ExitCode> {
    sys::install_signal_handlers()?;
    // Pacing wants wake-ups within microseconds of their time (Linux adds up to 50 µs by default).
    let _ = sys::set_timer_slack_ns(1_000);
    let any: SocketAddr = if a.to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse()?;
    let sock = socket(any)?;
    sock.connect(a.to).with_context(|| format!("--to {}", a.to))?;
    if let Some(tc) = a.tclass {
        sys::set_traffic_class(sock.as_raw_fd(), a.to.is_ipv6(), tc).context("--tclass")?;
    }
    let flow = a.flow_id.unwrap_or_else(random_u32);
    let startcp = a.startcp.as_ref().map(startcp_spec).transpose()?;
    let cfg = SenderConfig { flow, cc: a.cc.clone(), tcp: a.tcp_config(), amount: a.amount(), rate: a.rate, startcp };
    let mut ep = Sender::new(&cfg).context("--cc")?;
    let clock = Clock::start();
    let timeout_at = a
        .timeout
        .or(match a.amount() {
            Amount::For(d) => Some(d + DRAIN),
            Amount::Bytes(_) => None,
        })
        .map(|d| Instant::ZERO + d);
    let mut rate = Rate::starting(Instant::ZERO, 0);
    let mut next_report = a.json_interval.map(|iv| Instant::ZERO + iv);
    let mut buf = vec![0u8; ep.buffer_len().max(2048)];
    let mut rbuf = vec![0u8; 65_536];
    // A datagram (its length, in `buf`) the socket refused for now: sent when it drains.
    let mut pending: Option<usize> = None;
    let (mut send_errors, mut interrupted, mut timed_out) = (0u64, false, false);
    let mut late = Lateness::default();
    // The sender's deadline the last wait slept towards.
    let mut slept_for: Option<Instant> = None;
    loop {
        if sys::TERM.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let now = clock.now();
        if let Some(d) = slept_for.take().filter(|&d| now >= d) {
            late.record(now.saturating_duration_since(d).as_nanos() / 1_000);
        }
        if timeout_at.is_some_and(|t| now >= t) {
            timed_out = true;
            break;
        }
        for _ in 0..RECV_BATCH {
            match sock.recv(&mut rbuf) {
                Ok(n) => {
                    let _ = ep.handle_datagram(now, &rbuf[..n]); // bad ones are counted
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                // An ICMP error on the connected socket (the receiver is not there yet): its loss
                // is the retransmission timer's business.
                Err(_) => send_errors += 1,
            }
        }
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        let mut blocked = false;
        loop {
            let n = match pending.take() {
                Some(n) => n,
                None => match ep.poll_transmit(now, &mut buf) {
                    Some(n) => n,
                    None => break,
                },
            };
            match sock.send(&buf[..n]) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    pending = Some(n);
                    blocked = true;
                    break;
                }
                // Unreachable peer, no buffer space: the datagram is lost like any other.
                Err(_) => send_errors += 1,
            }
        }
        if let (Some(t), Some(iv)) = (next_report, a.json_interval) {
            if now >= t {
                json_line(&SendInterval::of(&ep, now, clock.origin_ns, &mut rate))?;
                next_report = Some((t + iv).max(now));
            }
        }
        if ep.is_finished() {
            break;
        }
        let wake = earliest(&[ep.poll_timeout(), next_report, timeout_at]);
        slept_for = ep.poll_timeout().filter(|&t| Some(t) == wake && t > now);
        let mut wait = wake.map(|w| clock.until(w));
        if blocked {
            // Only the socket draining lets sending go on; a pacing time that passed meanwhile must
            // not turn the wait for it into a spin.
            wait = Some(wait.unwrap_or(std::time::Duration::MAX).max(std::time::Duration::from_micros(200)));
        }
        sys::poll_socket(sock.as_raw_fd(), blocked, wait)?;
    }
    let now = clock.now();
    let mut s = SendSummary::of(&ep, &a.cc, a.effective_mss(), now);
    s.flow_id = flow;
    s.interrupted = interrupted;
    s.timed_out = timed_out;
    s.send_errors = send_errors;
    s.cpu_s = sys::cpu_seconds();
    s.wake_late = Some(late.summary());
    s.origin_mono_ns = clock.origin_ns;
    json_line(&s)?;
    if !s.complete && !interrupted {
        eprintln!(
            "leoguard-transport: timed out after {:.1} s with {} of {} bytes acknowledged",
            now.as_secs_f64(),
            s.bytes_acked,
            s.bytes_written
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn recv(a: &RecvArgs) -> anyhow::Result<ExitCode> {
    sys::install_signal_handlers()?;
    let _ = sys::set_timer_slack_ns(1_000);
    let sock = socket(a.bind).context("--bind")?;
    let mut ep = match &a.startcp {
        Some(st) => Receiver::with_startcp(a.tcp_config(), st.config).context("--startcp")?,
        None => Receiver::new(a.tcp_config()),
    };
    let clock = Clock::start();
    let timeout_at = a.timeout.map(|d| Instant::ZERO + d);
    let mut peer: Option<SocketAddr> = None;
    let mut rate = Rate::default();
    let mut intervals: Vec<RecvInterval> = Vec::new();
    let mut next_report: Option<Instant> = None;
    let mut buf = vec![0u8; 2048];
    let mut rbuf = vec![0u8; 65_536];
    let (mut send_errors, mut interrupted, mut timed_out, mut reported) = (0u64, false, false, false);
    let summary = |ep: &Receiver, intervals: &[RecvInterval], send_errors: u64| {
        let mut s = RecvSummary::of(ep);
        s.send_errors = send_errors;
        s.cpu_s = sys::cpu_seconds();
        s.origin_mono_ns = clock.origin_ns;
        s.intervals = intervals.to_vec();
        s
    };
    loop {
        if sys::TERM.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let now = clock.now();
        if timeout_at.is_some_and(|t| now >= t) {
            timed_out = true;
            break;
        }
        for _ in 0..RECV_BATCH {
            match sock.recv_from(&mut rbuf) {
                Ok((n, from)) => {
                    if ep.handle_datagram(now, &rbuf[..n]).is_ok() {
                        peer = Some(from);
                    }
                    flush(&mut ep, &sock, peer, &mut buf, &mut send_errors);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                Err(_) => send_errors += 1,
            }
        }
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
            flush(&mut ep, &sock, peer, &mut buf, &mut send_errors);
        }
        if let Some(iv) = a.json_interval {
            // The series starts with the first data segment.
            if let (None, Some(first)) = (next_report, ep.first_data_at()) {
                next_report = Some(first + iv);
                rate = Rate::starting(first, 0);
            }
            if let Some(t) = next_report.filter(|&t| now >= t) {
                let d = ep.delivered();
                let goodput_bps = rate.update(now, d);
                intervals.push(RecvInterval {
                    t_s: now.as_secs_f64(),
                    t_mono_ns: clock.origin_ns + now.as_nanos(),
                    delivered_bytes: d,
                    goodput_bps,
                });
                next_report = Some((t + iv).max(now));
            }
        }
        let linger_end = ep.completed_at().map(|t| t + a.linger);
        if let Some(end) = linger_end {
            if !reported {
                // The report exists as soon as the transfer is complete, whatever happens after.
                write_report(&a.out, &summary(&ep, &intervals, send_errors))?;
                reported = true;
            }
            if now >= end {
                break;
            }
        }
        let wake = earliest(&[ep.poll_timeout(), next_report, timeout_at, linger_end]);
        sys::poll_socket(sock.as_raw_fd(), false, wake.map(|w| clock.until(w)))?;
    }
    let mut s = summary(&ep, &intervals, send_errors);
    s.interrupted = interrupted;
    s.timed_out = timed_out;
    write_report(&a.out, &s)?;
    s.intervals.clear();
    json_line(&s)?;
    Ok(if timed_out && !s.complete { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn flush(ep: &mut Receiver, sock: &UdpSocket, peer: Option<SocketAddr>, buf: &mut [u8], errors: &mut u64) {
    let Some(peer) = peer else { return };
    while let Some(n) = ep.poll_transmit(buf) {
        if sock.send_to(&buf[..n], peer).is_err() {
            // A full buffer or an unreachable peer: an ACK lost like any other (the next repairs it).
            *errors += 1;
        }
    }
}
