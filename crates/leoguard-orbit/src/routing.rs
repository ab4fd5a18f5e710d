//! Snapshot routing: the satellite graph with ISL lengths for one instant, and a reusable
//! multi-source Dijkstra over it (shortest propagation delay). Allocates nothing per run once warm.

use crate::constellation::Constellation;
use crate::geo::{distance, Vec3};

/// No predecessor / unreachable marker.
pub const NONE: u32 = u32::MAX;

/// The ISL graph with per-snapshot edge lengths (metres; `f64::INFINITY` when down).
#[derive(Clone, Debug)]
pub struct SnapshotGraph {
    adj_start: Vec<u32>,
    /// (neighbour, isl index) in CSR order.
    adj: Vec<(u32, u32)>,
    /// Current length of each ISL.
    pub isl_len: Vec<f64>,
    /// (length, neighbour) in CSR (adjacency) order: the search reads one sequential array.
    adj_edge: Vec<(f64, u32)>,
    /// Number of ISLs that are up in the current snapshot.
    pub isls_up: usize,
    /// Shortest up ISL in the current snapshot, metres (INFINITY if none).
    pub min_len: f64,
    /// Longest up ISL in the current snapshot, metres (0 if none).
    pub max_len: f64,
}

impl SnapshotGraph {
    /// The graph of `c`'s ISLs (lengths unset until [`SnapshotGraph::update`]).
    pub fn new(c: &Constellation) -> Self {
        let n = c.len();
        let mut deg = vec![0u32; n + 1];
        for l in c.isls() {
            deg[l.a as usize] += 1;
            deg[l.b as usize] += 1;
        }
        let mut adj_start = vec![0u32; n + 1];
        for i in 0..n {
            adj_start[i + 1] = adj_start[i] + deg[i];
        }
        let mut fill = adj_start.clone();
        let mut adj = vec![(0u32, 0u32); adj_start[n] as usize];
        for (k, l) in c.isls().iter().enumerate() {
            adj[fill[l.a as usize] as usize] = (l.b, k as u32);
            fill[l.a as usize] += 1;
            adj[fill[l.b as usize] as usize] = (l.a, k as u32);
            fill[l.b as usize] += 1;
        }
        let adj_edge = adj.iter().map(|&(w, _)| (f64::INFINITY, w)).collect();
        SnapshotGraph {
            adj_start,
            adj,
            isl_len: vec![f64::INFINITY; c.isls().len()],
            adj_edge,
            isls_up: 0,
            min_len: f64::INFINITY,
            max_len: 0.0,
        }
    }

    /// Recomputes ISL lengths and availability for satellite positions `pos`.
    pub fn update(&mut self, c: &Constellation, pos: &[Vec3]) {
        let mut up = 0;
        let mut min_len = f64::INFINITY;
        let mut max_len: f64 = 0.0;
        for (k, l) in c.isls().iter().enumerate() {
            self.isl_len[k] = if c.isl_up(l, pos) {
                up += 1;
                let d = distance(pos[l.a as usize], pos[l.b as usize]);
                min_len = min_len.min(d);
                max_len = max_len.max(d);
                d
            } else {
                f64::INFINITY
            };
        }
        for (e, &(_, k)) in self.adj_edge.iter_mut().zip(&self.adj) {
            e.0 = self.isl_len[k as usize];
        }
        self.isls_up = up;
        self.min_len = min_len;
        self.max_len = max_len;
    }

    /// Neighbours of satellite `v` as (neighbour, isl index).
    #[inline]
    pub fn neighbours(&self, v: u32) -> &[(u32, u32)] {
        &self.adj[self.adj_start[v as usize] as usize..self.adj_start[v as usize + 1] as usize]
    }

    /// Neighbours of `v` with the current edge lengths.
    #[inline]
    fn edges(&self, v: u32) -> &[(f64, u32)] {
        let (a, b) = (self.adj_start[v as usize] as usize, self.adj_start[v as usize + 1] as usize);
        &self.adj_edge[a..b]
    }

    /// Number of satellites.
    pub fn node_count(&self) -> usize {
        self.adj_start.len() - 1
    }
}

/// Multi-source Dijkstra with reusable buffers.
#[derive(Clone, Debug, Default)]
pub struct Dijkstra {
    /// Distance (metres) from the nearest source, `INFINITY` if unreached.
    pub dist: Vec<f64>,
    /// Predecessor satellite, or [`NONE`] for sources and unreached nodes.
    pub pred: Vec<u32>,
    heap: IndexedHeap,
    /// Final-hop length of each target during `run_to` (INFINITY elsewhere).
    exit: Vec<f64>,
    buckets: Vec<Vec<u32>>,
    work: Vec<u32>,
    /// `want[v] == generation` marks nodes whose final distance `run_until` waits for.
    want: Vec<u32>,
    generation: u32,
    /// `done[v] == generation`: v was settled by the current bucket-queue search (its later, stale
    /// entries and duplicates in one bucket are skipped).
    done: Vec<u32>,
    wanted: usize,
    /// Best total (metres) of each destination served by `run_exits`, INFINITY until it has an exit.
    best_total: Vec<f64>,
    /// Destinations served by `run_exits` without an exit yet.
    unexited: usize,
    /// Always use the binary-heap search (the bucket queue is used otherwise when edges allow it).
    pub force_heap: bool,
}

/// Dial's algorithm is used when every up edge is at least this long (else the heap).
const DIAL_MIN_WIDTH_M: f64 = 20_000.0;

impl Dijkstra {
    /// Runs from `sources` = (satellite, initial distance in metres) over the whole graph.
    pub fn run(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)]) {
        self.run_until(g, sources, &[]);
    }

    /// Runs from `sources` until every node in `wanted` has its final distance (others may be
    /// unsettled). Used by all-pairs routing, which needs only the satellites its destinations see.
    pub fn run_until(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)], wanted: &[u32]) {
        self.mark(g.node_count(), wanted);
        self.search(g, sources, &[], None);
    }

    /// Runs from `sources` until the best exit of every destination numbered above `after` in
    /// `exits` is certain (or nothing more is reachable): once every node closer than `r` is settled,
    /// a destination whose best total so far is at most `r` + its shortest final hop cannot do
    /// better through an unsettled satellite. All-pairs routing's search; it stops before the far
    /// satellites a destination sees are settled. Read the results with [`Dijkstra::best_exit`]
    /// (an unsettled satellite's tentative distance never beats the certain best).
    pub fn run_exits(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)], exits: &ExitIndex, after: u32) {
        self.mark(g.node_count(), &[]);
        let m = exits.min_hop.len();
        self.best_total.clear();
        self.best_total.resize(m, f64::INFINITY);
        self.unexited = exits.min_hop.iter().skip(after as usize + 1).filter(|h| h.is_finite()).count();
        self.search(g, sources, &[], Some((exits, after)));
    }

    /// Records the totals through settled satellite `v` (distance `d`) of the destinations it serves.
    #[inline]
    fn reach_exits(&mut self, ex: &ExitIndex, after: u32, v: u32, d: f64) {
        for &(j, h) in ex.of(v) {
            if j <= after {
                break; // descending: the rest are served by other searches
            }
            let t = d + h;
            let b = &mut self.best_total[j as usize];
            if t < *b {
                if b.is_infinite() {
                    self.unexited -= 1;
                }
                *b = t;
            }
        }
    }

    /// Whether every destination above `after` has a certain best exit once each node closer than
    /// `r` metres is settled.
    fn exits_certain(&self, ex: &ExitIndex, after: u32, r: f64) -> bool {
        self.unexited == 0
            && ex
                .min_hop
                .iter()
                .zip(&self.best_total)
                .skip(after as usize + 1)
                .all(|(&h, &b)| !h.is_finite() || b <= r + h)
    }

    /// Starts a new generation of wanted marks; no marks means "run to completion".
    fn mark(&mut self, n: usize, wanted: &[u32]) {
        self.generation = self.generation.wrapping_add(1);
        if self.want.len() != n || self.generation == 0 {
            self.want = vec![0; n];
            self.done = vec![0; n];
            self.generation = 1;
        }
        self.wanted = 0;
        for &v in wanted {
            if self.want[v as usize] != self.generation {
                self.want[v as usize] = self.generation;
                self.wanted += 1;
            }
        }
        if self.wanted == 0 {
            self.wanted = usize::MAX;
        }
    }

    /// Marks node `v` settled; true when it was the last wanted one.
    #[inline]
    fn settle(&mut self, v: u32) -> bool {
        if self.want[v as usize] == self.generation {
            self.want[v as usize] = 0;
            self.wanted -= 1;
            return self.wanted == 0;
        }
        false
    }

    /// Runs from `sources` until the best exit among `targets` = (satellite, final-hop metres) is
    /// certain: the search stops once the next node is no closer than the best complete path.
    pub fn run_to(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)], targets: &[(u32, f64)]) -> Option<(u32, f64)> {
        self.mark(g.node_count(), &[]);
        self.search(g, sources, targets, None);
        self.best_exit(targets)
    }

    fn search(
        &mut self,
        g: &SnapshotGraph,
        sources: &[(u32, f64)],
        targets: &[(u32, f64)],
        track: Option<(&ExitIndex, u32)>,
    ) {
        let n = g.node_count();
        self.dist.clear();
        self.dist.resize(n, f64::INFINITY);
        self.pred.clear();
        self.pred.resize(n, NONE);
        if self.exit.len() != n {
            self.exit = vec![f64::INFINITY; n];
        }
        for &(t, d) in targets {
            self.exit[t as usize] = self.exit[t as usize].min(d);
        }
        if !self.force_heap && g.min_len >= DIAL_MIN_WIDTH_M && g.min_len.is_finite() {
            self.dial(g, sources, !targets.is_empty(), track);
        } else {
            self.heap_search(g, sources, track);
        }
        for &(t, _) in targets {
            self.exit[t as usize] = f64::INFINITY;
        }
    }

    fn heap_search(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)], track: Option<(&ExitIndex, u32)>) {
        let n = g.node_count();
        self.heap.reset(n);
        for &(s, d0) in sources {
            if d0 < self.dist[s as usize] {
                self.dist[s as usize] = d0;
                self.heap.push_or_decrease(s, d0);
            }
        }
        let mut best = f64::INFINITY;
        while let Some((v, d)) = self.heap.pop() {
            if d >= best {
                break; // every remaining path is at least d long (exit hops are >= 0)
            }
            best = best.min(d + self.exit[v as usize]);
            if self.settle(v) {
                break;
            }
            if let Some((ex, after)) = track {
                // Every node but v still in the heap or unreached is at least d away.
                self.reach_exits(ex, after, v, d);
                if self.exits_certain(ex, after, d) {
                    break;
                }
            }
            for &(l, w) in g.edges(v) {
                let nd = d + l;
                if nd < self.dist[w as usize] {
                    self.dist[w as usize] = nd;
                    self.pred[w as usize] = v;
                    self.heap.push_or_decrease(w, nd);
                }
            }
        }
    }

    /// Dial's bucket queue: with bucket width w <= the shortest edge, no node in the current bucket
    /// can improve another in the same bucket (d_v + w_uv >= (b+1)w), so each bucket is final as a
    /// whole and needs no ordering. Exact, and O(nodes + edges + distance / w).
    /// `exits`: whether any node has a final hop (`run_to`); without, `exit` is not read.
    /// `track`: stop once the served destinations' exits are certain ([`Dijkstra::run_exits`]).
    fn dial(&mut self, g: &SnapshotGraph, sources: &[(u32, f64)], exits: bool, track: Option<(&ExitIndex, u32)>) {
        // A hair under the shortest edge so that rounding never files a relaxation in its own bucket.
        let width = g.min_len * (1.0 - 1e-9);
        let inv = 1.0 / width;
        // Truncation through u32 (every bucket index here is far below 2^32: distances of tens of
        // thousands of kilometres over a width of at least 20 km) is a cheaper saturating cast than
        // through usize.
        let bucket = |d: f64| (d * inv) as u32 as usize;
        let mut lo = usize::MAX;
        let mut hi = 0;
        for &(s, d0) in sources {
            if d0 < self.dist[s as usize] {
                self.dist[s as usize] = d0;
            }
            lo = lo.min(bucket(d0));
            hi = hi.max(bucket(d0));
        }
        if lo == usize::MAX {
            return;
        }
        // Every pending entry lies in [cur, cur + ring): a relaxation jumps at most max_len / w + 1.
        // A power of two, so that the ring index is a mask rather than a division.
        let ring = ((g.max_len * inv) as usize + 2).max(hi - lo + 1).next_power_of_two();
        for b in &mut self.buckets {
            b.clear();
        }
        if self.buckets.len() < ring {
            self.buckets.resize_with(ring, Vec::new);
        }
        let mask = self.buckets.len() - 1;
        let mut pending = 0usize;
        for &(s, _) in sources {
            self.buckets[bucket(self.dist[s as usize]) & mask].push(s);
            pending += 1;
        }
        let mut best = f64::INFINITY;
        let mut cur = lo;
        let mut work = std::mem::take(&mut self.work);
        while pending > 0 && (cur as f64) * width < best {
            work.clear();
            std::mem::swap(&mut work, &mut self.buckets[cur & mask]);
            pending -= work.len();
            for &v in &work {
                if self.done[v as usize] == self.generation {
                    // Stale (v was improved into an earlier bucket and settled there) or a second
                    // entry of v in this bucket.
                    continue;
                }
                self.done[v as usize] = self.generation;
                let d = self.dist[v as usize];
                if exits {
                    best = best.min(d + self.exit[v as usize]);
                }
                if self.settle(v) {
                    best = f64::NEG_INFINITY; // every wanted node is final: stop after this bucket
                }
                if let Some((ex, after)) = track {
                    self.reach_exits(ex, after, v, d);
                }
                for &(l, w) in g.edges(v) {
                    let nd = d + l;
                    if nd < self.dist[w as usize] {
                        self.dist[w as usize] = nd;
                        self.pred[w as usize] = v;
                        self.buckets[bucket(nd) & mask].push(w);
                        pending += 1;
                    }
                }
            }
            cur += 1;
            if let Some((ex, after)) = track {
                // Every unsettled node lies in bucket `cur` or later: at least cur * width away
                // (less a margin far above the rounding of d * inv).
                if self.exits_certain(ex, after, cur as f64 * width * (1.0 - 1e-12)) {
                    break;
                }
            }
        }
        work.clear();
        self.work = work;
    }

    /// Best exit among `targets` = (satellite, final-hop metres): (satellite, total metres).
    pub fn best_exit(&self, targets: &[(u32, f64)]) -> Option<(u32, f64)> {
        let mut best: Option<(u32, f64)> = None;
        for &(s, d) in targets {
            let total = self.dist[s as usize] + d;
            if total.is_finite() && best.is_none_or(|(_, b)| total < b) {
                best = Some((s, total));
            }
        }
        best
    }

    /// Satellite sequence from a source to `to` (inclusive), appended to `out` (cleared first).
    pub fn path_into(&self, to: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut v = to;
        while v != NONE {
            out.push(v);
            v = self.pred[v as usize];
        }
        out.reverse();
    }
}

/// The satellites each ground destination sees, indexed by satellite, for [`Dijkstra::run_exits`].
/// Destinations are numbered 0..m; a search serving those above `after` reads each satellite's list
/// (kept in descending destination order) only down to `after`.
#[derive(Clone, Debug, Default)]
pub struct ExitIndex {
    /// CSR offsets by satellite.
    start: Vec<u32>,
    /// (destination, final-hop metres).
    items: Vec<(u32, f64)>,
    fill: Vec<u32>,
    /// Shortest final hop of each destination (INFINITY if it sees no satellite).
    min_hop: Vec<f64>,
}

impl ExitIndex {
    /// Rebuilds the index for `vis[j]` = (satellite, final-hop metres) of destination j over `n`
    /// satellites; reuses its buffers.
    pub fn rebuild(&mut self, n: usize, vis: &[Vec<(u32, f64)>]) {
        self.start.clear();
        self.start.resize(n + 1, 0);
        for &(s, _) in vis.iter().flatten() {
            self.start[s as usize + 1] += 1;
        }
        for i in 0..n {
            self.start[i + 1] += self.start[i];
        }
        self.fill.clone_from(&self.start);
        self.items.clear();
        self.items.resize(self.start[n] as usize, (0, 0.0));
        for (j, v) in vis.iter().enumerate().rev() {
            for &(s, h) in v {
                let at = &mut self.fill[s as usize];
                self.items[*at as usize] = (j as u32, h);
                *at += 1;
            }
        }
        self.min_hop.clear();
        self.min_hop.extend(vis.iter().map(|v| v.iter().fold(f64::INFINITY, |a, &(_, h)| a.min(h))));
    }

    /// (destination, final hop) pairs of satellite `v`, destinations descending.
    #[inline]
    fn of(&self, v: u32) -> &[(u32, f64)] {
        &self.items[self.start[v as usize] as usize..self.start[v as usize + 1] as usize]
    }
}

/// A 4-ary min-heap of nodes keyed by distance, with decrease-key (each node at most once).
#[derive(Clone, Debug, Default)]
struct IndexedHeap {
    items: Vec<(f64, u32)>,
    /// Position of each node in `items`, `NONE` if absent.
    at: Vec<u32>,
}

impl IndexedHeap {
    fn reset(&mut self, n: usize) {
        for &(_, v) in &self.items {
            self.at[v as usize] = NONE;
        }
        self.items.clear();
        if self.at.len() != n {
            self.at = vec![NONE; n];
        }
    }

    #[inline]
    fn push_or_decrease(&mut self, v: u32, key: f64) {
        let i = match self.at[v as usize] {
            NONE => {
                self.items.push((key, v));
                self.items.len() - 1
            }
            i => {
                self.items[i as usize].0 = key;
                i as usize
            }
        };
        self.sift_up(i);
    }

    #[inline]
    fn pop(&mut self) -> Option<(u32, f64)> {
        let (key, v) = *self.items.first()?;
        self.at[v as usize] = NONE;
        let last = self.items.pop()?;
        if !self.items.is_empty() {
            self.items[0] = last;
            self.sift_down(0);
        }
        Some((v, key))
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let item = self.items[i];
        while i > 0 {
            let p = (i - 1) / 4;
            if self.items[p].0 <= item.0 {
                break;
            }
            self.items[i] = self.items[p];
            self.at[self.items[i].1 as usize] = i as u32;
            i = p;
        }
        self.items[i] = item;
        self.at[item.1 as usize] = i as u32;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let item = self.items[i];
        let n = self.items.len();
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let mut m = first;
            for c in first + 1..(first + 4).min(n) {
                if self.items[c].0 < self.items[m].0 {
                    m = c;
                }
            }
            if self.items[m].0 >= item.0 {
                break;
            }
            self.items[i] = self.items[m];
            self.at[self.items[i].1 as usize] = i as u32;
            i = m;
        }
        self.items[i] = item;
        self.at[item.1 as usize] = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_queue_and_heap_agree_on_starlink() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let mut g = SnapshotGraph::new(&c);
        let (mut a, mut b) = (Dijkstra::default(), Dijkstra { force_heap: true, ..Default::default() });
        for (k, t) in [0.0, 37.3, 1200.0, 4000.0].into_iter().enumerate() {
            let pos = c.positions(t).unwrap();
            g.update(&c, &pos);
            assert!(g.min_len >= DIAL_MIN_WIDTH_M, "bucket queue not exercised");
            let src = [((k * 101) as u32, 400e3), ((k * 101 + 700) as u32, 900e3)];
            a.run(&g, &src);
            b.run(&g, &src);
            for i in 0..c.len() {
                assert!((a.dist[i] - b.dist[i]).abs() < 1e-3, "t={t} node {i}");
            }
            // Stopping once the wanted nodes are final leaves their distances exact.
            let wanted = [3u32, 500, 1583];
            let mut c2 = Dijkstra::default();
            c2.run_until(&g, &src, &wanted);
            for w in wanted {
                assert!((c2.dist[w as usize] - b.dist[w as usize]).abs() < 1e-3, "t={t} wanted {w}");
            }
            let tg = [(1000u32, 600e3), (1500u32, 700e3)];
            assert_eq!(a.run_to(&g, &src, &tg).map(|x| x.0), b.run_to(&g, &src, &tg).map(|x| x.0));
        }
    }

    #[test]
    fn exit_search_waits_for_a_farther_exit_with_a_shorter_final_hop() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let mut g = SnapshotGraph::new(&c);
        g.update(&c, &c.positions(100.0).unwrap());
        let mut full = Dijkstra::default();
        full.run(&g, &[(0, 0.0)]);
        // Destination 1 sees a satellite next to the source through a final hop longer than the
        // farthest path and the farthest satellite through none: the far one is the best exit, and
        // the search must not stop once the near one has settled.
        let far = (0..c.len()).max_by(|&a, &b| full.dist[a].total_cmp(&full.dist[b])).unwrap() as u32;
        let near = g.neighbours(0)[0].0;
        let vis = vec![vec![], vec![(near, full.dist[far as usize] + 1.0e6), (far, 0.0)]];
        let mut ex = ExitIndex::default();
        ex.rebuild(c.len(), &vis);
        for heap in [false, true] {
            let mut dj = Dijkstra { force_heap: heap, ..Default::default() };
            dj.run_exits(&g, &[(0, 0.0)], &ex, 0);
            assert_eq!(dj.best_exit(&vis[1]), Some((far, full.dist[far as usize])), "heap {heap}");
        }
    }

    #[test]
    fn dijkstra_matches_brute_force_bellman_ford() {
        let c = Constellation::preset("telesat").unwrap();
        let pos = c.positions(500.0).unwrap();
        let mut g = SnapshotGraph::new(&c);
        g.update(&c, &pos);
        let mut dj = Dijkstra::default();
        dj.run(&g, &[(0, 0.0), (100, 1.0e6)]);
        // Bellman-Ford over the same edges.
        let mut bf = vec![f64::INFINITY; c.len()];
        bf[0] = 0.0;
        bf[100] = bf[100].min(1.0e6);
        for _ in 0..c.len() {
            let mut changed = false;
            for (k, l) in c.isls().iter().enumerate() {
                let w = g.isl_len[k];
                let (a, b) = (l.a as usize, l.b as usize);
                if bf[a] + w < bf[b] {
                    bf[b] = bf[a] + w;
                    changed = true;
                }
                if bf[b] + w < bf[a] {
                    bf[a] = bf[b] + w;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (i, (&want, &got)) in bf.iter().zip(&dj.dist).enumerate() {
            if want.is_finite() {
                assert!((want - got).abs() < 1e-3, "node {i}: {want} vs {got}");
            } else {
                assert!(got.is_infinite());
            }
        }
        // Early-stopping search gives the same best exit as the full one.
        let targets = [(200u32, 5.0e5), (300u32, 1.0e5)];
        let full = dj.best_exit(&targets).unwrap();
        let mut dj2 = Dijkstra::default();
        let early = dj2.run_to(&g, &[(0, 0.0), (100, 1.0e6)], &targets).unwrap();
        assert_eq!(full.0, early.0);
        assert!((full.1 - early.1).abs() < 1e-6);
        let mut p = Vec::new();
        dj.path_into(200, &mut p);
        assert!(p[0] == 0 || p[0] == 100);
        assert_eq!(*p.last().unwrap(), 200);
    }
}
