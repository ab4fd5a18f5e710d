//! The data plane's packet path: a packet arriving at a node over a link (the wire's fields read back,
//! the node's plug-ins shown it), delivered or forwarded (the node's hook shown its departure) and put
//! on the next link (the scheme's fields written). What a plug-in asks for in a call is carried out as
//! the call returns, before the packet it was shown goes on, as the simulator does.

use crate::dataplane::DataPlane;
use crate::plane::{Cause, NodePlugin, Out};
use leoguard_core::Instant;
use leoguard_net::link::{DropReason, Offer};
use leoguard_net::schemes::wire::LINK_LOCAL_DST;
use leoguard_net::LinkId;

impl DataPlane {
    /// Puts the packet in `slot` on `link` at model time `t`, with its scheme fields written into
    /// its Hop-by-Hop header; the link charges the larger of its real size and the size the scheme
    /// modelled (an encapsulation the bytes do not carry).
    pub(crate) fn put_on(&mut self, link: LinkId, slot: u32, t: u64) {
        let size = self.schemes.on_wire_out(&mut self.core, slot).max(self.core.pkts[slot as usize].size);
        let from = self.core.net.links[link.0 as usize].from.0;
        let offer = self.core.net.links[link.0 as usize].offer(
            Instant(t),
            slot,
            size,
            self.schemes.prioritised(&self.core.pkts[slot as usize]),
        );
        // The tap records a departure as the interface sees it, as the simulator's does: sent, lost on
        // the way or not; a packet the queue turned away or a down link refused never left.
        if !matches!(offer, Offer::Dropped(_, DropReason::Queue | DropReason::Down)) {
            self.core.tap_packet(from, slot, t);
        }
        match offer {
            Offer::Dropped(s, why) => self.core.drop_slot(
                s,
                match why {
                    DropReason::Queue => Cause::Queue,
                    DropReason::Loss => Cause::Loss,
                    DropReason::Down => Cause::Down,
                },
            ),
            Offer::Accepted { wake } => self.core.wake(link, wake),
        }
    }

    /// Forwards the packet in `slot` from node `at` at model time `t`; `hook` says whether the node's
    /// hook sees it leave (the simulator's `forward`).
    pub(crate) fn forward(&mut self, at: u32, slot: u32, t: u64, hook: bool) {
        let dst = self.core.pkts[slot as usize].dst;
        if at == dst {
            self.core.deliver(slot, t);
            return;
        }
        let Some(link) = self.core.net.next_hop(at, dst) else {
            self.core.drop_slot(slot, Cause::NoRoute);
            return;
        };
        if hook && self.schemes.runs_at(at) {
            let size = self.core.pkts[slot as usize].size;
            let l = &mut self.core.net.links[link.0 as usize];
            // A packet the queue turns away never reaches the interface: the hook sees no departure.
            if l.has_room(Instant(t), size) {
                let wait = l.egress_wait(Instant(t), size);
                let keep = self.schemes.on_depart(&mut self.core, at, link, slot, t, wait);
                self.run_out(t);
                if !keep {
                    return;
                }
            } else {
                self.schemes.on_congestion_drop(&mut self.core, at, link, slot, t);
                self.run_out(t);
            }
        }
        self.put_on(link, slot, t);
    }

    /// The packet in `slot` arrived at `node` over `link`: the plug-ins get the fields the wire carried.
    pub(crate) fn arrive_at(&mut self, node: u32, link: LinkId, slot: u32, t: u64) {
        // The tap sees an arrival as the wire delivered it, before the node's plug-ins run.
        self.core.tap_packet(node, slot, t);
        self.schemes.on_wire_in(&mut self.core, slot);
        self.core.pkts[slot as usize].hops += 1;
        if self.leotp.runs_at(node) {
            let keep = self.leotp.on_arrive(&mut self.core, node, link, slot, t);
            self.run_out(t);
            if !keep {
                return;
            }
        }
        if self.schemes.runs_at(node) {
            let keep = self.schemes.on_arrive(&mut self.core, node, link, slot, t);
            self.run_out(t);
            if !keep {
                return;
            }
        }
        self.handle_at(node, slot, t);
    }

    /// A packet that passed the node's hook: delivered if addressed here, else forwarded.
    fn handle_at(&mut self, node: u32, slot: u32, t: u64) {
        let dst = self.core.pkts[slot as usize].dst;
        if dst == LINK_LOCAL_DST {
            // A control packet no hook consumed (its link end runs none).
            self.schemes.stats.absorbed += 1;
            self.core.release(slot);
        } else if dst != node {
            self.forward(node, slot, t, true);
        } else {
            self.core.deliver(slot, t);
        }
    }

    /// Carries out what the plug-in just called asked for, in order, each with what it leads to.
    pub(crate) fn run_out(&mut self, t: u64) {
        if self.core.out.is_empty() {
            return;
        }
        // Calls these lead to fill a vector of their own (a spare one: nothing is allocated).
        let spare = self.core.spare.pop().unwrap_or_default();
        let mut outs = std::mem::replace(&mut self.core.out, spare);
        for o in outs.drain(..) {
            match o {
                Out::Routed { node, slot } => self.forward(node, slot, t, false),
                Out::OnLink { link, slot } => self.put_on(link, slot, t),
                Out::Resume { node, slot } => self.handle_at(node, slot, t),
            }
        }
        let spare = std::mem::replace(&mut self.core.out, outs);
        self.core.spare.push(spare);
    }
}
