//! LEOTP flows through the simulator: a chain like the paper's Fig 12 (consumer - GS - 5 satellites -
//! GS - producer), lossy in the data direction.

use super::super::*;
use crate::engine::QueueLimit;
use crate::loss::LossSpec;
use leoguard_net::schemes::leotp::MidPlacement;

/// An 8-link chain (nodes 0..=8), 20 Mbit/s and `delay_ms` per link, the 6 middle links lossy with
/// `p` in the data direction (node 0, the producer, toward node 8, the consumer).
fn chain(p: f64, kind: FlowKind, secs: u64) -> Scenario {
    let links = (0..8)
        .map(|i| LinkSpec {
            a: i,
            b: i + 1,
            rate: Bps::mbps(20),
            delay: Duration::from_millis(20),
            queue: QueueLimit::Packets(200),
            loss_ab: if (1..7).contains(&i) && p > 0.0 { LossSpec::Bernoulli { p } } else { LossSpec::None },
            loss_ba: LossSpec::None,
            rate_schedule: None,
        })
        .collect();
    Scenario {
        nodes: 9,
        links,
        flows: vec![FlowSpec { src: 0, dst: 8, kind, start: Instant::ZERO, tc: 0 }],
        duration: Duration::from_secs(secs),
        seed: 3,
        sample_every: Duration::from_millis(100),
        ..Default::default()
    }
}

#[test]
fn a_transfer_over_a_lossy_chain_delivers_every_byte_once() {
    let bytes = 3_000_000;
    let s = chain(0.01, FlowKind::Leotp { bytes: Some(bytes) }, 30);
    let r = run(&s).unwrap();
    let f = &r.flows[0];
    assert_eq!(f.delivered_bytes, bytes, "{f:?}");
    assert!(f.fct_s.is_some());
    // Each delivered range once, covering [0, bytes) without overlap.
    let mut starts: Vec<u64> = r.packets.iter().map(|p| p.seq).collect();
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), r.packets.len(), "a range delivered twice");
    assert_eq!(starts.len() as u64, bytes.div_ceil(1453));
    // Losses happened and the mid nodes repaired them in the network.
    let m = r.leotp.unwrap();
    assert_eq!(m.nodes, 7);
    assert!(f.network_loss > 0.02, "{}", f.network_loss);
    assert!(m.holes_detected > 0 && m.rerequests > 0 && m.cache_hits > 0, "{m:?}");
    assert!(r.packets.iter().any(|p| p.retransmission));
}

#[test]
fn without_mid_nodes_the_consumer_recovers_alone_and_slower() {
    let bytes = 2_000_000;
    let mut s = chain(0.01, FlowKind::Leotp { bytes: Some(bytes) }, 60);
    let full = run(&s).unwrap();
    s.leotp.cfg.in_network_retx = false;
    s.leotp.cfg.hop_cc = false;
    let none = run(&s).unwrap();
    assert_eq!(none.flows[0].delivered_bytes, bytes);
    let m = none.leotp.unwrap();
    assert_eq!((m.holes_detected, m.cache_hits, m.rerequests), (0, 0, 0));
    assert!(none.flows[0].retransmissions > full.flows[0].retransmissions);
    assert!(none.flows[0].fct_s.unwrap() > full.flows[0].fct_s.unwrap());
}

#[test]
fn hop_cc_paces_each_hop_below_the_link_rate() {
    // A bulk flow: the mid nodes' token buckets, not the links' queues, hold the backlog.
    let r = run(&chain(0.0, FlowKind::Leotp { bytes: None }, 20)).unwrap();
    let f = &r.flows[0];
    let mbps = f.goodput_bps / 1e6;
    assert!(mbps > 15.0 && mbps < 20.0, "{mbps}");
    let worst_queue = r.links.iter().map(|l| l.stats.max_queue_bytes).max().unwrap();
    assert!(worst_queue < 200 * 1500, "a link queue filled: {worst_queue}");
    assert_eq!(r.links.iter().map(|l| l.stats.drops_queue).sum::<u64>(), 0);
}

#[test]
fn bad_sections_are_refused_by_field() {
    let mut s = chain(0.0, FlowKind::Leotp { bytes: Some(0) }, 1);
    assert!(run(&s).unwrap_err().to_string().contains("flows[0].bytes"));
    s.flows[0].kind = FlowKind::Leotp { bytes: None };
    s.leotp.cfg.cache_blocks = 0;
    assert!(run(&s).unwrap_err().to_string().contains("leotp.cache_blocks"));
    s.leotp.cfg.cache_blocks = 10;
    s.leotp.cfg.bl_tar_mss = -1.0;
    assert!(run(&s).unwrap_err().to_string().contains("leotp.bl_tar_mss"));
    s.leotp.cfg.bl_tar_mss = 5.0;
    s.leotp.placement = MidPlacement::Satellites;
    assert!(run(&s).unwrap_err().to_string().contains("leotp.mid_nodes"));
    s.leotp.placement = MidPlacement::Fraction(0.5);
    let r = run(&s).unwrap();
    assert_eq!(r.leotp.unwrap().nodes, 4, "round(7 * 0.5) of the nodes between the ends");
}

#[test]
fn data_the_producer_sends_again_keeps_its_first_send_time() {
    // Loss only on the producer's own link: the first mid node re-requests each hole from the producer,
    // which sends the range again. Its OWD counts from the first send, so it carries the recovery (the
    // 10 ms hole confirmation and the 2 x 20 ms round trip to the producer), as a cache answer's does.
    let mut s = chain(0.0, FlowKind::Leotp { bytes: None }, 20);
    s.links[0].loss_ab = LossSpec::Bernoulli { p: 0.01 };
    let r = run(&s).unwrap();
    let owd = |p: &PacketRow| (p.received_ns - p.sent_ns) / 1_000_000;
    let clean = r.packets.iter().filter(|p| !p.retransmission).map(owd).min().unwrap();
    let resent: Vec<u64> = r.packets.iter().filter(|p| p.retransmission).map(owd).collect();
    assert!(resent.len() > 50, "{}", resent.len());
    assert!(resent.iter().all(|&d| d >= clean + 50), "clean {clean} ms, resent {resent:?}");
}
