use super::*;
use proptest::prelude::*;

fn ms(n: u64) -> Instant {
    Instant(n * 1_000_000)
}

fn buf() -> ReorderBuffer<u32, u32> {
    ReorderBuffer::new(ReorderConfig::default()).unwrap()
}

fn drain(b: &mut ReorderBuffer<u32, u32>) -> Vec<(u32, u16)> {
    std::iter::from_fn(|| b.poll_release()).map(|r| (r.flow, r.fseq.0)).collect()
}

#[test]
fn in_order_packets_leave_at_once() {
    let mut b = buf();
    for i in 0..5u16 {
        assert_eq!(b.push(ms(u64::from(i)), 7, Seq16(100 + i), u32::from(i)), Pushed::InOrder);
        assert_eq!(drain(&mut b), vec![(7, 100 + i)]);
    }
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.stats().released, 5);
}

#[test]
fn gap_is_held_until_the_missing_packet_arrives() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(0), 0);
    assert_eq!(b.push(ms(1), 1, Seq16(2), 2), Pushed::Held);
    assert_eq!(b.push(ms(2), 1, Seq16(3), 3), Pushed::Held);
    assert_eq!(drain(&mut b), vec![(1, 0)]);
    assert_eq!(b.poll_timeout(), Some(ms(21)), "initial hold 20 ms from the first held packet");
    assert_eq!(b.push(ms(5), 1, Seq16(1), 1), Pushed::InOrder);
    assert_eq!(drain(&mut b), vec![(1, 1), (1, 2), (1, 3)]);
    assert_eq!(b.poll_timeout(), None);
    let s = *b.stats();
    assert_eq!((s.recovered, s.skipped, s.held_now, s.max_hold_observed), (1, 0, 0, Duration::from_millis(4)));
    // One sample of 4 ms: R = 4, V = 2, P = 4, A unknown (no in-order spacing yet) -> 3·4 + 4·2 = 20 ms.
    assert_eq!(b.hold(&1), Some(Duration::from_millis(20)));
}

#[test]
fn deadline_gives_up_on_the_missing_packet() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(10), 0);
    b.push(ms(1), 1, Seq16(12), 2);
    b.push(ms(2), 1, Seq16(14), 4);
    drain(&mut b);
    b.handle_timeout(ms(20));
    assert!(drain(&mut b).is_empty(), "deadline is 21 ms");
    b.handle_timeout(ms(21));
    assert_eq!(drain(&mut b), vec![(1, 12)]);
    assert_eq!(b.poll_timeout(), Some(ms(22)), "the next held packet has its own deadline");
    b.handle_timeout(ms(22));
    assert_eq!(drain(&mut b), vec![(1, 14)]);
    assert_eq!(b.stats().skipped, 2);
    assert_eq!(b.expected(&1), Some(Seq16(15)));
    // The skipped packet turns up: late, dropped, and the hold learns from it (21 ms after the gap
    // opened): R = 21, V = 10.5 -> 3·21 + 4·10.5 = 105 ms (above P = 21).
    assert_eq!(b.push(ms(22), 1, Seq16(11), 1), Pushed::Late);
    assert_eq!(b.stats().late, 1);
    assert_eq!(b.hold(&1), Some(Duration::from_micros(3 * 21_000 + 10_500 * 4)));
}

#[test]
fn duplicates_are_dropped() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(0), 0);
    b.push(ms(1), 1, Seq16(2), 2);
    assert_eq!(b.push(ms(2), 1, Seq16(0), 0), Pushed::Duplicate, "already released");
    assert_eq!(b.push(ms(2), 1, Seq16(2), 2), Pushed::Duplicate, "already held");
    b.push(ms(3), 1, Seq16(1), 1);
    assert_eq!(b.push(ms(4), 1, Seq16(1), 1), Pushed::Duplicate);
    assert_eq!(drain(&mut b), vec![(1, 0), (1, 1), (1, 2)]);
    assert_eq!(b.stats().duplicates, 3);
}

#[test]
fn a_gap_in_one_flow_does_not_block_another() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(0), 0);
    b.push(ms(0), 2, Seq16(0), 0);
    b.push(ms(1), 1, Seq16(5), 5);
    for i in 1..10u16 {
        b.push(ms(1 + u64::from(i)), 2, Seq16(i), 0);
    }
    let out = drain(&mut b);
    assert_eq!(out.len(), 11);
    assert!(out.iter().all(|&(f, s)| f == 2 || s == 0));
    assert_eq!(b.held(&1), 1);
    assert_eq!(b.flows(), 2);
}

#[test]
fn order_survives_the_16_bit_wrap() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(65_534), 0);
    b.push(ms(1), 1, Seq16(1), 0);
    b.push(ms(2), 1, Seq16(0), 0);
    b.push(ms(3), 1, Seq16(65_535), 0);
    assert_eq!(drain(&mut b), vec![(1, 65_534), (1, 65_535), (1, 0), (1, 1)]);
    assert_eq!(b.push(ms(4), 1, Seq16(65_535), 0), Pushed::Duplicate);
}

#[test]
fn stray_out_of_window_packet_is_dropped_and_a_run_restarts_the_flow() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(0), 0);
    b.push(ms(1), 1, Seq16(2), 2);
    assert_eq!(b.push(ms(2), 1, Seq16(30_000), 9), Pushed::OutOfWindow);
    assert_eq!(b.push(ms(3), 1, Seq16(1), 1), Pushed::InOrder, "an in-window packet resets the run");
    assert_eq!(b.push(ms(4), 1, Seq16(3), 3), Pushed::InOrder);
    assert_eq!(b.push(ms(5), 1, Seq16(5), 5), Pushed::Held);
    assert_eq!(b.push(ms(6), 1, Seq16(40_000), 0), Pushed::OutOfWindow);
    assert_eq!(b.push(ms(7), 1, Seq16(40_001), 0), Pushed::OutOfWindow);
    assert_eq!(b.push(ms(8), 1, Seq16(40_002), 0), Pushed::Restarted);
    assert_eq!(drain(&mut b), vec![(1, 0), (1, 1), (1, 2), (1, 3), (1, 5), (1, 40_002)]);
    assert_eq!(b.push(ms(9), 1, Seq16(40_003), 0), Pushed::InOrder);
    assert_eq!(b.push(ms(9), 1, Seq16(40_002), 0), Pushed::Duplicate);
    let s = *b.stats();
    assert_eq!((s.out_of_window, s.restarts, s.skipped), (3, 1, 1));
}

#[test]
fn overflow_gives_up_the_oldest_gap_early() {
    let cfg = ReorderConfig { max_held_per_flow: 2, ..ReorderConfig::default() };
    let mut b: ReorderBuffer<u32, u32> = ReorderBuffer::new(cfg).unwrap();
    b.push(ms(0), 1, Seq16(0), 0);
    b.push(ms(1), 1, Seq16(2), 0);
    b.push(ms(1), 1, Seq16(4), 0);
    b.push(ms(1), 1, Seq16(6), 0);
    assert_eq!(drain(&mut b), vec![(1, 0), (1, 2)]);
    assert_eq!(b.held(&1), 2);
    assert_eq!((b.stats().overflow_releases, b.stats().skipped), (1, 1));
}

#[test]
fn hold_adapts_and_stays_within_bounds() {
    let cfg = ReorderConfig { min_hold: Duration::from_millis(5), ..ReorderConfig::default() };
    let mut b: ReorderBuffer<u32, u32> = ReorderBuffer::new(cfg).unwrap();
    // In-order spacing 1 ms, then repeated 1 ms recoveries: R -> 1, V -> 0, A = 1 => 2 ms, clamped to 5.
    let mut t = 0;
    let mut s = 0u16;
    for _ in 0..5 {
        b.push(ms(t), 1, Seq16(s), 0);
        t += 1;
        s += 1;
    }
    for _ in 0..60 {
        b.push(ms(t), 1, Seq16(s + 1), 0);
        b.push(ms(t + 1), 1, Seq16(s), 0);
        t += 2;
        s += 2;
    }
    assert_eq!(b.hold(&1), Some(Duration::from_millis(5)));
    // Recoveries of 500 ms (late arrivals): clamped to max_hold.
    for _ in 0..20 {
        b.push(ms(t), 1, Seq16(s + 1), 0);
        t += 500;
        b.push(ms(t), 1, Seq16(s), 0);
        s += 2;
    }
    assert_eq!(b.hold(&1), Some(Duration::from_millis(200)));
    assert_eq!(b.stats().held_now, 0);
}

#[test]
fn config_errors_are_named() {
    let d = ReorderConfig::default();
    let bad = |c: ReorderConfig| ReorderBuffer::<u8>::new(c).err();
    assert_eq!(bad(ReorderConfig { min_hold: Duration::ZERO, ..d }), Some(ReorderConfigError::ZeroMinHold));
    assert!(matches!(
        bad(ReorderConfig { max_hold: Duration::from_micros(10), ..d }),
        Some(ReorderConfigError::InvertedBounds { .. })
    ));
    assert!(matches!(
        bad(ReorderConfig { initial_hold: Duration::from_secs(1), ..d }),
        Some(ReorderConfigError::InitialOutOfBounds(_))
    ));
    assert_eq!(bad(ReorderConfig { max_held_per_flow: 0, ..d }), Some(ReorderConfigError::ZeroCapacity));
    assert_eq!(bad(ReorderConfig { window: 1 << 15, ..d }), Some(ReorderConfigError::BadWindow(1 << 15)));
    assert_eq!(bad(ReorderConfig { restart_after: 0, ..d }), Some(ReorderConfigError::ZeroRestart));
    let msg = ReorderConfigError::InvertedBounds { min: Duration::from_millis(2), max: Duration::from_millis(1) };
    assert!(msg.to_string().contains("max_hold"));
}

#[test]
fn flush_open_and_idle_removal() {
    let mut b = buf();
    b.open_flow(ms(0), 3, Seq16(50));
    assert_eq!(b.push(ms(1), 3, Seq16(52), 0), Pushed::Held);
    assert_eq!(b.push(ms(1), 3, Seq16(49), 0), Pushed::Late, "before the declared start");
    b.flush(ms(2));
    assert_eq!(drain(&mut b), vec![(3, 52)]);
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.remove_idle(ms(3), Duration::from_millis(5)), 0);
    assert_eq!(b.remove_idle(ms(6), Duration::from_millis(5)), 1);
    assert_eq!(b.flows(), 0);
}

/// One flow's packets 0..n from `base`, nominally 100 us apart, each delayed, dropped or duplicated.
fn arrivals(base: u16, fates: &[(u8, u64)], flow: u32) -> Vec<(Instant, u32, Seq16, u32)> {
    let mut v = Vec::new();
    for (i, &(fate, delay_us)) in fates.iter().enumerate() {
        let t = Instant(i as u64 * 100_000 + delay_us * 1_000);
        let seq = Seq16(base).plus(i as u16);
        match fate % 8 {
            0 => {} // dropped
            1 => {
                v.push((t, flow, seq, i as u32));
                v.push((t + Duration::from_micros(delay_us / 2 + 1), flow, seq, i as u32));
            }
            _ => v.push((t, flow, seq, i as u32)),
        }
    }
    v
}

type Run = (ReorderBuffer<u32, u32>, Vec<Released<u32, u32>>, Vec<u32>);

/// Feeds the arrivals in time order; returns the buffer, what it released and the late items.
fn run(cfg: ReorderConfig, mut arr: Vec<(Instant, u32, Seq16, u32)>) -> Run {
    arr.sort_by_key(|a| a.0);
    let mut b = ReorderBuffer::new(cfg).unwrap();
    let mut out = Vec::new();
    let mut late = Vec::new();
    for (t, f, s, x) in arr {
        if b.push(t, f, s, x) == Pushed::Late {
            late.push(x);
        }
        out.extend(std::iter::from_fn(|| b.poll_release()));
    }
    while let Some(t) = b.poll_timeout() {
        b.handle_timeout(t);
        out.extend(std::iter::from_fn(|| b.poll_release()));
    }
    (b, out, late)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Any delays, drops and duplicates: per flow the output is strictly increasing, never
    /// repeats, and every distinct packet that arrived is released or counted late exactly once.
    #[test]
    fn output_is_ordered_unique_and_complete(base in any::<u16>(),
            fates in proptest::collection::vec((any::<u8>(), 0u64..60_000), 1..300)) {
        let arr = arrivals(base, &fates, 1);
        let distinct: std::collections::BTreeSet<u32> = arr.iter().map(|a| a.3).collect();
        let (b, out, late) = run(ReorderConfig::default(), arr.clone());
        for w in out.windows(2) {
            prop_assert!(w[1].fseq.after(w[0].fseq), "{:?} then {:?}", w[0].fseq, w[1].fseq);
        }
        let released: std::collections::BTreeSet<u32> = out.iter().map(|r| r.item).collect();
        prop_assert_eq!(released.len(), out.len(), "no duplicates");
        let s = *b.stats();
        prop_assert_eq!(s.held_now, 0);
        prop_assert_eq!(s.released + s.late + s.duplicates, arr.len() as u64);
        // Every distinct packet is either released or (all its copies) late, never both.
        let late: std::collections::BTreeSet<u32> = late.into_iter().collect();
        prop_assert!(released.is_disjoint(&late));
        prop_assert_eq!(released.union(&late).count(), distinct.len());
        prop_assert!(released.is_subset(&distinct));
    }

    /// If no packet is delayed by more than `min_hold`, nothing is given up on: every distinct
    /// packet that arrived is released, across the 16-bit wrap.
    #[test]
    fn nothing_lost_when_delays_are_within_the_hold(base in 65_000u16.., start_first in any::<bool>(),
            fates in proptest::collection::vec((any::<u8>(), 0u64..4_999), 1..300)) {
        let cfg = ReorderConfig { min_hold: Duration::from_millis(5), initial_hold: Duration::from_millis(5),
            ..ReorderConfig::default() };
        let mut arr = arrivals(base, &fates, 1);
        if start_first {
            // The flow's first packet arrives first and anchors it.
            arr.push((Instant::ZERO, 1, Seq16(base).plus(fates.len() as u16), u32::MAX));
            arr.iter_mut().for_each(|a| if a.3 == u32::MAX { a.2 = Seq16(base.wrapping_sub(1)) });
        }
        let mut sorted = arr.clone();
        sorted.sort_by_key(|a| a.0);
        let mut b = ReorderBuffer::new(cfg).unwrap();
        let anchor = if start_first { Seq16(base.wrapping_sub(1)) } else { Seq16(base) };
        b.open_flow(Instant::ZERO, 1u32, anchor);
        let mut out = Vec::new();
        for (t, f, s, x) in sorted {
            b.push(t, f, s, x);
            out.extend(std::iter::from_fn(|| b.poll_release()));
        }
        while let Some(t) = b.poll_timeout() {
            b.handle_timeout(t);
            out.extend(std::iter::from_fn(|| b.poll_release()));
        }
        let distinct: std::collections::BTreeSet<u32> = arr.iter().map(|a| a.3).collect();
        prop_assert_eq!(b.stats().late, 0);
        prop_assert_eq!(out.len(), distinct.len());
        for w in out.windows(2) {
            prop_assert!(w[1].fseq.after(w[0].fseq));
        }
    }

    /// Many flows, some with losses: a packet arriving in order in its flow is released by the very
    /// push that delivered it, whatever the other flows hold.
    #[test]
    fn no_head_of_line_blocking_across_flows(
            flows in proptest::collection::vec((any::<u16>(), proptest::collection::vec((any::<u8>(), 0u64..30_000), 1..60)), 2..8)) {
        let mut arr = Vec::new();
        for (f, (base, fates)) in flows.iter().enumerate() {
            arr.extend(arrivals(*base, fates, f as u32));
        }
        arr.sort_by_key(|a| a.0);
        let mut b: ReorderBuffer<u32, u32> = ReorderBuffer::new(ReorderConfig::default()).unwrap();
        for (t, f, s, x) in arr {
            // Deadlines due at `t` fire before the packet is looked at (push does the same).
            b.handle_timeout(t);
            b.poll_release();
            let expected = b.expected(&f);
            let r = b.push(t, f, s, x);
            let out: Vec<_> = std::iter::from_fn(|| b.poll_release()).collect();
            if expected.is_none_or(|e| e == s) {
                prop_assert_eq!(r, Pushed::InOrder);
                prop_assert!(out.iter().any(|o| o.flow == f && o.fseq == s));
            }
            prop_assert!(out.windows(2).all(|w| w[0].flow != w[1].flow || w[1].fseq.after(w[0].fseq)));
        }
    }
}

#[test]
fn a_second_recovery_attempt_is_waited_for() {
    // Recoveries take one link round trip (10 ms) except when the retransmission is lost too (a
    // second round, 21 ms): giving up on those would reorder the flow, which TCP takes for a loss.
    let mut b = buf();
    let mut t = 0;
    let mut seq = 0u16;
    b.push(ms(t), 1, Seq16(seq), 0);
    for k in 0..50 {
        let gap = seq + 1;
        let late = if k == 49 { 21 } else { 10 };
        b.push(ms(t + 1), 1, Seq16(gap + 1), 0);
        b.handle_timeout(ms(t + 1 + late - 1));
        assert_eq!(b.push(ms(t + 1 + late), 1, Seq16(gap), 0), Pushed::InOrder, "recovery {k} waited for");
        t += 300; // beyond max_hold: idle time, not packet spacing (A stays unknown)
        seq = gap + 1;
    }
    assert_eq!((b.stats().skipped, b.stats().late), (0, 0));
}

#[test]
fn an_interruption_shifts_the_holds_and_is_not_a_recovery_delay() {
    let mut b = buf();
    b.push(ms(0), 1, Seq16(0), 0);
    assert_eq!(b.push(ms(1), 1, Seq16(2), 2), Pushed::Held);
    drain(&mut b);
    assert_eq!(b.poll_timeout(), Some(ms(21)));
    // The exit's link is down from 5 to 105 ms.
    b.shift_deadlines(Duration::from_millis(100));
    assert_eq!(b.poll_timeout(), Some(ms(121)));
    b.handle_timeout(ms(60));
    assert!(drain(&mut b).is_empty(), "nothing expires during the interruption");
    assert_eq!(b.push(ms(110), 1, Seq16(1), 1), Pushed::InOrder);
    assert_eq!(drain(&mut b), vec![(1, 1), (1, 2)]);
    // The recovery sample is 110 - (1 + 100) = 9 ms, not 109: R = 9, V = 4.5 -> 3·9 + 4·4.5 = 45 ms.
    assert_eq!(b.hold(&1), Some(Duration::from_millis(45)));
}
