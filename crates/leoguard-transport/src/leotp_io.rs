//! Part of the binary (main.rs), not the library: the socket loops of `leotp-serve` and `leotp-fetch`.
//! Each drives one of leoguard-proto's sans-IO LEOTP roles with the real clock (CLOCK_MONOTONIC since
//! the process's start), one nonblocking UDP socket and ppoll until the earliest deadline the role asks
//! for (`poll_timeout`), feeding it datagrams (`handle_datagram`/`handle_packet`), running `on_timer`
//! when due and draining `poll_transmit`. Everything else is in `leoguard_transport::leotp`.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;
use leoguard_core::{Duration, Instant};
use leoguard_os as sys;
use leoguard_proto::leotp::{Consumer, LeotpConfig, LeotpType, PatternSource, Producer, LEOTP_MTU};
use leoguard_transport::leotp::{flow_key, FetchAmount, FetchArgs, Fetched, ServeArgs, ServeSummary};
use leoguard_transport::report::Lateness;
use leoguard_wire::leotp::LeotpPacket;

use crate::{earliest, json_line, socket, write_report, Clock, RECV_BATCH};

/// A Data packet the socket refused for now (its length in the send buffer, and where it goes).
type Pending = Option<(usize, SocketAddr)>;

/// Sends `buf[..n]` to `to`; a full socket buffer keeps it pending, any other error loses it.
fn send(sock: &std::net::UdpSocket, buf: &[u8], to: SocketAddr, errors: &mut u64) -> bool {
    match sock.send_to(buf, to) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => {
            // Unreachable peer, no buffer space: the datagram is lost like any other.
            *errors += 1;
            true
        }
    }
}

/// `leotp-serve`: a producer of `--bytes` pattern bytes for every consumer that sends it Interests,
/// until a signal or `--timeout`.
pub fn serve(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    sys::install_signal_handlers()?;
    // The token bucket refills every 1 ms: wake-ups should be near their time.
    let _ = sys::set_timer_slack_ns(1_000);
    let sock = socket(a.bind).context("--bind")?;
    let bound = sock.local_addr()?;
    let mut producer =
        Producer::new(LeotpConfig::default(), PatternSource { total: a.bytes }).map_err(|e| anyhow::anyhow!("{e}"))?;
    let clock = Clock::start();
    let timeout_at = a.timeout.map(|d| Instant::ZERO + d);
    let mut peers: HashMap<u64, SocketAddr> = HashMap::new();
    let mut buf = vec![0u8; LEOTP_MTU];
    let mut rbuf = vec![0u8; 65_536];
    let mut pending: Pending = None;
    let (mut send_errors, mut interrupted) = (0u64, false);
    loop {
        if sys::TERM.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let now = clock.now();
        if timeout_at.is_some_and(|t| now >= t) {
            break;
        }
        for _ in 0..RECV_BATCH {
            match sock.recv_from(&mut rbuf) {
                Ok((n, from)) => {
                    let key = flow_key(&from);
                    peers.insert(key, from);
                    producer.handle_datagram(now, key, &rbuf[..n]); // bad ones are counted
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                Err(_) => send_errors += 1,
            }
        }
        producer.on_timer(now);
        let mut blocked = false;
        loop {
            let (n, to) = match pending.take() {
                Some(p) => p,
                None => match producer.poll_transmit(now, &mut buf) {
                    // Every Transmit's flow was created by a datagram whose source is in `peers`.
                    Some(t) => match peers.get(&t.flow) {
                        Some(&to) => (t.wire_len, to),
                        None => continue,
                    },
                    None => break,
                },
            };
            if !send(&sock, &buf[..n], to, &mut send_errors) {
                pending = Some((n, to));
                blocked = true;
                break;
            }
        }
        let wake = earliest(&[producer.poll_timeout(), timeout_at]);
        let mut wait = wake.map(|w| clock.until(w));
        if blocked {
            wait = Some(wait.unwrap_or(std::time::Duration::MAX).max(std::time::Duration::from_micros(200)));
        }
        sys::poll_socket(sock.as_raw_fd(), blocked, wait)?;
    }
    let mut s = ServeSummary::of(&bound, a.bytes, peers.len(), producer.stats());
    s.send_errors = send_errors;
    s.interrupted = interrupted;
    s.cpu_s = sys::cpu_seconds();
    s.ran_s = clock.now().as_secs_f64();
    if let Some(out) = &a.out {
        write_report(out, &s)?;
    }
    json_line(&s)?;
    Ok(ExitCode::SUCCESS)
}

/// `leotp-fetch`: a consumer of `[0, N)` (or of the unbounded content for S seconds) from `--from`,
/// every delivered byte checked. Exit 0: complete (or the S seconds are over, or a signal); 1: the
/// content was wrong, or `--timeout` passed first.
pub fn fetch(a: &FetchArgs) -> anyhow::Result<ExitCode> {
    sys::install_signal_handlers()?;
    // Interests are paced every 1 ms.
    let _ = sys::set_timer_slack_ns(1_000);
    let any: SocketAddr = if a.from.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse()?;
    let sock = socket(a.bind.unwrap_or(any)).context("--bind")?;
    sock.connect(a.from).with_context(|| format!("--from {}", a.from))?;
    let cfg = LeotpConfig { mss: a.effective_mss(), ..LeotpConfig::default() };
    let clock = Clock::start();
    let start = clock.now();
    let total = match a.amount() {
        FetchAmount::Bytes(n) => Some(n),
        FetchAmount::For(_) => None,
    };
    let mut consumer = Consumer::new(cfg, 0, total, start).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut got = Fetched::new(start);
    let stop_at = match a.amount() {
        FetchAmount::For(d) => Some(start + d),
        FetchAmount::Bytes(_) => None,
    };
    let timeout_at = a.timeout.map(|d| start + d);
    let mut buf = vec![0u8; LEOTP_MTU];
    let mut rbuf = vec![0u8; 65_536];
    let mut ready: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut pending: Option<usize> = None;
    let (mut send_errors, mut interrupted, mut timed_out) = (0u64, false, false);
    let mut late = Lateness::default();
    let mut slept_for: Option<Instant> = None;
    let end = loop {
        let now = clock.now();
        if sys::TERM.load(Ordering::SeqCst) {
            interrupted = true;
            break now;
        }
        if let Some(d) = slept_for.take().filter(|&d| now >= d) {
            late.record(now.saturating_duration_since(d).as_nanos() / 1_000);
        }
        if let Some(t) = stop_at.filter(|&t| now >= t) {
            break t;
        }
        if timeout_at.is_some_and(|t| now >= t) {
            timed_out = true;
            break now;
        }
        let now_ms = (now.as_nanos() / 1_000_000) as u32;
        for _ in 0..RECV_BATCH {
            match sock.recv(&mut rbuf) {
                Ok(n) => match LeotpPacket::parse(&rbuf[..n]) {
                    Ok(p) => {
                        if p.header.kind == LeotpType::Data && !p.header.is_vph() {
                            got.on_data(now, now_ms, p.header.ts_ms);
                        }
                        consumer.handle_packet(now, p.header, p.payload);
                    }
                    // Counted as malformed by the consumer.
                    Err(_) => consumer.handle_datagram(now, &rbuf[..n]),
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                // An ICMP error on the connected socket (no producer there yet, or at all): Interests
                // lost, which the consumer's timers repeat.
                Err(_) => send_errors += 1,
            }
        }
        consumer.read(&mut ready);
        got.on_delivered(now, &ready);
        ready.clear();
        if consumer.is_complete() {
            break now;
        }
        if consumer.poll_timeout().is_some_and(|t| t <= now) {
            consumer.on_timer(now);
        }
        let mut blocked = false;
        loop {
            let n = match pending.take() {
                Some(n) => n,
                None => match consumer.poll_transmit(now, &mut buf) {
                    Some(t) => t.wire_len,
                    None => break,
                },
            };
            if !send(&sock, &buf[..n], a.from, &mut send_errors) {
                pending = Some(n);
                blocked = true;
                break;
            }
        }
        got.tick(now);
        let wake = earliest(&[consumer.poll_timeout(), stop_at, timeout_at, Some(got.next_tick())]);
        slept_for = consumer.poll_timeout().filter(|&t| Some(t) == wake && t > now);
        let mut wait = wake.map(|w| clock.until(w));
        if blocked {
            wait = Some(wait.unwrap_or(std::time::Duration::MAX).max(std::time::Duration::from_micros(200)));
        }
        sys::poll_socket(sock.as_raw_fd(), blocked, wait)?;
    };
    let mut s = got.summary(end);
    let st = consumer.stats();
    s.from = a.from.to_string();
    s.mss = a.effective_mss();
    s.bytes_requested = total;
    s.complete = consumer.is_complete();
    s.timeouts = st.timeout_rounds;
    s.retransmissions = st.retransmissions;
    s.consumer = st;
    s.srtt_ms = consumer.rto().srtt().map(Duration::as_millis_f64);
    s.rto_ms = consumer.rto().rto().as_millis_f64();
    s.requested_rate_bps = consumer.cc().rate_bps(&cfg, end);
    s.interrupted = interrupted;
    s.timed_out = timed_out && !s.complete;
    s.send_errors = send_errors;
    s.cpu_s = sys::cpu_seconds();
    s.wake_late = Some(late.summary());
    s.origin_mono_ns = clock.origin_ns;
    if let Some(out) = &a.out {
        write_report(out, &s)?;
    }
    json_line(&s)?;
    if !s.content_ok {
        eprintln!(
            "leoguard-transport: leotp-fetch: {} delivered bytes were not the content's (first at offset {})",
            s.bad_bytes,
            s.first_bad_offset.unwrap_or(0)
        );
        return Ok(ExitCode::from(1));
    }
    if s.timed_out {
        let of = total.map_or("an unbounded content".to_string(), |n| n.to_string());
        eprintln!(
            "leoguard-transport: leotp-fetch: timed out after {:.1} s with {} of {of} bytes delivered{}",
            end.as_secs_f64(),
            s.bytes_delivered,
            if s.bytes_delivered == 0 { " (no producer answered)" } else { "" }
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
