//! The per-hop schemes on the emulator's real packets: the same SATGUARD and LinkGuardian hooks the
//! simulator runs (leoguard-net), hosted on the data plane's nodes through the same `Agent`/`Ctx`
//! interface and with the simulator's forwarding semantics (a hook sees a packet arrive over a link
//! before it is delivered or forwarded, and leave before it is put on a link; it may hold, consume,
//! resume, retransmit or put link-local packets on a link). The host is a plug-in of the data plane
//! (`plane::NodePlugin`): it sees the pool and the network only through `plane::Plane`.
//!
//! What is real: the scheme fields of data packets (HSeq, FSeq, LinkGuardian's seq) travel in IPv6
//! Hop-by-Hop options written into the real packets on every emulated link and read back at the far
//! end, where the hook gets exactly what the wire carried. Link-local control packets (HAcks,
//! LinkGuardian's ACKs and dummies) never leave the data plane: they are written as real IPv6 packets
//! only when a capture records them; otherwise they travel as their fields, and their far end gets
//! what their header would carry (the same mapping, without the bytes), at the length the bytes
//! would have. A hook that retransmits or releases a packet hands back a `Packet` struct: the packet's
//! own slot stays pinned as its *master* for `retain_ms`, and a fresh copy of its bytes leaves with
//! the hook's fields. What is not in the bytes: the source route of a migrated packet (SATGUARD §3.2
//! uses SRv6; here its route and segment ride in the packet's metadata and the link charges the
//! modelled encapsulation size).

use crate::hbh;
use crate::plane::{Cause, Meta, NodePlugin, Out, Owner, Plane, SLOT};
use leoguard_core::keys::KeyHasher;
use leoguard_core::{Duration, Instant};
use leoguard_net::host::{Agent, Ctx, SendKind};
use leoguard_net::packet::{Packet, NET_CONTROL};
use leoguard_net::schemes::wire::{self, WireScheme, LINK_LOCAL_DST};
use leoguard_net::LinkId;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

/// The per-hop scheme's state in the data plane.
pub struct SchemeHost {
    /// Per node: its hook.
    hooks: Vec<Option<Box<dyn Agent>>>,
    ctx: Ctx,
    scheme: WireScheme,
    /// (flow, seq) -> the slot holding the packet's bytes (its master: the packet's own slot, pinned);
    /// asked once per packet entering the network, so hashed with the core's integer-key hasher.
    masters: HashMap<(u32, u64), u32, BuildHasherDefault<KeyHasher>>,
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
            masters: HashMap::default(),
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

impl SchemeHost {
    /// Runs `f` on `node`'s hook at model time `t`, the time of the event being handled, and turns
    /// what it asked for into timers and packets for the plane.
    ///
    /// Model time, not the wall clock: the loop handles events in model-time order, at or after their
    /// time, so a hook that read the clock while the loop runs late (after a routing step's batch of
    /// controls, say) would act "later" than arrivals still queued with earlier times. LinkGuardian's
    /// egress-idle check then found its link idle while data that reached the node earlier had not
    /// been handled yet, and its dummy, put on the link ahead of that data, opened a false hole at the
    /// receiver: a spurious retransmission round per step boundary per busy link, two copies each,
    /// 91 % of the emulator's link-local retransmissions on the demo path (docs/cross-validation.md).
    /// The simulator's hooks see the event's time; so do these now.
    fn call<P: Plane>(&mut self, pl: &mut P, node: u32, t: u64, f: impl FnOnce(&mut dyn Agent, &mut Ctx)) {
        let Some(a) = self.hooks.get_mut(node as usize).and_then(Option::as_mut) else { return };
        self.ctx.now = Instant(t);
        self.ctx.node = leoguard_net::NodeId(node);
        f(a.as_mut(), &mut self.ctx);
        for (at, token) in self.ctx.timers.drain(..) {
            pl.timer(at.as_nanos().max(t), Owner::Scheme, node, token);
        }
        // Wakes of other agents are the simulator's M-PEP signalling; the per-hop schemes use none.
        self.ctx.wakes.clear();
        // The context's vector is taken and given back, so a hook call allocates nothing.
        let mut sends = std::mem::take(&mut self.ctx.sends);
        for (p, kind) in sends.drain(..) {
            let link = match kind {
                SendKind::OnLink(l) => Some(l),
                _ => None,
            };
            let Some(slot) = self.materialise(pl, &p, node, link, t) else { continue };
            pl.out(match kind {
                // A hook's own sends pass no hook on the way out (as in the simulator).
                SendKind::Routed => Out::Routed { node, slot },
                SendKind::OnLink(link) => Out::OnLink { link, slot },
                SendKind::Resume => Out::Resume { node, slot },
            });
        }
        self.ctx.sends = sends;
    }

    /// Shows the packet in `slot` to `node`'s hook; false if the hook took it (the slot is released).
    fn pass<P: Plane>(
        &mut self,
        pl: &mut P,
        node: u32,
        slot: u32,
        t: u64,
        f: impl FnOnce(&mut dyn Agent, &mut Packet, &mut Ctx) -> bool,
    ) -> bool {
        let mut p = *pl.packet(slot);
        let mut keep = true;
        self.call(pl, node, t, |a, c| keep = f(a, &mut p, c));
        if keep {
            *pl.packet(slot) = p;
        } else {
            self.stats.absorbed += 1;
            pl.release(slot);
        }
        keep
    }

    /// A slot holding `p` as a real packet: a control packet built from its fields, or a copy of the
    /// data packet's bytes from its master.
    fn materialise<P: Plane>(
        &mut self,
        pl: &mut P,
        p: &Packet,
        node: u32,
        link: Option<LinkId>,
        t: u64,
    ) -> Option<u32> {
        let slot = pl.alloc()?;
        if self.is_control(p) {
            let h = wire::packet_hbh(self.scheme, p, leoguard_wire::NEXT_HEADER_NONE);
            // Its bytes are written only where a capture will see them: a control packet never leaves
            // the data plane, and its far end reads the fields its header would carry (`on_wire_in`).
            let fields_only = !pl.captures();
            let len = if fields_only {
                h.and_then(|h| hbh::control_len(&h, p.size as usize, SLOT))
            } else {
                let to = link.map_or(node, |l| pl.link_to(l));
                h.and_then(|h| hbh::control(pl.buf_mut(slot), node, to, p.net.tc, &h, p.size as usize))
            };
            let Some(len) = len else {
                pl.drop_slot(slot, Cause::Malformed);
                return None;
            };
            *pl.meta(slot) = Meta { len: len as u32, t_in: t, dst_node: node, entry: 0, flow: 0, fields_only };
        } else {
            let Some(&master) = self.masters.get(&(p.flow, p.seq)) else {
                // The hook made a packet the data plane cannot fill: generated, then dropped.
                self.stats.generated += 1;
                self.stats.retx_without_bytes += 1;
                pl.drop_slot(slot, Cause::RetxEvicted);
                return None;
            };
            pl.copy_packet(master, slot);
        }
        *pl.packet(slot) = *p;
        self.stats.generated += 1;
        Some(slot)
    }

    /// A master is given up: its slot goes back to the pool if the network is done with it too.
    fn drop_master<P: Plane>(&mut self, pl: &mut P, slot: u32) {
        pl.unpin(slot);
        self.stats.masters_live -= 1;
    }
}

impl NodePlugin for SchemeHost {
    fn runs_at(&self, node: u32) -> bool {
        self.hooks.get(node as usize).is_some_and(Option::is_some)
    }

    fn on_arrive<P: Plane>(&mut self, pl: &mut P, node: u32, link: LinkId, slot: u32, t: u64) -> bool {
        self.pass(pl, node, slot, t, |a, p, c| a.on_arrive(link, p, c))
    }

    fn on_depart<P: Plane>(&mut self, pl: &mut P, node: u32, link: LinkId, slot: u32, t: u64, wait: Duration) -> bool {
        self.ctx.wait = wait;
        let keep = self.pass(pl, node, slot, t, |a, p, c| a.on_depart(link, p, c));
        self.ctx.wait = Duration::ZERO;
        keep
    }

    fn on_congestion_drop<P: Plane>(&mut self, pl: &mut P, node: u32, link: LinkId, slot: u32, t: u64) {
        let p = *pl.packet(slot);
        self.call(pl, node, t, |a, c| a.on_congestion_drop(link, &p, c));
    }

    fn on_timer<P: Plane>(&mut self, pl: &mut P, node: u32, token: u64, t: u64) {
        self.call(pl, node, t, |a, c| a.on_timer(token, c));
    }

    fn on_link_state<P: Plane>(&mut self, pl: &mut P, node: u32, link: LinkId, up: bool, t: u64) {
        self.call(pl, node, t, |a, c| a.on_link_state(link, up, c));
    }

    /// Keeps the packet in `slot` as its master for the hooks' retransmissions: the slot itself, pinned
    /// until both the network and the master are done with it (`retain_ms`). What a retransmission
    /// copies is the packet's bytes as they are then: its payload as it entered, with whatever
    /// Hop-by-Hop header it has or none (the copy gets the hook's header as it leaves).
    fn on_enter<P: Plane>(&mut self, pl: &mut P, slot: u32, t: u64) {
        if !self.active {
            return;
        }
        // Expired masters go first; when the pool runs short the oldest go early.
        let (free, size) = pl.pool();
        let (mut free, low) = (free, size / 8);
        while let Some(&(exp, f, s)) = self.master_q.front() {
            if exp > t && free > low {
                break;
            }
            if exp > t {
                self.stats.masters_evicted_early += 1;
            }
            self.master_q.pop_front();
            if let Some(m) = self.masters.remove(&(f, s)) {
                self.drop_master(pl, m);
                free = pl.pool().0;
            }
        }
        let p = *pl.packet(slot);
        pl.pin(slot);
        if let Some(old) = self.masters.insert((p.flow, p.seq), slot) {
            self.drop_master(pl, old);
        }
        self.stats.masters_live += 1;
        self.master_q.push_back((t + self.retain_ns, p.flow, p.seq));
    }

    /// Writes the packet's scheme fields into its Hop-by-Hop header; returns its length.
    fn on_wire_out<P: Plane>(&mut self, pl: &mut P, slot: u32) -> u32 {
        let m = *pl.meta(slot);
        if self.scheme == WireScheme::None || !self.active || m.fields_only {
            return m.len;
        }
        let p = *pl.packet(slot);
        let h = wire::packet_hbh(self.scheme, &p, 0);
        match hbh::set(pl.buf_mut(slot), m.len as usize, h.as_ref()) {
            Some(n) => {
                pl.meta(slot).len = n as u32;
                n as u32
            }
            None => {
                if h.is_some() {
                    self.stats.unstamped += 1;
                }
                m.len
            }
        }
    }

    /// Gives the packet the scheme fields the wire carried: what its Hop-by-Hop header says, or for a
    /// control packet without bytes what its header would have said (`materialise`).
    fn on_wire_in<P: Plane>(&mut self, pl: &mut P, slot: u32) {
        let m = *pl.meta(slot);
        if m.fields_only {
            let p = pl.packet(slot);
            let h = wire::packet_hbh(self.scheme, p, leoguard_wire::NEXT_HEADER_NONE);
            wire::apply_hbh(h.as_ref(), p);
        } else if self.scheme != WireScheme::None && hbh::is_v6(pl.buf(slot), m.len as usize) {
            let h = hbh::read(pl.buf(slot), m.len as usize);
            wire::apply_hbh(h.as_ref(), pl.packet(slot));
        }
    }
}
