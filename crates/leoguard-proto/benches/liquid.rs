//! Per-core throughput of the liquid tunnel's state machines at 1280-byte symbols (docs/liquid.md):
//! the `leoguard_proto::liquid::workload` passes (blocks of 200 packets of 1500 bytes, 10 % repair;
//! decoding with one source symbol in 20 lost, so every block is decoded), timed with the
//! wall clock. Prints `liquid/<pass>: <Gbit/s> of packet data`, best of `REPS` runs; with `--json`
//! or `BENCH_JSON=1` one JSON line `{"encode_gbps": .., "decode_gbps": .., "decode_lossless_gbps": ..}`.
//! Then, per block, the decoder's two solvers on the same symbols (`liquid/solvers:` lines). Asserts
//! nothing about time (STYLE.md rule 14).

use leoguard_proto::liquid::workload::{SolverCase, Workload};
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
    solvers();
}

/// Per block at 1280-byte symbols, the few-missing solver (its generator kept / built for the block)
/// against the crate's decoder, on the same symbols: where one overtakes the other (`liquid.md`,
/// "Decoder"; `performance.md`, "FEC: the missing symbols only").
fn solvers() {
    println!(
        "liquid/solvers: k, missing, few-missing rule, ms per block (kept generator, fresh generator, crate), ratios"
    );
    for (k, fractions) in
        [(20u32, &[0.25, 1.0][..]), (60, &[0.1, 0.5, 1.0]), (235, &[0.05, 0.15, 0.2, 0.25, 1.0]), (800, &[0.05, 0.1])]
    {
        for &f in fractions {
            let mut case = SolverCase::new(k, ((f64::from(k) * f).round() as u32).max(1), 1280);
            // Slow ones (a whole block lost) a few times, the rest twenty.
            let reps = if case.missing() * k as usize > 100_000 { 3 } else { 20 };
            let time = |f: &mut dyn FnMut() -> bool| {
                let t = WallClock::now();
                for _ in 0..reps {
                    assert!(black_box(f()), "not decoded");
                }
                t.elapsed().as_secs_f64() / f64::from(reps) * 1e3
            };
            let fresh = time(&mut || case.systematic(true));
            case.systematic(false);
            let kept = time(&mut || case.systematic(false));
            let full = time(&mut || case.full());
            println!(
                "liquid/solvers: k={k} missing={} rule={} {kept:.3} {fresh:.3} {full:.3} ms; {:.2}x {:.2}x",
                case.missing(),
                if case.few_missing() { "few" } else { "crate" },
                kept / full,
                fresh / full
            );
        }
    }
}
