//! In-network schemes as simulator hooks: adapters that host the sans-IO state machines of
//! `leoguard-proto` on nodes (see `Agent::on_arrive` / `on_depart`).

/// LinkGuardian's hooks (they live in leoguard-net, shared with the emulator).
pub use leoguard_net::schemes::linkguardian;
pub mod liquid;
pub mod mpep;
/// SATGUARD's hooks (leoguard-net).
pub use leoguard_net::schemes::satguard;
pub mod tambur;

use crate::constellation::TopoInfo;
use crate::engine::NodeId;
use crate::scenario::{Scenario, ScenarioError};
use crate::sim::{AgentId, Sim};
use leoguard_net::schemes::{build_hooks, HopScheme};

fn invalid(field: &str, e: impl ToString) -> ScenarioError {
    ScenarioError::Invalid { field: field.into(), value: String::new(), reason: e.to_string() }
}

/// Attaches the scenario's per-hop scheme (SATGUARD or LinkGuardian, if any) to every node of the
/// satellite network (hosts behind ground nodes are outside it) and returns the hooks.
pub fn attach(s: &Scenario, sim: &mut Sim, topo: Option<&TopoInfo>) -> Result<Vec<AgentId>, ScenarioError> {
    let hooked = leoguard_net::schemes::hooked_nodes(s.nodes, s.constellation.as_ref());
    let mut hooks = Vec::new();
    let scheme = match (&s.satguard, &s.linkguardian) {
        (Some(o), _) => Some(HopScheme::Satguard(*o)),
        (None, Some(o)) => Some(HopScheme::LinkGuardian(*o)),
        (None, None) => None,
    };
    if let Some(scheme) = scheme {
        let built = build_hooks(scheme, &sim.net.links, sim.nodes(), topo, &hooked).map_err(|(f, e)| invalid(&f, e))?;
        for (n, hook) in built {
            hooks.push(sim.attach_hook(NodeId(n), hook));
        }
    }
    if let Some(opts) = &s.liquid {
        hooks.extend(liquid::attach(s, opts, sim)?);
    }
    // Tambur's hooks are attached after the flows (`tambur::attach`): they protect web connections
    // too, whose flow ids exist only once the flows are hosted.
    Ok(hooks)
}

#[cfg(test)]
mod linkguardian_tests;
#[cfg(test)]
mod satguard_tests;
