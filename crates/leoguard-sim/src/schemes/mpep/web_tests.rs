//! M-PEP with web and UDP flows on the satguard-nyc-lon constellation, lossless and without
//! handover interruptions so that what is left is the proxies' own behaviour.

use super::*;
use crate::engine::QueueLimit;
use crate::scenario::{FlowKind, FlowSpec, RunResult, Scenario};
use crate::web::Http;

/// New York terminal (node 0), London gateway (1), server-lon (2) behind it, for `secs` seconds,
/// the global 15 s handover schedule (London's ingress satellite changes at 12 and 27 s), no loss
/// and no interruption at handovers.
fn nyc_lon(secs: u64, flows: Vec<FlowSpec>, mpep: Option<MpepOptions>) -> Scenario {
    use crate::constellation::HostSpec;
    use crate::loss::LossSpec;
    use leoguard_orbit::{Constellation, GroundNode, InterruptionModel, Policy, TimelineOptions};
    let grounds = vec![
        GroundNode::new("New York", 40.71, -74.01, 0.0, Role::Terminal).unwrap(),
        GroundNode::new("London", 51.51, -0.13, 0.0, Role::GroundStation).unwrap(),
    ];
    let topo = ConstellationTopo {
        constellation: Arc::new(Constellation::preset("starlink-shell1").unwrap()),
        grounds,
        hosts: vec![HostSpec {
            name: "server-lon".into(),
            ground: 1,
            rate: Bps::mbps(10_000),
            delay: Duration::from_millis(1),
        }],
        options: TimelineOptions {
            duration_s: secs as f64,
            step_s: 0.1,
            min_elevation_deg: 25.0,
            policy: Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S),
            interruption: InterruptionModel::None,
            seed: 1,
        },
        gsl_rate: Bps::mbps(1000),
        gsl_down_rate: None,
        gsl_pass: None,
        isl_rate: Bps::mbps(1000),
        queue: QueueLimit::Bytes(4_000_000),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::None,
        access: Vec::new(),
    };
    Scenario {
        nodes: topo.node_count() as u32,
        flows,
        duration: Duration::from_secs(secs),
        seed: 1,
        sample_every: Duration::from_millis(100),
        constellation: Some(topo),
        mpep,
        ..Default::default()
    }
}

fn web(pages: Vec<u32>, start_ms: u64, think_ms: u64) -> FlowSpec {
    FlowSpec {
        src: 0,
        dst: 2,
        kind: FlowKind::Web {
            cc: "cubic".into(),
            http: Http::Http2,
            corpus_seed: 1,
            pages,
            think: Duration::from_millis(think_ms),
        },
        start: Instant(start_ms * 1_000_000),
        tc: 0,
    }
}

fn cbr(start_ms: u64) -> FlowSpec {
    // 10 Mbit/s of 1250-byte packets: one per millisecond.
    FlowSpec {
        src: 2,
        dst: 0,
        kind: FlowKind::Cbr { rate: Bps::mbps(10), size: 1250 },
        start: Instant(start_ms * 1_000_000),
        tc: 0,
    }
}

fn run(s: &Scenario) -> RunResult {
    let mut r = crate::scenario::Running::new(s).unwrap();
    r.advance(r.end());
    r.collect()
}

/// The plain run's load row and the M-PEP run's load row and counters, one load of page 0 at
/// `start_ms`.
fn page_load(start_ms: u64) -> (crate::web::WebLoadRow, RunResult) {
    let plain = run(&nyc_lon(15, vec![web(vec![0], start_ms, 0)], None));
    let split = run(&nyc_lon(15, vec![web(vec![0], start_ms, 0)], Some(MpepOptions::default())));
    (plain.web[0].clone(), split)
}

#[test]
fn a_web_page_load_completes_with_every_connection_split() {
    let (plain, r) = page_load(1000);
    let w = &r.web[0];
    assert!(w.plt_ns.is_some() && w.objects_done == w.objects, "{w:?}");
    assert_eq!((w.bytes, w.connections), (plain.bytes, plain.connections));
    assert_eq!(
        r.flows[0].delivered_bytes,
        run(&nyc_lon(15, vec![web(vec![0], 1000, 0)], None)).flows[0].delivered_bytes
    );
    let st = r.mpep.unwrap();
    // New York (terminal: the browser is the dish end) -> NY's ingress satellite -> London's ingress
    // satellite -> London gateway -> server-lon: three proxies per connection, each terminating the
    // SYN of the hop before it (lossless: one SYN-ACK each).
    let conns = u64::from(w.connections);
    assert_eq!((st.split_connections, st.proxies, st.proxy_syn_acks), (conns, 3 * conns, 3 * conns));
    assert_eq!((st.migrations, st.stale_packets, st.udp_flows), (0, 0, 0));
    // The browser's SYN-ACK comes from its ingress satellite (a few ms away) instead of the server
    // (a whole round trip): the set-up (TCP + TLS) is shorter, and so is the load.
    assert!(w.handshake_ns < plain.handshake_ns, "{} vs {}", w.handshake_ns, plain.handshake_ns);
    assert!(w.plt_ns < plain.plt_ns);
    // Every extra flow id belongs to the web flow (segments of split connections included).
    assert!(r.flows.len() == 1 && r.packets.iter().all(|p| p.flow == 0));
}

#[test]
fn a_load_across_a_migration_pays_the_migration_delay_and_slow_start() {
    // London's ingress satellite changes at 12 s; the (lossless, interruption-free) path changes too,
    // so each load is compared with the plain load at the same start, and that gap with the gap of
    // loads clear of the handover (10 s and 13 s).
    let gap = |start| {
        let (plain, r) = page_load(start);
        (r.web[0].plt_ns.unwrap() as i64 - plain.plt_ns.unwrap() as i64, plain, r)
    };
    let clear: Vec<i64> = [10_000, 13_000].iter().map(|&t| gap(t).0).collect();
    for (_, _, r) in [10_000, 13_000].iter().map(|&t| gap(t)) {
        assert_eq!(r.mpep.unwrap().migrations, 0);
    }
    let base = (clear[0] + clear[1]) / 2;
    assert!((clear[0] - clear[1]).abs() < 5_000_000, "{clear:?}");
    for start in [11_300, 11_900] {
        let (g, plain, r) = gap(start);
        let st = r.mpep.unwrap();
        assert!(st.migrations >= 1 && st.slow_start_restarts >= 2 * st.migrations, "{st:?}");
        let delay = st.migration_delay_max_ns as i64;
        // ~27 ms: the ISL route between the old and the new satellite plus a few KB at 1 Gbit/s.
        assert!((20_000_000..40_000_000).contains(&delay), "{delay}");
        let extra = g - base;
        // At least the migration (the connection waits for it), at most it plus three end-to-end
        // round trips of slow start (the rebuilt connections start again from 10 segments).
        let rtt = plain.handshake_ns as i64 / 2;
        assert!(extra >= delay && extra <= delay + 3 * rtt, "start {start}: extra {extra}, delay {delay}, rtt {rtt}");
    }
}

/// One-way delays (sent, delay, received) of CBR flow 0's packets, by send time.
fn cbr_delays(r: &RunResult) -> Vec<(u64, u64, u64)> {
    let mut d: Vec<_> = r
        .packets
        .iter()
        .filter(|p| p.flow == 0)
        .map(|p| (p.sent_ns, p.received_ns - p.sent_ns, p.received_ns))
        .collect();
    d.sort_unstable();
    d
}

#[test]
fn cbr_packets_are_held_during_the_migration_and_released_in_a_burst() {
    let plain = run(&nyc_lon(14, vec![cbr(11_000)], None));
    let s = nyc_lon(14, vec![cbr(11_000)], Some(MpepOptions::default()));
    let r = run(&s);
    let st = r.mpep.unwrap();
    assert_eq!((st.udp_flows, st.udp_migrations, st.udp_dropped), (1, 1, 0));
    // Nothing lost to the relay: the same packets arrive as without M-PEP (the handover itself
    // drops what is on the old ground link, with or without proxies).
    assert_eq!(r.flows[0].delivered_bytes, plain.flows[0].delivered_bytes);
    assert_eq!(r.flows[0].network_loss, plain.flows[0].network_loss);
    // The relay's migration delay, by hand: ISL route propagation + 4096 B at 1 Gbit/s.
    let c = s.constellation.as_ref().unwrap();
    let mut sim = Sim::new(s.nodes as usize, 1);
    let info = c.install_with(&mut sim, &[0, 2], &[1]).unwrap();
    let sat = info.first_serving[1].unwrap();
    let hops =
        [(HopRole::Source, NodeId(2)), (HopRole::SatelliteProxy { ground: 1 }, sat), (HopRole::Receiver, NodeId(0))];
    let m = plan_migrations(c, &info, &sim, &hops).unwrap();
    let m = m.iter().find(|m| m.t < Instant(14_000_000_000)).unwrap();
    let t = m.t.as_nanos();
    let d = m.propagation.as_nanos() + 32_768;
    // One packet reaches the new satellite per ms while the state travels; those the handover
    // itself dropped on the old ground link (as in the plain run) never get there.
    let lost_at_handover = (plain.flows[0].network_loss * 3000.0).round() as u64;
    assert_eq!(st.udp_held + lost_at_handover, d / 1_000_000 + 1);
    let delays = cbr_delays(&r);
    let after = delays.iter().find(|x| x.0 >= t + 200_000_000).unwrap().1;
    // The first held packet: the largest delay around the handover.
    let first =
        *delays.iter().filter(|x| x.2 > t && x.2 < t + 200_000_000).max_by_key(|x| (x.1, u64::MAX - x.0)).unwrap();
    // The held packets leave the new satellite at t + d, the first packet not held reaches it less
    // than 1 ms (the sending interval) after that: d to within 1 ms, whatever the link delays.
    let next = delays.iter().find(|x| x.1 <= after + 10_000 && x.2 > first.2).unwrap();
    assert!(next.2 - first.2 < 1_000_000, "{first:?} {next:?}");
    // The first held packet waited at most d (it reached the satellite after the handover) and at
    // least d less the uplink delay (the base delay bounds it).
    let extra = first.1 - after;
    assert!(extra <= d && extra + after >= d, "extra {extra}, d {d}");
    // Held packets come out together: a burst at the ISL rate (1250 B: 10 us apart).
    let burst: Vec<_> = delays.iter().filter(|x| x.2 >= first.2 && x.2 < first.2 + 1_000_000).collect();
    assert!(burst.len() as u64 >= st.udp_held, "{burst:?}");
    for w in burst.windows(2).take(st.udp_held as usize - 1) {
        assert_eq!(w[1].2 - w[0].2, 10_000);
    }
}

#[test]
fn a_small_udp_buffer_drops_and_counts_what_does_not_fit() {
    let full = run(&nyc_lon(14, vec![cbr(11_000)], Some(MpepOptions::default())));
    let m = MpepOptions { udp_buffer_bytes: Some(5000), ..Default::default() };
    let r = run(&nyc_lon(14, vec![cbr(11_000)], Some(m)));
    let (a, b) = (full.mpep.unwrap(), r.mpep.unwrap());
    // Four 1250-byte packets fit; the rest of what arrived during the migration is dropped.
    assert_eq!((b.udp_held, b.udp_dropped, b.udp_max_held_bytes), (4, a.udp_held - 4, 5000));
    assert_eq!(full.flows[0].delivered_bytes - r.flows[0].delivered_bytes, 1250 * b.udp_dropped);
    assert!(r.flows[0].endpoint_loss > full.flows[0].endpoint_loss);
    let bad = MpepOptions { udp_buffer_bytes: Some(1 << 40), ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("mpep.udp_buffer_bytes"));
}

#[test]
fn web_loads_finish_under_starlink_loss_and_handover_interruptions() {
    // Lost SYNs and SYN-ACKs between proxies are sent again (1 s, doubling), lost data is
    // retransmitted per segment: every load of the flow finishes, the 12 s handover included.
    let pages: Vec<u32> = (0..8).collect();
    let mut s = nyc_lon(30, vec![web(pages, 8_000, 200)], Some(MpepOptions::default()));
    let c = s.constellation.as_mut().unwrap();
    c.gsl_loss = crate::loss::LossSpec::Starlink { boundary_offset_s: 7, outages: vec![] };
    c.options.interruption = leoguard_orbit::InterruptionModel::Uniform(0.03, 0.2);
    let r = run(&s);
    assert_eq!(r.web.len(), 8);
    assert!(r.web.iter().all(|w| w.plt_ns.is_some()), "{:?}", r.web);
    let st = r.mpep.unwrap();
    let conns: u64 = r.web.iter().map(|w| u64::from(w.connections)).sum();
    assert_eq!((st.split_connections, st.proxies), (conns, 3 * conns));
    assert!(st.proxy_syn_acks >= 3 * conns);
    assert!(st.retx_ground_proxies + st.retx_satellite_proxies > 0, "{st:?}");
}
