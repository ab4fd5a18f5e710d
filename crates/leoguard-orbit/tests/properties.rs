//! Property tests over random Walker shells and ground places.

use leoguard_orbit::attach::InterruptionModel;
use leoguard_orbit::geo::{great_circle_m, SPEED_OF_LIGHT_M_S};
use leoguard_orbit::routing::{Dijkstra, ExitIndex, SnapshotGraph};
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

/// Reference all-pairs figures: one search per ground node run over the whole graph (no early stop),
/// every other node's best exit read from it, each unordered pair counted once.
fn all_pairs_reference(
    c: &Constellation,
    nodes: &[GroundNode],
    o: &TimelineOptions,
    max_alt_m: f64,
) -> (usize, u64, f64) {
    use leoguard_orbit::ground::VisibilityFilter;
    let filter = VisibilityFilter::new(o.min_elevation_deg, max_alt_m).expect("a valid elevation");
    let mut g = SnapshotGraph::new(c);
    let mut dj = Dijkstra::default();
    let (mut reachable, mut hops, mut owd) = (0usize, 0u64, 0.0f64);
    let steps = (o.duration_s / o.step_s).round() as usize;
    for k in 0..steps {
        let pos = c.positions(k as f64 * o.step_s).expect("walker positions never fail");
        g.update(c, &pos);
        let vis: Vec<Vec<(u32, f64)>> = nodes
            .iter()
            .map(|n| {
                let mut v = Vec::new();
                filter.visible_into(n.ecef(), &pos, &mut v);
                v
            })
            .collect();
        for a in 0..nodes.len() {
            dj.run(&g, &vis[a]);
            for vb in &vis[a + 1..] {
                if let Some((exit, total)) = dj.best_exit(vb) {
                    let mut p = Vec::new();
                    dj.path_into(exit, &mut p);
                    reachable += 1;
                    hops += p.len() as u64 + 1; // up, the ISLs, down
                    owd += total / SPEED_OF_LIGHT_M_S;
                }
            }
        }
    }
    (reachable, hops, owd)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A search that stops once its destinations' exits are certain finds each destination's best
    /// exit and total exactly as a full search does, whatever the final hops: destinations whose
    /// nearest satellite has a long final hop and whose best exit lies hops further on included.
    /// With `tight`, each destination's final hops are set so that all its exits' totals lie within
    /// 200 km of each other (the full search's distances known), so that the search stops close to
    /// the bound of its rule. (It catches a rule that stops half a final hop early; not one that stops
    /// 5 % or 10 km early, whose errors the tentative distances of the frontier mostly hide.)
    #[test]
    fn exit_search_equals_full_search(
        alt in 400.0f64..1300.0, inc in 40.0f64..100.0, planes in 10u32..40, spp in 10u32..40, f in 0u32..40,
        t in 0.0f64..10_000.0, src in proptest::collection::vec((0usize..100_000, 0.0f64..2e6), 1..4),
        dests in proptest::collection::vec(proptest::collection::vec((0usize..100_000, 0.0f64..2e7), 0..8), 1..6),
        after_pick in 0usize..100, heap in proptest::bool::ANY, tight in proptest::bool::ANY,
    ) {
        let c = shell(alt, inc, planes, spp, f);
        let pos = c.positions(t).unwrap();
        let mut g = SnapshotGraph::new(&c);
        g.update(&c, &pos);
        let n = c.len();
        let sources: Vec<(u32, f64)> = src.iter().map(|&(s, d)| ((s % n) as u32, d)).collect();
        let mut full = Dijkstra::default();
        full.force_heap = heap;
        full.run(&g, &sources);
        let mut vis: Vec<Vec<(u32, f64)>> =
            dests.iter().map(|v| v.iter().map(|&(s, h)| ((s % n) as u32, h)).collect()).collect();
        if tight {
            for v in &mut vis {
                let top = v.iter().map(|&(s, _)| full.dist[s as usize]).filter(|d| d.is_finite()).fold(0.0, f64::max);
                for (s, h) in v.iter_mut() {
                    *h = (top - full.dist[*s as usize]).max(0.0) + *h * 1e-2; // the drawn hop / 100: 0-200 km
                }
            }
        }
        let after = (after_pick % vis.len()) as u32;
        let mut ex = ExitIndex::default();
        ex.rebuild(n, &vis);
        let mut early = Dijkstra::default();
        early.force_heap = heap;
        early.run_exits(&g, &sources, &ex, after);
        for (j, v) in vis.iter().enumerate().skip(after as usize + 1) {
            let (want, got) = (full.best_exit(v), early.best_exit(v));
            prop_assert_eq!(want.map(|x| x.1), got.map(|x| x.1), "destination {}", j);
            if let (Some((w, _)), Some((e, _))) = (want, got) {
                let (mut pw, mut pe) = (Vec::new(), Vec::new());
                full.path_into(w, &mut pw);
                early.path_into(e, &mut pe);
                prop_assert_eq!(pw.len(), pe.len(), "destination {} hops", j);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// All-pairs routing, whose searches stop once the destinations' exits are certain, gives the
    /// figures of full searches on any shell and any ground nodes.
    #[test]
    fn all_pairs_stop_early_without_changing_routes(
        alt in 500.0f64..1300.0, inc in 40.0f64..100.0, planes in 20u32..40, spp in 20u32..40, f in 0u32..40,
        places in proptest::collection::vec((-60.0f64..60.0, -180.0f64..180.0), 2..12),
    ) {
        let c = shell(alt, inc, planes, spp, f);
        let nodes: Vec<GroundNode> = places
            .iter()
            .enumerate()
            .map(|(i, &(lat, lon))| GroundNode::new(&format!("g{i}"), lat, lon, 0.0, Role::GroundStation).unwrap())
            .collect();
        let o = TimelineOptions {
            duration_s: 300.0, step_s: 60.0, min_elevation_deg: 10.0, policy: Policy::BestPath,
            interruption: InterruptionModel::STARTCP, seed: 1,
        };
        let got = leoguard_orbit::timeline::route_all_pairs(&c, &nodes, &o, 1).unwrap();
        let (reachable, hops, owd) = all_pairs_reference(&c, &nodes, &o, alt * 1000.0);
        prop_assert_eq!(got.reachable, reachable);
        prop_assert_eq!(got.hop_sum, hops);
        prop_assert!((got.owd_sum_s - owd).abs() <= 1e-9 * owd.max(1.0), "{} vs {}", got.owd_sum_s, owd);
    }
}
