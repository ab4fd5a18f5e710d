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

/// What offering a packet to a link did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer<P> {
    /// Dropped; the packet is handed back for the caller to record and release.
    Dropped(P, DropReason),
    /// The transmitter was idle: the packet is being serialised until `done` (schedule a tx-done).
    Transmitting {
        /// When its last bit is sent.
        done: Instant,
    },
    /// Queued behind others.
    Queued,
}

/// What finishing a serialisation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxDone<P> {
    /// The packet that started propagating became the head of the wire: schedule its arrival
    /// (the epoch to check on arrival is [`Link::epoch`]).
    pub head_arrival: Option<(Instant, P)>,
    /// The next packet started serialising: schedule its tx-done.
    pub next_done: Option<Instant>,
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
    /// Packets propagating, in arrival order: (arrival time, packet, size). Only the head needs an
    /// event in the engine's queue.
    wire: VecDeque<(Instant, P, u32)>,
    epoch: u32,
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
            wire: VecDeque::new(),
            epoch: 0,
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

    /// Sets the constant capacity for packets that start serialising from now on (the one being
    /// serialised keeps its rate; a link with a rate schedule keeps following it).
    pub fn set_rate(&mut self, rate: Bps) {
        self.rate = rate;
    }

    /// Makes the capacity follow `schedule` from now on (`None`: the constant `rate` again).
    pub fn set_rate_schedule(&mut self, schedule: Option<RateSchedule>) {
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

    /// Bytes waiting (excluding the packet on the transmitter).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Packets waiting (excluding the packet on the transmitter).
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    /// Packets on the wire (propagating).
    pub fn on_wire(&self) -> usize {
        self.wire.len()
    }

    /// The up-epoch: it changes each time the link goes down, so an arrival scheduled before that
    /// is recognised as lost.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Whether a packet of `size` bytes offered now would find room (an idle transmitter or space in
    /// the queue); a link that is down or loses the packet in transmission still "accepts" it.
    #[inline]
    pub fn has_room(&self, size: u32) -> bool {
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
    pub fn egress_wait(&self, now: Instant, size: u32) -> Duration {
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

    /// Sets the delay for packets that start propagating from now on (ends any ramp).
    pub fn set_delay(&mut self, delay: Duration) {
        self.delay = delay;
        self.ramp = None;
    }

    /// Moves the delay linearly from `from` (at `now`) to `to` (at `until`); after `until` the delay
    /// stays `to`. The emulator uses it so that a packet's delay follows the orbit between routing
    /// steps instead of jumping at each step.
    pub fn ramp_delay(&mut self, now: Instant, from: Duration, until: Instant, to: Duration) {
        self.delay = to;
        self.ramp = (until > now).then_some((now, from, until, to));
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
        if !control && !self.has_room(size) {
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
            let tx = self.rate_at(now).transmission_time(Bytes(u64::from(size))).unwrap_or(Duration::ZERO);
            self.stats.busy_ns += tx.as_nanos();
            return Offer::Transmitting { done: now + tx };
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
        Offer::Queued
    }

    /// The serialisation in progress ended at `now`: that packet starts propagating and the next one
    /// starts serialising.
    #[inline]
    pub fn tx_done(&mut self, now: Instant) -> TxDone<P> {
        let mut out = TxDone { head_arrival: None, next_done: None };
        let Some((pkt, size)) = self.tx.take() else { return out };
        let prop = now + self.delay_at(now);
        // FIFO: a packet never arrives before the one ahead of it.
        let at = self.wire.back().map_or(prop, |&(prev, _, _)| prev.max(prop));
        self.wire.push_back((at, pkt, size));
        if self.wire.len() == 1 {
            out.head_arrival = Some((at, pkt));
        }
        if let Some((next, size)) = self.queue.pop_front() {
            self.queued_control = self.queued_control.saturating_sub(1);
            self.queued_bytes -= u64::from(size);
            self.tx = Some((next, size));
            let tx = self.rate_at(now).transmission_time(Bytes(u64::from(size))).unwrap_or(Duration::ZERO);
            self.stats.busy_ns += tx.as_nanos();
            out.next_done = Some(now + tx);
        }
        out
    }

    /// The head of the wire arrives (an arrival scheduled in up-epoch `epoch`). Returns the packet and
    /// the next head's arrival to schedule; `None` for an arrival of an earlier epoch (the link went
    /// down since and its packets were already reported lost by [`Link::set_state`]).
    #[inline]
    pub fn arrive(&mut self, epoch: u32) -> Option<(P, Option<(Instant, P)>)> {
        if epoch != self.epoch {
            return None;
        }
        let (_, head, size) = self.wire.pop_front()?;
        self.stats.delivered += 1;
        self.stats.delivered_bytes += u64::from(size);
        Some((head, self.wire.front().map(|&(at, p, _)| (at, p))))
    }

    /// Sets the link up or down. Going down loses the packet being serialised, the queue and every
    /// packet on the wire; they are appended to `lost` for the caller to record and release.
    pub fn set_state(&mut self, up: bool, lost: &mut Vec<P>) {
        if self.up == up {
            return;
        }
        self.up = up;
        if !up {
            self.epoch = self.epoch.wrapping_add(1); // the pending head arrival of the old epoch is ignored
            let before = lost.len();
            lost.extend(self.tx.take().map(|x| x.0));
            lost.extend(self.queue.drain(..).map(|x| x.0));
            lost.extend(self.wire.drain(..).map(|x| x.1));
            self.queued_bytes = 0;
            self.queued_control = 0;
            self.stats.drops_down += (lost.len() - before) as u64;
        }
    }

    /// Arrival time of the head of the wire, if any.
    pub fn head_arrival(&self) -> Option<Instant> {
        self.wire.front().map(|x| x.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::stream;

    fn link(rate: Bps, delay: Duration) -> Link<u32> {
        Link::new(NodeId(0), NodeId(1), rate, delay, QueueLimit::Packets(10), stream(1, "l"))
    }

    #[test]
    fn ramp_interpolates_and_fifo_holds_when_the_delay_falls() {
        let mut l = link(Bps::gbps(1), Duration::from_millis(10));
        l.ramp_delay(Instant(0), Duration::from_millis(10), Instant(1_000_000), Duration::from_millis(8));
        assert_eq!(l.delay_at(Instant(500_000)), Duration::from_millis(9));
        assert_eq!(l.delay_at(Instant(2_000_000)), Duration::from_millis(8));
        // Two packets; the delay drops sharply between them: the second waits for the first.
        assert_eq!(l.offer(Instant(0), 1, 125, false), Offer::Transmitting { done: Instant(1_000) });
        let d = l.tx_done(Instant(1_000));
        assert_eq!(d.head_arrival.map(|x| x.1), Some(1));
        l.set_delay(Duration::from_millis(1));
        assert!(matches!(l.offer(Instant(2_000), 2, 125, false), Offer::Transmitting { .. }));
        l.tx_done(Instant(3_000));
        let first = d.head_arrival.unwrap().0;
        let (p, next) = l.arrive(l.epoch()).unwrap();
        assert_eq!(p, 1);
        assert_eq!(next.unwrap().0, first, "the second packet is held behind the first");
    }

    #[test]
    fn a_packet_the_full_queue_refuses_is_a_queue_drop_and_draws_no_loss() {
        // The loss model would drop the third packet it is asked about. The third packet offered finds
        // the queue full: it never reaches the transmitter, so it is a queue drop (what the engines'
        // hooks take it for: SATGUARD sends a void and does not stamp it) and the model is not asked.
        let mut l: Link<u32> =
            Link::new(NodeId(0), NodeId(1), Bps::mbps(1), Duration::ZERO, QueueLimit::Packets(1), stream(1, "l"));
        l.set_loss(Box::new(crate::loss::DropList::new(vec![2]).expect("valid")));
        assert!(matches!(l.offer(Instant(0), 1, 1000, false), Offer::Transmitting { .. }));
        assert_eq!(l.offer(Instant(0), 2, 1000, false), Offer::Queued);
        assert!(!l.has_room(1000));
        assert_eq!(l.offer(Instant(0), 3, 1000, false), Offer::Dropped(3, DropReason::Queue));
        assert_eq!((l.stats.drops_queue, l.stats.drops_loss), (1, 0));
        // The model's third draw goes to the next packet that does get onto the link.
        l.tx_done(Instant(8_000_000));
        assert!(l.has_room(1000));
        assert_eq!(l.offer(Instant(8_000_000), 4, 1000, false), Offer::Dropped(4, DropReason::Loss));
        assert_eq!(l.offer(Instant(8_000_000), 5, 1000, false), Offer::Queued);
        // A control packet is never refused for room, so the model still decides its fate.
        assert_eq!(l.offer(Instant(8_000_000), 6, 60, true), Offer::Queued);
    }

    #[test]
    fn control_packets_jump_the_queue_and_are_never_refused() {
        let mut l: Link<u32> =
            Link::new(NodeId(0), NodeId(1), Bps::mbps(1), Duration::ZERO, QueueLimit::Packets(1), stream(1, "l"));
        assert!(matches!(l.offer(Instant(0), 1, 1000, false), Offer::Transmitting { .. }));
        assert_eq!(l.offer(Instant(0), 2, 1000, false), Offer::Queued);
        assert_eq!(l.offer(Instant(0), 3, 1000, false), Offer::Dropped(3, DropReason::Queue));
        assert_eq!(l.offer(Instant(0), 4, 60, true), Offer::Queued);
        l.tx_done(Instant(8_000_000));
        let mut lost = Vec::new();
        l.set_state(false, &mut lost);
        assert_eq!(lost, vec![4, 2, 1], "transmitter (the control packet), queue, wire");
    }

    fn square_wave() -> RateSchedule {
        // LEOTP Fig 14's wave: 1 s at 11 Mbit/s, then 1 s at 9.
        RateSchedule { period: Duration::from_secs(2), rates: vec![Bps::mbps(11), Bps::mbps(9)] }
    }

    #[test]
    fn a_schedule_steps_through_its_rates_every_period_over_n() {
        let s = square_wave();
        let at = |ms: u64| s.rate_at(Instant(ms * 1_000_000));
        assert_eq!(
            [at(0), at(999), at(1_000), at(1_999), at(2_000), at(3_500)].map(|r| r.0 / 1_000_000),
            [11, 11, 9, 9, 11, 9]
        );
        assert_eq!((s.peak(), s.mean()), (Bps::mbps(11), Bps::mbps(10)));
        let three = RateSchedule { period: Duration::from_secs(3), rates: vec![Bps(1), Bps(2), Bps(3)] };
        assert_eq!(
            [0, 999, 1_000, 2_000, 2_999, 3_000].map(|ms| three.rate_at(Instant(ms * 1_000_000)).0),
            [1, 1, 2, 3, 3, 1]
        );
    }

    #[test]
    fn serialisation_times_follow_the_square_wave_by_when_serialisation_starts() {
        // 1375 bytes: 1 ms at 11 Mbit/s, 1.222 ms at 9 (rounded up to the ns). A queue of back-to-back packets before and
        // after the 1 s boundary.
        let mut l = link(Bps::mbps(20), Duration::from_millis(20));
        l.set_rate_schedule(Some(square_wave()));
        assert_eq!(l.rate_at(Instant(0)), Bps::mbps(11));
        let t0 = Instant(998_500_000); // 1.5 ms before the step down
        assert_eq!(l.offer(t0, 1, 1375, false), Offer::Transmitting { done: Instant(999_500_000) });
        assert_eq!(l.offer(t0, 2, 1375, false), Offer::Queued);
        assert_eq!(l.offer(t0, 3, 1375, false), Offer::Queued);
        assert_eq!(l.egress_wait(t0, 1375), Duration(3_000_000), "two queued and itself, at 11 Mbit/s");
        // Packet 2 starts at 999.5 ms, still at 11: 1 ms, though it ends in the 9 Mbit/s step.
        let d = l.tx_done(Instant(999_500_000));
        assert_eq!(d.next_done, Some(Instant(1_000_500_000)));
        assert_eq!(d.head_arrival, Some((Instant(1_019_500_000), 1)), "20 ms of propagation");
        // Packet 3 starts at 1000.5 ms, in the 9 Mbit/s step: 11000 bits / 9 Mbit/s.
        let d = l.tx_done(Instant(1_000_500_000));
        assert_eq!(d.next_done, Some(Instant(1_000_500_000 + 1_222_223)));
        // Back to 11 Mbit/s at 2 s, and busy time adds up the per-packet times.
        l.tx_done(Instant(1_001_722_223));
        assert_eq!(
            l.offer(Instant(2_000_000_000), 4, 1375, false),
            Offer::Transmitting { done: Instant(2_001_000_000) }
        );
        assert_eq!(l.stats.busy_ns, 1_000_000 * 3 + 1_222_223);
        assert_eq!(l.peak_rate(), Bps::mbps(11));
        // Without the schedule the constant rate is back.
        l.set_rate_schedule(None);
        assert_eq!((l.rate_at(Instant(1_500_000_000)), l.peak_rate()), (Bps::mbps(20), Bps::mbps(20)));
    }
}
