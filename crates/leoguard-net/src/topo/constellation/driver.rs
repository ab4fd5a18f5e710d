//! The constellation topology's [`Driver`]: at every routing step, satellite positions, ISL states
//! and delays, ground links' delays and the next hops towards every flow end (split from
//! `constellation.rs`, which builds the topology).

use super::GroundAccess;
use crate::link::{LinkId, NodeId};
use crate::topo::{Control, Driver};
use leoguard_core::{Duration, Instant};
use leoguard_orbit::attach::Slot;
use leoguard_orbit::geo::{distance, light_delay_s, Vec3};
use leoguard_orbit::routing::{Dijkstra, SnapshotGraph, NONE};
use leoguard_orbit::Constellation;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `last_pred` of a tree's root (a satellite index is below `ROOT`, and `NONE` is unreached).
const ROOT: u32 = NONE - 1;
/// `last_pred` where no next hop was worked out from a tree: the next one is worked out anew.
const FRESH: u32 = NONE - 2;

/// Recomputes delays, ISL states and next hops at every routing step.
#[derive(Debug)]
pub(super) struct ConstellationDriver {
    pub(super) c: Arc<Constellation>,
    pub(super) grounds: Vec<Vec3>,
    pub(super) host_ground: Vec<u32>,
    /// Per host: (host -> ground, ground -> host).
    pub(super) host_links: Vec<(LinkId, LinkId)>,
    /// First satellite node.
    pub(super) base: u32,
    pub(super) step: Duration,
    pub(super) steps: usize,
    pub(super) k: usize,
    pub(super) graph: SnapshotGraph,
    pub(super) dj: Dijkstra,
    pub(super) pos: Vec<Vec3>,
    pub(super) per_ground: Vec<Vec<Slot>>,
    pub(super) cursor: Vec<usize>,
    pub(super) serving: Vec<Option<u32>>,
    pub(super) isl_links: Vec<(LinkId, LinkId)>,
    pub(super) isl_up: Vec<bool>,
    /// Each ISL's delay as last emitted: an unchanged one (to the nanosecond: intra-plane ISLs, and
    /// most others between close steps) is not emitted again.
    pub(super) isl_delay: Vec<Duration>,
    pub(super) access: Vec<Option<GroundAccess>>,
    pub(super) gsl: BTreeMap<(u32, u32), (LinkId, LinkId)>,
    pub(super) dests: Vec<u32>,
    /// Per destination (sorted by node), whether it is lazy ([`Driver::lazy_dests`]).
    pub(super) lazy: Vec<bool>,
    /// Routes last emitted per destination (index into `dests`), per node.
    pub(super) last: Vec<Vec<Option<LinkId>>>,
    /// Per destination, each satellite's predecessor in the last routing tree ([`ROOT`] at its
    /// root, [`FRESH`] where no tree was drawn); see `satellite_column`.
    pub(super) last_pred: Vec<Vec<u32>>,
    pub(super) column: Vec<Option<LinkId>>,
    pub(super) error: Option<String>,
}

impl ConstellationDriver {
    fn serving_at(&mut self, g: usize, t: f64) -> Option<u32> {
        let slots = &self.per_ground[g];
        let mut i = self.cursor[g];
        while i < slots.len() && slots[i].end_s <= t {
            i += 1;
        }
        self.cursor[g] = i;
        slots.get(i).filter(|s| s.start_s <= t + 1e-9).map(|s| s.sat)
    }

    /// The ISL link from satellite `v` to its neighbour `w`.
    fn isl_link(&self, v: u32, w: u32) -> Option<LinkId> {
        self.graph.neighbours(v).iter().find(|x| x.0 == w).map(|&(_, k)| {
            let (ab, ba) = self.isl_links[k as usize];
            if self.c.isls()[k as usize].a == v {
                ab
            } else {
                ba
            }
        })
    }

    fn routes_towards(&mut self, dst: u32, out: &mut Vec<Control>, slot: usize) {
        let g_count = self.grounds.len() as u32;
        let n_nodes = self.base as usize + self.c.len();
        let mut col = std::mem::take(&mut self.column);
        col.clear();
        col.resize(n_nodes, None);
        if dst >= self.base {
            self.routes_to_satellite(dst - self.base, &mut col, slot);
            self.emit(dst, col, out, slot);
            return;
        }
        // The ground node the destination is behind.
        let (dg, host) =
            if dst < g_count { (dst, None) } else { (self.host_ground[(dst - g_count) as usize], Some(dst)) };
        if let Some(sat) = self.serving[dg as usize] {
            self.dj.run(&self.graph, &[(sat, 0.0)]);
            let down = self.gsl.get(&(dg, sat)).map(|l| l.1);
            self.satellite_column(sat, down, &mut col, slot);
            for g in 0..g_count {
                if g != dg {
                    col[g as usize] = self.serving[g as usize].and_then(|s| self.gsl.get(&(g, s))).map(|l| l.0);
                }
            }
        } else {
            // No satellite column was written: the next one is worked out whole.
            self.last_pred[slot].fill(FRESH);
        }
        // Hosts always reach the world through their ground node; that ground node reaches its own hosts.
        for (i, &(up, down)) in self.host_links.iter().enumerate() {
            let h = g_count + i as u32;
            if Some(h) != host {
                col[h as usize] = Some(up);
            } else {
                col[dg as usize] = Some(down);
            }
        }
        self.emit(dst, col, out, slot);
    }

    /// Next hops towards satellite `sat` (a proxy on it): ISLs by shortest delay, ground nodes up
    /// to their serving satellite, hosts to their ground node.
    fn routes_to_satellite(&mut self, sat: u32, col: &mut [Option<LinkId>], slot: usize) {
        let g_count = self.grounds.len() as u32;
        self.dj.run(&self.graph, &[(sat, 0.0)]);
        self.satellite_column(sat, None, col, slot);
        for g in 0..g_count {
            col[g as usize] = self.serving[g as usize].and_then(|s| self.gsl.get(&(g, s))).map(|l| l.0);
        }
        for (i, &(up, _)) in self.host_links.iter().enumerate() {
            col[(g_count + i as u32) as usize] = Some(up);
        }
    }

    /// The satellites' next hops along the tree the search holds, rooted at satellite `root`, which
    /// forwards on `at_root` (down to the destination's ground node, or nowhere for a proxy on it).
    /// A satellite's next hop depends only on its predecessor in the tree (an ISL's link never
    /// changes, and a destination's ground node is fixed), so one whose predecessor is as at this
    /// destination's last step keeps its last next hop, and only the changed ones are looked up.
    fn satellite_column(&mut self, root: u32, at_root: Option<LinkId>, col: &mut [Option<LinkId>], slot: usize) {
        let base = self.base as usize;
        let mut preds = std::mem::take(&mut self.last_pred[slot]);
        for (v, was) in preds.iter_mut().enumerate() {
            let p = if v as u32 == root { ROOT } else { self.dj.pred[v] };
            col[base + v] = if p == *was {
                self.last[slot][base + v]
            } else {
                *was = p;
                match p {
                    ROOT => at_root,
                    NONE => None,
                    w => self.isl_link(v as u32, w),
                }
            };
        }
        self.last_pred[slot] = preds;
    }

    /// Emits the route changes of column `col` towards `dst` (slot `slot` of `dests`).
    fn emit(&mut self, dst: u32, col: Vec<Option<LinkId>>, out: &mut Vec<Control>, slot: usize) {
        let last = &mut self.last[slot];
        for (node, (&now, was)) in col.iter().zip(last.iter_mut()).enumerate() {
            if now != *was {
                *was = now;
                out.push(Control::Route { at: NodeId(node as u32), dst: NodeId(dst), via: now });
            }
        }
        self.column = col;
    }
}

impl Driver for ConstellationDriver {
    fn step(&mut self, now: Instant, out: &mut Vec<Control>) -> Option<Instant> {
        if self.error.is_some() || self.k >= self.steps {
            return None;
        }
        let t = self.k as f64 * self.step.as_secs_f64();
        if let Err(e) = self.c.positions_into(t, &mut self.pos) {
            // A TLE that cannot be propagated: keep the last routes and report it with the results.
            self.error = Some(e.to_string());
            return None;
        }
        self.graph.update(&self.c, &self.pos);
        let delay = |m: f64| Duration::from_secs_f64(light_delay_s(m));
        for k in 0..self.c.isls().len() {
            let (ab, ba) = self.isl_links[k];
            // The graph's length is this snapshot's distance between the two satellites.
            let len = self.graph.isl_len[k];
            let up = len.is_finite();
            if up != self.isl_up[k] {
                self.isl_up[k] = up;
                out.extend([Control::State { link: ab, up }, Control::State { link: ba, up }]);
            }
            if up {
                let d = delay(len);
                if d != self.isl_delay[k] {
                    self.isl_delay[k] = d;
                    out.extend([Control::Delay { link: ab, delay: d }, Control::Delay { link: ba, delay: d }]);
                }
            }
        }
        for g in 0..self.grounds.len() {
            self.serving[g] = self.serving_at(g, t);
            if let Some(sat) = self.serving[g] {
                if let Some(&(up, down)) = self.gsl.get(&(g as u32, sat)) {
                    let mut d = delay(distance(self.grounds[g], self.pos[sat as usize]));
                    if let Some(Some(a)) = self.access.get(g) {
                        d = d + a.extra_at(self.k);
                    }
                    out.extend([Control::Delay { link: up, delay: d }, Control::Delay { link: down, delay: d }]);
                }
            }
        }
        let n_nodes = self.base as usize + self.c.len();
        if self.last.is_empty() {
            self.last = vec![vec![None; n_nodes]; self.dests.len()];
            self.last_pred = vec![vec![FRESH; self.c.len()]; self.dests.len()];
        }
        for i in 0..self.dests.len() {
            if !self.lazy[i] {
                self.routes_towards(self.dests[i], out, i);
            }
        }
        self.k += 1;
        (self.k < self.steps).then(|| now.max(Instant((self.k as u128 * self.step.as_nanos() as u128) as u64)))
    }

    fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn lazy_dests(&self) -> Vec<u32> {
        self.dests.iter().zip(&self.lazy).filter(|x| *x.1).map(|x| *x.0).collect()
    }

    fn refresh(&mut self, dst: u32, out: &mut Vec<Control>) {
        // Before the first step nothing is routed; afterwards `graph`, `serving` and the search hold
        // the latest step's state, from which the step would have routed towards `dst`.
        if self.last.is_empty() {
            return;
        }
        if let Ok(i) = self.dests.binary_search(&dst) {
            if self.lazy[i] {
                self.routes_towards(dst, out, i);
            }
        }
    }
}
