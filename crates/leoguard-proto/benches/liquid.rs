//! Per-core throughput of the liquid tunnel's state machines at 1280-byte symbols (docs/liquid.md):
//! the `leoguard_proto::liquid::workload` passes (blocks of 200 packets of 1500 bytes, 10 % repair;
//! decoding with one source symbol in 20 lost, so every block is decoded), timed with the
//! wall clock. Prints `liquid/<pass>: <Gbit/s> of packet data`, best of `REPS` runs; with `--json`
//! or `BENCH_JSON=1` one JSON line `{"encode_gbps": .., "decode_gbps": .., "decode_lossless_gbps": ..}`.
//! Asserts nothing (STYLE.md rule 14).

use leoguard_proto::liquid::workload::Workload;
use std::hint::black_box;
use std::time::Instant as WallClock;

/// Runs per pass; the fastest is reported.
const REPS: usize = 3;

fn best(mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..REPS {
        let t = WallClock::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let json = std::env::args().any(|a| a == "--json") || std::env::var("BENCH_JSON").is_ok_and(|v| v == "1");
    let w = Workload::default();
    let bits = w.bytes() as f64 * 8.0;
    let enc = best(|| {
        black_box(w.encode());
    });
    let datagrams = w.encode();
    let lossy = w.lose(&datagrams, w.config().symbol_size);
    let dec = best(|| {
        black_box(w.decode(&lossy));
    });
    let clean = best(|| {
        black_box(w.decode(&datagrams));
    });
    let (e, d, c) = (bits / enc / 1e9, bits / dec / 1e9, bits / clean / 1e9);
    println!("liquid/encode: {e:.2} Gbit/s of packet data");
    println!("liquid/decode (1 in {} source symbols lost): {d:.2} Gbit/s", w.drop_every);
    println!("liquid/decode (no loss): {c:.2} Gbit/s");
    if json {
        println!("{{\"encode_gbps\": {e:.3}, \"decode_gbps\": {d:.3}, \"decode_lossless_gbps\": {c:.3}}}");
    }
}
