//! A LEO path as a simulator topology: the two ground ends (nodes 0 and 1) and every satellite that
//! the constellation engine's path timeline puts on the path (nodes 2..). At each routing step the
//! routes along that step's path and the propagation delays of its hops change; a step with no path
//! removes the ground nodes' routes (an outage); each handover interruption takes the ground link of
//! that end down for its duration. Packets already in flight keep the delay they were sent with.

use crate::engine::{LinkId, NodeId, QueueLimit};
use crate::loss::{LossError, LossSpec};
use crate::sim::{Control, Sim};
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
    /// Capacity of every link.
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
        }
        self.gsl_loss.validate().map_err(|source| LeoError::Loss { field: "gsl_loss", source })?;
        self.isl_loss.validate().map_err(|source| LeoError::Loss { field: "isl_loss", source })?;
        Ok(())
    }

    /// Adds the path's nodes' links to `sim` (which must have `node_count()` nodes) and schedules
    /// the per-step routes and delays and the interruptions.
    pub fn install(&self, sim: &mut Sim) -> Result<(), LeoError> {
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
                            sim.link_mut(id).set_loss(m);
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
    use crate::sim::{CbrSource, Sink};

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn delays_routes_outages_and_interruptions_follow_the_timeline() {
        // 0-2 s via satellite 10 (5 ms + 5 ms), 2-3 s via 20 -> 21 (6 + 4 + 6 ms), 3-4 s no path, then 10 again.
        let path = LeoPath {
            steps: vec![
                LeoStep { t: Instant(0), sats: vec![10], hop_delays: vec![ms(5), ms(5)] },
                LeoStep { t: Instant(2_000_000_000), sats: vec![20, 21], hop_delays: vec![ms(6), ms(4), ms(6)] },
                LeoStep { t: Instant(3_000_000_000), sats: vec![], hop_delays: vec![] },
                LeoStep { t: Instant(4_000_000_000), sats: vec![10], hop_delays: vec![ms(5), ms(5)] },
            ],
            interruptions: vec![LeoInterruption { t: Instant(2_000_000_000), end: 0, duration: ms(100) }],
            rate: Bps::mbps(100),
            queue: QueueLimit::Packets(100),
            gsl_loss: LossSpec::None,
            isl_loss: LossSpec::None,
        };
        assert_eq!(path.node_count(), 5);
        let mut sim = Sim::new(path.node_count(), 1);
        path.install(&mut sim).unwrap();
        let interval = Duration::from_millis(1);
        sim.attach(
            END_A,
            Box::new(CbrSource {
                flow: 0,
                dst: END_B,
                size: 125,
                interval,
                count: 5000,
                sent: 0,
                start: Instant::ZERO,
                tc: 0,
            }),
        );
        sim.attach(END_B, Box::<Sink>::default());
        sim.run(Instant(6_000_000_000));
        let sink: &Sink = sim.agent(END_B).and_then(|a| a.as_any().downcast_ref()).unwrap();
        let owd = |seq: u64| sink.received.iter().find(|r| r.0 == seq).map(|r| (r.2 - r.1).as_nanos());
        // 125 B at 100 Mbit/s = 10 us per hop.
        assert_eq!(owd(500), Some(10_000_000 + 2 * 10_000));
        assert_eq!(owd(2500), Some(16_000_000 + 3 * 10_000));
        // The uplink to satellite 20 is down for 100 ms at t = 2 s; after that the new path carries.
        assert_eq!(owd(2050), None);
        assert!(owd(2150).is_some());
        // 3-4 s: no path; 4 s on: satellite 10 again.
        assert_eq!(owd(3500), None);
        assert_eq!(owd(4500), Some(10_000_000 + 2 * 10_000));
        let reasons: Vec<_> = sim.drops.iter().map(|d| d.reason).collect();
        assert!(reasons.contains(&None), "no-route drops during the outage");
        assert!(reasons.contains(&Some(crate::engine::DropReason::Down)), "drops on the interrupted link");
    }

    #[test]
    fn inconsistent_steps_are_rejected() {
        let path = LeoPath {
            steps: vec![LeoStep { t: Instant(0), sats: vec![1, 2], hop_delays: vec![ms(1)] }],
            interruptions: vec![],
            rate: Bps::mbps(1),
            queue: QueueLimit::Packets(1),
            gsl_loss: LossSpec::None,
            isl_loss: LossSpec::Bernoulli { p: 2.0 },
        };
        assert!(path.validate().unwrap_err().to_string().contains("leo.steps[0]: 2 satellites need 3 hop delays"));
    }
}
