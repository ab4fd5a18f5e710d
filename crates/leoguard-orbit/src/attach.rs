//! Attachment (handover) policies for terminals and gateways, the interruption each handover brings,
//! and the connectivity cache (which satellite serves which ground node when) that SATGUARD reads.

use crate::constellation::Constellation;
use crate::error::OrbitError;
use crate::geo::{distance, light_delay_s, Vec3};
use crate::ground::{GroundNode, VisibilityFilter};
use leoguard_core::{stream, RngStream};

/// How the best satellite of a slot is chosen under the global schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotCriterion {
    /// Highest elevation at the slot start (default).
    HighestElevation,
    /// Shortest slant range at the slot start.
    Nearest,
    /// Lowest mean end-to-end delay to the peer over the slot, both ends chosen jointly
    /// ([`crate::slotplan`]); needs a peer, so only a pair's path timeline can use it.
    PathAware,
}

/// Names accepted by [`SlotCriterion::parse`], in [`SlotCriterion`] order.
pub const SLOT_CRITERIA: &[&str] = &["highest-elevation", "nearest", "path-aware"];

impl SlotCriterion {
    /// Parses a criterion name (`slot_criterion` in scenarios and the Python API).
    pub fn parse(name: &str) -> Result<SlotCriterion, OrbitError> {
        match name {
            "highest-elevation" => Ok(SlotCriterion::HighestElevation),
            "nearest" => Ok(SlotCriterion::Nearest),
            "path-aware" => Ok(SlotCriterion::PathAware),
            _ => {
                Err(OrbitError::Unknown { kind: "slot_criterion", name: name.into(), known: SLOT_CRITERIA.join(", ") })
            }
        }
    }

    /// Canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotCriterion::HighestElevation => SLOT_CRITERIA[0],
            SlotCriterion::Nearest => SLOT_CRITERIA[1],
            SlotCriterion::PathAware => SLOT_CRITERIA[2],
        }
    }
}

/// A ground node's attachment policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    /// Starlink's synchronised schedule: re-assignment only at epochs `phase + k * period`.
    GlobalSchedule {
        /// Slot length, seconds (Starlink: 15).
        period_s: f64,
        /// Offset of the first epoch from time zero, seconds.
        phase_s: f64,
        /// Which satellite is best for a slot.
        criterion: SlotCriterion,
    },
    /// The nearest visible satellite at every step.
    Nearest,
    /// The satellite minimising end-to-end delay to the peer (Hypatia's choice); decided by routing.
    BestPath,
}

/// Shortest global-schedule slot, seconds.
pub const MIN_PERIOD_S: f64 = 1e-3;
/// Longest global-schedule slot (and latest first epoch), seconds: one day.
pub const MAX_PERIOD_S: f64 = 86_400.0;

/// Names accepted by [`Policy::parse`].
pub const POLICIES: &[&str] = &["global-schedule", "nearest", "best-path"];

impl Policy {
    /// Starlink's schedule: 15 s slots, boundaries at seconds 12/27/42/57 of each UTC minute
    /// (REFERENCE.md), given the run's epoch as a Unix time.
    pub fn starlink(epoch_unix_s: f64) -> Policy {
        Policy::GlobalSchedule {
            period_s: 15.0,
            phase_s: (12.0 - epoch_unix_s).rem_euclid(15.0),
            criterion: SlotCriterion::HighestElevation,
        }
    }

    /// Parses a policy name; `global-schedule` gets Starlink's defaults for `epoch_unix_s`.
    pub fn parse(name: &str, epoch_unix_s: f64) -> Result<Policy, OrbitError> {
        match name {
            "global-schedule" => Ok(Policy::starlink(epoch_unix_s)),
            "nearest" => Ok(Policy::Nearest),
            "best-path" => Ok(Policy::BestPath),
            _ => Err(OrbitError::Unknown { kind: "handover policy", name: name.into(), known: POLICIES.join(", ") }),
        }
    }

    /// Whether a node's attachment depends on its peer (so a peerless connectivity cache cannot
    /// compute it): `best-path`, and the global schedule with the `path-aware` criterion.
    pub fn needs_peer(&self) -> bool {
        matches!(self, Policy::BestPath | Policy::GlobalSchedule { criterion: SlotCriterion::PathAware, .. })
    }

    /// The error a peerless computation (connectivity cache, whole-constellation topology) gives for
    /// a policy that [`Policy::needs_peer`].
    pub fn peer_error(&self) -> OrbitError {
        match self {
            Policy::BestPath => OrbitError::invalid("policy", "best-path", "depends on a peer; use a path timeline"),
            _ => OrbitError::invalid(
                "slot_criterion",
                "path-aware",
                "depends on the peer's path; use a path timeline (leo-path), or highest-elevation or nearest",
            ),
        }
    }

    /// Checks the schedule's numbers.
    pub fn validate(&self) -> Result<(), OrbitError> {
        if let Policy::GlobalSchedule { period_s, phase_s, .. } = *self {
            // Bounded so that slot indices (t - phase) / period stay far from i64's range and a
            // slot's end stays near the run.
            if !(period_s.is_finite() && period_s > 0.0) {
                return Err(OrbitError::invalid("handover_period_s", period_s, "must be finite and > 0"));
            }
            if !(MIN_PERIOD_S..=MAX_PERIOD_S).contains(&period_s) {
                return Err(OrbitError::invalid("handover_period_s", period_s, "must be in [0.001, 86400] s"));
            }
            if !(phase_s.is_finite() && (0.0..=MAX_PERIOD_S).contains(&phase_s)) {
                return Err(OrbitError::invalid("handover_phase_s", phase_s, "must be finite and in [0, 86400] s"));
            }
        }
        Ok(())
    }
}

/// How long the link is interrupted at a handover.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InterruptionModel {
    /// No interruption.
    None,
    /// A fixed duration, seconds.
    Fixed(f64),
    /// Uniform in [lo, hi] seconds (StarTCP measured 30-200 ms).
    Uniform(f64, f64),
    /// 3 * (one-way delay to the old satellite + one-way delay to the new one).
    ThreeOwd,
}

impl InterruptionModel {
    /// StarTCP's measurement: uniform in [30 ms, 200 ms].
    pub const STARTCP: InterruptionModel = InterruptionModel::Uniform(0.030, 0.200);

    /// Checks the durations.
    pub fn validate(&self) -> Result<(), OrbitError> {
        match *self {
            InterruptionModel::Fixed(d) if !(d.is_finite() && d >= 0.0) => {
                Err(OrbitError::invalid("interruption_s", d, "must be >= 0"))
            }
            InterruptionModel::Uniform(lo, hi) if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) => {
                Err(OrbitError::invalid("interruption_range_s", format!("[{lo}, {hi}]"), "needs 0 <= lo <= hi"))
            }
            _ => Ok(()),
        }
    }

    fn draw(&self, rng: &mut RngStream, d_old_s: f64, d_new_s: f64) -> f64 {
        match *self {
            InterruptionModel::None => 0.0,
            InterruptionModel::Fixed(d) => d,
            InterruptionModel::Uniform(lo, hi) => rng.uniform_range(lo, hi),
            InterruptionModel::ThreeOwd => 3.0 * (d_old_s + d_new_s),
        }
    }
}

/// Why a ground node changed satellite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverReason {
    /// A scheduled epoch of the global schedule.
    Epoch,
    /// The serving satellite set (fell below the minimum elevation) mid-slot.
    LostVisibility,
    /// A nearer satellite appeared (`nearest` policy).
    Nearer,
    /// A satellite with a shorter end-to-end path (`best-path` policy).
    BetterPath,
    /// Re-attached after a time with no satellite in view.
    Reacquired,
    /// No satellite is in view any more.
    NoSatellite,
}

impl HandoverReason {
    /// Canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            HandoverReason::Epoch => "epoch",
            HandoverReason::LostVisibility => "lost-visibility",
            HandoverReason::Nearer => "nearer",
            HandoverReason::BetterPath => "better-path",
            HandoverReason::Reacquired => "reacquired",
            HandoverReason::NoSatellite => "no-satellite",
        }
    }
}

/// One change of serving satellite.
#[derive(Clone, Debug, PartialEq)]
pub struct Handover {
    /// When, seconds after the epoch.
    pub t_s: f64,
    /// Index of the ground node (in the caller's list).
    pub node: u32,
    /// Previous satellite.
    pub from: Option<u32>,
    /// New satellite.
    pub to: Option<u32>,
    /// Why.
    pub reason: HandoverReason,
    /// Link interruption it causes, seconds.
    pub interruption_s: f64,
}

/// A row of the connectivity cache: `sat` serves `node` during [start, end).
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// Ground node index.
    pub node: u32,
    /// Serving satellite.
    pub sat: u32,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
}

/// Memo of satellite positions at a few exact instants (slot epochs and ends), shared by attachers.
#[derive(Debug, Default)]
pub struct PositionMemo {
    entries: Vec<(u64, Vec<Vec3>)>,
}

impl PositionMemo {
    /// Positions at `t` (computed once per distinct nanosecond instant; keeps the 4 latest).
    pub fn at(&mut self, c: &Constellation, t: f64) -> Result<&[Vec3], OrbitError> {
        let key = (t * 1e9).round() as u64;
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            return Ok(&self.entries[i].1);
        }
        let pos = c.positions(t)?;
        if self.entries.len() >= 4 {
            self.entries.remove(0);
        }
        self.entries.push((key, pos));
        Ok(&self.entries[self.entries.len() - 1].1)
    }
}

/// A choice an attacher under the global schedule must make at a step: the satellite for the rest of
/// the slot `[at, slot_end)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotChoice {
    /// Index `k` of the slot (epoch `phase + k * period`).
    pub slot: i64,
    /// When the chosen satellite takes over, seconds: the epoch, or now (run start, mid-slot loss).
    pub at: f64,
    /// End of the slot, seconds.
    pub slot_end: f64,
    /// `Epoch`, `LostVisibility` or `Reacquired`.
    pub reason: HandoverReason,
}

/// Satellites visible from `ground` at `now` and at the slot's `end` (so in view for the whole slot, a
/// pass being one contiguous interval) into `out` as (satellite, slant range now); if none stays,
/// every satellite visible now.
pub fn slot_pool(f: &VisibilityFilter, ground: Vec3, now: &[Vec3], end: &[Vec3], out: &mut Vec<(u32, f64)>) {
    f.visible_into(ground, now, out);
    if out.iter().any(|&(s, _)| f.visible(ground, end[s as usize])) {
        out.retain(|&(s, _)| f.visible(ground, end[s as usize]));
    }
}

/// Tracks one ground node's serving satellite through time under a policy.
#[derive(Debug)]
pub struct Attacher {
    node: u32,
    ground: Vec3,
    policy: Policy,
    interruption: InterruptionModel,
    rng: RngStream,
    current: Option<u32>,
    started: bool,
    slot: Option<i64>,
    since: f64,
    vis: Vec<(u32, f64)>,
    /// The satellite a pair's planner chose for the pending choice (`path-aware` only).
    planned: Option<Option<u32>>,
    /// Closed slots so far (the connectivity cache).
    pub slots: Vec<Slot>,
}

impl Attacher {
    /// An attacher for ground node `node` (index in the caller's list); its interruption draws come
    /// from the stream `handover/<name>` of `seed`.
    pub fn new(node: u32, g: &GroundNode, policy: Policy, interruption: InterruptionModel, seed: u64) -> Self {
        Attacher {
            node,
            ground: g.ecef(),
            policy,
            interruption,
            rng: stream(seed, &format!("handover/{}", g.name)),
            current: None,
            started: false,
            slot: None,
            since: 0.0,
            vis: Vec::new(),
            planned: None,
            slots: Vec::new(),
        }
    }

    /// The satellite serving now.
    pub fn current(&self) -> Option<u32> {
        self.current
    }

    /// Advances to time `t` with satellite positions `pos` (at `t`), appending any handover to `events`.
    /// Not for `BestPath`, whose attachments come from routing through [`Attacher::set`].
    pub fn step(
        &mut self,
        c: &Constellation,
        memo: &mut PositionMemo,
        filter: &VisibilityFilter,
        t: f64,
        pos: &[Vec3],
        events: &mut Vec<Handover>,
    ) -> Result<Option<u32>, OrbitError> {
        match self.policy {
            Policy::GlobalSchedule { criterion, .. } => {
                if let Some(ch) = self.pending(filter, t, pos) {
                    self.slot = Some(ch.slot);
                    // A new slot is chosen at the exact epoch (or now, if the run starts mid-slot).
                    let pos_at =
                        if ch.reason == HandoverReason::Epoch { memo.at(c, ch.at)?.to_vec() } else { pos.to_vec() };
                    let pick = match criterion {
                        SlotCriterion::PathAware => self.planned.take().ok_or_else(|| self.policy.peer_error())?,
                        crit => {
                            let end = memo.at(c, ch.slot_end)?.to_vec();
                            self.best_for_slot(filter, &pos_at, &end, crit)
                        }
                    };
                    self.switch(ch.at, pick, ch.reason, &pos_at, events);
                }
            }
            Policy::Nearest => {
                filter.visible_into(self.ground, pos, &mut self.vis);
                let pick = self.vis.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|v| v.0);
                let still = self.current.is_some_and(|c| self.vis.iter().any(|v| v.0 == c));
                let reason = if still { HandoverReason::Nearer } else { HandoverReason::LostVisibility };
                self.switch(t, pick, reason, pos, events);
            }
            Policy::BestPath => {}
        }
        Ok(self.current)
    }

    /// The choice this node must make at `t` under the global schedule (a new slot, the serving
    /// satellite set, or a satellite to reacquire); None when it keeps its satellite or under
    /// another policy. [`Attacher::step`] acts on exactly this.
    pub fn pending(&self, f: &VisibilityFilter, t: f64, pos: &[Vec3]) -> Option<SlotChoice> {
        let Policy::GlobalSchedule { period_s, phase_s, .. } = self.policy else {
            return None;
        };
        let k = self.slot_of(t)?;
        let epoch = phase_s + k as f64 * period_s;
        let slot_end = epoch + period_s;
        let reason = if self.slot != Some(k) {
            HandoverReason::Epoch
        } else {
            match self.current {
                Some(cur) if f.visible(self.ground, pos[cur as usize]) => return None,
                Some(_) => HandoverReason::LostVisibility,
                None => HandoverReason::Reacquired,
            }
        };
        let at = if reason == HandoverReason::Epoch && self.slot.is_some() { epoch.max(0.0) } else { t };
        Some(SlotChoice { slot: k, at, slot_end, reason })
    }

    /// Index of the global-schedule slot holding time `t` (None under other policies).
    pub fn slot_of(&self, t: f64) -> Option<i64> {
        match self.policy {
            Policy::GlobalSchedule { period_s, phase_s, .. } => Some(((t - phase_s) / period_s).floor() as i64),
            _ => None,
        }
    }

    /// Hands in the satellite a pair's planner chose for the [`Attacher::pending`] choice at this
    /// step (`path-aware`); the next [`Attacher::step`] takes it.
    pub fn plan(&mut self, sat: Option<u32>) {
        self.planned = Some(sat);
    }

    /// The ground node's position (ECEF, metres).
    pub fn ground(&self) -> Vec3 {
        self.ground
    }

    /// Sets the serving satellite directly (used by `best-path` routing).
    pub fn set(&mut self, f: &VisibilityFilter, t: f64, sat: Option<u32>, pos: &[Vec3], events: &mut Vec<Handover>) {
        let reason = match self.current {
            Some(cur) if !f.visible(self.ground, pos[cur as usize]) => HandoverReason::LostVisibility,
            _ => HandoverReason::BetterPath,
        };
        self.switch(t, sat, reason, pos, events);
    }

    /// The best of [`slot_pool`] by `crit` (highest elevation or nearest at `now`).
    fn best_for_slot(&mut self, f: &VisibilityFilter, now: &[Vec3], end: &[Vec3], crit: SlotCriterion) -> Option<u32> {
        let g = self.ground;
        slot_pool(f, g, now, end, &mut self.vis);
        match crit {
            SlotCriterion::Nearest => self.vis.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|v| v.0),
            // Path-aware picks come from the pair's planner (`step` never asks here for them).
            SlotCriterion::HighestElevation | SlotCriterion::PathAware => self
                .vis
                .iter()
                .map(|&(s, _)| (s, crate::geo::elevation_deg(g, now[s as usize])))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|v| v.0),
        }
    }

    fn switch(&mut self, t: f64, to: Option<u32>, reason: HandoverReason, pos: &[Vec3], events: &mut Vec<Handover>) {
        if !self.started {
            // The initial attachment at the start of a run is not a handover.
            self.started = true;
            self.current = to;
            self.since = t;
            return;
        }
        if to == self.current {
            return;
        }
        let from = self.current;
        if let Some(f) = from {
            if t > self.since {
                self.slots.push(Slot { node: self.node, sat: f, start_s: self.since, end_s: t });
            }
        }
        let delay = |s: Option<u32>| s.map_or(0.0, |s| light_delay_s(distance(self.ground, pos[s as usize])));
        let interruption = if from.is_some() && to.is_some() {
            self.interruption.draw(&mut self.rng, delay(from), delay(to))
        } else {
            0.0
        };
        let reason = match (from, to) {
            (_, None) => HandoverReason::NoSatellite,
            (None, Some(_)) => HandoverReason::Reacquired,
            _ => reason,
        };
        events.push(Handover { t_s: t, node: self.node, from, to, reason, interruption_s: interruption });
        self.current = to;
        self.since = t;
    }

    /// Closes the open slot at `end` so that [`Attacher::slots`] covers the whole run.
    pub fn finish(&mut self, end: f64) {
        if let Some(cur) = self.current {
            if end > self.since {
                self.slots.push(Slot { node: self.node, sat: cur, start_s: self.since, end_s: end });
            }
        }
        self.since = end;
    }
}
