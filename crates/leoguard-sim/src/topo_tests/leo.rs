//! Simulator tests of the leo topology (the topology itself lives in leoguard-net).

use crate::engine::QueueLimit;
use crate::leo::*;
use crate::loss::LossSpec;
use crate::scenario::{run, FlowKind, FlowSpec, Scenario};
use crate::sim::Sim;
use crate::sim::{CbrSource, Sink};
use leoguard_core::{Bps, Duration, Instant};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

#[test]
fn delays_routes_outages_and_interruptions_follow_the_timeline() {
    // 0-2 s via satellite 10 (5 ms + 5 ms), 2-3 s via 20 -> 21 (6 + 4 + 6 ms), 3-4 s no path, then 10 again.
    let path = LeoPath {
        steps: vec![
            LeoStep { t: Instant(0), sats: vec![10], hop_delays: vec![ms(5), ms(5)], gsl_rate_a: None },
            LeoStep {
                t: Instant(2_000_000_000),
                sats: vec![20, 21],
                hop_delays: vec![ms(6), ms(4), ms(6)],
                gsl_rate_a: None,
            },
            LeoStep { t: Instant(3_000_000_000), sats: vec![], hop_delays: vec![], gsl_rate_a: None },
            LeoStep { t: Instant(4_000_000_000), sats: vec![10], hop_delays: vec![ms(5), ms(5)], gsl_rate_a: None },
        ],
        interruptions: vec![LeoInterruption { t: Instant(2_000_000_000), end: 0, duration: ms(100) }],
        rate: Bps::mbps(100),
        queue: QueueLimit::Packets(100),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::None,
    };
    assert_eq!(path.node_count(), 5);
    let mut sim = Sim::new(path.node_count(), 1);
    path.install(&mut sim).unwrap();
    let interval = Duration::from_millis(1);
    sim.attach(
        END_A,
        Box::new(CbrSource {
            flow: 0,
            dst: END_B,
            size: 125,
            interval,
            count: 5000,
            sent: 0,
            start: Instant::ZERO,
            tc: 0,
        }),
    );
    sim.attach(END_B, Box::<Sink>::default());
    sim.run(Instant(6_000_000_000));
    let sink: &Sink = sim.agent(END_B).and_then(|a| a.as_any().downcast_ref()).unwrap();
    let owd = |seq: u64| sink.received.iter().find(|r| r.0 == seq).map(|r| (r.2 - r.1).as_nanos());
    // 125 B at 100 Mbit/s = 10 us per hop.
    assert_eq!(owd(500), Some(10_000_000 + 2 * 10_000));
    assert_eq!(owd(2500), Some(16_000_000 + 3 * 10_000));
    // The uplink to satellite 20 is down for 100 ms at t = 2 s; after that the new path carries.
    assert_eq!(owd(2050), None);
    assert!(owd(2150).is_some());
    // 3-4 s: no path; 4 s on: satellite 10 again.
    assert_eq!(owd(3500), None);
    assert_eq!(owd(4500), Some(10_000_000 + 2 * 10_000));
    let reasons: Vec<_> = sim.drops.iter().map(|d| d.reason).collect();
    assert!(reasons.contains(&None), "no-route drops during the outage");
    assert!(reasons.contains(&Some(crate::engine::DropReason::Down)), "drops on the interrupted link");
}

#[test]
fn inconsistent_steps_are_rejected() {
    let path = LeoPath {
        steps: vec![LeoStep { t: Instant(0), sats: vec![1, 2], hop_delays: vec![ms(1)], gsl_rate_a: None }],
        interruptions: vec![],
        rate: Bps::mbps(1),
        queue: QueueLimit::Packets(1),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::Bernoulli { p: 2.0 },
    };
    assert!(path.validate().unwrap_err().to_string().contains("leo.steps[0]: 2 satellites need 3 hop delays"));
}

#[test]
fn a_bulk_flow_follows_a_per_step_ground_rate_change() {
    // A -> satellite 10 -> B, 5 + 5 ms; end A's uplink is 20 Mbit/s for 10 s, then 5 Mbit/s (the
    // satellite-side hop stays at 100 Mbit/s, so A's uplink is the bottleneck either way).
    let step = |t_s: u64, up_mbps: u64| LeoStep {
        t: Instant(t_s * 1_000_000_000),
        sats: vec![10],
        hop_delays: vec![ms(5), ms(5)],
        gsl_rate_a: Some((Bps::mbps(up_mbps), Bps::mbps(100))),
    };
    let path = LeoPath {
        steps: vec![step(0, 20), step(10, 5)],
        interruptions: vec![],
        rate: Bps::mbps(100),
        queue: QueueLimit::Packets(100),
        gsl_loss: LossSpec::None,
        isl_loss: LossSpec::None,
    };
    let s = Scenario {
        nodes: path.node_count() as u32,
        flows: vec![FlowSpec {
            src: 0,
            dst: 1,
            kind: FlowKind::Tcp { cc: "cubic".into(), bytes: None, rate: None },
            start: Instant::ZERO,
            tc: 0,
        }],
        duration: Duration::from_secs(20),
        seed: 1,
        sample_every: Duration::from_millis(100),
        leo: Some(path),
        ..Default::default()
    };
    let r = run(&s).unwrap();
    let acked_at = |t_s: f64| {
        r.series.iter().filter(|x| x.flow == 0 && x.t_ns as f64 <= t_s * 1e9).map(|x| x.acked).max().unwrap_or(0)
    };
    // Goodput over the settled part of each half (the first second of each left out for slow start
    // and for draining the 20 Mbit/s queue).
    let mbps = |a: f64, b: f64| (acked_at(b) - acked_at(a)) as f64 * 8.0 / (b - a) / 1e6;
    let (first, second) = (mbps(1.0, 10.0), mbps(11.0, 20.0));
    assert!(first > 16.0 && first <= 20.0, "first half {first:.2} Mbit/s");
    assert!((second - 5.0).abs() <= 0.75, "second half {second:.2} Mbit/s, want 5 +- 15 %");
}
