//! The upstream side of a LinkGuardian link: sequence numbers, Tx buffer, retransmissions, dummies.

use super::{GiveUpReason, LgAck, LgConfig, LgConfigError, LgEvent, OutKind, Outgoing};
use leoguard_core::{Instant, Seq16};
use std::collections::VecDeque;

/// A copy kept for retransmission.
#[derive(Debug)]
struct Entry<T> {
    item: T,
    bytes: u32,
    retries: u8,
    last_tx: Instant,
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
    /// Copies by sequence number from `base`; `None` once given up.
    buf: VecDeque<Option<Entry<T>>>,
    buf_bytes: u64,
    live: usize,
    /// Queued retransmission copies (seq, copy index).
    retx: VecDeque<(Seq16, u8)>,
    /// Fixed-timer deadlines in transmission order (lazy deletion).
    timers: VecDeque<(Instant, Seq16)>,
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
            buf_bytes: 0,
            live: 0,
            retx: VecDeque::new(),
            timers: VecDeque::new(),
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

    /// Records a data packet the host is about to send; returns the sequence number to stamp on it.
    pub fn on_send(&mut self, now: Instant, item: T, bytes: u32) -> Seq16 {
        let seq = self.next_seq;
        self.next_seq = seq.next();
        self.stats.sent += 1;
        // A new burst: its own packets reveal earlier holes, pending dummies are pointless, and its
        // tail gets its own probe: the train budget bounds only the trains sent while nothing new is
        // sent (module docs, "Dummy rule"). Without the refill, a host that goes idle more than
        // `max_dummy_trains` times within the first RTT after a silence gives up everything.
        self.idle = false;
        self.dummies_left = 0;
        self.last_train = None;
        self.trains_left = self.cfg.max_dummy_trains;
        // Bounded Tx buffer (bytes and sequence span): the oldest copies make room.
        while self.live > 0 && self.buf_bytes + u64::from(bytes) > self.cfg.tx_buffer_bytes
            || self.buf.len() >= usize::from(self.cfg.max_window)
        {
            self.evict_front(GiveUpReason::BufferFull);
        }
        if self.buf.is_empty() {
            self.base = seq;
        }
        self.buf.push_back(Some(Entry { item, bytes, retries: 0, last_tx: now }));
        self.buf_bytes += u64::from(bytes);
        self.live += 1;
        self.stats.buffer_bytes_max = self.stats.buffer_bytes_max.max(self.buf_bytes);
        if let Some(t) = self.cfg.fixed_timeout {
            self.timers.push_back((now + t, seq));
        }
        seq
    }

    /// Drops the oldest slot (giving it up if still live).
    fn evict_front(&mut self, reason: GiveUpReason) {
        if let Some(slot) = self.buf.pop_front() {
            if let Some(e) = slot {
                self.forget(&e);
                self.give_up_event(self.base, reason);
            }
            self.base = self.base.next();
        }
        self.trim();
    }

    fn forget(&mut self, e: &Entry<T>) {
        self.buf_bytes -= u64::from(e.bytes);
        self.live -= 1;
    }

    fn give_up_event(&mut self, seq: Seq16, reason: GiveUpReason) {
        self.stats.given_up += 1;
        if reason == GiveUpReason::LinkChange {
            self.stats.discarded_on_link_change += 1;
        }
        self.events.push_back(LgEvent::GivenUp { seq, reason });
    }

    /// Pops given-up slots at the front.
    fn trim(&mut self) {
        while let Some(None) = self.buf.front() {
            self.buf.pop_front();
            self.base = self.base.next();
        }
        if self.buf.is_empty() {
            self.base = self.next_seq;
        }
    }

    fn index(&self, seq: Seq16) -> Option<usize> {
        let off = seq.diff(self.base);
        (off >= 0 && (off as usize) < self.buf.len()).then_some(off as usize)
    }

    /// Gives up the packet at `i`.
    fn give_up_at(&mut self, i: usize, reason: GiveUpReason) {
        if let Some(e) = self.buf[i].take() {
            self.forget(&e);
            let seq = self.base.plus(i as u16);
            self.give_up_event(seq, reason);
        }
    }

    /// Starts a retransmission round for the packet at `i`, or gives it up past `max_retries`.
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
            self.timers.push_back((now + t, seq));
        }
    }

    /// Handles receiver feedback.
    pub fn on_ack(&mut self, now: Instant, ack: &LgAck) {
        let acked = ack.leading_ack.diff(self.base) + 1;
        if acked > self.buf.len() as i32 {
            // Acknowledges what was never sent (stale ACK from before a link change, or garbage).
            self.stats.bad_acks += 1;
            return;
        }
        if acked > 0 {
            for _ in 0..acked {
                if let Some(Some(e)) = self.buf.pop_front() {
                    self.forget(&e);
                    self.stats.acked += 1;
                    self.events.push_back(if e.retries == 0 {
                        LgEvent::Delivered { seq: self.base }
                    } else {
                        LgEvent::Recovered { seq: self.base, retries: e.retries }
                    });
                }
                self.base = self.base.next();
            }
            self.trim();
        }
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

    /// The host's egress queue for this link drained: arms a dummy train if copies are unacknowledged.
    pub fn on_idle(&mut self, now: Instant) {
        self.idle = true;
        self.maybe_train(now);
    }

    fn maybe_train(&mut self, now: Instant) {
        if self.cfg.fixed_timeout.is_some() || self.live == 0 || self.dummies_left > 0 {
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
        self.dummies_left = self.cfg.dummies_per_train;
        self.last_train = Some(now);
    }

    /// Next retransmission copy or dummy to send, retransmissions first; `None` if none.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Outgoing<T>> {
        while let Some((seq, copy)) = self.retx.pop_front() {
            let Some(i) = self.index(seq) else { continue };
            let Some(e) = self.buf[i].as_ref() else { continue };
            self.stats.retransmissions += 1;
            let out = Outgoing {
                seq,
                item: Some(e.item.clone()),
                bytes: e.bytes,
                kind: OutKind::Retransmission { copy },
                priority: true,
            };
            if self.retx.is_empty() && self.idle {
                // A retransmission burst sent while idle is a tail: follow it with a train.
                self.dummies_left = 0;
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
    /// fallback train while idle.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let fixed = self.timers.front().map(|&(t, _)| t);
        let train = match (self.idle, self.live > 0, self.last_train, self.cfg.fixed_timeout) {
            (true, true, Some(t), None) if self.dummies_left == 0 => Some(t + self.cfg.link_rtt),
            _ => None,
        };
        fixed.into_iter().chain(train).min()
    }

    /// Handles the fixed timer and the fallback trains.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, seq)) = self.timers.front() {
            if t > now {
                break;
            }
            self.timers.pop_front();
            let Some(i) = self.index(seq) else { continue };
            let due = self.buf[i].as_ref().and_then(|e| self.cfg.fixed_timeout.map(|d| e.last_tx + d <= now));
            if due == Some(true) {
                self.stats.timeouts += 1;
                self.retransmit_at(now, i);
            }
        }
        self.trim();
        if let Some(last) = self.last_train {
            if self.idle && self.dummies_left == 0 && now >= last + self.cfg.link_rtt {
                self.last_train = None;
                self.maybe_train(now);
            }
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
        self.retx.clear();
        self.timers.clear();
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

    /// Bytes in the Tx buffer now.
    pub fn buffer_bytes(&self) -> u64 {
        self.buf_bytes
    }

    /// Packets held for retransmission now.
    pub fn in_flight(&self) -> usize {
        self.live
    }

    /// The sequence number the next data packet gets.
    pub fn next_seq(&self) -> Seq16 {
        self.next_seq
    }
}
