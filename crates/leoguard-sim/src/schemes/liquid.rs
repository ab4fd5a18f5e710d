//! The liquid data tunnel (papers/liquid-data-oneweb.txt; docs/liquid.md) as hooks at the two ends
//! of a path: the real RaptorQ state machines of `leoguard_proto::liquid` run on byte payloads.
//!
//! Every protected flow gets a tunnel between its two end nodes (flows between the same two nodes
//! share one). Each tunnel end holds an `Encoder` for what it sends into the tunnel and a `Decoder`
//! for what comes out, so both directions are coded: data segments one way, ACKs the other, as a
//! tunnel between the TCP hosts carries them (the study ran its tunnel between the two TCP hosts).
//!
//! * Entry ([`Agent::on_depart`]): a packet of a protected flow leaving its end node towards the
//!   other end is taken out of the network. The encoder is fed a byte payload of the packet's size
//!   whose first 8 bytes are an id into a table the two ends share (packets carry no payload in the
//!   simulator); the table keeps the packet and its entry time.
//! * Tunnel datagrams (source and repair symbols, feedback) travel as packets of their own flows,
//!   `DATAGRAM_FLOW_BASE + 2·t + d` and `FEEDBACK_FLOW_BASE + 2·t + d` for tunnel `t` and direction
//!   `d` (0: from the tunnel's lower node to its higher one), `datagram length + UDP_IP_OVERHEAD`
//!   bytes on the wire; their bytes wait in the shared table under (flow, seq) until they arrive.
//! * Exit ([`Agent::on_arrive`]): datagrams addressed to the node are fed to the decoder (or, for
//!   feedback, to the encoder); each packet the decoder delivers is looked up by its id, re-created
//!   and handed on at the node ([`Ctx::resume`]); the entry-to-exit delay is recorded.
//!
//! Table entries the far end never asks for (datagrams lost on the way, packets of abandoned blocks)
//! are pruned `abandon_after + TABLE_SLACK` after they were made: by then both state machines have
//! given the block up.

use crate::engine::{LinkId, NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Duration, Instant};
use leoguard_proto::liquid::{Decoder, Encoder, LiquidConfig, LiquidError, MAX_PACKET};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Flow id of tunnel t's symbol datagrams in direction d: `DATAGRAM_FLOW_BASE + 2·t + d`.
pub const DATAGRAM_FLOW_BASE: u32 = 0x6000_0000;
/// Flow id of tunnel t's feedback datagrams in direction d (sent by the decoder of direction d).
pub const FEEDBACK_FLOW_BASE: u32 = 0x6800_0000;
/// IPv4 (20) + UDP (8) headers around every tunnel datagram, bytes.
pub const UDP_IP_OVERHEAD: u32 = 28;
/// How long past `abandon_after` the shared table keeps entries nobody claimed.
pub const TABLE_SLACK: Duration = Duration::from_secs(1);
/// Bytes of the packet id at the start of each payload.
const ID_BYTES: usize = 8;

/// The scenario's `[liquid]` section.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LiquidOptions {
    /// Tunnel parameters (both directions of every tunnel).
    pub cfg: LiquidConfig,
    /// Protected flows (indices of TCP flows); None: every TCP flow.
    pub flows: Option<Vec<u32>>,
}

use leoguard_net::counters;

counters! {
    /// Counters of the liquid tunnel ends, summed over nodes.
    pub struct LiquidStats {
        /// Packets that entered a tunnel.
        packets_in,
        /// Packets delivered at a tunnel exit.
        packets_out,
        /// Delivered packets that needed decoded (repaired) symbols.
        packets_recovered,
        /// Source blocks closed.
        blocks,
        /// Blocks whose source symbols all arrived.
        blocks_complete,
        /// Blocks completed by RaptorQ decoding.
        blocks_recovered,
        /// Blocks abandoned incomplete at an exit.
        blocks_lost,
        /// Source symbols sent.
        source_symbols,
        /// Proactive repair symbols sent.
        repair_symbols,
        /// Repair symbols sent in answer to feedback.
        extra_repair,
        /// Symbol datagrams sent.
        datagrams,
        /// Their wire bytes (with UDP/IP headers).
        datagram_bytes,
        /// Feedback datagrams sent.
        feedback,
        /// Their wire bytes.
        feedback_bytes,
        /// Wire bytes of the packets that entered.
        bytes_in,
        /// Symbols received twice.
        duplicates,
        /// Datagrams the state machines refused as malformed.
        malformed,
        /// Symbols of blocks already given up (or too far ahead).
        stale,
        /// Entry-to-exit delay summed over delivered packets, ns (network transit included).
        delay_sum_ns,
        /// Delay the tunnel added, summed over delivered packets, ns: from a packet's entry to the
        /// departure of the datagram whose arrival released it (waiting for its symbol to fill, for
        /// repair, for feedback and the repair it asked for; not the network transit).
        added_delay_sum_ns,
        /// Packets refused by the encoder (larger than a frame can hold).
        rejected,
        ;
        /// Largest entry-to-exit delay, ns.
        delay_max_ns,
        /// Largest added delay, ns.
        added_delay_max_ns,
    }
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Packets in a tunnel: id -> (packet, entry time).
    packets: BTreeMap<u64, (Packet, Instant)>,
    /// Datagrams on the wire: (flow, seq) -> (sent, bytes).
    datagrams: BTreeMap<(u32, u64), (Instant, Vec<u8>)>,
    /// Entry order of packet ids and datagram keys, for pruning.
    packet_order: VecDeque<(Instant, u64)>,
    datagram_order: VecDeque<(Instant, (u32, u64))>,
}

impl Table {
    fn prune(&mut self, now: Instant, keep: Duration) {
        while let Some(&(t, id)) = self.packet_order.front() {
            if t + keep > now {
                break;
            }
            self.packets.remove(&id);
            self.packet_order.pop_front();
        }
        while let Some(&(t, k)) = self.datagram_order.front() {
            if t + keep > now {
                break;
            }
            self.datagrams.remove(&k);
            self.datagram_order.pop_front();
        }
    }
}

/// What the tunnel ends share (see the module doc).
pub type SharedTable = Arc<Mutex<TableHandle>>;

/// The shared table (opaque).
#[derive(Debug, Default)]
pub struct TableHandle(Table);

fn lock(t: &SharedTable) -> std::sync::MutexGuard<'_, TableHandle> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// One tunnel as the scenario defines it: index, its two nodes (lower first), the protected flows.
#[derive(Clone, Debug, PartialEq)]
pub struct Tunnel {
    /// Index among the scenario's tunnels.
    pub index: u32,
    /// The two end nodes, lower id first.
    pub ends: (u32, u32),
    /// Flow ids it carries.
    pub flows: Vec<u32>,
}

struct End {
    tunnel: Tunnel,
    peer: u32,
    /// Direction this end sends in (0: lower -> higher node).
    dir: u32,
    enc: Encoder,
    dec: Decoder,
    next_seq: u64,
    next_fb_seq: u64,
    armed: Option<Instant>,
}

impl std::fmt::Debug for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("End").field("tunnel", &self.tunnel).field("peer", &self.peer).finish_non_exhaustive()
    }
}

/// The liquid hook of one node: one end of each tunnel the node is on.
#[derive(Debug)]
pub struct LiquidHook {
    node: u32,
    keep: Duration,
    table: SharedTable,
    ends: Vec<End>,
    stats: LiquidStats,
}

impl LiquidHook {
    /// The hook of `node` for `tunnels` (those it is not an end of are ignored).
    pub fn new(cfg: LiquidConfig, node: u32, tunnels: &[Tunnel], table: SharedTable) -> Result<Self, LiquidError> {
        let mut ends = Vec::new();
        for t in tunnels.iter().filter(|t| t.ends.0 == node || t.ends.1 == node) {
            let (peer, dir) = if t.ends.0 == node { (t.ends.1, 0) } else { (t.ends.0, 1) };
            ends.push(End {
                tunnel: t.clone(),
                peer,
                dir,
                enc: Encoder::new(cfg)?,
                dec: Decoder::new(cfg)?,
                next_seq: 0,
                next_fb_seq: 0,
                armed: None,
            });
        }
        let keep = cfg.abandon_after + TABLE_SLACK;
        Ok(LiquidHook { node, keep, table, ends, stats: LiquidStats::default() })
    }

    /// Counters of this node's tunnel ends (the state machines' and the hook's own).
    pub fn totals(&self) -> LiquidStats {
        let mut s = self.stats;
        for e in &self.ends {
            let (es, ds) = (e.enc.stats(), e.dec.stats());
            s.blocks += es.blocks;
            s.source_symbols += es.source_symbols;
            s.repair_symbols += es.repair_symbols;
            s.extra_repair += es.extra_repair;
            s.rejected += es.rejected;
            s.packets_recovered += ds.recovered;
            s.blocks_complete += ds.blocks_complete;
            s.blocks_recovered += ds.blocks_recovered;
            s.blocks_lost += ds.blocks_lost;
            s.duplicates += ds.duplicates;
            s.malformed += ds.malformed + es.feedback_malformed;
            s.stale += ds.stale + ds.unknown_block;
        }
        s
    }

    /// Sends what end `i`'s machines have, delivers what its decoder has, re-arms its timer.
    /// `released_by`: departure time of the datagram that just arrived (None from timers).
    fn pump(&mut self, i: usize, ctx: &mut Ctx, released_by: Option<Instant>) {
        let now = ctx.now();
        let keep = self.keep;
        let e = &mut self.ends[i];
        let mut guard = lock(&self.table);
        let tab = &mut guard.0;
        tab.prune(now, keep);
        while let Some(d) = e.enc.poll_transmit(now) {
            let flow = DATAGRAM_FLOW_BASE + 2 * e.tunnel.index + e.dir;
            let size = d.len() as u32 + UDP_IP_OVERHEAD;
            let seq = e.next_seq;
            e.next_seq += 1;
            tab.datagrams.insert((flow, seq), (now, d));
            tab.datagram_order.push_back((now, (flow, seq)));
            self.stats.datagrams += 1;
            self.stats.datagram_bytes += u64::from(size);
            ctx.send(Packet { flow, seq, size, dst: e.peer, sent_at: now, ..Default::default() });
        }
        while let Some(d) = e.dec.poll_feedback(now) {
            // Feedback about direction (1 - dir) travels in direction dir.
            let flow = FEEDBACK_FLOW_BASE + 2 * e.tunnel.index + e.dir;
            let size = d.len() as u32 + UDP_IP_OVERHEAD;
            let seq = e.next_fb_seq;
            e.next_fb_seq += 1;
            tab.datagrams.insert((flow, seq), (now, d));
            tab.datagram_order.push_back((now, (flow, seq)));
            self.stats.feedback += 1;
            self.stats.feedback_bytes += u64::from(size);
            ctx.send(Packet { flow, seq, size, dst: e.peer, sent_at: now, ..Default::default() });
        }
        while let Some(p) = e.dec.poll_packet() {
            let Some(id) = p.get(..ID_BYTES).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes) else {
                continue;
            };
            // Pruned (older than any block the decoder still holds): cannot happen within
            // abandon_after, which the decoder enforces; skip rather than trust it.
            let Some((pkt, entered)) = tab.packets.remove(&id) else { continue };
            let delay = now.saturating_duration_since(entered).as_nanos();
            let added = released_by.unwrap_or(now).saturating_duration_since(entered).as_nanos();
            self.stats.packets_out += 1;
            self.stats.delay_sum_ns += delay;
            self.stats.delay_max_ns = self.stats.delay_max_ns.max(delay);
            self.stats.added_delay_sum_ns += added;
            self.stats.added_delay_max_ns = self.stats.added_delay_max_ns.max(added);
            ctx.resume(pkt);
        }
        drop(guard);
        let next = match (e.enc.poll_timeout(), e.dec.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = next {
            let t = t.max(now);
            if e.armed.is_none_or(|a| a <= now || t < a) {
                e.armed = Some(t);
                ctx.timer(t, i as u64);
            }
        }
    }
}

impl Agent for LiquidHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let i = token as usize;
        let now = ctx.now();
        let Some(e) = self.ends.get_mut(i) else { return };
        if e.armed.is_some_and(|a| a <= now) {
            e.armed = None;
        }
        e.enc.handle_timeout(now);
        e.dec.handle_timeout(now);
        self.pump(i, ctx, None);
    }

    fn on_depart(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.flow >= DATAGRAM_FLOW_BASE {
            return true;
        }
        let Some(i) = self.ends.iter().position(|e| e.peer == p.dst && e.tunnel.flows.contains(&p.flow)) else {
            return true;
        };
        let now = ctx.now();
        let id = {
            let mut tab = lock(&self.table);
            let tab = &mut tab.0;
            let id = tab.next_id;
            tab.next_id += 1;
            tab.packets.insert(id, (*p, now));
            tab.packet_order.push_back((now, id));
            id
        };
        // The packet's bytes as the tunnel would carry them; the id makes them identifiable.
        let mut payload = vec![0u8; (p.size as usize).clamp(ID_BYTES, MAX_PACKET)];
        payload[..ID_BYTES].copy_from_slice(&id.to_be_bytes());
        self.stats.packets_in += 1;
        self.stats.bytes_in += u64::from(p.size);
        self.ends[i].enc.push(now, &payload);
        self.pump(i, ctx, None);
        false
    }

    fn on_arrive(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.dst != self.node || p.flow < DATAGRAM_FLOW_BASE {
            return true;
        }
        let (feedback, base) =
            if p.flow >= FEEDBACK_FLOW_BASE { (true, FEEDBACK_FLOW_BASE) } else { (false, DATAGRAM_FLOW_BASE) };
        let rel = p.flow - base;
        let Some(i) = self.ends.iter().position(|e| e.tunnel.index == rel / 2 && e.dir != rel % 2) else {
            return true;
        };
        let bytes = lock(&self.table).0.datagrams.remove(&(p.flow, p.seq)).map(|(_, b)| b);
        let now = ctx.now();
        if let Some(b) = bytes {
            let e = &mut self.ends[i];
            // Refused datagrams are counted by the state machines (`malformed`).
            let _ = if feedback { e.enc.on_feedback(now, &b) } else { e.dec.on_datagram(now, &b) };
        } else {
            self.stats.stale += 1;
        }
        let sent = p.sent_at;
        self.pump(i, ctx, Some(sent));
        false
    }
}

/// The tunnels of a scenario: one per unordered pair of end nodes of the protected TCP flows.
pub fn tunnels(s: &crate::scenario::Scenario, opts: &LiquidOptions) -> Vec<Tunnel> {
    use crate::scenario::FlowKind;
    let wanted = |i: usize| opts.flows.as_ref().is_none_or(|l| l.contains(&(i as u32)));
    let mut by_pair: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for (i, f) in s.flows.iter().enumerate() {
        if matches!(f.kind, FlowKind::Tcp { .. }) && wanted(i) {
            by_pair.entry((f.src.min(f.dst), f.src.max(f.dst))).or_default().push(i as u32);
        }
    }
    (by_pair.into_iter().enumerate()).map(|(k, (ends, flows))| Tunnel { index: k as u32, ends, flows }).collect()
}

/// Attaches a hook at every tunnel end.
pub fn attach(
    s: &crate::scenario::Scenario,
    opts: &LiquidOptions,
    sim: &mut crate::sim::Sim,
) -> Result<Vec<crate::sim::AgentId>, crate::scenario::ScenarioError> {
    let tunnels = tunnels(s, opts);
    let table = SharedTable::default();
    let mut nodes: Vec<u32> = tunnels.iter().flat_map(|t| [t.ends.0, t.ends.1]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut out = Vec::new();
    for n in nodes {
        let hook = LiquidHook::new(opts.cfg, n, &tunnels, Arc::clone(&table)).map_err(|e| {
            crate::scenario::ScenarioError::Invalid {
                field: "liquid".into(),
                value: String::new(),
                reason: e.to_string(),
            }
        })?;
        out.push(sim.attach_hook(NodeId(n), Box::new(hook)));
    }
    Ok(out)
}

/// Checks the `[liquid]` section against the scenario; errors name the field.
pub fn validate(s: &crate::scenario::Scenario, o: &LiquidOptions) -> Result<(), crate::scenario::ScenarioError> {
    use crate::scenario::{FlowKind, ScenarioError};
    let bad = |field: &str, value: String, reason: &str| {
        Err(ScenarioError::Invalid { field: format!("liquid.{field}"), value, reason: reason.into() })
    };
    let others = [
        (s.satguard.is_some(), "satguard"),
        (s.linkguardian.is_some(), "linkguardian"),
        (s.mpep.is_some(), "mpep"),
        (s.tambur.is_some(), "tambur"),
    ];
    if let Some((_, other)) = others.iter().find(|(on, _)| *on) {
        return bad("", "on".into(), &format!("runs instead of {other}, not with it (one scheme at a time)"));
    }
    if let Err(LiquidError::Invalid { field, value, reason }) = o.cfg.validate() {
        return bad(field, value, reason);
    }
    if let Some(l) = &o.flows {
        if l.is_empty() {
            return bad("flows", "[]".into(), "lists no flow (leave it out to protect every TCP flow)");
        }
        for (k, &f) in l.iter().enumerate() {
            if !s.flows.get(f as usize).is_some_and(|spec| matches!(spec.kind, FlowKind::Tcp { .. })) {
                return bad(&format!("flows[{k}]"), f.to_string(), "is not the index of a TCP flow");
            }
        }
    }
    if s.flows.len() >= DATAGRAM_FLOW_BASE as usize {
        return bad("", s.flows.len().to_string(), "too many flows for the tunnel flow numbering");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
