//! LEOTP in a scenario (docs/leotp.md, "In the simulator"): the `leotp` section's validation, the mid
//! nodes attached as per-node hooks (leoguard-net's, shared with the emulator), the flows' agents, and
//! their results.

use super::{invalid, FlowKind, FlowResult, FlowSpec, RunResult, Scenario, ScenarioError};
use crate::engine::NodeId;
use crate::leotp_agent::{LeotpConsumerAgent, LeotpProducerAgent};
use crate::sim::{Agent, AgentId, Sim};
use leoguard_net::schemes::leotp::{
    build_hooks, mid_nodes, FlowEnds, LeotpFlows, LeotpHook, LeotpMidTotals, MidPlacement, FLAG_LEOTP_DATA,
};
use leoguard_proto::leotp::{LeotpConfig, LeotpError};
use std::sync::Arc;

/// LEOTP's configuration and where its mid nodes run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeotpSpec {
    /// The configuration of consumers, mid nodes and producers (`carry_payload` is forced off: the
    /// simulator carries ranges, not bytes).
    pub cfg: LeotpConfig,
    /// Which nodes between the ends run a mid node.
    pub placement: MidPlacement,
}

impl Default for LeotpSpec {
    fn default() -> Self {
        LeotpSpec { cfg: LeotpConfig { carry_payload: false, ..LeotpConfig::default() }, placement: MidPlacement::All }
    }
}

impl LeotpSpec {
    /// The configuration the simulator runs (ranges only).
    pub fn sim_config(&self) -> LeotpConfig {
        LeotpConfig { carry_payload: false, ..self.cfg }
    }
}

fn field_error(e: LeotpError) -> ScenarioError {
    let LeotpError::Invalid { field, value, reason } = e;
    invalid(format!("leotp.{field}"), value, reason)
}

fn has_leotp(s: &Scenario) -> bool {
    s.flows.iter().any(|f| matches!(f.kind, FlowKind::Leotp { .. }))
}

/// Checks the `leotp` section and the LEOTP flows; errors name the field.
pub(super) fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    s.leotp.sim_config().validate().map_err(field_error)?;
    s.leotp.placement.validate().map_err(field_error)?;
    for (i, f) in s.flows.iter().enumerate() {
        if let FlowKind::Leotp { bytes: Some(b) } = f.kind {
            if b == 0 || b > u64::from(u32::MAX) {
                return Err(invalid(format!("flows[{i}].bytes"), b, "must be in 1..=4294967295 (32-bit offsets)"));
            }
        }
    }
    if has_leotp(s) {
        refuse_other_schemes(s)?;
    }
    Ok(())
}

/// Refuses a per-node scheme beside LEOTP's mid nodes (they are the per-node scheme of a run with LEOTP
/// flows), naming the other scheme: both engines call it.
pub fn refuse_other_schemes(s: &Scenario) -> Result<(), ScenarioError> {
    let others = [
        ("satguard", s.satguard.is_some()),
        ("linkguardian", s.linkguardian.is_some()),
        ("mpep", s.mpep.is_some()),
        ("tambur", s.tambur.is_some()),
        ("liquid", s.liquid.is_some()),
    ];
    if let Some((name, _)) = others.iter().find(|x| x.1) {
        return Err(invalid(
            (*name).into(),
            "on",
            "LEOTP's mid nodes are the per-node scheme of a run with leotp flows: give one or the other",
        ));
    }
    Ok(())
}

/// Whether node `n` is a satellite, for topologies that have satellites.
fn satellite_test(s: &Scenario) -> Option<Box<dyn Fn(u32) -> bool>> {
    if let Some(c) = &s.constellation {
        let first = c.sat_node(0).0;
        return Some(Box::new(move |n| n >= first));
    }
    // A LEO path's ground ends are nodes 0 and 1, its satellites the rest.
    s.leo.as_ref().map(|_| Box::new(|n: u32| n >= 2) as Box<dyn Fn(u32) -> bool>)
}

/// The LEOTP flows' ends, by flow id.
fn flows(s: &Scenario) -> LeotpFlows {
    let mut t = LeotpFlows::default();
    for (i, f) in s.flows.iter().enumerate() {
        if let FlowKind::Leotp { .. } = f.kind {
            t.insert(i as u32, FlowEnds { consumer: f.dst, producer: f.src });
        }
    }
    t
}

/// The nodes that run a LEOTP mid node in scenario `s` for flows whose ends are `ends` (the
/// `leotp.mid_nodes` placement, its random draw seeded by the scenario): the one rule both engines
/// use, so the simulator and the emulator put mid nodes in the same places.
pub fn placed_mid_nodes(s: &Scenario, ends: &[u32]) -> Result<Vec<u32>, ScenarioError> {
    let sat = satellite_test(s);
    mid_nodes(s.nodes, ends, sat.as_deref(), s.leotp.placement, s.seed).map_err(field_error)
}

/// Attaches a mid node to every node the placement picks (none without LEOTP flows).
pub(super) fn attach_mid_nodes(s: &Scenario, sim: &mut Sim) -> Result<Vec<AgentId>, ScenarioError> {
    if !has_leotp(s) {
        return Ok(Vec::new());
    }
    let table = Arc::new(flows(s));
    let mids = placed_mid_nodes(s, &table.end_nodes())?;
    let built = build_hooks(s.leotp.sim_config(), &table, &mids).map_err(field_error)?;
    Ok(built.into_iter().map(|(n, h)| sim.attach_hook(NodeId(n), h)).collect())
}

/// A flow's (sender, receiver) agents.
type FlowAgents = (Box<dyn Agent>, Box<dyn Agent>);

/// The (producer, consumer) agents of LEOTP flow `i`.
pub(super) fn agents(s: &Scenario, i: usize, f: &FlowSpec, bytes: Option<u64>) -> Result<FlowAgents, ScenarioError> {
    let cfg = s.leotp.sim_config();
    let flow = i as u32;
    let p = LeotpProducerAgent::new(cfg, flow, NodeId(f.dst), bytes).map_err(field_error)?;
    let c = LeotpConsumerAgent::new(cfg, flow, NodeId(f.src), bytes, f.start, s.sample_every).map_err(field_error)?;
    Ok((Box::new(p), Box::new(c)))
}

/// Fills flow `flow`'s summary, series and packet rows from its agents.
pub(super) fn flow_result(
    sim: &Sim,
    flow: u32,
    (src, dst): (AgentId, AgentId),
    fr: &mut FlowResult,
    r: &mut RunResult,
) {
    let p: &LeotpProducerAgent = super::agent(sim, src);
    let c: &LeotpConsumerAgent = super::agent(sim, dst);
    let cs = c.consumer.stats();
    fr.delivered_bytes = c.consumer.delivered();
    fr.retransmissions = cs.retransmissions;
    fr.rtos = cs.timeout_rounds;
    fr.packets_sent = p.producer.stats().data_sent;
    fr.fct_s = c.completed_at.map(|t| t.saturating_duration_since(c.start_at).as_secs_f64());
    for x in &c.samples {
        r.series.push(super::SeriesRow {
            flow,
            t_ns: x.t.as_nanos(),
            cwnd: x.cwnd,
            in_flight: 0,
            srtt_ns: x.srtt.as_nanos(),
            acked: x.delivered,
            retransmissions: x.retransmissions,
        });
    }
    for x in &c.records {
        r.packets.push(super::PacketRow {
            flow,
            seq: x.start,
            sent_ns: x.sent_at.as_nanos(),
            received_ns: x.received_at.as_nanos(),
            retransmission: x.retransmission,
            hops: x.hops,
        });
    }
}

/// Data packets of LEOTP flow `flow` the network dropped, over the producer's Data packets (the
/// generic count would include Interests).
pub(super) fn data_loss(sim: &Sim, flow: u32, packets_sent: u64) -> f64 {
    let lost = sim.drops.iter().filter(|d| d.packet.flow == flow && d.packet.flags & FLAG_LEOTP_DATA != 0).count();
    lost as f64 / packets_sent.max(1) as f64
}

/// The mid nodes' counters summed.
pub(super) fn totals(sim: &Sim, hooks: &[AgentId]) -> LeotpMidTotals {
    let mut t = LeotpMidTotals::default();
    for &h in hooks {
        t += super::agent::<LeotpHook>(sim, h).totals();
    }
    t
}

#[cfg(test)]
mod tests;
