//! The host interface sans-IO agents run against in either engine: an agent (an endpoint or a
//! per-hop scheme on a node) gets time and packets and answers through a [`Ctx`] (send, put on a
//! link, resume a held packet, arm a timer). The simulator drives it with its virtual clock, the
//! emulator's data plane with the real one.

use crate::link::{LinkId, NodeId};
use crate::packet::Packet;
use leoguard_core::{Duration, Instant};

/// Index of an agent (endpoint or hook) in an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AgentId(pub u32);

/// How a packet produced by an agent leaves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// Routed from the agent's node (an endpoint's send passes the node's hook on the way out).
    Routed,
    /// Straight onto a link of the node, bypassing routing and hooks (link-local traffic).
    OnLink(LinkId),
    /// Handed on at the node as if it had just arrived and passed the hook (a hook releasing a
    /// packet it held back): delivered if addressed to the node, else forwarded.
    Resume,
}

/// What an agent may do in response to an event.
#[derive(Debug, Default)]
pub struct Ctx {
    /// (Engine) the current time.
    pub now: Instant,
    /// (Engine) the node the agent runs on.
    pub node: NodeId,
    /// (Engine) packets the agent sent, in order.
    pub sends: Vec<(Packet, SendKind)>,
    /// (Engine) timers the agent armed: (time, token).
    pub timers: Vec<(Instant, u64)>,
    /// (Engine) timers armed on other agents: (agent, time, token).
    pub wakes: Vec<(AgentId, Instant, u64)>,
    /// (Engine) the departing packet's egress wait, in `on_depart`.
    pub wait: Duration,
}

impl Ctx {
    /// Current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The node the agent runs on.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Sends a packet from this node, routed by the node's table.
    pub fn send(&mut self, p: Packet) {
        self.sends.push((p, SendKind::Routed));
    }

    /// Puts a packet directly on `link` (which must leave this node), bypassing routing and hooks.
    pub fn send_on(&mut self, link: LinkId, p: Packet) {
        self.sends.push((p, SendKind::OnLink(link)));
    }

    /// (Hooks) hands a held packet on at this node as if it had just arrived and passed the hook.
    pub fn resume(&mut self, p: Packet) {
        self.sends.push((p, SendKind::Resume));
    }

    /// (Hooks, in `on_depart`) how long the departing packet will wait before its last bit leaves the
    /// node: the link's queue ahead of it plus its serialisation. A link-local timer starts there (a
    /// sender's Tx buffer sees the packet leave the interface, not enter the queue). Zero elsewhere.
    pub fn egress_wait(&self) -> Duration {
        self.wait
    }

    /// Arms a timer that calls `on_timer(token)` at `at`.
    pub fn timer(&mut self, at: Instant, token: u64) {
        self.timers.push((at, token));
    }

    /// Arms a timer on another agent: `agent.on_timer(token)` at `at` (a control message between the
    /// parts of one distributed mechanism, whose delay the caller models; e.g. a migrated proxy's
    /// state arriving at its new node).
    pub fn wake(&mut self, agent: AgentId, at: Instant, token: u64) {
        self.wakes.push((agent, at, token));
    }
}

/// An agent's timer for a deadline that moves often, mostly later (a retransmission timer restarted
/// by every ACK). An event is scheduled only when the deadline moves earlier than the one pending, so
/// the event queue does not carry thousands of superseded timers. When the pending event comes, the
/// agent asks either [`due`](Self::due): before the deadline (which moved later since) it only
/// schedules the deadline, so the agent's timeouts run at exactly the deadlines asked for, as when
/// every move scheduled its own event; or [`fired`](Self::fired), for agents whose timeouts are
/// harmless when early (they run them and ask again: LinkGuardian).
/// Tokens are `tag | generation` (the tag's bits must stay clear of the generation's).
#[derive(Debug, Default)]
pub struct DeadlineTimer {
    tag: u64,
    /// The deadline asked for last (none: no timer needed).
    want: Option<Instant>,
    /// The pending event's time (none: no event pending).
    armed: Option<Instant>,
    /// The pending event's generation (older events are ignored).
    generation: u64,
}

impl DeadlineTimer {
    /// A timer whose tokens carry `tag`.
    pub fn new(tag: u64) -> Self {
        DeadlineTimer { tag, ..Default::default() }
    }

    /// Asks for a wake-up at `want` (none: no timer).
    pub fn set(&mut self, want: Option<Instant>, ctx: &mut Ctx) {
        self.want = want;
        if let Some(t) = want {
            if self.armed.is_none_or(|a| t < a) {
                self.schedule(t, ctx);
            }
        }
    }

    /// The deadline asked for last.
    pub fn want(&self) -> Option<Instant> {
        self.want
    }

    fn schedule(&mut self, t: Instant, ctx: &mut Ctx) {
        self.armed = Some(t);
        self.generation += 1;
        ctx.timer(t, self.tag | self.generation);
    }

    /// Whether `token` is the pending event (which is then taken as fired, whether or not the
    /// deadline asked for moved later since).
    pub fn fired(&mut self, token: u64) -> bool {
        let current = token == self.tag | self.generation && self.armed.is_some();
        if current {
            self.armed = None;
        }
        current
    }

    /// Whether the timer event `token` finds the deadline due (the agent's timeouts are then to run);
    /// an early one schedules the deadline instead, a superseded one does nothing.
    pub fn due(&mut self, token: u64, ctx: &mut Ctx) -> bool {
        if token != self.tag | self.generation {
            return false;
        }
        self.armed = None;
        match self.want {
            Some(t) if t > ctx.now() => {
                self.schedule(t, ctx);
                false
            }
            Some(_) => true,
            None => false,
        }
    }
}

/// A sans-IO endpoint or per-hop mechanism hosted on a node.
pub trait Agent: std::fmt::Debug + std::any::Any + Send {
    /// Itself as `Any`, so callers can read a concrete agent's results after a run.
    fn as_any(&self) -> &dyn std::any::Any;
    /// Called once when the run starts.
    fn start(&mut self, ctx: &mut Ctx);
    /// A packet addressed to this endpoint arrived.
    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx);
    /// A timer armed by this agent fired.
    fn on_timer(&mut self, token: u64, ctx: &mut Ctx);
    /// (Hooks) a packet arrived at the node over `link`, before delivery or forwarding. Return false
    /// to take it out of the network (the hook consumed it or holds a copy to `resume` later).
    fn on_arrive(&mut self, _link: LinkId, _p: &mut Packet, _ctx: &mut Ctx) -> bool {
        true
    }
    /// (Hooks) a packet is about to leave the node over `link`. Return false to consume it.
    fn on_depart(&mut self, _link: LinkId, _p: &mut Packet, _ctx: &mut Ctx) -> bool {
        true
    }
    /// (Hooks) a packet leaving the node over `link` is dropped because the link's queue is full
    /// (a congestion drop: the hook does not see it depart).
    fn on_congestion_drop(&mut self, _link: LinkId, _p: &Packet, _ctx: &mut Ctx) {}
    /// (Hooks) a link from or to the node changed state.
    fn on_link_state(&mut self, _link: LinkId, _up: bool, _ctx: &mut Ctx) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timer runs the agent's timeouts at exactly the deadlines asked for: a deadline that moves
    /// later costs no event until the pending one comes (which then only schedules it), one that
    /// moves earlier is scheduled at once, and a timer no longer wanted runs nothing.
    #[test]
    fn deadline_timer_is_due_only_at_the_deadline_asked_for() {
        let mut ctx = Ctx::default();
        let mut t = DeadlineTimer::new(1 << 62);
        let at = |ms| Instant::ZERO + Duration::from_millis(ms);
        t.set(Some(at(10)), &mut ctx);
        t.set(Some(at(30)), &mut ctx); // later: nothing new scheduled
        assert_eq!(ctx.timers.len(), 1);
        let first = ctx.timers.pop().unwrap();
        assert_eq!(first.0, at(10));
        assert_eq!(first.1 & (1 << 62), 1 << 62, "tokens carry the tag");
        ctx.now = at(10);
        assert!(!t.due(first.1, &mut ctx), "early: only schedules the deadline");
        let second = ctx.timers.pop().unwrap();
        assert_eq!(second.0, at(30));
        t.set(Some(at(20)), &mut ctx); // earlier: scheduled at once, the pending one superseded
        let third = ctx.timers.pop().unwrap();
        assert_eq!(third.0, at(20));
        ctx.now = at(20);
        assert!(t.due(third.1, &mut ctx));
        ctx.now = at(30);
        assert!(!t.due(second.1, &mut ctx), "superseded");
        t.set(Some(at(50)), &mut ctx);
        t.set(None, &mut ctx);
        let fourth = ctx.timers.pop().unwrap();
        ctx.now = at(50);
        assert!(!t.due(fourth.1, &mut ctx), "no longer wanted");
        assert!(ctx.timers.is_empty());
    }

    /// `fired` takes the pending event as it comes, early or not, and only it; nothing is scheduled
    /// until the agent sets the timer again.
    #[test]
    fn deadline_timer_fired_takes_the_pending_event_even_early() {
        let mut ctx = Ctx::default();
        let mut t = DeadlineTimer::new(0);
        let at = |ms| Instant::ZERO + Duration::from_millis(ms);
        t.set(Some(at(10)), &mut ctx);
        t.set(Some(at(5)), &mut ctx); // earlier: scheduled, the first superseded
        t.set(Some(at(30)), &mut ctx); // later: nothing new
        let (first, second) = (ctx.timers[0], ctx.timers[1]);
        assert_eq!((first.0, second.0, ctx.timers.len()), (at(10), at(5), 2));
        ctx.timers.clear();
        ctx.now = at(5);
        assert!(t.fired(second.1), "the pending event, though the deadline moved to 30 ms");
        assert!(!t.fired(second.1), "taken once");
        assert!(!t.fired(first.1), "superseded");
        assert!(ctx.timers.is_empty());
        t.set(Some(at(30)), &mut ctx);
        assert_eq!(ctx.timers.len(), 1, "set again: scheduled, nothing pending");
    }
}
