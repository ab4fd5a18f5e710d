use super::*;
use crate::engine::{LinkId, QueueLimit};
use crate::sim::Control;
use leoguard_proto::tcp::{TcpReceiver, TcpSender};

const MSS: u64 = 1448;

fn link_pair(sim: &mut Sim, a: u32, b: u32, rate: Bps, ms: u64) -> (LinkId, LinkId) {
    let d = Duration::from_millis(ms);
    let q = QueueLimit::Bytes(10_000_000);
    (sim.add_link(NodeId(a), NodeId(b), rate, d, q), sim.add_link(NodeId(b), NodeId(a), rate, d, q))
}

fn tcp_ends(bytes: Option<u64>, dst: u32) -> (TcpSource, TcpSink) {
    let cfg = TcpConfig::default();
    let tx = TcpSender::new(cfg, cc::build("newreno", MSS, 10).unwrap(), bytes);
    (TcpSource::new(0, NodeId(dst), tx, Duration::ZERO), TcpSink::new(0, NodeId(0), TcpReceiver::new(cfg), false))
}

/// 0 -1 ms- 1 -20 ms- 2 -5 ms- 3 at 10 Gbit/s (serialisation ~1.2 us per packet).
fn static_chain() -> Sim {
    let mut sim = Sim::new(4, 1);
    let r = Bps(10_000_000_000);
    let l: Vec<_> =
        [(0, 1, 1), (1, 2, 20), (2, 3, 5)].iter().map(|&(a, b, d)| link_pair(&mut sim, a, b, r, d)).collect();
    for at in 0..4u32 {
        for dst in 0..4u32 {
            if dst > at {
                sim.route(NodeId(at), NodeId(dst), l[at as usize].0);
            } else if dst < at {
                sim.route(NodeId(at), NodeId(dst), l[at as usize - 1].1);
            }
        }
    }
    sim
}

fn chain_of(hops: &[(HopRole, NodeId)], bytes: Option<u64>, buffer: u64) -> Chain {
    Chain::new(0, hops, 1, "newreno", TcpConfig::default(), buffer, DEFAULT_STATE_OVERHEAD, bytes).unwrap()
}

fn get<T: 'static>(sim: &Sim, id: AgentId) -> &T {
    sim.agent_by_id(id).and_then(|a| a.as_any().downcast_ref()).unwrap()
}

#[test]
fn a_split_transfer_completes_at_the_slowest_segments_slow_start() {
    // 70 segments = 10 + 20 + 40: three slow-start rounds on every segment (no handshake, IW 10,
    // an ACK per 2 segments growing cwnd by 2 MSS). Segment RTTs: 2, 40 and 10 ms.
    let bytes = 70 * MSS;
    let hops = [
        (HopRole::Source, NodeId(0)),
        (HopRole::GroundProxy, NodeId(1)),
        (HopRole::GroundProxy, NodeId(2)),
        (HopRole::Receiver, NodeId(3)),
    ];
    let mut sim = static_chain();
    let (src, sink) = tcp_ends(Some(bytes), 3);
    let (_, d, chain) = install_chain(&mut sim, chain_of(&hops, Some(bytes), 1 << 20), src, sink);
    sim.run(Instant(2_000_000_000));
    assert_eq!(get::<MpepSink>(&sim, d).sink.tcp.delivered, bytes);
    // By hand: proxy 1 holds everything after 5 ms but relays 10 / 20 / 40 segments at 1 / 41 /
    // 81 ms (its RTT is 40 ms); they reach proxy 2 at 21 / 61 / 101 ms, whose window (RTT 10 ms) is
    // 10 / 20 / 40 by then: the last 40 reach the receiver at 106 ms and its ACK proxy 2 at 111 ms.
    let fct = completed_at(&chain).unwrap().as_nanos();
    assert!((111_000_000..111_300_000).contains(&fct), "{fct}");
    // End to end without proxies: three rounds of the 52 ms RTT, 156 ms.
    let mut sim = static_chain();
    let (src, sink) = tcp_ends(Some(bytes), 3);
    let s = sim.attach_flow(NodeId(0), 0, Box::new(src));
    sim.attach_flow(NodeId(3), 0, Box::new(sink));
    sim.run(Instant(2_000_000_000));
    let fct = get::<TcpSource>(&sim, s).completed_at.unwrap().as_nanos();
    assert!((156_000_000..156_300_000).contains(&fct), "{fct}");
}

/// Source 0 reaches satellites A = 1 and B = 2 directly (2 ms, 100 Mbit/s); A - C = 3 - B are ISLs
/// of 3 and 4 ms; the dish 4 hangs off A (20 Mbit/s, 2 ms) until `t_h`, then off B.
fn handover_topology(t_h: Instant) -> Sim {
    let mut sim = Sim::new(5, 1);
    let fast = Bps::mbps(100);
    let (s_a, a_s) = link_pair(&mut sim, 0, 1, fast, 2);
    let (s_b, b_s) = link_pair(&mut sim, 0, 2, fast, 2);
    let (a_c, c_a) = link_pair(&mut sim, 1, 3, fast, 3);
    let (c_b, b_c) = link_pair(&mut sim, 3, 2, fast, 4);
    let (a_d, d_a) = link_pair(&mut sim, 1, 4, Bps::mbps(20), 2);
    let (b_d, d_b) = link_pair(&mut sim, 2, 4, Bps::mbps(20), 2);
    for l in [b_d, d_b] {
        sim.link_mut(l).up = false;
    }
    let r = |at: u32, dst: u32, via: LinkId| Control::Route { at: NodeId(at), dst: NodeId(dst), via: Some(via) };
    let fixed = [
        r(3, 1, c_a),
        r(0, 1, s_a),
        r(0, 2, s_b),
        r(1, 0, a_s),
        r(2, 0, b_s),
        r(1, 2, a_c),
        r(3, 2, c_b),
        r(2, 1, b_c),
    ];
    let before = [r(0, 4, s_a), r(1, 4, a_d), r(4, 0, d_a), r(4, 1, d_a), r(4, 2, d_a)];
    let after = [r(0, 4, s_b), r(2, 4, b_d), r(4, 0, d_b), r(4, 1, d_b), r(4, 2, d_b), r(3, 0, c_b)];
    sim.schedule_controls(Instant::ZERO, fixed.iter().chain(&before).copied().collect());
    let mut at_h: Vec<Control> = after.to_vec();
    at_h.extend([a_d, d_a].map(|link| Control::State { link, up: false }));
    at_h.extend([b_d, d_b].map(|link| Control::State { link, up: true }));
    sim.schedule_controls(t_h, at_h);
    sim
}

fn migrating_flow(bytes: Option<u64>, buffer: u64, t_h: Instant) -> (Sim, AgentId, SharedChain) {
    let hops = [
        (HopRole::Source, NodeId(0)),
        (HopRole::SatelliteProxy { ground: 4 }, NodeId(1)),
        (HopRole::Receiver, NodeId(4)),
    ];
    let mut sim = handover_topology(t_h);
    let mut chain = chain_of(&hops, bytes, buffer);
    let prop = Duration::from_millis(7);
    chain.set_migrations(vec![Migration {
        t: t_h,
        hop: 1,
        from: NodeId(1),
        to: NodeId(2),
        propagation: prop,
        isl_rate: Bps::mbps(100),
    }]);
    let (mut src, sink) = tcp_ends(bytes, 1);
    // Start the flow once the routes exist.
    src.start_at = Instant(1);
    let (_, d, chain) = install_chain(&mut sim, chain, src, sink);
    (sim, d, chain)
}

#[test]
fn a_migration_takes_route_propagation_plus_state_over_the_isl_rate_and_restarts_slow_start() {
    // The downlink (20 Mbit/s) is the bottleneck: the proxy's 200 kB buffer is full at the handover.
    let t_h = Instant(1_000_000_000);
    let bytes = 6_000_000;
    let (mut sim, d, chain) = migrating_flow(Some(bytes), 200_000, t_h);
    sim.run(Instant(20_000_000_000));
    let c = lock(&chain);
    let rec = c.records()[0];
    assert_eq!((rec.from, rec.to, rec.t), (1, 2, t_h));
    assert!(rec.state_bytes > 150_000 + DEFAULT_STATE_OVERHEAD, "{}", rec.state_bytes);
    // 7 ms over A - C - B, then the state at 100 Mbit/s.
    let expect = Duration::from_millis(7) + Bps::mbps(100).transmission_time(Bytes(rec.state_bytes)).unwrap();
    assert_eq!(rec.delay, expect);
    assert!(rec.delay > Duration::from_millis(19), "{:?}", rec.delay);
    // The proxy's downstream connection grew past the initial window and restarted from it.
    assert!(rec.cwnd_before > 10 * MSS, "{}", rec.cwnd_before);
    assert_eq!(rec.cwnd_after, 10 * MSS);
    assert_eq!(c.node(1), NodeId(2), "the proxy runs on the new satellite");
    assert_eq!(c.restarts, 2, "both connections of the proxy are rebuilt");
    drop(c);
    // Every byte arrived once, in order, the last ones through the new satellite.
    let sink = &get::<MpepSink>(&sim, d).sink;
    assert_eq!((sink.tcp.delivered, sink.tcp.rcv_nxt()), (bytes, bytes));
    assert!(completed_at(&chain).is_some());
    let (stats, _) = totals(&sim, &[(Arc::clone(&chain), AgentId(0))]);
    assert_eq!((stats.migrations, stats.slow_start_restarts, stats.proxies), (1, 2, 1));
    assert_eq!(stats.migration_delay_max_ns, expect.as_nanos());
}

#[test]
fn an_idle_proxy_ships_only_its_connection_state() {
    // 100 kB finish long before the handover at 2 s: the proxy holds nothing.
    let t_h = Instant(2_000_000_000);
    let (mut sim, d, chain) = migrating_flow(Some(100_000), 200_000, t_h);
    sim.run(Instant(3_000_000_000));
    let rec = lock(&chain).records()[0];
    assert_eq!(rec.state_bytes, DEFAULT_STATE_OVERHEAD);
    // 7 ms + 4096 B x 8 / 100 Mbit/s = 7 ms + 327.68 us.
    assert_eq!(rec.delay, Duration(7_327_680));
    assert_eq!(get::<MpepSink>(&sim, d).sink.tcp.delivered, 100_000);
}

#[test]
fn options_are_checked() {
    let ok = MpepOptions::default();
    assert_eq!(ok.validate(), Ok(()));
    let small = MpepOptions { buffer_bytes: Some(1000), ..ok };
    assert!(small.validate().unwrap_err().to_string().contains("mpep.buffer_bytes"));
    let big = MpepOptions { state_overhead_bytes: 1 << 40, ..ok };
    assert!(big.validate().unwrap_err().to_string().contains("mpep.state_overhead_bytes"));
}

/// The satguard-nyc-lon constellation (scenarios/satguard-nyc-lon.toml) for `secs` seconds: a
/// CUBIC bulk flow and a fixed transfer from the server behind London to the New York terminal.
fn nyc_lon(secs: u64, policy: leoguard_orbit::Policy, mpep: Option<MpepOptions>) -> crate::scenario::Scenario {
    use crate::constellation::HostSpec;
    use crate::loss::LossSpec;
    use crate::scenario::{FlowKind, FlowSpec, Scenario};
    use leoguard_orbit::{Constellation, GroundNode, InterruptionModel, TimelineOptions};
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
            policy,
            interruption: InterruptionModel::Uniform(0.03, 0.2),
            seed: 1,
        },
        gsl_rate: Bps::mbps(1000),
        gsl_down_rate: None,
        gsl_pass: None,
        isl_rate: Bps::mbps(1000),
        queue: QueueLimit::Bytes(4_000_000),
        gsl_loss: LossSpec::Starlink { boundary_offset_s: 7, outages: vec![] },
        isl_loss: LossSpec::None,
        access: Vec::new(),
    };
    let tcp = |bytes, start| FlowSpec {
        src: 2,
        dst: 0,
        kind: FlowKind::Tcp { cc: "cubic".into(), bytes, rate: None },
        start: Instant(start),
        tc: 0,
    };
    Scenario {
        nodes: topo.node_count() as u32,
        flows: vec![tcp(None, 0), tcp(Some(40_000_000), 11_500_000_000)],
        duration: Duration::from_secs(secs),
        seed: 1,
        sample_every: Duration::from_millis(100),
        constellation: Some(topo),
        mpep,
        ..Default::default()
    }
}

#[test]
fn proxy_satellites_routed_when_a_packet_needs_them_give_the_run_routed_at_every_step() {
    use crate::sim::EAGER_ROUTES;
    let mut s = nyc_lon(
        14,
        leoguard_orbit::Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S),
        Some(MpepOptions::default()),
    );
    // A paced 100 Mbit/s flow across London's migration at 12 s (a light run).
    s.flows[0].kind = crate::scenario::FlowKind::Tcp { cc: "cubic".into(), bytes: None, rate: Some(Bps::mbps(100)) };
    s.flows.truncate(1);
    let with = |eager: bool| {
        EAGER_ROUTES.set((eager, 0));
        let r = crate::scenario::run(&s).unwrap();
        (r, EAGER_ROUTES.get().1)
    };
    let (every, refreshed_eager) = with(true);
    let (lazy, refreshed) = with(false);
    EAGER_ROUTES.set((false, 0));
    assert_eq!(refreshed_eager, 0);
    assert!(refreshed > 100, "{refreshed} lazy refreshes: the run does not exercise them");
    let (a, b) = (every.mpep.unwrap(), lazy.mpep.unwrap());
    assert!(a.migrations >= 1 && a.stale_packets > 0, "{a:?}");
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_eq!(format!("{:?}", every.mpep_migrations), format!("{:?}", lazy.mpep_migrations));
    crate::scenario::assert_same_run(&every, &lazy);
}

#[test]
fn nyc_lon_flows_survive_several_migrations_with_every_byte_once_in_order() {
    let s = nyc_lon(
        30,
        leoguard_orbit::Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S),
        Some(MpepOptions::default()),
    );
    let mut run = crate::scenario::Running::new(&s).unwrap();
    run.advance(run.end());
    let r = run.collect();
    let st = r.mpep.unwrap();
    // London's ingress satellite changes at 12 and 27 s (the 15 s global schedule): both flows'
    // proxies there migrate twice, each rebuilding its two connections in slow start.
    assert_eq!((st.migrations, st.slow_start_restarts, st.proxies), (4, 8, 6));
    for m in &r.mpep_migrations {
        assert_eq!(m.cwnd_after, 10 * MSS);
        // At least the state's serialisation at 1 Gbit/s, plus ISL propagation.
        assert!(m.delay.as_nanos() > m.state_bytes * 8, "{m:?}");
    }
    // The fixed transfer (11.5 s on, across the 12 s migration) arrives whole.
    assert_eq!(r.flows[1].delivered_bytes, 40_000_000);
    let first = r.mpep_migrations.iter().map(|m| m.t).min().unwrap();
    assert!(first > Instant(11_500_000_000) && first < Instant(12_500_000_000), "{first:?}");
    let done = 11.5 + r.flows[1].fct_s.unwrap();
    assert!(done > first.as_secs_f64(), "finished at {done} s, before the migration at {first:?}");
    // The bulk flow's receiver saw a gap-free byte stream up to what it delivered.
    let mut seqs: Vec<u64> = r.packets.iter().filter(|p| p.flow == 0).map(|p| p.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let delivered = r.flows[0].delivered_bytes;
    assert!(delivered > 500_000_000, "{delivered}");
    assert_eq!(seqs[0], 0);
    let covered = seqs.windows(2).take_while(|w| w[1] - w[0] <= MSS).count();
    assert!(seqs[covered] + MSS >= delivered, "a hole below the delivered point");
}

#[test]
fn chains_follow_the_documented_layout() {
    use crate::constellation::HostSpec;
    use leoguard_orbit::GroundNode;
    let mut topo = nyc_lon(2, leoguard_orbit::Policy::Nearest, None).constellation.unwrap();
    // Grounds: 0 New York (terminal), 1 London (gateway), 2 Paris (terminal); hosts: 3 server-lon
    // behind London, 4 a laptop behind the New York dish.
    topo.grounds.push(GroundNode::new("Paris", 48.86, 2.35, 0.0, Role::Terminal).unwrap());
    topo.hosts.push(HostSpec { name: "laptop".into(), ground: 0, rate: Bps::mbps(1000), delay: Duration::ZERO });
    let mut sim = Sim::new(topo.node_count(), 1);
    let info = topo.install_with(&mut sim, &[0, 1, 2, 3, 4], &[0, 1, 2]).unwrap();
    let sat = |g: usize| info.first_serving[g].unwrap();
    let all = MpepOptions::default();
    let roles =
        |o: &MpepOptions, s: u32, d: u32| -> Vec<(HopRole, NodeId)> { chain_hops(&topo, &info, o, s, d).unwrap() };
    use HopRole::*;
    // server-lon -> New York: London GS proxy, London's and New York's ingress satellites.
    assert_eq!(
        roles(&all, 3, 0),
        vec![
            (Source, NodeId(3)),
            (GroundProxy, NodeId(1)),
            (SatelliteProxy { ground: 1 }, sat(1)),
            (SatelliteProxy { ground: 0 }, sat(0)),
            (Receiver, NodeId(0)),
        ]
    );
    // Terminals' ingress satellites only.
    let terminals = MpepOptions { gateway_satellites: false, ..all };
    assert_eq!(
        roles(&terminals, 3, 0),
        vec![
            (Source, NodeId(3)),
            (GroundProxy, NodeId(1)),
            (SatelliteProxy { ground: 0 }, sat(0)),
            (Receiver, NodeId(0))
        ]
    );
    // Paris dish -> laptop behind the New York dish: both ingress satellites, then the New York dish.
    assert_eq!(
        roles(&all, 2, 4),
        vec![
            (Source, NodeId(2)),
            (SatelliteProxy { ground: 2 }, sat(2)),
            (SatelliteProxy { ground: 0 }, sat(0)),
            (GroundProxy, NodeId(0)),
            (Receiver, NodeId(4)),
        ]
    );
    // The laptop to its own dish never enters the satellite network: not split.
    assert_eq!(roles(&all, 4, 0), vec![(Source, NodeId(4)), (Receiver, NodeId(0))]);
}

#[test]
fn scenarios_refuse_mpep_with_another_scheme_bad_options_or_no_constellation() {
    let mut s = nyc_lon(2, leoguard_orbit::Policy::Nearest, Some(MpepOptions::default()));
    s.linkguardian = Some(Default::default());
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("invalid mpep") && e.contains("not with them"), "{e}");
    s.linkguardian = None;
    s.mpep = Some(MpepOptions { buffer_bytes: Some(100), ..Default::default() });
    assert!(s.validate().unwrap_err().to_string().contains("mpep.buffer_bytes"));
    let mut s = nyc_lon(2, leoguard_orbit::Policy::Nearest, Some(MpepOptions::default()));
    s.constellation = None;
    s.nodes = 2;
    s.links = vec![crate::scenario::LinkSpec {
        a: 0,
        b: 1,
        rate: Bps::mbps(10),
        delay: Duration::from_millis(1),
        queue: QueueLimit::Packets(10),
        loss_ab: crate::loss::LossSpec::None,
        loss_ba: crate::loss::LossSpec::None,
        rate_schedule: None,
    }];
    s.flows.truncate(1);
    s.flows[0].src = 1;
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("mpep needs a constellation"), "{e}");
}
