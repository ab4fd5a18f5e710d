//! Simulator tests of the constellation topology (the topology itself lives in leoguard-net).

use crate::constellation::*;
use crate::engine::{NodeId, QueueLimit};
use crate::loss::LossSpec;
use crate::sim::Sim;
use crate::sim::{CbrSource, Sink};
use leoguard_core::{Bps, Duration, Instant};
use leoguard_orbit::InterruptionModel;
use leoguard_orbit::{Constellation, GroundNode, Policy, Role, TimelineOptions};
use std::sync::Arc;

fn topo(policy: Policy, interruption: InterruptionModel) -> ConstellationTopo {
    let c = Constellation::preset("starlink-shell1").unwrap();
    let grounds = vec![
        GroundNode::new("New York", 40.71, -74.01, 0.0, Role::Terminal).unwrap(),
        GroundNode::new("London", 51.51, -0.13, 0.0, Role::Terminal).unwrap(),
        GroundNode::new("Paris", 48.86, 2.35, 0.0, Role::Terminal).unwrap(),
    ];
    ConstellationTopo {
        constellation: Arc::new(c),
        grounds,
        hosts: vec![HostSpec {
            name: "server".into(),
            ground: 1,
            rate: Bps::mbps(1000),
            delay: Duration::from_millis(2),
        }],
        options: TimelineOptions {
            duration_s: 20.0,
            step_s: 0.1,
            min_elevation_deg: 25.0,
            policy,
            interruption,
            seed: 1,
        },
        gsl_rate: Bps::mbps(100),
        gsl_down_rate: None,
        gsl_pass: None,
        isl_rate: Bps::mbps(100),
        queue: QueueLimit::Packets(1000),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::None,
        access: Vec::new(),
    }
}

fn cbr(flow: u32, dst: u32, start: Instant) -> Box<CbrSource> {
    Box::new(CbrSource {
        flow,
        dst: NodeId(dst),
        size: 200,
        interval: Duration::from_millis(1),
        count: 20_000,
        sent: 0,
        start,
        tc: 0,
    })
}

#[test]
fn flows_between_several_places_follow_the_orbits() {
    let t = topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::None);
    let mut sim = Sim::new(t.node_count(), 1);
    // New York -> London and Paris -> the server behind London, sharing London's ground node.
    let handovers = t.install(&mut sim, &[0, 1, 2, 3]).unwrap().handover_count;
    assert!(handovers > 0, "20 s crosses a 15 s epoch");
    sim.attach_flow(NodeId(0), 0, cbr(0, 1, Instant::ZERO));
    let a = sim.attach_flow(NodeId(1), 0, Box::<Sink>::default());
    sim.attach_flow(NodeId(2), 1, cbr(1, 3, Instant::ZERO));
    let b = sim.attach_flow(NodeId(3), 1, Box::<Sink>::default());
    sim.run(Instant(20_000_000_000));
    let sink = |id| sim.agent_by_id(id).and_then(|x| x.as_any().downcast_ref::<Sink>()).unwrap();
    let (ny, pa) = (sink(a), sink(b));
    // Without interruptions and with no congestion almost everything arrives (a handover loses
    // what the old ground link still held).
    assert!(ny.received.len() > 19_000, "{}", ny.received.len());
    assert!(pa.received.len() > 19_000, "{}", pa.received.len());
    // New York - London is 5570 km: over LEO one-way delay is above 18.6 ms, and a sane path is
    // well under 100 ms. Paris -> server adds the 2 ms terrestrial hop.
    for r in &ny.received {
        let owd = (r.2 - r.1).as_secs_f64();
        assert!((0.0186..0.1).contains(&owd), "{owd}");
        assert!(r.3 >= 3, "up, at least one ISL, down");
    }
    for r in &pa.received {
        let owd = (r.2 - r.1).as_secs_f64();
        assert!((0.0023..0.05).contains(&owd), "{owd}");
    }
    // The delay follows the orbits: it changes over the run.
    let owds: Vec<u64> = ny.received.iter().map(|r| (r.2 - r.1).as_nanos()).collect();
    assert!(owds.iter().max().unwrap() - owds.iter().min().unwrap() > 100_000);
}

#[test]
fn handover_interruptions_drop_packets_and_best_path_is_refused() {
    let t = topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::Fixed(0.2));
    let mut sim = Sim::new(t.node_count(), 1);
    t.install(&mut sim, &[0, 1]).unwrap();
    sim.attach_flow(NodeId(0), 0, cbr(0, 1, Instant::ZERO));
    let a = sim.attach_flow(NodeId(1), 0, Box::<Sink>::default());
    sim.run(Instant(20_000_000_000));
    let got = sim.agent_by_id(a).and_then(|x| x.as_any().downcast_ref::<Sink>()).unwrap().received.len();
    // Both ends hand over at the 12 s epoch, 200 ms each (they may overlap): 200-400 packets lost.
    let lost = 20_000 - got;
    assert!((190..=420).contains(&lost), "{lost}");
    assert!(sim.drops.iter().any(|d| d.reason == Some(crate::engine::DropReason::Down)));
    let bad = topo(Policy::BestPath, InterruptionModel::None);
    assert!(bad.validate().unwrap_err().to_string().contains("topology.policy"));
}

#[test]
fn gsl_capacity_follows_the_pass_parabola_on_the_packets() {
    // London's uplink (10 Mbit/s nominal, the only bottleneck) saturated by a 20 Mbit/s CBR flow to
    // New York: each second of a whole pass delivers what the pass profile gives for that second.
    let mut t = topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::None);
    t.options.duration_s = 40.0;
    t.options.step_s = 0.5;
    t.gsl_rate = Bps::mbps(10);
    t.gsl_down_rate = Some(Bps::mbps(100));
    let pass = GslPass { edge_fraction: 0.5, alternate: Bps(500_000), step: Duration::from_secs(1) };
    t.gsl_pass = Some(pass);
    let mut sim = Sim::new(t.node_count(), 1);
    let info = t.install(&mut sim, &[0, 1]).unwrap();
    let lon: Vec<f64> =
        info.handovers.iter().filter(|h| h.ground == NodeId(1)).map(|h| h.t.as_nanos() as f64 / 1e9).collect();
    assert!(lon.len() >= 2, "40 s holds a whole pass of London's: {lon:?}");
    let (start, end) = (lon[0], lon[1]);
    sim.attach_flow(
        NodeId(1),
        0,
        Box::new(CbrSource {
            flow: 0,
            dst: NodeId(0),
            size: 1250,
            interval: Duration::from_micros(500),
            count: 80_000,
            sent: 0,
            start: Instant::ZERO,
            tc: 0,
        }),
    );
    let a = sim.attach_flow(NodeId(0), 0, Box::<Sink>::default());
    sim.run(Instant(40_000_000_000));
    let sink = sim.agent_by_id(a).and_then(|x| x.as_any().downcast_ref::<Sink>()).unwrap();
    let mut per_s = [0u64; 40];
    for r in &sink.received {
        per_s[(r.2.as_nanos() / 1_000_000_000) as usize] += 1250 * 8;
    }
    // Whole seconds inside the pass, away from its ends (the queue drains across a handover).
    let mut checked = 0;
    for k in (start.ceil() as u64 + 1)..(end.floor() as u64 - 1) {
        let want = pass.rate(t.gsl_rate, k, start, end).0 as f64;
        let got = per_s[k as usize] as f64;
        assert!((got - want).abs() < 0.02 * want, "second {k}: {got} bit/s delivered, the profile gives {want}");
        checked += 1;
    }
    assert!(checked >= 10, "{checked} seconds checked");
    // Its shape: about half the rate next to the handovers, the full rate mid-pass.
    let edge = pass.rate(t.gsl_rate, start.ceil() as u64, start, end).0 as f64;
    let mid = pass.rate(t.gsl_rate, ((start + end) / 2.0) as u64, start, end).0 as f64;
    assert!(edge < 6.5e6 && mid > 9.4e6, "edge {edge}, mid {mid}");
}

#[test]
fn a_bad_gsl_pass_is_refused_naming_the_field() {
    let base = || {
        let mut t =
            topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::None);
        t.gsl_pass = Some(GslPass { edge_fraction: 0.5, alternate: Bps::mbps(1), step: Duration::from_secs(1) });
        t
    };
    let err = |t: ConstellationTopo| t.validate().unwrap_err().to_string();
    let mut t = base();
    t.gsl_pass.as_mut().unwrap().edge_fraction = 0.0;
    assert!(err(t).contains("topology.gsl_pass.edge_fraction"));
    let mut t = base();
    t.gsl_pass.as_mut().unwrap().step = Duration::ZERO;
    assert!(err(t).contains("topology.gsl_pass.step_s"));
    let mut t = base();
    t.gsl_pass.as_mut().unwrap().alternate = Bps::mbps(50);
    assert!(err(t).contains("topology.gsl_pass.alternate_bps"));
    let mut t = base();
    t.gsl_down_rate = Some(Bps(0));
    assert!(err(t).contains("topology.gsl_downlink_rate_bps"));
    assert!(base().validate().is_ok());
}

#[test]
fn a_pair_attached_by_best_path_takes_the_path_timelines_satellites() {
    // Two places, each attached jointly with its peer (best-path): the routes follow the path
    // timeline's path, so each packet's delay is that path's propagation delay, and below what
    // attaching each end to its own highest satellite gives (which may cross the +Grid far around).
    let run = |policy: Policy| {
        let mut t = topo(policy, InterruptionModel::None);
        t.grounds = vec![
            GroundNode::new("Beijing", 39.90, 116.40, 0.0, Role::Terminal).unwrap(),
            GroundNode::new("Hong Kong", 22.32, 114.17, 0.0, Role::Terminal).unwrap(),
        ];
        t.hosts.clear();
        t.options.step_s = 1.0;
        let mut sim = Sim::new(t.node_count(), 1);
        t.install(&mut sim, &[0, 1]).unwrap();
        sim.attach_flow(NodeId(0), 0, cbr(0, 1, Instant::ZERO));
        let a = sim.attach_flow(NodeId(1), 0, Box::<Sink>::default());
        sim.run(Instant(20_000_000_000));
        let sink = sim.agent_by_id(a).and_then(|x| x.as_any().downcast_ref::<Sink>()).unwrap();
        let owd: Vec<f64> = sink.received.iter().map(|r| (r.2 - r.1).as_secs_f64()).collect();
        (t, owd)
    };
    let (t, best) = run(Policy::BestPath);
    let (_, own) = run(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S));
    assert!(best.len() > 19_000, "{}", best.len());
    let tl =
        leoguard_orbit::timeline::path_timeline(&t.constellation, &t.grounds[0], &t.grounds[1], &t.options).unwrap();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let want = mean(&tl.steps.iter().map(|s| s.owd_s()).collect::<Vec<_>>());
    // 200-byte packets at 100 Mbit/s: 16 us per hop of serialisation on top of propagation.
    assert!((mean(&best) - want).abs() < 0.5e-3, "best-path {} s, its timeline {want} s", mean(&best));
    assert!(mean(&best) < mean(&own), "best-path {} s, own highest satellite {} s", mean(&best), mean(&own));
    // Three places cannot be attached jointly.
    let mut three = topo(Policy::BestPath, InterruptionModel::None);
    three.options.step_s = 1.0;
    assert!(three.validate().unwrap_err().to_string().contains("exactly 2 ground places"));
}

/// Every up ISL carries the light delay of its satellites' current distance after each routing step,
/// though the driver emits an ISL's delay only when it changed (to the nanosecond) since the last.
#[test]
fn isl_delays_follow_the_orbits_though_unchanged_ones_are_not_re_emitted() {
    let t = topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::None);
    let c = Arc::clone(&t.constellation);
    let mut sim = Sim::new(t.node_count(), 1);
    let first = t.install(&mut sim, &[0, 1]).unwrap().first_sat;
    for k in [1u64, 2, 37, 38, 120] {
        // Steps are 100 ms; run past step k's routing update, before step k + 1's.
        sim.run(Instant(k * 100_000_000 + 50_000_000));
        let pos = c.positions(k as f64 * 0.1).unwrap();
        let mut isls = 0;
        for l in &sim.net.links {
            let (a, b) = (l.from.0, l.to.0);
            if a < first || b < first || !l.up {
                continue;
            }
            let d = leoguard_orbit::geo::distance(pos[(a - first) as usize], pos[(b - first) as usize]);
            let want = Duration::from_secs_f64(leoguard_orbit::geo::light_delay_s(d));
            assert_eq!(l.delay_at(Instant(k * 100_000_000)), want, "step {k}, ISL {a} -> {b}");
            isls += 1;
        }
        assert!(isls > 3000, "step {k}: {isls} ISLs up");
    }
}

/// After each routing step, every satellite's next hops towards each flow end follow a shortest
/// path (by this step's ISL lengths) to the satellite serving that end, then down to it, though the
/// driver looks up again only the next hops whose predecessor in the routing tree changed.
#[test]
fn every_satellite_routes_along_a_shortest_path_though_unchanged_hops_are_not_looked_up() {
    use leoguard_orbit::routing::{Dijkstra, SnapshotGraph};
    let t = topo(Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S), InterruptionModel::None);
    let c = Arc::clone(&t.constellation);
    let host = t.grounds.len() as u32;
    let mut sim = Sim::new(t.node_count(), 1);
    let first = t.install(&mut sim, &[0, host]).unwrap().first_sat;
    let n_sats = c.len() as u32;
    let mut graph = SnapshotGraph::new(&c);
    let mut dj = Dijkstra::default();
    // Steps across two of the 15 s global handovers (at 150 for the 15 s mark) and ordinary ones.
    for k in [1u64, 2, 37, 38, 149, 150, 151, 152, 199] {
        sim.run(Instant(k * 100_000_000 + 50_000_000));
        graph.update(&c, &c.positions(k as f64 * 0.1).unwrap());
        for (dst, ground) in [(0u32, 0u32), (host, 1)] {
            // The root: the satellite whose next hop goes down to the end's ground node.
            let down = |v: u32| sim.next_hop(NodeId(first + v), NodeId(dst)).map(|l| sim.net.links[l.0 as usize].to.0);
            let roots: Vec<u32> = (0..n_sats).filter(|&v| down(v) == Some(ground)).collect();
            assert_eq!(roots.len(), 1, "step {k}, towards {dst}: roots {roots:?}");
            dj.run(&graph, &[(roots[0], 0.0)]);
            for v in 0..n_sats {
                let (mut at, mut len, mut hops) = (v, 0.0, 0);
                while at != roots[0] {
                    let l = sim.next_hop(NodeId(first + at), NodeId(dst)).expect("a route");
                    let next = sim.net.links[l.0 as usize].to.0 - first;
                    let &(_, isl) = graph.neighbours(at).iter().find(|e| e.0 == next).expect("an ISL of the graph");
                    (at, len, hops) = (next, len + graph.isl_len[isl as usize], hops + 1);
                    assert!(hops <= n_sats, "step {k}: a loop from satellite {v} towards {dst}");
                }
                let want = dj.dist[v as usize];
                assert!(
                    (len - want).abs() <= 1e-6 * want.max(1.0),
                    "step {k}, satellite {v} towards {dst}: {len} m, shortest {want} m"
                );
            }
        }
    }
}
