//! End-to-end tests of the TCP state machines over a scripted bottleneck.

use super::*;
use crate::cc::{AckEvent, CongestionControl};
use leoguard_core::Bps;
use leoguard_core::{Bytes, Instant};
use std::collections::BTreeMap;

/// A controller that runs `C` and logs `probe(now, &inner, ack)` after each ACK it handles (what the
/// sender hands its controller, or what the controller made of it).
pub(super) struct Spy<C, T> {
    pub inner: C,
    pub log: std::sync::Arc<std::sync::Mutex<Vec<T>>>,
    pub probe: fn(Instant, &C, &AckEvent) -> T,
}

impl<C: std::fmt::Debug, T> std::fmt::Debug for Spy<C, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Spy").field(&self.inner).finish()
    }
}

impl<C: CongestionControl, T: Send + 'static> CongestionControl for Spy<C, T> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        self.inner.on_sent(now, bytes, in_flight)
    }
    fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.inner.on_ack(now, ack);
        self.log.lock().unwrap().push((self.probe)(now, &self.inner, ack));
    }
    fn on_congestion_event(&mut self, now: Instant, in_flight: u64) {
        self.inner.on_congestion_event(now, in_flight)
    }
    fn on_recovery_end(&mut self, now: Instant) {
        self.inner.on_recovery_end(now)
    }
    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.inner.on_rto(now, in_flight)
    }
    fn undo(&mut self, now: Instant, prior_cwnd: u64, prior_ssthresh: u64) {
        self.inner.undo(now, prior_cwnd, prior_ssthresh)
    }
    fn cwnd(&self) -> u64 {
        self.inner.cwnd()
    }
    fn ssthresh(&self) -> u64 {
        self.inner.ssthresh()
    }
    fn pacing_rate(&self) -> Option<Bps> {
        self.inner.pacing_rate()
    }
    fn state(&self) -> &'static str {
        self.inner.state()
    }
    fn owns_recovery_window(&self) -> bool {
        self.inner.owns_recovery_window()
    }
    fn set_hystart(&mut self, on: bool) {
        self.inner.set_hystart(on)
    }
}

/// A fixed window, halved on loss (enough to exercise the sender's machinery).
#[derive(Debug)]
pub(super) struct Aimd {
    pub cwnd: u64,
    pub mss: u64,
}

impl CongestionControl for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }
    fn on_sent(&mut self, _: Instant, _: u64, _: u64) {}
    fn on_ack(&mut self, _: Instant, a: &AckEvent) {
        if !a.in_recovery {
            self.cwnd += self.mss * a.bytes_acked / self.cwnd.max(1);
        }
    }
    fn on_congestion_event(&mut self, _: Instant, _: u64) {
        self.cwnd = (self.cwnd / 2).max(2 * self.mss);
    }
    fn on_recovery_end(&mut self, _: Instant) {}
    fn on_rto(&mut self, _: Instant, _: u64) {
        self.cwnd = self.mss;
    }
    fn undo(&mut self, _: Instant, prior_cwnd: u64, _: u64) {
        self.cwnd = self.cwnd.max(prior_cwnd);
    }
    fn cwnd(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        u64::MAX
    }
    fn pacing_rate(&self) -> Option<Bps> {
        None
    }
    fn state(&self) -> &'static str {
        "aimd"
    }
}

pub(super) struct Outcome {
    pub tx: TcpSender,
    pub rx: TcpReceiver,
    pub done_at: Instant,
    pub delivered_order_ok: bool,
    /// (transmission index, seq) of every retransmission.
    pub retx: Vec<(u64, u64)>,
}

/// Sender -> (rate, delay, drops by transmission index, blackout) -> receiver; ACKs return after `delay`.
fn transfer(bytes: u64, rate: Bps, delay: Duration, drops: &[u64], blackout: Option<(Instant, Instant)>) -> Outcome {
    transfer_full(TcpConfig::default(), bytes, rate, delay, drops, blackout, &|_| Duration::ZERO)
}

/// `transfer` with the endpoints configured by `cfg`, where transmission `k` reaches the receiver `extra(k)` later than the link
/// delivers it (reordering, delay spikes).
pub(super) fn transfer_full(
    cfg: TcpConfig,
    bytes: u64,
    rate: Bps,
    delay: Duration,
    drops: &[u64],
    blackout: Option<(Instant, Instant)>,
    extra: &dyn Fn(u64) -> Duration,
) -> Outcome {
    let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 10 * 1448, mss: 1448 }), Some(bytes));
    let mut rx = TcpReceiver::new(cfg);
    // Events: time -> list of (is_ack, seg or ack).
    let mut data: BTreeMap<(Instant, u64), Segment> = BTreeMap::new();
    let mut acks: BTreeMap<(Instant, u64), Ack> = BTreeMap::new();
    let (mut now, mut link_free, mut k, mut n) = (Instant::ZERO, Instant::ZERO, 0u64, 0u64);
    let mut last_delivered = 0;
    let mut order_ok = true;
    let mut retx = Vec::new();
    while !tx.is_done() {
        while let Some(seg) = tx.poll_transmit(now) {
            let start = now.max(link_free);
            link_free = start + rate.transmission_time(Bytes(u64::from(seg.len) + 52)).unwrap();
            if seg.retransmission {
                retx.push((k, seg.seq));
            }
            let lost = drops.contains(&k) || blackout.is_some_and(|(a, b)| link_free >= a && link_free < b);
            if !lost {
                data.insert((link_free + delay + extra(k), n), seg);
            }
            k += 1;
            n += 1;
        }
        let next =
            [data.keys().next().map(|x| x.0), acks.keys().next().map(|x| x.0), tx.poll_timeout(), rx.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .expect("something is pending while the transfer is unfinished");
        now = next;
        assert!(now < Instant(600_000_000_000), "transfer stuck");
        if let Some(t) = rx.poll_timeout().filter(|&t| t <= now) {
            if let Some(a) = rx.handle_timeout(t) {
                acks.insert((now + delay, n), a);
                n += 1;
            }
        }
        while let Some((&(t, id), _)) = data.iter().next().filter(|(key, _)| key.0 <= now) {
            let seg = data.remove(&(t, id)).unwrap();
            let (_, ack) = rx.on_segment(now, seg.seq, seg.len, seg.ts);
            if rx.delivered < last_delivered {
                order_ok = false;
            }
            last_delivered = rx.delivered;
            if let Some(a) = ack {
                acks.insert((now + delay, n), a);
                n += 1;
            }
        }
        while let Some((&(t, id), _)) = acks.iter().next().filter(|(key, _)| key.0 <= now) {
            let a = acks.remove(&(t, id)).unwrap();
            tx.on_ack(now, &a);
        }
        tx.handle_timeout(now);
    }
    Outcome { tx, rx, done_at: now, delivered_order_ok: order_ok, retx }
}

#[test]
fn lossless_transfer_delivers_everything_once_and_estimates_rtt() {
    let o = transfer(2_000_000, Bps::mbps(100), Duration::from_millis(20), &[], None);
    assert_eq!(o.rx.delivered, 2_000_000);
    assert_eq!(o.rx.duplicates, 0);
    assert_eq!(o.tx.stats.retransmissions, 0);
    assert_eq!(o.tx.stats.rtos, 0);
    let srtt = o.tx.srtt().unwrap().as_millis_f64();
    // 40 ms propagation + serialisation + up to one delayed ACK.
    assert!((40.0..=82.0).contains(&srtt), "srtt {srtt}");
    assert!(o.tx.rto() >= Duration::from_millis(200));
    assert!(o.delivered_order_ok);
}

#[test]
fn isolated_losses_are_repaired_by_sack_without_spurious_retransmissions_or_rto() {
    let drops = [30, 31, 90, 200, 350];
    let o = transfer(1_000_000, Bps::mbps(50), Duration::from_millis(10), &drops, None);
    assert_eq!(o.rx.delivered, 1_000_000);
    assert_eq!(o.tx.stats.retransmissions, drops.len() as u64);
    assert_eq!(o.rx.duplicates, 0, "no segment needlessly sent twice");
    assert_eq!(o.tx.stats.rtos, 0);
    assert!(o.tx.stats.recoveries >= 3);
}

#[test]
fn a_lost_retransmission_is_detected_without_waiting_for_the_rto() {
    let first = transfer(600_000, Bps::mbps(50), Duration::from_millis(10), &[40], None);
    assert_eq!(first.retx.len(), 1);
    let (k, seq) = first.retx[0];
    // Same run, but the retransmission is dropped as well.
    let o = transfer(600_000, Bps::mbps(50), Duration::from_millis(10), &[40, k], None);
    assert_eq!(o.retx.iter().map(|r| r.1).collect::<Vec<_>>(), vec![seq, seq]);
    assert_eq!(o.rx.delivered, 600_000);
    assert_eq!(o.tx.stats.rtos, 0, "RACK re-detects the lost retransmission");
    assert_eq!(o.rx.duplicates, 0);
}

#[test]
fn tail_loss_is_repaired_by_a_loss_probe_not_the_rto() {
    // 100 segments of 1448 B; the last transmission is dropped: no SACK can reveal it. Linux sends
    // a Tail Loss Probe (the last segment again) after 2 SRTT; the older model waits for the RTO.
    let bytes = 100 * 1448;
    let o = transfer(bytes, Bps::mbps(50), Duration::from_millis(10), &[99], None);
    assert_eq!(o.rx.delivered, bytes);
    assert_eq!((o.tx.stats.rtos, o.tx.stats.tlps, o.tx.stats.retransmissions), (0, 1, 1));
    let legacy = TcpConfig { recovery: Recovery::legacy(), ..TcpConfig::default() };
    let old = transfer_full(legacy, bytes, Bps::mbps(50), Duration::from_millis(10), &[99], None, &|_| Duration::ZERO);
    assert_eq!((old.tx.stats.rtos, old.tx.stats.tlps, old.tx.stats.retransmissions), (1, 0, 1));
    assert!(o.done_at + Duration::from_millis(150) < old.done_at, "{:?} vs {:?}", o.done_at, old.done_at);
}

#[test]
fn a_blackout_longer_than_the_rto_backs_off_and_recovers() {
    let o = transfer(
        3_000_000,
        Bps::mbps(20),
        Duration::from_millis(15),
        &[],
        Some((Instant(300_000_000), Instant(1_500_000_000))),
    );
    assert_eq!(o.rx.delivered, 3_000_000);
    assert!(o.tx.stats.rtos >= 2, "{} RTOs", o.tx.stats.rtos);
    assert!(o.done_at > Instant(1_500_000_000));
    assert!(o.delivered_order_ok);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Whatever is dropped, every byte reaches the application exactly once and in order.
    #[test]
    fn every_byte_delivered_exactly_once_in_order(drops in proptest::collection::vec(0u64..400, 0..40),
                                                 delay_ms in 1u64..80, rate in 5u64..200) {
        let o = transfer(300_000, Bps::mbps(rate), Duration::from_millis(delay_ms), &drops, None);
        proptest::prop_assert_eq!(o.rx.delivered, 300_000);
        proptest::prop_assert_eq!(o.rx.rcv_nxt(), 300_000);
        proptest::prop_assert!(o.delivered_order_ok);
        proptest::prop_assert_eq!(o.tx.snd_una(), 300_000);
    }
}

/// SACK blocks that repeat, grow, straddle a known span and merge across a filled hole count every
/// segment once: the scoreboard's span shortcuts must not skip a segment that was never SACKed.
#[test]
fn sack_blocks_count_each_segment_once_as_they_grow_and_merge() {
    let cfg = TcpConfig::default();
    let m = u64::from(cfg.mss);
    let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 40 * m, mss: m }), None);
    let t = Instant(1_000_000);
    let mut sent = 0;
    while tx.poll_transmit(t).is_some() {
        sent += 1;
    }
    assert_eq!(sent, 40);
    let ack = |blocks: &[(u64, u64)]| {
        let mut sack = [(0, 0); 3];
        for (k, &(a, b)) in blocks.iter().enumerate() {
            sack[k] = (a * m, b * m);
        }
        Ack { cum: 0, sack, n_sack: blocks.len() as u8, rwnd: u64::MAX / 2, ts_ecr: None, ..Default::default() }
    };
    let steps: [&[(u64, u64)]; 7] = [
        &[(20, 22)],                   // 20, 21: a span above the others
        &[(2, 4), (20, 22)],           // 2, 3
        &[(2, 6), (10, 11), (20, 22)], // 4, 5 and 10
        &[(2, 6), (10, 11)],           // repeated blocks change nothing
        &[(10, 13), (2, 6)],           // 11, 12
        &[(1, 13), (20, 22)],          // hole 1 and 6..10 filled
        &[(0, 30), (1, 13), (20, 22)], // 0 and every remaining one below 30
    ];
    for (k, blocks) in steps.iter().enumerate() {
        tx.on_ack(Instant(2_000_000 + k as u64), &ack(blocks));
    }
    // Every segment of 0..30 is SACKed exactly once: the pipe holds just 30..40 (a segment counted
    // twice would have underflowed it), and none is left marked lost for a retransmission.
    assert_eq!(tx.in_flight(), 10 * m);
    let next = tx.poll_transmit(Instant(3_000_000)).expect("the window has room");
    assert_eq!((next.seq, next.retransmission), (40 * m, false));
}

#[test]
fn writes_to_an_idle_connection_resume_sending_and_finish_exactly() {
    // 3000 bytes, then idle, then 5000 more written: everything arrives once, in order.
    let cfg = TcpConfig::default();
    let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 10 * 1448, mss: 1448 }), Some(3000));
    let mut rx = TcpReceiver::new(cfg);
    let mut now = Instant::ZERO;
    let pump = |tx: &mut TcpSender, rx: &mut TcpReceiver, now: &mut Instant| {
        for _ in 0..100 {
            let mut segs = Vec::new();
            while let Some(seg) = tx.poll_transmit(*now) {
                segs.push(seg);
            }
            if segs.is_empty() && tx.is_done() {
                break;
            }
            *now += Duration::from_millis(10);
            let mut last = None;
            for seg in segs {
                last = rx.on_segment(*now, seg.seq, seg.len, seg.ts).1.or(last);
            }
            if let Some(a) = last {
                tx.on_ack(*now, &a);
            }
            if let Some(a) = rx.handle_timeout(*now + cfg.delack) {
                tx.on_ack(*now, &a);
            }
        }
    };
    pump(&mut tx, &mut rx, &mut now);
    assert!(tx.is_done());
    assert_eq!(rx.delivered, 3000);
    assert_eq!(tx.poll_transmit(now), None, "nothing written, nothing sent");
    tx.write(5000);
    assert!(!tx.is_done());
    assert_eq!(tx.limit(), Some(8000));
    pump(&mut tx, &mut rx, &mut now);
    assert!(tx.is_done());
    assert_eq!(rx.delivered, 8000);
    assert_eq!(tx.snd_nxt(), 8000);
    assert_eq!(tx.stats.retransmissions, 0);
}

#[test]
fn the_rto_is_at_least_srtt_plus_the_minimum_as_in_linux() {
    // A stable 180 ms path: RFC 6298's variance term vanishes, Linux keeps 200 ms of it.
    let o = transfer(3_000_000, Bps::mbps(100), Duration::from_millis(90), &[], None);
    let srtt = o.tx.srtt().unwrap();
    assert!(srtt >= Duration::from_millis(180), "srtt {srtt:?}");
    assert!(o.tx.rto() >= srtt + Duration::from_millis(200), "rto {:?} srtt {srtt:?}", o.tx.rto());
    assert!(o.tx.rto() < srtt + Duration::from_millis(300), "rto {:?} srtt {srtt:?}", o.tx.rto());
}

#[test]
fn a_restart_continues_the_byte_stream_and_tolerates_acks_beyond_what_it_sent() {
    let cfg = TcpConfig::default();
    let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 20 * 1448, mss: 1448 }), Some(100 * 1448));
    let t = Instant::ZERO;
    while tx.poll_transmit(t).is_some() {}
    tx.on_ack(t + Duration::from_millis(10), &Ack { cum: 5 * 1448, rwnd: 1 << 20, ..Default::default() });
    let before = tx.stats;
    // The receiver holds [0, 8) in order and [9, 12) out of order: the new connection starts at 8.
    tx.restart(Box::new(Aimd { cwnd: 2 * 1448, mss: 1448 }), 8 * 1448);
    assert_eq!((tx.snd_una(), tx.snd_nxt(), tx.in_flight()), (8 * 1448, 8 * 1448, 0));
    assert_eq!(tx.stats.bytes_acked, before.bytes_acked + 3 * 1448);
    assert_eq!(tx.rto(), cfg.initial_rto, "a new connection has no RTT estimate");
    let s = tx.poll_transmit(t).unwrap();
    assert_eq!((s.seq, s.retransmission), (8 * 1448, false));
    // Segment 8 fills the hole: the receiver acknowledges up to 12 although only 8..10 was sent.
    assert_eq!(tx.poll_transmit(t).unwrap().seq, 9 * 1448);
    assert!(tx.poll_transmit(t).is_none(), "window of 2");
    tx.on_ack(t + Duration::from_millis(20), &Ack { cum: 12 * 1448, rwnd: 1 << 20, ..Default::default() });
    assert_eq!((tx.snd_una(), tx.snd_nxt(), tx.in_flight()), (12 * 1448, 12 * 1448, 0));
    assert_eq!(tx.poll_transmit(t).unwrap().seq, 12 * 1448, "sending goes on from the receiver's point");
}

/// `[tcp] hystart = false` reaches the controller: the same RTT rise that ends CUBIC's slow start
/// with HyStart on leaves it in slow start with HyStart off.
#[test]
fn the_hystart_switch_reaches_the_controller() {
    let run = |hystart: bool| {
        let mut cfg = TcpConfig::default();
        cfg.recovery.hystart = hystart;
        let m = u64::from(cfg.mss);
        let mut tx = TcpSender::new(cfg, Box::new(crate::cc::cubic::Cubic::new(m, 32)), None);
        let mut now = Instant(1_000_000);
        for round in 0..4u64 {
            let mut sent = Vec::new();
            while let Some(s) = tx.poll_transmit(now) {
                sent.push(s.seq + u64::from(s.len));
            }
            // RTT 100 ms, then 130 ms from the third round; ACKs 3 ms apart (no ACK train).
            now += Duration::from_millis(if round >= 2 { 130 } else { 100 });
            for end in sent {
                now += Duration::from_millis(3);
                let a = Ack { cum: end, rwnd: u64::MAX / 2, ..Default::default() };
                tx.on_ack(now, &a);
            }
        }
        tx.cc().state()
    };
    assert_ne!(run(true), "slow_start");
    assert_eq!(run(false), "slow_start");
}
