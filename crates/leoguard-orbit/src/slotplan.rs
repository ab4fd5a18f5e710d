//! The `path-aware` slot criterion of the global schedule: at each slot epoch the two ends of a pair
//! choose, jointly, the satellites that give the lowest mean end-to-end delay over the slot, and hold
//! them for the whole slot like any global-schedule choice.
//!
//! Why the mean: the choice is held for 15 s and every packet of the slot pays the delay of its own
//! step, so the mean over the slot's routing steps is the delay the slot's traffic sees on average
//! (a +Grid detour is long for the whole slot, so the mean finds it as well as the max would; the max
//! would trade a lower mean for a lower worst step; on the SATGUARD pairs both gave the same p50
//! and p99, docs/constellation.md).
//! Steps with no path count first: a pair with fewer unreachable steps always wins.
//!
//! Evaluation: at every routing step of the slot (thinned to at most [`MAX_SAMPLES_PER_SLOT`], so
//! exhaustive at the default 0.1 s step and 15 s period), one shortest-path search from each of the
//! source's candidate satellites to all of the destination's, i.e. |A| searches per step for |A| x |B|
//! pairs. The whole slot is evaluated even past the end of the run, so a choice does not depend on
//! the run's length.

use crate::attach::{slot_pool, Attacher, PositionMemo, SlotChoice};
use crate::constellation::Constellation;
use crate::error::OrbitError;
use crate::geo::{distance, elevation_deg, Vec3};
use crate::ground::VisibilityFilter;
use crate::routing::{Dijkstra, SnapshotGraph};

/// Most routing steps evaluated per slot (a 15 s slot at the default 0.1 s step has 150).
pub const MAX_SAMPLES_PER_SLOT: usize = 150;

/// Chooses the `path-aware` satellites of a pair's two ends; owns its own graph and search buffers,
/// so it can look ahead over a slot without disturbing the timeline's.
#[derive(Clone, Debug)]
pub struct PathAwarePlanner {
    graph: SnapshotGraph,
    dj: Dijkstra,
    pos: Vec<Vec3>,
    pool: Vec<(u32, f64)>,
    /// Per (source candidate, destination candidate): steps with no path, and summed path metres.
    miss: Vec<u32>,
    sum: Vec<f64>,
}

/// One end in a decision: the satellites it may take, best elevation first (a choosing end), or its
/// fixed current satellite (none if it has none).
#[derive(Clone, Debug, Default)]
struct Side {
    ground: Vec3,
    sats: Vec<u32>,
}

impl PathAwarePlanner {
    /// A planner for constellation `c`.
    pub fn new(c: &Constellation) -> Self {
        PathAwarePlanner {
            graph: SnapshotGraph::new(c),
            dj: Dijkstra::default(),
            pos: Vec::new(),
            pool: Vec::new(),
            miss: Vec::new(),
            sum: Vec::new(),
        }
    }

    /// At routing step `k` (time `t_of(k)`), lets the ends of the pair that have a pending choice
    /// ([`Attacher::pending`]) pick: jointly when both choose (at an epoch both do, sharing the
    /// schedule), else the choosing end with the peer's current satellite fixed. The picks are handed
    /// in with [`Attacher::plan`]; the attachers' `step` then switches as for any criterion.
    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        &mut self,
        c: &Constellation,
        memo: &mut PositionMemo,
        f: &VisibilityFilter,
        ends: &mut [Attacher; 2],
        k: usize,
        t_of: impl Fn(usize) -> f64,
        pos: &[Vec3],
    ) -> Result<(), OrbitError> {
        let t = t_of(k);
        let need = [ends[0].pending(f, t, pos), ends[1].pending(f, t, pos)];
        let Some(&ch) = need.iter().flatten().min_by_key(|n| n.slot) else {
            return Ok(());
        };
        let mut sides = [Side::default(), Side::default()];
        for (i, side) in sides.iter_mut().enumerate() {
            side.ground = ends[i].ground();
            match need[i] {
                Some(ch) => self.candidates(c, memo, f, side, &ch, pos)?,
                None => side.sats.extend(ends[i].current()),
            }
        }
        // The slot's steps are those the attachers file under the same slot index.
        let in_slot = |j: usize| ends[0].slot_of(t_of(j)) == Some(ch.slot);
        // Estimated from the step length, then settled on the attachers' own slot arithmetic (the
        // estimate is off by at most one step, so this costs O(1) even for very long slots).
        let step = t_of(k + 1) - t;
        let mut count = ((ch.slot_end - t) / step).ceil().max(1.0) as usize;
        while count > 1 && !in_slot(k + count - 1) {
            count -= 1;
        }
        while in_slot(k + count) {
            count += 1;
        }
        let picks = self.choose(c, f, &sides, k..k + count, &t_of)?;
        for (i, e) in ends.iter_mut().enumerate() {
            if need[i].is_some() {
                e.plan(picks[i]);
            }
        }
        Ok(())
    }

    /// The choosing end's candidates: its [`slot_pool`], highest elevation first (ties, e.g. when no
    /// pair has a path at all, so fall back to the highest-elevation choice).
    fn candidates(
        &mut self,
        c: &Constellation,
        memo: &mut PositionMemo,
        f: &VisibilityFilter,
        side: &mut Side,
        ch: &SlotChoice,
        pos: &[Vec3],
    ) -> Result<(), OrbitError> {
        let end = memo.at(c, ch.slot_end)?.to_vec();
        let now = if ch.reason == crate::attach::HandoverReason::Epoch { memo.at(c, ch.at)? } else { pos };
        slot_pool(f, side.ground, now, &end, &mut self.pool);
        let mut el: Vec<(u32, f64)> =
            self.pool.iter().map(|&(s, _)| (s, elevation_deg(side.ground, now[s as usize]))).collect();
        el.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        side.sats = el.into_iter().map(|x| x.0).collect();
        Ok(())
    }

    /// The (source, destination) satellites with the fewest unreachable steps, then the lowest summed
    /// delay, over the routing steps `steps` (the rest of the slot); the first such pair in candidate
    /// order wins ties.
    fn choose(
        &mut self,
        c: &Constellation,
        f: &VisibilityFilter,
        sides: &[Side; 2],
        steps: std::ops::Range<usize>,
        t_of: &impl Fn(usize) -> f64,
    ) -> Result<[Option<u32>; 2], OrbitError> {
        let (a, b) = (&sides[0], &sides[1]);
        if a.sats.is_empty() || b.sats.is_empty() {
            // No pair can have a path: the choosing end takes its highest-elevation candidate.
            return Ok([a.sats.first().copied(), b.sats.first().copied()]);
        }
        let (na, nb) = (a.sats.len(), b.sats.len());
        self.miss.clear();
        self.miss.resize(na * nb, 0);
        self.sum.clear();
        self.sum.resize(na * nb, 0.0);
        let stride = steps.len().div_ceil(MAX_SAMPLES_PER_SLOT).max(1);
        for j in steps.step_by(stride) {
            c.positions_into(t_of(j), &mut self.pos)?;
            self.graph.update(c, &self.pos);
            for (ia, &sa) in a.sats.iter().enumerate() {
                let row = ia * nb..(ia + 1) * nb;
                let up = self.pos[sa as usize];
                if !f.visible(a.ground, up) {
                    self.miss[row].iter_mut().for_each(|m| *m += 1);
                    continue;
                }
                self.dj.run_until(&self.graph, &[(sa, distance(a.ground, up))], &b.sats);
                for (ib, &sb) in b.sats.iter().enumerate() {
                    let down = self.pos[sb as usize];
                    let d = self.dj.dist[sb as usize] + distance(b.ground, down);
                    if f.visible(b.ground, down) && d.is_finite() {
                        self.sum[ia * nb + ib] += d;
                    } else {
                        self.miss[ia * nb + ib] += 1;
                    }
                }
            }
        }
        let mut best = 0;
        for x in 1..na * nb {
            if (self.miss[x], self.sum[x]) < (self.miss[best], self.sum[best]) {
                best = x;
            }
        }
        Ok([Some(a.sats[best / nb]), Some(b.sats[best % nb])])
    }
}

#[cfg(test)]
mod tests {
    use crate::attach::{HandoverReason, InterruptionModel, Policy, SlotCriterion, SLOT_CRITERIA};
    use crate::constellation::{Constellation, DEFAULT_EPOCH_UNIX_S};
    use crate::ground::{GroundNode, Role, VisibilityFilter};
    use crate::timeline::{attachment_schedule, path_timeline, PathTimeline, TimelineOptions};

    fn city(name: &str) -> GroundNode {
        let (lat, lon) = match name {
            "New York" => (40.71427, -74.00597),
            "London" => (51.50853, -0.12574),
            "Paris" => (48.85341, 2.3488),
            "Beijing" => (39.9075, 116.39723),
            _ => unreachable!("test city {name}"),
        };
        GroundNode::new(name, lat, lon, 0.0, Role::Terminal).unwrap()
    }

    fn options(criterion: SlotCriterion, duration_s: f64, step_s: f64) -> TimelineOptions {
        let Policy::GlobalSchedule { period_s, phase_s, .. } = Policy::starlink(DEFAULT_EPOCH_UNIX_S) else {
            unreachable!()
        };
        TimelineOptions {
            duration_s,
            step_s,
            min_elevation_deg: 25.0,
            policy: Policy::GlobalSchedule { period_s, phase_s, criterion },
            interruption: InterruptionModel::STARTCP,
            seed: 7,
        }
    }

    /// Mean one-way delay of each slot lying wholly inside the run (None if a step had no path).
    fn slot_means(tl: &PathTimeline, o: &TimelineOptions) -> Vec<Option<f64>> {
        let Policy::GlobalSchedule { period_s, phase_s, .. } = o.policy else { unreachable!() };
        let slot = |t: f64| ((t - phase_s) / period_s).floor() as i64;
        let last = slot(o.duration_s) - 1; // the slot holding the run's end is cut short
        let mut out = Vec::new();
        for k in slot(0.0)..=last {
            let d: Vec<f64> = tl.steps.iter().filter(|s| slot(s.t_s) == k).map(|s| s.owd_s()).collect();
            out.push(d.iter().all(|x| x.is_finite()).then(|| d.iter().sum::<f64>() / d.len() as f64));
        }
        out
    }

    #[test]
    fn path_aware_never_has_a_larger_slot_mean_than_highest_elevation_on_real_pairs() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        for (a, b) in [("New York", "London"), ("Paris", "Beijing")] {
            let (ga, gb) = (city(a), city(b));
            let he_o = options(SlotCriterion::HighestElevation, 120.0, 0.1);
            let pa_o = options(SlotCriterion::PathAware, 120.0, 0.1);
            let he = path_timeline(&c, &ga, &gb, &he_o).unwrap();
            let pa = path_timeline(&c, &ga, &gb, &pa_o).unwrap();
            let (hm, pm) = (slot_means(&he, &he_o), slot_means(&pa, &pa_o));
            assert_eq!(hm.len(), 8, "{a}-{b}: the slots of 120 s starting 12 s in");
            let mut better = 0;
            for (k, (h, p)) in hm.iter().zip(&pm).enumerate() {
                let p = p.unwrap_or_else(|| panic!("{a}-{b} slot {k}: path-aware lost the path"));
                if let Some(h) = h {
                    assert!(p <= h + 1e-12, "{a}-{b} slot {k}: path-aware {p} > highest-elevation {h}");
                    better += usize::from(p < h - 1e-4);
                }
            }
            // The two criteria differ somewhere (else this test could not fail): highest elevation
            // takes a +Grid detour of more than 0.1 ms one-way on at least one slot of each pair.
            assert!(better >= 1, "{a}-{b}: path-aware never better than highest-elevation");
        }
    }

    #[test]
    fn path_aware_holds_both_ends_for_the_slot_and_hands_over_only_at_epochs_or_on_visibility_loss() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let o = options(SlotCriterion::PathAware, 90.0, 0.1);
        let Policy::GlobalSchedule { period_s, phase_s, .. } = o.policy else { unreachable!() };
        let (ga, gb) = (city("Paris"), city("Beijing"));
        let tl = path_timeline(&c, &ga, &gb, &o).unwrap();
        assert!(tl.handovers.iter().any(|h| h.reason == HandoverReason::Epoch));
        let f = VisibilityFilter::new(25.0, 550e3).unwrap();
        for h in &tl.handovers {
            match h.reason {
                HandoverReason::Epoch => {
                    let k = ((h.t_s - phase_s) / period_s).round();
                    assert!((h.t_s - (phase_s + k * period_s)).abs() < 1e-9, "epoch handover at {}", h.t_s);
                    assert!(h.interruption_s >= 0.030 && h.interruption_s <= 0.200);
                }
                HandoverReason::LostVisibility => {
                    let g = if h.node == 0 { ga.ecef() } else { gb.ecef() };
                    let pos = c.positions(h.t_s).unwrap();
                    assert!(!f.visible(g, pos[h.from.unwrap() as usize]), "left a visible satellite at {}", h.t_s);
                }
                r => panic!("unexpected handover {r:?} at {}", h.t_s),
            }
        }
        // Every step's path starts and ends at the satellites the ends hold for the slot.
        for s in tl.steps.iter().filter(|s| s.reachable()) {
            let held = |node: u32| {
                tl.slots.iter().find(|x| x.node == node && x.start_s <= s.t_s && s.t_s < x.end_s).map(|x| x.sat)
            };
            assert_eq!(Some(s.sats[0]), held(0), "t={}", s.t_s);
            assert_eq!(s.sats.last().copied(), held(1), "t={}", s.t_s);
        }
    }

    #[test]
    fn path_aware_is_deterministic_and_independent_of_the_run_length() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let (ga, gb) = (city("New York"), city("London"));
        let short = path_timeline(&c, &ga, &gb, &options(SlotCriterion::PathAware, 40.0, 0.5)).unwrap();
        let again = path_timeline(&c, &ga, &gb, &options(SlotCriterion::PathAware, 40.0, 0.5)).unwrap();
        assert_eq!(short, again);
        // A longer run makes the same choices over the common span (the whole slot is evaluated even
        // past the run's end).
        let long = path_timeline(&c, &ga, &gb, &options(SlotCriterion::PathAware, 80.0, 0.5)).unwrap();
        assert_eq!(short.steps[..], long.steps[..short.steps.len()]);
    }

    #[test]
    fn a_fine_step_is_thinned_to_the_sample_cap_and_picks_the_same_satellites() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let (ga, gb) = (city("Paris"), city("Beijing"));
        // 0.04 s: 375 steps per slot, every third one evaluated.
        let fine = path_timeline(&c, &ga, &gb, &options(SlotCriterion::PathAware, 45.0, 0.04)).unwrap();
        let coarse = path_timeline(&c, &ga, &gb, &options(SlotCriterion::PathAware, 45.0, 0.1)).unwrap();
        let sats = |tl: &PathTimeline| tl.slots.iter().map(|s| (s.node, s.sat)).collect::<Vec<_>>();
        assert_eq!(sats(&fine), sats(&coarse));
    }

    #[test]
    fn a_connectivity_cache_refuses_path_aware_naming_the_field() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let e = attachment_schedule(&c, &[city("London")], &options(SlotCriterion::PathAware, 10.0, 0.1));
        let msg = e.unwrap_err().to_string();
        assert!(msg.starts_with("invalid slot_criterion = path-aware: depends on the peer"), "{msg}");
        assert!(attachment_schedule(&c, &[city("London")], &options(SlotCriterion::Nearest, 10.0, 0.1)).is_ok());
    }

    #[test]
    fn criterion_names_round_trip_and_unknown_ones_list_the_known() {
        for name in SLOT_CRITERIA {
            assert_eq!(SlotCriterion::parse(name).unwrap().as_str(), *name);
        }
        let msg = SlotCriterion::parse("random").unwrap_err().to_string();
        assert_eq!(msg, "unknown slot_criterion 'random' (known: highest-elevation, nearest, path-aware)");
    }
}
