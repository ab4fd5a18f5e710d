//! LEOTP endpoints on real packets (docs/leotp.md, "On real packets"): `leotp-serve` runs
//! leoguard-proto's sans-IO [`Producer`] over a UDP socket, `leotp-fetch` its [`Consumer`]. This module
//! is the part without I/O: the command lines, the consumer-side application ([`Fetched`]: every
//! byte checked against the producer's pattern, a per-second delivery series, the `now - ts` samples)
//! and the JSON summaries. The socket loops are in the binary (src/leotp_io.rs).
//!
//! [`Producer`]: leoguard_proto::leotp::Producer
//! [`Consumer`]: leoguard_proto::leotp::Consumer

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::path::PathBuf;

use leoguard_core::{Duration, Instant};
use leoguard_proto::leotp::{pattern_byte, ConsumerStats, ProducerStats, LEOTP_HEADER_LEN, LEOTP_MSS};
use serde::Serialize;

use crate::args::{addr, byte_count, out_file, peer, seconds};
use crate::report::WakeLateness;

/// Largest content the header's 32-bit offsets address.
pub const MAX_BYTES: u64 = u32::MAX as u64;

/// How the ends' clocks relate, written into every summary.
pub const CLOCK_NOTE: &str = "both ends read CLOCK_MONOTONIC, which every network namespace of one machine \
shares; rtt_from_ts_ms is the consumer's now - ts of each Data packet, at the header's 1 ms resolution: the \
producer stamps Data with the last Interest's ts advanced by how long that Interest waited at the producer \
(LEOTP's hop RTT with both clocks cancelled), so it is the round trip without the producer's hold time, not a \
one-way delay; the emulator's data plane measures the one-way delay of the Data packets";

/// `leotp-serve`: a LEOTP producer on `--bind`, until a signal or `--timeout`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct ServeArgs {
    /// Address to bind, ADDR:PORT ([v6]:port for IPv6).
    #[arg(long, value_name = "ADDR:PORT", value_parser = addr)]
    pub bind: SocketAddr,
    /// Content length (suffixes K, M, G: powers of 1024; at most the default, 4 GiB - 1).
    #[arg(long, value_name = "N", value_parser = content_bytes, default_value_t = MAX_BYTES)]
    pub bytes: u64,
    /// Where the JSON summary also goes.
    #[arg(long, value_name = "FILE.json", value_parser = out_file)]
    pub out: Option<PathBuf>,
    /// Exit after S seconds.
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub timeout: Option<Duration>,
}

/// How much a consumer fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchAmount {
    /// `[0, N)`, to completion.
    Bytes(u64),
    /// As much as this long allows (the content is unbounded).
    For(Duration),
}

/// `leotp-fetch`: a LEOTP consumer of `--from`'s content.
#[derive(clap::Args, Clone, Debug, PartialEq)]
#[command(group(clap::ArgGroup::new("amount").required(true).args(["bytes", "seconds"])))]
pub struct FetchArgs {
    /// The producer, ADDR:PORT ([v6]:port for IPv6).
    #[arg(long, value_name = "ADDR:PORT", value_parser = peer)]
    pub from: SocketAddr,
    /// Local address, of --from's family (default: any, an ephemeral port).
    #[arg(long, value_name = "ADDR:PORT", value_parser = addr)]
    pub bind: Option<SocketAddr>,
    /// Fetch [0, N) (suffixes K, M, G: powers of 1024; at most 4 GiB - 1).
    #[arg(long, value_name = "N", value_parser = content_bytes)]
    pub bytes: Option<u64>,
    /// Fetch as much as S seconds allow (of an unbounded content).
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub seconds: Option<Duration>,
    /// Where the JSON summary also goes.
    #[arg(long, value_name = "FILE.json", value_parser = out_file)]
    pub out: Option<PathBuf>,
    /// Payload bytes per Data packet, one Interest's range (default: a 1500-byte path).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..=LEOTP_MSS as i64))]
    pub mss: Option<u32>,
    /// Give up after S seconds (a --bytes fetch that has not completed then exits 1).
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub timeout: Option<Duration>,
}

impl FetchArgs {
    /// How much: `--bytes` or `--seconds` (clap requires exactly one).
    pub fn amount(&self) -> FetchAmount {
        // Never zero: clap requires --seconds without --bytes.
        self.bytes.map_or(FetchAmount::For(self.seconds.unwrap_or_default()), FetchAmount::Bytes)
    }

    /// Payload bytes per Data packet: `--mss`, or what fills a 1500-byte path.
    pub fn effective_mss(&self) -> u32 {
        self.mss.unwrap_or_else(|| default_mss(&self.from))
    }
}

/// The MSS whose datagrams fill a 1500-byte path: 1453 over IPv4 (LEOTP's 1472-byte UDP payload),
/// 1433 over IPv6 (its header is 20 bytes longer).
pub fn default_mss(addr: &SocketAddr) -> u32 {
    let ip = if addr.is_ipv6() { 40 } else { 20 };
    (1500 - ip - 8 - LEOTP_HEADER_LEN) as u32
}

fn content_bytes(v: &str) -> Result<u64, String> {
    let n = byte_count(v)?;
    if n > MAX_BYTES {
        return Err(format!("{n} is more than LEOTP's 32-bit offsets address ({MAX_BYTES})"));
    }
    Ok(n)
}

/// The producer's name for a consumer: a hash of its address (LEOTP has no flow id; the authors' code
/// keys flows by the UDP 4-tuple, and one producer socket fixes the local half).
pub fn flow_key(peer: &SocketAddr) -> u64 {
    // DefaultHasher::new() has fixed keys: the same address gets the same key for the process's life.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    peer.hash(&mut h);
    h.finish()
}

/// A histogram of millisecond samples (1 ms bins up to a minute; larger samples in the last bin).
#[derive(Clone, Debug)]
pub struct MsHistogram {
    counts: Vec<u64>,
    n: u64,
    sum: u64,
    min: u64,
    max: u64,
}

impl Default for MsHistogram {
    fn default() -> MsHistogram {
        MsHistogram { counts: vec![0; 60_001], n: 0, sum: 0, min: u64::MAX, max: 0 }
    }
}

impl MsHistogram {
    /// One sample.
    pub fn record(&mut self, ms: u64) {
        self.counts[ms.min(60_000) as usize] += 1;
        self.n += 1;
        self.sum = self.sum.saturating_add(ms);
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
    }

    fn quantile(&self, q: f64) -> u64 {
        let want = ((self.n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (ms, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return ms as u64;
            }
        }
        self.max
    }

    /// Count, min, p50, p90, p99, max and mean (None without samples).
    pub fn summary(&self) -> Option<MsSummary> {
        (self.n > 0).then(|| MsSummary {
            samples: self.n,
            min: self.min,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            max: self.max,
            mean: self.sum as f64 / self.n as f64,
        })
    }
}

/// A summary of millisecond samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MsSummary {
    /// Samples.
    pub samples: u64,
    /// Smallest, ms.
    pub min: u64,
    /// Median, ms.
    pub p50: u64,
    /// 90th percentile, ms.
    pub p90: u64,
    /// 99th percentile, ms.
    pub p99: u64,
    /// Largest, ms.
    pub max: u64,
    /// Mean, ms.
    pub mean: f64,
}

/// One second of delivery.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Second {
    /// End of the second, seconds since the first Interest.
    pub t_s: f64,
    /// Bytes delivered in order during it.
    pub bytes: u64,
    /// The same as bit/s.
    pub goodput_bps: f64,
}

/// What the consumer's application received: the bytes it was handed in order (each checked against
/// the producer's pattern), per second, and the `now - ts` samples of the Data packets.
#[derive(Clone, Debug)]
pub struct Fetched {
    start: Instant,
    delivered: u64,
    bad_bytes: u64,
    first_bad: Option<u64>,
    first_data: Option<Instant>,
    last_delivery: Option<Instant>,
    second_end: Instant,
    second_bytes: u64,
    seconds: Vec<Second>,
    rtt: MsHistogram,
}

impl Fetched {
    /// Nothing received yet; the fetch began at `start`.
    pub fn new(start: Instant) -> Fetched {
        Fetched {
            start,
            delivered: 0,
            bad_bytes: 0,
            first_bad: None,
            first_data: None,
            last_delivery: None,
            second_end: start + Duration::from_secs(1),
            second_bytes: 0,
            seconds: Vec::new(),
            rtt: MsHistogram::default(),
        }
    }

    /// A Data packet with payload arrived at `now_ms` (the consumer's ms stamp) carrying `ts_ms`.
    pub fn on_data(&mut self, now: Instant, now_ms: u32, ts_ms: u32) {
        self.first_data.get_or_insert(now);
        self.rtt.record(u64::from(now_ms.wrapping_sub(ts_ms)));
    }

    /// Closes the seconds that ended by `now`.
    pub fn tick(&mut self, now: Instant) {
        while now >= self.second_end {
            self.seconds.push(Second {
                t_s: self.second_end.saturating_duration_since(self.start).as_secs_f64(),
                bytes: self.second_bytes,
                goodput_bps: self.second_bytes as f64 * 8.0,
            });
            self.second_bytes = 0;
            self.second_end += Duration::from_secs(1);
        }
    }

    /// When the current second ends.
    pub fn next_tick(&self) -> Instant {
        self.second_end
    }

    /// Bytes the consumer delivered in order at `now`, the next ones of the content.
    pub fn on_delivered(&mut self, now: Instant, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.tick(now);
        for (i, &b) in bytes.iter().enumerate() {
            let off = self.delivered + i as u64;
            if b != pattern_byte(off) {
                self.bad_bytes += 1;
                self.first_bad.get_or_insert(off);
            }
        }
        self.delivered += bytes.len() as u64;
        self.second_bytes += bytes.len() as u64;
        self.last_delivery = Some(now);
    }

    /// Bytes delivered in order.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Delivered bytes that were not the content's at their offset.
    pub fn bad_bytes(&self) -> u64 {
        self.bad_bytes
    }

    /// The summary at `end` (the fetch's end: completion, its time limit or an interruption).
    pub fn summary(&mut self, end: Instant) -> FetchSummary {
        self.tick(end);
        // The last, partial second (its goodput over its own length).
        let began = Instant(self.second_end.as_nanos().saturating_sub(1_000_000_000));
        let part = end.saturating_duration_since(began).as_secs_f64();
        if part > 0.0 {
            self.seconds.push(Second {
                t_s: end.saturating_duration_since(self.start).as_secs_f64(),
                bytes: self.second_bytes,
                goodput_bps: self.second_bytes as f64 * 8.0 / part,
            });
            self.second_bytes = 0;
        }
        let duration = end.saturating_duration_since(self.start).as_secs_f64();
        FetchSummary {
            event: "summary",
            role: "leotp-fetch",
            from: String::new(),
            mss: 0,
            bytes_requested: None,
            bytes_delivered: self.delivered,
            content_ok: self.bad_bytes == 0,
            bad_bytes: self.bad_bytes,
            first_bad_offset: self.first_bad,
            complete: false,
            duration_s: duration,
            goodput_bps: if duration > 0.0 { self.delivered as f64 * 8.0 / duration } else { 0.0 },
            first_data_s: self.first_data.map(|t| t.saturating_duration_since(self.start).as_secs_f64()),
            last_delivery_s: self.last_delivery.map(|t| t.saturating_duration_since(self.start).as_secs_f64()),
            per_second: self.seconds.clone(),
            rtt_from_ts_ms: self.rtt.summary(),
            clock: CLOCK_NOTE,
            timeouts: 0,
            retransmissions: 0,
            consumer: ConsumerStats::default(),
            srtt_ms: None,
            rto_ms: 0.0,
            requested_rate_bps: 0,
            interrupted: false,
            timed_out: false,
            send_errors: 0,
            cpu_s: 0.0,
            wake_late: None,
            origin_mono_ns: 0,
        }
    }
}

/// `leotp-fetch`'s summary (stdout's last line, and `--out`).
#[derive(Clone, Debug, Serialize)]
pub struct FetchSummary {
    /// Always "summary".
    pub event: &'static str,
    /// Always "leotp-fetch".
    pub role: &'static str,
    /// The producer.
    pub from: String,
    /// Payload bytes per Interest.
    pub mss: u32,
    /// N of a `--bytes` fetch.
    pub bytes_requested: Option<u64>,
    /// Bytes delivered in order to the application.
    pub bytes_delivered: u64,
    /// Every delivered byte was the content's at its offset.
    pub content_ok: bool,
    /// Delivered bytes that were not.
    pub bad_bytes: u64,
    /// The first such offset.
    pub first_bad_offset: Option<u64>,
    /// Every byte of `[0, N)` delivered (a `--bytes` fetch).
    pub complete: bool,
    /// From the first Interest to completion (or to the end of `--seconds`, or the exit).
    pub duration_s: f64,
    /// bytes_delivered over duration_s, bit/s.
    pub goodput_bps: f64,
    /// Seconds from the first Interest to the first Data.
    pub first_data_s: Option<f64>,
    /// Seconds from the first Interest to the last in-order delivery.
    pub last_delivery_s: Option<f64>,
    /// Delivery per second since the first Interest (the last entry: the partial second before the end).
    pub per_second: Vec<Second>,
    /// `now - ts` of the Data packets (see `clock`).
    pub rtt_from_ts_ms: Option<MsSummary>,
    /// What the clocks are and what the samples mean.
    pub clock: &'static str,
    /// Rounds of Interest timeouts.
    pub timeouts: u64,
    /// Interests resent after a timeout.
    pub retransmissions: u64,
    /// Every consumer counter.
    pub consumer: ConsumerStats,
    /// The consumer's smoothed RTT at the end, ms.
    pub srtt_ms: Option<f64>,
    /// Its RTO at the end, ms.
    pub rto_ms: f64,
    /// The rate its congestion controller asked for at the end, bit/s.
    pub requested_rate_bps: u64,
    /// Stopped by SIGINT/SIGTERM/SIGHUP.
    pub interrupted: bool,
    /// Stopped by `--timeout` before completion.
    pub timed_out: bool,
    /// Datagrams the socket refused (lost like any other loss).
    pub send_errors: u64,
    /// CPU seconds of the process.
    pub cpu_s: f64,
    /// How late the loop woke for the consumer's deadlines.
    pub wake_late: Option<WakeLateness>,
    /// CLOCK_MONOTONIC of the first Interest, ns.
    pub origin_mono_ns: u64,
}

/// `leotp-serve`'s summary (stdout at exit, and `--out`).
#[derive(Clone, Debug, Serialize)]
pub struct ServeSummary {
    /// Always "summary".
    pub event: &'static str,
    /// Always "leotp-serve".
    pub role: &'static str,
    /// Bound address.
    pub bind: String,
    /// Content length.
    pub bytes: u64,
    /// Consumers seen.
    pub consumers: usize,
    /// Interests queued.
    pub interests: u64,
    /// Keep-alives received.
    pub keepalives: u64,
    /// Data packets sent.
    pub data_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Interests dropped on a full queue.
    pub queue_full_dropped: u64,
    /// Malformed datagrams dropped.
    pub malformed_dropped: u64,
    /// Interests beyond the content (or over one MSS) dropped.
    pub out_of_range_dropped: u64,
    /// Datagrams the socket refused.
    pub send_errors: u64,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// CPU seconds of the process.
    pub cpu_s: f64,
    /// Seconds it ran.
    pub ran_s: f64,
}

impl ServeSummary {
    /// The summary of a producer with counters `s`.
    pub fn of(bind: &SocketAddr, bytes: u64, consumers: usize, s: ProducerStats) -> ServeSummary {
        ServeSummary {
            event: "summary",
            role: "leotp-serve",
            bind: bind.to_string(),
            bytes,
            consumers,
            interests: s.interests,
            keepalives: s.keepalives,
            data_sent: s.data_sent,
            bytes_sent: s.bytes_sent,
            queue_full_dropped: s.queue_full_dropped,
            malformed_dropped: s.malformed_dropped,
            out_of_range_dropped: s.out_of_range_dropped,
            send_errors: 0,
            interrupted: false,
            cpu_s: 0.0,
            ran_s: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_proto::leotp::{PatternSource, Source};

    fn parse(line: &str) -> Result<crate::args::Command, String> {
        crate::args::parse(&line.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    fn fetch(line: &str) -> FetchArgs {
        match parse(&format!("leotp-fetch {line}")) {
            Ok(crate::args::Command::LeotpFetch(f)) => f,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn command_lines_parse_and_errors_name_their_flag() {
        let f = fetch("--from 10.108.0.1:6000 --bytes 5M --out /tmp/f.json");
        assert_eq!((f.amount(), f.effective_mss(), f.bind), (FetchAmount::Bytes(5 << 20), 1453, None));
        let f = fetch("--from [fd00::1]:6000 --seconds 2 --bind [::]:7000");
        assert_eq!((f.amount(), f.effective_mss()), (FetchAmount::For(Duration::from_secs(2)), 1433));
        assert_eq!((f.out, f.timeout), (None, None));
        assert_eq!(fetch("--from 10.0.0.1:5 --bytes 1 --mss 1453").effective_mss(), 1453);
        let Ok(crate::args::Command::LeotpServe(s)) = parse("leotp-serve --bind 0.0.0.0:6000") else {
            panic!("leotp-serve did not parse");
        };
        assert_eq!((s.bytes, s.out, s.timeout), (MAX_BYTES, None, None));
        for (line, flag) in [
            ("--from 10.0.0.1:0 --bytes 1", "--from"),
            ("--from nowhere --bytes 1", "--from"),
            ("--from 10.0.0.1:5 --bytes 5G", "--bytes"),
            ("--from 10.0.0.1:5 --bytes 0", "--bytes"),
            ("--from 10.0.0.1:5", "--bytes or --seconds"),
            ("--from 10.0.0.1:5 --bytes 1 --seconds 1", "cannot be used with '--seconds <S>'"),
            ("--from 10.0.0.1:5 --bytes 1 --mss 1454", "--mss"),
            ("--from 10.0.0.1:5 --bytes 1 --bind [::]:1", "--bind"),
            ("--from 10.0.0.1:5 --bytes 1 --out /tmp", "--out"),
            ("--from 10.0.0.1:5 --bytes 1 --cc bbr", "--cc"),
            ("--bytes 1", "--from"),
        ] {
            let e = parse(&format!("leotp-fetch {line}")).expect_err(line);
            assert!(e.contains(flag) && !e.contains('\n'), "{line}: {e}");
        }
        let e = parse("leotp-serve --bytes 1").expect_err("no bind");
        assert_eq!(e, "--bind is required");
        let e = parse("leotp-serve --bind 0.0.0.0:1 --seconds 1").expect_err("serve has no --seconds");
        assert_eq!(e, "unexpected argument '--seconds' found");
    }

    #[test]
    fn fetched_checks_every_byte_and_counts_seconds() {
        let t0 = Instant::ZERO;
        let mut f = Fetched::new(t0);
        let mut content = vec![0u8; 5000];
        PatternSource { total: 5000 }.read(0, &mut content);
        f.on_delivered(t0 + Duration::from_millis(500), &content[..3000]);
        f.on_delivered(t0 + Duration::from_millis(2500), &content[3000..]);
        assert_eq!((f.delivered(), f.bad_bytes()), (5000, 0));
        // A byte delivered at the wrong offset (the same content one byte late) is caught.
        let mut g = Fetched::new(t0);
        g.on_delivered(t0, &content[1..100]);
        assert!(g.bad_bytes() > 90, "{}", g.bad_bytes());
        let s = f.summary(t0 + Duration::from_millis(3200));
        let bytes: Vec<u64> = s.per_second.iter().map(|x| x.bytes).collect();
        assert_eq!(bytes, vec![3000, 0, 2000, 0]);
        assert!((s.per_second[3].t_s - 3.2).abs() < 1e-9);
        assert!(s.content_ok && (s.duration_s - 3.2).abs() < 1e-9);
        let mut h = MsHistogram::default();
        for ms in 1..=100 {
            h.record(ms);
        }
        let sm = h.summary().expect("samples");
        assert_eq!((sm.min, sm.p50, sm.p90, sm.p99, sm.max), (1, 50, 90, 99, 100));
        assert!(MsHistogram::default().summary().is_none());
    }
}
