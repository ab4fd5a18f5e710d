//! In-network schemes as simulator hooks: adapters that host the sans-IO state machines of
//! `leoguard-proto` on nodes (see `Agent::on_arrive` / `on_depart`).

/// Declares a struct of `u64` counters with one list of fields: `+=` sums the fields before the `;`
/// and keeps the largest of those after it, and `fields()` gives every counter with its name (the
/// results tables and the Python dicts read it, so a new counter cannot be left out anywhere).
macro_rules! counters {
    (
        $(#[$m:meta])* pub struct $name:ident {
            $($(#[$fm:meta])* $f:ident,)*
            ; $($(#[$gm:meta])* $g:ident,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $f: u64,)*
            $($(#[$gm])* pub $g: u64,)*
        }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                $(self.$f += o.$f;)*
                $(self.$g = self.$g.max(o.$g);)*
            }
        }

        impl $name {
            /// Every counter with its name, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($f), self.$f),)* $((stringify!($g), self.$g),)*]
            }
        }
    };
}

pub mod linkguardian;
pub mod liquid;
pub mod mpep;
pub mod satguard;
pub mod tambur;

use crate::constellation::TopoInfo;
use crate::engine::NodeId;
use crate::scenario::{Scenario, ScenarioError};
use crate::sim::{AgentId, Sim};
use leoguard_core::Duration;
use std::sync::Arc;

fn invalid(field: &str, e: impl ToString) -> ScenarioError {
    ScenarioError::Invalid { field: field.into(), value: String::new(), reason: e.to_string() }
}

/// Attaches the scenario's per-hop scheme (SATGUARD or LinkGuardian, if any) to every node of the
/// satellite network (hosts behind ground nodes are outside it) and returns the hooks.
pub fn attach(s: &Scenario, sim: &mut Sim, topo: Option<&TopoInfo>) -> Result<Vec<AgentId>, ScenarioError> {
    let hooked: Vec<u32> = match &s.constellation {
        Some(c) => (0..s.nodes).filter(|&n| n < c.grounds.len() as u32 || n >= c.sat_node(0).0).collect(),
        None => (0..s.nodes).collect(),
    };
    let mut hooks = Vec::new();
    if let Some(opts) = &s.satguard {
        let net = Arc::new(match topo {
            Some(info) => satguard::SatguardNet::constellation(sim, info.clone()),
            None => satguard::SatguardNet::generic(sim),
        });
        for &n in &hooked {
            let hook = satguard::SatguardHook::new(*opts, Arc::clone(&net), n).map_err(|e| invalid("satguard", e))?;
            hooks.push(sim.attach_hook(NodeId(n), Box::new(hook)));
        }
    }
    if let Some(opts) = &s.linkguardian {
        use linkguardian::{LgLinkParams, LinkGuardianHook};
        let mut params = LgLinkParams::table(&sim.net);
        let mut opts = *opts;
        if let Some(info) = topo {
            for (i, p) in params.iter_mut().enumerate() {
                p.delay = info.delay_hint[i];
                let g = info.downlink_ground[i];
                p.shared = g.is_some_and(|g| info.roles[g as usize] == leoguard_orbit::Role::Terminal);
                // Hosts run no LinkGuardian: their terrestrial links stay unprotected.
                p.guarded = !info.terrestrial[i];
            }
            // One fixed timer on shared user links, sized for the farthest user a beam serves.
            if opts.shared_links_fixed_timeout.is_none() {
                opts.shared_links_fixed_timeout =
                    Some(info.max_gsl_delay + info.max_gsl_delay + Duration::from_micros(500));
            }
        }
        let reverse = Arc::new(satguard::SatguardNet::generic(sim).reverse);
        let params = Arc::new(params);
        for &n in &hooked {
            let hook = LinkGuardianHook::new(opts, Arc::clone(&reverse), Arc::clone(&params))
                .map_err(|e| invalid("linkguardian", e))?;
            hooks.push(sim.attach_hook(NodeId(n), Box::new(hook)));
        }
    }
    if let Some(opts) = &s.liquid {
        hooks.extend(liquid::attach(s, opts, sim)?);
    }
    // Tambur's hooks are attached after the flows (`tambur::attach`): they protect web connections
    // too, whose flow ids exist only once the flows are hosted.
    Ok(hooks)
}
