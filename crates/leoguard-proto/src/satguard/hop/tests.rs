use super::*;
use proptest::prelude::*;

fn t(ms: u64) -> Instant {
    Instant(ms * 1_000_000)
}

fn sender(detect_gaps: bool) -> HopSender<u32> {
    HopSender::new(HopConfig {
        buffer_bytes: 1_000_000,
        max_retries: 2,
        retry_budget: None,
        detect_gaps,
        default_timeout: Duration::from_millis(10),
    })
    .unwrap()
}

#[test]
fn a_gap_before_a_hack_is_retransmitted_with_a_new_hseq() {
    let mut s = sender(true);
    let mut r = HopReceiver::new(0, 100);
    let h: Vec<Seq16> = (0..4).map(|i| s.on_send(t(0), i, 1000, 0)).collect();
    assert_eq!(h, vec![Seq16(0), Seq16(1), Seq16(2), Seq16(3)]);
    // HSeq 2 is lost on the link.
    for &x in &[h[0], h[1], h[3]] {
        let got = r.on_receive(t(1), x, u64::from(x.0), false);
        s.on_hack(t(2), &got.hack);
    }
    let re = s.poll_retransmit(t(2)).unwrap();
    assert_eq!((re.item, re.hseq, re.retries), (2, Seq16(4), 1), "SATGUARD §3.5: the retransmission gets HSeq 5th");
    assert!(s.poll_retransmit(t(2)).is_none());
    assert_eq!(s.stats.gap_losses, 1);
    let got = r.on_receive(t(3), re.hseq, 2, true);
    assert!(!got.duplicate);
    assert_eq!(got.hack, HAck { start: Seq16(3), end: Seq16(4), beam: 0 });
    s.on_hack(t(3), &got.hack);
    assert_eq!(s.pending(), 0);
    assert_eq!(s.buffered_bytes(), 0);
}

#[test]
fn a_retransmission_queued_behind_data_starts_its_timer_when_it_leaves() {
    let mut s = sender(false);
    s.on_send(t(0), 7, 100, 0);
    s.handle_timeout(t(10));
    // The host queues the retransmission behind 25 ms of data: its timer runs from t = 35 ms, so
    // no second copy is made while the first one still waits in the queue.
    let a = s.poll_retransmit_leaving(|bytes| {
        assert_eq!(bytes, 100);
        t(35)
    });
    assert_eq!(a.map(|r| r.retries), Some(1));
    assert_eq!(s.poll_timeout(), Some(t(45)));
    s.handle_timeout(t(44));
    assert!(s.poll_retransmit(t(44)).is_none());
    assert_eq!(s.stats.timer_losses, 1);
    // Sent at once, the same retransmission's timer would run from its queueing.
    let mut now = sender(false);
    now.on_send(t(0), 7, 100, 0);
    now.handle_timeout(t(10));
    now.poll_retransmit(t(10));
    assert_eq!(now.poll_timeout(), Some(t(20)));
}

#[test]
fn a_lost_hack_is_covered_by_the_next_one() {
    let mut s = sender(true);
    let mut r = HopReceiver::new(0, 100);
    let mut hacks = Vec::new();
    for i in 0..5 {
        let h = s.on_send(t(0), i, 100, 0);
        hacks.push(r.on_receive(t(1), h, u64::from(i), false).hack);
    }
    // Only the last HAck arrives: it covers [0, 4].
    s.on_hack(t(2), &hacks[4]);
    assert_eq!(s.pending(), 0);
    assert!(s.poll_retransmit(t(2)).is_none());
    assert_eq!(s.stats.acked, 5);
}

#[test]
fn a_timer_catches_a_lost_tail_and_the_retry_bound_holds() {
    let mut s = sender(true);
    s.on_send(t(0), 7, 100, 0);
    assert_eq!(s.poll_timeout(), Some(t(10)));
    s.handle_timeout(t(10));
    let a = s.poll_retransmit(t(10)).unwrap();
    assert_eq!(a.retries, 1);
    s.handle_timeout(t(20));
    let b = s.poll_retransmit(t(20)).unwrap();
    assert_eq!(b.retries, 2);
    // Third expiry: max_retries = 2 reached, reported lost.
    s.handle_timeout(t(30));
    assert!(s.poll_retransmit(t(30)).is_none());
    assert_eq!(s.poll_lost(), Some(7));
    assert_eq!(s.stats.given_up, 1);
    assert_eq!(s.buffered_bytes(), 0);
}

#[test]
fn beams_have_their_own_timeouts() {
    // SATGUARD §3.3: a near beam (thd 4 ms) and a far beam (thd 7 ms) on one shared link.
    let mut s = sender(false);
    s.set_beam_timeout(1, Duration::from_millis(4));
    s.set_beam_timeout(2, Duration::from_millis(7));
    s.on_send(t(0), 10, 100, 1);
    s.on_send(t(0), 20, 100, 2);
    // HAcks from the far beam arrive first: no gap detection on a shared link, nothing is lost.
    s.on_hack(t(1), &HAck { start: Seq16(1), end: Seq16(1), beam: 2 });
    assert!(s.poll_retransmit(t(1)).is_none());
    assert_eq!(s.poll_timeout(), Some(t(4)));
    s.handle_timeout(t(4));
    assert_eq!(s.poll_retransmit(t(4)).unwrap().item, 10);
    assert_eq!(s.stats.timer_losses, 1);
}

#[test]
fn out_of_window_hacks_and_a_full_buffer_are_counted() {
    let mut s = HopSender::new(HopConfig { buffer_bytes: 250, ..sender(true).cfg }).unwrap();
    for i in 0..3 {
        s.on_send(t(0), i, 100, 0);
    }
    assert_eq!(s.stats.evicted, 1);
    assert!(s.buffered_bytes() <= 250);
    s.on_hack(t(1), &HAck { start: Seq16(40_000), end: Seq16(40_001), beam: 0 });
    s.on_hack(t(1), &HAck { start: Seq16(2), end: Seq16(1), beam: 0 });
    assert_eq!(s.stats.hacks_out_of_window, 2);
    assert!(HopSender::<u32>::new(HopConfig { buffer_bytes: 0, ..HopConfig::default() })
        .unwrap_err()
        .to_string()
        .contains("satguard.buffer_bytes = 0"));
}

#[test]
fn take_pending_empties_the_buffer_in_order() {
    let mut s = sender(true);
    for i in 0..4 {
        s.on_send(t(0), i, 100, 3);
    }
    s.on_hack(t(1), &HAck { start: Seq16(1), end: Seq16(1), beam: 0 });
    // HSeq 0 was lost (gap) and is queued for retransmission; taking the buffer hands it over too.
    assert_eq!(s.pending_copies(Some(3)), vec![0, 2, 3]);
    assert_eq!(s.take_pending(), vec![(0, 3), (2, 3), (3, 3)]);
    assert_eq!((s.pending(), s.buffered_bytes()), (0, 0));
    assert!(s.poll_retransmit(t(1)).is_none() && s.poll_timeout().is_none());
}

#[test]
fn sequence_numbers_wrap() {
    let mut s = sender(true);
    let mut r = HopReceiver::new(0, 100_000);
    for i in 0..70_000u32 {
        let h = s.on_send(t(u64::from(i)), i, 10, 0);
        if i % 1000 != 999 {
            let got = r.on_receive(t(u64::from(i)), h, u64::from(i), false);
            s.on_hack(t(u64::from(i)), &got.hack);
        }
        while let Some(re) = s.poll_retransmit(t(u64::from(i))) {
            let got = r.on_receive(t(u64::from(i)), re.hseq, u64::from(re.item), true);
            s.on_hack(t(u64::from(i)), &got.hack);
        }
    }
    assert_eq!(s.stats.gap_losses, 69);
    assert_eq!(s.stats.retransmissions, 69);
    assert!(s.pending() <= 1);
}

/// A FIFO link that loses packets and HAcks at random, driven with scripted time.
fn lossy_run(n: u32, data_loss: &[bool], hack_loss: &[bool], gaps: bool) -> (Vec<u32>, Vec<u32>, HopSender<u32>) {
    let mut s = HopSender::new(HopConfig {
        buffer_bytes: 10_000_000,
        max_retries: 3,
        retry_budget: None,
        detect_gaps: gaps,
        default_timeout: Duration::from_millis(5),
    })
    .unwrap();
    let mut r = HopReceiver::new(0, 1 << 20);
    let mut delivered = Vec::new();
    let mut k = 0usize;
    let mut flip = |v: &[bool]| {
        k += 1;
        v[k % v.len()]
    };
    // Each "ms": send one new packet (while any remain), then retransmissions; the link delivers
    // after 1 ms, HAcks come back after 1 ms more; timers run every ms.
    let mut wire: VecDeque<(u64, Seq16, u32, bool)> = VecDeque::new();
    let mut back: VecDeque<(u64, HAck)> = VecDeque::new();
    let mut next = 0u32;
    for ms in 0..(u64::from(n) + 200) {
        let now = t(ms);
        while back.front().is_some_and(|x| x.0 <= ms) {
            let (_, h) = back.pop_front().unwrap();
            s.on_hack(now, &h);
        }
        while wire.front().is_some_and(|x| x.0 <= ms) {
            let (_, h, item, re) = wire.pop_front().unwrap();
            let got = r.on_receive(now, h, u64::from(item), re);
            if !got.duplicate {
                delivered.push(item);
            }
            if !flip(hack_loss) {
                back.push_back((ms + 1, got.hack));
            }
        }
        s.handle_timeout(now);
        if next < n {
            let h = s.on_send(now, next, 100, 0);
            if !flip(data_loss) {
                wire.push_back((ms + 1, h, next, false));
            }
            next += 1;
        }
        while let Some(re) = s.poll_retransmit(now) {
            if !flip(data_loss) {
                wire.push_back((ms + 1, re.hseq, re.item, true));
            }
        }
    }
    let mut lost = Vec::new();
    while let Some(x) = s.poll_lost() {
        lost.push(x);
    }
    (delivered, lost, s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every packet handed to the hop is delivered downstream exactly once, or reported lost after
    /// the retry bound, whatever data and HAcks the link loses. (A packet whose HAcks were all lost
    /// can be delivered and still be reported: the sender cannot tell; it is never delivered twice.)
    #[test]
    fn exactly_once_or_reported(
        data_loss in proptest::collection::vec(proptest::bool::weighted(0.15), 1..200),
        hack_loss in proptest::collection::vec(proptest::bool::weighted(0.2), 1..200),
        gaps in any::<bool>(),
    ) {
        let n = 500;
        let (delivered, lost, s) = lossy_run(n, &data_loss, &hack_loss, gaps);
        let mut seen = vec![0u8; n as usize];
        for &d in &delivered {
            seen[d as usize] += 1;
        }
        prop_assert!(seen.iter().all(|&c| c <= 1), "a packet was delivered twice");
        for &l in &lost {
            seen[l as usize] = seen[l as usize].max(1);
        }
        prop_assert!(seen.iter().all(|&c| c == 1), "a packet was neither delivered nor reported lost");
        if hack_loss.iter().all(|&x| !x) {
            prop_assert!(lost.iter().all(|&l| !delivered.contains(&l)), "reported lost although delivered and acked");
        }
        prop_assert_eq!(s.pending(), 0);
    }
}

#[test]
fn a_long_loss_free_run_stays_acknowledged() {
    // Regression: the receiver's run once grew without bound, and after 2^14 packets every HAck fell
    // outside the sender's window (ignored, then spurious timer retransmissions).
    let mut s: HopSender<u64> = HopSender::new(HopConfig::default()).expect("valid");
    let mut r = HopReceiver::new(0, 1000);
    for i in 0..100_000u64 {
        let h = s.on_send(Instant(i), i, 100, 0);
        let got = r.on_receive(Instant(i), h, i, false);
        s.on_hack(Instant(i), &got.hack);
    }
    assert_eq!(s.stats.hacks_out_of_window, 0);
    assert_eq!(s.stats.acked, 100_000);
    assert_eq!(s.pending(), 0);
    s.handle_timeout(Instant(200_000_000));
    assert!(s.poll_retransmit(Instant(200_000_000)).is_none());
}

#[test]
fn a_retry_budget_gives_a_packet_up_by_its_age_not_by_its_count() {
    // Timer-only link (no gap detection), 10 ms timer, no count bound to speak of, 25 ms budget:
    // losses found at 10 and 20 ms are resent; the one found at 30 ms (30 ms after the first
    // transmission) is given up.
    let mut s = HopSender::new(HopConfig {
        buffer_bytes: 1_000_000,
        max_retries: u8::MAX,
        retry_budget: Some(Duration::from_millis(25)),
        detect_gaps: false,
        default_timeout: Duration::from_millis(10),
    })
    .unwrap();
    s.on_send(t(0), 7u32, 1000, 0);
    let mut resent = Vec::new();
    for ms in 1..=40 {
        let now = t(ms);
        if s.poll_timeout().is_some_and(|d| d <= now) {
            s.handle_timeout(now);
        }
        while let Some(r) = s.poll_retransmit(now) {
            resent.push((ms, r.retries));
        }
    }
    assert_eq!(resent, vec![(10, 1), (20, 2)]);
    assert_eq!(s.poll_lost(), Some(7));
    assert_eq!(s.stats.given_up, 1);
    // The same losses with the count alone as the bound (the earlier behaviour) resend a third time.
    let mut c = HopSender::new(HopConfig {
        buffer_bytes: 1_000_000,
        max_retries: 3,
        retry_budget: None,
        detect_gaps: false,
        default_timeout: Duration::from_millis(10),
    })
    .unwrap();
    c.on_send(t(0), 7u32, 1000, 0);
    let mut n = 0;
    for ms in 1..=40 {
        let now = t(ms);
        if c.poll_timeout().is_some_and(|d| d <= now) {
            c.handle_timeout(now);
        }
        while c.poll_retransmit(now).is_some() {
            n += 1;
        }
    }
    assert_eq!(n, 3);
}

#[test]
fn a_zero_retry_budget_is_refused_with_its_field_named() {
    let e = HopConfig { retry_budget: Some(Duration::ZERO), ..HopConfig::default() }.validate().unwrap_err();
    assert!(e.to_string().contains("retry_budget"), "{e}");
}

#[test]
fn a_packet_behind_acknowledged_ones_is_timed_out_at_its_own_deadline() {
    // The beam's timeout shrinks as the satellite comes closer (§3.3): a later packet's deadline
    // comes before an earlier one's. Once the earlier one is acknowledged, the later one's deadline
    // is the one to wake for, and at it the packet is declared lost.
    let mut s = sender(false);
    s.set_beam_timeout(1, Duration::from_millis(10));
    s.on_send(t(0), 0, 100, 1);
    s.set_beam_timeout(1, Duration::from_millis(5));
    s.on_send(t(1), 1, 100, 1);
    assert_eq!(s.poll_timeout(), Some(t(10)));
    s.on_hack(t(2), &HAck { start: Seq16(0), end: Seq16(0), beam: 1 });
    assert_eq!(s.poll_timeout(), Some(t(6)), "the acknowledged packet's deadline is no longer wanted");
    s.handle_timeout(t(6));
    assert_eq!(s.stats.timer_losses, 1);
    assert_eq!(s.poll_retransmit(t(6)).map(|r| r.item), Some(1));
}

#[test]
fn deadlines_of_acknowledged_packets_are_not_woken_for() {
    let mut s = sender(false);
    for i in 0..100 {
        s.on_send(t(i), i as u32, 100, 0);
        s.on_hack(t(i), &HAck { start: Seq16(0), end: Seq16(i as u16), beam: 0 });
        assert_eq!(s.poll_timeout(), None, "every packet sent is acknowledged");
    }
    s.on_send(t(100), 100, 100, 0);
    s.on_send(t(101), 101, 100, 0);
    s.on_hack(t(102), &HAck { start: Seq16(0), end: Seq16(100), beam: 0 });
    assert_eq!(s.poll_timeout(), Some(t(111)), "the one pending packet's deadline");
}
