//! Per-packet cost of a LEOTP mid node (`leoguard_proto::leotp::MidNode`): Data forwarding with the
//! cache insert and hole check (with and without hop-by-hop CC, with and without real payload
//! bytes), Interest forwarding, and Interests answered from the cache. Each case feeds one flow's
//! packets in order through `handle_packet` and drains `poll_transmit` into a reused buffer, the
//! way an engine drives the node; with hop CC, virtual time advances one 1472-byte packet time at
//! 300 Mbit/s (39.3 µs) per packet, so the token bucket lets every packet through and the figure
//! includes the bucket, the hop CC update and the queue. Payload bytes are copied in and out.
//!
//! Prints `leotp/<case>: <ns> ns/packet (<Mpps> Mpkt/s)`, best of `REPS` runs; with `BENCH_JSON=1`
//! or `--json` also one JSON line per case. Other arguments select cases by substring. Asserts
//! nothing (STYLE.md rule 14).

use leoguard_core::{Duration, Instant};
use leoguard_proto::leotp::{
    Face, LeotpConfig, LeotpHeader, MidNode, PatternSource, Source, LEOTP_HEADER_LEN, LEOTP_MSS, LEOTP_MTU,
};
use std::hint::black_box;
use std::time::Instant as WallClock;

/// Packets per run (the cache of 20 000 blocks fills after ~56 000 and evicts from then on).
const PACKETS: u32 = 1_000_000;
/// Runs per case; the fastest is reported.
const REPS: usize = 3;
const MSS: u32 = LEOTP_MSS as u32;
const FLOW: u64 = 0xF10;

#[derive(Clone, Copy)]
enum Kind {
    /// Data from upstream, forwarded downstream.
    Data,
    /// Interests from downstream for ranges not cached, forwarded upstream.
    Interest,
    /// Interests from downstream for ranges the cache holds, answered downstream.
    CacheHit,
}

struct Case {
    name: &'static str,
    kind: Kind,
    cfg: LeotpConfig,
}

/// Runs one case; returns wall seconds and the node's counters of interest.
fn run(case: &Case, payload: &[u8]) -> (f64, u64) {
    let mut node = MidNode::new(case.cfg).expect("bench config");
    let mut buf = [0u8; LEOTP_MTU];
    // 1472 B at 300 Mbit/s, rounded up: the token bucket never holds a packet back.
    let tick = Duration::from_nanos(39_300);
    let mut now = Instant(1_000_000_000);
    if let Kind::CacheHit = case.kind {
        // Fill the cache with the ranges the Interests will ask for (20 000 blocks hold 56 000 MSS).
        for k in 0..50_000u32 {
            node.handle_packet(now, FLOW, Face::Upstream, LeotpHeader::data(k * MSS, (k + 1) * MSS, 10, 0), payload);
            while node.poll_transmit(now, &mut buf).is_some() {}
        }
    }
    let mut sent = 0u64;
    let t = WallClock::now();
    for i in 0..PACKETS {
        let (start, end) = match case.kind {
            Kind::CacheHit => ((i % 50_000) * MSS, (i % 50_000 + 1) * MSS),
            _ => (i * MSS, (i + 1) * MSS),
        };
        match case.kind {
            Kind::Data => {
                let h = LeotpHeader::data(start, end, 10, (now.as_nanos() / 1_000_000) as u32);
                node.handle_packet(now, FLOW, Face::Upstream, h, payload);
            }
            Kind::Interest | Kind::CacheHit => {
                let h = LeotpHeader::interest(start, end, 300_000_000, (now.as_nanos() / 1_000_000) as u32);
                node.handle_packet(now, FLOW, Face::Downstream, h, &[]);
            }
        }
        while let Some(tx) = node.poll_transmit(now, &mut buf) {
            sent += tx.wire_len as u64;
            black_box(&buf[..LEOTP_HEADER_LEN]);
        }
        if case.cfg.hop_cc {
            now += tick;
            if node.poll_timeout().is_some_and(|t| t <= now) {
                node.on_timer(now);
            }
        }
    }
    let wall = t.elapsed().as_secs_f64();
    black_box(sent);
    let s = node.stats();
    let work = match case.kind {
        Kind::Data => s.data_forwarded,
        Kind::Interest => s.interests_forwarded,
        Kind::CacheHit => s.cache_hits,
    };
    (wall, work)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let json = std::env::args().any(|a| a == "--json") || std::env::var("BENCH_JSON").is_ok_and(|v| v == "1");
    let mut payload = vec![0u8; LEOTP_MSS];
    PatternSource { total: u64::MAX }.read(0, &mut payload);
    let base = LeotpConfig::default();
    let cases = [
        Case { name: "data_forward_cache", kind: Kind::Data, cfg: LeotpConfig { hop_cc: false, ..base } },
        Case { name: "data_forward_cache_hop_cc", kind: Kind::Data, cfg: base },
        Case {
            name: "data_forward_cache_no_payload",
            kind: Kind::Data,
            cfg: LeotpConfig { hop_cc: false, carry_payload: false, ..base },
        },
        Case {
            name: "data_forward_no_cache",
            kind: Kind::Data,
            cfg: LeotpConfig { hop_cc: false, in_network_retx: false, ..base },
        },
        Case { name: "interest_forward", kind: Kind::Interest, cfg: LeotpConfig { hop_cc: false, ..base } },
        Case { name: "interest_forward_hop_cc", kind: Kind::Interest, cfg: base },
        Case { name: "interest_cache_hit", kind: Kind::CacheHit, cfg: LeotpConfig { hop_cc: false, ..base } },
    ];
    for case in cases.iter().filter(|c| args.is_empty() || args.iter().any(|a| c.name.contains(a.as_str()))) {
        let mut best = f64::INFINITY;
        let mut work = 0;
        for _ in 0..REPS {
            let (wall, w) = run(case, &payload);
            if wall < best {
                best = wall;
                work = w;
            }
        }
        let ns = best * 1e9 / f64::from(PACKETS);
        println!("leotp/{}: {ns:.1} ns/packet ({:.2} Mpkt/s)", case.name, 1e3 / ns);
        if work != u64::from(PACKETS) {
            eprintln!("leotp/{}: note: {work} of {PACKETS} packets took the timed path", case.name);
        }
        if json {
            println!(
                "{{\"bench\": \"leotp/{}\", \"packets\": {PACKETS}, \"wall_s\": {best:.4}, \"ns_per_packet\": {ns:.2}, \"mpps\": {:.3}}}",
                case.name,
                1e3 / ns
            );
        }
    }
}
