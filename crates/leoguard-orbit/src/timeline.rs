//! Path timelines: for a pair of ground nodes, per routing step the node sequence, per-hop delays,
//! one-way delay and hop count, plus handovers and outage intervals (a step with no path is an
//! outage, never an error). Also the connectivity cache for a set of ground nodes, and the
//! all-pairs snapshot router used by the benchmark and the simulator.

use crate::attach::{Attacher, Handover, InterruptionModel, Policy, PositionMemo, Slot, SlotCriterion};
use crate::constellation::Constellation;
use crate::error::OrbitError;
use crate::geo::{distance, light_delay_s, Vec3};
use crate::ground::{GroundNode, VisibilityFilter};
use crate::routing::{Dijkstra, ExitIndex, SnapshotGraph};
use crate::slotplan::PathAwarePlanner;

/// The longest timeline: 10 Julian years, so that every instant it evaluates (a slot's end lies at
/// most one handover period, <= 1 day, past the run) stays within the positions' 100-year horizon.
pub const MAX_DURATION_S: f64 = 10.0 * 365.25 * 86_400.0;

/// Options shared by timeline computations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineOptions {
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// Routing step, seconds (default 0.1).
    pub step_s: f64,
    /// Minimum elevation for ground links, degrees (default 25).
    pub min_elevation_deg: f64,
    /// Attachment policy of both ends.
    pub policy: Policy,
    /// Handover interruption model.
    pub interruption: InterruptionModel,
    /// Seed for the interruption draws.
    pub seed: u64,
}

impl TimelineOptions {
    /// Validates the numbers and returns the number of steps.
    pub fn steps(&self) -> Result<usize, OrbitError> {
        if !(self.step_s.is_finite() && self.step_s > 0.0) {
            return Err(OrbitError::invalid("step_s", self.step_s, "must be finite and > 0"));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(OrbitError::invalid("duration_s", self.duration_s, "must be finite and > 0"));
        }
        if self.duration_s > MAX_DURATION_S {
            return Err(OrbitError::invalid("duration_s", self.duration_s, "must be at most 10 years (315576000 s)"));
        }
        if self.step_s > self.duration_s {
            return Err(OrbitError::invalid("step_s", self.step_s, "must not exceed duration_s"));
        }
        let n = (self.duration_s / self.step_s + 1e-9).floor();
        if n > 50_000_000.0 {
            return Err(OrbitError::invalid("step_s", self.step_s, "gives more than 50 million steps"));
        }
        crate::ground::check_min_elevation(self.min_elevation_deg)?;
        self.policy.validate()?;
        self.interruption.validate()?;
        Ok(n as usize)
    }

    /// Time of step `k`, seconds.
    pub fn t(&self, k: usize) -> f64 {
        k as f64 * self.step_s
    }
}

/// One routing step of a pair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathStep {
    /// Time, seconds after the epoch.
    pub t_s: f64,
    /// Satellites on the path, source side first (empty when unreachable).
    pub sats: Vec<u32>,
    /// Propagation delay of each hop, seconds: uplink, ISLs..., downlink (empty when unreachable).
    pub hop_delays_s: Vec<f64>,
}

impl PathStep {
    /// Whether a path existed at this step.
    pub fn reachable(&self) -> bool {
        !self.hop_delays_s.is_empty()
    }

    /// One-way propagation delay, seconds (NaN when unreachable).
    pub fn owd_s(&self) -> f64 {
        if self.reachable() {
            self.hop_delays_s.iter().sum()
        } else {
            f64::NAN
        }
    }
}

/// A pair's timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathTimeline {
    /// One entry per routing step.
    pub steps: Vec<PathStep>,
    /// Handovers of either end (node 0 = source, 1 = destination), in time order.
    pub handovers: Vec<Handover>,
    /// Intervals [start, end) with no path, seconds.
    pub outages: Vec<(f64, f64)>,
    /// Connectivity cache of both ends.
    pub slots: Vec<Slot>,
}

fn gsl(ground: Vec3, pos: &[Vec3], sat: u32) -> f64 {
    distance(ground, pos[sat as usize])
}

fn max_altitude_m(c: &Constellation) -> Result<f64, OrbitError> {
    Ok(c.shell_altitudes_m()?.into_iter().fold(0.0, f64::max))
}

/// Computes the path timeline between `a` and `b`.
pub fn path_timeline(
    c: &Constellation,
    a: &GroundNode,
    b: &GroundNode,
    o: &TimelineOptions,
) -> Result<PathTimeline, OrbitError> {
    let n = o.steps()?;
    let filter = VisibilityFilter::new(o.min_elevation_deg, max_altitude_m(c)?)?;
    let mut graph = SnapshotGraph::new(c);
    let mut dj = Dijkstra::default();
    let mut memo = PositionMemo::default();
    let mut ends =
        [Attacher::new(0, a, o.policy, o.interruption, o.seed), Attacher::new(1, b, o.policy, o.interruption, o.seed)];
    let (ga, gb) = (a.ecef(), b.ecef());
    let mut out = PathTimeline { steps: Vec::with_capacity(n), ..Default::default() };
    let mut pos = Vec::new();
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    let mut sats = Vec::new();
    let mut outage_start: Option<f64> = None;
    // Under `path-aware` a planner picks both ends' satellites at their slot choices.
    let path_aware = matches!(o.policy, Policy::GlobalSchedule { criterion: SlotCriterion::PathAware, .. });
    let mut planner = path_aware.then(|| PathAwarePlanner::new(c));
    for k in 0..n {
        let t = o.t(k);
        c.positions_into(t, &mut pos)?;
        graph.update(c, &pos);
        if let Some(p) = planner.as_mut() {
            p.plan(c, &mut memo, &filter, &mut ends, k, |j| o.t(j), &pos)?;
        }
        if o.policy == Policy::BestPath {
            filter.visible_into(ga, &pos, &mut src);
            filter.visible_into(gb, &pos, &mut dst);
        } else {
            src.clear();
            dst.clear();
            if let Some(s) = ends[0].step(c, &mut memo, &filter, t, &pos, &mut out.handovers)? {
                src.push((s, gsl(ga, &pos, s)));
            }
            if let Some(s) = ends[1].step(c, &mut memo, &filter, t, &pos, &mut out.handovers)? {
                dst.push((s, gsl(gb, &pos, s)));
            }
        }
        let best = dj.run_to(&graph, &src, &dst);
        let mut step = PathStep { t_s: t, ..Default::default() };
        if let Some((exit, _)) = best {
            dj.path_into(exit, &mut sats);
            let first = sats[0];
            let up = src.iter().find(|s| s.0 == first).map_or(f64::NAN, |s| s.1);
            step.hop_delays_s.push(light_delay_s(up));
            for w in sats.windows(2) {
                step.hop_delays_s.push(light_delay_s(distance(pos[w[0] as usize], pos[w[1] as usize])));
            }
            step.hop_delays_s.push(light_delay_s(gsl(gb, &pos, exit)));
            step.sats.clone_from(&sats);
        }
        if o.policy == Policy::BestPath {
            let (s0, s1) = (step.sats.first().copied(), step.sats.last().copied());
            ends[0].set(&filter, t, s0, &pos, &mut out.handovers);
            ends[1].set(&filter, t, s1, &pos, &mut out.handovers);
        }
        match (step.reachable(), outage_start) {
            (false, None) => outage_start = Some(t),
            (true, Some(s)) => {
                out.outages.push((s, t));
                outage_start = None;
            }
            _ => {}
        }
        out.steps.push(step);
    }
    let end = o.t(n);
    if let Some(s) = outage_start {
        out.outages.push((s, end));
    }
    for e in &mut ends {
        e.finish(end);
        out.slots.append(&mut e.slots);
    }
    out.handovers.sort_by(|x, y| x.t_s.total_cmp(&y.t_s).then(x.node.cmp(&y.node)));
    Ok(out)
}

/// The connectivity cache (serving satellite slots) and handovers of many ground nodes.
pub fn attachment_schedule(
    c: &Constellation,
    nodes: &[GroundNode],
    o: &TimelineOptions,
) -> Result<(Vec<Slot>, Vec<Handover>), OrbitError> {
    if o.policy.needs_peer() {
        return Err(o.policy.peer_error());
    }
    let n = o.steps()?;
    let filter = VisibilityFilter::new(o.min_elevation_deg, max_altitude_m(c)?)?;
    let mut memo = PositionMemo::default();
    let mut att: Vec<Attacher> =
        nodes.iter().enumerate().map(|(i, g)| Attacher::new(i as u32, g, o.policy, o.interruption, o.seed)).collect();
    let mut events = Vec::new();
    let mut pos = Vec::new();
    for k in 0..n {
        let t = o.t(k);
        c.positions_into(t, &mut pos)?;
        for a in &mut att {
            a.step(c, &mut memo, &filter, t, &pos, &mut events)?;
        }
    }
    let mut slots = Vec::new();
    for a in &mut att {
        a.finish(o.t(n));
        slots.append(&mut a.slots);
    }
    events.sort_by(|x, y| x.t_s.total_cmp(&y.t_s).then(x.node.cmp(&y.node)));
    Ok((slots, events))
}

/// Figures from an all-pairs routing run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AllPairsStats {
    /// Snapshots computed.
    pub snapshots: usize,
    /// Unordered ground-node pairs.
    pub pairs: usize,
    /// (pair, snapshot) combinations with a path.
    pub reachable: usize,
    /// Sum of one-way delays over all reachable combinations, seconds (a checksum of the routes).
    pub owd_sum_s: f64,
    /// Sum of hop counts over all reachable combinations.
    pub hop_sum: u64,
}

/// Routes between all pairs of `nodes` at every step (Hypatia's set-up: every ground node may use any
/// visible satellite, ground nodes do not relay). One multi-source Dijkstra per source node per step.
/// `threads` workers take contiguous runs of snapshots (each snapshot is independent); the figures are
/// summed per snapshot in snapshot order, so they do not depend on `threads`.
pub fn route_all_pairs(
    c: &Constellation,
    nodes: &[GroundNode],
    o: &TimelineOptions,
    threads: usize,
) -> Result<AllPairsStats, OrbitError> {
    let n = o.steps()?;
    let filter = VisibilityFilter::new(o.min_elevation_deg, max_altitude_m(c)?)?;
    let m = nodes.len();
    let threads = threads.clamp(1, n.max(1));
    let per = n.div_ceil(threads);
    let chunks: Vec<Result<Vec<SnapshotFigures>, OrbitError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let filter = &filter;
                scope.spawn(move || route_snapshots(c, nodes, o, filter, w * per..((w + 1) * per).min(n)))
            })
            .collect();
        workers.into_iter().map(|h| h.join().expect("a routing worker panicked")).collect()
    });
    let mut st = AllPairsStats { snapshots: n, pairs: m * m.saturating_sub(1) / 2, ..Default::default() };
    for chunk in chunks {
        for f in chunk? {
            st.reachable += f.reachable;
            st.owd_sum_s += f.owd_sum_s;
            st.hop_sum += f.hop_sum;
        }
    }
    Ok(st)
}

/// One snapshot's all-pairs figures.
#[derive(Clone, Copy, Debug, Default)]
struct SnapshotFigures {
    reachable: usize,
    owd_sum_s: f64,
    hop_sum: u64,
}

/// [`route_all_pairs`]' work for the snapshots `ks`.
fn route_snapshots(
    c: &Constellation,
    nodes: &[GroundNode],
    o: &TimelineOptions,
    filter: &VisibilityFilter,
    ks: std::ops::Range<usize>,
) -> Result<Vec<SnapshotFigures>, OrbitError> {
    let mut graph = SnapshotGraph::new(c);
    let mut dj = Dijkstra::default();
    let mut pos = Vec::new();
    let mut vis: Vec<Vec<(u32, f64)>> = vec![Vec::new(); nodes.len()];
    let mut exits = ExitIndex::default();
    // Sources in longitude order: each source's remaining destinations then lie on one side of it,
    // so its search can stop early (pair results do not depend on the order).
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&x, &y| nodes[x].pos.lon_deg.total_cmp(&nodes[y].pos.lon_deg));
    let m = nodes.len();
    let mut out = Vec::with_capacity(ks.len());
    for k in ks {
        let mut st = SnapshotFigures::default();
        c.positions_into(o.t(k), &mut pos)?;
        graph.update(c, &pos);
        for (i, &o) in order.iter().enumerate() {
            filter.visible_into(nodes[o].ecef(), &pos, &mut vis[i]);
        }
        // Source i serves the destinations after it; its search stops once their best exits are
        // certain (not once every satellite they see is settled).
        exits.rebuild(graph.node_count(), &vis);
        for i in (0..m.saturating_sub(1)).rev() {
            if vis[i].is_empty() {
                continue;
            }
            dj.run_exits(&graph, &vis[i], &exits, i as u32);
            for v in &vis[i + 1..] {
                if let Some((exit, total)) = dj.best_exit(v) {
                    st.reachable += 1;
                    st.owd_sum_s += light_delay_s(total);
                    let mut hops = 2u64; // up and down links
                    let mut x = exit;
                    while dj.pred[x as usize] != crate::routing::NONE {
                        hops += 1;
                        x = dj.pred[x as usize];
                    }
                    st.hop_sum += hops;
                }
            }
        }
        out.push(st);
    }
    Ok(out)
}
