//! Per-packet cost of SATGUARD's hop state machines (`HopSender`/`HopReceiver`, §3.1, §3.3, §3.5) and of
//! the ground-side reorder buffer (§3.4), on scripted virtual time with seeded loss.
//!
//! Each case drives the machines the way a host does: one tick of virtual time per new packet (1 µs,
//! ~12 Gbit/s of 1500-byte packets), FIFO links with a fixed one-way delay per beam, and every call a
//! host makes per tick (`poll_timeout`, `handle_timeout` when due, `poll_retransmit`, `poll_lost`).
//! The figure is wall time over *new* packets, so recovery work (retransmissions, timers) is charged
//! to the packets that needed it. The link model (two `VecDeque`s, one RNG draw per transmission) is
//! included in every case alike.
//!
//! Prints `satguard/<case>: <ns> ns/packet (<Mpps> Mpkt/s)`, best of `REPS` runs; with `BENCH_JSON=1`
//! or `--json` also one JSON line per case with the machines' counters. Other arguments select cases
//! by substring. Asserts nothing (STYLE.md rule 14).

use leoguard_core::{stream, Duration, Instant, RngStream, Seq16};
use leoguard_proto::satguard::hop::{HAck, HopConfig, HopReceiver, HopSender};
use leoguard_proto::satguard::reorder::{Pushed, ReorderBuffer, ReorderConfig};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::hint::black_box;
use std::time::Instant as WallClock;

/// New packets per run: enough for stable figures, few enough for the whole bench to stay ~10 s.
const PACKETS: u64 = 2_000_000;
/// Runs per case; the fastest is reported (the least disturbed by the rest of the machine).
const REPS: usize = 3;
/// Virtual time between two new packets.
const TICK: Duration = Duration::from_micros(1);
/// Wire size of a packet, bytes.
const BYTES: u32 = 1500;
/// Run seed of the loss and reordering streams.
const SEED: u64 = 42;

/// A host's packet handle as the simulator keeps it: a plain 64-byte `Copy` struct.
// The fields give the handle its realistic size and layout; the bench reads only a few of them.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug)]
struct Packet {
    flow: u64,
    id: u64,
    created: Instant,
    sent: Instant,
    src: u32,
    dst: u32,
    bytes: u32,
    fseq: Seq16,
    hops: u8,
    ecn: u8,
    tag: [u64; 2],
}

const _: () = assert!(std::mem::size_of::<Packet>() == 64);

impl Packet {
    fn new(i: u64, flows: u64, now: Instant) -> Packet {
        let flow = i % flows;
        Packet {
            flow,
            id: i,
            created: now,
            sent: now,
            src: flow as u32,
            dst: (flow as u32) ^ 0x8000,
            bytes: BYTES,
            fseq: Seq16(((i / flows) & 0xFFFF) as u16),
            hops: 0,
            ecn: 0,
            tag: [i, !i],
        }
    }
}

/// One timed case: its name, what it did and how long it took.
struct Figure {
    name: String,
    packets: u64,
    wall_s: f64,
    /// Counters for the JSON line, `(name, value)`.
    counters: Vec<(&'static str, u64)>,
    /// Something that makes the figure time another path than the case intends.
    note: Option<String>,
}

impl Figure {
    fn ns_per_packet(&self) -> f64 {
        self.wall_s * 1e9 / self.packets as f64
    }

    fn print(&self, json: bool) {
        let ns = self.ns_per_packet();
        println!("satguard/{}: {ns:.1} ns/packet ({:.2} Mpkt/s)", self.name, 1e3 / ns);
        if let Some(note) = &self.note {
            eprintln!("satguard/{}: note: {note}", self.name);
        }
        if json {
            let extra: String = self.counters.iter().map(|(k, v)| format!(", \"{k}\": {v}")).collect();
            println!(
                "{{\"bench\": \"satguard/{}\", \"packets\": {}, \"wall_s\": {:.4}, \"ns_per_packet\": {ns:.2}, \"mpps\": {:.3}{extra}}}",
                self.name,
                self.packets,
                self.wall_s,
                1e3 / ns
            );
        }
    }
}

/// A link case for the hop machines.
#[derive(Clone, Copy)]
struct HopCase {
    name: &'static str,
    /// Beams sharing the link (1: a one-to-one ISL or feeder link).
    beams: u16,
    /// Gap detection (one-to-one links) or beam timers only (one-to-many user links).
    detect_gaps: bool,
    /// Loss probability of every data transmission (HAcks are not lost).
    loss: f64,
}

/// One-way delay of `beam`: 2 ms for an ISL; user beams from 1.8 ms (near) by 0.2 ms steps.
fn beam_delay(case: &HopCase, beam: u16) -> Duration {
    if case.beams == 1 {
        Duration::from_millis(2)
    } else {
        Duration::from_micros(1_800 + 200 * u64::from(beam))
    }
}

/// SATGUARD §3.3: thd = 2·d/c, plus 0.5 ms for the tick quantisation of both directions.
fn beam_timeout(case: &HopCase, beam: u16) -> Duration {
    let d = beam_delay(case, beam);
    d + d + Duration::from_micros(500)
}

/// A data packet on the wire: arrival time, HSeq, retransmission flag.
type InFlight = (Instant, Seq16, bool, Packet);

/// One beam of the link: its delay, both directions in flight, and the receiver at its far end.
struct Path {
    delay: Duration,
    data: VecDeque<InFlight>,
    hacks: VecDeque<(Instant, HAck)>,
    rx: HopReceiver,
}

struct Link {
    paths: Vec<Path>,
    loss: f64,
    rng: RngStream,
    dropped: u64,
}

impl Link {
    fn transmit(&mut self, now: Instant, beam: u16, hseq: Seq16, retx: bool, pkt: Packet) {
        // One draw per transmission in every case (lossless too), so the harness costs the same.
        if self.rng.bernoulli(self.loss) {
            self.dropped += 1;
            return;
        }
        let p = &mut self.paths[usize::from(beam)];
        p.data.push_back((now + p.delay, hseq, retx, pkt));
    }
}

fn run_hop(case: &HopCase, packets: u64) -> Figure {
    let gap_timeout = beam_timeout(case, 0);
    let cfg = HopConfig {
        buffer_bytes: 16_000_000,
        max_retries: 3,
        retry_budget: None,
        detect_gaps: case.detect_gaps,
        default_timeout: gap_timeout,
    };
    let mut tx: HopSender<Packet> = HopSender::new(cfg).expect("bench config is valid");
    for b in 0..case.beams {
        tx.set_beam_timeout(b, beam_timeout(case, b));
    }
    let mut link = Link {
        paths: (0..case.beams)
            .map(|b| Path {
                delay: beam_delay(case, b),
                data: VecDeque::with_capacity(8192),
                hacks: VecDeque::with_capacity(8192),
                // A user terminal per beam on a shared link; the simulator's dedup window.
                rx: HopReceiver::new(b, 65_536),
            })
            .collect(),
        loss: case.loss,
        rng: stream(SEED, &format!("bench/satguard/{}", case.name)),
        dropped: 0,
    };
    let (mut delivered, mut given_up, mut timer_calls) = (0u64, 0u64, 0u64);
    let mut now = Instant::ZERO;
    let start = WallClock::now();
    for i in 0..packets {
        now += TICK;
        for p in &mut link.paths {
            while p.data.front().is_some_and(|x| x.0 <= now) {
                let Some((_, hseq, retx, pkt)) = p.data.pop_front() else { break };
                let got = p.rx.on_receive(now, hseq, pkt.id, retx);
                if !got.duplicate {
                    delivered += 1;
                    black_box(&pkt);
                }
                p.hacks.push_back((now + p.delay, got.hack));
            }
            while p.hacks.front().is_some_and(|x| x.0 <= now) {
                let Some((_, hack)) = p.hacks.pop_front() else { break };
                tx.on_hack(now, &hack);
            }
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
            timer_calls += 1;
        }
        while let Some(re) = tx.poll_retransmit(now) {
            link.transmit(now, re.beam, re.hseq, true, re.item);
        }
        while let Some(p) = tx.poll_lost() {
            given_up += 1;
            black_box(p);
        }
        let beam = (i % u64::from(case.beams)) as u16;
        let pkt = Packet::new(i, 64, now);
        let hseq = tx.on_send(now, black_box(pkt), BYTES, beam);
        link.transmit(now, beam, hseq, false, pkt);
    }
    let wall_s = start.elapsed().as_secs_f64();
    let s = tx.stats;
    let duplicates: u64 = link.paths.iter().map(|p| p.rx.stats.duplicates).sum();
    Figure {
        name: case.name.to_string(),
        packets,
        wall_s,
        counters: vec![
            ("dropped", link.dropped),
            ("delivered", delivered),
            ("retransmissions", s.retransmissions),
            ("gap_losses", s.gap_losses),
            ("timer_losses", s.timer_losses),
            ("given_up", given_up),
            ("evicted", s.evicted),
            ("hacks_out_of_window", s.hacks_out_of_window),
            ("duplicates", duplicates),
            ("timer_calls", timer_calls),
            ("max_buffer_bytes", s.max_buffer_bytes),
        ],
        // Neither happens on a healthy link of this size: the figure then times a recovery storm.
        note: (s.hacks_out_of_window > 0 || s.evicted > 0).then(|| {
            format!("{} HAcks ignored as out of window, {} packets evicted", s.hacks_out_of_window, s.evicted)
        }),
    }
}

/// A packet the harness holds back before it reaches the reorder buffer, ordered by (arrival, seq).
struct Delayed {
    at: Instant,
    seq: u64,
    pkt: Packet,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Delayed {}

impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Delayed {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest arrival must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The reorder buffer at a ground station: `flows` flows interleaved round robin, one packet per tick;
/// a fraction `late` of them is held back 1–3 ms (a hop retransmission), opening a gap behind it.
fn run_reorder(name: &str, flows: u64, late: f64, packets: u64) -> Figure {
    let mut buf: ReorderBuffer<Packet> = ReorderBuffer::new(ReorderConfig::default()).expect("default is valid");
    let mut rng = stream(SEED, &format!("bench/satguard/{name}"));
    let mut delayed: BinaryHeap<Delayed> = BinaryHeap::with_capacity(1024);
    let (mut released, mut held, mut late_drops, mut timer_calls) = (0u64, 0u64, 0u64, 0u64);
    let mut now = Instant::ZERO;
    let mut push =
        |buf: &mut ReorderBuffer<Packet>, now: Instant, pkt: Packet| match buf.push(now, pkt.flow, pkt.fseq, pkt) {
            Pushed::Held => held += 1,
            Pushed::Late | Pushed::Duplicate | Pushed::OutOfWindow => late_drops += 1,
            Pushed::InOrder | Pushed::Restarted => {}
        };
    let start = WallClock::now();
    for i in 0..packets {
        now += TICK;
        while delayed.peek().is_some_and(|d| d.at <= now) {
            let Some(d) = delayed.pop() else { break };
            push(&mut buf, now, d.pkt);
        }
        if buf.poll_timeout().is_some_and(|t| t <= now) {
            buf.handle_timeout(now);
            timer_calls += 1;
        }
        let pkt = Packet::new(i, flows, now);
        if rng.bernoulli(late) {
            // Uniform 1–3 ms: the spread gives the adaptive hold (§3.4) a deviation to cover.
            let extra = Duration::from_micros(1_000 + rng.next_u64() % 2_000);
            delayed.push(Delayed { at: now + extra, seq: i, pkt });
        } else {
            push(&mut buf, now, black_box(pkt));
        }
        while let Some(r) = buf.poll_release() {
            released += 1;
            black_box(r);
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let s = *buf.stats();
    Figure {
        name: name.to_string(),
        packets,
        wall_s,
        counters: vec![
            ("released", released),
            ("held", held),
            ("dropped", late_drops),
            ("recovered", s.recovered),
            ("skipped", s.skipped),
            ("late", s.late),
            ("timer_calls", timer_calls),
            ("max_hold_us", s.max_hold_observed.as_nanos() / 1_000),
        ],
        note: None,
    }
}

/// Best of `REPS` runs of one case.
fn best(mut run: impl FnMut() -> Figure) -> Figure {
    let mut best = run();
    for _ in 1..REPS {
        let f = run();
        if f.wall_s < best.wall_s {
            best = f;
        }
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json") || std::env::var("BENCH_JSON").is_ok_and(|v| v == "1");
    // `cargo bench` passes `--bench`; anything not a flag selects cases by substring.
    let filters: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let selected = |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f));

    let hop_cases = [
        HopCase { name: "hop_lossless", beams: 1, detect_gaps: true, loss: 0.0 },
        HopCase { name: "hop_loss1", beams: 1, detect_gaps: true, loss: 0.01 },
        HopCase { name: "hop_loss5", beams: 1, detect_gaps: true, loss: 0.05 },
        HopCase { name: "beams8_lossless", beams: 8, detect_gaps: false, loss: 0.0 },
        HopCase { name: "beams8_loss1", beams: 8, detect_gaps: false, loss: 0.01 },
    ];
    for case in &hop_cases {
        if selected(case.name) {
            best(|| run_hop(case, PACKETS)).print(json);
        }
    }
    for (name, late) in [("reorder_inorder", 0.0), ("reorder_late1", 0.01)] {
        if selected(name) {
            best(|| run_reorder(name, 16, late, PACKETS)).print(json);
        }
    }
}
