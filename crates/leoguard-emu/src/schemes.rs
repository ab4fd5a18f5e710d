//! The per-hop schemes on the emulator's real packets: the same SATGUARD and LinkGuardian hooks the
//! simulator runs (leoguard-net), hosted on the data plane's nodes through the same `Agent`/`Ctx`
//! interface and with the simulator's forwarding semantics (a hook sees a packet arrive over a link
//! before it is delivered or forwarded, and leave before it is put on a link; it may hold, consume,
//! resume, retransmit or put link-local packets on a link).
//!
//! What is real: the scheme fields (HSeq, FSeq, HAck, LinkGuardian's seq and ACK) travel in IPv6
//! Hop-by-Hop options written into the real packets on every emulated link and read back at the far
//! end, where the hook gets exactly what the wire carried; control packets are real IPv6 packets.
//! A hook that retransmits or releases a packet hands back a `Packet` struct: the data plane keeps a
//! copy of each packet's bytes as it entered (its *master*, for `retain_ms`) and sends a fresh copy of
//! those bytes with the hook's fields. What is not in the bytes: the source route of a migrated packet
//! (SATGUARD §3.2 uses SRv6; here its route and segment ride in the packet's metadata and the link
//! charges the modelled encapsulation size).

use crate::dataplane::{Cause, DataPlane, Ev, SLOT};
use crate::hbh;
use leoguard_core::Instant;
use leoguard_net::host::{Agent, Ctx, SendKind};
use leoguard_net::packet::{Packet, NET_CONTROL};
use leoguard_net::schemes::wire::{self, WireScheme, LINK_LOCAL_DST};
use leoguard_net::LinkId;
use std::collections::{HashMap, VecDeque};

/// The per-hop scheme's state in the data plane.
pub struct SchemeHost {
    /// Per node: its hook.
    hooks: Vec<Option<Box<dyn Agent>>>,
    ctx: Ctx,
    scheme: WireScheme,
    /// (flow, seq) -> the slot holding the bytes the packet entered with.
    masters: HashMap<(u32, u64), u32>,
    /// Masters in the order they were made: (expiry, flow, seq).
    master_q: VecDeque<(u64, u32, u64)>,
    retain_ns: u64,
    /// Whether any node runs a hook (asked for every packet, so kept rather than recomputed).
    active: bool,
    /// Counters.
    pub stats: HostStats,
}

/// What the scheme host did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Packets the hooks created (control packets, retransmitted or released copies).
    pub generated: u64,
    /// Packets a hook took out of the network (HAcks at their receiver, packets held for order or
    /// migrated, duplicates discarded).
    pub absorbed: u64,
    /// Masters kept and live now.
    pub masters_live: u64,
    /// Masters dropped before their time because the pool ran short.
    pub masters_evicted_early: u64,
    /// Hook sends of a data packet whose bytes were no longer kept (dropped, cause `retx_evicted`).
    pub retx_without_bytes: u64,
    /// Scheme fields that could not be written into a packet (an IPv4 packet or no room): it left
    /// without them.
    pub unstamped: u64,
}

impl SchemeHost {
    /// Hooks by node (`hooks` from leoguard-net's `build_hooks`).
    pub fn new(hooks: leoguard_net::schemes::NodeHooks, scheme: WireScheme, nodes: usize, retain_ns: u64) -> Self {
        let mut by_node: Vec<Option<Box<dyn Agent>>> = (0..nodes).map(|_| None).collect();
        for (n, h) in hooks {
            if let Some(slot) = by_node.get_mut(n as usize) {
                *slot = Some(h);
            }
        }
        SchemeHost {
            active: by_node.iter().any(Option::is_some),
            hooks: by_node,
            ctx: Ctx::default(),
            scheme,
            masters: HashMap::new(),
            master_q: VecDeque::new(),
            retain_ns,
            stats: HostStats::default(),
        }
    }

    /// Whether any node runs a hook.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Whether `p` is a link-local control packet (built from its fields, not copied from bytes).
    pub fn is_control(&self, p: &Packet) -> bool {
        p.net.flags & NET_CONTROL != 0 && p.dst == LINK_LOCAL_DST
    }

    /// Whether `p` rides the links' prioritised channel, ahead of queued data: link-local control
    /// packets and what a hook flags for it (LinkGuardian's retransmissions, its priority queue), as
    /// in the simulator.
    pub fn prioritised(&self, p: &Packet) -> bool {
        p.net.flags & NET_CONTROL != 0
    }

    /// The scheme's counters summed over its hooks (SATGUARD's or LinkGuardian's), by name.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        use leoguard_net::schemes::{linkguardian, satguard};
        let mut sg: Option<satguard::SatguardStats> = None;
        let mut lg: Option<linkguardian::LinkGuardianStats> = None;
        for h in self.hooks.iter().filter_map(|h| h.as_deref()) {
            if let Some(x) = h.as_any().downcast_ref::<satguard::SatguardHook>() {
                *sg.get_or_insert_with(Default::default) += x.totals();
            } else if let Some(x) = h.as_any().downcast_ref::<linkguardian::LinkGuardianHook>() {
                *lg.get_or_insert_with(Default::default) += x.stats;
            }
        }
        sg.map(|s| s.fields()).or_else(|| lg.map(|s| s.fields())).unwrap_or_default()
    }
}

impl DataPlane {
    fn has_hook(&self, node: u32) -> bool {
        self.schemes.hooks.get(node as usize).is_some_and(Option::is_some)
    }

    /// Runs `f` on `node`'s hook (if any) at model time `now`, the time of the event being handled,
    /// and carries out what it asked for at that time.
    ///
    /// Model time, not the wall clock: the loop handles events in model-time order, at or after their
    /// time, so a hook that read the clock while the loop runs late (after a routing step's batch of
    /// controls, say) would act "later" than arrivals still queued with earlier times. LinkGuardian's
    /// egress-idle check then found its link idle while data that reached the node earlier had not
    /// been handled yet, and its dummy, put on the link ahead of that data, opened a false hole at the
    /// receiver: a spurious retransmission round per step boundary per busy link, two copies each,
    /// 91 % of the emulator's link-local retransmissions on the demo path (docs/cross-validation.md).
    /// The simulator's hooks see the event's time; so do these now.
    pub(crate) fn with_hook(&mut self, node: u32, now: u64, f: impl FnOnce(&mut dyn Agent, &mut Ctx)) {
        let Some(mut a) = self.schemes.hooks.get_mut(node as usize).and_then(Option::take) else { return };
        self.schemes.ctx.now = Instant(now);
        self.schemes.ctx.node = leoguard_net::NodeId(node);
        f(a.as_mut(), &mut self.schemes.ctx);
        self.schemes.hooks[node as usize] = Some(a);
        self.flush(node, now);
    }

    /// Shows the packet in `slot` to `node`'s hook; false if the hook took it (the slot is freed).
    fn pass_hook(
        &mut self,
        node: u32,
        slot: u32,
        t: u64,
        f: impl FnOnce(&mut dyn Agent, &mut Packet, &mut Ctx) -> bool,
    ) -> bool {
        if !self.has_hook(node) {
            return true;
        }
        let mut p = self.pkts[slot as usize];
        let mut keep = true;
        self.with_hook(node, t, |a, c| keep = f(a, &mut p, c));
        if keep {
            self.pkts[slot as usize] = p;
        } else {
            self.schemes.stats.absorbed += 1;
            self.free.push(slot);
        }
        keep
    }

    fn flush(&mut self, node: u32, now: u64) {
        // The context's vectors are taken and given back, so a hook call allocates nothing.
        let mut timers = std::mem::take(&mut self.schemes.ctx.timers);
        for (at, token) in timers.drain(..) {
            self.push(at.as_nanos().max(now), Ev::Timer { node, token });
        }
        self.schemes.ctx.timers = timers;
        // Wakes of other agents are the simulator's M-PEP signalling; the per-hop schemes use none.
        self.schemes.ctx.wakes.clear();
        let mut sends = std::mem::take(&mut self.schemes.ctx.sends);
        for (p, kind) in sends.drain(..) {
            let link = match kind {
                SendKind::OnLink(l) => Some(l),
                _ => None,
            };
            let Some(slot) = self.materialise(&p, node, link, now) else { continue };
            match kind {
                // A hook's own sends pass no hook on the way out (as in the simulator).
                SendKind::Routed => self.forward(node, slot, now, false),
                SendKind::OnLink(l) => self.put_on(l, slot, now),
                SendKind::Resume => self.handle_at(node, slot, now),
            }
        }
        // A nested flush (a send that ran a hook) may have left its own, empty, vector in place.
        if self.schemes.ctx.sends.capacity() < sends.capacity() {
            self.schemes.ctx.sends = sends;
        }
    }

    /// A slot holding `p` as a real packet: a control packet built from its fields, or a copy of the
    /// bytes the data packet entered with.
    fn materialise(&mut self, p: &Packet, node: u32, link: Option<LinkId>, t: u64) -> Option<u32> {
        let Some(slot) = self.free.pop() else {
            self.count_drop(Cause::PoolExhausted);
            return None;
        };
        let off = slot as usize * SLOT;
        if self.schemes.is_control(p) {
            let to = link.map_or(node, |l| self.net.links[l.0 as usize].to.0);
            let h = wire::packet_hbh(self.schemes.scheme, p, leoguard_wire::NEXT_HEADER_NONE);
            let len =
                h.and_then(|h| hbh::control(&mut self.bufs[off..off + SLOT], node, to, p.net.tc, &h, p.size as usize));
            let Some(len) = len else {
                self.drop_slot(slot, Cause::Malformed);
                return None;
            };
            self.meta[slot as usize] =
                crate::dataplane::Meta { len: len as u32, t_in: t, dst_node: node, entry: 0, flow: 0 };
        } else {
            let Some(&master) = self.schemes.masters.get(&(p.flow, p.seq)) else {
                // The hook made a packet the data plane cannot fill: generated, then dropped.
                self.schemes.stats.generated += 1;
                self.schemes.stats.retx_without_bytes += 1;
                self.drop_slot(slot, Cause::RetxEvicted);
                return None;
            };
            let (mo, m) = (master as usize * SLOT, self.meta[master as usize]);
            self.bufs.copy_within(mo..mo + m.len as usize, off);
            self.meta[slot as usize] = m;
        }
        self.pkts[slot as usize] = *p;
        self.schemes.stats.generated += 1;
        Some(slot)
    }

    /// Keeps a copy of the bytes the packet in `slot` entered with, for the hooks' retransmissions.
    pub(crate) fn keep_master(&mut self, slot: u32, t: u64) {
        if !self.schemes.active() {
            return;
        }
        // Expired masters go first; when the pool runs short the oldest go early.
        let low = self.meta.len() / 8;
        while let Some(&(exp, f, s)) = self.schemes.master_q.front() {
            if exp > t && self.free.len() > low {
                break;
            }
            if exp > t {
                self.schemes.stats.masters_evicted_early += 1;
            }
            self.schemes.master_q.pop_front();
            if let Some(m) = self.schemes.masters.remove(&(f, s)) {
                self.free.push(m);
                self.schemes.stats.masters_live -= 1;
            }
        }
        let Some(master) = self.free.pop() else { return };
        let (off, mo, len) = (slot as usize * SLOT, master as usize * SLOT, self.meta[slot as usize].len as usize);
        self.bufs.copy_within(off..off + len, mo);
        self.meta[master as usize] = self.meta[slot as usize];
        let key = (self.pkts[slot as usize].flow, self.pkts[slot as usize].seq);
        if let Some(old) = self.schemes.masters.insert(key, master) {
            self.free.push(old);
            self.schemes.stats.masters_live -= 1;
        }
        self.schemes.stats.masters_live += 1;
        self.schemes.master_q.push_back((t + self.schemes.retain_ns, key.0, key.1));
    }

    /// Writes the packet's scheme fields into its Hop-by-Hop header; returns its length.
    pub(crate) fn stamp(&mut self, slot: u32) -> u32 {
        let len = self.meta[slot as usize].len as usize;
        if self.schemes.scheme == WireScheme::None || !self.schemes.active() {
            return len as u32;
        }
        let off = slot as usize * SLOT;
        let p = self.pkts[slot as usize];
        let h = wire::packet_hbh(self.schemes.scheme, &p, 0);
        match hbh::set(&mut self.bufs[off..off + SLOT], len, h.as_ref()) {
            Some(n) => {
                self.meta[slot as usize].len = n as u32;
                n as u32
            }
            None => {
                if h.is_some() {
                    self.schemes.stats.unstamped += 1;
                }
                len as u32
            }
        }
    }

    /// Forwards the packet in `slot` from node `at` at model time `t`; `hook` says whether the node's
    /// hook sees it leave (the simulator's `forward`).
    pub(crate) fn forward(&mut self, at: u32, slot: u32, t: u64, hook: bool) {
        let dst = self.pkts[slot as usize].dst;
        if at == dst {
            self.deliver(slot, t);
            return;
        }
        let Some(link) = self.net.next_hop(at, dst) else {
            self.drop_slot(slot, Cause::NoRoute);
            return;
        };
        if hook && self.has_hook(at) {
            let size = self.pkts[slot as usize].size;
            let l = &self.net.links[link.0 as usize];
            // A packet the queue turns away never reaches the interface: the hook sees no departure.
            if l.has_room(size) {
                self.schemes.ctx.wait = l.egress_wait(Instant(t), size);
                let keep = self.pass_hook(at, slot, t, |a, p, c| a.on_depart(link, p, c));
                self.schemes.ctx.wait = leoguard_core::Duration::ZERO;
                if !keep {
                    return;
                }
            } else {
                let p = self.pkts[slot as usize];
                self.with_hook(at, t, |a, c| a.on_congestion_drop(link, &p, c));
            }
        }
        self.put_on(link, slot, t);
    }

    /// The packet in `slot` arrived at `node` over `link`: the hook gets the fields the wire carried.
    pub(crate) fn arrive_at(&mut self, node: u32, link: LinkId, slot: u32, t: u64) {
        // The tap sees an arrival as the wire delivered it, before the node's hook runs.
        self.tap_packet(node, slot, t);
        let off = slot as usize * SLOT;
        let len = self.meta[slot as usize].len as usize;
        if self.schemes.scheme != WireScheme::None && hbh::is_v6(&self.bufs[off..off + SLOT], len) {
            let h = hbh::read(&self.bufs[off..off + SLOT], len);
            wire::apply_hbh(h.as_ref(), &mut self.pkts[slot as usize]);
        }
        self.pkts[slot as usize].hops += 1;
        if self.leotp.runs_at(node) && self.leotp_intercept(node, slot, t) {
            return;
        }
        if self.pass_hook(node, slot, t, |a, p, c| a.on_arrive(link, p, c)) {
            self.handle_at(node, slot, t);
        }
    }

    /// A packet that passed the node's hook: delivered if addressed here, else forwarded.
    fn handle_at(&mut self, node: u32, slot: u32, t: u64) {
        let dst = self.pkts[slot as usize].dst;
        if dst == LINK_LOCAL_DST {
            // A control packet no hook consumed (its link end runs none).
            self.schemes.stats.absorbed += 1;
            self.free.push(slot);
        } else if dst != node {
            self.forward(node, slot, t, true);
        } else {
            self.deliver(slot, t);
        }
    }
}
