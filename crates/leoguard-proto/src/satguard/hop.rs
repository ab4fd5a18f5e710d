//! SATGUARD's link-local retransmission (LL-ReTx, §3.1 and §3.5) for one link: the upstream
//! [`HopSender`] stamps each packet with the next HSeq and keeps a copy in a bounded Tx buffer; the
//! downstream [`HopReceiver`] answers every packet with a cumulative HAck, the biggest interval of the
//! most recently received consecutive HSeqs (§3.5), so a lost HAck is covered by the next one.
//!
//! Loss detection, both switchable per link:
//! - *gap detection* (one-to-one links: ISLs, feeder links): the link is FIFO, so a pending packet
//!   older than the start of a HAck's interval was lost;
//! - *timers* grouped by beam (§3.3, one-to-many user links): a packet not acknowledged within its
//!   beam's timeout thd = 2·d(cell centre, satellite)/c is lost; one-to-one links use one timer (beam 0)
//!   as the tail-loss backstop that gap detection cannot give.
//!
//! A lost packet is retransmitted from the buffer with a NEW HSeq (§3.5), so a lost retransmission is
//! detected like any other loss; after `max_retries`, or once `retry_budget` has passed since its
//! first transmission on the hop, the packet is reported lost. The receiver drops
//! duplicates of retransmitted packets (a spurious retransmission after a lost HAck) by a bounded set of
//! recently seen packet keys (flow and FSeq), so the hop delivers every packet at most once.
//!
//! The sender is generic over the host's packet handle `T` (the simulator stores a small struct, the
//! emulator the bytes).

use leoguard_core::{Duration, Instant, RecentKeys, Seq16};
use std::collections::VecDeque;

/// Longest run a HAck reports, HSeqs (well inside the sender's 2^14 acceptance window).
const RUN_CAP: u16 = 0x2000;

/// Configuration of one hop's sender.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopConfig {
    /// Tx buffer capacity, bytes (the oldest pending packets are evicted beyond it).
    pub buffer_bytes: u64,
    /// Retransmissions of one packet before it is reported lost.
    pub max_retries: u8,
    /// How long after its first transmission on this hop a packet is still worth resending: a loss
    /// found later gives the packet up whatever `max_retries` says (none: the count alone bounds it).
    /// A time bound, not a count, is what matches bursty links: the number of tries a loss burst
    /// needs varies, the time the packet's exit waits for it does not.
    pub retry_budget: Option<Duration>,
    /// Detect losses from HAck discontinuity (only sound on one-to-one, FIFO links).
    pub detect_gaps: bool,
    /// Timeout of beam 0 (one-to-one links: the tail-loss backstop; shared links without beam
    /// classification: the one fixed timer).
    pub default_timeout: Duration,
}

impl Default for HopConfig {
    fn default() -> Self {
        HopConfig {
            buffer_bytes: 4_000_000,
            max_retries: 3,
            retry_budget: None,
            detect_gaps: true,
            default_timeout: Duration::from_millis(20),
        }
    }
}

/// A configuration that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HopError {
    /// A field is out of range.
    #[error("invalid satguard.{field} = {value}: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// The value.
        value: String,
        /// The rule.
        reason: &'static str,
    },
}

impl HopConfig {
    /// Checks the fields.
    pub fn validate(&self) -> Result<(), HopError> {
        if self.buffer_bytes == 0 {
            return Err(HopError::Invalid { field: "buffer_bytes", value: "0".into(), reason: "must be > 0" });
        }
        if self.retry_budget == Some(Duration::ZERO) {
            return Err(HopError::Invalid { field: "retry_budget", value: "0".into(), reason: "must be > 0" });
        }
        if self.default_timeout == Duration::ZERO {
            return Err(HopError::Invalid { field: "timeout", value: "0".into(), reason: "must be > 0" });
        }
        Ok(())
    }
}

/// A HAck: the most recent run of consecutive HSeqs the downstream node received, and the beam tag
/// of the receiver (0 on one-to-one links).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HAck {
    /// First HSeq of the run.
    pub start: Seq16,
    /// Last HSeq of the run.
    pub end: Seq16,
    /// Beam of the receiver (§3.3).
    pub beam: u16,
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopSenderStats {
    /// Packets stamped (first transmissions).
    pub sent: u64,
    /// Retransmissions handed out.
    pub retransmissions: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Losses found by HAck discontinuity.
    pub gap_losses: u64,
    /// Losses found by a timer expiry.
    pub timer_losses: u64,
    /// Packets reported lost after `max_retries`.
    pub given_up: u64,
    /// Pending packets evicted because the buffer was full.
    pub evicted: u64,
    /// Pending packets taken out by [`HopSender::take_pending`] (link change, migration).
    pub taken: u64,
    /// HAcks received.
    pub hacks: u64,
    /// HAcks ignored because their interval lies outside the sent window.
    pub hacks_out_of_window: u64,
    /// Largest buffer occupancy, bytes.
    pub max_buffer_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Done,
}

/// What the sender knows of one buffered packet besides the packet itself (16 bytes: a HAck reads
/// and marks these only, and the next entries' states it checks share its cache line).
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// When the packet was first sent on this hop.
    first: Instant,
    bytes: u32,
    beam: u16,
    retries: u8,
    state: State,
}

#[derive(Debug, Default)]
struct Beam {
    id: u16,
    timeout: Duration,
    /// (deadline, hseq) in send order.
    queue: VecDeque<(Instant, Seq16)>,
}

/// A packet the sender wants (re)transmitted, with the HSeq to stamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retransmit<T> {
    /// The packet.
    pub item: T,
    /// Its new HSeq.
    pub hseq: Seq16,
    /// How many times it has now been retransmitted.
    pub retries: u8,
    /// Its beam.
    pub beam: u16,
}

/// The upstream side of one link.
#[derive(Debug)]
pub struct HopSender<T> {
    cfg: HopConfig,
    next: Seq16,
    /// Entries in HSeq order; `buf[i]` has HSeq `front + i`.
    buf: VecDeque<Entry>,
    /// The packets of `buf`, index for index: `Some` while pending. Apart from the entries so that a
    /// HAck, which needs no packet, touches none (a packet type that needs no drop is left in place
    /// when acknowledged, until its entry leaves the front).
    items: VecDeque<Option<T>>,
    front: Seq16,
    bytes: u64,
    /// Entries before this HSeq have been checked for gaps.
    gap_cursor: Seq16,
    /// The last HAck's interval: a HAck of the same run only needs its new part acknowledged, which
    /// keeps the work per HAck constant however long the run grows.
    last_hack: Option<(Seq16, Seq16)>,
    beams: Vec<Beam>,
    retx: VecDeque<Seq16>,
    lost: Vec<T>,
    /// Counters.
    pub stats: HopSenderStats,
}

impl<T> HopSender<T> {
    /// A sender with a validated configuration.
    pub fn new(cfg: HopConfig) -> Result<Self, HopError> {
        cfg.validate()?;
        Ok(HopSender {
            cfg,
            next: Seq16(0),
            buf: VecDeque::new(),
            items: VecDeque::new(),
            front: Seq16(0),
            bytes: 0,
            gap_cursor: Seq16(0),
            last_hack: None,
            beams: vec![Beam { id: 0, timeout: cfg.default_timeout, queue: VecDeque::new() }],
            retx: VecDeque::new(),
            lost: Vec::new(),
            stats: HopSenderStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HopConfig {
        &self.cfg
    }

    /// Bytes buffered (pending or not yet released from the front).
    pub fn buffered_bytes(&self) -> u64 {
        self.bytes
    }

    /// Pending (unacknowledged, not given up) packets.
    pub fn pending(&self) -> usize {
        self.buf.iter().filter(|e| e.state == State::Pending).count()
    }

    /// Sets the loss timeout of `beam` for packets sent from now on (§3.3: thd is recomputed as the
    /// satellite moves).
    pub fn set_beam_timeout(&mut self, beam: u16, timeout: Duration) {
        let timeout = timeout.max(Duration::from_nanos(1));
        match self.beams.iter_mut().find(|b| b.id == beam) {
            Some(b) => b.timeout = timeout,
            None => self.beams.push(Beam { id: beam, timeout, queue: VecDeque::new() }),
        }
    }

    fn beam_index(&mut self, beam: u16) -> usize {
        if let Some(i) = self.beams.iter().position(|b| b.id == beam) {
            return i;
        }
        // A beam seen for the first time starts with the default timeout.
        self.beams.push(Beam { id: beam, timeout: self.cfg.default_timeout, queue: VecDeque::new() });
        self.beams.len() - 1
    }

    fn push(&mut self, now: Instant, first: Instant, item: T, bytes: u32, retries: u8, beam: u16) -> Seq16 {
        let h = self.next;
        self.next = h.next();
        if self.buf.is_empty() {
            self.front = h;
            if self.gap_cursor.before(h) {
                self.gap_cursor = h;
            }
        }
        self.buf.push_back(Entry { first, bytes, beam, retries, state: State::Pending });
        self.items.push_back(Some(item));
        self.bytes += u64::from(bytes);
        let bi = self.beam_index(beam);
        let deadline = now + self.beams[bi].timeout;
        self.beams[bi].queue.push_back((deadline, h));
        while self.bytes > self.cfg.buffer_bytes {
            // Full: the oldest pending packet can no longer be recovered here.
            let Some(i) = self.buf.iter().position(|e| e.state == State::Pending) else { break };
            let e = &mut self.buf[i];
            e.state = State::Done;
            self.bytes -= u64::from(e.bytes);
            self.items[i] = None;
            self.stats.evicted += 1;
        }
        self.stats.max_buffer_bytes = self.stats.max_buffer_bytes.max(self.bytes);
        self.tidy();
        h
    }

    /// A packet leaves on the link for the first time: returns the HSeq to stamp and buffers it.
    pub fn on_send(&mut self, now: Instant, item: T, bytes: u32, beam: u16) -> Seq16 {
        self.stats.sent += 1;
        self.push(now, now, item, bytes, 0, beam)
    }

    fn index(&self, h: Seq16) -> Option<usize> {
        let d = h.diff(self.front);
        (d >= 0 && (d as usize) < self.buf.len()).then_some(d as usize)
    }

    fn entry(&mut self, h: Seq16) -> Option<&mut Entry> {
        let i = self.index(h)?;
        self.buf.get_mut(i)
    }

    /// Marks pending packet `h` done and releases its bytes; its index, or `None` if it was not
    /// pending.
    fn settle(&mut self, h: Seq16) -> Option<usize> {
        let i = self.index(h)?;
        let e = &mut self.buf[i];
        if e.state != State::Pending {
            return None;
        }
        e.state = State::Done;
        self.bytes -= u64::from(e.bytes);
        Some(i)
    }

    /// Takes pending packet `h` out: the packet, its retries, first transmission and beam.
    fn done(&mut self, h: Seq16) -> Option<(T, u8, Instant, u16)> {
        let i = self.settle(h)?;
        let e = self.buf[i];
        self.items[i].take().map(|item| (item, e.retries, e.first, e.beam))
    }

    /// Pending packet `h` was acknowledged: true if it was pending.
    fn acked(&mut self, h: Seq16) -> bool {
        let Some(i) = self.settle(h) else { return false };
        if std::mem::needs_drop::<T>() {
            self.items[i] = None;
        }
        true
    }

    /// Ends every change of state: releases the done entries at the front, then drops the deadlines
    /// at the front of each beam's queue whose packets are no longer pending (acknowledged, resent
    /// under a new HSeq, evicted or given up), so that [`HopSender::poll_timeout`] names a deadline
    /// that can still declare a loss. Expiring such a deadline does nothing, and a host that woke
    /// for each would wake once per packet sent.
    fn tidy(&mut self) {
        while self.buf.front().is_some_and(|e| e.state == State::Done) {
            self.buf.pop_front();
            self.items.pop_front();
            self.front = self.front.next();
        }
        for bi in 0..self.beams.len() {
            while let Some(&(_, h)) = self.beams[bi].queue.front() {
                let pending = self.index(h).is_some_and(|i| self.buf[i].state == State::Pending);
                if pending {
                    break;
                }
                self.beams[bi].queue.pop_front();
            }
        }
    }

    fn lose(&mut self, h: Seq16, now: Instant) {
        let (retries, first) = match self.entry(h) {
            Some(e) if e.state == State::Pending => (e.retries, e.first),
            _ => return,
        };
        let late = self.cfg.retry_budget.is_some_and(|b| now.saturating_duration_since(first) >= b);
        if retries >= self.cfg.max_retries || late {
            if let Some((item, _, _, _)) = self.done(h) {
                self.lost.push(item);
            }
            self.stats.given_up += 1;
        } else {
            self.retx.push_back(h);
        }
    }

    /// A HAck arrived: acknowledges its interval and, with gap detection, declares the pending
    /// packets before it lost.
    pub fn on_hack(&mut self, now: Instant, hack: &HAck) {
        self.stats.hacks += 1;
        let last = Seq16(self.next.0.wrapping_sub(1));
        let sent = !self.buf.is_empty() || self.stats.sent > 0;
        // The interval must lie within the last 2^14 HSeqs sent and not be reversed.
        let oldest = Seq16(last.0.wrapping_sub(0x4000));
        let inside = hack.start.within(oldest, last) && hack.end.within(oldest, last);
        if !sent || !inside || hack.start.after(hack.end) {
            self.stats.hacks_out_of_window += 1;
            return;
        }
        let mut from = if hack.start.before(self.front) { self.front } else { hack.start };
        if let Some((s, e)) = self.last_hack {
            // The part of this interval the last HAck covered is acknowledged already (the run
            // grew, or its start moved up with the receiver's cap).
            if hack.start.within(s, e) && !e.before(from) {
                from = e.next();
            }
        }
        if self.last_hack.is_none_or(|(s, e)| s != hack.start || hack.end.after(e)) {
            self.last_hack = Some((hack.start, hack.end));
        }
        let mut h = from;
        while !h.after(hack.end) {
            if self.acked(h) {
                self.stats.acked += 1;
            }
            h = h.next();
        }
        if self.cfg.detect_gaps {
            let mut g = if self.gap_cursor.before(self.front) { self.front } else { self.gap_cursor };
            while g.before(hack.start) {
                if self.entry(g).is_some_and(|e| e.state == State::Pending) {
                    self.stats.gap_losses += 1;
                    self.lose(g, now);
                }
                g = g.next();
            }
            if g.after(self.gap_cursor) {
                self.gap_cursor = g;
            }
        }
        self.tidy();
    }

    /// Fires the beam timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        for bi in 0..self.beams.len() {
            while let Some(&(deadline, h)) = self.beams[bi].queue.front() {
                if deadline > now {
                    break;
                }
                self.beams[bi].queue.pop_front();
                let pending = self.entry(h).is_some_and(|e| e.state == State::Pending);
                if pending && !self.retx.contains(&h) {
                    self.stats.timer_losses += 1;
                    self.lose(h, now);
                }
            }
        }
        self.tidy();
    }

    /// The earliest loss deadline of a pending packet (a packet acknowledged or resent before its
    /// deadline leaves none behind at the front of its beam's queue).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.beams.iter().filter_map(|b| b.queue.front().map(|x| x.0)).min()
    }

    /// The next retransmission, stamped with a new HSeq (and buffered under it), for a host that
    /// puts it on the wire at once: its loss timer starts at `now`.
    pub fn poll_retransmit(&mut self, now: Instant) -> Option<Retransmit<T>>
    where
        T: Clone,
    {
        self.poll_retransmit_leaving(|_| now)
    }

    /// The next retransmission, for a host whose retransmissions queue behind the data already
    /// waiting at the interface: `leaves(bytes)` says when its last bit leaves, where its loss timer
    /// starts, as a first transmission's does in [`HopSender::on_send`]. (Started when it enters the
    /// queue, the timer of a retransmission behind a deep queue expires before it is sent, and every
    /// expiry queues one more copy.)
    pub fn poll_retransmit_leaving(&mut self, leaves: impl FnOnce(u32) -> Instant) -> Option<Retransmit<T>>
    where
        T: Clone,
    {
        while let Some(h) = self.retx.pop_front() {
            let Some((item, retries, first, beam)) = self.done(h) else { continue };
            let copy = item.clone();
            // Re-buffering cannot evict it: done() released its bytes first.
            let bytes = self.entry(h).map_or(0, |e| e.bytes);
            let new = self.push(leaves(bytes), first, item, bytes, retries + 1, beam);
            self.stats.retransmissions += 1;
            return Some(Retransmit { item: copy, hseq: new, retries: retries + 1, beam });
        }
        None
    }

    /// A packet given up after `max_retries` (for the host's loss report).
    pub fn poll_lost(&mut self) -> Option<T> {
        self.lost.pop()
    }

    /// Takes every pending packet out of the buffer (the link went away: the host re-homes them on
    /// the new link or migrates them, SATGUARD §3.2), in HSeq order with their beams.
    pub fn take_pending(&mut self) -> Vec<(T, u16)> {
        let mut out = Vec::new();
        let mut h = self.front;
        for _ in 0..self.buf.len() {
            if let Some((item, _, _, beam)) = self.done(h) {
                out.push((item, beam));
                self.stats.taken += 1;
            }
            h = h.next();
        }
        self.retx.clear();
        for b in &mut self.beams {
            b.queue.clear();
        }
        self.tidy();
        out
    }

    /// Copies of the pending packets for `beam` (or all beams), in HSeq order, without removing them
    /// (ahead-of-handover migration, §3.2: the old satellite keeps serving until the handover).
    pub fn pending_copies(&self, beam: Option<u16>) -> Vec<T>
    where
        T: Clone,
    {
        self.buf
            .iter()
            .zip(&self.items)
            .filter(|(e, _)| e.state == State::Pending && beam.is_none_or(|b| b == e.beam))
            .filter_map(|(_, item)| item.clone())
            .collect()
    }
}

/// Counters of one receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopReceiverStats {
    /// Packets received.
    pub received: u64,
    /// Duplicates dropped (a retransmission of a packet already received).
    pub duplicates: u64,
    /// HAcks produced.
    pub hacks: u64,
}

/// The downstream side of one link.
#[derive(Debug)]
pub struct HopReceiver {
    run: Option<(Seq16, Seq16)>,
    beam: u16,
    seen: RecentKeys,
    /// Counters.
    pub stats: HopReceiverStats,
}

/// What the receiver says about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The HAck to send upstream.
    pub hack: HAck,
    /// The packet is a duplicate of one already received: drop it.
    pub duplicate: bool,
}

impl HopReceiver {
    /// A receiver in `beam` (0 on one-to-one links) remembering the last `window` packet keys for
    /// duplicate suppression.
    pub fn new(beam: u16, window: usize) -> Self {
        HopReceiver { run: None, beam, seen: RecentKeys::new(window), stats: HopReceiverStats::default() }
    }

    /// A packet with `hseq` arrived; `key` identifies it end to end (flow and FSeq) and
    /// `retransmission` says whether the upstream resent it.
    pub fn on_receive(&mut self, _now: Instant, hseq: Seq16, key: u64, retransmission: bool) -> Received {
        self.stats.received += 1;
        self.stats.hacks += 1;
        self.run = Some(match self.run {
            Some((s, e)) if hseq == e.next() => (s, hseq),
            Some((s, e)) if hseq.within(s, e) => (s, e),
            _ => (hseq, hseq),
        });
        let (mut start, end) = self.run.expect("set above");
        // The sender only accepts intervals within its last 2^14 HSeqs; a long loss-free run keeps
        // its recent part (everything older was acknowledged by earlier HAcks of the same run).
        if end.diff(start) > i32::from(RUN_CAP) {
            start = Seq16(end.0.wrapping_sub(RUN_CAP));
            self.run = Some((start, end));
        }
        let hack = HAck { start, end, beam: self.beam };
        // Only a retransmission can duplicate a packet: first copies are never checked, only
        // remembered (a key set bounded to the last `window` packets).
        let duplicate = retransmission && self.seen.contains(key);
        if duplicate {
            self.stats.duplicates += 1;
        } else {
            self.seen.insert(key);
        }
        Received { hack, duplicate }
    }
}

#[cfg(test)]
mod tests;
