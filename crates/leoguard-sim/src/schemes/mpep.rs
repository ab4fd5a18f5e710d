//! M-PEP (Caponi et al., ISWCS 2015, "Mobile-PEP"), the split-TCP baseline of the SATGUARD paper
//! (§4: "We deploy M-PEPs on the ground stations, dishes and their ingress satellites"): every TCP flow
//! is split at proxies on its path, each proxy acknowledging locally and relaying on a connection of
//! its own ([`SplitProxy`]). On a handover of a ground node the proxy on its ingress satellite
//! migrates its state to the new ingress satellite over the ISLs before sending resumes (the paper:
//! up to 91.2 ms), and the connections on both sides of it are rebuilt, starting in slow start (the
//! paper: "M-PEP has to load resources until state migration completion and transport connection
//! reconstruction"; "the flow frequently goes through the slow start phase").
//!
//! The chain of a flow from `src` to `dst` (see docs/mpep.md): the source; a ground proxy on the
//! ground node `src` hangs off (if `src` is a host); a satellite proxy on the ingress satellite of that
//! ground node; one on the ingress satellite of `dst`'s ground node; a ground proxy on that ground node
//! (if `dst` is a host); the receiver. Flows whose ends share a ground node never enter the
//! satellite network and are not split.
//!
//! Engine mapping: the state of a flow's proxies lives in one shared [`Chain`]; a thin agent on every
//! node a proxy ever occupies delivers that node's packets to it (a migrated proxy's old node drops
//! what still arrives: "stale" packets). Segment `k` (hop `k` to hop `k+1`) carries flow id
//! `seg_flows[k]`: segment 0 keeps the scenario's flow id, the others take ids after the scenario's
//! flows (in flow order). Senders address the hop's current node, looked up per packet, so after a
//! migration traffic goes to the new satellite.

use crate::constellation::{ConstellationTopo, TopoInfo};
use crate::engine::{NodeId, Packet};
use crate::sim::{Agent, AgentId, Ctx, Sim};
use crate::tcp_agent::{TcpSink, TcpSource, FLAG_ACK, FLAG_DATA, FLAG_RETX};
use crate::web::conn::FLAG_SYN;
use crate::web::SETUP_TIMEOUT;
use leoguard_core::{Bps, Bytes, Duration, Instant};
use leoguard_orbit::geo::{distance, light_delay_s};
use leoguard_orbit::Role;
use leoguard_proto::cc;
use leoguard_proto::pep::SplitProxy;
use leoguard_proto::tcp::{Ack, TcpConfig};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Round-trip time the default proxy buffer covers at the ground-link rate: twice the median
/// Starlink RTT of ~50 ms (REFERENCE.md, "Starlink behaviour"), so a proxy's window never limits a
/// segment of a long ISL path.
pub const DEFAULT_BUFFER_RTT: Duration = Duration::from_millis(100);

/// Default state shipped per migration besides the buffered bytes: two TCP control blocks (Linux's
/// `struct tcp_sock` is about 2 KiB each) for the proxy's two connections.
pub const DEFAULT_STATE_OVERHEAD: u64 = 4096;

/// M-PEP options (TOML `[mpep]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpepOptions {
    /// Bytes each proxy may hold (None: the ground-link rate x [`DEFAULT_BUFFER_RTT`]).
    pub buffer_bytes: Option<u64>,
    /// Bytes of connection state a migration ships besides the buffered data.
    pub state_overhead_bytes: u64,
    /// Whether ground stations' ingress satellites also host proxies (the paper: "ground stations,
    /// dishes and their ingress satellites"); false: only user terminals' ingress satellites.
    pub gateway_satellites: bool,
    /// Bytes of UDP packets a satellite proxy holds per flow while it migrates (None: the proxy
    /// buffer); packets beyond are dropped and counted.
    pub udp_buffer_bytes: Option<u64>,
}

impl Default for MpepOptions {
    fn default() -> Self {
        MpepOptions {
            buffer_bytes: None,
            state_overhead_bytes: DEFAULT_STATE_OVERHEAD,
            gateway_satellites: true,
            udp_buffer_bytes: None,
        }
    }
}

/// Invalid M-PEP options or a chain that cannot be built; the message names the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MpepError {
    /// The buffer cannot hold two segments or is absurdly large.
    #[error("mpep.buffer_bytes = {0}: must be in [2896, 2^32] bytes (two segments to 4 GiB)")]
    Buffer(u64),
    /// The state overhead is absurdly large.
    #[error("mpep.state_overhead_bytes = {0}: must be at most 2^32 bytes")]
    Overhead(u64),
    /// The UDP buffer is absurdly large.
    #[error("mpep.udp_buffer_bytes = {0}: must be at most 2^32 bytes")]
    UdpBuffer(u64),
    /// M-PEP runs on a constellation only (it needs ingress satellites and handovers).
    #[error("mpep needs a constellation topology ([topology] kind = \"constellation\")")]
    NoConstellation,
    /// A ground node on a flow's path has no satellite at t = 0.
    #[error("mpep: ground node {0} has no serving satellite at t = 0 to host its ingress proxy")]
    NoSatellite(u32),
}

impl MpepOptions {
    /// Checks the fields.
    pub fn validate(&self) -> Result<(), MpepError> {
        if let Some(b) = self.buffer_bytes {
            if !(2896..=1 << 32).contains(&b) {
                return Err(MpepError::Buffer(b));
            }
        }
        if self.state_overhead_bytes > 1 << 32 {
            return Err(MpepError::Overhead(self.state_overhead_bytes));
        }
        if let Some(b) = self.udp_buffer_bytes.filter(|&b| b > 1 << 32) {
            return Err(MpepError::UdpBuffer(b));
        }
        Ok(())
    }

    /// The proxy buffer: `buffer_bytes`, or the ground-link rate x [`DEFAULT_BUFFER_RTT`].
    pub fn buffer_or_default(&self, gsl_rate: Bps) -> u64 {
        self.buffer_bytes.unwrap_or_else(|| {
            (u128::from(gsl_rate.0) * u128::from(DEFAULT_BUFFER_RTT.as_nanos()) / 8_000_000_000) as u64
        })
    }
}

/// What a hop of a chain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HopRole {
    /// The sending end host.
    Source,
    /// A proxy on a ground node (ground station or dish).
    GroundProxy,
    /// A proxy on the ingress satellite of ground node `ground`; migrates on its handovers.
    SatelliteProxy {
        /// The ground node the satellite serves.
        ground: u32,
    },
    /// The receiving end host.
    Receiver,
}

/// One planned migration of a satellite proxy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Migration {
    /// The handover (the old ground link goes down).
    pub t: Instant,
    /// The proxy's hop index.
    pub hop: usize,
    /// Old ingress satellite.
    pub from: NodeId,
    /// New ingress satellite.
    pub to: NodeId,
    /// Propagation over the ISL route from `from` to `to` at `t`.
    pub propagation: Duration,
    /// Rate the state crosses the ISLs at.
    pub isl_rate: Bps,
}

/// What one migration did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrationRecord {
    /// Scenario flow index.
    pub flow: u32,
    /// Start (the handover).
    pub t: Instant,
    /// Old satellite node.
    pub from: u32,
    /// New satellite node.
    pub to: u32,
    /// Bytes shipped: buffered data plus the state overhead.
    pub state_bytes: u64,
    /// Propagation + state bytes / ISL rate.
    pub delay: Duration,
    /// The proxy's downstream congestion window when the migration started.
    pub cwnd_before: u64,
    /// Its window when sending resumed (the fresh controller's initial window).
    pub cwnd_after: u64,
}

/// M-PEP counters over all flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpepStats {
    /// Proxies (ground and satellite) over all flows.
    pub proxies: u64,
    /// Migrations completed or under way.
    pub migrations: u64,
    /// Handovers whose proxy was still migrating from an earlier one (not migrated again).
    pub migrations_skipped: u64,
    /// Mean migration delay, ns.
    pub migration_delay_mean_ns: u64,
    /// Largest migration delay, ns.
    pub migration_delay_max_ns: u64,
    /// State bytes shipped over ISLs.
    pub bytes_migrated: u64,
    /// Retransmissions by the end hosts (source to first proxy).
    pub retx_source: u64,
    /// Retransmissions by ground proxies.
    pub retx_ground_proxies: u64,
    /// Retransmissions by satellite proxies.
    pub retx_satellite_proxies: u64,
    /// Connections rebuilt in slow start after a migration.
    pub slow_start_restarts: u64,
    /// Packets that reached a node a proxy had left (or was leaving), dropped there.
    pub stale_packets: u64,
    /// Window updates proxies sent upstream after their buffer drained.
    pub window_updates: u64,
    /// Connections split: TCP flows plus web connections that reached a proxy.
    pub split_connections: u64,
    /// SYN-ACKs proxies sent (a proxy terminates the SYN of its upstream hop).
    pub proxy_syn_acks: u64,
    /// UDP flows relayed by satellite proxies.
    pub udp_flows: u64,
    /// Migrations of UDP relays.
    pub udp_migrations: u64,
    /// UDP packets held during migrations (released when the state arrived).
    pub udp_held: u64,
    /// UDP packets dropped because a relay's buffer was full.
    pub udp_dropped: u64,
    /// Largest number of bytes one UDP relay held.
    pub udp_max_held_bytes: u64,
}

impl MpepStats {
    /// Every counter with its name, in declaration order.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("proxies", self.proxies),
            ("migrations", self.migrations),
            ("migrations_skipped", self.migrations_skipped),
            ("migration_delay_mean_ns", self.migration_delay_mean_ns),
            ("migration_delay_max_ns", self.migration_delay_max_ns),
            ("bytes_migrated", self.bytes_migrated),
            ("retx_source", self.retx_source),
            ("retx_ground_proxies", self.retx_ground_proxies),
            ("retx_satellite_proxies", self.retx_satellite_proxies),
            ("slow_start_restarts", self.slow_start_restarts),
            ("stale_packets", self.stale_packets),
            ("window_updates", self.window_updates),
            ("split_connections", self.split_connections),
            ("proxy_syn_acks", self.proxy_syn_acks),
            ("udp_flows", self.udp_flows),
            ("udp_migrations", self.udp_migrations),
            ("udp_held", self.udp_held),
            ("udp_dropped", self.udp_dropped),
            ("udp_max_held_bytes", self.udp_max_held_bytes),
        ]
    }
}

#[derive(Debug)]
struct Hop {
    role: HopRole,
    node: NodeId,
    /// False while the proxy's state is migrating (it neither receives nor sends).
    active: bool,
    /// The hop's sending side waits for the next hop's migration to finish.
    paused: bool,
    proxy: Option<SplitProxy>,
    gen: u64,
    armed: Option<Instant>,
    cwnd_before: u64,
    /// Whether the hop's downstream connection is set up (without a handshake: always).
    open: bool,
    /// When the hop sends its SYN (again) while the connection is not open.
    syn_due: Option<Instant>,
    syn_tries: u32,
}

/// The proxies of one flow and what they share.
#[derive(Debug)]
pub struct Chain {
    flow: u32,
    seg_flows: Vec<u32>,
    hops: Vec<Hop>,
    cfg: TcpConfig,
    cc: String,
    tc: u8,
    header: u32,
    overhead: u64,
    migrations: Vec<Migration>,
    /// Per migration, its index in `records` once started.
    started: Vec<Option<usize>>,
    records: Vec<MigrationRecord>,
    /// The proxy agent of each node.
    agents: BTreeMap<NodeId, AgentId>,
    source_agent: Option<AgentId>,
    sink_rcv_nxt: u64,
    total: Option<u64>,
    /// When the receiver's acknowledgement of the last byte reached its peer (the last proxy).
    pub completed_at: Option<Instant>,
    stale: u64,
    skipped: u64,
    restarts: u64,
    /// Packet flag bit set on everything the chain sends (a web connection's reverse direction).
    dir_flag: u16,
    /// Bits OR'd into the tokens of the chain's timers and wakes (to tell two chains on one agent).
    tag: u64,
    /// Token that wakes the source when its next hop resumes (None: an [`MpepSource`]'s).
    source_wake: Option<u64>,
    /// Whether proxies open their downstream connections with a SYN handshake (web connections).
    handshake: bool,
    /// Whether proxies hold state (a TCP flow: always; a web connection: from its SYN reaching a
    /// proxy until the browser is done with it).
    live: bool,
    closed: bool,
    /// Whether the chain's proxies and migrations count in [`MpepStats`] (the reverse direction of a
    /// web connection shares its proxies and migrations with the forward one).
    counted: bool,
    syn_acks: u64,
}

/// A chain shared by its agents.
pub type SharedChain = Arc<Mutex<Chain>>;

fn lock(c: &SharedChain) -> MutexGuard<'_, Chain> {
    // Agents run one at a time: the lock is never contended, and a panic elsewhere ends the run anyway.
    c.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

const TOKEN_TIMER: u64 = 1 << 62;
const TOKEN_MIG_START: u64 = 1 << 61;
const TOKEN_MIG_RESUME: u64 = 1 << 60;
/// Wakes the upstream hop of a migrated proxy (bit 59 alone: clear of `TcpSource`'s tokens).
const TOKEN_UP_RESUME: u64 = 1 << 59;
const TOKEN_SCHEMES: u64 = 0xF << 59;

impl Chain {
    /// A chain of `hops` (role, node at t = 0) for scenario flow `flow`; segment `k > 0` gets flow id
    /// `first_extra + k - 1`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        hops: &[(HopRole, NodeId)],
        first_extra: u32,
        cc_name: &str,
        cfg: TcpConfig,
        buffer: u64,
        overhead: u64,
        total: Option<u64>,
    ) -> Result<Chain, cc::UnknownAlgorithm> {
        let mut seg_flows = vec![flow];
        seg_flows.extend((1..hops.len().saturating_sub(1)).map(|k| first_extra + k as u32 - 1));
        let mut out = Vec::with_capacity(hops.len());
        for &(role, node) in hops {
            let proxy = match role {
                HopRole::GroundProxy | HopRole::SatelliteProxy { .. } => {
                    Some(SplitProxy::new(cfg, cc::build(cc_name, u64::from(cfg.mss), cfg.init_cwnd_segments)?, buffer))
                }
                HopRole::Source | HopRole::Receiver => None,
            };
            out.push(Hop {
                role,
                node,
                active: true,
                paused: false,
                proxy,
                gen: 0,
                armed: None,
                cwnd_before: 0,
                open: true,
                syn_due: None,
                syn_tries: 0,
            });
        }
        Ok(Chain {
            flow,
            seg_flows,
            hops: out,
            cfg,
            cc: cc_name.to_string(),
            tc: 0,
            header: cfg.header_bytes,
            overhead,
            migrations: Vec::new(),
            started: Vec::new(),
            records: Vec::new(),
            agents: BTreeMap::new(),
            source_agent: None,
            sink_rcv_nxt: 0,
            total,
            completed_at: None,
            stale: 0,
            skipped: 0,
            restarts: 0,
            dir_flag: 0,
            tag: 0,
            source_wake: None,
            handshake: false,
            live: true,
            closed: false,
            counted: true,
            syn_acks: 0,
        })
    }

    /// Segment flow ids (segment `k` runs from hop `k` to hop `k + 1`).
    pub fn seg_flows(&self) -> &[u32] {
        &self.seg_flows
    }

    /// Plans migrations (in time order).
    pub fn set_migrations(&mut self, m: Vec<Migration>) {
        self.started = vec![None; m.len()];
        self.migrations = m;
    }

    /// Every node a proxy of the chain occupies at some time.
    pub fn proxy_nodes(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = (self.hops.iter().filter(|h| h.proxy.is_some()).map(|h| h.node))
            .chain(self.migrations.iter().flat_map(|m| [m.from, m.to]))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The proxy of hop `h`, if it is one.
    pub fn proxy(&self, h: usize) -> Option<&SplitProxy> {
        self.hops.get(h).and_then(|x| x.proxy.as_ref())
    }

    /// The current node of hop `h`.
    pub fn node(&self, h: usize) -> NodeId {
        self.hops[h].node
    }

    /// The roles of the hops.
    pub fn roles(&self) -> Vec<HopRole> {
        self.hops.iter().map(|h| h.role).collect()
    }

    /// What the migrations did so far.
    pub fn records(&self) -> &[MigrationRecord] {
        &self.records
    }

    fn seg_of(&self, flow: u32) -> Option<usize> {
        self.seg_flows.iter().position(|&f| f == flow)
    }

    fn fresh_cc(&self) -> Box<dyn cc::CongestionControl> {
        // The name was checked when the chain was built.
        cc::build(&self.cc, u64::from(self.cfg.mss), self.cfg.init_cwnd_segments)
            .unwrap_or_else(|_| unreachable!("controller name checked in Chain::new"))
    }

    fn send_ack(&self, seg: usize, a: &Ack, ctx: &mut Ctx) {
        // The ACK's `seq` field carries the advertised window (as TcpSink does).
        ctx.send(Packet {
            flow: self.seg_flows[seg],
            seq: a.rwnd,
            ack: a.cum,
            sack: a.sack,
            n_sack: a.n_sack,
            ts_ecr: a.ts_ecr,
            size: self.header,
            dst: self.hops[seg].node.0,
            sent_at: ctx.now(),
            flags: FLAG_ACK | self.dir_flag,
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        });
    }

    /// Sends what proxy hop `h` may send and re-arms its timer.
    fn pump(&mut self, h: usize, ctx: &mut Ctx) {
        let now = ctx.now();
        let (flow, dst, tc, header) = (self.seg_flows[h], self.hops[h + 1].node, self.tc, self.header);
        let (last, dir, tag) = (h + 2 == self.hops.len(), self.dir_flag, self.tag);
        let hop = &mut self.hops[h];
        let Some(p) = hop.proxy.as_mut().filter(|_| hop.active) else { return };
        if !hop.open && hop.syn_due.is_none_or(|t| t <= now) {
            // The downstream connection is not set up: (re)send the SYN, RFC 6298's 1 s first
            // timeout doubled per try (as the browser does).
            hop.syn_tries += 1;
            hop.syn_due = Some(now + Duration(SETUP_TIMEOUT.as_nanos() << (hop.syn_tries - 1).min(6)));
            ctx.send(Packet {
                flow,
                size: crate::web::sizes::SYN,
                dst: dst.0,
                sent_at: now,
                flags: FLAG_SYN | dir,
                net: crate::engine::NetFields { tc, ..Default::default() },
                ..Default::default()
            });
        }
        if !hop.paused && hop.open {
            while let Some(seg) = p.poll_transmit(now) {
                let flags = FLAG_DATA | dir | if seg.retransmission { FLAG_RETX } else { 0 };
                ctx.send(Packet {
                    flow,
                    seq: seg.seq,
                    size: seg.len + header,
                    dst: dst.0,
                    sent_at: now,
                    flags,
                    net: crate::engine::NetFields { tc, ..Default::default() },
                    ..Default::default()
                });
            }
        }
        if last && self.completed_at.is_none() && self.total.is_some_and(|t| p.tx.snd_una() >= t) {
            self.completed_at = Some(now);
        }
        let syn = hop.syn_due.filter(|_| !hop.open);
        let want = [p.poll_timeout(), syn].into_iter().flatten().filter(|&t| t > now).min();
        if want != hop.armed {
            hop.armed = want;
            hop.gen = (hop.gen + 1) & 0xFFFF_FFFF;
            if let Some(t) = want {
                ctx.timer(t, TOKEN_TIMER | (h as u64) << 32 | hop.gen | tag);
            }
        }
    }

    /// Whether hop `h` is a proxy running on `node` now.
    fn here(&mut self, h: usize, node: NodeId) -> bool {
        let ok = self.hops.get(h).is_some_and(|x| x.proxy.is_some() && x.active && x.node == node);
        if !ok {
            self.stale += 1;
        }
        ok
    }

    fn on_packet(&mut self, node: NodeId, p: &Packet, ctx: &mut Ctx) {
        let Some(seg) = self.seg_of(p.flow) else { return };
        let now = ctx.now();
        if p.flags & FLAG_SYN != 0 {
            self.on_syn(node, seg, p, ctx);
        } else if p.flags & FLAG_DATA != 0 {
            let h = seg + 1;
            if !self.here(h, node) {
                return;
            }
            let len = p.size.saturating_sub(self.header);
            let ack = self.hops[h].proxy.as_mut().and_then(|x| x.on_data(now, p.seq, len, p.sent_at));
            if let Some(a) = ack {
                self.send_ack(seg, &a, ctx);
            }
            self.pump(h, ctx);
        } else if p.flags & FLAG_ACK != 0 {
            let h = seg;
            if !self.here(h, node) {
                return;
            }
            let a =
                Ack { cum: p.ack, sack: p.sack, n_sack: p.n_sack, rwnd: p.seq, ts_ecr: p.ts_ecr, ..Default::default() };
            let update = self.hops[h].proxy.as_mut().and_then(|x| x.on_ack(now, &a));
            if let Some(u) = update {
                self.send_ack(h - 1, &u, ctx);
            }
            self.pump(h, ctx);
        }
    }

    /// A SYN (from upstream) or SYN-ACK (from downstream) of segment `seg`: a proxy terminates the
    /// SYN (answers it at once and opens its own downstream connection, RFC 3135 §2.4); a SYN-ACK
    /// opens the hop's downstream connection, and what it buffered meanwhile goes out.
    fn on_syn(&mut self, node: NodeId, seg: usize, p: &Packet, ctx: &mut Ctx) {
        let h = if p.flags & FLAG_ACK != 0 { seg } else { seg + 1 };
        if !self.here(h, node) {
            return;
        }
        if p.flags & FLAG_ACK != 0 {
            let hop = &mut self.hops[h];
            hop.open = true;
            hop.syn_due = None;
        } else {
            self.live = true;
            self.syn_acks += 1;
            ctx.send(Packet {
                flow: p.flow,
                size: crate::web::sizes::SYN,
                dst: self.hops[seg].node.0,
                sent_at: ctx.now(),
                flags: FLAG_SYN | FLAG_ACK | self.dir_flag,
                net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
                ..Default::default()
            });
        }
        self.pump(h, ctx);
    }

    fn on_protocol_timer(&mut self, node: NodeId, token: u64, ctx: &mut Ctx) {
        let h = ((token >> 32) & 0xFFFF) as usize;
        let gen = token & 0xFFFF_FFFF;
        let Some(hop) = self.hops.get_mut(h) else { return };
        if hop.node != node || !hop.active || hop.gen != gen {
            return; // superseded, or a timer of a proxy that has left
        }
        hop.armed = None;
        let ack = hop.proxy.as_mut().and_then(|x| x.handle_timeout(ctx.now()));
        if let Some(a) = ack {
            self.send_ack(h - 1, &a, ctx);
        }
        self.pump(h, ctx);
    }

    /// The receiver of segment `h` (hop `h + 1`): the bytes it holds in order.
    fn downstream_rcv_nxt(&self, h: usize) -> u64 {
        match &self.hops[h + 1].proxy {
            Some(p) => p.rx.rcv_nxt(),
            None => self.sink_rcv_nxt,
        }
    }

    /// The handover of migration `m`: the proxy stops, its state leaves for the new satellite, the
    /// hop upstream of it pauses; the new node and the upstream hop are woken when the state arrives.
    fn start_migration(&mut self, m: usize, ctx: &mut Ctx) {
        self.start_migration_with(m, 0, ctx);
    }

    /// Starts migration `m` shipping `extra` bytes besides the proxy's own state (what the proxy of
    /// the connection's other direction holds: both directions' state crosses in one transfer).
    fn start_migration_with(&mut self, m: usize, extra: u64, ctx: &mut Ctx) {
        let mig = self.migrations[m];
        let h = mig.hop;
        if !self.hops[h].active || self.started[m].is_some() {
            self.skipped += 1;
            return;
        }
        let tag = self.tag;
        let hop = &mut self.hops[h];
        let Some(p) = hop.proxy.as_ref() else { return };
        let state = p.buffered() + self.overhead + extra;
        let delay = mig.propagation + mig.isl_rate.transmission_time(Bytes(state)).unwrap_or(Duration::ZERO);
        hop.cwnd_before = p.tx.cc().cwnd();
        hop.active = false;
        hop.armed = None;
        hop.gen = (hop.gen + 1) & 0xFFFF_FFFF;
        self.records.push(MigrationRecord {
            flow: self.flow,
            t: ctx.now(),
            from: hop.node.0,
            to: mig.to.0,
            state_bytes: state,
            delay,
            cwnd_before: hop.cwnd_before,
            cwnd_after: 0,
        });
        self.started[m] = Some(self.records.len() - 1);
        self.hops[h - 1].paused = true;
        let at = ctx.now() + delay;
        if let Some(&a) = self.agents.get(&mig.to) {
            ctx.wake(a, at, TOKEN_MIG_RESUME | m as u64 | tag);
        }
        if let Some(a) = self.agent_of(h - 1) {
            ctx.wake(a, at, self.up_token(h - 1, m));
        }
    }

    /// The token that tells hop `u` its next hop resumed after migration `m`.
    fn up_token(&self, u: usize, m: usize) -> u64 {
        match self.source_wake {
            Some(t) if u == 0 => t,
            _ => TOKEN_UP_RESUME | m as u64 | self.tag,
        }
    }

    /// The handover of migration `m` for a proxy holding no state (a web connection not yet set
    /// up or already done): the proxy just runs on the new satellite from now on.
    fn relocate(&mut self, m: usize) {
        let mig = self.migrations[m];
        if self.started[m].is_none() && self.hops[mig.hop].active {
            self.hops[mig.hop].node = mig.to;
        }
    }

    /// Bytes the proxy of hop `h` holds.
    fn buffered_at(&self, h: usize) -> u64 {
        self.hops.get(h).and_then(|x| x.proxy.as_ref()).map_or(0, SplitProxy::buffered)
    }

    fn agent_of(&self, h: usize) -> Option<AgentId> {
        if h == 0 {
            self.source_agent
        } else {
            self.agents.get(&self.hops[h].node).copied()
        }
    }

    /// The state of migration `m` arrived at the new satellite: the proxy runs there with its
    /// downstream connection rebuilt in slow start from what the next hop holds.
    fn resume_migration(&mut self, node: NodeId, m: usize, ctx: &mut Ctx) {
        let mig = self.migrations[m];
        let h = mig.hop;
        let Some(rec) = self.started[m] else { return };
        if node != mig.to || self.hops[h].active {
            return;
        }
        let at = self.downstream_rcv_nxt(h);
        let cc = self.fresh_cc();
        let hop = &mut self.hops[h];
        hop.node = mig.to;
        hop.active = true;
        // A handshake under way is rebuilt too: the SYN goes out again at once.
        hop.syn_due = None;
        if let Some(p) = hop.proxy.as_mut() {
            p.restart_downstream(cc, at);
            self.records[rec].cwnd_after = p.tx.cc().cwnd();
        }
        self.restarts += 1;
        self.pump(h, ctx);
    }

    /// Hop `u` (a proxy) learns that the proxy after it runs again: its connection to it is rebuilt.
    fn resume_upstream(&mut self, node: NodeId, m: usize, ctx: &mut Ctx) {
        let u = self.migrations[m].hop - 1;
        if self.hops[u].node != node {
            // The upstream proxy moved meanwhile: pass the news to its current node.
            if let Some(a) = self.agent_of(u) {
                ctx.wake(a, ctx.now(), self.up_token(u, m));
            }
            return;
        }
        let at = self.downstream_rcv_nxt(u);
        let cc = self.fresh_cc();
        let hop = &mut self.hops[u];
        hop.paused = false;
        hop.syn_due = None;
        if let Some(p) = hop.proxy.as_mut() {
            p.restart_downstream(cc, at);
        }
        self.restarts += 1;
        self.pump(u, ctx);
    }

    fn on_timer(&mut self, node: NodeId, token: u64, ctx: &mut Ctx) {
        let m = (token & 0xFFFF_FFFF) as usize;
        if token & TOKEN_TIMER != 0 {
            self.on_protocol_timer(node, token, ctx);
        } else if token & TOKEN_MIG_START != 0 && m < self.migrations.len() {
            self.start_migration(m, ctx);
        } else if token & TOKEN_MIG_RESUME != 0 && m < self.migrations.len() {
            self.resume_migration(node, m, ctx);
        } else if token & TOKEN_UP_RESUME != 0 && m < self.migrations.len() {
            self.resume_upstream(node, m, ctx);
        }
    }

    /// Adds this chain's counters to `s` (the delay mean is summed as a total: see [`finish_stats`]).
    fn add_stats(&self, s: &mut MpepStats, source_retx: u64) {
        s.retx_source += source_retx;
        s.proxy_syn_acks += self.syn_acks;
        let counted = self.counted && self.live;
        s.split_connections += u64::from(counted);
        for h in &self.hops {
            let Some(p) = &h.proxy else { continue };
            s.proxies += u64::from(counted);
            s.window_updates += p.window_updates;
            match h.role {
                HopRole::SatelliteProxy { .. } => s.retx_satellite_proxies += p.tx.stats.retransmissions,
                _ => s.retx_ground_proxies += p.tx.stats.retransmissions,
            }
        }
        for r in self.records.iter().filter(|_| self.counted) {
            s.migrations += 1;
            s.bytes_migrated += r.state_bytes;
            s.migration_delay_mean_ns += r.delay.as_nanos();
            s.migration_delay_max_ns = s.migration_delay_max_ns.max(r.delay.as_nanos());
        }
        s.migrations_skipped += if self.counted { self.skipped } else { 0 };
        s.slow_start_restarts += self.restarts;
        s.stale_packets += self.stale;
    }
}

/// Turns the summed delays of [`Chain`]s into a mean.
fn finish_stats(s: &mut MpepStats) {
    s.migration_delay_mean_ns /= s.migrations.max(1);
}

mod agents;
pub use agents::*;

pub mod udp;
pub mod web;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod web_tests;
