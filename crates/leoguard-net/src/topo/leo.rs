//! A LEO path as a simulator topology: the two ground ends (nodes 0 and 1) and every satellite that
//! the constellation engine's path timeline puts on the path (nodes 2..). At each routing step the
//! routes along that step's path and the propagation delays of its hops change; a step with no path
//! removes the ground nodes' routes (an outage); each handover interruption takes the ground link of
//! that end down for its duration. Packets already in flight keep the delay they were sent with.
//! A step may also set the capacity of end A's ground link (a measured access link's rate over time,
//! issue 29); packets already serialising keep the rate they started with.

use super::{Control, NetBuilder, MAX_LINK_RATE};
use crate::link::{LinkId, NodeId, QueueLimit};
use crate::loss::{LossError, LossSpec};
use leoguard_core::{Bps, Duration, Instant};
use std::collections::BTreeMap;

/// One routing step of the path.
#[derive(Clone, Debug, PartialEq)]
pub struct LeoStep {
    /// When it takes effect.
    pub t: Instant,
    /// Satellites on the path from end A to end B (global constellation indices); empty = no path.
    pub sats: Vec<u32>,
    /// Propagation delay of each hop: uplink, ISLs..., downlink (`sats.len() + 1` entries).
    pub hop_delays: Vec<Duration>,
    /// Capacity of end A's ground link in this step, (uplink A -> first satellite, downlink first
    /// satellite -> A), set on that step's links when it takes effect; `None` leaves rates as they are
    /// (a link keeps the last rate set on it), and a step without a path ignores it. Links start at
    /// [`LeoPath::rate`], so with per-step rates give the first step's too.
    pub gsl_rate_a: Option<(Bps, Bps)>,
}

/// A handover interruption of one end's ground link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeoInterruption {
    /// Start.
    pub t: Instant,
    /// Which end: 0 = A, 1 = B.
    pub end: u8,
    /// Length.
    pub duration: Duration,
}

/// The path and the link parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LeoPath {
    /// Routing steps in time order.
    pub steps: Vec<LeoStep>,
    /// Handover interruptions.
    pub interruptions: Vec<LeoInterruption>,
    /// Capacity of every link when it is created (steps' `gsl_rate_a` change end A's ground link).
    pub rate: Bps,
    /// Queue limit of every link direction.
    pub queue: QueueLimit,
    /// Loss on ground-satellite links (each direction gets its own instance).
    pub gsl_loss: LossSpec,
    /// Loss on ISLs.
    pub isl_loss: LossSpec,
}

/// Problems with a LEO path.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LeoError {
    /// Inconsistent step data.
    #[error("invalid leo.steps[{step}]: {reason}")]
    Step {
        /// Step index.
        step: usize,
        /// What is wrong.
        reason: String,
    },
    /// A loss model is invalid.
    #[error("leo.{field}: {source}")]
    Loss {
        /// gsl_loss or isl_loss.
        field: &'static str,
        /// The model's error.
        source: LossError,
    },
}

/// The ground end A.
pub const END_A: NodeId = NodeId(0);
/// The ground end B.
pub const END_B: NodeId = NodeId(1);

impl LeoPath {
    /// Number of nodes the path needs (2 ground ends + distinct satellites).
    pub fn node_count(&self) -> usize {
        2 + self.sat_nodes().len()
    }

    fn sat_nodes(&self) -> BTreeMap<u32, NodeId> {
        let mut m = BTreeMap::new();
        for s in &self.steps {
            for &sat in &s.sats {
                let next = NodeId(2 + m.len() as u32);
                m.entry(sat).or_insert(next);
            }
        }
        m
    }

    /// Checks the steps.
    pub fn validate(&self) -> Result<(), LeoError> {
        let mut last = None;
        for (i, s) in self.steps.iter().enumerate() {
            let err = |reason: String| LeoError::Step { step: i, reason };
            if last.is_some_and(|t| s.t < t) {
                return Err(err("steps must be in time order".into()));
            }
            last = Some(s.t);
            if !s.sats.is_empty() && s.hop_delays.len() != s.sats.len() + 1 {
                return Err(err(format!(
                    "{} satellites need {} hop delays, got {}",
                    s.sats.len(),
                    s.sats.len() + 1,
                    s.hop_delays.len()
                )));
            }
            if let Some((up, down)) = s.gsl_rate_a {
                for (name, r) in [("uplink", up), ("downlink", down)] {
                    if r.0 == 0 || r > MAX_LINK_RATE {
                        return Err(err(format!("gsl_rate_a {name} = {} bit/s: must be in (0, 10 Tbit/s]", r.0)));
                    }
                }
            }
        }
        self.gsl_loss.validate().map_err(|source| LeoError::Loss { field: "gsl_loss", source })?;
        self.isl_loss.validate().map_err(|source| LeoError::Loss { field: "isl_loss", source })?;
        Ok(())
    }

    /// Adds the path's nodes' links to `sim` (which must have `node_count()` nodes) and schedules
    /// the per-step routes and delays and the interruptions.
    pub fn install(&self, sim: &mut impl NetBuilder) -> Result<(), LeoError> {
        self.validate()?;
        let nodes = self.sat_nodes();
        let path_nodes = |s: &LeoStep| -> Vec<NodeId> {
            let mut v = vec![END_A];
            v.extend(s.sats.iter().map(|x| nodes[x]));
            v.push(END_B);
            v
        };
        // Every link any step uses, created once (both directions).
        let mut links: BTreeMap<(NodeId, NodeId), LinkId> = BTreeMap::new();
        for s in self.steps.iter().filter(|s| !s.sats.is_empty()) {
            let p = path_nodes(s);
            for (w, &d) in p.windows(2).zip(&s.hop_delays) {
                let ground = w[0] == END_A || w[0] == END_B || w[1] == END_A || w[1] == END_B;
                let spec = if ground { &self.gsl_loss } else { &self.isl_loss };
                for (x, y) in [(w[0], w[1]), (w[1], w[0])] {
                    if let std::collections::btree_map::Entry::Vacant(e) = links.entry((x, y)) {
                        let id = sim.add_link(x, y, self.rate, d, self.queue);
                        if *spec != LossSpec::None {
                            let m = spec.build().map_err(|source| LeoError::Loss {
                                field: if ground { "gsl_loss" } else { "isl_loss" },
                                source,
                            })?;
                            sim.set_loss(id, m);
                        }
                        e.insert(id);
                    }
                }
            }
        }
        for s in &self.steps {
            let mut actions = Vec::new();
            if s.sats.is_empty() {
                actions.push(Control::Route { at: END_A, dst: END_B, via: None });
                actions.push(Control::Route { at: END_B, dst: END_A, via: None });
            } else {
                let p = path_nodes(s);
                for (w, &d) in p.windows(2).zip(&s.hop_delays) {
                    let (fwd, back) = (links[&(w[0], w[1])], links[&(w[1], w[0])]);
                    actions.push(Control::Delay { link: fwd, delay: d });
                    actions.push(Control::Delay { link: back, delay: d });
                    actions.push(Control::Route { at: w[0], dst: END_B, via: Some(fwd) });
                    actions.push(Control::Route { at: w[1], dst: END_A, via: Some(back) });
                }
                if let Some((up, down)) = s.gsl_rate_a {
                    // p[1] is the step's first satellite: end A's ground link in this step.
                    actions.push(Control::Rate { link: links[&(END_A, p[1])], rate: up });
                    actions.push(Control::Rate { link: links[&(p[1], END_A)], rate: down });
                }
            }
            sim.schedule_controls(s.t, actions);
        }
        for it in &self.interruptions {
            // The ground link in use when the interruption starts (the step in effect at `t`).
            let k = self.steps.partition_point(|s| s.t <= it.t);
            let Some(step) = k.checked_sub(1).map(|k| &self.steps[k]) else {
                continue;
            };
            if step.sats.is_empty() {
                continue;
            }
            let (g, sat) = if it.end == 0 {
                (END_A, nodes[&step.sats[0]])
            } else {
                (END_B, nodes[&step.sats[step.sats.len() - 1]])
            };
            let pair = [links[&(g, sat)], links[&(sat, g)]];
            sim.schedule_controls(it.t, pair.iter().map(|&l| Control::State { link: l, up: false }).collect());
            sim.schedule_controls(
                it.t + it.duration,
                pair.iter().map(|&l| Control::State { link: l, up: true }).collect(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::RateSchedule;
    use crate::loss::LossModel;
    use crate::topo::Driver;

    /// Records what a topology asks of an engine.
    #[derive(Default)]
    struct Recorder {
        links: Vec<(NodeId, NodeId, Bps)>,
        controls: Vec<(Instant, Vec<Control>)>,
    }

    impl NetBuilder for Recorder {
        fn add_link(&mut self, from: NodeId, to: NodeId, rate: Bps, _: Duration, _: QueueLimit) -> LinkId {
            self.links.push((from, to, rate));
            LinkId(self.links.len() as u32 - 1)
        }
        fn set_loss(&mut self, _: LinkId, _: Box<dyn LossModel>) {}
        fn set_rate_schedule(&mut self, _: LinkId, _: RateSchedule) {}
        fn set_initial_state(&mut self, _: LinkId, _: bool) {}
        fn link_delay(&self, _: LinkId) -> Duration {
            Duration::ZERO
        }
        fn link_count(&self) -> usize {
            self.links.len()
        }
        fn route(&mut self, _: NodeId, _: NodeId, _: LinkId) {}
        fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>) {
            self.controls.push((at, actions));
        }
        fn set_driver(&mut self, _: Box<dyn Driver>, _: Instant) {}
    }

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn two_steps(second: Option<(Bps, Bps)>) -> LeoPath {
        LeoPath {
            steps: vec![
                LeoStep {
                    t: Instant(0),
                    sats: vec![10],
                    hop_delays: vec![ms(5), ms(5)],
                    gsl_rate_a: Some((Bps::mbps(20), Bps::mbps(100))),
                },
                LeoStep {
                    t: Instant(1_000_000_000),
                    sats: vec![20, 21],
                    hop_delays: vec![ms(6), ms(4), ms(6)],
                    gsl_rate_a: second,
                },
            ],
            interruptions: vec![],
            rate: Bps::mbps(50),
            queue: QueueLimit::Packets(10),
            gsl_loss: LossSpec::None,
            isl_loss: LossSpec::None,
        }
    }

    #[test]
    fn per_step_ground_rates_set_end_a_s_first_hop_in_that_step() {
        let mut r = Recorder::default();
        two_steps(Some((Bps::mbps(5), Bps::mbps(80)))).install(&mut r).expect("valid");
        let id = |from: u32, to: u32| {
            LinkId(r.links.iter().position(|l| (l.0, l.1) == (NodeId(from), NodeId(to))).expect("link") as u32)
        };
        // Nodes: 0 = A, 1 = B, 2 = sat 10, 3 = sat 20, 4 = sat 21; every link starts at `rate`.
        assert!(r.links.iter().all(|l| l.2 == Bps::mbps(50)));
        let rates = |k: usize| -> Vec<Control> {
            r.controls[k].1.iter().copied().filter(|c| matches!(c, Control::Rate { .. })).collect()
        };
        assert_eq!(r.controls[0].0, Instant(0));
        assert_eq!(
            rates(0),
            [
                Control::Rate { link: id(0, 2), rate: Bps::mbps(20) },
                Control::Rate { link: id(2, 0), rate: Bps::mbps(100) },
            ]
        );
        assert_eq!(r.controls[1].0, Instant(1_000_000_000));
        assert_eq!(
            rates(1),
            [
                Control::Rate { link: id(0, 3), rate: Bps::mbps(5) },
                Control::Rate { link: id(3, 0), rate: Bps::mbps(80) }
            ]
        );
        // The rates come after the step's delays and routes, in the same batch.
        let first_rate = r.controls[1].1.iter().position(|c| matches!(c, Control::Rate { .. })).expect("rate");
        assert!(r.controls[1].1[first_rate..].iter().all(|c| matches!(c, Control::Rate { .. })));
        assert!(first_rate > 0);
        // A step without rates leaves them alone.
        let mut r = Recorder::default();
        two_steps(None).install(&mut r).expect("valid");
        assert_eq!(r.controls[1].1.iter().filter(|c| matches!(c, Control::Rate { .. })).count(), 0);
    }

    #[test]
    fn ground_rates_out_of_range_are_rejected_naming_the_step() {
        for (up, down, name) in [(0, 1, "uplink"), (1, MAX_LINK_RATE.0 + 1, "downlink")] {
            let e = two_steps(Some((Bps(up), Bps(down)))).validate().unwrap_err().to_string();
            let v = if up == 0 { 0 } else { MAX_LINK_RATE.0 + 1 };
            assert_eq!(e, format!("invalid leo.steps[1]: gsl_rate_a {name} = {v} bit/s: must be in (0, 10 Tbit/s]"));
        }
        two_steps(Some((MAX_LINK_RATE, Bps(1)))).validate().expect("the bounds are inclusive");
    }
}
