//! What an engine builds StarTCP from: the configuration and the lead policy by choice, so the
//! simulator and `leoguard-transport` build the same sender from the same description.

use super::{FixedLead, HeuristicLead, LeadPolicy, MlpPolicy, ScriptedLeads, StartcpConfig};
use leoguard_core::Duration;
use std::sync::Arc;

/// StarTCP on a flow (docs/startcp.md): its configuration (the base controller is
/// `config.base_cc`) and how it chooses the stall's lead time.
#[derive(Clone, Debug, Default)]
pub struct StartcpSpec {
    /// Handover Manager and Sending Controller parameters.
    pub config: StartcpConfig,
    /// The lead policy.
    pub policy: StartcpPolicy,
}

/// How a StarTCP sender chooses its lead.
#[derive(Clone, Debug, Default)]
pub enum StartcpPolicy {
    /// Drain time of the bytes in flight plus margins.
    #[default]
    Heuristic,
    /// One lead for every handover.
    Fixed(Duration),
    /// Leads given in advance, one per handover (the training environment's actions).
    Scripted(ScriptedLeads),
    /// The learnt actor (a weights file, already loaded).
    Learnt(Arc<MlpPolicy>),
}

impl StartcpPolicy {
    /// The policy, for a sender with configuration `cfg`.
    pub fn build(&self, cfg: &StartcpConfig) -> Box<dyn LeadPolicy> {
        match self {
            StartcpPolicy::Heuristic => Box::new(HeuristicLead::new(cfg)),
            StartcpPolicy::Fixed(d) => Box::new(FixedLead(*d)),
            StartcpPolicy::Scripted(p) => Box::new(p.clone()),
            StartcpPolicy::Learnt(m) => Box::new((**m).clone()),
        }
    }
}
