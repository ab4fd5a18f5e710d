//! UDP through M-PEP: the proxy on an ingress satellite relays every UDP packet of the flows it
//! serves. Relaying adds nothing while the proxy runs; while its state migrates to the new ingress
//! satellite (the SATGUARD paper §4: "during the state migration among PEP nodes, a large amount of
//! accumulated frames are played quickly after the transmission is resumed") it holds the flow's
//! packets in a bounded buffer and releases them, in arrival order, when the migration completes:
//! receivers see a delay spike and then a burst. A packet that does not fit is dropped and counted.
//!
//! Engine mapping: a hook ([`UdpRelayHook`]) on every satellite that is the old or the new ingress
//! satellite of a migration. A migration of the proxy of ground node `g` for flow `f` at handover `t`
//! is a window `[t, t + delay)` (delay = ISL route propagation + connection state / ISL rate, as for
//! TCP proxies: [`super::plan_migrations`]). After the handover every packet of `f` that needs the
//! proxy reaches the new satellite (it is `g`'s only serving satellite), where it is held until the
//! window ends. Packets still reaching the old satellite in the window (in flight on the ISLs towards
//! it) are held there and sent on at `t + delay - propagation`, so they reach the new satellite as
//! the state does ("forwards them to the new satellite with the state"). The mechanism is generic:
//! it applies to every packet of a relayed flow id, whatever the UDP workload.

use crate::engine::{NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Bytes, Duration, Instant};
use std::any::Any;

/// Which side of a migration a window sits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The satellite the proxy leaves: held packets go on early enough to arrive with the state.
    Old,
    /// The satellite the proxy moves to: held packets go on when the state has arrived.
    New,
}

/// One migration of one flow's UDP relay, as seen by one satellite.
#[derive(Clone, Debug)]
pub struct UdpWindow {
    /// The flow id relayed.
    pub flow: u32,
    /// The handover (the proxy stops relaying).
    pub t: Instant,
    /// When the state has arrived at the new satellite.
    pub end: Instant,
    /// When the held packets are sent on from this satellite.
    pub release: Instant,
    /// Old or new satellite.
    pub side: Side,
    /// Bytes the buffer holds at most.
    pub cap: u64,
    held: Vec<Packet>,
    held_bytes: u64,
}

impl UdpWindow {
    /// A window of flow `flow` from `t` to `end` on `side`; `propagation` is the ISL route's delay.
    pub fn new(flow: u32, t: Instant, end: Instant, propagation: Duration, side: Side, cap: u64) -> Self {
        let release = match side {
            Side::New => end,
            Side::Old => Instant(end.as_nanos().saturating_sub(propagation.as_nanos()).max(t.as_nanos())),
        };
        UdpWindow { flow, t, end, release, side, cap, held: Vec::new(), held_bytes: 0 }
    }
}

/// UDP relay counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpRelayStats {
    /// Packets held during migrations (and released after).
    pub held: u64,
    /// Packets dropped because the relay's buffer was full.
    pub dropped: u64,
    /// Largest number of bytes one relay held.
    pub max_held_bytes: u64,
}

/// The UDP relays of the M-PEP proxies that occupy one satellite at some time.
#[derive(Debug)]
pub struct UdpRelayHook {
    /// The satellite.
    pub node: NodeId,
    /// Its migration windows.
    pub windows: Vec<UdpWindow>,
    /// Counters.
    pub stats: UdpRelayStats,
}

impl UdpRelayHook {
    /// A hook on `node` with `windows`.
    pub fn new(node: NodeId, windows: Vec<UdpWindow>) -> Self {
        UdpRelayHook { node, windows, stats: UdpRelayStats::default() }
    }
}

impl Agent for UdpRelayHook {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for (k, w) in self.windows.iter().enumerate() {
            ctx.timer(w.release, k as u64);
        }
    }

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let Some(w) = self.windows.get_mut(token as usize) else { return };
        w.held_bytes = 0;
        for p in std::mem::take(&mut w.held) {
            ctx.resume(p);
        }
    }

    fn on_arrive(&mut self, _link: crate::engine::LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        let now = ctx.now();
        let Some(w) = self.windows.iter_mut().find(|w| w.flow == p.flow && w.t <= now && now < w.release) else {
            return true;
        };
        let size = u64::from(p.size);
        if w.held_bytes + size > w.cap {
            self.stats.dropped += 1;
            return false;
        }
        w.held_bytes += size;
        w.held.push(*p);
        self.stats.held += 1;
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(w.held_bytes);
        false
    }
}

/// The migration delay of a UDP relay: the route's propagation plus its connection state
/// (`overhead` bytes: the relay holds no stream data of its own) at the ISL rate.
pub fn relay_delay(m: &super::Migration, overhead: u64) -> Duration {
    m.propagation + m.isl_rate.transmission_time(Bytes(overhead)).unwrap_or(Duration::ZERO)
}

/// The windows of one relayed flow: per migration of a proxy in `migs` (time order), one on the old
/// and one on the new satellite; a handover while the previous migration is still under way is
/// skipped (counted in the second value), as for TCP proxies.
pub fn windows_of(flow: u32, migs: &[super::Migration], overhead: u64, cap: u64) -> (Vec<(NodeId, UdpWindow)>, u64) {
    let mut out = Vec::new();
    let mut skipped = 0;
    let mut busy_until: Vec<(usize, Instant)> = Vec::new();
    for m in migs {
        if busy_until.iter().any(|&(h, e)| h == m.hop && m.t < e) {
            skipped += 1;
            continue;
        }
        let end = m.t + relay_delay(m, overhead);
        busy_until.retain(|&(h, _)| h != m.hop);
        busy_until.push((m.hop, end));
        out.push((m.from, UdpWindow::new(flow, m.t, end, m.propagation, Side::Old, cap)));
        out.push((m.to, UdpWindow::new(flow, m.t, end, m.propagation, Side::New, cap)));
    }
    (out, skipped)
}
