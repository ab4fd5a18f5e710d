//! SATGUARD §3.4: the ground-side order-preserving buffer (per flow, by FSeq).
//!
//! Sits at the exit of the satellite network (ground station or terminal). Link-local retransmission
//! inside the constellation recovers lost packets but delivers them late, out of order; this buffer
//! hides that from the endpoints (SATGUARD §3.4, REFERENCE.md "Ground reorder buffer by FSeq"):
//!
//! * a packet whose FSeq is the next expected one is released at once, with any consecutive held
//!   packets behind it ("Otherwise, the packet will be forwarded immediately");
//! * a packet ahead of the expected one (an "FSeq mutation") is held. Each held packet gets a
//!   deadline `arrival + hold`; when the earliest deadline passes, the buffer gives up on the missing
//!   FSeqs below that packet (counted as `skipped`), releases what it holds in order and advances;
//! * a duplicate FSeq (already released or already held) is dropped and counted (§3.4 "identifies
//!   duplicate packets based on duplicate FSeq of the flow and discards them");
//! * flows are independent: a gap in one flow never delays another ("executed in flow-level, so
//!   there is no head-of-line blocking problem");
//! * the hold time adapts per flow from "the interval of receiving in-order packets and recovery
//!   delay of local retransmitted packets" (§3.4), see [`ReorderConfig`] and `Estimator` below.
//!
//! ## Window and restart rule
//! FSeq is 16 bits (RFC 1982 serial arithmetic, [`Seq16`]). A packet whose FSeq is more than
//! `window` (default 2^14) ahead of or behind the expected FSeq cannot be ordered against the flow:
//! it is dropped and counted `out_of_window`. If `restart_after` such packets arrive back to back
//! (nothing in-window between them), the flow is taken to have restarted (e.g. the entry dishy
//! rebooted and numbers from a new origin): everything held is released in order, and the flow
//! re-anchors on the packet that completed the run, which is released. The earlier packets of
//! that run are lost (already counted `out_of_window`). A single stray packet never restarts a flow.
//!
//! ## Anchoring
//! A flow is created by its first packet, which is released at once and anchors the expected FSeq.
//! Packets numbered before the anchor are "late". A host that knows a flow's first FSeq (the
//! simulator does: the entry assigns it) can call [`ReorderBuffer::open_flow`] instead.
//!
//! ## Late vs duplicate
//! A packet behind the expected FSeq is a duplicate if it was released, and "late" if the buffer
//! had already given up on it (skipped). The buffer remembers which of the last
//! `HISTORY_BITS` (2^15, as far back as the largest `window` reaches) FSeqs were released, so every
//! in-window packet is told apart. (With 1024 a second copy a migration delivered 10 ms or more after
//! the first, at 1 Gbit/s, passed as late: the flow got the packet twice.)
//!
//! ## Memory and allocation
//! Per flow: a `BTreeMap` of held packets (at most `max_held_per_flow`, overflow releases the
//! oldest gap early and is counted), a FIFO of deadlines, and 4 KiB of history. Flows live in a
//! `BTreeMap` (deterministic iteration, STYLE.md rule 4) and timers in one `BTreeSet` ordered by
//! (deadline, flow). In steady state (no gaps) a packet touches no allocator; opening a gap may
//! allocate a B-tree node, which is freed when the gap closes. Released packets go to one reused
//! output queue drained by [`ReorderBuffer::poll_release`].

use leoguard_core::{Duration, Instant, Seq16};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many recent FSeqs per flow the buffer remembers as released (duplicate vs late): the whole
/// largest window behind the expected FSeq.
const HISTORY_BITS: u64 = 1 << 15;

/// How many recent skipped ranges per flow are remembered to learn from late arrivals.
const SKIP_MEMORY: usize = 4;

/// Configuration of the order-preserving buffer; validate with [`ReorderConfig::validate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderConfig {
    /// Hold used before a flow has any recovery-delay sample.
    pub initial_hold: Duration,
    /// Lower bound of the adaptive hold.
    pub min_hold: Duration,
    /// Upper bound of the adaptive hold (the most a packet may wait for a missing one).
    pub max_hold: Duration,
    /// Most packets held per flow; one more forces the oldest gap to be given up.
    pub max_held_per_flow: usize,
    /// FSeq distance beyond which a packet is out of window (1..=2^15-1; default 2^14).
    pub window: u16,
    /// Back-to-back out-of-window packets that mean the flow restarted.
    pub restart_after: u8,
}

impl Default for ReorderConfig {
    /// SATGUARD recovers on single hops (ISL/GSL round trips of a few ms, §3.2/§3.3), so 20 ms covers a
    /// retransmission or two before any sample; 200 ms caps the extra delay near the paper's p99 gains.
    fn default() -> Self {
        ReorderConfig {
            initial_hold: Duration::from_millis(20),
            min_hold: Duration::from_millis(1),
            max_hold: Duration::from_millis(200),
            max_held_per_flow: 16_384,
            window: 1 << 14,
            restart_after: 3,
        }
    }
}

/// Why a [`ReorderConfig`] is rejected. (Durations are unsigned, so "negative" cannot be expressed.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReorderConfigError {
    /// `min_hold` is zero.
    #[error("reorder: min_hold must be greater than zero")]
    ZeroMinHold,
    /// `max_hold` is below `min_hold`.
    #[error("reorder: max_hold ({max}) is below min_hold ({min})")]
    InvertedBounds {
        /// The configured lower bound.
        min: Duration,
        /// The configured upper bound.
        max: Duration,
    },
    /// `initial_hold` lies outside [`min_hold`, `max_hold`].
    #[error("reorder: initial_hold ({0}) lies outside [min_hold, max_hold]")]
    InitialOutOfBounds(Duration),
    /// `max_held_per_flow` is zero.
    #[error("reorder: max_held_per_flow must be greater than zero")]
    ZeroCapacity,
    /// `window` is zero or not below 2^15 (where serial order is undefined).
    #[error("reorder: window must be in 1..=32767, got {0}")]
    BadWindow(u16),
    /// `restart_after` is zero.
    #[error("reorder: restart_after must be greater than zero")]
    ZeroRestart,
}

impl ReorderConfig {
    /// Checks the bounds; the buffer only accepts a valid configuration.
    pub fn validate(&self) -> Result<(), ReorderConfigError> {
        if self.min_hold == Duration::ZERO {
            return Err(ReorderConfigError::ZeroMinHold);
        }
        if self.max_hold < self.min_hold {
            return Err(ReorderConfigError::InvertedBounds { min: self.min_hold, max: self.max_hold });
        }
        if self.initial_hold < self.min_hold || self.initial_hold > self.max_hold {
            return Err(ReorderConfigError::InitialOutOfBounds(self.initial_hold));
        }
        if self.max_held_per_flow == 0 {
            return Err(ReorderConfigError::ZeroCapacity);
        }
        if self.window == 0 || self.window >= 1 << 15 {
            return Err(ReorderConfigError::BadWindow(self.window));
        }
        if self.restart_after == 0 {
            return Err(ReorderConfigError::ZeroRestart);
        }
        Ok(())
    }
}

/// A packet leaving the buffer, in FSeq order within its flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released<T, F = u64> {
    /// The flow it belongs to.
    pub flow: F,
    /// Its FSeq.
    pub fseq: Seq16,
    /// The host's packet handle.
    pub item: T,
}

/// What [`ReorderBuffer::push`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// In order: released now (with any consecutive held packets).
    InOrder,
    /// Ahead of a gap: held until the gap fills or its deadline passes.
    Held,
    /// Already released or already held: dropped.
    Duplicate,
    /// Behind the expected FSeq but never released (given up on earlier): dropped.
    Late,
    /// Too far from the expected FSeq: dropped.
    OutOfWindow,
    /// Completed a run of out-of-window packets: the flow restarted at this packet, released now.
    Restarted,
}

/// Counters over all flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Packets released.
    pub released: u64,
    /// Packets held right now.
    pub held_now: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Late packets dropped (their FSeq had been skipped).
    pub late: u64,
    /// Missing FSeqs given up on.
    pub skipped: u64,
    /// Gaps closed by the missing packet arriving (recovery-delay samples taken).
    pub recovered: u64,
    /// Gaps given up early because a flow held `max_held_per_flow` packets.
    pub overflow_releases: u64,
    /// Out-of-window packets dropped.
    pub out_of_window: u64,
    /// Flow restarts.
    pub restarts: u64,
    /// Longest time any packet spent held.
    pub max_hold_observed: Duration,
}

/// RFC 6298-style estimator of one flow's recovery delay and in-order inter-arrival time.
///
/// hold = clamp(max(3·R + 4·V, P) + A, min_hold, max_hold), with R, V the smoothed recovery delay
/// and its mean deviation (gains 1/8, 1/4 as SRTT/RTTVAR), P a peak of recent recovery delays that
/// decays by 1/1024 per sample, and A the smoothed in-order inter-arrival time. R + 4·V would be the
/// RTO rule, covering a recovery a few deviations above the mean. Recovery delays are bimodal,
/// though: a lost retransmission costs a second round of detection and resending, rare enough that V
/// never learns it. Giving up on such a gap reorders the flow, which a TCP sender takes for a loss
/// (a window cut), so the hold covers a second attempt, also one found by an upstream backstop timer
/// (a timer of up to 2·R, then the resend: 3·R + 4·V), and the longest recovery seen lately (P).
/// A adds one
/// packet slot: a retransmission rejoins the flow's own FIFO queues, so it can trail the instant it
/// "should" arrive by about one inter-arrival. Before the first recovery sample: `initial_hold`.
#[derive(Clone, Copy, Debug)]
struct Estimator {
    rec: Option<(u64, u64)>,
    /// Decaying peak of recovery samples, ns.
    peak: u64,
    iat: Option<u64>,
    hold: Duration,
}

impl Estimator {
    fn new(cfg: &ReorderConfig) -> Self {
        Estimator { rec: None, peak: 0, iat: None, hold: cfg.initial_hold }
    }

    fn on_recovery(&mut self, sample: Duration, cfg: &ReorderConfig) {
        let r = sample.as_nanos();
        self.rec = Some(match self.rec {
            None => (r, r / 2),
            Some((m, v)) => ((7 * m + r) / 8, (3 * v + m.abs_diff(r)) / 4),
        });
        self.peak = r.max(self.peak - self.peak / 1024);
        self.recompute(cfg);
    }

    /// An interval between two in-order arrivals; longer than `max_hold` is idleness, not spacing.
    fn on_in_order_gap(&mut self, gap: Duration, cfg: &ReorderConfig) {
        if gap > cfg.max_hold {
            return;
        }
        let g = gap.as_nanos();
        self.iat = Some(self.iat.map_or(g, |a| (7 * a + g) / 8));
        self.recompute(cfg);
    }

    fn recompute(&mut self, cfg: &ReorderConfig) {
        if let Some((m, v)) = self.rec {
            let base = m.saturating_mul(3).saturating_add(v.saturating_mul(4)).max(self.peak);
            let raw = base.saturating_add(self.iat.unwrap_or(0));
            self.hold = Duration(raw.clamp(cfg.min_hold.as_nanos(), cfg.max_hold.as_nanos()));
        }
    }
}

/// A held packet.
#[derive(Debug)]
struct Held<T> {
    fseq: Seq16,
    arrived: Instant,
    item: T,
}

/// Per-flow state. FSeqs are mapped to a 64-bit extended counter (`ext`) anchored at the expected
/// FSeq so that held packets sort correctly across the 16-bit wrap.
#[derive(Debug)]
struct Flow<T> {
    next: Seq16,
    next_ext: u64,
    held: BTreeMap<u64, Held<T>>,
    /// (deadline, ext) in arrival order; deadlines made non-decreasing so the front is the earliest.
    deadlines: VecDeque<(Instant, u64)>,
    armed: Option<Instant>,
    history: [u64; (HISTORY_BITS / 64) as usize],
    est: Estimator,
    last_in_order: Option<Instant>,
    last_arrival: Instant,
    /// The last `SKIP_MEMORY` skipped ranges [lo, hi) and when their gap opened (to learn from late
    /// arrivals), as a ring.
    skips: [Option<(u64, u64, Instant)>; SKIP_MEMORY],
    skip_at: usize,
    oow_run: u8,
}

/// Extended counter origin: far from zero so "behind" arithmetic never underflows.
const EXT_ORIGIN: u64 = 1 << 40;

impl<T> Flow<T> {
    fn new(next: Seq16, cfg: &ReorderConfig, now: Instant) -> Self {
        Flow {
            next,
            next_ext: EXT_ORIGIN,
            held: BTreeMap::new(),
            deadlines: VecDeque::new(),
            armed: None,
            history: [0; (HISTORY_BITS / 64) as usize],
            est: Estimator::new(cfg),
            last_in_order: None,
            last_arrival: now,
            skips: [None; SKIP_MEMORY],
            skip_at: 0,
            oow_run: 0,
        }
    }

    fn set_history(&mut self, ext: u64, released: bool) {
        let bit = ext % HISTORY_BITS;
        let (w, b) = ((bit / 64) as usize, bit % 64);
        if released {
            self.history[w] |= 1 << b;
        } else {
            self.history[w] &= !(1 << b);
        }
    }

    fn was_released(&self, ext: u64) -> bool {
        if self.next_ext - ext > HISTORY_BITS {
            return false;
        }
        let bit = ext % HISTORY_BITS;
        self.history[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    /// Emits the packet at `next_ext` and advances by one.
    fn emit<F: Copy>(&mut self, now: Instant, flow: F, item: T, arrived: Instant, ctx: &mut Ctx<'_, T, F>) {
        ctx.out.push_back(Released { flow, fseq: self.next, item });
        ctx.stats.released += 1;
        let waited = now.saturating_duration_since(arrived);
        ctx.stats.max_hold_observed = ctx.stats.max_hold_observed.max(waited);
        self.set_history(self.next_ext, true);
        self.next = self.next.next();
        self.next_ext += 1;
    }

    /// Releases held packets that are now in order.
    fn release_ready<F: Copy>(&mut self, now: Instant, flow: F, ctx: &mut Ctx<'_, T, F>) {
        while let Some(h) = self.held.remove(&self.next_ext) {
            ctx.stats.held_now -= 1;
            debug_assert_eq!(h.fseq, self.next);
            self.emit(now, flow, h.item, h.arrived, ctx);
        }
    }

    /// Gives up on every missing FSeq below `key`, releasing held ones on the way, then whatever is
    /// in order from `key` on.
    fn advance_to<F: Copy>(&mut self, key: u64, now: Instant, flow: F, ctx: &mut Ctx<'_, T, F>) {
        let opened = self.held.first_key_value().map_or(now, |(_, h)| h.arrived);
        let lo = self.next_ext;
        while self.next_ext < key {
            self.release_ready(now, flow, ctx);
            if self.next_ext >= key {
                break;
            }
            // Skip up to the next held packet (or `key`), in one step.
            let stop = self.held.first_key_value().map_or(key, |(&k, _)| k.min(key));
            let n = stop - self.next_ext;
            if n >= HISTORY_BITS {
                self.history = [0; (HISTORY_BITS / 64) as usize];
            } else {
                for e in self.next_ext..stop {
                    self.set_history(e, false);
                }
            }
            ctx.stats.skipped += n;
            self.next = self.next.plus((n % (1 << 16)) as u16);
            self.next_ext = stop;
        }
        if self.next_ext > lo {
            self.skips[self.skip_at] = Some((lo, self.next_ext, opened));
            self.skip_at = (self.skip_at + 1) % SKIP_MEMORY;
        }
        self.release_ready(now, flow, ctx);
    }

    /// Drops deadline entries of packets already released; returns the earliest live deadline.
    fn front_deadline(&mut self) -> Option<Instant> {
        while let Some(&(_, k)) = self.deadlines.front() {
            if k >= self.next_ext && self.held.contains_key(&k) {
                break;
            }
            self.deadlines.pop_front();
        }
        // Held packets whose entries went stale cannot exist: every held packet has one entry.
        self.deadlines.front().map(|&(t, _)| t)
    }
}

/// Mutable parts of the buffer a flow writes to while the flow itself is borrowed.
struct Ctx<'a, T, F> {
    out: &'a mut VecDeque<Released<T, F>>,
    stats: &'a mut ReorderStats,
}

/// The SATGUARD §3.4 order-preserving buffer: many flows, each reordered by FSeq independently.
#[derive(Debug)]
pub struct ReorderBuffer<T, F = u64> {
    cfg: ReorderConfig,
    flows: BTreeMap<F, Flow<T>>,
    timers: BTreeSet<(Instant, F)>,
    out: VecDeque<Released<T, F>>,
    stats: ReorderStats,
}

impl<T, F: Copy + Ord> ReorderBuffer<T, F> {
    /// A buffer with no flows; fails on an invalid configuration.
    pub fn new(cfg: ReorderConfig) -> Result<Self, ReorderConfigError> {
        cfg.validate()?;
        Ok(ReorderBuffer {
            cfg,
            flows: BTreeMap::new(),
            timers: BTreeSet::new(),
            out: VecDeque::new(),
            stats: ReorderStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ReorderConfig {
        &self.cfg
    }

    /// Declares a flow whose next FSeq is known (resets the flow if it exists; held packets are
    /// released first, in order).
    pub fn open_flow(&mut self, now: Instant, flow: F, next: Seq16) {
        self.close_flow(now, flow);
        self.flows.insert(flow, Flow::new(next, &self.cfg, now));
    }

    /// Releases a flow's held packets in order and forgets it.
    pub fn close_flow(&mut self, now: Instant, flow: F) {
        if let Some(mut f) = self.flows.remove(&flow) {
            self.disarm(flow, &mut f);
            let end = f.held.last_key_value().map_or(f.next_ext, |(&k, _)| k + 1);
            f.advance_to(end, now, flow, &mut Ctx { out: &mut self.out, stats: &mut self.stats });
        }
    }

    /// Takes one packet of `flow` numbered `fseq` arriving at `now`; releases go to
    /// [`poll_release`](Self::poll_release). Deadlines up to `now` are handled first.
    pub fn push(&mut self, now: Instant, flow: F, fseq: Seq16, item: T) -> Pushed {
        self.handle_timeout(now);
        let cfg = self.cfg;
        // The flow is worked on in place: moving its state out of the map and back cost more than
        // everything else a packet does here.
        let Some(f) = self.flows.get_mut(&flow) else {
            // A new flow anchors on its first packet (module docs, "Anchoring").
            let mut f = Flow::new(fseq, &cfg, now);
            let mut ctx = Ctx { out: &mut self.out, stats: &mut self.stats };
            f.emit(now, flow, item, now, &mut ctx);
            f.last_in_order = Some(now);
            self.flows.insert(flow, f);
            return Pushed::InOrder;
        };
        f.last_arrival = now;
        let mut ctx = Ctx { out: &mut self.out, stats: &mut self.stats };
        let mut d = fseq.diff(f.next);
        let mut restarted = false;
        if d.unsigned_abs() > u32::from(cfg.window) {
            f.oow_run += 1;
            if f.oow_run < cfg.restart_after {
                ctx.stats.out_of_window += 1;
                return Pushed::OutOfWindow;
            }
            // Restart rule (module docs): flush in order, re-anchor on this packet.
            let end = f.held.last_key_value().map_or(f.next_ext, |(&k, _)| k + 1);
            f.advance_to(end, now, flow, &mut ctx);
            f.deadlines.clear();
            // Jump the extended counter past anything remembered so history cannot alias.
            f.next_ext += 2 * HISTORY_BITS;
            f.history = [0; (HISTORY_BITS / 64) as usize];
            f.skips = [None; SKIP_MEMORY];
            f.last_in_order = None;
            f.next = fseq;
            ctx.stats.restarts += 1;
            restarted = true;
            d = 0;
        }
        f.oow_run = 0;
        let outcome = if d < 0 {
            let ext = f.next_ext - u64::from(d.unsigned_abs());
            if f.was_released(ext) {
                ctx.stats.duplicates += 1;
                Pushed::Duplicate
            } else {
                // A late arrival is a recovery the hold was too short for: learn from it.
                if let Some((_, _, opened)) = f.skips.iter().flatten().find(|s| (s.0..s.1).contains(&ext)) {
                    f.est.on_recovery(now.saturating_duration_since(*opened), &cfg);
                }
                ctx.stats.late += 1;
                Pushed::Late
            }
        } else if d == 0 {
            if let Some((_, h)) = f.held.first_key_value() {
                // This packet closes the head gap: a recovery-delay sample (§3.4).
                let sample = now.saturating_duration_since(h.arrived);
                f.est.on_recovery(sample, &cfg);
                ctx.stats.recovered += 1;
                f.last_in_order = None;
            } else if let Some(prev) = f.last_in_order {
                f.est.on_in_order_gap(now.saturating_duration_since(prev), &cfg);
            }
            f.emit(now, flow, item, now, &mut ctx);
            f.release_ready(now, flow, &mut ctx);
            if f.held.is_empty() {
                f.last_in_order = Some(now);
            }
            if restarted {
                Pushed::Restarted
            } else {
                Pushed::InOrder
            }
        } else {
            let ext = f.next_ext + u64::from(d.unsigned_abs());
            if let std::collections::btree_map::Entry::Vacant(slot) = f.held.entry(ext) {
                slot.insert(Held { fseq, arrived: now, item });
                ctx.stats.held_now += 1;
                let deadline = now + f.est.hold;
                let deadline = f.deadlines.back().map_or(deadline, |&(t, _)| t.max(deadline));
                f.deadlines.push_back((deadline, ext));
                if f.deadlines.len() > 2 * cfg.max_held_per_flow + 64 {
                    // Stale entries (packets released since) pile up behind a live front: compact.
                    let (held, next_ext) = (&f.held, f.next_ext);
                    f.deadlines.retain(|&(_, k)| k >= next_ext && held.contains_key(&k));
                }
                while f.held.len() > cfg.max_held_per_flow {
                    // Memory bound: give up the oldest gap early.
                    let first = *f.held.first_key_value().expect("held is over capacity, so not empty").0;
                    f.advance_to(first, now, flow, &mut ctx);
                    ctx.stats.overflow_releases += 1;
                }
                Pushed::Held
            } else {
                ctx.stats.duplicates += 1;
                Pushed::Duplicate
            }
        };
        rearm(&mut self.timers, flow, f);
        outcome
    }

    fn disarm(&mut self, flow: F, f: &mut Flow<T>) {
        if let Some(t) = f.armed.take() {
            self.timers.remove(&(t, flow));
        }
    }

    fn rearm(&mut self, flow: F, f: &mut Flow<T>) {
        rearm(&mut self.timers, flow, f);
    }

    /// Moves every hold deadline (and the arrival times recovery delays are measured from) `by` later:
    /// the host's link into the buffer was down for that long (a handover interruption), so nothing
    /// could arrive, and the time must neither expire holds nor count as recovery delay.
    pub fn shift_deadlines(&mut self, by: Duration) {
        if by == Duration::ZERO {
            return;
        }
        self.timers.clear();
        for (&flow, f) in &mut self.flows {
            for d in &mut f.deadlines {
                d.0 += by;
            }
            for h in f.held.values_mut() {
                h.arrived += by;
            }
            for s in f.skips.iter_mut().flatten() {
                s.2 += by;
            }
            f.armed = f.front_deadline();
            if let Some(t) = f.armed {
                self.timers.insert((t, flow));
            }
        }
    }

    /// Next released packet, in FSeq order within its flow.
    pub fn poll_release(&mut self) -> Option<Released<T, F>> {
        self.out.pop_front()
    }

    /// Earliest deadline of any held packet.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// Gives up on gaps whose deadline is at or before `now` (only the flows concerned are touched).
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, flow)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            let Some(mut f) = self.flows.remove(&flow) else { continue };
            f.armed = None;
            let mut ctx = Ctx { out: &mut self.out, stats: &mut self.stats };
            while let Some(&(d, key)) = f.deadlines.front() {
                if d > now {
                    break;
                }
                f.deadlines.pop_front();
                if key >= f.next_ext && f.held.contains_key(&key) {
                    f.advance_to(key, now, flow, &mut ctx);
                }
            }
            if f.held.is_empty() {
                f.last_in_order = None;
            }
            self.rearm(flow, &mut f);
            self.flows.insert(flow, f);
        }
    }

    /// Releases every held packet of every flow in order (end of a run).
    pub fn flush(&mut self, now: Instant) {
        let ids: Vec<F> = self.flows.keys().copied().collect();
        for flow in ids {
            if let Some(mut f) = self.flows.remove(&flow) {
                self.disarm(flow, &mut f);
                let end = f.held.last_key_value().map_or(f.next_ext, |(&k, _)| k + 1);
                f.advance_to(end, now, flow, &mut Ctx { out: &mut self.out, stats: &mut self.stats });
                f.deadlines.clear();
                self.flows.insert(flow, f);
            }
        }
    }

    /// Forgets flows that hold nothing and saw no packet for `idle`; returns how many.
    pub fn remove_idle(&mut self, now: Instant, idle: Duration) -> usize {
        let before = self.flows.len();
        self.flows.retain(|_, f| !(f.held.is_empty() && now.saturating_duration_since(f.last_arrival) >= idle));
        before - self.flows.len()
    }

    /// Counters.
    pub fn stats(&self) -> &ReorderStats {
        &self.stats
    }

    /// Number of flows tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Current hold time of `flow`.
    pub fn hold(&self, flow: &F) -> Option<Duration> {
        self.flows.get(flow).map(|f| f.est.hold)
    }

    /// Current hold time of every flow, in flow order.
    pub fn holds(&self) -> impl Iterator<Item = (F, Duration)> + '_ {
        self.flows.iter().map(|(&k, f)| (k, f.est.hold))
    }

    /// Packets `flow` holds now.
    pub fn held(&self, flow: &F) -> usize {
        self.flows.get(flow).map_or(0, |f| f.held.len())
    }

    /// The next FSeq `flow` expects.
    pub fn expected(&self, flow: &F) -> Option<Seq16> {
        self.flows.get(flow).map(|f| f.next)
    }
}

/// Arms the flow's timer at its earliest deadline (disarming a different one).
fn rearm<T, F: Copy + Ord>(timers: &mut BTreeSet<(Instant, F)>, flow: F, f: &mut Flow<T>) {
    let want = f.front_deadline();
    if want != f.armed {
        if let Some(t) = f.armed.take() {
            timers.remove(&(t, flow));
        }
        if let Some(t) = want {
            timers.insert((t, flow));
            f.armed = Some(t);
        }
    }
}

#[cfg(test)]
mod tests;
