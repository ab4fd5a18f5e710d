//! The narrow interface between the data plane and what plugs into its nodes (the per-hop schemes'
//! hooks, LEOTP mid nodes): a plug-in sees the packet pool and the network through [`Plane`] and is
//! called through [`NodePlugin`], as the simulator's agents see its engine through `Ctx`. It asks for
//! what it wants done with packets ([`Out`]) and timers, and the data plane carries that out after the
//! call, in order, each with what it leads to (depth first, as the simulator runs an agent's sends).
//! Plug-ins import this module only; the data plane imports them.

use crate::packet::AddrKey;
use leoguard_core::Duration;
use leoguard_net::packet::Packet;
use leoguard_net::LinkId;
use serde::Serialize;

/// Bytes per buffer slot: an MTU of up to 2000 bytes plus room for options a scheme adds.
pub const SLOT: usize = 2048;

/// Why the data plane dropped a packet (every drop has one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A link's queue was full.
    Queue,
    /// A link's loss model.
    Loss,
    /// A link was down (handover interruption) or went down with the packet on it.
    Down,
    /// A node had no route to the destination (an outage).
    NoRoute,
    /// The destination address is no host of the scenario.
    UnknownDst,
    /// Multicast (IPv6 neighbour discovery, MLD): the emulated links are point-to-point.
    Multicast,
    /// Not a well-formed IPv4/IPv6 packet.
    Malformed,
    /// Larger than a buffer slot.
    TooBig,
    /// Every buffer slot was in use.
    PoolExhausted,
    /// Writing to the destination's TUN failed.
    TunWrite,
    /// A per-hop scheme retransmitted a packet whose bytes were no longer kept (`retain_ms`).
    RetxEvicted,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Meta {
    pub(crate) len: u32,
    /// Model time it entered the network.
    pub(crate) t_in: u64,
    pub(crate) dst_node: u32,
    /// Order of entry within its flow and direction (reordering check at delivery).
    pub(crate) entry: u64,
    /// Flow index + 1 for the data direction, + 1 + 2^31 for the reverse; 0 none.
    pub(crate) flow: u32,
    /// A link-local control packet whose bytes are not written (no capture taps it): its fields
    /// travel in its `Packet` as they would in its Hop-by-Hop header (schemes.rs).
    pub(crate) fields_only: bool,
}

pub(crate) const REVERSE: u32 = 1 << 31;

/// Whose timer an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The per-hop scheme's hook on the node.
    Scheme,
    /// The LEOTP mid node on the node.
    Leotp,
}

/// What a plug-in asks the data plane to do with a packet (in a slot it allocated or was shown).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Out {
    /// Route it from `node`; no hook sees it leave (a hook's own send, as in the simulator).
    Routed { node: u32, slot: u32 },
    /// Put it on `link` as it is.
    OnLink { link: LinkId, slot: u32 },
    /// It goes on from `node` as if it had just passed the node's hook (delivered or forwarded).
    Resume { node: u32, slot: u32 },
}

/// What a plug-in may see and do of the data plane.
pub(crate) trait Plane {
    /// The slot's buffer (`SLOT` bytes; the packet is its first `meta(slot).len`).
    fn buf(&self, slot: u32) -> &[u8];
    /// The slot's buffer, to write.
    fn buf_mut(&mut self, slot: u32) -> &mut [u8];
    /// The slot's bookkeeping.
    fn meta(&mut self, slot: u32) -> &mut Meta;
    /// The packet in the slot as the per-hop schemes see it.
    fn packet(&mut self, slot: u32) -> &mut Packet;
    /// A free slot; `None` (counted as a `pool_exhausted` drop) if there is none.
    fn alloc(&mut self) -> Option<u32>;
    /// Copies the packet in `from` (bytes and bookkeeping) into `to`.
    fn copy_packet(&mut self, from: u32, to: u32);
    /// The network is done with the packet in `slot` (a plug-in took it).
    fn release(&mut self, slot: u32);
    /// Drops the packet in `slot`, counted by cause.
    fn drop_slot(&mut self, slot: u32, cause: Cause);
    /// Keeps `slot` out of the pool after the network is done with it, until `unpin`.
    fn pin(&mut self, slot: u32);
    /// Ends a `pin`: the slot goes back to the pool if the network is done with it.
    fn unpin(&mut self, slot: u32);
    /// Free slots now, and the pool's size.
    fn pool(&self) -> (usize, usize);
    /// Calls `owner`'s `on_timer(node, token)` at model time `at`.
    fn timer(&mut self, at: u64, owner: Owner, node: u32, token: u64);
    /// Asks for `o`, carried out when the plug-in's call returns.
    fn out(&mut self, o: Out);
    /// The node at the far end of `link`.
    fn link_to(&self, link: LinkId) -> u32;
    /// Whether a capture records packets (a packet's bytes must then be written).
    fn captures(&self) -> bool;
    /// The scenario node of a host address.
    fn node_of(&self, addr: AddrKey) -> Option<u32>;
    /// Whether configured flow `flow` (index + 1, `REVERSE` bit clear) is a LEOTP flow.
    fn is_leotp_flow(&self, flow: u32) -> bool;
}

/// Something that runs on some nodes of the data plane and sees their packets. A call gets the packet's
/// slot and the event's model time `t`; what it asks of the plane is done when it returns.
pub(crate) trait NodePlugin {
    /// Whether it runs on `node`.
    fn runs_at(&self, node: u32) -> bool;
    /// The packet in `slot` arrived at `node` (one it runs on) over `link`: false if it took it (and
    /// released it or made it something else).
    fn on_arrive<P: Plane>(&mut self, pl: &mut P, node: u32, link: LinkId, slot: u32, t: u64) -> bool;
    /// The packet in `slot` is about to leave `node` on `link`, behind `wait` of the interface's
    /// queue: false if it took it.
    fn on_depart<P: Plane>(
        &mut self,
        _pl: &mut P,
        _node: u32,
        _link: LinkId,
        _slot: u32,
        _t: u64,
        _wait: Duration,
    ) -> bool {
        true
    }
    /// `link`'s queue at `node` turned the packet in `slot` away (it is dropped after this call).
    fn on_congestion_drop<P: Plane>(&mut self, _pl: &mut P, _node: u32, _link: LinkId, _slot: u32, _t: u64) {}
    /// A timer it asked for (`Plane::timer`).
    fn on_timer<P: Plane>(&mut self, pl: &mut P, node: u32, token: u64, t: u64);
    /// `link`, which ends at `node`, went up or down.
    fn on_link_state<P: Plane>(&mut self, _pl: &mut P, _node: u32, _link: LinkId, _up: bool, _t: u64) {}
    /// A packet from a host entered the network in `slot` (at every node's plug-in).
    fn on_enter<P: Plane>(&mut self, _pl: &mut P, _slot: u32, _t: u64) {}
    /// The packet in `slot` goes on a link: writes what the plug-in carries in its bytes; returns its
    /// length.
    fn on_wire_out<P: Plane>(&mut self, pl: &mut P, slot: u32) -> u32 {
        pl.meta(slot).len
    }
    /// The packet in `slot` came off a link: reads back what `on_wire_out` wrote.
    fn on_wire_in<P: Plane>(&mut self, _pl: &mut P, _slot: u32) {}
}
