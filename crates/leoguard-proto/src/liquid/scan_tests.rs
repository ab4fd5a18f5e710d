//! The decoder skips its scan of held blocks while none can be due (`Decoder::scan_at`): these
//! tests hold it to a twin made to scan on every call, which behaves as the decoder did before it
//! skipped anything.

use super::tests::{at, drain_rx, drain_tx, ms, packet};
use super::wire::{SymbolHeader, NO_FIRST};
use super::*;
use leoguard_core::{stream, Duration, Instant, RngStream};
use std::collections::VecDeque;

/// What drives `run_twins`: packets entering at a step, whether the n-th forward datagram or a
/// feedback datagram is lost, and the time step, each from the step number and one random stream.
struct TwinPlan<'a> {
    packets: &'a mut dyn FnMut(u32, &mut RngStream) -> Vec<Vec<u8>>,
    lose_fwd: &'a mut dyn FnMut(u32, u64, &mut RngStream) -> bool,
    lose_back: &'a mut dyn FnMut(u32, &mut RngStream) -> bool,
    dt: &'a mut dyn FnMut(&mut RngStream) -> Duration,
}

/// Runs an encoder and two decoders fed the same datagrams at the same instants over 15 ms paths,
/// one decoder skipping scans while no held block can be due (`scan_at`), its twin made to scan
/// its blocks on every call; asserts, step by step, that they deliver the same packets, send the
/// same feedback, count the same and ask for the same wake-ups. Returns the decoder's counters and
/// how many arrivals skipped the scan.
fn run_twins(cfg: LiquidConfig, seed: u64, steps: u32, plan: TwinPlan) -> (DecoderStats, u64) {
    let (mut enc, mut dec, mut twin) =
        (Encoder::new(cfg).unwrap(), Decoder::new(cfg).unwrap(), Decoder::new(cfg).unwrap());
    let mut rng = stream(seed, "liquid-scan");
    let (mut fwd, mut back) = (VecDeque::new(), VecDeque::<(Instant, Vec<u8>)>::new());
    let (mut now, mut sent, mut skipped) = (Instant::ZERO, 0u64, 0u64);
    for step in 0..steps {
        for p in (plan.packets)(step, &mut rng) {
            enc.push(now, &p);
        }
        enc.handle_timeout(now);
        for d in drain_tx(&mut enc, now) {
            sent += 1;
            if !(plan.lose_fwd)(step, sent - 1, &mut rng) {
                fwd.push_back((now + ms(15), d));
            }
        }
        while fwd.front().is_some_and(|(t, _)| *t <= now) {
            let (_, d) = fwd.pop_front().unwrap();
            skipped += u64::from(dec.scan_at().is_none_or(|t| now < t));
            twin.rescan();
            assert_eq!(dec.on_datagram(now, &d).is_ok(), twin.on_datagram(now, &d).is_ok());
        }
        dec.handle_timeout(now);
        twin.rescan();
        twin.handle_timeout(now);
        loop {
            twin.rescan();
            let f = dec.poll_feedback(now);
            assert_eq!(f, twin.poll_feedback(now), "seed {seed} step {step}: feedback");
            let Some(f) = f else { break };
            if !(plan.lose_back)(step, &mut rng) {
                back.push_back((now + ms(15), f));
            }
        }
        while back.front().is_some_and(|(t, _)| *t <= now) {
            let (_, f) = back.pop_front().unwrap();
            enc.on_feedback(now, &f).unwrap();
        }
        assert_eq!(drain_rx(&mut dec), drain_rx(&mut twin), "seed {seed} step {step}: packets");
        assert_eq!(dec.stats(), twin.stats(), "seed {seed} step {step}: counters");
        assert_eq!(dec.poll_timeout(), twin.poll_timeout(), "seed {seed} step {step}: wake-up");
        now += (plan.dt)(&mut rng);
    }
    (dec.stats(), skipped)
}

/// Skipping scans while no held block can be due changes nothing (`run_twins`). The traffic comes
/// in bursts and pauses, then sparse, with random loss of data and feedback, a stretch where all
/// feedback is lost (blocks are retried, then abandoned), and time steps of 0, 100 µs and 3 ms.
#[test]
fn skipping_scans_while_nothing_is_due_changes_nothing() {
    for (seed, in_order) in [(1, false), (2, true), (3, false), (4, true)] {
        let blackout = |step: u32| (4_000..7_000).contains(&step);
        let mut id = 0u32;
        let (s, skipped) = run_twins(
            LiquidConfig { in_order, ..Default::default() },
            seed,
            13_000,
            TwinPlan {
                // Busy, then sparse (a block at a time), then idle.
                packets: &mut |step, rng| {
                    let n = if rng.bernoulli([0.5, 0.01, 0.0][(step / 9_000 + step / 11_000) as usize]) {
                        1 + rng.next_u64() % 4
                    } else {
                        0
                    };
                    (0..n).map(|_| (packet(id, 40 + (rng.next_u64() % 1460) as usize), id += 1).0).collect()
                },
                lose_fwd: &mut |step, _, rng| rng.bernoulli(if blackout(step) { 0.3 } else { 0.05 }),
                lose_back: &mut |step, rng| blackout(step) || rng.bernoulli(0.1),
                dt: &mut |rng| {
                    Duration::from_micros([0, 3_000, 100, 100, 100, 100, 100, 100][(rng.next_u64() % 8) as usize])
                },
            },
        );
        // Every path a scan takes was taken, and most arrivals skipped the scan.
        assert!(s.blocks_recovered > 0 && s.short_reports > 0 && s.blocks_lost > 0 && s.delivered > 0, "{s:?}");
        assert!(skipped * 2 > s.datagrams, "{skipped} of {} arrivals skipped the scan", s.datagrams);
    }
}

/// The same for one short block alone: reported, answered with repair, decoded while its retry is
/// still pending (the retry time then must not linger in `poll_timeout`).
#[test]
fn a_short_block_alone_is_retired_as_if_scanned_on_every_arrival() {
    let (s, _) = run_twins(
        LiquidConfig::default(),
        5,
        1_500,
        TwinPlan {
            packets: &mut |step, _| if step == 0 { (0..9).map(|i| packet(i, 1400)).collect() } else { vec![] },
            // 10 source symbols + 1 repair: source symbols 2 and 5 and the repair symbol lost.
            lose_fwd: &mut |_, n, _| n == 2 || n == 5 || n == 10,
            lose_back: &mut |_, _| false,
            dt: &mut |_| Duration::from_micros(100),
        },
    );
    assert_eq!((s.short_reports, s.blocks_recovered, s.delivered), (1, 1, 9));
}

/// Feeds a decoder and its twin (made to scan on every call) the datagrams of `steps` at their
/// instants, `None` being a step with no arrival, and after each step compares what they deliver,
/// the feedback they send, their counters and the wake-ups they ask for.
fn script_twins(steps: &[(Instant, Option<Vec<u8>>)]) -> DecoderStats {
    let cfg = LiquidConfig::default();
    let (mut dec, mut twin) = (Decoder::new(cfg).unwrap(), Decoder::new(cfg).unwrap());
    for (i, (now, d)) in steps.iter().enumerate() {
        let now = *now;
        if let Some(d) = d {
            twin.rescan();
            assert_eq!(dec.on_datagram(now, d).is_ok(), twin.on_datagram(now, d).is_ok(), "step {i}");
        }
        assert_eq!(dec.poll_timeout(), twin.poll_timeout(), "step {i}: wake-up after the arrival");
        dec.handle_timeout(now);
        twin.rescan();
        twin.handle_timeout(now);
        twin.rescan();
        assert_eq!(dec.poll_feedback(now), twin.poll_feedback(now), "step {i}: feedback");
        assert_eq!(drain_rx(&mut dec), drain_rx(&mut twin), "step {i}: packets");
        assert_eq!(dec.stats(), twin.stats(), "step {i}: counters");
        assert_eq!(dec.poll_timeout(), twin.poll_timeout(), "step {i}: wake-up");
    }
    dec.stats()
}

/// Source symbol `esi` of `block` (full size, `k` 0 while the block is open), or its first `len` bytes.
fn source(block: u32, esi: u32, k: u16, len: usize) -> Vec<u8> {
    let first = if esi == 0 { 0 } else { NO_FIRST };
    SymbolHeader { repair: false, block, esi, k, first }.datagram(&vec![0u8; len])
}

/// A block whose first datagram was refused (a short symbol that is not the block's last) is held
/// but not yet waiting for a report; its next symbol, after a later block closed it, makes its report
/// due one feedback delay later, and that report is sent then, not when the block is abandoned.
#[test]
fn a_block_that_starts_waiting_late_is_still_reported_on_time() {
    let t = LiquidConfig::default().symbol_size as usize;
    let s = script_twins(&[
        (at(0), Some(source(0, 0, 0, 5))),
        (at(1_000), Some(source(1, 0, 0, t))),
        (at(3_000), Some(source(0, 1, 0, t))),
        (at(4_000), None),
        (at(5_000), None),
        (at(6_000), None),
    ]);
    assert_eq!((s.malformed, s.short_reports), (1, 1), "{s:?}");
}

/// Arrivals stamped earlier than the one before (the decoder's caller reads a clock per batch, say)
/// bring a closed block's report forward; it is sent when due by the earlier stamp.
#[test]
fn an_arrival_stamped_earlier_brings_the_report_forward() {
    let t = LiquidConfig::default().symbol_size as usize;
    let s = script_twins(&[
        (at(10_000), Some(source(0, 0, 3, t))),
        (at(10_000), None),
        (at(5_000), Some(source(0, 1, 3, t))),
        (at(7_000), None),
    ]);
    assert_eq!(s.short_reports, 1, "{s:?}");
}

/// A block reported short and then completed by a late (reordered) source symbol leaves the blocks
/// waiting for a retry at once: its retry time does not linger in `poll_timeout`.
#[test]
fn a_short_block_completed_by_a_late_source_symbol_stops_waiting_for_its_retry() {
    let t = LiquidConfig::default().symbol_size as usize;
    let s = script_twins(&[
        (at(0), Some(source(0, 0, 3, t))),
        (at(0), Some(source(0, 1, 3, t))),
        (at(3_000), None),
        (at(10_000), Some(source(0, 2, 3, t))),
        (at(11_000), None),
    ]);
    assert_eq!((s.short_reports, s.blocks_complete), (1, 1), "{s:?}");
}
