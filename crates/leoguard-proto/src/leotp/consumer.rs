//! A LEOTP consumer (REFERENCE.md "LEOTP"): requests `[0, total)` one MSS per Interest, paced every
//! 1 ms, reorders Data by byte offset and hands the bytes to the application in order, exactly once.
//! It is the only node with Interest timers (the slides' "consumer-driven retransmission", the last
//! resort behind in-network retransmission):
//!
//! - RTO per RFC 6298 as the authors' code has it: first sample srtt = rtt, rttvar = rtt/2, RTO =
//!   clamp(3 rtt, 20 ms, 60 s); then RTO = srtt + max(1 ms, 4 rttvar); 10 s before any sample;
//!   samples from first transmissions only (Karn).
//! - An Interest sent for the n-th time times out after RTO * (1.5^(n-1) + 1) and is sent again;
//!   each round of timeouts (those within one RTO of the round's first) scales srtt and RTO by 1.1,
//!   for fewer than 10 rounds in a row (a new RTT sample ends the row).
//! - Pacing: every 1 ms the budget grows by (producer's queue room) * dt / srtt + measured
//!   throughput * dt, at least 0.1 Mbit/s, and up to 10 Interests go out; at most 20 000 MSS are
//!   requested beyond what was delivered (the Interest buffer).
//! - As the requester of its hop it runs a [`HopCc`] and puts the rate in every Interest, with a
//!   keep-alive when no Interest went out for 0.9 hop SRTT.

use super::cc::HopCc;
use super::config::{LeotpConfig, LeotpError};
use super::{bytes_per_s, ms_stamp, scale, Face, FlowKey, Pool, Transmit};
use leoguard_core::{Duration, Instant};
use leoguard_wire::leotp::{LeotpHeader, LeotpPacket, LeotpType, LEOTP_HEADER_LEN};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The consumer's retransmission timer (RFC 6298 as REFERENCE.md gives it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rto {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
}

impl Rto {
    /// Before any sample: RTO = `initial_rto`.
    pub fn new(cfg: &LeotpConfig) -> Rto {
        Rto { srtt: None, rttvar: Duration::ZERO, rto: cfg.initial_rto }
    }

    /// The current RTO.
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// One RTT sample.
    pub fn on_sample(&mut self, cfg: &LeotpConfig, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = Duration(rtt.0 / 2);
                self.rto = Duration(rtt.0.saturating_mul(3)).clamp(cfg.min_rto, cfg.max_rto);
            }
            Some(s) => {
                // RFC 6298 §2.3: RTTVAR first, from the old SRTT.
                self.rttvar = Duration((3 * self.rttvar.0 + s.0.abs_diff(rtt.0)) / 4);
                let srtt = Duration((7 * s.0 + rtt.0) / 8);
                self.srtt = Some(srtt);
                self.rto = srtt + cfg.rto_var_floor.max(Duration(self.rttvar.0.saturating_mul(4)));
            }
        }
    }

    /// A round of timeouts: srtt and RTO grow by `timeout_scale` (1.1).
    pub fn on_timeout_round(&mut self, cfg: &LeotpConfig) {
        self.srtt = self.srtt.map(|s| scale(s, cfg.timeout_scale));
        self.rto = scale(self.rto, cfg.timeout_scale);
    }

    /// Timeout of an Interest on its `n`-th transmission: RTO * (1.5^(n-1) + 1).
    pub fn interest_timeout(&self, cfg: &LeotpConfig, n: u32) -> Duration {
        let n = n.clamp(1, 64) as i32;
        scale(self.rto, cfg.timeout_backoff.powi(n - 1) + 1.0)
    }
}

/// A consumer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConsumerStats {
    /// Interests sent for the first time.
    pub interests_sent: u64,
    /// Interests sent again after a timeout.
    pub retransmissions: u64,
    /// Rounds of timeouts (a round: the timeouts within one RTO of its first).
    pub timeout_rounds: u64,
    /// Keep-alives sent.
    pub keepalives_sent: u64,
    /// Data packets accepted (new bytes).
    pub data_received: u64,
    /// Data for bytes already received or delivered, dropped.
    pub duplicates_dropped: u64,
    /// VPHs received: a mid node lost these ranges and recovers them (their Data then gives no RTT
    /// sample).
    pub vph_received: u64,
    /// Data of first transmissions that a VPH had reported lost: recovered in the network, so not
    /// taken as RTT samples (Karn's rule: the delay includes the recovery).
    pub recovered_in_network: u64,
    /// Bytes delivered in order.
    pub delivered_bytes: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// Malformed packets dropped (unparsable, an Interest, payload length mismatch).
    pub malformed_dropped: u64,
    /// Data for ranges never requested or not matching a segment, dropped.
    pub out_of_range_dropped: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Requested { sent_at: Instant, tx: u32 },
    Received,
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    /// A VPH reported it lost upstream: what arrives is a mid node's retransmission.
    reported_lost: bool,
    payload: Vec<u8>,
}

/// A LEOTP consumer of one flow.
#[derive(Debug)]
pub struct Consumer {
    cfg: LeotpConfig,
    flow: FlowKey,
    total: u32,
    /// First byte not yet delivered (a segment boundary).
    base: u32,
    /// First byte never requested.
    next_req: u32,
    /// Slot k is the segment at `base + k * mss`.
    slots: VecDeque<Slot>,
    /// (deadline, segment start, transmission number); stale entries are skipped when popped.
    timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    rto: Rto,
    timeout_rounds_in_row: u32,
    /// When the current round of timeouts began.
    round_started: Option<Instant>,
    cc: HopCc,
    budget: f64,
    next_tick: Instant,
    /// The producer's spare queue room, MSS (from Data's wnd).
    room: f64,
    thr: f64,
    thr_start: Instant,
    thr_bytes: u64,
    out: VecDeque<LeotpHeader>,
    /// Bytes delivered in order and not yet read.
    ready: Vec<u8>,
    pool: Pool,
    stats: ConsumerStats,
}

impl Consumer {
    /// A consumer of `flow` that starts requesting at `now`; `total` bytes, or `None` for as much
    /// as the 32-bit offsets allow (`u32::MAX` bytes).
    pub fn new(cfg: LeotpConfig, flow: FlowKey, total: Option<u64>, now: Instant) -> Result<Consumer, LeotpError> {
        cfg.validate()?;
        let total = match total {
            None => u32::MAX,
            Some(t) if t <= u64::from(u32::MAX) => t as u32,
            Some(t) => {
                return Err(LeotpError::Invalid {
                    field: "total",
                    value: t.to_string(),
                    reason: "must fit the header's 32-bit offsets",
                })
            }
        };
        Ok(Consumer {
            flow,
            total,
            base: 0,
            next_req: 0,
            slots: VecDeque::new(),
            timers: BinaryHeap::new(),
            rto: Rto::new(&cfg),
            timeout_rounds_in_row: 0,
            round_started: None,
            cc: HopCc::new(&cfg),
            budget: f64::from(cfg.interests_per_tick) * f64::from(cfg.mss),
            next_tick: now,
            room: 0.0,
            thr: 0.0,
            thr_start: now,
            thr_bytes: 0,
            out: VecDeque::new(),
            ready: Vec::new(),
            pool: Pool::default(),
            stats: ConsumerStats::default(),
            cfg,
        })
    }

    /// Counters.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// The RTO estimator.
    pub fn rto(&self) -> &Rto {
        &self.rto
    }

    /// The hop congestion controller.
    pub fn cc(&self) -> &HopCc {
        &self.cc
    }

    /// Bytes delivered in order so far.
    pub fn delivered(&self) -> u64 {
        u64::from(self.base)
    }

    /// Every byte of `[0, total)` delivered.
    pub fn is_complete(&self) -> bool {
        self.base >= self.total
    }

    /// Appends the bytes delivered since the last call to `out` (with `carry_payload`).
    pub fn read(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ready);
        self.ready.clear();
    }

    fn seg_end(&self, start: u32) -> u32 {
        (u64::from(start) + u64::from(self.cfg.mss)).min(u64::from(self.total)) as u32
    }

    /// A one-line summary of the reassembly and timer state (for test failure messages).
    #[cfg(test)]
    pub(crate) fn debug_state(&self) -> String {
        let head = self.slots.front().map(|s| s.state);
        format!(
            "base {} next_req {} slots {} head {:?} timers {} next timer {:?} rto {:?} srtt {:?} budget {:.0} room {} thr {:.0} cc rate {} rounds_in_row {}",
            self.base,
            self.next_req,
            self.slots.len(),
            head,
            self.timers.len(),
            self.timers.peek().map(|r| r.0),
            self.rto.rto(),
            self.rto.srtt(),
            self.budget,
            self.room,
            self.thr,
            self.cc.rate_bps(&self.cfg, self.next_tick),
            self.timeout_rounds_in_row,
        )
    }

    /// A UDP payload from upstream; unparsable bytes are dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        match LeotpPacket::parse(datagram) {
            Ok(p) => self.handle_packet(now, p.header, p.payload),
            Err(_) => self.stats.malformed_dropped += 1,
        }
    }

    /// A packet from upstream; `payload` is the Data's bytes (ignored when `carry_payload` is off).
    pub fn handle_packet(&mut self, now: Instant, header: LeotpHeader, payload: &[u8]) {
        if header.kind != LeotpType::Data
            || header.validate().is_err()
            || (self.cfg.carry_payload && payload.len() != header.payload_len())
        {
            self.stats.malformed_dropped += 1;
            return;
        }
        let len = header.payload_len();
        self.cc.on_data(&self.cfg, now, header.ts_ms, LEOTP_HEADER_LEN + len, len);
        if header.wnd >= 0 {
            self.room = f64::from(header.wnd);
        }
        if header.is_vph() {
            self.stats.vph_received += 1;
            self.mark_reported_lost(header.start, header.end);
            return;
        }
        let (s, e) = (header.start, header.end);
        if e <= self.base {
            self.stats.duplicates_dropped += 1;
            return;
        }
        if s < self.base || s >= self.next_req || (s - self.base) % self.cfg.mss != 0 || e != self.seg_end(s) {
            self.stats.out_of_range_dropped += 1;
            return;
        }
        let k = ((s - self.base) / self.cfg.mss) as usize;
        let mut first_sample = false;
        let Some(slot) = self.slots.get_mut(k) else {
            self.stats.out_of_range_dropped += 1;
            return;
        };
        match slot.state {
            SlotState::Received => {
                self.stats.duplicates_dropped += 1;
                return;
            }
            SlotState::Requested { sent_at, tx } => {
                if tx == 1 && slot.reported_lost {
                    self.stats.recovered_in_network += 1;
                } else if tx == 1 {
                    first_sample = self.rto.srtt().is_none();
                    self.rto.on_sample(&self.cfg, now.saturating_duration_since(sent_at));
                    self.stats.rtt_samples += 1;
                    self.timeout_rounds_in_row = 0;
                }
            }
        }
        slot.state = SlotState::Received;
        if self.cfg.carry_payload {
            slot.payload.extend_from_slice(payload);
        }
        self.stats.data_received += 1;
        self.measure(now, len as u64);
        while self.slots.front().is_some_and(|f| f.state == SlotState::Received) {
            let Some(slot) = self.slots.pop_front() else { break };
            self.ready.extend_from_slice(&slot.payload);
            self.pool.put(slot.payload);
            let end = self.seg_end(self.base);
            self.stats.delivered_bytes += u64::from(end - self.base);
            self.base = end;
        }
        if self.is_complete() {
            self.timers.clear();
        } else if first_sample {
            self.rearm_timers();
        }
    }

    /// The first RTT sample replaces the 10 s initial RTO: the Interests sent before it get their
    /// timeouts again from the new RTO, counted from when each was sent (RFC 6298 5.3 restarts the
    /// timer on new acknowledgements; here every Interest has its own). Without this, a range whose
    /// first Data was lost waited the initial RTO's 20 s although the path's round trip was known
    /// within a second. Entries of the old heap are dropped; each live Interest gets one.
    fn rearm_timers(&mut self) {
        let (cfg, rto, base, mss) = (&self.cfg, &self.rto, self.base, self.cfg.mss);
        self.timers = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(k, slot)| match slot.state {
                SlotState::Requested { sent_at, tx } => {
                    Some(Reverse((sent_at + rto.interest_timeout(cfg, tx), base + k as u32 * mss, tx)))
                }
                SlotState::Received => None,
            })
            .collect();
    }

    /// A VPH for `[start, end)`: the requested segments it covers were lost upstream and a mid node
    /// recovers them. The recovery is a retransmission the consumer did not send, so by Karn's rule
    /// their arrival is no RTT sample (it would count the recovery: in end-to-end mode srtt then
    /// grew without bound, the pacing that divides by it starved, and Table II's variant C
    /// collapsed). Their Interest timeouts stay armed, in case the recovery fails.
    fn mark_reported_lost(&mut self, start: u32, end: u32) {
        let mss = self.cfg.mss;
        let (s, e) = (start.max(self.base), end.min(self.next_req));
        if s >= e {
            return;
        }
        let first = ((s - self.base) / mss) as usize;
        let last = (e - self.base).div_ceil(mss) as usize;
        for slot in self.slots.range_mut(first..last.min(self.slots.len())) {
            slot.reported_lost = true;
        }
    }

    /// Delivery throughput over windows of at least one srtt.
    fn measure(&mut self, now: Instant, bytes: u64) {
        self.thr_bytes += bytes;
        let Some(srtt) = self.rto.srtt() else { return };
        let elapsed = now.saturating_duration_since(self.thr_start);
        if elapsed >= srtt.max(Duration::from_millis(1)) {
            self.thr = self.thr_bytes as f64 / elapsed.as_secs_f64();
            self.thr_start = now;
            self.thr_bytes = 0;
        }
    }

    fn can_request(&self) -> bool {
        self.next_req < self.total && self.slots.len() < self.cfg.interest_buffer_mss as usize
    }

    /// When [`Consumer::on_timer`] has work: the next pacing tick, Interest timeout or keep-alive.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_complete() {
            return None;
        }
        let mut t = self.timers.peek().map(|Reverse((d, _, _))| *d);
        let mut at = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        if self.can_request() {
            at(self.next_tick);
        }
        if let Some(k) = self.cc.keepalive_at(&self.cfg) {
            at(k);
        }
        t
    }

    /// Runs what is due at `now`: pacing, Interest timeouts, a keep-alive.
    pub fn on_timer(&mut self, now: Instant) {
        if self.is_complete() {
            return;
        }
        self.pace(now);
        self.timeouts(now);
        if self.cc.keepalive_at(&self.cfg).is_some_and(|k| k <= now) {
            let rate = self.cc.rate_bps(&self.cfg, now);
            self.out.push_back(LeotpHeader::keepalive(self.next_req, rate, ms_stamp(now)));
            self.cc.last_interest = Some(now);
            self.stats.keepalives_sent += 1;
        }
    }

    fn pace(&mut self, now: Instant) {
        let interval = self.cfg.pace_interval;
        if now < self.next_tick {
            return;
        }
        let ticks = now.saturating_duration_since(self.next_tick).as_nanos() / interval.as_nanos() + 1;
        self.next_tick = Instant(self.next_tick.as_nanos() + ticks * interval.as_nanos());
        let mss = f64::from(self.cfg.mss);
        let dt = interval.as_secs_f64() * ticks as f64;
        let grow = match self.rto.srtt() {
            Some(srtt) => self.room * mss / srtt.as_secs_f64().max(1e-3) + self.thr,
            None => 0.0,
        };
        let cap = f64::from(self.cfg.interests_per_tick) * mss;
        self.budget = (self.budget + grow.max(bytes_per_s(self.cfg.min_rate_bps)) * dt).min(cap);
        let rate = self.cc.rate_bps(&self.cfg, now);
        let mut sent = 0;
        while self.can_request() && sent < self.cfg.interests_per_tick && self.budget >= mss {
            let (s, e) = (self.next_req, self.seg_end(self.next_req));
            self.out.push_back(LeotpHeader::interest(s, e, rate, ms_stamp(now)));
            let payload = self.pool.get();
            self.slots.push_back(Slot {
                state: SlotState::Requested { sent_at: now, tx: 1 },
                reported_lost: false,
                payload,
            });
            self.timers.push(Reverse((now + self.rto.interest_timeout(&self.cfg, 1), s, 1)));
            self.next_req = e;
            self.budget -= mss;
            sent += 1;
            self.stats.interests_sent += 1;
            self.cc.last_interest = Some(now);
        }
    }

    fn timeouts(&mut self, now: Instant) {
        // Stale entries (received since, or superseded by a later transmission) go first, so the
        // round is counted only when a live Interest timed out.
        while let Some(&Reverse((deadline, s, tx))) = self.timers.peek() {
            if deadline > now || self.is_live(s, tx) {
                break;
            }
            self.timers.pop();
        }
        if self.timers.peek().is_none_or(|Reverse((d, _, _))| *d > now) {
            return;
        }
        // A round of timeouts is one RTO long: Interests that time out within an RTO of the round's
        // first belong to it (each lost Interest times out separately; scaling on every one would
        // compound 1.1 per loss and outrun the 1/8 pull of the samples). srtt and RTO scale before
        // the round's Interests get their new timeouts.
        if self.round_started.is_none_or(|t| now.saturating_duration_since(t) >= self.rto.rto()) {
            self.round_started = Some(now);
            self.stats.timeout_rounds += 1;
            if self.timeout_rounds_in_row < self.cfg.timeout_scale_rounds {
                self.rto.on_timeout_round(&self.cfg);
            }
            self.timeout_rounds_in_row += 1;
        }
        let rate = self.cc.rate_bps(&self.cfg, now);
        while let Some(&Reverse((deadline, s, tx))) = self.timers.peek() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            if !self.is_live(s, tx) {
                continue;
            }
            let k = ((s - self.base) / self.cfg.mss) as usize;
            let Some(slot) = self.slots.get_mut(k) else { continue };
            slot.state = SlotState::Requested { sent_at: now, tx: tx + 1 };
            let e = self.seg_end(s);
            self.out.push_back(LeotpHeader::interest(s, e, rate, ms_stamp(now)));
            self.timers.push(Reverse((now + self.rto.interest_timeout(&self.cfg, tx + 1), s, tx + 1)));
            self.stats.retransmissions += 1;
            self.cc.last_interest = Some(now);
        }
    }

    fn is_live(&self, s: u32, tx: u32) -> bool {
        s >= self.base
            && self
                .slots
                .get(((s - self.base) / self.cfg.mss) as usize)
                .is_some_and(|slot| matches!(slot.state, SlotState::Requested { tx: live, .. } if live == tx))
    }

    /// The next Interest to send, written into `buf`.
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let header = self.out.pop_front()?;
        // Interests built here always validate; a too-short buffer just gets no bytes.
        let _ = header.emit(buf);
        Some(Transmit { flow: self.flow, face: Face::Upstream, header, wire_len: LEOTP_HEADER_LEN })
    }
}
