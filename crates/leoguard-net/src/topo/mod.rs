//! Topologies as both engines build them: explicit links (chain, dumbbell, two-path), a LEO path from
//! the constellation engine's path timeline, or a whole constellation. Each is written once against
//! [`NetBuilder`], which the simulator and the emulator implement; time-varying parts are scheduled
//! [`Control`]s or a [`Driver`] that computes them as the run goes.

pub mod access;
pub mod constellation;
pub mod leo;

use crate::link::{LinkId, NodeId, QueueLimit, RateSchedule};
use crate::loss::{LossError, LossModel, LossSpec};
use leoguard_core::{Bps, Duration, Instant};
use std::collections::VecDeque;

/// One control action applied at a scheduled time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Node `at` forwards traffic for `dst` on `via` from now on.
    Route {
        /// Forwarding node.
        at: NodeId,
        /// Destination.
        dst: NodeId,
        /// Outgoing link; `None` removes the route (packets are dropped as "no-route").
        via: Option<LinkId>,
    },
    /// A link's propagation delay becomes `delay` for packets that start propagating from now on.
    Delay {
        /// The link.
        link: LinkId,
        /// New delay.
        delay: Duration,
    },
    /// A link's capacity becomes `rate` for packets that start serialising from now on (a GSL's
    /// capacity over a satellite pass).
    Rate {
        /// The link.
        link: LinkId,
        /// New capacity.
        rate: Bps,
    },
    /// A link goes up or down.
    State {
        /// The link.
        link: LinkId,
        /// New state.
        up: bool,
    },
}

/// A source of topology changes computed as the run goes (e.g. the constellation's snapshot routing):
/// at each of its update times it appends the changes to apply and says when it next wants to run.
pub trait Driver: std::fmt::Debug + Send {
    /// Appends the changes due at `now` to `out`; returns the next update time, if any.
    fn step(&mut self, now: Instant, out: &mut Vec<Control>) -> Option<Instant>;
    /// A problem that stopped the driver early (the topology then stays as it was).
    fn error(&self) -> Option<String> {
        None
    }
    /// Destinations whose next hops `step` leaves out: an engine that can ask for them when it
    /// forwards a packet there calls [`Driver::refresh`] then (the simulator: most never see a packet,
    /// or see one only late in a run); one that cannot calls [`Driver::step_all`].
    fn lazy_dests(&self) -> Vec<u32> {
        Vec::new()
    }
    /// Appends the route changes towards lazy destination `dst` as of the latest step: what `step`
    /// would have emitted for it then (nothing before the first step).
    fn refresh(&mut self, _dst: u32, _out: &mut Vec<Control>) {}
    /// `step`, then the routes towards every lazy destination: every change due at `now`.
    fn step_all(&mut self, now: Instant, out: &mut Vec<Control>) -> Option<Instant> {
        let next = self.step(now, out);
        for d in self.lazy_dests() {
            self.refresh(d, out);
        }
        next
    }
}

/// What a topology needs from an engine to build itself into it.
pub trait NetBuilder {
    /// Adds a one-way link and returns its id (ids are dense, in creation order).
    fn add_link(&mut self, from: NodeId, to: NodeId, rate: Bps, delay: Duration, limit: QueueLimit) -> LinkId;
    /// Attaches a loss model to a link.
    fn set_loss(&mut self, link: LinkId, loss: Box<dyn LossModel>);
    /// Makes a link's capacity follow a periodic schedule (from t = 0 of the run).
    fn set_rate_schedule(&mut self, link: LinkId, schedule: RateSchedule);
    /// Sets a link's state before the run starts.
    fn set_initial_state(&mut self, link: LinkId, up: bool);
    /// A link's current propagation delay.
    fn link_delay(&self, link: LinkId) -> Duration;
    /// Number of links so far.
    fn link_count(&self) -> usize;
    /// Sets node `at`'s next hop towards `dst`.
    fn route(&mut self, at: NodeId, dst: NodeId, via: LinkId);
    /// Applies `actions` at `at`.
    fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>);
    /// Installs the topology driver, first run at `first`.
    fn set_driver(&mut self, driver: Box<dyn Driver>, first: Instant);
}

/// A bidirectional link between two nodes (each direction has its own queue; loss may differ).
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One end.
    pub a: u32,
    /// Other end.
    pub b: u32,
    /// Capacity of each direction (with `rate_schedule`, the nominal rate: the link rows' `rate_bps`
    /// and the per-hop schemes' estimates).
    pub rate: Bps,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Queue limit of each direction.
    pub queue: QueueLimit,
    /// Loss on a -> b.
    pub loss_ab: LossSpec,
    /// Loss on b -> a.
    pub loss_ba: LossSpec,
    /// A periodic capacity of both directions instead of the constant `rate` (LEOTP Fig 14's square
    /// wave; [`RateSchedule`]).
    pub rate_schedule: Option<RateSchedule>,
}

/// A scheduled change of a link (both directions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkEvent {
    /// When.
    pub at: Instant,
    /// Index into the scenario's links.
    pub link: usize,
    /// New state.
    pub up: bool,
}

/// A scheduled route change: from `at` on, node `node` sends traffic for `dst` over link `link` (in
/// the direction leaving `node`); `link: None` removes the route.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteEvent {
    /// When.
    pub at: Instant,
    /// Forwarding node.
    pub node: u32,
    /// Destination node.
    pub dst: u32,
    /// Index into the scenario's links, or None.
    pub link: Option<usize>,
}

/// The network part of a scenario, borrowed from it: explicit links, or a LEO path, or a constellation.
#[derive(Clone, Copy, Debug)]
pub struct Topology<'a> {
    /// Number of nodes (ids 0..nodes).
    pub nodes: u32,
    /// Explicit links.
    pub links: &'a [LinkSpec],
    /// Scheduled link state changes.
    pub events: &'a [LinkEvent],
    /// Scheduled route changes (after the initial shortest-hop routes).
    pub routes: &'a [RouteEvent],
    /// A LEO path instead of `links`.
    pub leo: Option<&'a leo::LeoPath>,
    /// A whole constellation instead of `links`.
    pub constellation: Option<&'a constellation::ConstellationTopo>,
}

/// A scenario or its topology that cannot run; the message names the field (the simulator's
/// `ScenarioError` is this type).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TopologyError {
    /// A field is invalid.
    #[error("invalid {field} = {value}: {reason}")]
    Invalid {
        /// Field path, e.g. `links[2].rate_bps`.
        field: String,
        /// The value.
        value: String,
        /// The rule.
        reason: String,
    },
    /// The LEO path is invalid.
    #[error(transparent)]
    Leo(#[from] leo::LeoError),
    /// The constellation topology is invalid.
    #[error(transparent)]
    Topo(#[from] constellation::TopoError),
    /// A loss model is invalid.
    #[error("{field}: {source}")]
    Loss {
        /// Field path of the loss model.
        field: String,
        /// The loss model's error.
        source: LossError,
    },
}

/// The largest link rate either engine accepts: 10 Tbit/s (a typo such as 1e12 Mbit/s must not pass).
pub const MAX_LINK_RATE: Bps = Bps(10_000_000_000_000);

fn invalid(field: String, value: impl ToString, reason: &str) -> TopologyError {
    TopologyError::Invalid { field, value: value.to_string(), reason: reason.to_string() }
}

/// Every link rate, explicit or given by a LEO path or constellation, must be in (0, MAX_LINK_RATE].
fn check_rate(field: impl FnOnce() -> String, rate: Bps) -> Result<(), TopologyError> {
    if rate.0 == 0 || rate > MAX_LINK_RATE {
        return Err(invalid(field(), rate.0, "must be in (0, 10 Tbit/s]"));
    }
    Ok(())
}

/// Most steps a rate schedule may have (a typo such as a per-millisecond table must not pass).
pub const MAX_SCHEDULE_STEPS: usize = 100_000;

/// A rate schedule needs at least one step, each step's rate in (0, MAX_LINK_RATE] and at least 1 µs
/// per step; `field` is the schedule's path, e.g. `links[1].rate_schedule`.
pub fn check_schedule(field: &str, s: &RateSchedule) -> Result<(), TopologyError> {
    let n = s.rates.len();
    if n == 0 || n > MAX_SCHEDULE_STEPS {
        return Err(invalid(
            format!("{field}.rates_bps"),
            format!("{n} steps"),
            &format!("needs 1 to {MAX_SCHEDULE_STEPS} steps"),
        ));
    }
    for (j, &r) in s.rates.iter().enumerate() {
        check_rate(|| format!("{field}.rates_bps[{j}]"), r)?;
    }
    if s.period.as_nanos() < 1_000 * n as u64 {
        return Err(invalid(
            format!("{field}.period_s"),
            s.period.as_secs_f64(),
            "must be > 0, with at least 1 µs per step",
        ));
    }
    Ok(())
}

/// What building a topology produced.
#[derive(Debug, Default)]
pub struct Built {
    /// What the constellation tells in-network schemes (constellation topologies only).
    pub info: Option<constellation::TopoInfo>,
    /// Per explicit link: its (a -> b, b -> a) directions.
    pub pairs: Vec<(LinkId, LinkId)>,
}

impl Topology<'_> {
    /// Checks every field; errors name it.
    pub fn validate(&self) -> Result<(), TopologyError> {
        if let Some(leo) = self.leo {
            leo.validate()?;
            check_rate(|| "leo.rate_bps".into(), leo.rate)?;
            if !self.links.is_empty() || !self.events.is_empty() {
                return Err(invalid(
                    "links".into(),
                    self.links.len(),
                    "a LEO-path scenario takes its links from the path",
                ));
            }
            if self.nodes as usize != leo.node_count() {
                return Err(invalid("nodes".into(), self.nodes, "must equal the LEO path's node count"));
            }
        }
        if let Some(c) = self.constellation {
            c.validate()?;
            check_rate(|| "topology.gsl_rate_bps".into(), c.gsl_rate)?;
            check_rate(|| "topology.isl_rate_bps".into(), c.isl_rate)?;
            for (i, h) in c.hosts.iter().enumerate() {
                check_rate(|| format!("topology.hosts[{i}].rate_bps"), h.rate)?;
            }
            if self.leo.is_some() || !self.links.is_empty() || !self.events.is_empty() || !self.routes.is_empty() {
                return Err(invalid(
                    "links".into(),
                    self.links.len(),
                    "a constellation scenario takes its links and routes from the constellation",
                ));
            }
            if self.nodes as usize != c.node_count() {
                return Err(invalid("nodes".into(), self.nodes, "must equal the constellation's node count"));
            }
        }
        if self.nodes < 2 {
            return Err(invalid("nodes".into(), self.nodes, "needs at least 2 nodes"));
        }
        for (i, l) in self.links.iter().enumerate() {
            if l.a >= self.nodes || l.b >= self.nodes || l.a == l.b {
                return Err(invalid(
                    format!("links[{i}]"),
                    format!("{}-{}", l.a, l.b),
                    "ends must be two different existing nodes",
                ));
            }
            check_rate(|| format!("links[{i}].rate_bps"), l.rate)?;
            if let Some(rs) = &l.rate_schedule {
                check_schedule(&format!("links[{i}].rate_schedule"), rs)?;
            }
            if matches!(l.queue, QueueLimit::Bytes(0) | QueueLimit::Packets(0)) {
                return Err(invalid(format!("links[{i}].queue"), 0, "must be > 0"));
            }
            for (dir, spec) in [("loss", &l.loss_ab), ("loss_reverse", &l.loss_ba)] {
                spec.validate().map_err(|source| TopologyError::Loss { field: format!("links[{i}].{dir}"), source })?;
            }
        }
        for (i, e) in self.events.iter().enumerate() {
            if e.link >= self.links.len() {
                return Err(invalid(format!("events[{i}].link"), e.link, "is not a link index"));
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            if r.node >= self.nodes || r.dst >= self.nodes {
                return Err(invalid(format!("routes[{i}]"), format!("{} -> {}", r.node, r.dst), "not a node"));
            }
            if let Some(l) = r.link {
                let ok = self.links.get(l).is_some_and(|x| x.a == r.node || x.b == r.node);
                if !ok {
                    return Err(invalid(format!("routes[{i}].link"), l, "is not a link index with an end at node"));
                }
            }
        }
        Ok(())
    }

    /// Builds the topology into `b`: the LEO path or constellation (with next hops towards
    /// `endpoints` and towards the satellites serving the ground nodes `serving_of`), then the
    /// explicit links with shortest-hop routes and their scheduled state and route changes.
    pub fn build(
        &self,
        b: &mut impl NetBuilder,
        endpoints: &[u32],
        serving_of: &[u32],
    ) -> Result<Built, TopologyError> {
        self.validate()?;
        if let Some(leo) = self.leo {
            leo.install(b)?;
        }
        let mut out = Built::default();
        if let Some(c) = self.constellation {
            out.info = Some(c.install_with(b, endpoints, serving_of)?);
        }
        let mut dirs = Vec::new();
        for (i, l) in self.links.iter().enumerate() {
            let ab = b.add_link(NodeId(l.a), NodeId(l.b), l.rate, l.delay, l.queue);
            let ba = b.add_link(NodeId(l.b), NodeId(l.a), l.rate, l.delay, l.queue);
            for (id, spec, dir) in [(ab, &l.loss_ab, "loss"), (ba, &l.loss_ba, "loss_reverse")] {
                if *spec != LossSpec::None {
                    let m = spec
                        .build()
                        .map_err(|source| TopologyError::Loss { field: format!("links[{i}].{dir}"), source })?;
                    b.set_loss(id, m);
                }
            }
            if let Some(rs) = &l.rate_schedule {
                b.set_rate_schedule(ab, rs.clone());
                b.set_rate_schedule(ba, rs.clone());
            }
            dirs.push((l.a, l.b, ab));
            dirs.push((l.b, l.a, ba));
            out.pairs.push((ab, ba));
        }
        route_all(b, self.nodes, &dirs);
        for e in self.events {
            let (ab, ba) = out.pairs[e.link];
            b.schedule_controls(e.at, vec![Control::State { link: ab, up: e.up }]);
            b.schedule_controls(e.at, vec![Control::State { link: ba, up: e.up }]);
        }
        for r in self.routes {
            let via = r.link.map(|l| if self.links[l].a == r.node { out.pairs[l].0 } else { out.pairs[l].1 });
            b.schedule_controls(r.at, vec![Control::Route { at: NodeId(r.node), dst: NodeId(r.dst), via }]);
        }
        Ok(out)
    }
}

/// Shortest-hop next hops over all links (BFS from every destination).
fn route_all(b: &mut impl NetBuilder, nodes: u32, dirs: &[(u32, u32, LinkId)]) {
    let n = nodes as usize;
    let mut into: Vec<Vec<(u32, LinkId)>> = vec![Vec::new(); n]; // into[v] = links u -> v
    for &(u, v, id) in dirs {
        into[v as usize].push((u, id));
    }
    for dst in 0..n {
        let mut seen = vec![false; n];
        seen[dst] = true;
        let mut q = VecDeque::from([dst as u32]);
        while let Some(v) = q.pop_front() {
            for &(u, id) in &into[v as usize] {
                if !seen[u as usize] {
                    seen[u as usize] = true;
                    b.route(NodeId(u), NodeId(dst as u32), id);
                    q.push_back(u);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(rate: u64) -> LinkSpec {
        LinkSpec {
            a: 0,
            b: 1,
            rate: Bps(rate),
            delay: Duration::ZERO,
            queue: QueueLimit::Bytes(1_000_000),
            loss_ab: LossSpec::None,
            loss_ba: LossSpec::None,
            rate_schedule: None,
        }
    }

    fn topo<'a>(links: &'a [LinkSpec], leo: Option<&'a leo::LeoPath>) -> Topology<'a> {
        Topology { nodes: 2, links, events: &[], routes: &[], leo, constellation: None }
    }

    #[test]
    fn link_rates_are_bounded_wherever_they_come_from() {
        let max = MAX_LINK_RATE.0;
        assert_eq!(topo(&[link(max)], None).validate(), Ok(()));
        for bad in [0, max + 1, u64::MAX] {
            let e = topo(&[link(bad)], None).validate().unwrap_err().to_string();
            assert_eq!(e, format!("invalid links[0].rate_bps = {bad}: must be in (0, 10 Tbit/s]"));
        }
        let path = |rate| leo::LeoPath {
            steps: Vec::new(),
            interruptions: Vec::new(),
            rate: Bps(rate),
            queue: QueueLimit::Bytes(1_000_000),
            gsl_loss: LossSpec::None,
            isl_loss: LossSpec::None,
        };
        assert_eq!(topo(&[], Some(&path(max))).validate(), Ok(()));
        for bad in [0, max + 1] {
            let e = topo(&[], Some(&path(bad))).validate().unwrap_err().to_string();
            assert_eq!(e, format!("invalid leo.rate_bps = {bad}: must be in (0, 10 Tbit/s]"));
        }
    }

    #[test]
    fn a_rate_schedule_is_checked_naming_the_field() {
        let sched = |period_ns: u64, rates: Vec<u64>| LinkSpec {
            rate_schedule: Some(RateSchedule {
                period: Duration(period_ns),
                rates: rates.into_iter().map(Bps).collect(),
            }),
            ..link(10_000_000)
        };
        assert_eq!(topo(&[sched(2_000_000_000, vec![11_000_000, 9_000_000])], None).validate(), Ok(()));
        let err = |l: LinkSpec| topo(&[l], None).validate().unwrap_err().to_string();
        assert_eq!(
            err(sched(1_000, vec![])),
            "invalid links[0].rate_schedule.rates_bps = 0 steps: needs 1 to 100000 steps"
        );
        assert_eq!(
            err(sched(2_000_000_000, vec![11_000_000, 0])),
            "invalid links[0].rate_schedule.rates_bps[1] = 0: must be in (0, 10 Tbit/s]"
        );
        assert_eq!(
            err(sched(2_000_000_000, vec![MAX_LINK_RATE.0 + 1])),
            format!("invalid links[0].rate_schedule.rates_bps[0] = {}: must be in (0, 10 Tbit/s]", MAX_LINK_RATE.0 + 1)
        );
        assert_eq!(
            err(sched(0, vec![1])),
            "invalid links[0].rate_schedule.period_s = 0: must be > 0, with at least 1 µs per step"
        );
        assert!(err(sched(1_999, vec![1, 1])).starts_with("invalid links[0].rate_schedule.period_s = 0.000001999"));
    }
}
