//! The upstream side of a LinkGuardian link: sequence numbers, Tx buffer, retransmissions, dummies.

use super::{GiveUpReason, LgAck, LgConfig, LgConfigError, LgEvent, OutKind, Outgoing};
use leoguard_core::{Duration, Instant, Seq16};
use std::collections::VecDeque;

/// What the sender keeps of a copy held for retransmission besides the copy itself (16 bytes: the
/// copy's departure and its acknowledgement read and write these only).
#[derive(Clone, Copy, Debug)]
struct Entry {
    bytes: u32,
    retries: u8,
    /// When its last (re)transmission left the interface (its first one may lie ahead, see `queued`).
    last_tx: Instant,
    /// It has left the interface: its bytes count in the Tx buffer.
    on_wire: bool,
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets stamped.
    pub sent: u64,
    /// Packets acknowledged (first time).
    pub acked: u64,
    /// Retransmitted copies sent.
    pub retransmissions: u64,
    /// Retransmission rounds started (each sends `retx_copies` copies).
    pub retx_rounds: u64,
    /// Dummies sent.
    pub dummies: u64,
    /// Dummy trains sent.
    pub trains: u64,
    /// Loss notifications received.
    pub notifications: u64,
    /// Notifications ignored (guard, unknown or gone packets, fixed-timer mode).
    pub notifications_ignored: u64,
    /// Fixed-timer expiries on unacknowledged packets (a round started, or the packet given up).
    pub timeouts: u64,
    /// Largest Tx buffer occupancy, bytes.
    pub buffer_bytes_max: u64,
    /// Packets given up (all reasons).
    pub given_up: u64,
    /// Of those, discarded by a link change.
    pub discarded_on_link_change: u64,
    /// ACKs that acknowledged sequence numbers never sent (ignored).
    pub bad_acks: u64,
}

/// The upstream side of one link (generic over the host's packet handle `T`, cloned for retransmissions).
#[derive(Debug)]
pub struct LgSender<T> {
    cfg: LgConfig,
    next_seq: Seq16,
    /// Sequence number of `buf[0]`.
    base: Seq16,
    /// Copies by sequence number from `base`; `None` once acknowledged out of order or given up.
    buf: VecDeque<Option<Entry>>,
    /// The copies themselves, index for index with `buf` (`Some` while its entry is; a packet type
    /// that needs no drop is left in place when its entry goes, until the slot leaves the front).
    items: VecDeque<Option<T>>,
    /// Bytes of the live copies that have left the interface (the Tx buffer proper).
    buf_bytes: u64,
    live: usize,
    /// Stamped packets still queued at the host's interface, in order: (departure as estimated by
    /// `on_send`, `pushed_back` then, seq); each leaves later by what `pushed_back` grew since. Their
    /// copies join the Tx buffer when they leave (module docs, "Tx buffer").
    queued: VecDeque<(Instant, Duration, Seq16)>,
    /// Total time priority packets sent ahead of queued data delayed it ([`LgSender::on_priority_sent`]).
    pushed_back: Duration,
    /// Queued retransmission copies (seq, copy index).
    retx: VecDeque<(Seq16, u8)>,
    /// Fixed-timer deadlines of first transmissions, in departure order (lazy deletion).
    timers: VecDeque<(Instant, Seq16)>,
    /// Fixed-timer deadlines of retransmissions, in order (lazy deletion).
    retx_timers: VecDeque<(Instant, Seq16)>,
    idle: bool,
    dummies_left: u8,
    trains_left: u8,
    last_train: Option<Instant>,
    events: VecDeque<LgEvent>,
    stats: SenderStats,
}

impl<T: Clone> LgSender<T> {
    /// A sender numbering from 0; fails on an invalid configuration.
    pub fn new(cfg: LgConfig) -> Result<Self, LgConfigError> {
        cfg.validate()?;
        Ok(LgSender {
            cfg,
            next_seq: Seq16(0),
            base: Seq16(0),
            buf: VecDeque::new(),
            items: VecDeque::new(),
            buf_bytes: 0,
            live: 0,
            queued: VecDeque::new(),
            pushed_back: Duration::ZERO,
            retx: VecDeque::new(),
            timers: VecDeque::new(),
            retx_timers: VecDeque::new(),
            idle: false,
            dummies_left: 0,
            trains_left: cfg.max_dummy_trains,
            last_train: None,
            events: VecDeque::new(),
            stats: SenderStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LgConfig {
        &self.cfg
    }

    /// Records a data packet the host puts on its interface queue at `now`, whose last bit leaves the
    /// interface at `leaves` (`now` on an idle interface); returns the sequence number to stamp on it.
    /// Its copy joins the Tx buffer and its timers start when it leaves (module docs, "Tx buffer").
    pub fn on_send(&mut self, now: Instant, leaves: Instant, item: T, bytes: u32) -> Seq16 {
        self.settle(now);
        // Departures are in order (FIFO interface); an estimate that runs backwards is clamped.
        let leaves = self.queued.back().map_or(leaves, |&q| leaves.max(self.departure(q))).max(now);
        let seq = self.next_seq;
        self.next_seq = seq.next();
        self.stats.sent += 1;
        // New data reveals earlier holes itself: pending dummies are pointless.
        self.idle = false;
        self.dummies_left = 0;
        // The sequence span is bounded too (16-bit serial order).
        while self.buf.len() >= usize::from(self.cfg.max_window) {
            self.evict_front(GiveUpReason::BufferFull);
        }
        if self.buf.is_empty() {
            self.base = seq;
        }
        self.buf.push_back(Some(Entry { bytes, retries: 0, last_tx: leaves, on_wire: false }));
        self.items.push_back(Some(item));
        self.live += 1;
        self.queued.push_back((leaves, self.pushed_back, seq));
        self.settle(now);
        seq
    }

    /// The host put a priority packet taking `d` to serialise on the link at `now`: it goes ahead of
    /// the data queued at the interface, which leaves `d` later than estimated.
    pub fn on_priority_sent(&mut self, now: Instant, d: Duration) {
        self.settle(now);
        if !self.queued.is_empty() {
            self.pushed_back = self.pushed_back + d;
        }
    }

    /// When a queued packet leaves the interface.
    fn departure(&self, (leaves, pushed_back, _): (Instant, Duration, Seq16)) -> Instant {
        leaves + Duration(self.pushed_back.as_nanos() - pushed_back.as_nanos())
    }

    /// Moves the copies that left the interface by `now` into the Tx buffer (their timers start);
    /// when it overflows, the oldest copies make room (bounded Tx buffer).
    fn settle(&mut self, now: Instant) {
        while let Some(&q) = self.queued.front() {
            let t = self.departure(q);
            if t > now {
                break;
            }
            self.queued.pop_front();
            let Some(i) = self.index(q.2) else { continue };
            if let Some(e) = self.buf[i].as_mut() {
                if !e.on_wire {
                    e.on_wire = true;
                    e.last_tx = t;
                    self.buf_bytes += u64::from(e.bytes);
                    if let Some(d) = self.cfg.fixed_timeout {
                        self.timers.push_back((t + d, q.2));
                    }
                }
            }
            while self.buf_bytes > self.cfg.tx_buffer_bytes {
                self.evict_front(GiveUpReason::BufferFull);
            }
            self.stats.buffer_bytes_max = self.stats.buffer_bytes_max.max(self.buf_bytes);
        }
    }

    /// Drops the oldest slot (giving it up if still live).
    fn evict_front(&mut self, reason: GiveUpReason) {
        if let Some(slot) = self.buf.pop_front() {
            self.items.pop_front();
            if let Some(e) = slot {
                self.forget(&e);
                self.give_up_event(self.base, reason);
            }
            self.base = self.base.next();
        }
        self.trim();
    }

    fn forget(&mut self, e: &Entry) {
        if e.on_wire {
            self.buf_bytes -= u64::from(e.bytes);
        }
        self.live -= 1;
    }

    fn give_up_event(&mut self, seq: Seq16, reason: GiveUpReason) {
        self.stats.given_up += 1;
        if reason == GiveUpReason::LinkChange {
            self.stats.discarded_on_link_change += 1;
        }
        self.events.push_back(LgEvent::GivenUp { seq, reason });
    }

    /// Pops acknowledged or given-up slots at the front, and the fixed-timer deadlines at the front
    /// whose packets are gone (so that `poll_timeout` names live work).
    fn trim(&mut self) {
        while let Some(None) = self.buf.front() {
            self.buf.pop_front();
            self.items.pop_front();
            self.base = self.base.next();
        }
        if self.buf.is_empty() {
            self.base = self.next_seq;
        }
        for retransmissions in [false, true] {
            loop {
                let q = if retransmissions { &self.retx_timers } else { &self.timers };
                let Some(&(_, seq)) = q.front() else { break };
                if self.index(seq).is_some_and(|i| self.buf[i].is_some()) {
                    break;
                }
                if retransmissions {
                    self.retx_timers.pop_front();
                } else {
                    self.timers.pop_front();
                }
            }
        }
    }

    fn index(&self, seq: Seq16) -> Option<usize> {
        let off = seq.diff(self.base);
        (off >= 0 && (off as usize) < self.buf.len()).then_some(off as usize)
    }

    /// Takes the entry at `i` out; its copy is dropped now only if dropping it does anything.
    fn take_at(&mut self, i: usize) -> Option<Entry> {
        let e = self.buf[i].take()?;
        if std::mem::needs_drop::<T>() {
            self.items[i] = None;
        }
        Some(e)
    }

    /// Gives up the packet at `i`.
    fn give_up_at(&mut self, i: usize, reason: GiveUpReason) {
        if let Some(e) = self.take_at(i) {
            self.forget(&e);
            let seq = self.base.plus(i as u16);
            self.give_up_event(seq, reason);
        }
    }

    /// Reports the packet at `i` acknowledged and drops its copy.
    fn ack_at(&mut self, i: usize) {
        if let Some(e) = self.take_at(i) {
            self.forget(&e);
            self.stats.acked += 1;
            let seq = self.base.plus(i as u16);
            self.events.push_back(if e.retries == 0 {
                LgEvent::Delivered { seq }
            } else {
                LgEvent::Recovered { seq, retries: e.retries }
            });
        }
    }

    /// Starts a retransmission round for the packet at `i`, or gives it up past `max_retries`.
    /// Retransmissions go on the priority queue (`Outgoing::priority`), so they leave at `now`.
    fn retransmit_at(&mut self, now: Instant, i: usize) {
        let seq = self.base.plus(i as u16);
        let Some(e) = self.buf[i].as_mut() else { return };
        if e.retries >= self.cfg.max_retries {
            self.give_up_at(i, GiveUpReason::RetriesExhausted);
            return;
        }
        e.retries += 1;
        e.last_tx = now;
        self.stats.retx_rounds += 1;
        // LinkGuardian sends every retransmission twice (`retx_copies`) on the priority queue.
        for copy in 0..self.cfg.retx_copies {
            self.retx.push_back((seq, copy));
        }
        if let Some(t) = self.cfg.fixed_timeout {
            self.retx_timers.push_back((now + t, seq));
        }
    }

    /// Handles receiver feedback.
    pub fn on_ack(&mut self, now: Instant, ack: &LgAck) {
        self.settle(now);
        let acked = ack.leading_ack.diff(self.base) + 1;
        if acked > self.buf.len() as i32 {
            // Acknowledges what was never sent (stale ACK from before a link change, or garbage).
            self.stats.bad_acks += 1;
            return;
        }
        for i in 0..acked.max(0) as usize {
            self.ack_at(i);
        }
        // Shared links: the per-packet acknowledgement (module docs, "Loss detection").
        if let Some(i) = ack.received.and_then(|s| self.index(s)) {
            self.ack_at(i);
        }
        self.trim();
        // Feedback arrived: the dummy-train budget refills (module docs, "Dummy rule").
        self.trains_left = self.cfg.max_dummy_trains;
        if let Some((first, n)) = ack.loss {
            self.on_notification(now, first, n);
        }
        self.trim();
    }

    fn on_notification(&mut self, now: Instant, first: Seq16, n: u16) {
        self.stats.notifications += 1;
        if self.cfg.fixed_timeout.is_some() {
            // SATGUARD §3.3: on shared links gaps in feedback are not losses; the fixed timer decides.
            self.stats.notifications_ignored += 1;
            return;
        }
        let mut acted = false;
        for k in 0..n {
            let Some(i) = self.index(first.plus(k)) else { continue };
            let Some(e) = self.buf[i].as_ref() else { continue };
            // Guard: within one link RTT of the last retransmission the notification cannot reflect it.
            if e.retries > 0 && now.saturating_duration_since(e.last_tx) < self.cfg.link_rtt {
                continue;
            }
            self.retransmit_at(now, i);
            acted = true;
        }
        if !acted {
            self.stats.notifications_ignored += 1;
        }
    }

    /// The host's egress queue for this link drained: sends a dummy train if copies are
    /// unacknowledged and the last train is at least one link RTT old (module docs, "Dummy rule").
    pub fn on_idle(&mut self, now: Instant) {
        self.settle(now);
        self.idle = true;
        self.maybe_train(now);
    }

    fn maybe_train(&mut self, now: Instant) {
        if self.cfg.fixed_timeout.is_some() || self.live == 0 || self.dummies_left > 0 {
            return;
        }
        if self.last_train.is_some_and(|t| now < t + self.cfg.link_rtt) {
            // One train per link RTT: `poll_timeout` brings the host back when the next one is due.
            return;
        }
        if self.trains_left == 0 {
            // Liveness fallback exhausted: nothing came back, stop holding these copies.
            for i in 0..self.buf.len() {
                self.give_up_at(i, GiveUpReason::NoFeedback);
            }
            self.retx.clear();
            self.trim();
            return;
        }
        self.trains_left -= 1;
        self.stats.trains += 1;
        self.dummies_left = self.cfg.dummies_per_train;
        self.last_train = Some(now);
    }

    /// Next retransmission copy or dummy to send, retransmissions first; `None` if none.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Outgoing<T>> {
        self.settle(now);
        while let Some((seq, copy)) = self.retx.pop_front() {
            let Some(i) = self.index(seq) else { continue };
            let Some(e) = self.buf[i].as_ref() else { continue };
            self.stats.retransmissions += 1;
            let out = Outgoing {
                seq,
                item: self.items[i].clone(),
                bytes: e.bytes,
                kind: OutKind::Retransmission { copy },
                priority: true,
            };
            if self.retx.is_empty() && self.idle {
                // A retransmission burst sent while idle is a tail: a train follows (when due).
                self.maybe_train(now);
            }
            return Some(out);
        }
        if self.dummies_left > 0 && self.live > 0 {
            self.dummies_left -= 1;
            self.stats.dummies += 1;
            return Some(Outgoing { seq: self.next_seq, item: None, bytes: 0, kind: OutKind::Dummy, priority: true });
        }
        self.dummies_left = 0;
        None
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: the fixed timer, or the next
    /// train while idle.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A queued packet's timer starts when it leaves (`settle` arms it on the next call).
        let queued = self.cfg.fixed_timeout.and_then(|d| self.queued.front().map(|&q| self.departure(q) + d));
        let fixed =
            [self.timers.front(), self.retx_timers.front()].into_iter().flatten().map(|&(t, _)| t).chain(queued).min();
        let train = match (self.idle, self.live > 0, self.last_train, self.cfg.fixed_timeout) {
            (true, true, Some(t), None) if self.dummies_left == 0 => Some(t + self.cfg.link_rtt),
            _ => None,
        };
        fixed.into_iter().chain(train).min()
    }

    /// Handles the fixed timer and the trains due while idle.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle(now);
        for retransmissions in [false, true] {
            loop {
                let q = if retransmissions { &mut self.retx_timers } else { &mut self.timers };
                let Some(&(t, seq)) = q.front() else { break };
                if t > now {
                    break;
                }
                q.pop_front();
                let Some(i) = self.index(seq) else { continue };
                let due = self.buf[i].as_ref().and_then(|e| self.cfg.fixed_timeout.map(|d| e.last_tx + d <= now));
                if due == Some(true) {
                    self.stats.timeouts += 1;
                    self.retransmit_at(now, i);
                }
            }
        }
        self.trim();
        if self.idle && self.dummies_left == 0 {
            self.maybe_train(now);
        }
    }

    /// No handover awareness (the baseline's weakness, SATGUARD §5): the link changed, the buffer is
    /// useless. Every copy is given up (`LinkChange`) and numbering restarts at 0 for the new
    /// receiver. Returns how many packets were discarded.
    pub fn on_link_change(&mut self) -> usize {
        let n = self.live;
        for i in 0..self.buf.len() {
            self.give_up_at(i, GiveUpReason::LinkChange);
        }
        self.buf.clear();
        self.items.clear();
        self.queued.clear();
        self.retx.clear();
        self.timers.clear();
        self.retx_timers.clear();
        self.next_seq = Seq16(0);
        self.base = Seq16(0);
        self.dummies_left = 0;
        self.trains_left = self.cfg.max_dummy_trains;
        self.last_train = None;
        n
    }

    /// Same as [`on_link_change`](Self::on_link_change).
    pub fn reset(&mut self) -> usize {
        self.on_link_change()
    }

    /// Next event (delivered, recovered, given up); the host should drain these.
    pub fn poll_event(&mut self) -> Option<LgEvent> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Bytes in the Tx buffer now (copies that left the interface and are unacknowledged).
    pub fn buffer_bytes(&self) -> u64 {
        self.buf_bytes
    }

    /// Packets held for retransmission now (including those still queued at the interface).
    pub fn in_flight(&self) -> usize {
        self.live
    }

    /// The sequence number the next data packet gets.
    pub fn next_seq(&self) -> Seq16 {
        self.next_seq
    }
}
