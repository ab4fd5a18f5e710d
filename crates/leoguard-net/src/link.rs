//! The link model both engines drive: a one-way link with a rate, a FIFO delay line, a drop-tail
//! queue, up/down state and an optional loss model. It is sans-IO: the caller passes the time and
//! schedules what the link asks for (the simulator on its event queue, the emulator on its timer
//! wheel), and the link never reads a clock.
//!
//! Semantics: a packet is serialised at the link rate after the packets ahead of it, then propagates
//! for the delay the link has when it starts propagating; it never arrives before the packet ahead of
//! it (a physical link is FIFO: arrival = max(start + delay, previous arrival)). A link that goes down
//! loses every packet on the wire and in its queue (a handover interruption). Link-local control
//! packets (HAcks, link-layer ACKs) ride a prioritised channel: ahead of data, never refused for room.
//!
//! The transmitter is lazy: the end of a serialisation is not an event. Each call that takes `now`
//! first brings the transmitter up to `now` ([`Link::advance`]: every serialisation that ended by then
//! moves its packet onto the wire and starts the next), so a serialisation ending at `t` is applied
//! before anything else the link sees at `t`. The engine schedules one kind of event per link, a
//! [`Wake`] at the next arrival, and only when the link asks for it; a packet-hop costs one event.
//!
//! A link's capacity may follow a periodic [`RateSchedule`] (LEOTP's Fig 14: a 10 +/- 1 Mbit/s
//! square wave). Approximation: the rate in force when a packet's serialisation *starts* sets its
//! whole serialisation time, and a step boundary does not re-time a packet already on the
//! transmitter (at 9 Mbit/s a 1500-byte packet takes 1.3 ms, so a 1 s step is off by at most that).

use crate::loss::LossModel;
use leoguard_core::{Bps, Bytes, DrawKey, Duration, Instant, RngStream};
use std::collections::VecDeque;

/// Index of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// Index of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// A queue limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many bytes queued (excluding the packet being serialised).
    Bytes(u64),
    /// At most this many packets queued.
    Packets(u32),
}

/// Why a link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Queue full.
    Queue,
    /// Loss model.
    Loss,
    /// Link down.
    Down,
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub offered: u64,
    /// Packets that reached the far end.
    pub delivered: u64,
    /// Bytes that reached the far end.
    pub delivered_bytes: u64,
    /// Dropped because the queue was full.
    pub drops_queue: u64,
    /// Dropped by the loss model.
    pub drops_loss: u64,
    /// Lost because the link was or went down.
    pub drops_down: u64,
    /// Time spent serialising, ns (utilisation = busy / elapsed).
    pub busy_ns: u64,
    /// Largest queue seen, bytes.
    pub max_queue_bytes: u64,
}

/// An event the link asks its engine to schedule: call [`Link::wake`] with `token` at `at` (the next
/// arrival as now foreseen). A later wake of the same link supersedes it (its token no longer matches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wake<P> {
    /// When.
    pub at: Instant,
    /// What to hand back.
    pub token: u32,
    /// The packet foreseen to arrive (a hint: an engine may prefetch it).
    pub pkt: P,
}

/// What offering a packet to a link did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer<P> {
    /// Dropped; the packet is handed back for the caller to record and release.
    Dropped(P, DropReason),
    /// Serialising or queued; schedule `wake` if there is one.
    Accepted {
        /// A wake to schedule (the link had none due early enough).
        wake: Option<Wake<P>>,
    },
}

/// What a wake found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival<P> {
    /// The packet that arrived (none for a superseded wake, or an early one after the delay grew).
    pub pkt: Option<P>,
    /// The next wake to schedule.
    pub wake: Option<Wake<P>>,
}

/// A periodic, piecewise-constant capacity: `rates` in equal steps of `period / rates.len()`,
/// repeating from t = 0 (`period` 2 s, `rates` [11, 9] Mbit/s: 1 s at 11, 1 s at 9, 1 s at 11, ...).
/// Unequal steps are written by repeating a rate (1 s at 11 then 2 s at 9: period 3 s, [11, 9, 9]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateSchedule {
    /// Length of one cycle (> 0; the topology check asks for at least 1 µs per step).
    pub period: Duration,
    /// The steps' rates, in order (at least one, each in (0, MAX_LINK_RATE]).
    pub rates: Vec<Bps>,
}

impl RateSchedule {
    /// The rate in force at `now`.
    #[inline]
    pub fn rate_at(&self, now: Instant) -> Bps {
        let p = u128::from(self.period.as_nanos().max(1));
        let phase = u128::from(now.as_nanos()) % p;
        let i = (phase * self.rates.len() as u128 / p) as usize;
        self.rates[i.min(self.rates.len() - 1)]
    }

    /// The highest step's rate (what the emulator's real-time check must carry).
    pub fn peak(&self) -> Bps {
        self.rates.iter().copied().max().unwrap_or(Bps(0))
    }

    /// The time-average rate.
    pub fn mean(&self) -> Bps {
        let sum: u128 = self.rates.iter().map(|r| u128::from(r.0)).sum();
        Bps((sum / self.rates.len().max(1) as u128) as u64)
    }
}

/// A one-way link; `P` is the engine's packet handle (a pool slot).
#[derive(Debug)]
pub struct Link<P> {
    /// Sending end.
    pub from: NodeId,
    /// Receiving end.
    pub to: NodeId,
    /// Capacity; with a rate schedule, the nominal rate (the per-hop schemes' estimates and the
    /// link rows read it; serialisation follows the schedule).
    pub rate: Bps,
    /// Current one-way propagation delay.
    pub delay: Duration,
    /// Queue limit.
    pub limit: QueueLimit,
    /// Whether the link is up.
    pub up: bool,
    /// Counters.
    pub stats: LinkStats,
    /// Waiting packets with their sizes.
    queue: VecDeque<(P, u32)>,
    queued_bytes: u64,
    /// Link-local control packets at the head of the queue.
    queued_control: usize,
    /// Packet being serialised, with its size.
    tx: Option<(P, u32)>,
    /// When the serialisation in progress ends.
    tx_end: Instant,
    /// Packets propagating, in arrival order: (arrival time, packet, size). Only the head needs an
    /// event in the engine's queue.
    wire: VecDeque<(Instant, P, u32)>,
    /// The wake the engine holds (its time), if any; its token is `token`.
    wake_at: Option<Instant>,
    token: u32,
    /// A delay ramp (emulator: delays follow the orbit between routing steps): from `.0` at delay
    /// `.1` to `.2` at delay `.3`, linear; `delay` is used outside it.
    ramp: Option<(Instant, Duration, Instant, Duration)>,
    /// A time-varying capacity overriding `rate` (boxed: an unscheduled link pays one pointer test).
    schedule: Option<Box<RateSchedule>>,
    loss: Option<Box<dyn LossModel>>,
    rng: RngStream,
    /// The key of the loss model's time-indexed draws, taken from `rng` at creation: a pure function of
    /// the link's seed and stream label, so every engine building the same links draws the same seconds.
    key: DrawKey,
}

impl<P: Copy> Link<P> {
    /// A link; `rng` is its own stream (used by its loss model).
    pub fn new(from: NodeId, to: NodeId, rate: Bps, delay: Duration, limit: QueueLimit, rng: RngStream) -> Self {
        Link {
            from,
            to,
            rate,
            delay,
            limit,
            up: true,
            stats: LinkStats::default(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            queued_control: 0,
            tx: None,
            tx_end: Instant(0),
            wire: VecDeque::new(),
            wake_at: None,
            token: 0,
            ramp: None,
            schedule: None,
            loss: None,
            key: DrawKey::of_stream(&rng),
            rng,
        }
    }

    /// Sets (or replaces) the loss model, bound to the link's [`DrawKey`].
    pub fn set_loss(&mut self, mut loss: Box<dyn LossModel>) {
        loss.bind(self.key);
        self.loss = Some(loss);
    }

    /// Sets the constant capacity for packets that start serialising after `now` (the one being
    /// serialised keeps its rate; a link with a rate schedule keeps following it).
    pub fn set_rate(&mut self, now: Instant, rate: Bps) {
        self.advance(now);
        self.rate = rate;
    }

    /// Makes the capacity follow `schedule` after `now` (`None`: the constant `rate` again).
    pub fn set_rate_schedule(&mut self, now: Instant, schedule: Option<RateSchedule>) {
        self.advance(now);
        self.schedule = schedule.map(Box::new);
    }

    /// The rate schedule, if any.
    pub fn rate_schedule(&self) -> Option<&RateSchedule> {
        self.schedule.as_deref()
    }

    /// The capacity in force at `now`: the schedule's step, else `rate`.
    #[inline]
    pub fn rate_at(&self, now: Instant) -> Bps {
        match &self.schedule {
            None => self.rate,
            Some(s) => s.rate_at(now),
        }
    }

    /// The highest capacity the link ever has.
    pub fn peak_rate(&self) -> Bps {
        self.schedule.as_ref().map_or(self.rate, |s| s.peak())
    }

    /// The loss model, if any.
    pub fn loss_model(&self) -> Option<&dyn LossModel> {
        self.loss.as_deref()
    }

    /// Bytes waiting (excluding the packet on the transmitter) as of the last call that took a time
    /// ([`Link::advance`] brings it up to date).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Packets waiting (excluding the packet on the transmitter), as of the last call that took a time.
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    /// Packets on the wire (propagating), as of the last call that took a time.
    pub fn on_wire(&self) -> usize {
        self.wire.len()
    }

    /// Brings the transmitter up to `now`: each serialisation that ended by `now` puts its packet on
    /// the wire (with the delay in force when it ended) and starts the next packet (at the rate in
    /// force then). Every method that takes a time calls it first; an engine calls it before reading
    /// the counters or the queue at a time of its own (a sample, the end of a run).
    #[inline]
    pub fn advance(&mut self, now: Instant) {
        while let Some((pkt, size)) = self.tx {
            let end = self.tx_end;
            if end > now {
                return;
            }
            let prop = end + self.delay_at(end);
            // FIFO: a packet never arrives before the one ahead of it.
            let at = self.wire.back().map_or(prop, |&(prev, _, _)| prev.max(prop));
            self.wire.push_back((at, pkt, size));
            self.tx = self.queue.pop_front();
            if let Some((_, size)) = self.tx {
                self.queued_control = self.queued_control.saturating_sub(1);
                self.queued_bytes -= u64::from(size);
                self.start(end, size);
            }
        }
    }

    /// Starts serialising a packet of `size` bytes at `at` (it is already in `tx`).
    #[inline]
    fn start(&mut self, at: Instant, size: u32) {
        let tx = self.rate_at(at).transmission_time(Bytes(u64::from(size))).unwrap_or(Duration::ZERO);
        self.stats.busy_ns += tx.as_nanos();
        self.tx_end = at + tx;
    }

    /// The next arrival as foreseen now: the wire's head, else the packet on the transmitter with the
    /// delay it will get; `None` when nothing is in flight.
    #[inline]
    fn next_arrival(&self) -> Option<(Instant, P)> {
        match self.wire.front() {
            Some(&(at, pkt, _)) => Some((at, pkt)),
            None => self.tx.map(|(pkt, _)| (self.tx_end + self.delay_at(self.tx_end), pkt)),
        }
    }

    /// A wake for the next arrival, unless the engine already holds one due no later.
    #[inline]
    fn rearm(&mut self) -> Option<Wake<P>> {
        let (at, pkt) = self.next_arrival()?;
        if self.wake_at.is_some_and(|w| w <= at) {
            return None;
        }
        self.token = self.token.wrapping_add(1);
        self.wake_at = Some(at);
        Some(Wake { at, token: self.token, pkt })
    }

    /// Whether a packet of `size` bytes offered at `now` would find room (an idle transmitter or space
    /// in the queue); a link that is down or loses the packet in transmission still "accepts" it.
    #[inline]
    pub fn has_room(&mut self, now: Instant, size: u32) -> bool {
        self.advance(now);
        self.room(size)
    }

    /// [`Link::has_room`] for a transmitter already brought up to date.
    #[inline]
    fn room(&self, size: u32) -> bool {
        self.tx.is_none() || self.fits(u64::from(size))
    }

    #[inline]
    fn fits(&self, size: u64) -> bool {
        match self.limit {
            QueueLimit::Bytes(b) => self.queued_bytes + size <= b,
            QueueLimit::Packets(n) => self.queue.len() < n as usize,
        }
    }

    /// How long a packet of `size` bytes offered at `now` waits until its last bit is sent: the queue
    /// ahead of it and its own serialisation (the packet on the transmitter is left out: at most one
    /// MTU), at the rate in force at `now` (with a schedule, an estimate across a step boundary).
    #[inline]
    pub fn egress_wait(&mut self, now: Instant, size: u32) -> Duration {
        self.advance(now);
        self.rate_at(now).transmission_time(Bytes(self.queued_bytes + u64::from(size))).unwrap_or(Duration::ZERO)
    }

    /// The propagation delay a packet starting to propagate at `now` gets.
    #[inline]
    pub fn delay_at(&self, now: Instant) -> Duration {
        match self.ramp {
            Some((t0, d0, t1, d1)) if now >= t0 && now < t1 && t1 > t0 => {
                let f = (now.as_nanos() - t0.as_nanos()) as f64 / (t1.as_nanos() - t0.as_nanos()) as f64;
                let (a, b) = (d0.as_nanos() as f64, d1.as_nanos() as f64);
                Duration((a + (b - a) * f).round() as u64)
            }
            _ => self.delay,
        }
    }

    /// Sets the delay for packets that start propagating after `now` (ends any ramp). Returns a wake
    /// to schedule if the next arrival moved earlier.
    pub fn set_delay(&mut self, now: Instant, delay: Duration) -> Option<Wake<P>> {
        self.advance(now);
        self.delay = delay;
        self.ramp = None;
        self.rearm()
    }

    /// Moves the delay linearly from `from` (at `now`) to `to` (at `until`); after `until` the delay
    /// stays `to`. The emulator uses it so that a packet's delay follows the orbit between routing
    /// steps instead of jumping at each step. Returns a wake as [`Link::set_delay`] does.
    pub fn ramp_delay(&mut self, now: Instant, from: Duration, until: Instant, to: Duration) -> Option<Wake<P>> {
        self.advance(now);
        self.delay = to;
        self.ramp = (until > now).then_some((now, from, until, to));
        self.rearm()
    }

    /// Offers packet `pkt` of `size` bytes at `now`; `control` marks a link-local control packet.
    ///
    /// A packet a full queue turns away never reaches the transmitter, so it is a queue drop and the
    /// loss model (what happens on the wire) is not consulted for it: the engines' hooks take exactly
    /// the refused packets for congestion drops ([`Link::has_room`]), and the drop record must say the
    /// same, or a per-hop scheme is blamed for not recovering a packet it never sent.
    #[inline]
    pub fn offer(&mut self, now: Instant, pkt: P, size: u32, control: bool) -> Offer<P> {
        self.stats.offered += 1;
        if !self.up {
            self.stats.drops_down += 1;
            return Offer::Dropped(pkt, DropReason::Down);
        }
        self.advance(now);
        if !control && !self.room(size) {
            self.stats.drops_queue += 1;
            return Offer::Dropped(pkt, DropReason::Queue);
        }
        if let Some(m) = self.loss.as_mut() {
            if m.drop_packet(now, &mut self.rng) {
                self.stats.drops_loss += 1;
                return Offer::Dropped(pkt, DropReason::Loss);
            }
        }
        if self.tx.is_none() {
            self.tx = Some((pkt, size));
            self.start(now, size);
            return Offer::Accepted { wake: self.rearm() };
        }
        if control {
            // Behind the control packets already waiting, ahead of all data.
            self.queue.insert(self.queued_control, (pkt, size));
            self.queued_control += 1;
        } else {
            self.queue.push_back((pkt, size));
        }
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes);
        // The transmitter is busy, so a wake is already held for the packet ahead.
        Offer::Accepted { wake: None }
    }

    /// The engine's wake `token` fired at `now`: the head of the wire arrives if it is due (returned)
    /// and the next wake is handed back. A superseded wake (the link went down, or the next arrival
    /// moved earlier since) finds nothing.
    #[inline]
    pub fn wake(&mut self, now: Instant, token: u32) -> Arrival<P> {
        if token != self.token || self.wake_at.is_none() {
            return Arrival { pkt: None, wake: None };
        }
        self.wake_at = None;
        self.advance(now);
        let mut pkt = None;
        if self.wire.front().is_some_and(|&(at, _, _)| at <= now) {
            let (_, head, size) = self.wire.pop_front().expect("front checked");
            self.stats.delivered += 1;
            self.stats.delivered_bytes += u64::from(size);
            pkt = Some(head);
        }
        Arrival { pkt, wake: self.rearm() }
    }

    /// Sets the link up or down at `now`. Going down loses the packet being serialised, the queue and
    /// every packet on the wire; they are appended to `lost` for the caller to record and release.
    pub fn set_state(&mut self, now: Instant, up: bool, lost: &mut Vec<P>) {
        if self.up == up {
            return;
        }
        self.advance(now);
        self.up = up;
        if !up {
            // The wake the engine holds is superseded.
            self.token = self.token.wrapping_add(1);
            self.wake_at = None;
            let before = lost.len();
            lost.extend(self.tx.take().map(|x| x.0));
            lost.extend(self.queue.drain(..).map(|x| x.0));
            lost.extend(self.wire.drain(..).map(|x| x.1));
            self.queued_bytes = 0;
            self.queued_control = 0;
            self.stats.drops_down += (lost.len() - before) as u64;
        }
    }
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
