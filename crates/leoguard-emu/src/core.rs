//! The data plane's core: the packet pool (buffers, their bookkeeping, pins), the network, the event
//! queue, the hosts and the report. Plug-ins see it through `plane::Plane`; the data plane's loop
//! and packet path (dataplane.rs, path.rs, hostio.rs) own it.

use crate::config::{EmuConfig, FlowCfg};
use crate::net::EmuNet;
use crate::packet::AddrKey;
use crate::plane::{Cause, Meta, Out, Owner, Plane, SLOT};
use crate::report::Report;
use crate::tunio::HostTun;
use leoguard_core::{Duration, EventQueue, Instant};
use leoguard_net::packet::Packet;
use leoguard_net::topo::Control;
use leoguard_net::LinkId;
use std::collections::{HashMap, VecDeque};

/// An event of the data plane's queue.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// A link's wake (`leoguard_net::Wake`): the head of its wire may be due; `slot` is the packet
    /// foreseen (a prefetch hint).
    Arrive {
        link: u32,
        slot: u32,
        token: u32,
    },
    Controls(u32),
    /// A plug-in's timer on a node.
    Timer {
        owner: Owner,
        node: u32,
        token: u64,
    },
}

/// `held` values.
const PINNED: u8 = 1;
const PINNED_ONLY: u8 = 2;

pub(crate) struct Host {
    pub(crate) node: u32,
    pub(crate) name: String,
    pub(crate) tun: HostTun,
    /// Deliveries queued on `tun` and not yet written: (model time due, the packet's meta).
    pub(crate) pending: Vec<(u64, Meta)>,
    /// When the first of `pending` was queued (model ns).
    pub(crate) hold_since: u64,
    /// A packet GRO would not merge (an ACK, ICMP) is queued: write at the end of this pass.
    pub(crate) urgent: bool,
}

/// The network and its packets.
pub(crate) struct Core {
    pub(crate) net: EmuNet,
    pub(crate) hosts: Vec<Host>,
    /// host index by node.
    pub(crate) host_of: Vec<Option<usize>>,
    pub(crate) addr_node: HashMap<AddrKey, u32>,
    pub(crate) flows: Vec<FlowCfg>,
    pub(crate) cfg: EmuConfig,
    pub(crate) bufs: Vec<u8>,
    pub(crate) meta: Vec<Meta>,
    /// Per slot: the packet as the per-hop schemes see it (its scheme fields come from the bytes).
    pub(crate) pkts: Vec<Packet>,
    pub(crate) free: Vec<u32>,
    pub(crate) events: EventQueue<Ev>,
    pub(crate) batches: Vec<Option<Vec<Control>>>,
    /// Per link: Delay controls known for the future (time, delay), for ramps between steps.
    pub(crate) future_delays: Vec<VecDeque<(u64, Duration)>>,
    pub(crate) lost: Vec<u32>,
    pub(crate) report: Report,
    /// CLOCK_MONOTONIC at model time 0.
    pub(crate) t0: u64,
    /// Ids of flows the configuration does not name (ping, neighbour chatter), by 5-tuple.
    pub(crate) extra_flows: HashMap<(u32, u32, u8, u16, u16), u32>,
    /// The capture tap, if any.
    pub(crate) tap: Option<crate::capture::Tap>,
    /// When the next host's queued deliveries are due to be written (model ns; MAX: none queued).
    pub(crate) next_flush: u64,
    /// While an arrival is handled: when the next packet on the same link arrives (model ns; MAX: none).
    pub(crate) next_arrival: u64,
    /// Per slot: `PINNED` while a plug-in keeps it (a master), `PINNED_ONLY` once the network is done
    /// with its packet too (empty: nothing pins).
    pub(crate) held: Vec<u8>,
    /// Slots held only by a pin now.
    pub(crate) pinned_only: u64,
    /// What plug-ins asked for in the call being handled (`Plane::out`), and spare vectors for nested
    /// calls.
    pub(crate) out: Vec<Out>,
    pub(crate) spare: Vec<Vec<Out>>,
}

impl Core {
    /// Records the packet in `slot` if `node` is tapped (its bytes as they are now).
    pub(crate) fn tap_packet(&mut self, node: u32, slot: u32, t: u64) {
        if let Some(tap) = self.tap.as_mut() {
            let off = slot as usize * SLOT;
            tap.record(node, t, &self.bufs[off..off + self.meta[slot as usize].len as usize]);
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.events.push(Instant(at), ev);
    }

    /// Schedules a link's wake, if it asked for one.
    #[inline]
    pub(crate) fn wake(&mut self, link: LinkId, wake: Option<leoguard_net::Wake<u32>>) {
        if let Some(w) = wake {
            self.events.push(w.at, Ev::Arrive { link: link.0, slot: w.pkt, token: w.token });
        }
    }

    pub(crate) fn add_batch(&mut self, at: u64, actions: Vec<Control>) {
        for a in &actions {
            if let Control::Delay { link, delay } = *a {
                self.future_delays[link.0 as usize].push_back((at, delay));
            }
        }
        self.batches.push(Some(actions));
        let idx = (self.batches.len() - 1) as u32;
        self.push(at, Ev::Controls(idx));
    }

    pub(crate) fn drop_slot(&mut self, slot: u32, cause: Cause) {
        *self.report.drops.entry(cause).or_insert(0) += 1;
        self.release(slot);
    }

    /// The network is done with the packet in `slot` (delivered, dropped or taken): the slot goes back
    /// to the pool unless a plug-in pinned it.
    #[inline]
    pub(crate) fn release(&mut self, slot: u32) {
        match self.held.get_mut(slot as usize) {
            Some(h) if *h == PINNED => {
                *h = PINNED_ONLY;
                self.pinned_only += 1;
            }
            _ => self.free.push(slot),
        }
    }

    /// A free slot, or `None` counted as a `pool_exhausted` drop.
    #[inline]
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        let s = self.free.pop();
        if s.is_none() {
            self.count_drop(Cause::PoolExhausted);
        }
        s
    }

    pub(crate) fn count_drop(&mut self, cause: Cause) {
        *self.report.drops.entry(cause).or_insert(0) += 1;
    }

    pub(crate) fn clock_model(&self) -> u64 {
        leoguard_os::monotonic_ns().saturating_sub(self.t0)
    }

    /// Brings the packet of the next event's arrival into cache while this event is handled.
    #[inline]
    pub(crate) fn prefetch_next(&self) {
        if let Some(&Ev::Arrive { slot, .. }) = self.events.peek() {
            let s = slot as usize;
            // The IPv6 header and the Hop-by-Hop options span the first two lines.
            leoguard_os::prefetch(&self.bufs[s * SLOT]);
            leoguard_os::prefetch(&self.bufs[s * SLOT + 64]);
            leoguard_os::prefetch(&self.meta[s]);
            leoguard_os::prefetch(&self.pkts[s]);
        }
    }
}

impl Plane for Core {
    #[inline]
    fn buf(&self, slot: u32) -> &[u8] {
        &self.bufs[slot as usize * SLOT..(slot as usize + 1) * SLOT]
    }
    #[inline]
    fn buf_mut(&mut self, slot: u32) -> &mut [u8] {
        &mut self.bufs[slot as usize * SLOT..(slot as usize + 1) * SLOT]
    }
    #[inline]
    fn meta(&mut self, slot: u32) -> &mut Meta {
        &mut self.meta[slot as usize]
    }
    #[inline]
    fn packet(&mut self, slot: u32) -> &mut Packet {
        &mut self.pkts[slot as usize]
    }
    fn alloc(&mut self) -> Option<u32> {
        Core::alloc(self)
    }
    fn copy_packet(&mut self, from: u32, to: u32) {
        let (fo, m) = (from as usize * SLOT, self.meta[from as usize]);
        self.bufs.copy_within(fo..fo + m.len as usize, to as usize * SLOT);
        self.meta[to as usize] = m;
    }
    fn release(&mut self, slot: u32) {
        Core::release(self, slot);
    }
    fn drop_slot(&mut self, slot: u32, cause: Cause) {
        Core::drop_slot(self, slot, cause);
    }
    fn pin(&mut self, slot: u32) {
        if self.held.is_empty() {
            self.held = vec![0; self.meta.len()];
        }
        self.held[slot as usize] = PINNED;
    }
    fn unpin(&mut self, slot: u32) {
        if std::mem::take(&mut self.held[slot as usize]) == PINNED_ONLY {
            self.pinned_only -= 1;
            self.free.push(slot);
        }
    }
    fn pool(&self) -> (usize, usize) {
        (self.free.len(), self.meta.len())
    }
    fn timer(&mut self, at: u64, owner: Owner, node: u32, token: u64) {
        self.push(at, Ev::Timer { owner, node, token });
    }
    #[inline]
    fn out(&mut self, o: Out) {
        self.out.push(o);
    }
    fn link_to(&self, link: LinkId) -> u32 {
        self.net.links[link.0 as usize].to.0
    }
    fn captures(&self) -> bool {
        self.tap.is_some()
    }
    fn node_of(&self, addr: AddrKey) -> Option<u32> {
        self.addr_node.get(&addr).copied()
    }
    fn is_leotp_flow(&self, flow: u32) -> bool {
        self.flows.get(flow as usize - 1).is_some_and(|f| f.leotp)
    }
}
