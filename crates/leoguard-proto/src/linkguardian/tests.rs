//! LinkGuardian sender + receiver over scripted links.

use super::*;
use leoguard_core::Instant;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn us(n: u64) -> Instant {
    Instant(n * 1_000)
}

fn cfg() -> LgConfig {
    // 1 Gbit/s, 50 us one way: RTT 100 us.
    LgConfig::for_link(Bps::gbps(1), Duration::from_micros(50))
}

fn pair(c: LgConfig) -> (LgSender<u32>, LgReceiver<u32>) {
    (LgSender::new(c).unwrap(), LgReceiver::new(c).unwrap())
}

fn acks(rx: &mut LgReceiver<u32>) -> Vec<LgAck> {
    std::iter::from_fn(|| rx.poll_ack()).collect()
}

fn delivered(rx: &mut LgReceiver<u32>) -> Vec<u32> {
    std::iter::from_fn(|| rx.poll_deliver()).collect()
}

#[test]
fn for_link_scales_with_the_bdp() {
    let c = cfg();
    assert_eq!(c.link_rtt, Duration::from_micros(100));
    assert_eq!(c.tx_buffer_bytes, 96_000, "(1 + 3 retries) x BDP (50 kB) floored at 64 packets");
    let c = LgConfig::for_link(Bps::gbps(1), Duration::from_millis(5));
    assert_eq!(c.tx_buffer_bytes, 4 * 1_250_000);
    assert_eq!(c.hole_timeout, Duration::from_millis(80), "(3 + 1) x 2 x RTT");
    let c = cfg();
    assert_eq!(LgConfig { link_rtt: Duration::ZERO, ..c }.validate(), Err(LgConfigError::Zero("link_rtt")));
    assert_eq!(LgConfig { retx_copies: 0, ..c }.validate(), Err(LgConfigError::Zero("retx_copies")));
    assert_eq!(LgConfig { max_window: 1 << 15, ..c }.validate(), Err(LgConfigError::BadWindow(1 << 15)));
    assert!(LgSender::<u8>::new(LgConfig { fixed_timeout: Some(Duration::ZERO), ..c }).is_err());
}

#[test]
fn a_lost_packet_is_recovered_after_one_notification() {
    let (mut tx, mut rx) = pair(cfg());
    for i in 0..5u32 {
        let s = tx.on_send(us(u64::from(i)), us(u64::from(i)), i, 1000);
        assert_eq!(s, Seq16(i as u16));
        if i != 2 {
            rx.on_receive(us(50 + u64::from(i)), s, i);
        }
    }
    assert_eq!(delivered(&mut rx), vec![0, 1], "ordered mode holds 3 and 4 behind the hole");
    let a = acks(&mut rx);
    assert_eq!(a[0], LgAck { leading_ack: Seq16(2).plus(u16::MAX), loss: Some((Seq16(2), 1)), received: None });
    for x in &a {
        tx.on_ack(us(110), x);
    }
    let r1 = tx.poll_transmit(us(110)).unwrap();
    let r2 = tx.poll_transmit(us(110)).unwrap();
    assert_eq!(tx.poll_transmit(us(110)), None);
    assert_eq!((r1.seq, r1.item, r1.kind, r1.priority), (Seq16(2), Some(2), OutKind::Retransmission { copy: 0 }, true));
    assert_eq!(r2.kind, OutKind::Retransmission { copy: 1 }, "sent twice");
    assert_eq!(tx.stats().retx_rounds, 1, "repeated head-hole notifications within the guard are ignored");
    rx.on_receive(us(160), r1.seq, 2);
    rx.on_receive(us(161), r2.seq, 2);
    assert_eq!(delivered(&mut rx), vec![2, 3, 4]);
    assert_eq!(rx.stats().duplicates, 1);
    for x in acks(&mut rx) {
        tx.on_ack(us(220), &x);
    }
    assert_eq!(tx.in_flight(), 0);
    let ev: Vec<_> = std::iter::from_fn(|| tx.poll_event()).collect();
    assert!(ev.contains(&LgEvent::Recovered { seq: Seq16(2), retries: 1 }));
    assert_eq!(ev.len(), 5);
}

#[test]
fn a_lost_tail_is_recovered_through_dummies() {
    let (mut tx, mut rx) = pair(cfg());
    for i in 0..4u32 {
        let s = tx.on_send(us(0), us(0), i, 1000);
        if i < 2 {
            rx.on_receive(us(50), s, i);
        }
    }
    for a in acks(&mut rx) {
        tx.on_ack(us(100), &a);
    }
    assert_eq!(tx.poll_transmit(us(100)), None, "no dummies while the host is busy");
    tx.on_idle(us(100));
    let d: Vec<_> = std::iter::from_fn(|| tx.poll_transmit(us(100))).collect();
    assert_eq!(d.len(), 2);
    assert!(d.iter().all(|o| o.kind == OutKind::Dummy && o.seq == Seq16(4) && o.item.is_none()));
    rx.on_dummy(us(150), Seq16(4));
    let a = acks(&mut rx);
    assert_eq!(a[0].loss, Some((Seq16(2), 2)));
    tx.on_ack(us(200), &a[0]);
    let r: Vec<_> = std::iter::from_fn(|| tx.poll_transmit(us(200))).collect();
    let retx: Vec<_> = r.iter().filter(|o| o.item.is_some()).map(|o| o.seq.0).collect();
    assert_eq!(retx, vec![2, 2, 3, 3]);
    assert_eq!(
        r.iter().filter(|o| o.kind == OutKind::Dummy).count(),
        2,
        "a train follows the idle retransmission burst"
    );
    rx.on_receive(us(250), Seq16(2), 2);
    rx.on_receive(us(250), Seq16(3), 3);
    assert_eq!(delivered(&mut rx), vec![0, 1, 2, 3]);
    assert_eq!(tx.stats().dummies, 4);
}

#[test]
fn a_lost_ack_causes_no_spurious_retransmission() {
    let (mut tx, mut rx) = pair(cfg());
    for i in 0..10u32 {
        let s = tx.on_send(us(u64::from(i)), us(u64::from(i)), i, 1000);
        rx.on_receive(us(50 + u64::from(i)), s, i);
        let a = acks(&mut rx);
        if i % 3 != 0 {
            // ACKs of packets 0, 3, 6, 9 are lost.
            for x in a {
                tx.on_ack(us(100 + u64::from(i)), &x);
            }
        }
    }
    tx.on_idle(us(110));
    while let Some(o) = tx.poll_transmit(us(110)) {
        rx.on_dummy(us(160), o.seq);
    }
    for x in acks(&mut rx) {
        tx.on_ack(us(210), &x);
    }
    assert_eq!(tx.in_flight(), 0);
    assert_eq!((tx.stats().retransmissions, tx.stats().notifications), (0, 0));
}

#[test]
fn unordered_mode_releases_at_once_and_ordered_mode_in_order() {
    for ordered in [false, true] {
        let (mut tx, mut rx) = pair(LgConfig { ordered, ..cfg() });
        let seqs: Vec<Seq16> = (0..4u32).map(|i| tx.on_send(us(0), us(0), i, 100)).collect();
        for &i in &[0usize, 2, 3, 1] {
            rx.on_receive(us(50), seqs[i], i as u32);
        }
        let want = if ordered { vec![0, 1, 2, 3] } else { vec![0, 2, 3, 1] };
        assert_eq!(delivered(&mut rx), want);
        assert_eq!(rx.leading_ack(), Seq16(3));
    }
}

#[test]
fn receiver_gives_up_a_hole_after_the_timeout() {
    let (mut tx, mut rx) = pair(cfg());
    let s: Vec<_> = (0..3u32).map(|i| tx.on_send(us(0), us(0), i, 100)).collect();
    rx.on_receive(us(50), s[0], 0);
    rx.on_receive(us(50), s[2], 2);
    assert_eq!(rx.poll_timeout(), Some(us(50) + cfg().hole_timeout));
    rx.handle_timeout(us(50) + cfg().hole_timeout);
    assert_eq!(delivered(&mut rx), vec![0, 2]);
    assert_eq!(rx.stats().skipped, 1);
    assert_eq!(rx.poll_timeout(), None);
}

#[test]
fn fixed_timer_mode_ignores_notifications_and_bounds_retries() {
    let c = LgConfig { fixed_timeout: Some(Duration::from_micros(300)), max_retries: 2, ..cfg() };
    let (mut tx, _) = pair(c);
    tx.on_send(us(0), us(0), 7, 100);
    tx.on_ack(us(100), &LgAck { leading_ack: Seq16(u16::MAX), loss: Some((Seq16(0), 1)), received: None });
    assert_eq!(tx.poll_transmit(us(100)), None, "gaps in feedback are not losses on shared links");
    assert_eq!(tx.poll_timeout(), Some(us(300)));
    tx.handle_timeout(us(300));
    assert_eq!(tx.poll_transmit(us(300)).map(|o| o.seq), Some(Seq16(0)));
    tx.handle_timeout(us(600));
    tx.handle_timeout(us(900));
    let ev: Vec<_> = std::iter::from_fn(|| tx.poll_event()).collect();
    assert_eq!(ev, vec![LgEvent::GivenUp { seq: Seq16(0), reason: GiveUpReason::RetriesExhausted }]);
    assert_eq!((tx.stats().timeouts, tx.stats().retx_rounds, tx.in_flight()), (3, 2, 0));
}

#[test]
fn a_link_change_discards_the_buffer_and_a_full_buffer_evicts_the_oldest() {
    let (mut tx, _) = pair(LgConfig { tx_buffer_bytes: 3000, ..cfg() });
    for i in 0..4u32 {
        tx.on_send(us(0), us(0), i, 1000);
    }
    assert_eq!(tx.poll_event(), Some(LgEvent::GivenUp { seq: Seq16(0), reason: GiveUpReason::BufferFull }));
    assert_eq!((tx.buffer_bytes(), tx.stats().buffer_bytes_max), (3000, 3000));
    assert_eq!(tx.on_link_change(), 3);
    assert_eq!(tx.stats().discarded_on_link_change, 3);
    assert_eq!((tx.in_flight(), tx.next_seq()), (0, Seq16(0)));
    tx.on_ack(us(1), &LgAck { leading_ack: Seq16(3), loss: None, received: None });
    assert_eq!(tx.stats().bad_acks, 1, "a stale ACK from the old link is ignored");
}

/// A tiny deterministic generator for the lossy link (seeded by proptest).
struct SplitMix(u64);

impl SplitMix {
    fn chance(&mut self, per_mille: u64) -> bool {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % 1000 < per_mille
    }
}

enum Wire {
    Data(Seq16, u32),
    Dummy(Seq16),
}

struct LinkRun {
    delivered: Vec<u32>,
    given_up: Vec<Seq16>,
    tx: LgSender<u32>,
    rx: LgReceiver<u32>,
}

/// `n` packets in bursts over a FIFO link (1 us per packet, 50 us each way) that drops data, copies,
/// dummies and ACKs independently.
fn lossy_link(c: LgConfig, seed: u64, n: u32, burst: u32, data_loss: u64, ack_loss: u64) -> LinkRun {
    let (mut tx, mut rx) = pair(c);
    let mut rng = SplitMix(seed);
    let owd = Duration::from_micros(50);
    let ser = Duration::from_micros(1);
    let mut fwd: BTreeMap<(Instant, u64), Wire> = BTreeMap::new();
    let mut back: BTreeMap<(Instant, u64), LgAck> = BTreeMap::new();
    let (mut now, mut link_free, mut k) = (Instant::ZERO, Instant::ZERO, 0u64);
    let (mut next_app, mut idle_told) = (0u32, false);
    let mut out = LinkRun {
        delivered: Vec::new(),
        given_up: Vec::new(),
        tx: LgSender::new(c).unwrap(),
        rx: LgReceiver::new(c).unwrap(),
    };
    let app_time = |i: u32| us(u64::from(i / burst) * 400);
    loop {
        rx.handle_timeout(now);
        tx.handle_timeout(now);
        while let Some((&key, _)) = fwd.iter().next().filter(|(key, _)| key.0 <= now) {
            match fwd.remove(&key).unwrap() {
                Wire::Data(s, x) => rx.on_receive(now, s, x),
                Wire::Dummy(s) => rx.on_dummy(now, s),
            }
        }
        while let Some(a) = rx.poll_ack() {
            if !rng.chance(ack_loss) {
                back.insert((now + owd, k), a);
            }
            k += 1;
        }
        out.delivered.extend(std::iter::from_fn(|| rx.poll_deliver()));
        while let Some((&key, _)) = back.iter().next().filter(|(key, _)| key.0 <= now) {
            let a = back.remove(&key).unwrap();
            tx.on_ack(now, &a);
        }
        while let Some(e) = tx.poll_event() {
            if let LgEvent::GivenUp { seq, .. } = e {
                out.given_up.push(seq);
            }
        }
        while link_free <= now {
            let w = if let Some(o) = tx.poll_transmit(now) {
                match o.item {
                    Some(x) => Wire::Data(o.seq, x),
                    None => Wire::Dummy(o.seq),
                }
            } else if next_app < n && app_time(next_app) <= now {
                idle_told = false;
                let s = tx.on_send(now, now, next_app, 1000);
                next_app += 1;
                Wire::Data(s, next_app - 1)
            } else if !idle_told {
                idle_told = true;
                tx.on_idle(now);
                continue;
            } else {
                break;
            };
            link_free = now + ser;
            if !rng.chance(data_loss) {
                fwd.insert((link_free + owd, k), w);
            }
            k += 1;
        }
        let next = [
            fwd.keys().next().map(|x| x.0),
            back.keys().next().map(|x| x.0),
            (next_app < n).then(|| app_time(next_app).max(link_free)),
            tx.poll_timeout(),
            rx.poll_timeout(),
            Some(link_free).filter(|&t| t > now),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        // Nothing left but an idle link: done.
        if link_free <= now
            && fwd.is_empty()
            && back.is_empty()
            && next_app >= n
            && tx.poll_timeout().is_none()
            && rx.poll_timeout().is_none()
        {
            break;
        }
        now = next.max(now);
        assert!(now < Instant(10_000_000_000), "stuck");
    }
    out.delivered.extend(std::iter::from_fn(|| rx.poll_deliver()));
    out.tx = tx;
    out.rx = rx;
    out
}

#[test]
fn clean_link_delivers_everything_without_retransmission() {
    let r = lossy_link(cfg(), 1, 500, 50, 0, 0);
    assert_eq!(r.delivered, (0..500).collect::<Vec<_>>());
    assert_eq!((r.tx.stats().retransmissions, r.tx.in_flight()), (0, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// Random drops of data, retransmissions, dummies and ACKs, on one-to-one and shared links: every
    /// packet reaches the host exactly once (in order in ordered mode), or the sender reports it given
    /// up, or the receiver gave its hole up; with retries left nothing is lost.
    #[test]
    fn delivered_exactly_once_or_given_up(seed in any::<u64>(), ordered in any::<bool>(), shared in any::<bool>(),
            n in 1u32..600, burst in 1u32..80, data_loss in 0u64..150, ack_loss in 0u64..300) {
        // `shared`: a user link (fixed timer 150 us > RTT, per-packet ACKs).
        let fixed_timeout = shared.then_some(Duration::from_micros(150));
        let c = LgConfig { ordered, fixed_timeout, ..cfg() };
        let r = lossy_link(c, seed, n, burst, data_loss, ack_loss);
        let mut seen = std::collections::BTreeSet::new();
        for &x in &r.delivered {
            prop_assert!(seen.insert(x), "{} delivered twice", x);
        }
        if ordered {
            prop_assert!(r.delivered.windows(2).all(|w| w[0] < w[1]));
        }
        let missing: Vec<u32> = (0..n).filter(|x| !seen.contains(x)).collect();
        let given_up: std::collections::BTreeSet<u16> = r.given_up.iter().map(|s| s.0).collect();
        let unexplained = missing.iter().filter(|&&x| !given_up.contains(&(x as u16))).count() as u64;
        prop_assert!(unexplained <= r.rx.stats().skipped, "{:?} missing, given up {:?}", missing, given_up);
        prop_assert_eq!(r.tx.in_flight(), 0);
        prop_assert_eq!(r.rx.stats().delivered, r.delivered.len() as u64);
    }
}

#[test]
fn trains_are_paced_at_one_per_link_rtt_and_silence_gives_up() {
    // Isolated packets 10 us apart (RTT 100 us): the egress goes idle after each. A train covers
    // everything sent before it, so drains within one RTT of it send none (a train per drain would
    // be about one dummy per data packet at partial load); the next train goes one RTT later.
    let (mut tx, _) = pair(cfg());
    let mut dummies = Vec::new();
    for i in 0..20u64 {
        tx.on_send(us(i * 10), us(i * 10), i as u32, 100);
        tx.on_idle(us(i * 10 + 1));
        dummies.push(std::iter::from_fn(|| tx.poll_transmit(us(i * 10 + 1))).count());
    }
    let want: Vec<usize> = (0..20).map(|i| if i % 10 == 0 { 2 } else { 0 }).collect();
    assert_eq!(dummies, want);
    assert_eq!((tx.stats().trains, tx.stats().given_up, tx.in_flight()), (2, 0, 20));
    // Silence: trains one RTT apart until the budget (4 trains without an ACK) is spent, then the
    // copies are given up.
    let mut at = Vec::new();
    while let Some(t) = tx.poll_timeout() {
        tx.handle_timeout(t);
        while tx.poll_transmit(t).is_some() {}
        at.push(t);
        assert!(at.len() < 10, "no end: {at:?}");
    }
    assert_eq!(at, vec![us(201), us(301), us(401)]);
    assert_eq!((tx.stats().trains, tx.stats().given_up, tx.in_flight()), (4, 20, 0));
    let ev: Vec<_> = std::iter::from_fn(|| tx.poll_event()).collect();
    assert!(ev.iter().all(|e| matches!(e, LgEvent::GivenUp { reason: GiveUpReason::NoFeedback, .. })));
}

#[test]
fn an_ack_refills_the_train_budget() {
    let (mut tx, mut rx) = pair(cfg());
    tx.on_send(us(0), us(0), 0, 100);
    tx.on_send(us(1), us(1), 1, 100);
    rx.on_receive(us(50), Seq16(0), 0);
    tx.on_idle(us(2));
    while tx.poll_transmit(us(2)).is_some() {}
    let mut now = us(2);
    for _ in 0..3 {
        now = tx.poll_timeout().unwrap();
        tx.handle_timeout(now);
        while tx.poll_transmit(now).is_some() {}
    }
    assert_eq!(tx.stats().trains, 4, "the budget is spent");
    // An ACK (of packet 0) shows the link is alive: packet 1 gets four more trains, not a give-up.
    for a in acks(&mut rx) {
        tx.on_ack(now, &a);
    }
    now = tx.poll_timeout().unwrap();
    tx.handle_timeout(now);
    assert_eq!((tx.stats().trains, tx.stats().given_up, tx.in_flight()), (5, 0, 1));
}

#[test]
fn copies_join_the_tx_buffer_when_they_leave_the_interface() {
    // 3 kB buffer; four 1 kB packets queued at once, leaving 1 ms apart. A copy still queued at the
    // interface is not in LinkGuardian's Tx buffer (it copies in the egress pipeline).
    let c = LgConfig { tx_buffer_bytes: 3000, fixed_timeout: Some(Duration::from_micros(300)), ..cfg() };
    let (mut tx, _) = pair(c);
    for i in 0..4u32 {
        tx.on_send(us(0), us(1000 * u64::from(i)), i, 1000);
    }
    assert_eq!((tx.buffer_bytes(), tx.stats().given_up, tx.in_flight()), (1000, 0, 4));
    // The fixed timer of a queued packet starts when it leaves, not when it was queued.
    assert_eq!(tx.poll_timeout(), Some(us(300)));
    tx.handle_timeout(us(300));
    assert_eq!(tx.poll_transmit(us(300)).map(|o| o.seq), Some(Seq16(0)));
    tx.on_ack(us(400), &LgAck { leading_ack: Seq16(0), loss: None, received: None });
    assert_eq!(tx.poll_timeout(), Some(us(1300)), "packet 1 leaves at 1 ms");
    // A priority packet sent ahead of the queue (a retransmission, an ACK) delays what is queued.
    tx.on_priority_sent(us(500), Duration::from_micros(100));
    assert_eq!(tx.poll_timeout(), Some(us(1400)));
    tx.handle_timeout(us(3100));
    assert_eq!(tx.buffer_bytes(), 3000);
    assert_eq!(tx.stats().given_up, 0, "the buffer holds what is on the wire: 1, 2, 3");
}

#[test]
fn a_full_buffer_evicts_on_departure() {
    let (mut tx, _) = pair(LgConfig { tx_buffer_bytes: 3000, ..cfg() });
    for i in 0..4u32 {
        tx.on_send(us(0), us(10 * u64::from(i)), i, 1000);
    }
    assert_eq!(tx.poll_event(), None, "nothing has left but packet 0");
    tx.handle_timeout(us(30));
    assert_eq!(tx.poll_event(), Some(LgEvent::GivenUp { seq: Seq16(0), reason: GiveUpReason::BufferFull }));
    assert_eq!((tx.buffer_bytes(), tx.stats().buffer_bytes_max), (3000, 3000));
}

#[test]
fn repeated_notifications_cycle_through_the_open_holes() {
    // Packets 1 and 3 are lost and the fresh notification of 3 is lost with its ACK. Repeating only
    // the head hole (1) would leave 3 unrepaired until 1 is; the repeats take the holes in turn.
    let (_, mut rx) = pair(cfg());
    let mut notified = Vec::new();
    for i in [0u16, 2, 4, 5, 6, 7] {
        rx.on_receive(us(u64::from(i)), Seq16(i), u32::from(i));
        let a = acks(&mut rx);
        assert_eq!(a.len(), 1);
        if i != 4 {
            notified.push(a[0].loss);
        }
    }
    let n = |s: u16| Some((Seq16(s), 1));
    assert_eq!(notified, vec![None, n(1), n(1), n(3), n(1)]);
    // A filled hole drops out of the rotation.
    rx.on_receive(us(10), Seq16(1), 1);
    assert_eq!(acks(&mut rx)[0].loss, n(3));
    rx.on_receive(us(11), Seq16(3), 3);
    assert_eq!(acks(&mut rx)[0].loss, None);
    assert_eq!(delivered(&mut rx), (0..8).collect::<Vec<_>>());
}

#[test]
fn shared_links_acknowledge_each_packet_and_time_out_only_the_lost_ones() {
    // SATGUARD §3.3 fixed timer. Packet 1 is lost; 2..=9 are received (held in ordered mode). With
    // only the cumulative leading ACK, 2..=9 would also stay unacknowledged past the timer and be
    // retransmitted (twice each) although received.
    let c = LgConfig { fixed_timeout: Some(Duration::from_micros(150)), ..cfg() };
    let (mut tx, mut rx) = pair(c);
    for i in 0..10u32 {
        let s = tx.on_send(us(u64::from(i)), us(u64::from(i)), i, 1000);
        if i != 1 {
            rx.on_receive(us(50 + u64::from(i)), s, i);
        }
    }
    let a = acks(&mut rx);
    assert_eq!(a.len(), 9, "one ACK per packet");
    assert!(a.iter().all(|x| x.loss.is_none()), "no notifications on a shared link");
    assert_eq!(a.iter().map(|x| x.received.unwrap().0).collect::<Vec<_>>(), vec![0, 2, 3, 4, 5, 6, 7, 8, 9]);
    for x in &a {
        tx.on_ack(us(110), x);
    }
    assert_eq!(tx.in_flight(), 1);
    tx.handle_timeout(us(200));
    let r: Vec<_> = std::iter::from_fn(|| tx.poll_transmit(us(200))).map(|o| o.seq.0).collect();
    assert_eq!(r, vec![1, 1], "only the lost packet, twice");
    rx.on_receive(us(250), Seq16(1), 1);
    assert_eq!(delivered(&mut rx), (0..10).collect::<Vec<_>>());
    for x in acks(&mut rx) {
        tx.on_ack(us(300), &x);
    }
    assert_eq!((tx.in_flight(), tx.stats().retx_rounds), (0, 1));
}
