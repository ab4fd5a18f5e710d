//! Web connections and UDP flows through M-PEP (docs/mpep.md, "What is split").
//!
//! A web connection (browser <-> server, one TCP connection per slot) is split at the same proxies
//! as a TCP flow between the same ends. Each segment between two hops is one full-duplex TCP
//! connection with its own flow id; the two byte streams are two [`Chain`]s over the same hops and
//! segment ids: the forward chain carries the requests (browser -> server), the reverse chain the
//! responses (its hops are the forward chain's in reverse order, its packets carry [`FLAG_REV`]).
//! Both chains' proxies on a node sit behind one [`PairAgent`], which migrates them together: their
//! state (both directions' buffered bytes plus the connection state) crosses the ISLs in one
//! transfer, and both directions restart in slow start when it arrives.
//!
//! Handshakes: DNS goes end to end (not proxied). The browser's SYN is terminated by the first proxy
//! (its SYN-ACK comes from there); each proxy then opens its downstream connection with a SYN of its
//! own, retried after 1 s doubling like the browser's, and relays what it buffered once the SYN-ACK
//! arrives; the server accepts the last proxy's SYN. TLS goes end to end as bytes of the streams.
//! A connection's proxies hold state from its SYN until its page load completes (the browser then
//! moves on); a handover in between migrates it, one outside just moves the (empty) proxy.
//!
//! Flow ids: segment 0 (browser side) keeps the connection's own id (the web block's slot id), the
//! other segments take ids after everything allocated before, through the `owner` table.

use super::udp::{windows_of, UdpRelayHook};
use super::{
    chain_hops, lock, plan_migrations, proxied_grounds, Chain, HopRole, MpepError, MpepOptions, MpepStats, SharedChain,
    TOKEN_MIG_START, TOKEN_SCHEMES, TOKEN_TIMER,
};
use crate::constellation::{ConstellationTopo, TopoInfo};
use crate::engine::{NodeId, Packet};
use crate::scenario::{FlowKind, FlowSpec, ScenarioError};
use crate::sim::{Agent, AgentId, Ctx, Sim};
use crate::tcp_agent::{FLAG_ACK, FLAG_DATA};
use crate::web::conn::FLAG_SYN;
use leoguard_proto::cc::CongestionControl;
use leoguard_proto::tcp::TcpConfig;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Packet flag: sent by a proxy of a connection's reverse direction (responses and their ACKs), so
/// two proxies of one connection on the same satellite can tell the directions apart.
pub const FLAG_REV: u16 = 32;
/// Token bit of the reverse chain's timers and wakes on a [`PairAgent`].
pub const TOKEN_REV: u64 = 1 << 58;
/// Token (with the connection slot in the low 32 bits) that wakes a browser or server when the proxy
/// next to it resumed after a migration (bit 59: clear of the web agents' own tokens).
pub const TOKEN_SOURCE_RESUME: u64 = 1 << 59;

/// The two directions of one split web connection.
#[derive(Clone, Debug)]
pub struct ConnChains {
    /// Requests: browser -> server.
    pub fwd: SharedChain,
    /// Responses: server -> browser.
    pub rev: SharedChain,
}

/// Per connection slot of a web flow, its chains (None: the connection is not split).
pub type WebSplit = Arc<Mutex<Vec<Option<ConnChains>>>>;

/// Locks a [`WebSplit`] (single-threaded simulator: never contended).
pub fn lock_split(s: &WebSplit) -> MutexGuard<'_, Vec<Option<ConnChains>>> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The chains of `slot`, if the connection is split.
pub fn chains_of(s: &Option<WebSplit>, slot: usize) -> Option<ConnChains> {
    s.as_ref().and_then(|s| lock_split(s).get(slot).cloned().flatten())
}

/// How an end of a split connection sees its proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndView {
    /// The proxy next to it (where it sends data, ACKs and its SYN or SYN-ACK).
    pub peer: NodeId,
    /// Whether its sending waits for that proxy's migration.
    pub paused: bool,
}

impl ConnChains {
    /// The browser's view (source of the requests).
    pub fn client_view(&self) -> EndView {
        let c = lock(&self.fwd);
        EndView { peer: c.hops[1].node, paused: c.hops[0].paused }
    }

    /// The server's view (source of the responses).
    pub fn server_view(&self) -> EndView {
        let c = lock(&self.rev);
        EndView { peer: c.hops[1].node, paused: c.hops[0].paused }
    }

    /// The flow id of the server's segment.
    pub fn server_flow(&self) -> u32 {
        let c = lock(&self.fwd);
        c.seg_flows[c.seg_flows.len() - 1]
    }

    /// The browser holds `rcv_nxt` response bytes in order.
    pub fn client_received(&self, rcv_nxt: u64) {
        lock(&self.rev).sink_rcv_nxt = rcv_nxt;
    }

    /// The server holds `rcv_nxt` request bytes in order.
    pub fn server_received(&self, rcv_nxt: u64) {
        lock(&self.fwd).sink_rcv_nxt = rcv_nxt;
    }

    /// The browser's next hop resumed: returns where to resend from (what the proxy holds in order)
    /// and a fresh controller (slow start).
    pub fn resume_client(&self) -> (u64, Box<dyn CongestionControl>) {
        resume_source(&self.fwd)
    }

    /// The server's next hop resumed (see [`ConnChains::resume_client`]).
    pub fn resume_server(&self) -> (u64, Box<dyn CongestionControl>) {
        resume_source(&self.rev)
    }

    /// The browser is done with the connection: its proxies hold no state any more.
    pub fn close(&self) {
        lock(&self.fwd).closed = true;
        lock(&self.rev).closed = true;
    }
}

fn resume_source(c: &SharedChain) -> (u64, Box<dyn CongestionControl>) {
    let mut c = lock(c);
    c.hops[0].paused = false;
    c.restarts += 1;
    (c.downstream_rcv_nxt(0), c.fresh_cc())
}

/// The proxies of both directions of a web connection on one node.
#[derive(Debug)]
pub struct PairAgent {
    fwd: SharedChain,
    rev: SharedChain,
    node: NodeId,
}

impl PairAgent {
    /// Which chain a packet belongs to: the one whose receiving hop for it is a proxy here (both:
    /// two proxies of the connection on this node, told apart by [`FLAG_REV`]).
    fn route(&self, p: &Packet) -> &SharedChain {
        let (k, n) = {
            let c = lock(&self.fwd);
            match c.seg_of(p.flow) {
                Some(k) => (k, c.hops.len()),
                None => return &self.fwd,
            }
        };
        if p.flags & FLAG_SYN != 0 {
            return &self.fwd; // handshakes run on the forward chain
        }
        // Forward-chain hop index of the receiving hop in each direction.
        let (f, r) = if p.flags & FLAG_DATA != 0 {
            (k + 1, k)
        } else if p.flags & FLAG_ACK != 0 {
            (k, k + 1)
        } else {
            return &self.fwd;
        };
        let here = |c: &SharedChain, h: usize| {
            let c = lock(c);
            c.hops.get(h).is_some_and(|x| x.proxy.is_some() && x.node == self.node)
        };
        match (here(&self.fwd, f), here(&self.rev, n - 1 - r)) {
            (true, true) if p.flags & FLAG_REV != 0 => &self.rev,
            (false, true) => &self.rev,
            _ => &self.fwd,
        }
    }

    /// Handover `m` of this node's proxies: both directions migrate together (or just move when the
    /// connection holds no state).
    fn migrate(&self, m: usize, ctx: &mut Ctx) {
        let (h, n, live) = {
            let c = lock(&self.fwd);
            let Some(mig) = c.migrations.get(m) else { return };
            (mig.hop, c.hops.len(), c.live && !c.closed)
        };
        if !live {
            lock(&self.fwd).relocate(m);
            lock(&self.rev).relocate(m);
            return;
        }
        let a = lock(&self.fwd).buffered_at(h);
        let b = lock(&self.rev).buffered_at(n - 1 - h);
        lock(&self.fwd).start_migration_with(m, b, ctx);
        lock(&self.rev).start_migration_with(m, a, ctx);
    }
}

impl Agent for PairAgent {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        let c = lock(&self.fwd);
        for (m, mig) in c.migrations.iter().enumerate() {
            if mig.from == self.node {
                ctx.timer(mig.t, TOKEN_MIG_START | m as u64);
            }
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let c = Arc::clone(self.route(p));
        lock(&c).on_packet(self.node, p, ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token & TOKEN_REV != 0 {
            lock(&self.rev).on_timer(self.node, token & !TOKEN_REV, ctx);
        } else if token & TOKEN_TIMER == 0 && token & TOKEN_SCHEMES == TOKEN_MIG_START {
            self.migrate((token & 0xFFFF_FFFF) as usize, ctx);
        } else {
            lock(&self.fwd).on_timer(self.node, token, ctx);
        }
    }
}

/// What M-PEP added to a run besides its TCP flows' chains: web connections' chains and UDP relays.
#[derive(Debug, Default)]
pub struct Extra {
    /// Forward and reverse chains of every split web connection, with the browser agent.
    pub chains: Vec<(SharedChain, AgentId)>,
    /// UDP relay hooks.
    pub udp: Vec<AgentId>,
    /// UDP relay windows per satellite, until [`install_udp`] hosts them.
    pub udp_windows: BTreeMap<NodeId, Vec<super::udp::UdpWindow>>,
    /// UDP flows relayed.
    pub udp_flows: u64,
    /// UDP relay migrations planned (handovers while the previous one was under way excluded).
    pub udp_migrations: u64,
    /// UDP relay handovers skipped.
    pub udp_skipped: u64,
}

impl Extra {
    /// Adds the UDP relays' counters to `s` (the chains go through [`super::totals`]).
    pub fn add_udp(&self, sim: &Sim, s: &mut MpepStats) {
        s.udp_flows += self.udp_flows;
        s.udp_migrations += self.udp_migrations;
        s.migrations_skipped += self.udp_skipped;
        for &h in &self.udp {
            if let Some(hook) = sim.agent_by_id(h).and_then(|a| a.as_any().downcast_ref::<UdpRelayHook>()) {
                s.udp_held += hook.stats.held;
                s.udp_dropped += hook.stats.dropped;
                s.udp_max_held_bytes = s.udp_max_held_bytes.max(hook.stats.max_held_bytes);
            }
        }
    }
}

fn bad(i: usize, e: &dyn ToString) -> ScenarioError {
    ScenarioError::Invalid { field: format!("flows[{i}]"), value: "mpep".into(), reason: e.to_string() }
}

/// Where a run's M-PEP proxies are.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// The constellation.
    pub topo: &'a ConstellationTopo,
    /// Its connectivity cache.
    pub info: &'a TopoInfo,
    /// The options.
    pub opts: &'a MpepOptions,
    /// Each proxy's buffer, bytes.
    pub buffer: u64,
}

/// Hosts web flow `i` with every connection split (see the module documentation); returns the
/// browser and server agents. The chains go to `extra`.
pub fn attach_web(
    sim: &mut Sim,
    i: usize,
    f: &FlowSpec,
    owner: &mut Vec<u32>,
    at: &Placement<'_>,
    extra: &mut Extra,
    reports: Vec<leoguard_core::Instant>,
) -> Result<(AgentId, AgentId), ScenarioError> {
    let FlowKind::Web { cc, .. } = &f.kind else { unreachable!("attach_web is called for web flows only") };
    let split: WebSplit = Arc::new(Mutex::new(Vec::new()));
    let first_flow = owner.len() as u32;
    let (a, b) = crate::web::setup::attach_split(sim, i, f, owner, reports, Some(Arc::clone(&split)));
    let slots = owner.len() as u32 - first_flow;
    let hops = chain_hops(at.topo, at.info, at.opts, f.src, f.dst).map_err(|e| bad(i, &e))?;
    if hops.len() <= 2 {
        return Ok((a, b));
    }
    let n = hops.len();
    let migs = plan_migrations(at.topo, at.info, sim, &hops).map_err(|e| bad(i, &e))?;
    let rev_hops: Vec<(HopRole, NodeId)> = (hops.iter().rev())
        .map(|&(r, node)| match r {
            HopRole::Source => (HopRole::Receiver, node),
            HopRole::Receiver => (HopRole::Source, node),
            other => (other, node),
        })
        .collect();
    let cfg = TcpConfig::default();
    let mut table = Vec::with_capacity(slots as usize);
    for slot in 0..slots {
        let mut seg_flows = vec![first_flow + slot];
        seg_flows.extend((0..n as u32 - 2).map(|k| owner.len() as u32 + k));
        owner.extend(std::iter::repeat_n(i as u32, n - 2));
        let build = |h: &[(HopRole, NodeId)]| {
            Chain::new(i as u32, h, 0, cc, cfg, at.buffer, at.opts.state_overhead_bytes, None).map_err(|e| bad(i, &e.0))
        };
        let (mut fwd, mut rev) = (build(&hops)?, build(&rev_hops)?);
        fwd.seg_flows = seg_flows.clone();
        rev.seg_flows = seg_flows.into_iter().rev().collect();
        for c in [&mut fwd, &mut rev] {
            c.tc = f.tc;
            c.header = crate::web::conn::HEADER;
            c.source_wake = Some(TOKEN_SOURCE_RESUME | u64::from(slot));
        }
        fwd.handshake = true;
        fwd.live = false;
        for h in fwd.hops.iter_mut().filter(|h| h.proxy.is_some()) {
            h.open = false;
        }
        rev.dir_flag = FLAG_REV;
        rev.tag = TOKEN_REV;
        rev.counted = false;
        fwd.set_migrations(migs.clone());
        rev.set_migrations(migs.iter().map(|m| super::Migration { hop: n - 1 - m.hop, ..*m }).collect());
        let (fwd, rev) = install_pair(sim, fwd, rev, a, b);
        extra.chains.push((Arc::clone(&fwd), a));
        extra.chains.push((Arc::clone(&rev), b));
        table.push(Some(ConnChains { fwd, rev }));
    }
    *lock_split(&split) = table;
    Ok((a, b))
}

/// Hosts a connection's two chains: a [`PairAgent`] on every node their proxies occupy, the
/// server bound to its segment's flow id.
fn install_pair(
    sim: &mut Sim,
    mut fwd: Chain,
    mut rev: Chain,
    client: AgentId,
    server: AgentId,
) -> (SharedChain, SharedChain) {
    let n = fwd.hops.len();
    let seg_flows = fwd.seg_flows.clone();
    sim.bind_flow(server, fwd.hops[n - 1].node, seg_flows[n - 2]);
    fwd.source_agent = Some(client);
    rev.source_agent = Some(server);
    let nodes = fwd.proxy_nodes();
    let (fwd, rev) = (Arc::new(Mutex::new(fwd)), Arc::new(Mutex::new(rev)));
    let mut agents = BTreeMap::new();
    for node in nodes {
        let a = PairAgent { fwd: Arc::clone(&fwd), rev: Arc::clone(&rev), node };
        let id = sim.attach_flow(node, seg_flows[0], Box::new(a));
        for &f in &seg_flows[1..] {
            sim.bind_flow(id, node, f);
        }
        agents.insert(node, id);
    }
    lock(&fwd).agents = agents.clone();
    lock(&rev).agents = agents;
    (fwd, rev)
}

/// Puts UDP relays on the satellites that host (or will host) the M-PEP proxies of UDP flow `flow`
/// from `src` to `dst`; `cap` is each relay's buffer.
pub fn attach_udp(
    sim: &mut Sim,
    flow: u32,
    src: u32,
    dst: u32,
    at: &Placement<'_>,
    cap: u64,
    extra: &mut Extra,
) -> Result<(), ScenarioError> {
    let grounds = proxied_grounds(at.topo, at.opts, &[(src, dst)]);
    if grounds.is_empty() {
        return Ok(());
    }
    extra.udp_flows += 1;
    for g in grounds {
        let sat = at.info.first_serving.get(g as usize).copied().flatten().ok_or(MpepError::NoSatellite(g));
        let sat = sat.map_err(|e| bad(flow as usize, &e))?;
        let hops = [
            (HopRole::Source, NodeId(src)),
            (HopRole::SatelliteProxy { ground: g }, sat),
            (HopRole::Receiver, NodeId(dst)),
        ];
        let migs = plan_migrations(at.topo, at.info, sim, &hops).map_err(|e| bad(flow as usize, &e))?;
        let (windows, skipped) = windows_of(flow, &migs, at.opts.state_overhead_bytes, cap);
        extra.udp_migrations += migs.len() as u64 - skipped;
        extra.udp_skipped += skipped;
        for (node, w) in windows {
            extra.udp_windows.entry(node).or_default().push(w);
        }
    }
    Ok(())
}

/// Installs the UDP relay hooks collected by [`attach_udp`].
pub fn install_udp(sim: &mut Sim, extra: &mut Extra) {
    for (node, windows) in std::mem::take(&mut extra.udp_windows) {
        extra.udp.push(sim.attach_hook(node, Box::new(UdpRelayHook::new(node, windows))));
    }
}
