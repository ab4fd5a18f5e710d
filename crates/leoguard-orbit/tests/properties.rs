//! Property tests over random Walker shells and ground places.

use leoguard_orbit::attach::InterruptionModel;
use leoguard_orbit::geo::{great_circle_m, SPEED_OF_LIGHT_M_S};
use leoguard_orbit::routing::{Dijkstra, SnapshotGraph};
use leoguard_orbit::{
    path_timeline, Constellation, GroundNode, Phasing, Policy, Role, Shell, SlotCriterion, TimelineOptions, WalkerShell,
};
use proptest::prelude::*;

fn shell(alt: f64, inc: f64, planes: u32, spp: u32, f: u32) -> Constellation {
    let w = WalkerShell {
        name: "p".into(),
        altitude_km: alt,
        inclination_deg: inc,
        planes,
        sats_per_plane: spp,
        phasing: Phasing::Walker(f % planes),
        raan_spread_deg: 360.0,
        isls: true,
        j2: false,
    };
    Constellation::new("p", vec![Shell::Walker(w)], 1.7e9).expect("generated shells are valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The bucket queue and the binary heap give the same distances on any shell, at any time.
    #[test]
    fn bucket_queue_equals_heap(alt in 400.0f64..1500.0, inc in 30.0f64..100.0, planes in 6u32..40,
                                spp in 6u32..40, f in 0u32..40, t in 0.0f64..10_000.0, src in 0usize..10_000) {
        let c = shell(alt, inc, planes, spp, f);
        let pos = c.positions(t).unwrap();
        let mut g = SnapshotGraph::new(&c);
        g.update(&c, &pos);
        let s = (src % c.len()) as u32;
        let (mut a, mut b) = (Dijkstra::default(), Dijkstra::default());
        b.force_heap = true;
        a.run(&g, &[(s, 1000.0)]);
        b.run(&g, &[(s, 1000.0)]);
        for (x, y) in a.dist.iter().zip(&b.dist) {
            prop_assert!((x.is_infinite() && y.is_infinite()) || (x - y).abs() < 1e-3);
        }
    }

    /// No path is ever faster than light along the great circle, and hop delays add up.
    #[test]
    fn paths_respect_the_light_speed_bound(lat1 in -50.0f64..50.0, lon1 in -180.0f64..180.0,
                                           lat2 in -50.0f64..50.0, lon2 in -180.0f64..180.0,
                                           policy in 0u8..3) {
        let c = shell(550.0, 53.0, 24, 22, 5);
        let a = GroundNode::new("a", lat1, lon1, 0.0, Role::Terminal).unwrap();
        let b = GroundNode::new("b", lat2, lon2, 0.0, Role::Terminal).unwrap();
        let o = TimelineOptions {
            duration_s: 20.0, step_s: 1.0, min_elevation_deg: 25.0,
            policy: match (policy, Policy::starlink(1.7e9)) {
                (0, _) => Policy::BestPath,
                (1, p) => p,
                (_, Policy::GlobalSchedule { period_s, phase_s, .. }) => {
                    Policy::GlobalSchedule { period_s, phase_s, criterion: SlotCriterion::PathAware }
                }
                (_, p) => p,
            },
            interruption: InterruptionModel::STARTCP, seed: 3,
        };
        let tl = path_timeline(&c, &a, &b, &o).unwrap();
        prop_assert_eq!(tl.steps.len(), 20);
        let bound = great_circle_m(a.pos, b.pos) / SPEED_OF_LIGHT_M_S;
        let mut outage = 0.0;
        for s in &tl.steps {
            if s.reachable() {
                prop_assert!(s.owd_s() >= bound - 1e-12);
                prop_assert_eq!(s.hop_delays_s.len(), s.sats.len() + 1);
            } else {
                outage += 1.0;
            }
        }
        let reported: f64 = tl.outages.iter().map(|(s, e)| e - s).sum();
        prop_assert!((reported - outage).abs() < 1e-9);
    }
}

/// All-pairs routing split over worker threads gives exactly the figures of one thread.
#[test]
fn all_pairs_figures_do_not_depend_on_threads() {
    let c = shell(550.0, 53.0, 24, 22, 5);
    let nodes: Vec<GroundNode> =
        [(40.7, -74.0), (51.5, -0.1), (35.7, 139.7), (-33.9, 151.2), (19.4, -99.1), (28.6, 77.2)]
            .iter()
            .enumerate()
            .map(|(i, &(lat, lon))| GroundNode::new(&format!("g{i}"), lat, lon, 0.0, Role::GroundStation).unwrap())
            .collect();
    let o = TimelineOptions {
        duration_s: 30.0,
        step_s: 1.0,
        min_elevation_deg: 25.0,
        policy: Policy::BestPath,
        interruption: InterruptionModel::STARTCP,
        seed: 1,
    };
    let one = leoguard_orbit::timeline::route_all_pairs(&c, &nodes, &o, 1).unwrap();
    assert_eq!(one.snapshots, 30);
    assert!(one.reachable > 0, "some pairs are connected");
    for threads in [2, 3, 7, 64] {
        let many = leoguard_orbit::timeline::route_all_pairs(&c, &nodes, &o, threads).unwrap();
        assert_eq!(many, one, "{threads} threads");
    }
}
