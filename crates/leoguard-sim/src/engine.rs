//! The discrete-event core: an event queue ordered by (time, insertion sequence), a packet pool that
//! recycles slots (no per-packet heap allocation once warm), and links with a rate, a propagation
//! delay, a drop-tail queue, up/down state and an optional loss model.
//!
//! Semantics (issue 3): a packet is serialised at the link rate after the packets ahead of it, then
//! propagates for the delay the link had when the packet started to propagate; a delay change does
//! not touch packets already in flight. A link that goes down loses every packet on the wire and in
//! its queue (a handover interruption).

use leoguard_core::{Duration, Instant};
pub use leoguard_net::link::{DropReason, LinkId, LinkStats, NodeId, QueueLimit};
use leoguard_net::link::{Offer, Wake};
pub use leoguard_net::packet::*;

/// Index of a packet slot in the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketId(pub u32);

/// A pool of packet slots with a free list.
#[derive(Debug, Default)]
pub struct PacketPool {
    slots: Vec<Packet>,
    free: Vec<u32>,
    live: usize,
}

impl PacketPool {
    /// Stores a packet and returns its id (reuses a freed slot when there is one).
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = p;
            PacketId(i)
        } else {
            self.slots.push(p);
            PacketId((self.slots.len() - 1) as u32)
        }
    }

    /// Returns a slot to the pool.
    pub fn release(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id.0);
    }

    /// The packet in slot `id`.
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.0 as usize]
    }

    /// Mutable access to the packet in slot `id`.
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.0 as usize]
    }

    /// Packets currently alive (allocated and not released).
    pub fn live(&self) -> usize {
        self.live
    }

    /// Slots ever allocated (the pool's high-water mark).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// What can happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A link's wake: the packet at the head of its wire may be due (the link model's [`leoguard_net::Wake`];
    /// serialisations end without events).
    Arrive {
        /// The link.
        link: LinkId,
        /// The wake's token (a superseded wake finds nothing).
        token: u32,
    },
    /// A timer of an agent fired.
    Timer {
        /// The agent (index in the simulator's agent table).
        agent: u32,
        /// Agent-defined token.
        token: u64,
    },
    /// The topology driver's next update is due (orbit-driven routes and delays).
    Drive,
    /// Per-link statistics are sampled.
    Sample,
    /// A batch of control actions (e.g. a routing step's new routes and delays) held by the simulator.
    Control {
        /// Index into the simulator's control table.
        index: u32,
    },
}

/// Events ordered by (time, insertion sequence): ties resolve in the order they were scheduled
/// (leoguard-core's queue, shared with the emulator's data plane).
pub type EventQueue = leoguard_core::EventQueue<Event>;

/// A one-way link of the simulator (the model is leoguard-net's, shared with the emulator).
pub type Link = leoguard_net::Link<PacketId>;

/// What a link operation produced for the caller (the simulator routes it on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkOutput {
    /// The packet was dropped; it is handed back to the caller, who records and releases it.
    Dropped(PacketId, DropReason),
    /// Nothing to report yet (queued or on the wire).
    Pending,
}

/// The network of links with its event queue and packet pool.
#[derive(Debug, Default)]
pub struct Network {
    /// Current time.
    pub now: Instant,
    /// Pending events.
    pub events: EventQueue,
    /// Packet storage.
    pub pool: PacketPool,
    /// All links.
    pub links: Vec<Link>,
}

impl Network {
    /// Adds a link and returns its id.
    pub fn add_link(&mut self, l: Link) -> LinkId {
        self.links.push(l);
        LinkId((self.links.len() - 1) as u32)
    }

    /// Offers packet `pkt` to link `id` at the current time.
    #[inline]
    pub fn send(&mut self, id: LinkId, pkt: PacketId) -> LinkOutput {
        let p = self.pool.get(pkt);
        let (size, control) = (p.size, p.net.flags & NET_CONTROL != 0);
        match self.links[id.0 as usize].offer(self.now, pkt, size, control) {
            Offer::Dropped(p, why) => LinkOutput::Dropped(p, why),
            Offer::Accepted { wake } => {
                self.schedule(id, wake);
                LinkOutput::Pending
            }
        }
    }

    #[inline]
    fn schedule(&mut self, id: LinkId, wake: Option<Wake<PacketId>>) {
        if let Some(w) = wake {
            self.events.push(w.at, Event::Arrive { link: id, token: w.token });
        }
    }

    /// Handles an `Arrive`: the packet at the head of the link's wire arrives if due (returned), and
    /// the link's next wake is scheduled. `None` for a superseded wake (the link went down since, its
    /// packets already reported lost by [`Network::set_link_state`], or its next arrival moved).
    #[inline]
    pub fn arrive(&mut self, id: LinkId, token: u32) -> Option<PacketId> {
        let a = self.links[id.0 as usize].wake(self.now, token);
        self.schedule(id, a.wake);
        let head = a.pkt?;
        self.pool.get_mut(head).hops += 1;
        Some(head)
    }

    /// Brings every link's transmitter up to the current time (before reading their counters).
    pub fn advance_links(&mut self) {
        for l in &mut self.links {
            l.advance(self.now);
        }
    }

    /// Sets a link up or down. Going down loses the packet being serialised, the queue and every packet
    /// on the wire; they are appended to `lost` for the caller to record and release.
    pub fn set_link_state(&mut self, id: LinkId, up: bool, lost: &mut Vec<PacketId>) {
        self.links[id.0 as usize].set_state(self.now, up, lost);
    }

    /// Changes a link's propagation delay for packets that start propagating from now on.
    pub fn set_link_delay(&mut self, id: LinkId, delay: Duration) {
        let w = self.links[id.0 as usize].set_delay(self.now, delay);
        self.schedule(id, w);
    }

    /// Changes a link's capacity for packets that start serialising from now on.
    pub fn set_link_rate(&mut self, id: LinkId, rate: leoguard_core::Bps) {
        self.links[id.0 as usize].set_rate(self.now, rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::{stream, Bps};
    use proptest::prelude::prop_assert;
    use proptest::prop_assert_eq;

    fn net_with_link(rate: Bps, delay: Duration, limit: QueueLimit) -> (Network, LinkId) {
        let mut n = Network::default();
        let id = n.add_link(Link::new(NodeId(0), NodeId(1), rate, delay, limit, stream(1, "l")));
        (n, id)
    }

    /// Runs until idle; returns (arrival time, seq) of delivered packets.
    fn drain(n: &mut Network) -> Vec<(Instant, u64)> {
        let mut out = Vec::new();
        while let Some((t, ev)) = n.events.pop() {
            n.now = t;
            if let Event::Arrive { link, token } = ev {
                if let Some(p) = n.arrive(link, token) {
                    out.push((t, n.pool.get(p).seq));
                    n.pool.release(p);
                }
            }
        }
        out
    }

    #[test]
    fn queueing_delay_is_bytes_queued_over_capacity() {
        // 10 packets of 1250 B at 10 Mbit/s: 1 ms each; 5 ms propagation.
        let (mut n, l) = net_with_link(Bps::mbps(10), Duration::from_millis(5), QueueLimit::Packets(100));
        for s in 0..10 {
            let p = n.pool.alloc(Packet { seq: s, size: 1250, ..Default::default() });
            assert_eq!(n.send(l, p), LinkOutput::Pending);
        }
        let got = drain(&mut n);
        for (k, (t, s)) in got.iter().enumerate() {
            assert_eq!(*s, k as u64, "FIFO order");
            // Packet k waits for k packets (k * 1250 B / capacity) plus its own serialisation.
            assert_eq!(t.as_nanos(), (k as u64 + 1) * 1_000_000 + 5_000_000);
        }
        assert_eq!(n.links[0].stats.delivered, 10);
        assert_eq!(n.links[0].stats.busy_ns, 10_000_000);
        assert_eq!(n.pool.live(), 0);
    }

    #[test]
    fn drop_tail_limits_in_bytes_and_packets() {
        let (mut n, l) = net_with_link(Bps::mbps(1), Duration::ZERO, QueueLimit::Bytes(3000));
        let mut r = Vec::new();
        for s in 0..6 {
            let p = n.pool.alloc(Packet { seq: s, size: 1000, ..Default::default() });
            r.push(n.send(l, p));
        }
        // One on the transmitter, three queued (3000 B), the rest dropped.
        assert_eq!(r.iter().filter(|x| matches!(x, LinkOutput::Dropped(_, DropReason::Queue))).count(), 2);
        assert_eq!(n.links[0].stats.max_queue_bytes, 3000);
        let (mut n2, l2) = net_with_link(Bps::mbps(1), Duration::ZERO, QueueLimit::Packets(2));
        let mut drops = 0;
        for s in 0..6 {
            let p = n2.pool.alloc(Packet { seq: s, size: 100, ..Default::default() });
            drops += usize::from(matches!(n2.send(l2, p), LinkOutput::Dropped(..)));
        }
        assert_eq!(drops, 3);
    }

    #[test]
    fn link_down_loses_what_is_on_the_wire_and_queued_but_not_later_traffic() {
        let (mut n, l) = net_with_link(Bps::mbps(10), Duration::from_millis(20), QueueLimit::Packets(100));
        for s in 0..5 {
            let p = n.pool.alloc(Packet { seq: s, size: 1250, ..Default::default() });
            n.send(l, p);
        }
        // Cut the link when two packets are on the wire (t = 2 ms): no event is due before.
        assert!(n.events.peek_time().is_some_and(|t| t > Instant(2_000_000)));
        n.now = Instant(2_000_000);
        let mut lost = Vec::new();
        n.set_link_state(l, false, &mut lost);
        assert_eq!(lost.len(), 5, "two on the wire, one on the transmitter, two queued");
        for p in lost.drain(..) {
            n.pool.release(p);
        }
        let p = n.pool.alloc(Packet { seq: 99, size: 1250, ..Default::default() });
        assert_eq!(n.send(l, p), LinkOutput::Dropped(p, DropReason::Down));
        n.pool.release(p);
        n.set_link_state(l, true, &mut lost);
        let p = n.pool.alloc(Packet { seq: 100, size: 1250, ..Default::default() });
        n.send(l, p);
        let got = drain(&mut n);
        assert_eq!(got.iter().map(|x| x.1).collect::<Vec<_>>(), vec![100]);
        assert_eq!(n.links[0].stats.drops_down, 6);
        assert_eq!(n.pool.live(), 0, "every lost packet is released");
    }

    #[test]
    fn delay_changes_apply_to_packets_not_yet_propagating() {
        let (mut n, l) = net_with_link(Bps::gbps(1), Duration::from_millis(10), QueueLimit::Packets(10));
        let a = n.pool.alloc(Packet { seq: 1, size: 125, ..Default::default() }); // 1 us serialisation
        n.send(l, a);
        n.now = Instant(1_000); // its serialisation ends: it propagates with 10 ms
        n.set_link_delay(l, Duration::from_millis(30));
        let b = n.pool.alloc(Packet { seq: 2, size: 125, ..Default::default() });
        n.send(l, b);
        let got = drain(&mut n);
        assert_eq!(got[0], (Instant(1_000 + 10_000_000), 1)); // kept the delay it was sent with
        assert_eq!(got[1], (Instant(1_000 + 1_000 + 30_000_000), 2));
    }

    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        for k in 0..100u64 {
            q.push(Instant(5), Event::Timer { agent: 0, token: k });
        }
        q.push(Instant(1), Event::Timer { agent: 0, token: 1000 });
        assert_eq!(q.pop().unwrap().1, Event::Timer { agent: 0, token: 1000 });
        for k in 0..100u64 {
            assert_eq!(q.pop().unwrap().1, Event::Timer { agent: 0, token: k });
        }
    }

    proptest::proptest! {
        /// Whatever heap an event lands in and however the horizon adapts, events come out exactly in
        /// (time, insertion sequence) order, as from one heap.
        #[test]
        fn queue_pops_in_time_then_insertion_order(
            ops in proptest::collection::vec((0u8..8, 0u64..4, 0u32..40), 1..6000)
        ) {
            let mut q = EventQueue::default();
            let mut reference = std::collections::BTreeMap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for (op, scale, x) in ops {
                if op < 3 && !reference.is_empty() {
                    let ((at, _), ev) = reference.pop_first().unwrap();
                    prop_assert_eq!(q.peek_time(), Some(Instant(at)));
                    prop_assert_eq!(q.pop(), Some((Instant(at), ev)));
                    now = at;
                } else {
                    // Ties (offset 0), near and far offsets over many scales, and now and then an
                    // event in the past (a control scheduled late): all must keep the order.
                    let offset = u64::from(x) << (scale * 10);
                    let at = if op == 7 { now.saturating_sub(offset) } else { now + offset };
                    let ev = Event::Timer { agent: 0, token: seq };
                    q.push(Instant(at), ev);
                    reference.insert((at, seq), ev);
                    seq += 1;
                }
                prop_assert_eq!(q.len(), reference.len());
            }
            while let Some(((at, _), ev)) = reference.pop_first() {
                prop_assert_eq!(q.pop(), Some((Instant(at), ev)));
            }
            prop_assert!(q.is_empty());
        }
    }

    #[test]
    fn pool_reuses_slots() {
        let mut p = PacketPool::default();
        for round in 0..1000u64 {
            let ids: Vec<PacketId> =
                (0..8).map(|s| p.alloc(Packet { seq: round * 8 + s, ..Default::default() })).collect();
            for id in ids {
                p.release(id);
            }
        }
        assert_eq!(p.capacity(), 8);
        assert_eq!(p.live(), 0);
    }
}
