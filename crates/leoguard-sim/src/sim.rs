//! Nodes, forwarding and agents on top of the link [`Network`]: the simulator's main loop.
//!
//! Hosts run agents: sans-IO endpoints that receive `now` and packets and answer through a [`Ctx`]
//! (send a packet, arm a timer). Every node forwards by a static next-hop table; the orbit-driven
//! route updates of issue 3 replace these tables at routing-step boundaries.

use crate::engine::{DropReason, Event, Link, LinkId, LinkOutput, Network, NodeId, Packet, PacketId, QueueLimit};
use leoguard_core::{stream, Bps, Duration, Instant};

/// What an agent may do in response to an event.
#[derive(Debug, Default)]
pub struct Ctx {
    now: Instant,
    sends: Vec<Packet>,
    timers: Vec<(Instant, u64)>,
}

impl Ctx {
    /// Current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Sends a packet from this node (routed by the node's table).
    pub fn send(&mut self, p: Packet) {
        self.sends.push(p);
    }

    /// Arms a timer that calls `on_timer(token)` at `at`.
    pub fn timer(&mut self, at: Instant, token: u64) {
        self.timers.push((at, token));
    }
}

/// A sans-IO endpoint hosted on a node.
pub trait Agent: std::fmt::Debug + std::any::Any {
    /// Itself as `Any`, so callers can read a concrete agent's results after a run.
    fn as_any(&self) -> &dyn std::any::Any;
    /// Called once at time zero.
    fn start(&mut self, ctx: &mut Ctx);
    /// A packet addressed to this node arrived.
    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx);
    /// A timer armed by this agent fired.
    fn on_timer(&mut self, token: u64, ctx: &mut Ctx);
}

/// One control action applied at a scheduled time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Node `at` forwards traffic for `dst` on `via` from now on.
    Route {
        /// Forwarding node.
        at: NodeId,
        /// Destination.
        dst: NodeId,
        /// Outgoing link; `None` removes the route (packets are dropped as "no-route").
        via: Option<LinkId>,
    },
    /// A link's propagation delay becomes `delay` for packets that start propagating from now on.
    Delay {
        /// The link.
        link: LinkId,
        /// New delay.
        delay: Duration,
    },
    /// A link goes up or down.
    State {
        /// The link.
        link: LinkId,
        /// New state.
        up: bool,
    },
}

/// A record of a dropped packet: where and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropRecord {
    /// When.
    pub t: Instant,
    /// The packet.
    pub packet: Packet,
    /// On which link (`None`: no route at a node).
    pub link: Option<LinkId>,
    /// Why (`None`: no route).
    pub reason: Option<DropReason>,
}

/// The simulator: nodes with next-hop tables and agents, over a [`Network`].
#[derive(Debug, Default)]
pub struct Sim {
    /// Links, events and packets.
    pub net: Network,
    /// next_hop[node][destination] = link, if any.
    next_hop: Vec<Vec<Option<LinkId>>>,
    agents: Vec<Option<Box<dyn Agent>>>,
    /// Drops, in time order.
    pub drops: Vec<DropRecord>,
    ctx: Ctx,
    seed: u64,
    started: bool,
    lost: Vec<PacketId>,
    controls: Vec<Vec<Control>>,
}

impl Sim {
    /// A simulator with `nodes` nodes and run seed `seed`.
    pub fn new(nodes: usize, seed: u64) -> Self {
        Sim {
            next_hop: vec![vec![None; nodes]; nodes],
            agents: (0..nodes).map(|_| None).collect(),
            seed,
            ..Default::default()
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.agents.len()
    }

    /// Adds a one-way link with its own random stream `link/<from>-<to>/<index>`.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, rate: Bps, delay: Duration, limit: QueueLimit) -> LinkId {
        let label = format!("link/{}-{}/{}", from.0, to.0, self.net.links.len());
        self.net.add_link(Link::new(from, to, rate, delay, limit, stream(self.seed, &label)))
    }

    /// Mutable access to a link (to attach a loss model, say).
    pub fn link_mut(&mut self, id: LinkId) -> &mut Link {
        &mut self.net.links[id.0 as usize]
    }

    /// Sets node `at`'s next hop towards `dst`.
    pub fn route(&mut self, at: NodeId, dst: NodeId, via: LinkId) {
        self.next_hop[at.0 as usize][dst.0 as usize] = Some(via);
    }

    /// Hosts an agent on a node.
    pub fn attach(&mut self, node: NodeId, agent: Box<dyn Agent>) {
        self.agents[node.0 as usize] = Some(agent);
    }

    /// The agent on a node, for reading its results after a run.
    pub fn agent(&self, node: NodeId) -> Option<&dyn Agent> {
        self.agents[node.0 as usize].as_deref()
    }

    /// Schedules a link state change (a handover interruption is a down at t and an up at t + d).
    pub fn schedule_link_state(&mut self, at: Instant, link: LinkId, up: bool) {
        self.schedule_controls(at, vec![Control::State { link, up }]);
    }

    /// Schedules a batch of control actions at `at` (applied in order, as one event).
    pub fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>) {
        let index = self.controls.len() as u32;
        self.controls.push(actions);
        self.net.events.push(at, Event::Control { index });
    }

    fn apply_controls(&mut self, index: u32) {
        let actions = std::mem::take(&mut self.controls[index as usize]);
        for a in &actions {
            match *a {
                Control::Route { at, dst, via } => self.next_hop[at.0 as usize][dst.0 as usize] = via,
                Control::Delay { link, delay } => self.net.set_link_delay(link, delay),
                Control::State { link, up } => self.set_state_now(link, up),
            }
        }
    }

    fn set_state_now(&mut self, link: LinkId, up: bool) {
        let mut lost = std::mem::take(&mut self.lost);
        self.net.set_link_state(link, up, &mut lost);
        for p in lost.drain(..) {
            self.record_drop(p, Some(link), Some(DropReason::Down));
        }
        self.lost = lost;
    }

    /// Schedules a propagation-delay change.
    pub fn schedule_link_delay(&mut self, at: Instant, link: LinkId, delay: Duration) {
        self.schedule_controls(at, vec![Control::Delay { link, delay }]);
    }

    fn flush(&mut self, node: NodeId) {
        let mut sends = std::mem::take(&mut self.ctx.sends);
        for p in sends.drain(..) {
            let id = self.net.pool.alloc(p);
            self.forward(node, id);
        }
        self.ctx.sends = sends;
        for (at, token) in self.ctx.timers.drain(..) {
            self.net.events.push(at.max(self.net.now), Event::Timer { node, token });
        }
    }

    fn forward(&mut self, at: NodeId, id: PacketId) {
        let dst = self.net.pool.get(id).dst as usize;
        match self.next_hop[at.0 as usize].get(dst).copied().flatten() {
            Some(link) => {
                if let LinkOutput::Dropped(p, reason) = self.net.send(link, id) {
                    self.record_drop(p, Some(link), Some(reason));
                }
            }
            None => self.record_drop(id, None, None),
        }
    }

    fn record_drop(&mut self, p: PacketId, link: Option<LinkId>, reason: Option<DropReason>) {
        self.drops.push(DropRecord { t: self.net.now, packet: *self.net.pool.get(p), link, reason });
        self.net.pool.release(p);
    }

    fn with_agent(&mut self, node: NodeId, f: impl FnOnce(&mut dyn Agent, &mut Ctx)) {
        if let Some(mut a) = self.agents[node.0 as usize].take() {
            self.ctx.now = self.net.now;
            f(a.as_mut(), &mut self.ctx);
            self.agents[node.0 as usize] = Some(a);
            self.flush(node);
        }
    }

    /// Runs until `end` (events at exactly `end` are processed) or until nothing is pending.
    pub fn run(&mut self, end: Instant) {
        if !self.started {
            self.started = true;
            for n in 0..self.agents.len() {
                self.with_agent(NodeId(n as u32), |a, c| a.start(c));
            }
        }
        while let Some(t) = self.net.events.peek_time() {
            if t > end {
                break;
            }
            let Some((t, ev)) = self.net.events.pop() else {
                break;
            };
            self.net.now = t;
            match ev {
                Event::TxDone(l) => self.net.tx_done(l),
                Event::Arrive { link, pkt, epoch } => {
                    if let Some(p) = self.net.arrive(link, pkt, epoch) {
                        let node = self.net.links[link.0 as usize].to;
                        if self.net.pool.get(p).dst == node.0 {
                            let packet = *self.net.pool.get(p);
                            self.net.pool.release(p);
                            self.with_agent(node, |a, c| a.on_packet(&packet, c));
                        } else {
                            self.forward(node, p);
                        }
                    }
                }
                Event::Timer { node, token } => self.with_agent(node, |a, c| a.on_timer(token, c)),
                Event::Control { index } => self.apply_controls(index),
            }
        }
        // The clock stands at `end` afterwards (no event before it is left unprocessed).
        self.net.now = self.net.now.max(end);
    }
}

/// A constant-bit-rate UDP source: `size`-byte packets to `dst` every `interval`, from `start` for
/// `count` packets.
#[derive(Debug)]
pub struct CbrSource {
    /// Flow id.
    pub flow: u32,
    /// Destination node.
    pub dst: NodeId,
    /// Packet size, bytes.
    pub size: u32,
    /// Inter-packet gap.
    pub interval: Duration,
    /// Packets to send.
    pub count: u64,
    /// Packets sent so far.
    pub sent: u64,
    /// When the first packet leaves.
    pub start: Instant,
}

impl Agent for CbrSource {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        if self.count > 0 {
            ctx.timer(self.start.max(ctx.now()), 0);
        }
    }

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, _token: u64, ctx: &mut Ctx) {
        let now = ctx.now();
        ctx.send(Packet {
            flow: self.flow,
            seq: self.sent,
            size: self.size,
            dst: self.dst.0,
            sent_at: now,
            ..Default::default()
        });
        self.sent += 1;
        if self.sent < self.count {
            ctx.timer(now + self.interval, 0);
        }
    }
}

/// A sink that records (seq, send time, receive time) of every packet it gets.
#[derive(Debug, Default)]
pub struct Sink {
    /// (seq, sent_at, received_at, hops) per packet, in arrival order.
    pub received: Vec<(u64, Instant, Instant, u16)>,
}

impl Agent for Sink {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        self.received.push((p.seq, p.sent_at, ctx.now(), p.hops));
    }

    fn on_timer(&mut self, _token: u64, _ctx: &mut Ctx) {}
}

/// A chain of `hops` links (both directions) between node 0 and node `hops`, each with `rate` and
/// `delay`, routed end to end. Returns the simulator and the forward links in order.
pub fn chain(hops: usize, rate: Bps, delay: Duration, limit: QueueLimit, seed: u64) -> (Sim, Vec<LinkId>) {
    let mut sim = Sim::new(hops + 1, seed);
    let mut fwd = Vec::with_capacity(hops);
    let mut back = Vec::with_capacity(hops);
    for i in 0..hops {
        fwd.push(sim.add_link(NodeId(i as u32), NodeId(i as u32 + 1), rate, delay, limit));
        back.push(sim.add_link(NodeId(i as u32 + 1), NodeId(i as u32), rate, delay, limit));
    }
    for i in 0..=hops {
        for d in 0..=hops {
            if d > i {
                sim.route(NodeId(i as u32), NodeId(d as u32), fwd[i]);
            } else if d < i {
                sim.route(NodeId(i as u32), NodeId(d as u32), back[i - 1]);
            }
        }
    }
    (sim, fwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(sim: &Sim, n: NodeId) -> &Sink {
        sim.agent(n).and_then(|a| a.as_any().downcast_ref::<Sink>()).expect("a sink is attached")
    }

    fn cbr(dst: u32, size: u32, interval_us: u64, count: u64) -> Box<CbrSource> {
        Box::new(CbrSource {
            flow: 1,
            dst: NodeId(dst),
            size,
            interval: Duration::from_micros(interval_us),
            count,
            sent: 0,
            start: Instant::ZERO,
        })
    }

    #[test]
    fn unloaded_chain_delay_is_the_sum_of_serialisation_and_propagation() {
        // 9 hops of 100 Mbit/s and 2 ms; 1250 B packets (100 us each) at 10 Mbit/s: no queueing.
        let (mut sim, _) = chain(9, Bps::mbps(100), Duration::from_millis(2), QueueLimit::Packets(100), 1);
        sim.attach(NodeId(0), cbr(9, 1250, 1000, 500));
        sim.attach(NodeId(9), Box::<Sink>::default());
        sim.run(Instant(10_000_000_000));
        let got = &sink(&sim, NodeId(9)).received;
        assert_eq!(got.len(), 500);
        for (k, &(seq, sent, recv, hops)) in got.iter().enumerate() {
            assert_eq!(seq, k as u64);
            assert_eq!(hops, 9);
            assert_eq!((recv - sent).as_nanos(), 9 * (100_000 + 2_000_000));
        }
        assert!(sim.drops.is_empty());
        assert_eq!(sim.net.pool.live(), 0);
    }

    #[test]
    fn overload_queues_then_drops_at_the_bottleneck() {
        // 2 hops; the second is 5 Mbit/s behind a 100 Mbit/s first hop; 10 Mbit/s offered.
        let mut sim = Sim::new(3, 7);
        let a = sim.add_link(NodeId(0), NodeId(1), Bps::mbps(100), Duration::from_millis(1), QueueLimit::Packets(50));
        let b =
            sim.add_link(NodeId(1), NodeId(2), Bps::mbps(5), Duration::from_millis(1), QueueLimit::Bytes(20 * 1250));
        sim.route(NodeId(0), NodeId(2), a);
        sim.route(NodeId(1), NodeId(2), b);
        sim.attach(NodeId(0), cbr(2, 1250, 1000, 1000));
        sim.attach(NodeId(2), Box::<Sink>::default());
        sim.run(Instant(5_000_000_000));
        let got = &sink(&sim, NodeId(2)).received;
        // The bottleneck carries 500 packets/s; over the 1 s of arrivals plus the drain that is
        // about half, and the queue never holds more than its 20 packets.
        let stats = sim.net.links[b.0 as usize].stats;
        assert_eq!(stats.max_queue_bytes, 20 * 1250);
        assert_eq!(got.len() as u64 + stats.drops_queue, 1000);
        assert!((got.len() as i64 - 520).abs() <= 5, "{}", got.len());
        // Queueing delay = bytes ahead / capacity: at most 20 packets x 2 ms, plus 2 ms serialisation.
        let max_owd = got.iter().map(|r| (r.2 - r.1).as_nanos()).max().unwrap();
        assert!(max_owd <= 100_000 + 1_000_000 + 20 * 2_000_000 + 2_000_000 + 1_000_000);
        assert!(max_owd >= 20 * 2_000_000);
        assert!(sim.drops.iter().all(|d| d.link == Some(b) && d.reason == Some(DropReason::Queue)));
    }

    #[test]
    fn a_blackout_loses_only_what_crosses_it_and_nothing_is_duplicated() {
        let (mut sim, fwd) = chain(3, Bps::mbps(100), Duration::from_millis(5), QueueLimit::Packets(100), 3);
        sim.attach(NodeId(0), cbr(3, 1000, 1000, 300));
        sim.attach(NodeId(3), Box::<Sink>::default());
        sim.schedule_link_state(Instant(100_000_000), fwd[1], false);
        sim.schedule_link_state(Instant(200_000_000), fwd[1], true);
        sim.run(Instant(2_000_000_000));
        let got = &sink(&sim, NodeId(3)).received;
        let lost: Vec<u64> = sim.drops.iter().map(|d| d.packet.seq).collect();
        assert!(sim.drops.iter().all(|d| d.reason == Some(DropReason::Down)));
        // Packets sent in [~95 ms, ~195 ms] meet the dead link (5 ms to reach it) or are on it.
        assert!((95..=106).contains(&lost.len()), "{} lost", lost.len());
        let mut seqs: Vec<u64> = got.iter().map(|r| r.0).collect();
        seqs.extend(&lost);
        seqs.sort_unstable();
        assert_eq!(seqs, (0..300).collect::<Vec<_>>(), "every packet exactly once: delivered or lost");
    }

    #[test]
    fn same_seed_same_trace() {
        let run = || {
            let (mut sim, fwd) = chain(4, Bps::mbps(20), Duration::from_millis(3), QueueLimit::Packets(10), 11);
            sim.schedule_link_delay(Instant(50_000_000), fwd[2], Duration::from_millis(9));
            sim.attach(NodeId(0), cbr(4, 1500, 300, 2000));
            sim.attach(NodeId(4), Box::<Sink>::default());
            sim.run(Instant(3_000_000_000));
            (sink(&sim, NodeId(4)).received.clone(), sim.drops.len())
        };
        assert_eq!(run(), run());
    }
}
