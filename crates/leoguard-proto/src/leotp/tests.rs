//! Unit tests of the roles with scripted time (hop CC's numbers are in `cc.rs`).

use super::*;
use leoguard_core::stream;

const MSS: u32 = LEOTP_MSS as u32;
const F: FlowKey = 7;

fn ms(n: u64) -> Instant {
    Instant(n * 1_000_000)
}

/// Everything a role wants to send at `now`, with payloads.
fn drain(mut poll: impl FnMut(&mut [u8]) -> Option<Transmit>) -> Vec<(Transmit, Vec<u8>)> {
    let mut buf = [0u8; LEOTP_MTU];
    let mut v = Vec::new();
    while let Some(t) = poll(&mut buf) {
        v.push((t, buf[LEOTP_HEADER_LEN..t.wire_len].to_vec()));
    }
    v
}

fn data(start: u32, end: u32) -> (LeotpHeader, Vec<u8>) {
    let mut p = vec![0u8; (end - start) as usize];
    PatternSource { total: u64::MAX }.read(u64::from(start), &mut p);
    (LeotpHeader::data(start, end, 10, 0), p)
}

/// Mid node without hop CC, so what it sends leaves at once (holes and caching are what is tested).
fn mid() -> MidNode {
    MidNode::new(LeotpConfig { hop_cc: false, ..LeotpConfig::default() }).expect("config")
}

fn feed_data(m: &mut MidNode, now: Instant, start: u32, end: u32) {
    let (h, p) = data(start, end);
    m.handle_packet(now, F, Face::Upstream, h, &p);
}

fn kinds(out: &[(Transmit, Vec<u8>)]) -> Vec<(Face, bool, u32, u32)> {
    out.iter().map(|(t, _)| (t.face, t.header.is_vph(), t.header.start, t.header.end)).collect()
}

#[test]
fn rto_by_hand() {
    let cfg = LeotpConfig::default();
    let mut r = Rto::new(&cfg);
    assert_eq!(r.rto(), Duration::from_secs(10));
    // First sample 100 ms: srtt 100, rttvar 50, RTO = clamp(300 ms, 20 ms, 60 s).
    r.on_sample(&cfg, Duration::from_millis(100));
    assert_eq!(
        (r.srtt(), r.rttvar(), r.rto()),
        (Some(Duration::from_millis(100)), Duration::from_millis(50), Duration::from_millis(300))
    );
    // 140 ms: rttvar = (3*50 + 40)/4 = 47.5, srtt = (7*100 + 140)/8 = 105, RTO = 105 + 4*47.5 = 295.
    r.on_sample(&cfg, Duration::from_millis(140));
    assert_eq!(r.rttvar(), Duration::from_micros(47_500));
    assert_eq!(r.srtt(), Some(Duration::from_millis(105)));
    assert_eq!(r.rto(), Duration::from_millis(295));
    // Per-Interest timeouts RTO * (1.5^(n-1) + 1): 590, 737.5, 958.75 ms.
    assert_eq!(r.interest_timeout(&cfg, 1), Duration::from_millis(590));
    assert_eq!(r.interest_timeout(&cfg, 2), Duration::from_micros(737_500));
    assert_eq!(r.interest_timeout(&cfg, 3), Duration::from_micros(958_750));
    // A timeout round: srtt and RTO times 1.1.
    r.on_timeout_round(&cfg);
    assert_eq!(r.srtt(), Some(Duration::from_micros(115_500)));
    assert_eq!(r.rto(), Duration::from_micros(324_500));

    // The first sample's clamp: 5 ms -> 20 ms, 30 s -> 60 s; later RTOs are not clamped, and the
    // 4 rttvar term has a 1 ms floor.
    let mut small = Rto::new(&cfg);
    small.on_sample(&cfg, Duration::from_millis(5));
    assert_eq!(small.rto(), Duration::from_millis(20));
    small.on_sample(&cfg, Duration::from_millis(5)); // rttvar 1.875 ms -> RTO 5 + 7.5
    assert_eq!(small.rto(), Duration::from_micros(12_500));
    for _ in 0..40 {
        small.on_sample(&cfg, Duration::from_millis(5));
    }
    assert_eq!(small.rto(), Duration::from_millis(6));
    let mut big = Rto::new(&cfg);
    big.on_sample(&cfg, Duration::from_secs(30));
    assert_eq!(big.rto(), Duration::from_secs(60));
}

#[test]
fn consumer_timeouts_back_off_and_scale_for_ten_rounds() {
    let cfg = LeotpConfig::default();
    let mut c = Consumer::new(cfg, F, Some(u64::from(3 * MSS)), ms(0)).expect("config");
    c.on_timer(ms(0));
    let first = drain(|b| c.poll_transmit(ms(0), b));
    assert_eq!(first.len(), 3, "the first tick's budget covers the whole 3-MSS request");
    assert!(first.iter().all(|(t, _)| t.face == Face::Upstream && t.header.kind == LeotpType::Interest));
    assert_eq!(first[2].0.header.start, 2 * MSS);
    // No sample: RTO 10 s, first timeout at 10 s * (1.5^0 + 1) = 20 s.
    assert_eq!(c.poll_timeout(), Some(ms(20_000)));
    c.on_timer(ms(20_000));
    assert_eq!(drain(|b| c.poll_transmit(ms(20_000), b)).len(), 3);
    assert_eq!(c.stats().retransmissions, 3);
    assert_eq!(c.stats().timeout_rounds, 1, "three timeouts at once are one round");
    assert_eq!(c.rto().rto(), Duration::from_secs(11));
    // Second transmission: RTO 11 s * (1.5 + 1) = 27.5 s later.
    assert_eq!(c.poll_timeout(), Some(ms(47_500)));
    let mut now = ms(47_500);
    for _ in 0..20 {
        c.on_timer(now);
        drain(|b| c.poll_transmit(now, b));
        now = c.poll_timeout().expect("still waiting");
    }
    assert_eq!(c.stats().timeout_rounds, 21);
    // Scaled in 10 rounds only: 10 s * 1.1^10.
    let want = 10.0 * 1.1f64.powi(10);
    assert!((c.rto().rto().as_secs_f64() - want).abs() < 1e-6, "{}", c.rto().rto());
}

#[test]
fn consumer_reorders_and_delivers_once_in_order() {
    let cfg = LeotpConfig::default();
    let total = u64::from(3 * MSS - 100);
    let mut c = Consumer::new(cfg, F, Some(total), ms(0)).expect("config");
    c.on_timer(ms(0));
    let reqs = drain(|b| c.poll_transmit(ms(0), b));
    assert_eq!(reqs.last().map(|(t, _)| t.header.end), Some(3 * MSS - 100), "the last segment is short");
    let mut out = Vec::new();
    for &(s, e) in &[(2 * MSS, 3 * MSS - 100), (MSS, 2 * MSS)] {
        let (h, p) = data(s, e);
        c.handle_packet(ms(40), h, &p);
    }
    c.read(&mut out);
    assert!(out.is_empty(), "nothing in order yet");
    let (h, p) = data(0, MSS);
    c.handle_packet(ms(41), h, &p);
    c.handle_packet(ms(42), h, &p);
    c.read(&mut out);
    assert_eq!(out.len() as u64, total);
    assert!(out.iter().enumerate().all(|(i, &b)| b == pattern_byte(i as u64)));
    assert!(c.is_complete() && c.poll_timeout().is_none());
    let s = c.stats();
    assert_eq!((s.data_received, s.duplicates_dropped, s.delivered_bytes, s.rtt_samples), (3, 1, total, 3));
    // The first RTT sample was 40 ms: RTO = 120 ms.
    assert_eq!(c.rto().srtt().map(|d| d.as_nanos() > 0), Some(true));
}

#[test]
fn data_a_vph_reported_lost_is_no_rtt_sample() {
    // Karn's rule for in-network recovery: the VPH says a mid node lost [MSS, 3 MSS) and recovers
    // it; the recovered Data's delay counts the recovery, so it must not move srtt.
    let mut c = Consumer::new(LeotpConfig::default(), F, Some(u64::from(4 * MSS)), ms(0)).expect("config");
    c.on_timer(ms(0));
    assert_eq!(drain(|b| c.poll_transmit(ms(0), b)).len(), 4);
    let (h, p) = data(0, MSS);
    c.handle_packet(ms(40), h, &p);
    assert_eq!(c.rto().srtt(), Some(Duration::from_millis(40)));
    c.handle_packet(ms(41), LeotpHeader::vph(MSS, 3 * MSS, 10, 0), &[]);
    for (k, t) in [(1, 900), (2, 901)] {
        let (h, p) = data(k * MSS, (k + 1) * MSS);
        c.handle_packet(ms(t), h, &p);
    }
    assert_eq!(c.rto().srtt(), Some(Duration::from_millis(40)), "recovered Data moved srtt");
    let (h, p) = data(3 * MSS, 4 * MSS);
    c.handle_packet(ms(60), h, &p);
    let s = c.stats();
    assert_eq!((s.rtt_samples, s.recovered_in_network, s.vph_received), (2, 2, 1));
    assert!(c.is_complete());
}

#[test]
fn consumer_pacing_follows_the_budget() {
    let cfg = LeotpConfig::default();
    let mut c = Consumer::new(cfg, F, None, ms(0)).expect("config");
    c.on_timer(ms(0));
    assert_eq!(drain(|b| c.poll_transmit(ms(0), b)).len(), 10, "10 MSS in the first tick");
    // Before any sample the budget grows at 0.1 Mbit/s = 12.5 B/ms: one MSS per 117 ms.
    let mut sent = 0;
    for t in 1..=240 {
        c.on_timer(ms(t));
        sent += drain(|b| c.poll_transmit(ms(t), b)).len();
    }
    assert_eq!(sent, 2, "{sent}");
    // With an RTT sample of 10 ms and 100 MSS of room at the producer: budget += 100 * MSS * dt /
    // 10 ms = 10 MSS per ms, so 10 new Interests per tick (the per-tick cap).
    let (mut h, p) = data(0, MSS);
    h.wnd = 100;
    c.handle_packet(ms(10), h, &p);
    // The first sample also re-armed the 11 Interests still out from the 10 s initial RTO to the
    // new one (30 ms: 60 ms for a first timeout); the 10 sent by 117 ms had waited longer, so they
    // time out at the first tick, after its pacing (the one sent at 234 ms is due at 294 ms), and that round of timeouts scales srtt by 1.1: 100 MSS / 11 ms
    // gives 9 new Interests per tick from then on.
    let mut new = Vec::new();
    for t in 241..244 {
        c.on_timer(ms(t));
        let out = drain(|b| c.poll_transmit(ms(t), b));
        new.push(out.iter().filter(|(x, _)| x.header.start >= 12 * MSS).count());
    }
    assert_eq!(new, vec![10, 9, 9]);
    assert_eq!((c.stats().retransmissions, c.stats().timeout_rounds), (10, 1));
}

#[test]
fn hole_vph_one_rerequest_then_purge() {
    let mut m = mid();
    feed_data(&mut m, ms(0), 0, MSS);
    feed_data(&mut m, ms(1), 2 * MSS, 3 * MSS);
    let out = drain(|b| m.poll_transmit(ms(1), b));
    // The VPH for the hole goes downstream before the data that revealed it.
    assert_eq!(
        kinds(&out),
        vec![
            (Face::Downstream, false, 0, MSS),
            (Face::Downstream, true, MSS, 2 * MSS),
            (Face::Downstream, false, 2 * MSS, 3 * MSS)
        ]
    );
    assert_eq!(out[2].1, data(2 * MSS, 3 * MSS).1, "payload forwarded intact");
    assert_eq!((m.stats().holes_detected, m.stats().vph_sent), (1, 1));
    // Re-requested once, 10 ms after it was seen, upstream (the cache does not have it).
    assert_eq!(m.poll_timeout(), Some(ms(11)));
    m.on_timer(ms(10));
    assert!(drain(|b| m.poll_transmit(ms(10), b)).is_empty());
    m.on_timer(ms(11));
    assert_eq!(kinds(&drain(|b| m.poll_transmit(ms(11), b))), vec![(Face::Upstream, false, MSS, 2 * MSS)]);
    m.on_timer(ms(100));
    assert!(drain(|b| m.poll_transmit(ms(100), b)).is_empty(), "one re-request only");
    assert_eq!((m.stats().rerequests, m.stats().rerequest_interests), (1, 1));
    // Purged 200 ms after it was seen.
    assert_eq!(m.poll_timeout(), Some(ms(201)));
    m.on_timer(ms(201));
    assert_eq!(m.stats().holes_purged, 1);
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn a_rerequest_answer_gives_the_consumer_no_sample_without_hop_cc() {
    // End to end, the Data answering a mid node's re-request reaches the consumer with the echo
    // of the re-request's stamp: it must not become a round-trip sample there (it is the round
    // trip from the mid node only, and would pull the consumer's min RTT below the path's).
    let mut m = mid();
    feed_data(&mut m, ms(0), 0, MSS);
    feed_data(&mut m, ms(1), 2 * MSS, 3 * MSS);
    drain(|b| m.poll_transmit(ms(1), b));
    m.on_timer(ms(11));
    let out = drain(|b| m.poll_transmit(ms(11), b));
    assert_eq!(kinds(&out), vec![(Face::Upstream, false, MSS, 2 * MSS)]);
    // The producer (upstream) echoes the stamp after 2 ms; the answer passes the node unchanged.
    let echo = out[0].0.header.ts_ms.wrapping_add(2);
    let (h, p) = data(MSS, 2 * MSS);
    m.handle_packet(ms(20), F, Face::Upstream, LeotpHeader { ts_ms: echo, ..h }, &p);
    let down = drain(|b| m.poll_transmit(ms(20), b));
    assert_eq!(kinds(&down), vec![(Face::Downstream, false, MSS, 2 * MSS)]);
    let mut cc = HopCc::new(&LeotpConfig::default());
    cc.on_data(&LeotpConfig::default(), ms(25), down[0].0.header.ts_ms, LEOTP_HEADER_LEN + MSS as usize, 0);
    assert_eq!(cc.srtt(), None, "ts {}", down[0].0.header.ts_ms);
    // An upstream node that has the range answers the re-request from its cache: no sample either
    // (the re-request's stamp is marked already; the answer must not mark it back).
    let mut up = mid();
    feed_data(&mut up, ms(0), MSS, 2 * MSS);
    drain(|b| up.poll_transmit(ms(0), b));
    up.handle_packet(ms(12), F, Face::Downstream, out[0].0.header, &[]);
    let answer = drain(|b| up.poll_transmit(ms(12), b));
    assert_eq!(kinds(&answer), vec![(Face::Downstream, false, MSS, 2 * MSS)]);
    let mut cc = HopCc::new(&LeotpConfig::default());
    cc.on_data(&LeotpConfig::default(), ms(25), answer[0].0.header.ts_ms, LEOTP_HEADER_LEN + MSS as usize, 0);
    assert_eq!(cc.srtt(), None, "ts {}", answer[0].0.header.ts_ms);
    // With hop CC the re-request carries this node's own stamp (its answer is a sample of the hop).
    let mut hop = MidNode::new(LeotpConfig::default()).expect("config");
    feed_data(&mut hop, ms(0), 0, MSS);
    feed_data(&mut hop, ms(1), 2 * MSS, 3 * MSS);
    drain(|b| hop.poll_transmit(ms(1), b));
    hop.on_timer(ms(11));
    let up: Vec<_> = drain(|b| hop.poll_transmit(ms(11), b))
        .into_iter()
        .filter(|(t, _)| t.face == Face::Upstream && !t.header.is_keepalive())
        .collect();
    assert_eq!(up.iter().map(|(t, _)| t.header.ts_ms).collect::<Vec<_>>(), vec![11]);
}

#[test]
fn late_data_fills_a_hole_before_its_rerequest() {
    let mut m = mid();
    feed_data(&mut m, ms(0), 0, MSS);
    feed_data(&mut m, ms(1), 3 * MSS, 4 * MSS); // hole [MSS, 3 MSS)
    feed_data(&mut m, ms(2), MSS, 2 * MSS); // fills its first half
    m.on_timer(ms(11));
    let out = drain(|b| m.poll_transmit(ms(11), b));
    assert_eq!(kinds(&out).last(), Some(&(Face::Upstream, false, 2 * MSS, 3 * MSS)), "only the rest");
    assert_eq!(m.stats().holes_filled, 1);
    // A hole of 3 MSS is re-requested as 3 one-MSS Interests.
    let mut m = mid();
    feed_data(&mut m, ms(0), 0, MSS);
    feed_data(&mut m, ms(1), 4 * MSS, 5 * MSS);
    m.on_timer(ms(11));
    let up: Vec<_> = drain(|b| m.poll_transmit(ms(11), b))
        .into_iter()
        .filter(|(t, _)| t.face == Face::Upstream && !t.header.is_keepalive())
        .collect();
    assert_eq!(up.len(), 3);
    assert!(up.iter().all(|(t, _)| t.header.range_len() == MSS));
    // A jump of more than 100 MSS resynchronises instead.
    feed_data(&mut m, ms(12), 200 * MSS, 201 * MSS);
    assert_eq!((m.stats().holes_detected, m.stats().resyncs), (1, 2));
}

#[test]
fn hole_confirmed_by_packet_count() {
    let cfg = LeotpConfig { hop_cc: false, hole_confirm: HoleConfirm::Packets(5), ..LeotpConfig::default() };
    let mut m = MidNode::new(cfg).expect("config");
    feed_data(&mut m, ms(0), 0, MSS);
    feed_data(&mut m, ms(1), 2 * MSS, 3 * MSS);
    for k in 3..7 {
        feed_data(&mut m, ms(1), k * MSS, (k + 1) * MSS);
    }
    assert_eq!(m.stats().rerequests, 0, "4 packets after the hole");
    feed_data(&mut m, ms(1), 7 * MSS, 8 * MSS);
    assert_eq!(m.stats().rerequests, 1, "the 5th confirms it");
    m.on_timer(ms(50));
    assert_eq!(m.stats().rerequests, 1);
}

#[test]
fn vph_suppresses_the_downstream_rerequest() {
    // Upstream node A sees a hole; node B below it gets A's output (VPH included).
    let mut a = mid();
    let mut b = mid();
    feed_data(&mut a, ms(0), 0, MSS);
    feed_data(&mut a, ms(1), 2 * MSS, 3 * MSS);
    for (t, p) in drain(|buf| a.poll_transmit(ms(1), buf)) {
        b.handle_packet(ms(2), F, Face::Upstream, t.header, &p);
    }
    a.on_timer(ms(12));
    b.on_timer(ms(12));
    assert_eq!(a.stats().rerequests, 1);
    assert_eq!(b.stats().rerequests, 0);
    assert_eq!(b.stats().holes_detected, 0);
    assert_eq!(b.stats().rerequests_suppressed_by_vph, 1);
    assert_eq!(b.stats().vph_forwarded, 1);
    let down = drain(|buf| b.poll_transmit(ms(12), buf));
    assert!(down.iter().all(|(t, _)| t.face == Face::Downstream), "B asks nothing upstream");
    // Control: the same data without the VPH makes B request the hole itself.
    let mut c = mid();
    feed_data(&mut c, ms(2), 0, MSS);
    feed_data(&mut c, ms(2), 2 * MSS, 3 * MSS);
    c.on_timer(ms(12));
    assert_eq!((c.stats().rerequests, c.stats().rerequests_suppressed_by_vph), (1, 0));
    // A VPH arriving after B opened the hole itself cancels B's pending re-request.
    let mut d = mid();
    feed_data(&mut d, ms(0), 0, MSS);
    feed_data(&mut d, ms(1), 2 * MSS, 3 * MSS);
    d.handle_packet(ms(2), F, Face::Upstream, LeotpHeader::vph(MSS, 2 * MSS, 0, 0), &[]);
    d.on_timer(ms(12));
    assert_eq!((d.stats().rerequests, d.stats().rerequests_suppressed_by_vph), (0, 1));
}

#[test]
fn interest_answered_from_the_cache() {
    let mut m = mid();
    feed_data(&mut m, ms(0), 0, MSS);
    drain(|b| m.poll_transmit(ms(0), b));
    m.handle_packet(ms(5), F, Face::Downstream, LeotpHeader::interest(0, MSS, 1_000_000, 3), &[]);
    let out = drain(|b| m.poll_transmit(ms(5), b));
    assert_eq!(kinds(&out), vec![(Face::Downstream, false, 0, MSS)]);
    assert_eq!(out[0].1, data(0, MSS).1);
    assert_eq!((m.stats().cache_hits, m.stats().interests_forwarded), (1, 0));
    // End to end (no hop CC) the answer gives the consumer's controller no round-trip sample: the
    // consumer <-> this node round trip is not the path's.
    let mut cc = HopCc::new(&LeotpConfig::default());
    cc.on_data(&LeotpConfig::default(), ms(5), out[0].0.header.ts_ms, LEOTP_HEADER_LEN + MSS as usize, 0);
    assert_eq!(cc.srtt(), None, "ts {}", out[0].0.header.ts_ms);
    // With hop CC the same answer echoes the Interest's stamp (a sample of this hop).
    let mut hop = MidNode::new(LeotpConfig::default()).expect("config");
    feed_data(&mut hop, ms(0), 0, MSS);
    drain(|b| hop.poll_transmit(ms(0), b));
    hop.handle_packet(ms(5), F, Face::Downstream, LeotpHeader::interest(0, MSS, 1_000_000, 3), &[]);
    let out = drain(|b| hop.poll_transmit(ms(6), b));
    assert_eq!(
        out.iter().filter(|(t, _)| !t.header.is_vph()).map(|(t, _)| t.header.ts_ms).collect::<Vec<_>>(),
        vec![4]
    );
    // Not cached: forwarded upstream untouched (no hop CC).
    let i = LeotpHeader::interest(MSS, 2 * MSS, 1_000_000, 3);
    m.handle_packet(ms(6), F, Face::Downstream, i, &[]);
    let out = drain(|b| m.poll_transmit(ms(6), b));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0.face, out[0].0.header), (Face::Upstream, i));
    // With the cache off nothing is cached and nothing is answered.
    let cfg = LeotpConfig { hop_cc: false, in_network_retx: false, ..LeotpConfig::default() };
    let mut off = MidNode::new(cfg).expect("config");
    feed_data(&mut off, ms(0), 0, MSS);
    feed_data(&mut off, ms(0), 2 * MSS, 3 * MSS);
    off.handle_packet(ms(5), F, Face::Downstream, LeotpHeader::interest(0, MSS, 1_000_000, 3), &[]);
    off.on_timer(ms(50));
    let s = off.stats();
    assert_eq!((s.cache_hits, s.interests_forwarded, s.holes_detected, s.data_cached), (0, 1, 0, 0));
    assert_eq!(off.cache_blocks(), 0);
}

#[test]
fn cache_is_a_bounded_lru_of_4k_blocks() {
    let mut c = BlockCache::new(3, true);
    let bytes: Vec<u8> = (0..4096u32 * 4).map(|i| (i % 251) as u8).collect();
    for b in 0..3u32 {
        c.insert(F, b * 4096, 4096, &bytes[(b * 4096) as usize..((b + 1) * 4096) as usize]);
    }
    assert!(c.covers(F, 0, 4096)); // block 0 is now the most recently used
    c.insert(F, 3 * 4096, 4096, &bytes[3 * 4096..]);
    assert_eq!((c.len(), c.evictions), (3, 1));
    assert!(!c.covers(F, 4096, 4097), "block 1 was the least recently used");
    assert!(c.covers(F, 0, 10) && c.covers(F, 2 * 4096, 4 * 4096));
    let mut out = Vec::new();
    c.read(F, 2 * 4096 + 4000, 2 * 4096 + 4200, &mut out);
    assert_eq!(out, &bytes[2 * 4096 + 4000..2 * 4096 + 4200]);
    c.read(F, 3 * 4096 - 5, 3 * 4096 + 5, &mut out);
    assert_eq!(&out[200..], &bytes[3 * 4096 - 5..3 * 4096 + 5]);
    // Unaligned pieces: a block holds what arrived, not more; another flow is another key.
    let mut c = BlockCache::new(8, false);
    c.insert(F, 1000, 1453, &[]);
    c.insert(F, 2453, 1453, &[]);
    assert!(c.covers(F, 1000, 3906) && !c.covers(F, 999, 1100) && !c.covers(F + 1, 1000, 1100));
    assert_eq!(c.len(), 1);
    // A mid node's cache never exceeds its bound.
    let cfg = LeotpConfig { hop_cc: false, cache_blocks: 10, ..LeotpConfig::default() };
    let mut m = MidNode::new(cfg).expect("config");
    for k in 0..100 {
        feed_data(&mut m, ms(0), k * MSS, (k + 1) * MSS);
    }
    assert_eq!(m.cache_blocks(), 10);
}

#[test]
fn producer_serves_ranges_at_the_asked_rate_with_room_and_echo() {
    let cfg = LeotpConfig::default();
    let mut p = Producer::new(cfg, PatternSource { total: 100 * u64::from(MSS) }).expect("config");
    // 20 Interests at 8 Mbit/s (1000 B per ms), ts 1000 on the requester's clock, arriving at 5 ms.
    for k in 0..20 {
        p.handle_packet(ms(5), F, LeotpHeader::interest(k * MSS, (k + 1) * MSS, 8_000_000, 1000));
    }
    let first = drain(|b| p.poll_transmit(ms(5), b));
    assert_eq!(first.len(), 2, "a full bucket holds 2 MTU");
    assert_eq!(first[0].0.header.ts_ms, 1000);
    assert_eq!(first[0].0.header.wnd, 128 - 19, "room after taking the first range");
    assert_eq!(first[1].1, data(MSS, 2 * MSS).1);
    let mut n = first.len();
    for t in 6..=25 {
        let out = drain(|b| p.poll_transmit(ms(t), b));
        if let Some((x, _)) = out.first() {
            assert_eq!(x.header.ts_ms, 1000 + (t as u32 - 5), "echo advanced by the holding time");
        }
        n += out.len();
    }
    // 20 ms at 1000 B/ms = 13.6 packets of 1472 B, after the 2 of the full bucket.
    assert!((14..=16).contains(&n), "{n}");
    assert_eq!(p.poll_timeout(), Some(ms(26)));
}

#[test]
fn config_errors_name_their_field() {
    let bad = [
        (LeotpConfig { cache_blocks: 0, ..LeotpConfig::default() }, "cache_blocks"),
        (LeotpConfig { bl_tar_mss: -1.0, ..LeotpConfig::default() }, "bl_tar_mss"),
        (LeotpConfig { bl_tar_mss: 0.0, ..LeotpConfig::default() }, "bl_tar_mss"),
        (LeotpConfig { mss: 0, ..LeotpConfig::default() }, "mss"),
        (LeotpConfig { mss: 1454, ..LeotpConfig::default() }, "mss"),
        (LeotpConfig { m_bytes: f64::NAN, ..LeotpConfig::default() }, "m_bytes"),
        (LeotpConfig { k: 0.0, ..LeotpConfig::default() }, "k"),
        (LeotpConfig { hole_confirm: HoleConfirm::Packets(0), ..LeotpConfig::default() }, "hole_confirm"),
        (LeotpConfig { hole_purge: Duration::from_millis(5), ..LeotpConfig::default() }, "hole_purge"),
        (LeotpConfig { queue_segments: 0, ..LeotpConfig::default() }, "queue_segments"),
        (LeotpConfig { min_rate_bps: 0, ..LeotpConfig::default() }, "min_rate_bps"),
        (LeotpConfig { max_rate_bps: 400_000_000, ..LeotpConfig::default() }, "max_rate_bps"),
        (LeotpConfig { pace_interval: Duration::ZERO, ..LeotpConfig::default() }, "pace_interval"),
        (LeotpConfig { timeout_backoff: 0.5, ..LeotpConfig::default() }, "timeout_backoff"),
    ];
    for (cfg, field) in bad {
        let err = cfg.validate().expect_err(field);
        assert!(matches!(&err, LeotpError::Invalid { field: f, .. } if *f == field), "{err}");
        assert!(err.to_string().starts_with(&format!("invalid leotp.{field} = ")), "{err}");
        assert!(MidNode::new(cfg).is_err() && Consumer::new(cfg, F, None, ms(0)).is_err());
    }
    assert_eq!(
        LeotpConfig { bl_tar_mss: -1.0, ..LeotpConfig::default() }.validate().map_err(|e| e.to_string()),
        Err("invalid leotp.bl_tar_mss = -1: must be a finite number > 0".to_string())
    );
    assert!(LeotpConfig::default().validate().is_ok() && LeotpConfig::paper().validate().is_ok());
    let too_big = Consumer::new(LeotpConfig::default(), F, Some(1 << 33), ms(0));
    assert!(matches!(too_big, Err(LeotpError::Invalid { field: "total", .. })));
}

#[test]
fn bad_packets_are_dropped_and_counted() {
    let cfg = LeotpConfig::default();
    let mut m = MidNode::new(cfg).expect("config");
    m.handle_datagram(ms(0), F, Face::Downstream, &[9; 19]); // unknown type
    m.handle_datagram(ms(0), F, Face::Downstream, &[0; 5]); // truncated
    m.handle_packet(ms(0), F, Face::Upstream, LeotpHeader::interest(0, 1, 1000, 0), &[]); // wrong face
    m.handle_packet(ms(0), F, Face::Downstream, LeotpHeader { wnd: -5, ..LeotpHeader::interest(0, 1, 0, 0) }, &[]);
    let (h, _) = data(0, 10);
    m.handle_packet(ms(0), F, Face::Upstream, h, &[1, 2, 3]); // payload shorter than len
    let odd = LeotpHeader { end: 0, ..LeotpHeader::interest(5, 6, 0, 0) }; // end before start
    m.handle_packet(ms(0), F, Face::Downstream, odd, &[]);
    assert_eq!(m.stats().malformed_dropped, 6);
    m.handle_packet(ms(0), F, Face::Downstream, LeotpHeader::interest(0, 2 * MSS, 1000, 0), &[]);
    assert_eq!(m.stats().out_of_range_dropped, 1);
    assert_eq!(m.sessions(), 0, "no session for dropped packets");

    let mut p = Producer::new(cfg, PatternSource { total: 10_000 }).expect("config");
    p.handle_packet(ms(0), F, LeotpHeader::interest(9_990, 10_001, 1000, 0)); // beyond the source
    p.handle_packet(ms(0), F, LeotpHeader::interest(0, MSS + 1, 1000, 0)); // over one MSS
    p.handle_packet(ms(0), F, h);
    p.handle_datagram(ms(0), F, &[1, 2, 3]);
    assert_eq!((p.stats().out_of_range_dropped, p.stats().malformed_dropped), (2, 2));
    assert!(drain(|b| p.poll_transmit(ms(1), b)).is_empty());

    let mut c = Consumer::new(cfg, F, Some(10 * u64::from(MSS)), ms(0)).expect("config");
    c.on_timer(ms(0));
    let (h, pl) = data(5, 5 + MSS); // unaligned
    c.handle_packet(ms(1), h, &pl);
    let (h, pl) = data(20 * MSS, 20 * MSS + 3); // never requested
    c.handle_packet(ms(1), h, &pl);
    c.handle_packet(ms(1), LeotpHeader::interest(0, 1, 0, 0), &[]);
    c.handle_datagram(ms(1), &[1; 18]);
    let s = c.stats();
    assert_eq!((s.out_of_range_dropped, s.malformed_dropped, s.delivered_bytes), (2, 2, 0));

    // Random datagrams into every role: never a panic.
    let mut rng = stream(11, "leotp/bad-input");
    let mut c = Consumer::new(cfg, F, Some(100_000), ms(0)).expect("config");
    let mut p = Producer::new(cfg, PatternSource { total: 100_000 }).expect("config");
    let mut buf = [0u8; 64];
    for i in 0..20_000u64 {
        let n = (rng.next_u64() % 64) as usize;
        for b in buf[..n].iter_mut() {
            *b = rng.next_u64() as u8;
        }
        if n >= 19 && i % 2 == 0 {
            buf[0] = (i % 3) as u8; // mostly valid types, so the checks after parsing run
        }
        let now = ms(i / 10);
        let face = if i % 3 == 0 { Face::Upstream } else { Face::Downstream };
        m.handle_datagram(now, i % 5, face, &buf[..n]);
        c.handle_datagram(now, &buf[..n]);
        p.handle_datagram(now, i % 5, &buf[..n]);
        if i % 100 == 0 {
            m.on_timer(now);
            c.on_timer(now);
            drain(|b| m.poll_transmit(now, b));
            drain(|b| c.poll_transmit(now, b));
            drain(|b| p.poll_transmit(now, b));
        }
    }
}

#[test]
fn hop_cc_mid_node_stamps_rate_and_clock_and_paces() {
    let cfg = LeotpConfig::default();
    let mut m = MidNode::new(cfg).expect("config");
    // The downstream requester asks 8 Mbit/s with its clock at 500 ms.
    m.handle_packet(ms(10), F, Face::Downstream, LeotpHeader::interest(0, MSS, 8_000_000, 500), &[]);
    let up = drain(|b| m.poll_transmit(ms(10), b));
    assert_eq!(up.len(), 1);
    let h = up[0].0.header;
    assert_eq!((h.ts_ms, h.start, h.end), (10, 0, MSS), "own clock upstream");
    assert_eq!(h.requested_rate_bps(), Some(100_000), "slow start begins at the floor");
    // Data back 30 ms later (hop RTT 30 ms), queued for the token bucket, echoed at 500 + 32 ms.
    for k in 0..5 {
        let (mut d, p) = data(k * MSS, (k + 1) * MSS);
        d.ts_ms = 10;
        m.handle_packet(ms(40), F, Face::Upstream, d, &p);
    }
    // Due now: data waits with a full bucket, and a keep-alive is due 0.9 hop SRTT (27 ms) after
    // the Interest at 10 ms.
    assert!(m.poll_timeout().is_some_and(|t| t <= ms(40)));
    m.on_timer(ms(42));
    let out = drain(|b| m.poll_transmit(ms(42), b));
    assert_eq!(out.len(), 3, "the keep-alive, then 2 MTU from the full bucket");
    let k = out[0].0.header;
    assert!(out[0].0.face == Face::Upstream && k.is_keepalive());
    // Slow start raised the rate: cwnd 0.2 + 5 * (2^(30/30) - 1) = 5.2 MSS per 30 ms = 2.01 Mbit/s
    // (below the backpressure term, 8 Mbit/s less a little for the queue over BL_tar).
    assert_eq!(k.requested_rate_bps(), Some(2_010_000));
    assert_eq!(out[1].0.header.ts_ms, 532, "echo: 500 + 32 ms held");
    assert_eq!(m.queued(F), 3);
    assert_eq!(m.poll_timeout(), Some(ms(43)), "next refill");
    assert_eq!(m.stats().keepalives_sent, 1);
    m.on_timer(ms(43));
    assert_eq!(drain(|b| m.poll_transmit(ms(43), b)).len(), 1, "1000 B refilled: one packet");
}
