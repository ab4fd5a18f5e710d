//! In-network schemes as per-hop hooks, written once against the host interface ([`crate::host`])
//! so the simulator and the emulator run the same code: SATGUARD (all five techniques),
//! LinkGuardian and LEOTP's mid nodes (`leotp`, with its own placement and builder).
//! `build_hooks` decides which nodes run SATGUARD or LinkGuardian and builds each node's hook.

/// Declares a struct of `u64` counters with one list of fields: `+=` sums the fields before the `;`
/// and keeps the largest of those after it, and `fields()` gives every counter with its name (the
/// results tables and the Python dicts read it, so a new counter cannot be left out anywhere).
#[macro_export]
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

pub mod leotp;
pub mod linkguardian;
pub mod satguard;
pub mod wire;

use crate::host::Agent;
use crate::link::Link;
use crate::topo::constellation::TopoInfo;
use leoguard_core::Duration;
use std::sync::Arc;

/// The per-hop scheme a run asks for.
#[derive(Clone, Copy, Debug)]
pub enum HopScheme {
    /// SATGUARD.
    Satguard(satguard::SatguardOptions),
    /// LinkGuardian.
    LinkGuardian(linkguardian::LinkGuardianOptions),
}

/// The nodes that run the per-hop scheme: every node of the satellite network (ground nodes and
/// satellites of a constellation; hosts behind ground nodes are outside it), or every node.
pub fn hooked_nodes(nodes: u32, constellation: Option<&crate::topo::constellation::ConstellationTopo>) -> Vec<u32> {
    match constellation {
        Some(c) => (0..nodes).filter(|&n| n < c.grounds.len() as u32 || n >= c.sat_node(0).0).collect(),
        None => (0..nodes).collect(),
    }
}

/// Per node: its hook.
pub type NodeHooks = Vec<(u32, Box<dyn Agent>)>;

/// Builds the hook of every node in `hooked` for `scheme` over the engine's `links` (`nodes` nodes;
/// `topo` for constellations). Errors name the scheme's field.
pub fn build_hooks<P: Copy>(
    scheme: HopScheme,
    links: &[Link<P>],
    nodes: usize,
    topo: Option<&TopoInfo>,
    hooked: &[u32],
) -> Result<NodeHooks, (String, String)> {
    let mut out: NodeHooks = Vec::new();
    match scheme {
        HopScheme::Satguard(opts) => {
            let net = Arc::new(match topo {
                Some(info) => satguard::SatguardNet::constellation(links, nodes, info.clone()),
                None => satguard::SatguardNet::generic(links),
            });
            for &n in hooked {
                let hook = satguard::SatguardHook::new(opts, Arc::clone(&net), n)
                    .map_err(|e| ("satguard".to_string(), e.to_string()))?;
                out.push((n, Box::new(hook)));
            }
        }
        HopScheme::LinkGuardian(opts) => {
            use linkguardian::{LgLinkParams, LinkGuardianHook};
            let mut params = LgLinkParams::table(links);
            let mut opts = opts;
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
            let reverse = Arc::new(satguard::SatguardNet::generic(links).reverse);
            let params = Arc::new(params);
            for &n in hooked {
                let hook = LinkGuardianHook::new(opts, Arc::clone(&reverse), Arc::clone(&params))
                    .map_err(|e| ("linkguardian".to_string(), e.to_string()))?;
                out.push((n, Box::new(hook)));
            }
        }
    }
    Ok(out)
}
