//! The Linux loss-recovery mechanisms one by one, with scripted time: RACK's reordering window,
//! DSACK, undo (DSACK and Eifel), F-RTO, PRR, cwnd-limited growth; each against the older model.

use super::tests::{transfer_full, Aimd, Spy};
use super::*;
use crate::cc;
use leoguard_core::{Bps, Duration, Instant};

const MSS: u64 = 1448;

fn linux() -> TcpConfig {
    TcpConfig::default()
}

fn legacy() -> TcpConfig {
    TcpConfig { recovery: Recovery::legacy(), ..TcpConfig::default() }
}

fn with(name: &str, on: bool) -> TcpConfig {
    let mut c = TcpConfig::default();
    assert!(c.recovery.set(name, on));
    c
}

/// Transmissions 50 and 400 arrive 5 ms late on a 40 ms path (min_rtt/4 = 10 ms).
fn late_twice(k: u64) -> Duration {
    if k == 50 || k == 400 {
        Duration::from_millis(5)
    } else {
        Duration::ZERO
    }
}

#[test]
fn reordering_once_seen_widens_racks_window_and_the_first_spurious_recovery_is_undone() {
    let run = |cfg| transfer_full(cfg, 1_000_000, Bps::mbps(50), Duration::from_millis(20), &[], None, &late_twice);
    let o = run(linux());
    assert_eq!(o.rx.delivered, 1_000_000);
    // The first late segment: no reordering seen yet and 3 SACKed above it, so RACK's window is zero
    // (Linux's DupThresh equivalent): resent; the original then fills the hole before the resend
    // arrives, the echoed timestamp predates the resend (Eifel) and the reduction is undone; the
    // resend is reported as a duplicate (DSACK). The second: min_rtt/4 covers 5 ms, nothing resent.
    let st = o.tx.stats;
    assert_eq!((st.retransmissions, st.recoveries, st.undos, st.dsacks), (1, 1, 1, 1), "{st:?}");
    assert_eq!(o.rx.duplicates, 1);
    // The older model marks both lost (DupThresh), halves the window twice and undoes nothing (the
    // halved window is below the pipe, so the late originals arrive before the resends could go).
    let old = run(legacy());
    let st = old.tx.stats;
    assert_eq!((st.recoveries, st.undos, st.dsacks), (2, 0, 0), "{st:?}");
}

#[test]
fn without_rack_dupthresh_resends_every_late_segment() {
    let o =
        transfer_full(with("rack", false), 1_000_000, Bps::mbps(50), Duration::from_millis(20), &[], None, &late_twice);
    assert_eq!(o.tx.stats.retransmissions, 2);
    assert_eq!(o.tx.stats.undos, 2, "Eifel still undoes both");
}

/// Sends `n` segments at `t` through `tx`.
fn send_all(tx: &mut TcpSender, t: Instant) -> Vec<Segment> {
    std::iter::from_fn(|| tx.poll_transmit(t)).collect()
}

fn sack_ack(cum: u64, blocks: &[(u64, u64)], ts_ecr: Option<Instant>) -> Ack {
    let mut sack = [(0, 0); 3];
    for (k, &(a, b)) in blocks.iter().enumerate() {
        sack[k] = (a * MSS, b * MSS);
    }
    Ack { cum: cum * MSS, sack, n_sack: blocks.len() as u8, rwnd: 1 << 30, ts_ecr, ..Default::default() }
}

/// A window of 20 segments, segment 0 "lost": SACKs for 1..20 arrive 40 ms later and it is resent.
fn lose_segment_zero(cfg: TcpConfig) -> (TcpSender, Instant, Instant) {
    let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 20 * MSS, mss: MSS }), None);
    let t0 = Instant(1_000_000_000);
    assert_eq!(send_all(&mut tx, t0).len(), 20);
    let t1 = t0 + Duration::from_millis(40);
    tx.on_ack(t1, &sack_ack(0, &[(1, 20)], Some(t0)));
    let resend = tx.poll_transmit(t1).expect("segment 0 is resent at once");
    assert_eq!((resend.seq, resend.retransmission), (0, true));
    assert_eq!(tx.cc().cwnd(), 10 * MSS, "the window was halved");
    (tx, t0, t1)
}

#[test]
fn a_recovery_whose_every_retransmission_is_dsacked_is_undone() {
    let (mut tx, _, t1) = lose_segment_zero(linux());
    // The resend fills the hole (TSecr = its own TSval: no Eifel evidence); recovery ends reduced.
    let t2 = t1 + Duration::from_millis(40);
    tx.on_ack(t2, &sack_ack(20, &[], Some(t1)));
    assert!(tx.cc().cwnd() < 11 * MSS && tx.stats.undos == 0);
    // Then the original turns up: the receiver reports it as a duplicate (first block below cum).
    let dsack = Ack {
        cum: 20 * MSS,
        sack: [(0, MSS), (0, 0), (0, 0)],
        n_sack: 1,
        rwnd: 1 << 30,
        ts_ecr: Some(t1),
        ..Default::default()
    };
    assert_eq!(dsack.dsack(), Some((0, MSS)));
    tx.on_ack(t2 + Duration::from_millis(1), &dsack);
    assert!(tx.cc().cwnd() >= 20 * MSS && (tx.stats.undos, tx.stats.dsacks) == (1, 1), "{:?}", tx.stats);
    // With undo off the DSACK is counted and nothing else happens.
    let (mut tx, _, t1) = lose_segment_zero(with("undo", false));
    tx.on_ack(t1 + Duration::from_millis(40), &sack_ack(20, &[], Some(t1)));
    tx.on_ack(t1 + Duration::from_millis(41), &dsack);
    assert!(tx.cc().cwnd() < 11 * MSS && (tx.stats.undos, tx.stats.dsacks) == (0, 1), "{:?}", tx.stats);
}

#[test]
fn an_echoed_timestamp_older_than_the_retransmission_undoes_at_once() {
    let (mut tx, t0, t1) = lose_segment_zero(linux());
    // The hole is filled by the original (TSecr = t0 < the resend's t1): Eifel.
    tx.on_ack(t1 + Duration::from_millis(2), &sack_ack(20, &[], Some(t0)));
    assert!(tx.cc().cwnd() >= 20 * MSS && tx.stats.undos == 1);
}

#[test]
fn dsack_rounds_widen_racks_window_and_sixteen_quiet_recoveries_reset_it() {
    let mut r = rack::Rack::new();
    assert_eq!(r.steps(), 1);
    r.on_dsack();
    r.update_window(100, 200);
    assert_eq!(r.steps(), 2);
    // Another DSACK within the same round trip (a sample sent before the widening) does not widen.
    r.on_dsack();
    r.update_window(150, 300);
    assert_eq!(r.steps(), 2);
    r.on_dsack();
    r.update_window(250, 400);
    assert_eq!(r.steps(), 3);
    let (min_rtt, srtt) = (Duration::from_millis(40), Duration::from_millis(50));
    r.reord_seen = true;
    assert_eq!(r.window(true, 0, min_rtt, srtt), Duration::from_millis(30));
    let short = Duration::from_millis(25);
    assert_eq!(r.window(true, 0, min_rtt, short), short, "capped at SRTT");
    for _ in 0..16 {
        r.on_recovery();
        r.update_window(700, 800);
    }
    assert_eq!(r.steps(), 1);
    // Before any reordering: zero in recovery or with 3 SACKed, min_rtt/4 otherwise.
    let fresh = rack::Rack::new();
    assert_eq!(fresh.window(true, 0, min_rtt, srtt), Duration::ZERO);
    assert_eq!(fresh.window(false, 3, min_rtt, srtt), Duration::ZERO);
    assert_eq!(fresh.window(false, 2, min_rtt, srtt), Duration::from_millis(10));
}

#[test]
fn the_receiver_reports_duplicates_in_the_first_sack_block() {
    let mut rx = TcpReceiver::new(linux());
    let t = Instant::ZERO;
    rx.on_segment(t, 0, MSS as u32, t);
    rx.on_segment(t, 2 * MSS, MSS as u32, t);
    // A duplicate below rcv_nxt: [dup] then the out-of-order block.
    let a = rx.on_segment(t, 0, MSS as u32, t).1.expect("duplicates are ACKed at once");
    assert_eq!((a.dsack(), a.n_sack, a.sack[1]), (Some((0, MSS)), 2, (2 * MSS, 3 * MSS)));
    assert_eq!(a.sack_blocks(), &[(2 * MSS, 3 * MSS)]);
    // A duplicate of out-of-order data: [dup, the block holding it].
    let a = rx.on_segment(t, 2 * MSS, MSS as u32, t).1.expect("ACKed at once");
    assert_eq!((a.dsack(), a.n_sack), (Some((2 * MSS, 3 * MSS)), 2));
    // Reported once: the next ACK is plain.
    let a = rx.on_segment(t, MSS, MSS as u32, t).1.expect("the hole is filled");
    assert_eq!((a.cum, a.n_sack, a.dsack()), (3 * MSS, 0, None));
    // Off: duplicates are ACKed without a DSACK block.
    let mut rx = TcpReceiver::new(with("dsack", false));
    rx.on_segment(t, 0, MSS as u32, t);
    let a = rx.on_segment(t, 0, MSS as u32, t).1.expect("ACKed at once");
    assert_eq!((a.n_sack, a.dsack()), (0, None));
}

#[test]
fn the_receiver_echoes_the_timestamp_of_the_segment_at_the_left_edge() {
    let mut rx = TcpReceiver::new(linux());
    let ts = |ms: u64| Instant(ms * 1_000_000);
    rx.on_segment(ts(10), 0, MSS as u32, ts(1));
    // Out of order (above the last ACK's edge): TS.Recent stays.
    let a = rx.on_segment(ts(11), 2 * MSS, MSS as u32, ts(3)).1.unwrap();
    assert_eq!(a.ts_ecr, Some(ts(1)));
    // The hole filled by a segment sent at 2: echoed.
    let a = rx.on_segment(ts(12), MSS, MSS as u32, ts(2)).1.unwrap();
    assert_eq!(a.ts_ecr, Some(ts(2)));
}

#[test]
fn frto_finds_a_spurious_timeout_and_undoes_it() {
    // 20 segments out, no ACK for the whole initial RTO (1 s): the timeout resends segment 0. Then
    // an ACK for 0..5 arrives: data sent before the timeout and never resent was delivered.
    let timeout = |cfg: TcpConfig| {
        let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 20 * MSS, mss: MSS }), None);
        let t0 = Instant(1_000_000_000);
        assert_eq!(send_all(&mut tx, t0).len(), 20);
        let t1 = t0 + Duration::from_secs(1);
        tx.handle_timeout(t1);
        assert_eq!(tx.stats.rtos, 1);
        let head = tx.poll_transmit(t1).expect("the head is resent");
        assert_eq!((head.seq, head.retransmission, tx.cc().cwnd()), (0, true, MSS));
        assert!(tx.poll_transmit(t1).is_none(), "a window of one");
        tx.on_ack(t1 + Duration::from_millis(5), &sack_ack(5, &[], Some(t0)));
        (tx, t1 + Duration::from_millis(5))
    };
    let (mut tx, t) = timeout(linux());
    assert_eq!((tx.stats.frto_undos, tx.stats.undos), (1, 1));
    assert!(tx.cc().cwnd() >= 20 * MSS);
    // Segments 5..20 are no longer taken for lost: new data goes out, nothing is resent.
    let next = tx.poll_transmit(t).expect("room in the restored window");
    assert_eq!((next.seq, next.retransmission), (20 * MSS, false));
    // Without F-RTO the timeout stands: the rest of the window is resent.
    let (mut tx, t) = timeout(with("frto", false));
    assert_eq!(tx.stats.undos, 0);
    let next = tx.poll_transmit(t).expect("slow start after the timeout");
    assert_eq!((next.seq, next.retransmission), (5 * MSS, true));
}

#[test]
fn prr_spreads_the_reduction_over_the_recovery_instead_of_stopping() {
    // Reno, 40 segments out, segment 0 lost; ACKs then SACK two more segments each.
    let sent_per_ack = |cfg: TcpConfig| {
        let mut tx = TcpSender::new(cfg, cc::build("reno", MSS, 40).unwrap(), None);
        let t0 = Instant(1_000_000_000);
        assert_eq!(send_all(&mut tx, t0).len(), 40);
        let mut counts = Vec::new();
        for k in 0..12u64 {
            let t = t0 + Duration::from_millis(40) + Duration(k * 100_000);
            tx.on_ack(t, &sack_ack(0, &[(1, 4 + 2 * k)], Some(t0)));
            counts.push(send_all(&mut tx, t).len());
        }
        counts
    };
    let prr = sent_per_ack(linux());
    // The fast retransmit at once, then about ssthresh/RecoverFS = 1/2 segment per segment delivered.
    assert!(prr[0] >= 1, "{prr:?}");
    let total: usize = prr.iter().sum();
    assert!((10..=14).contains(&total), "{prr:?}");
    assert!(prr.iter().skip(1).all(|&c| c <= 2), "no bursts: {prr:?}");
    // Without PRR the halved window is below what is still in flight: nothing goes out, not even the
    // fast retransmit, until enough is SACKed.
    let old = sent_per_ack(with("prr", false));
    assert!(old[..10].iter().all(|&c| c == 0), "{old:?}");
}

#[test]
fn an_application_limited_sender_does_not_grow_its_window() {
    // Two segments per 50 ms round trip for 5 s, CUBIC: the window stays at the initial 10 segments
    // (never limited: 10 >= 2 x 2 in flight); the older model grows it on every ACK.
    let grow = |cfg: TcpConfig| {
        let mut tx = TcpSender::new(cfg, cc::build("cubic", MSS, 10).unwrap(), Some(0));
        let mut rx = TcpReceiver::new(cfg);
        let mut t = Instant::ZERO;
        for _ in 0..100 {
            tx.write(2 * MSS);
            let segs = send_all(&mut tx, t);
            t += Duration::from_millis(25);
            let mut last = None;
            for s in segs {
                last = rx.on_segment(t, s.seq, s.len, s.ts).1.or(last);
            }
            t += Duration::from_millis(25);
            tx.on_ack(t, &last.expect("every 2nd segment is ACKed at once"));
        }
        assert_eq!(rx.delivered, 200 * MSS);
        tx.cc().cwnd()
    };
    assert_eq!(grow(linux()), 10 * MSS);
    assert!(grow(with("cwnd_limited", false)) > 100 * MSS);
}

#[test]
fn a_retransmission_a_timeout_leaves_outstanding_is_still_watched_by_rack() {
    // A 990 ms path. Segments 0 and 10 are lost; the SACKs mark both and they are resent at t1.
    // The initial RTO fires 10 ms later: the head is marked lost again and resent, segment 10's
    // resend (10 ms old, less than RACK's RTT) stays outstanding. It is lost too: once the head's
    // resend is acknowledged, RACK must find it, long before the backed-off timer (2 s) would.
    let mut tx = TcpSender::new(with("frto", false), Box::new(Aimd { cwnd: 20 * MSS, mss: MSS }), None);
    let t0 = Instant(1_000_000_000);
    assert_eq!(send_all(&mut tx, t0).len(), 20);
    let t1 = t0 + Duration::from_millis(990);
    tx.on_ack(t1, &sack_ack(0, &[(1, 10), (11, 20)], Some(t0)));
    let resent: Vec<u64> = send_all(&mut tx, t1).iter().filter(|s| s.retransmission).map(|s| s.seq / MSS).collect();
    assert_eq!(resent, [0, 10]);
    let t2 = t0 + Duration::from_secs(1);
    tx.handle_timeout(t2);
    assert_eq!(tx.stats.rtos, 1);
    let head = tx.poll_transmit(t2).expect("the head is resent");
    assert_eq!((head.seq, head.retransmission), (0, true));
    let t3 = t2 + Duration::from_millis(990);
    tx.on_ack(t3, &sack_ack(10, &[(11, 20)], Some(t2)));
    let until = t3 + Duration::from_millis(1900);
    let mut again = None;
    let mut t = t3;
    while again.is_none() {
        again = std::iter::from_fn(|| tx.poll_transmit(t)).find(|s| s.seq == 10 * MSS);
        match tx.poll_timeout() {
            Some(d) if d <= until && again.is_none() => {
                t = t.max(d);
                tx.handle_timeout(t);
            }
            _ => break,
        }
    }
    assert!(again.is_some_and(|s| s.retransmission), "segment 10 resent by RACK before {until:?}");
    assert_eq!(tx.stats.rtos, 1, "without a second timeout");
}

#[test]
fn a_paced_sender_whose_acks_all_stop_still_times_out() {
    // BBR paces. Once its window is full, a pacing time that has passed is no reason to wake up; a
    // caller that (as the simulator's and emulator's agents do) arms only deadlines in the future must
    // still be given the retransmission timer, or a sender whose ACKs stop waits forever.
    let mut tx = TcpSender::new(linux(), cc::build("bbr", MSS, 10).unwrap(), None);
    let mut t = Instant(1_000_000_000);
    let mut sent = 0;
    let until = t + Duration::from_secs(5);
    while tx.stats.rtos == 0 {
        sent += std::iter::from_fn(|| tx.poll_transmit(t)).count();
        let Some(next) = tx.poll_timeout().filter(|&d| d > t && d <= until) else { break };
        t = next;
        tx.handle_timeout(t);
    }
    assert!(sent >= 10, "the initial window went out ({sent})");
    assert_eq!(tx.stats.rtos, 1, "the timer fired by {t:?}");
}

#[test]
fn a_timeout_during_fast_recovery_is_not_judged_by_frto() {
    // 20 segments; SACKs for 1..5 mark 0 lost (recovery, 0 resent); no ACK then until the timeout;
    // then 6..20 are SACKed: originals sent before the timeout, but also before the loss, so they say
    // nothing about the timeout (Linux enables F-RTO only outside recovery). The timeout stands.
    let mut tx = TcpSender::new(linux(), Box::new(Aimd { cwnd: 20 * MSS, mss: MSS }), None);
    let t0 = Instant(1_000_000_000);
    assert_eq!(send_all(&mut tx, t0).len(), 20);
    let t1 = t0 + Duration::from_millis(40);
    tx.on_ack(t1, &sack_ack(0, &[(1, 5)], Some(t0)));
    assert_eq!(tx.stats.recoveries, 1);
    assert!(send_all(&mut tx, t1).iter().any(|s| s.seq == 0 && s.retransmission));
    let t2 = tx.poll_timeout().expect("the retransmission timer");
    tx.handle_timeout(t2);
    assert_eq!(tx.stats.rtos, 1);
    tx.on_ack(t2 + Duration::from_millis(1), &sack_ack(0, &[(1, 20)], Some(t0)));
    assert_eq!((tx.stats.undos, tx.stats.frto_undos), (0, 0), "{:?}", tx.stats);
}

#[test]
fn the_rate_sample_of_a_resent_segment_starts_at_the_resend() {
    // 20 segments, segment 0 lost; SACKs for 1..20 deliver 19 segments, then segment 0 is resent
    // and its ACK is the only thing that ACK delivers. Its sample must count from the resend
    // (prior_delivered = the 19 delivered by then, interval = one RTT), as Linux's
    // tcp_rate_skb_sent does on every transmission: from the first sending it would claim 20
    // segments over two RTTs and a prior_delivered of 0, so a round-counting controller (BBR) would
    // see no round end for as long as recovery lasts.
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let spy = Spy { inner: Aimd { cwnd: 20 * MSS, mss: MSS }, log: log.clone(), probe: |_, _, a| a.rate };
    let mut tx = TcpSender::new(linux(), Box::new(spy), None);
    let t0 = Instant(1_000_000_000);
    assert_eq!(send_all(&mut tx, t0).len(), 20);
    let t1 = t0 + Duration::from_millis(40);
    tx.on_ack(t1, &sack_ack(0, &[(1, 20)], Some(t0)));
    let resent: Vec<Segment> = send_all(&mut tx, t1).into_iter().filter(|s| s.retransmission).collect();
    assert_eq!(resent.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![0]);
    let t2 = t1 + Duration::from_millis(40);
    tx.on_ack(t2, &sack_ack(20, &[], Some(t1)));
    let last = log.lock().unwrap().iter().rev().flatten().next().copied().expect("a rate sample");
    assert_eq!(last.prior_delivered, 19 * MSS, "{last:?}");
    assert_eq!(last.delivered, MSS);
    assert_eq!(last.interval, Duration::from_millis(40));
}

#[test]
fn an_ack_that_acknowledges_old_data_and_sacks_new_data_gives_rack_the_old_rtt() {
    // Linux walks an ACK's SACK blocks (`tcp_sacktag_write_queue`) before its cumulative part
    // (`tcp_clean_rtx_queue`), and RACK's RTT is that of the last segment it heard of. After an outage
    // the first ACK acknowledges, cumulatively, data delivered before the outage (whose ACKs were lost)
    // and SACKs the first segment sent after it: RACK's RTT is then the old data's, long, and the
    // segments lost in the outage are marked one ACK later, by the next SACK alone.
    let mut tx = TcpSender::new(linux(), Box::new(Aimd { cwnd: 100 * MSS, mss: MSS }), Some(60 * MSS));
    let t0 = Instant(1_000_000_000);
    let rtt = Duration::from_millis(40);
    assert_eq!(send_all(&mut tx, t0).len(), 60);
    let t1 = t0 + rtt;
    tx.on_ack(t1, &sack_ack(20, &[], Some(t0))); // min_rtt 40 ms
                                                 // A 30 ms outage: 20..30 are delivered but their ACKs lost, 30..60 are lost. Then 60..80 go out.
    let t2 = t1 + Duration::from_millis(30);
    tx.write(20 * MSS);
    assert_eq!(send_all(&mut tx, t2).len(), 20);
    let t3 = t2 + rtt;
    tx.on_ack(t3, &sack_ack(30, &[(60, 61)], Some(t2)));
    assert_eq!(tx.stats.recoveries, 0, "RACK's RTT is 20..30's (110 ms): 30..60 are not yet overdue");
    assert!(tx.poll_transmit(t3).is_none());
    let t4 = t3 + Duration::from_micros(300);
    tx.on_ack(t4, &sack_ack(30, &[(60, 62)], Some(t2)));
    assert_eq!(tx.stats.recoveries, 1, "the next SACK alone gives RACK 40 ms: 30..60 are lost");
    let resend = tx.poll_transmit(t4).expect("a retransmission");
    assert_eq!((resend.seq, resend.retransmission), (30 * MSS, true));
}
