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
        isl_rate: Bps::mbps(100),
        queue: QueueLimit::Packets(1000),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::None,
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
