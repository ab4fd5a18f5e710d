//! Nodes, forwarding and agents on top of the link [`Network`]: the simulator's main loop.
//!
//! Endpoints are sans-IO agents: they receive `now` and packets and answer through a [`Ctx`] (send a
//! packet, arm a timer). A node may host any number of endpoints, one per flow end (packets are
//! delivered by (destination node, flow)), plus one node-wide agent for everything else, plus one
//! per-hop mechanism (a *hook*: an in-network scheme such as link-local retransmission) that sees every
//! packet arriving at or leaving the node over a link. Nodes forward by next-hop tables that scheduled
//! [`Control`]s or a topology [`Driver`] (the orbit-driven routing of a constellation) change during
//! the run.

use crate::capture::{CaptureRecord, CaptureTap, Direction};
use crate::engine::{DropReason, Event, Link, LinkId, LinkOutput, Network, NodeId, Packet, PacketId, QueueLimit};
use leoguard_core::{stream, Bps, Duration, Instant};

pub use leoguard_net::host::{Agent, AgentId, Ctx, SendKind};
pub use leoguard_net::topo::{Control, Driver};

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

/// One sample of a link's activity over the last sampling interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSample {
    /// End of the interval.
    pub t: Instant,
    /// The link.
    pub link: LinkId,
    /// Bytes delivered to the far end during the interval.
    pub bytes: u64,
    /// Bytes queued at the sample instant.
    pub queue_bytes: u64,
    /// Packets dropped (queue, loss model, down) during the interval.
    pub drops: u64,
    /// Whether the link is up at the sample instant.
    pub up: bool,
}

#[derive(Debug)]
struct Slot {
    node: NodeId,
    agent: Option<Box<dyn Agent>>,
}

/// The simulator: nodes with next-hop tables and agents, over a [`Network`].
#[derive(Debug, Default)]
pub struct Sim {
    /// Links, events and packets.
    pub net: Network,
    nodes: usize,
    /// Next hops (leoguard-net's table, shared with the emulator).
    routes: leoguard_net::routes::NextHops,
    agents: Vec<Slot>,
    /// Node-wide endpoint of each node.
    node_agent: Vec<Option<u32>>,
    /// Per flow, the endpoints bound to it as (node, agent).
    flow_agents: Vec<Vec<(NodeId, u32)>>,
    /// Per-hop mechanism of each node.
    hooks: Vec<Option<u32>>,
    /// Drops, in time order.
    pub drops: Vec<DropRecord>,
    /// Link samples, in time order (only links with traffic, a queue or drops in the interval).
    pub link_samples: Vec<LinkSample>,
    sample_every: Option<Duration>,
    last_counts: Vec<(u64, u64)>,
    ctx: Ctx,
    seed: u64,
    started: bool,
    lost: Vec<PacketId>,
    controls: Vec<Vec<Control>>,
    driver: Option<Box<dyn Driver>>,
    driver_out: Vec<Control>,
    /// The driver's lazy destinations ([`Driver::lazy_dests`]), and per node whether its routes are
    /// older than the driver's latest step (empty without lazy destinations).
    lazy_dests: Vec<u32>,
    route_stale: Vec<bool>,
    /// The driver's first step is due when the run starts (before any agent sends).
    drive_at_start: bool,
    /// The packet capture tap, if any (boxed: the common case pays one pointer test per packet).
    capture: Option<Box<CaptureTap>>,
}

impl leoguard_net::NetBuilder for Sim {
    fn add_link(&mut self, from: NodeId, to: NodeId, rate: Bps, delay: Duration, limit: QueueLimit) -> LinkId {
        Sim::add_link(self, from, to, rate, delay, limit)
    }

    fn set_loss(&mut self, link: LinkId, loss: Box<dyn crate::loss::LossModel>) {
        self.link_mut(link).set_loss(loss);
    }

    fn set_rate_schedule(&mut self, link: LinkId, schedule: leoguard_net::RateSchedule) {
        let now = self.net.now;
        self.link_mut(link).set_rate_schedule(now, Some(schedule));
    }

    fn set_initial_state(&mut self, link: LinkId, up: bool) {
        self.link_mut(link).up = up;
    }

    fn link_delay(&self, link: LinkId) -> Duration {
        self.net.links[link.0 as usize].delay
    }

    fn link_count(&self) -> usize {
        self.net.links.len()
    }

    fn route(&mut self, at: NodeId, dst: NodeId, via: LinkId) {
        Sim::route(self, at, dst, via);
    }

    fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>) {
        Sim::schedule_controls(self, at, actions);
    }

    fn set_driver(&mut self, driver: Box<dyn Driver>, first: Instant) {
        Sim::set_driver(self, driver, first);
    }
}

#[cfg(test)]
thread_local! {
    /// Tests only: whether drivers route every destination at every step (none lazily), and how
    /// many lazy refreshes ran on this thread.
    pub(crate) static EAGER_ROUTES: std::cell::Cell<(bool, u64)> = const { std::cell::Cell::new((false, 0)) };
}

/// Tests only: a driver whose lazy destinations are routed at every step.
#[cfg(test)]
#[derive(Debug)]
struct Eager(Box<dyn Driver>);

#[cfg(test)]
impl Driver for Eager {
    fn step(&mut self, now: Instant, out: &mut Vec<Control>) -> Option<Instant> {
        self.0.step_all(now, out)
    }
}

impl Sim {
    /// A simulator with `nodes` nodes and run seed `seed`.
    pub fn new(nodes: usize, seed: u64) -> Self {
        Sim {
            nodes,
            routes: leoguard_net::routes::NextHops::new(nodes),
            node_agent: vec![None; nodes],
            hooks: vec![None; nodes],
            seed,
            ..Default::default()
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
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
        self.set_route(at, dst, Some(via));
    }

    fn set_route(&mut self, at: NodeId, dst: NodeId, via: Option<LinkId>) {
        self.routes.set(at, dst, via);
    }

    /// The next hop of `at` towards `dst`.
    pub fn next_hop(&self, at: NodeId, dst: NodeId) -> Option<LinkId> {
        self.routes.get(at, dst)
    }

    fn add_agent(&mut self, node: NodeId, agent: Box<dyn Agent>) -> u32 {
        self.agents.push(Slot { node, agent: Some(agent) });
        (self.agents.len() - 1) as u32
    }

    /// Hosts a node-wide endpoint: it gets every packet addressed to the node that no flow endpoint
    /// on the node claims. A second call replaces the first agent's delivery (it keeps its timers).
    pub fn attach(&mut self, node: NodeId, agent: Box<dyn Agent>) -> AgentId {
        let id = self.add_agent(node, agent);
        self.node_agent[node.0 as usize] = Some(id);
        AgentId(id)
    }

    /// Hosts the endpoint of flow `flow` on `node`: it gets the packets of that flow addressed to the
    /// node. Each (node, flow) has at most one endpoint; binding it again replaces the delivery.
    pub fn attach_flow(&mut self, node: NodeId, flow: u32, agent: Box<dyn Agent>) -> AgentId {
        let id = self.add_agent(node, agent);
        let f = flow as usize;
        if self.flow_agents.len() <= f {
            self.flow_agents.resize(f + 1, Vec::new());
        }
        let ends = &mut self.flow_agents[f];
        ends.retain(|&(n, _)| n != node);
        ends.push((node, id));
        AgentId(id)
    }

    /// Binds an endpoint already hosted on `node` to one more flow (an agent that runs several
    /// connections, such as a browser with one connection per origin): it also gets the packets of
    /// `flow` addressed to `node`. Replaces any other endpoint of (node, flow).
    pub fn bind_flow(&mut self, agent: AgentId, node: NodeId, flow: u32) {
        assert_eq!(self.agents[agent.0 as usize].node, node, "bind_flow: the agent runs on another node");
        let f = flow as usize;
        if self.flow_agents.len() <= f {
            self.flow_agents.resize(f + 1, Vec::new());
        }
        let ends = &mut self.flow_agents[f];
        ends.retain(|&(n, _)| n != node);
        ends.push((node, agent.0));
    }

    /// Hosts the node's per-hop mechanism (see [`Agent::on_arrive`] and [`Agent::on_depart`]).
    pub fn attach_hook(&mut self, node: NodeId, agent: Box<dyn Agent>) -> AgentId {
        let id = self.add_agent(node, agent);
        self.hooks[node.0 as usize] = Some(id);
        AgentId(id)
    }

    /// The node-wide endpoint of a node, for reading its results after a run.
    pub fn agent(&self, node: NodeId) -> Option<&dyn Agent> {
        self.node_agent[node.0 as usize].and_then(|id| self.agent_by_id(AgentId(id)))
    }

    /// An agent by id.
    pub fn agent_by_id(&self, id: AgentId) -> Option<&dyn Agent> {
        self.agents.get(id.0 as usize).and_then(|s| s.agent.as_deref())
    }

    /// Samples per-link activity every `every` into [`Sim::link_samples`] (call before running).
    pub fn sample_links(&mut self, every: Duration) {
        if every > Duration::ZERO && self.sample_every.is_none() {
            self.sample_every = Some(every);
            self.net.events.push(self.net.now + every, Event::Sample);
        }
    }

    /// Installs the topology driver, first run at `first`.
    pub fn set_driver(&mut self, driver: Box<dyn Driver>, first: Instant) {
        #[cfg(test)]
        let driver: Box<dyn Driver> = if EAGER_ROUTES.get().0 { Box::new(Eager(driver)) } else { driver };
        self.lazy_dests = driver.lazy_dests();
        self.route_stale = if self.lazy_dests.is_empty() { Vec::new() } else { vec![false; self.nodes] };
        self.driver = Some(driver);
        if !self.started && first <= self.net.now {
            // Routes must exist before agents start at the same instant, or their first packets
            // find no route (the initial window of a flow starting at 0 would be lost).
            self.drive_at_start = true;
        } else {
            self.net.events.push(first, Event::Drive);
        }
    }

    /// Records every packet put on a link leaving one of `nodes` or arriving at one of them over a
    /// link, up to `max_packets` (see `capture.rs`; call before running).
    pub fn capture_at(&mut self, nodes: &[NodeId], max_packets: usize) {
        self.capture = Some(Box::new(CaptureTap::new(self.nodes, nodes, max_packets)));
    }

    /// The capture tap, for reading its records.
    pub fn capture(&self) -> Option<&CaptureTap> {
        self.capture.as_deref()
    }

    /// The topology driver, for reading its state after a run.
    pub fn driver(&self) -> Option<&dyn Driver> {
        self.driver.as_deref()
    }

    /// Schedules a link state change (a handover interruption is a down at t and an up at t + d).
    pub fn schedule_link_state(&mut self, at: Instant, link: LinkId, up: bool) {
        self.schedule_controls(at, vec![Control::State { link, up }]);
    }

    /// Schedules a propagation-delay change.
    pub fn schedule_link_delay(&mut self, at: Instant, link: LinkId, delay: Duration) {
        self.schedule_controls(at, vec![Control::Delay { link, delay }]);
    }

    /// Schedules a batch of control actions at `at` (applied in order, as one event). Before the run
    /// starts, a batch at or before the current time is the network's initial state and is applied at
    /// once, in call order: a flow starting at t = 0 must find the routes of a leo-path's first step, as
    /// it does on the emulator, where they are in place before any host sends. (As an event it ran
    /// after the agents' start, so a leo-path lost its whole initial window to "no route" and began with
    /// a 1 s RTO.)
    pub fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>) {
        if !self.started && at <= self.net.now {
            for a in actions {
                self.apply(a);
            }
            return;
        }
        let index = self.controls.len() as u32;
        self.controls.push(actions);
        self.net.events.push(at, Event::Control { index });
    }

    fn apply(&mut self, a: Control) {
        match a {
            Control::Route { at, dst, via } => self.set_route(at, dst, via),
            Control::Delay { link, delay } => self.net.set_link_delay(link, delay),
            Control::Rate { link, rate } => self.net.set_link_rate(link, rate),
            Control::State { link, up } => self.set_state_now(link, up),
        }
    }

    fn apply_controls(&mut self, index: u32) {
        let actions = std::mem::take(&mut self.controls[index as usize]);
        for &a in &actions {
            self.apply(a);
        }
    }

    /// Runs `f` on the driver and applies the controls it appends; None without a driver.
    fn with_driver<R>(&mut self, f: impl FnOnce(&mut dyn Driver, &mut Vec<Control>) -> R) -> Option<R> {
        let mut d = self.driver.take()?;
        let mut out = std::mem::take(&mut self.driver_out);
        let r = f(d.as_mut(), &mut out);
        for a in out.drain(..) {
            self.apply(a);
        }
        self.driver_out = out;
        self.driver = Some(d);
        Some(r)
    }

    fn drive(&mut self) {
        let now = self.net.now;
        let Some(next) = self.with_driver(|d, out| d.step(now, out)) else { return };
        for &n in &self.lazy_dests {
            if let Some(s) = self.route_stale.get_mut(n as usize) {
                *s = true;
            }
        }
        if let Some(t) = next {
            self.net.events.push(t.max(self.net.now), Event::Drive);
        }
    }

    fn set_state_now(&mut self, link: LinkId, up: bool) {
        if self.net.links[link.0 as usize].up == up {
            return;
        }
        let mut lost = std::mem::take(&mut self.lost);
        self.net.set_link_state(link, up, &mut lost);
        for p in lost.drain(..) {
            self.record_drop(p, Some(link), Some(DropReason::Down));
        }
        self.lost = lost;
        let (from, to) = (self.net.links[link.0 as usize].from, self.net.links[link.0 as usize].to);
        for node in [from, to] {
            if let Some(h) = self.hooks[node.0 as usize] {
                self.with_agent(h, |a, c| a.on_link_state(link, up, c));
            }
        }
    }

    fn sample(&mut self) {
        let Some(every) = self.sample_every else { return };
        let now = self.net.now;
        self.net.advance_links();
        self.last_counts.resize(self.net.links.len(), (0, 0));
        for (i, l) in self.net.links.iter().enumerate() {
            let st = &l.stats;
            let drops = st.drops_queue + st.drops_loss + st.drops_down;
            let (b0, d0) = self.last_counts[i];
            let (bytes, dropped) = (st.delivered_bytes - b0, drops - d0);
            if bytes > 0 || dropped > 0 || l.queued_bytes() > 0 {
                self.link_samples.push(LinkSample {
                    t: now,
                    link: LinkId(i as u32),
                    bytes,
                    queue_bytes: l.queued_bytes(),
                    drops: dropped,
                    up: l.up,
                });
            }
            self.last_counts[i] = (st.delivered_bytes, drops);
        }
        self.net.events.push(now + every, Event::Sample);
    }

    fn flush(&mut self, agent: u32) {
        let node = self.agents[agent as usize].node;
        let is_hook = self.hooks[node.0 as usize] == Some(agent);
        // Timers first: handing the sends on may run the node's hook, which uses the same context.
        for (at, token) in self.ctx.timers.drain(..) {
            self.net.events.push(at.max(self.net.now), Event::Timer { agent, token });
        }
        for (AgentId(other), at, token) in self.ctx.wakes.drain(..) {
            self.net.events.push(at.max(self.net.now), Event::Timer { agent: other, token });
        }
        let mut sends = std::mem::take(&mut self.ctx.sends);
        for (p, kind) in sends.drain(..) {
            let id = self.net.pool.alloc(p);
            match kind {
                SendKind::Routed => self.forward(node, id, !is_hook),
                SendKind::OnLink(link) => self.put_on(link, id),
                SendKind::Resume => self.handle_at(node, id),
            }
        }
        // Keep the allocation (a nested flush may have left its own, empty, vector in place).
        if self.ctx.sends.capacity() < sends.capacity() {
            self.ctx.sends = sends;
        }
    }

    // Inlined into `forward` as before the capture tap: the tap's work stays out of line, so a run
    // without capture pays one test of `self.capture` per packet put on a link.
    #[inline]
    fn put_on(&mut self, link: LinkId, id: PacketId) {
        let out = self.net.send(link, id);
        if self.capture.is_some() {
            self.tap(link, id, Direction::Depart, out);
        }
        if let LinkOutput::Dropped(p, reason) = out {
            self.record_drop(p, Some(link), Some(reason));
        }
    }

    /// Records packet `id` crossing `link` if the tapped end is captured. A departure is recorded as
    /// a tap at the interface sees it: sent, lost on the way or not; a packet the queue turned away
    /// or a down link refused never left. An arrival is recorded before the hook runs, as the wire
    /// delivered it (with the upstream node's header).
    #[inline(never)]
    fn tap(&mut self, link: LinkId, id: PacketId, dir: Direction, out: LinkOutput) {
        let Some(tap) = self.capture.as_deref_mut() else { return };
        let l = &self.net.links[link.0 as usize];
        let node = if dir == Direction::Depart { l.from } else { l.to };
        let sent = !matches!(out, LinkOutput::Dropped(_, DropReason::Queue | DropReason::Down));
        if sent && tap.taps(node) {
            tap.record(CaptureRecord::new(self.net.now, l.from, l.to, dir, self.net.pool.get(id)));
        }
    }

    /// Routes towards lazy destination `dst` as of the driver's latest step (see `Driver::refresh`):
    /// the same next hops the step would have set, set when a packet first needs them.
    #[inline(never)]
    fn refresh_routes(&mut self, dst: u32) {
        #[cfg(test)]
        EAGER_ROUTES.set((EAGER_ROUTES.get().0, EAGER_ROUTES.get().1 + 1));
        self.route_stale[dst as usize] = false;
        self.with_driver(|d, out| d.refresh(dst, out));
    }

    /// Forwards a packet from `at`; `hook` says whether the node's hook sees it leave.
    fn forward(&mut self, at: NodeId, id: PacketId, hook: bool) {
        let dst = self.net.pool.get(id).dst;
        if self.route_stale.get(dst as usize) == Some(&true) {
            self.refresh_routes(dst);
        }
        let Some(link) = self.next_hop(at, NodeId(dst)) else {
            self.record_drop(id, None, None);
            return;
        };
        let now = self.net.now;
        let l = &mut self.net.links[link.0 as usize];
        let size = self.net.pool.get(id).size;
        // A packet the queue turns away is a congestion drop at this node: it never reaches the
        // interface, so per-hop schemes never see it leave (the drop is the endpoints' signal).
        if let Some(h) = self.hooks[at.0 as usize].filter(|_| hook) {
            if l.has_room(now, size) {
                self.ctx.wait = l.egress_wait(now, size);
                let keep = self.pass_hook(at, id, |a, p, c| a.on_depart(link, p, c));
                self.ctx.wait = Duration::ZERO;
                if !keep {
                    return;
                }
            } else {
                let p = *self.net.pool.get(id);
                self.with_agent(h, |a, c| a.on_congestion_drop(link, &p, c));
            }
        }
        self.put_on(link, id);
    }

    /// Shows packet `id` to the hook of `node` (if any); false if the hook took it (it is released).
    fn pass_hook(
        &mut self,
        node: NodeId,
        id: PacketId,
        f: impl FnOnce(&mut dyn Agent, &mut Packet, &mut Ctx) -> bool,
    ) -> bool {
        let Some(h) = self.hooks[node.0 as usize] else { return true };
        // The hook works on the packet in its pool slot (no copy out and back): the slot is not
        // reused before the hook returns, since sends are handed on only in `flush` afterwards.
        let Some(mut a) = self.enter(h) else { return true };
        let keep = f(a.as_mut(), self.net.pool.get_mut(id), &mut self.ctx);
        self.leave(h, a);
        if !keep {
            self.net.pool.release(id);
        }
        keep
    }

    /// A packet that passed the node's hook: delivered if addressed here, else forwarded.
    fn handle_at(&mut self, node: NodeId, id: PacketId) {
        if self.net.pool.get(id).dst != node.0 {
            self.forward(node, id, true);
            return;
        }
        let p = *self.net.pool.get(id);
        self.net.pool.release(id);
        let by_flow = self.flow_agents.get(p.flow as usize).and_then(|e| e.iter().find(|x| x.0 == node)).map(|x| x.1);
        match by_flow.or(self.node_agent[node.0 as usize]) {
            Some(a) => self.with_agent(a, |ag, c| ag.on_packet(&p, c)),
            None => self.drops.push(DropRecord { t: self.net.now, packet: p, link: None, reason: None }),
        }
    }

    fn record_drop(&mut self, p: PacketId, link: Option<LinkId>, reason: Option<DropReason>) {
        self.drops.push(DropRecord { t: self.net.now, packet: *self.net.pool.get(p), link, reason });
        self.net.pool.release(p);
    }

    fn with_agent(&mut self, agent: u32, f: impl FnOnce(&mut dyn Agent, &mut Ctx)) {
        if let Some(mut a) = self.enter(agent) {
            f(a.as_mut(), &mut self.ctx);
            self.leave(agent, a);
        }
    }

    /// Takes `agent` out of its slot for a call, with the context set to now and its node; `None`
    /// while it is already running (a nested call does not reach it).
    #[inline]
    fn enter(&mut self, agent: u32) -> Option<Box<dyn Agent>> {
        let slot = &mut self.agents[agent as usize];
        let a = slot.agent.take()?;
        self.ctx.now = self.net.now;
        self.ctx.node = slot.node;
        Some(a)
    }

    /// Puts `agent` back after a call and hands on what it sent and armed.
    #[inline]
    fn leave(&mut self, agent: u32, a: Box<dyn Agent>) {
        self.agents[agent as usize].agent = Some(a);
        self.flush(agent);
    }

    /// Runs until `end` (events at exactly `end` are processed) or until nothing is pending. Can be
    /// called again with a later `end` to continue (a long run in slices).
    pub fn run(&mut self, end: Instant) {
        if !self.started {
            self.started = true;
            if std::mem::take(&mut self.drive_at_start) {
                self.drive();
            }
            for a in 0..self.agents.len() {
                self.with_agent(a as u32, |a, c| a.start(c));
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
                Event::Arrive { link, token } => {
                    if let Some(p) = self.net.arrive(link, token) {
                        let node = self.net.links[link.0 as usize].to;
                        if self.capture.is_some() {
                            self.tap(link, p, Direction::Arrive, LinkOutput::Pending);
                        }
                        if self.pass_hook(node, p, |a, pk, c| a.on_arrive(link, pk, c)) {
                            self.handle_at(node, p);
                        }
                    }
                }
                Event::Timer { agent, token } => self.with_agent(agent, |a, c| a.on_timer(token, c)),
                Event::Control { index } => self.apply_controls(index),
                Event::Drive => self.drive(),
                Event::Sample => self.sample(),
            }
        }
        // The clock stands at `end` afterwards (no event before it is left unprocessed), and so do the
        // links' transmitters (their counters include every serialisation started by then).
        self.net.now = self.net.now.max(end);
        self.net.advance_links();
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
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
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
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
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
mod tests;
