//! A LEOTP mid node (a satellite or ground station on the path; REFERENCE.md "LEOTP"). Per flow,
//! created on the flow's first packet:
//!
//! - Interests from downstream are answered from the cache when it holds the whole range, else
//!   forwarded upstream at once (no pending-Interest table, no Interest timers); with hop CC the
//!   forwarded Interest carries this node's own rate and clock.
//! - Data from upstream is cached (4096-byte blocks, LRU) and checked for holes by byte offset. On a
//!   hole a VPH for it goes downstream *before* the data, so nodes further down do not request it
//!   again; after the confirmation (10 ms, or N packets) the hole is re-requested once, from the
//!   cache first, else upstream; holes are purged after 200 ms. A VPH from upstream marks its range
//!   as recovered upstream: the holes it would have opened here, or that are waiting here, are not
//!   re-requested (counted in [`MidStats::rerequests_suppressed_by_vph`]).
//! - With hop CC the node is the responder downstream (a token bucket at the rate the downstream
//!   requester asks for, refilled every 1 ms) and the requester upstream (its [`HopCc`] rate capped
//!   by the backpressure term). Without it, packets go out at once and untouched.

use super::cache::BlockCache;
use super::cc::{HopCc, TokenBucket};
use super::config::{HoleConfirm, LeotpConfig, LeotpError};
use super::holes::{Arrival, Holes};
use super::{echo_ts, ms_stamp, pieces, pop_write, write_out, Face, FlowKey, Out, Pool, Transmit};
use leoguard_core::{Instant, KeyMap};
use leoguard_wire::leotp::{LeotpHeader, LeotpPacket, LeotpType, LEOTP_HEADER_LEN};
use std::collections::VecDeque;

/// Added to a cache answer's echo when hop CC is off: the requester's sample `now - ts` then wraps to
/// about 2^31 ms, beyond any hop RTT it accepts.
pub(crate) const NO_ECHO: u32 = 1 << 31;

/// A mid node's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MidStats {
    /// Interests forwarded upstream from downstream (keep-alives excluded).
    pub interests_forwarded: u64,
    /// Keep-alives this node sent upstream as a requester.
    pub keepalives_sent: u64,
    /// Data packets forwarded downstream (VPHs excluded).
    pub data_forwarded: u64,
    /// Data packets inserted into the cache.
    pub data_cached: u64,
    /// Ranges answered from the cache (downstream Interests and own re-requests).
    pub cache_hits: u64,
    /// Holes opened by Data or a VPH above the expected offset.
    pub holes_detected: u64,
    /// VPHs this node generated for its own holes.
    pub vph_sent: u64,
    /// VPHs from upstream passed on downstream.
    pub vph_forwarded: u64,
    /// Holes re-requested (once each).
    pub rerequests: u64,
    /// Interests those re-requests sent upstream (one per MSS piece not in the cache).
    pub rerequest_interests: u64,
    /// Holes this node did not open or re-request because a VPH from upstream covered them.
    pub rerequests_suppressed_by_vph: u64,
    /// Holes (or parts) filled by late Data before they were purged.
    pub holes_filled: u64,
    /// Holes purged after `hole_purge`.
    pub holes_purged: u64,
    /// Holes dropped because a flow had `max_holes` open.
    pub holes_dropped: u64,
    /// Data that resynchronised the expected offset (first packet, or a jump over the limit).
    pub resyncs: u64,
    /// Packets dropped because a flow's downstream queue was full.
    pub queue_drops: u64,
    /// Malformed packets dropped (unparsable, wrong face, negative rate, payload length mismatch).
    pub malformed_dropped: u64,
    /// Interests for more than one MSS dropped.
    pub out_of_range_dropped: u64,
    /// Flow sessions created.
    pub sessions_created: u64,
    /// Sessions evicted at `max_sessions`.
    pub sessions_evicted: u64,
}

/// One flow at this node.
#[derive(Debug)]
struct Session {
    flow: FlowKey,
    last_active: Instant,
    /// Requester toward upstream.
    cc: HopCc,
    /// Rate the downstream requester asked for, bit/s.
    down_rate: Option<u64>,
    /// The last downstream Interest's ts and arrival (for the responder's echo).
    last_ts: Option<(u32, Instant)>,
    bucket: TokenBucket,
    /// Data and VPHs waiting for the token bucket (hop CC only).
    queue: VecDeque<Out>,
    queue_bytes: u64,
    /// The producer's room from the last Data (stamped on cache answers).
    last_wnd: i16,
    holes: Holes,
}

/// A LEOTP mid node serving any number of flows.
#[derive(Debug)]
pub struct MidNode {
    cfg: LeotpConfig,
    sessions: Vec<Session>,
    index: KeyMap<usize>,
    cache: BlockCache,
    /// Packets that go out at once: Interests upstream, and unpaced Data without hop CC.
    ready: VecDeque<Out>,
    pool: Pool,
    /// Round-robin cursor over the paced queues.
    rr: usize,
    stats: MidStats,
}

impl MidNode {
    /// A mid node with no flows yet.
    pub fn new(cfg: LeotpConfig) -> Result<MidNode, LeotpError> {
        cfg.validate()?;
        Ok(MidNode {
            cache: BlockCache::new(if cfg.in_network_retx { cfg.cache_blocks } else { 1 }, cfg.carry_payload),
            cfg,
            sessions: Vec::new(),
            index: KeyMap::default(),
            ready: VecDeque::new(),
            pool: Pool::default(),
            rr: 0,
            stats: MidStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> MidStats {
        self.stats
    }

    /// Blocks in the cache.
    pub fn cache_blocks(&self) -> usize {
        self.cache.len()
    }

    /// Flows with state here.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Packets of `flow` waiting for its token bucket.
    pub fn queued(&self, flow: FlowKey) -> usize {
        self.index.get(&flow).map_or(0, |&i| self.sessions[i].queue.len())
    }

    /// The rate this node asks its upstream for on `flow`, bit/s (none for an unknown flow).
    pub fn upstream_rate_bps(&self, flow: FlowKey, now: Instant) -> Option<u64> {
        let s = &self.sessions[*self.index.get(&flow)?];
        Some(self.own_rate(s, now))
    }

    fn own_rate(&self, s: &Session, now: Instant) -> u64 {
        if self.cfg.hop_cc {
            s.cc.mid_rate_bps(&self.cfg, now, s.queue_bytes, s.down_rate.unwrap_or(self.cfg.max_rate_bps))
        } else {
            s.down_rate.unwrap_or(self.cfg.max_rate_bps)
        }
    }

    /// A UDP payload arriving on `face`: parsed, then as [`MidNode::handle_packet`]; unparsable
    /// bytes are dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, flow: FlowKey, face: Face, datagram: &[u8]) {
        match LeotpPacket::parse(datagram) {
            Ok(p) => self.handle_packet(now, flow, face, p.header, p.payload),
            Err(_) => self.stats.malformed_dropped += 1,
        }
    }

    /// A packet of `flow` arriving on `face`; `payload` is the Data's bytes (ignored, and may be
    /// empty, when `carry_payload` is off).
    pub fn handle_packet(&mut self, now: Instant, flow: FlowKey, face: Face, header: LeotpHeader, payload: &[u8]) {
        if header.validate().is_err() {
            self.stats.malformed_dropped += 1;
            return;
        }
        match (face, header.kind) {
            (Face::Downstream, LeotpType::Interest) => self.on_interest(now, flow, header),
            (Face::Upstream, LeotpType::Data) => {
                if self.cfg.carry_payload && payload.len() != header.payload_len() {
                    self.stats.malformed_dropped += 1;
                    return;
                }
                self.on_data(now, flow, header, payload);
            }
            _ => self.stats.malformed_dropped += 1,
        }
    }

    /// The session of `flow`, created if new (evicting the least recently active at the bound).
    fn session(&mut self, now: Instant, flow: FlowKey) -> usize {
        if let Some(&i) = self.index.get(&flow) {
            self.sessions[i].last_active = now;
            return i;
        }
        if self.sessions.len() >= self.cfg.max_sessions as usize {
            // Linear, but only when a new flow meets a full table.
            let victim = (0..self.sessions.len()).min_by_key(|&i| (self.sessions[i].last_active, i)).unwrap_or(0);
            let old = self.sessions.swap_remove(victim);
            self.index.remove(&old.flow);
            for o in old.queue {
                self.pool.put(o.payload);
            }
            if let Some(moved) = self.sessions.get(victim) {
                self.index.insert(moved.flow, victim);
            }
            self.stats.sessions_evicted += 1;
        }
        self.sessions.push(Session {
            flow,
            last_active: now,
            cc: HopCc::new(&self.cfg),
            down_rate: None,
            last_ts: None,
            bucket: TokenBucket::new(now, self.cfg.max_rate_bps, self.cfg.token_interval),
            queue: VecDeque::new(),
            queue_bytes: 0,
            last_wnd: 0,
            holes: Holes::default(),
        });
        self.stats.sessions_created += 1;
        let i = self.sessions.len() - 1;
        self.index.insert(flow, i);
        i
    }

    fn on_interest(&mut self, now: Instant, flow: FlowKey, header: LeotpHeader) {
        let Some(rate) = header.requested_rate_bps() else {
            self.stats.malformed_dropped += 1;
            return;
        };
        if header.range_len() > self.cfg.mss {
            self.stats.out_of_range_dropped += 1;
            return;
        }
        let i = self.session(now, flow);
        let s = &mut self.sessions[i];
        s.down_rate = Some(rate);
        s.bucket.set_rate(rate);
        s.last_ts = Some((header.ts_ms, now));
        if header.is_keepalive() {
            // With hop CC a keep-alive is for this hop only; end to end it goes on to the producer.
            if !self.cfg.hop_cc {
                self.push_ready(flow, Face::Upstream, header);
            }
            return;
        }
        if self.cfg.in_network_retx && self.cache.covers(flow, header.start, header.end) {
            self.stats.cache_hits += 1;
            self.serve_from_cache(now, i, header.start, header.end, header.ts_ms);
            return;
        }
        self.stats.interests_forwarded += 1;
        let up = if self.cfg.hop_cc {
            let rate = self.own_rate(&self.sessions[i], now);
            self.sessions[i].cc.last_interest = Some(now);
            LeotpHeader::interest(header.start, header.end, rate, ms_stamp(now))
        } else {
            header
        };
        self.push_ready(flow, Face::Upstream, up);
    }

    fn push_ready(&mut self, flow: FlowKey, face: Face, header: LeotpHeader) {
        let payload = self.pool.get();
        self.ready.push_back(Out { flow, face, header, payload });
    }

    /// Queues Data for `[start, end)` from the cache toward the consumer; `ts` is the echo for the
    /// requester (used with hop CC).
    fn serve_from_cache(&mut self, now: Instant, i: usize, start: u32, end: u32, ts: u32) {
        let s = &self.sessions[i];
        let mut payload = self.pool.get();
        self.cache.read(s.flow, start, end, &mut payload);
        // Without hop CC the consumer's controller runs end to end: a round trip to this node is no
        // sample of the path's (it would set the min RTT far below the path's and the congestion
        // signal would never clear). The answer carries this node's clock half a clock ahead, which
        // every requester drops as out of range (`cc::MAX_HOP_RTT_MS`). It is built from the clock,
        // not from the Interest's stamp: that may be a mid node's re-request, already marked, and
        // marking it twice would unmark it.
        let ts = if self.cfg.hop_cc { ts } else { ms_stamp(now).wrapping_add(NO_ECHO) };
        let header = LeotpHeader::data(start, end, s.last_wnd, ts);
        self.send_down(i, header, payload);
    }

    /// Sends toward the consumer: through the flow's token bucket with hop CC, at once without.
    fn send_down(&mut self, i: usize, header: LeotpHeader, payload: Vec<u8>) {
        let s = &mut self.sessions[i];
        let out = Out { flow: s.flow, face: Face::Downstream, header, payload };
        if !self.cfg.hop_cc {
            self.ready.push_back(out);
        } else if s.queue.len() >= self.cfg.queue_segments as usize {
            self.stats.queue_drops += 1;
            self.pool.put(out.payload);
        } else {
            s.queue_bytes += (LEOTP_HEADER_LEN + header.payload_len()) as u64;
            s.queue.push_back(out);
        }
    }

    fn on_data(&mut self, now: Instant, flow: FlowKey, header: LeotpHeader, payload: &[u8]) {
        let i = self.session(now, flow);
        let cfg = self.cfg;
        let s = &mut self.sessions[i];
        if cfg.hop_cc {
            s.cc.on_data(&cfg, now, header.ts_ms, LEOTP_HEADER_LEN + header.payload_len(), header.payload_len());
        }
        s.last_wnd = header.wnd;
        let jump = u64::from(cfg.resync_jump_mss) * u64::from(cfg.mss);
        if header.is_vph() {
            if cfg.in_network_retx {
                let (arrival, dropped) = s.holes.on_data(now, header.start, header.end, jump, cfg.max_holes);
                self.stats.holes_dropped += u64::from(dropped);
                match arrival {
                    Arrival::InOrder => self.stats.rerequests_suppressed_by_vph += 1,
                    Arrival::Hole { start, end } => {
                        // The gap before the VPH's range was lost on this hop: a hole of ours.
                        self.stats.rerequests_suppressed_by_vph += 1;
                        self.open_hole(i, start, end, header);
                    }
                    Arrival::Late => {
                        let hit = self.sessions[i].holes.close(header.start, header.end);
                        self.stats.rerequests_suppressed_by_vph += u64::from(hit);
                    }
                    Arrival::Resync => self.stats.resyncs += 1,
                }
            }
            self.stats.vph_forwarded += 1;
            let p = self.pool.get();
            self.send_down(i, header, p);
            return;
        }
        if cfg.in_network_retx {
            self.cache.insert(flow, header.start, header.len, payload);
            self.stats.data_cached += 1;
            let s = &mut self.sessions[i];
            s.holes.count_packet();
            let (arrival, dropped) = s.holes.on_data(now, header.start, header.end, jump, cfg.max_holes);
            self.stats.holes_dropped += u64::from(dropped);
            match arrival {
                Arrival::Hole { start, end } => self.open_hole(i, start, end, header),
                Arrival::Late => {
                    let filled = self.sessions[i].holes.close(header.start, header.end);
                    self.stats.holes_filled += u64::from(filled > 0);
                }
                Arrival::Resync => self.stats.resyncs += 1,
                Arrival::InOrder => {}
            }
        }
        self.stats.data_forwarded += 1;
        let mut p = self.pool.get();
        if cfg.carry_payload {
            p.extend_from_slice(payload);
        }
        self.send_down(i, header, p);
        if let HoleConfirm::Packets(n) = cfg.hole_confirm {
            self.rerequest_due(i, now, |h| h.packets >= n);
        }
    }

    /// A new hole `[start, end)`: its VPH goes downstream ahead of the data that revealed it.
    fn open_hole(&mut self, i: usize, start: u32, end: u32, cause: LeotpHeader) {
        self.stats.holes_detected += 1;
        self.stats.vph_sent += 1;
        let p = self.pool.get();
        self.send_down(i, LeotpHeader::vph(start, end, cause.wnd, cause.ts_ms), p);
    }

    /// Re-requests every hole of session `i` not yet re-requested for which `due` holds.
    fn rerequest_due(&mut self, i: usize, now: Instant, due: impl Fn(&super::holes::Hole) -> bool) {
        let mut k = 0;
        while k < self.sessions[i].holes.holes.len() {
            let h = self.sessions[i].holes.holes[k];
            if !h.rerequested && due(&h) {
                self.sessions[i].holes.holes[k].rerequested = true;
                self.rerequest(i, now, h.start, h.end);
            }
            k += 1;
        }
    }

    /// One re-request of `[start, end)`: each MSS piece from the cache if it is there, else upstream.
    fn rerequest(&mut self, i: usize, now: Instant, start: u32, end: u32) {
        self.stats.rerequests += 1;
        let flow = self.sessions[i].flow;
        let rate = self.own_rate(&self.sessions[i], now);
        // With hop CC the answer comes back here and its echo is a sample of this hop. Without, it
        // goes on to the consumer as it comes, and an echo of this node's stamp would hand the
        // consumer's end-to-end controller the round trip from here only (as a cache answer would:
        // `serve_from_cache`), so the stamp is marked to be dropped by every requester.
        let stamp = ms_stamp(now);
        let ts = if self.cfg.hop_cc { stamp } else { stamp.wrapping_add(NO_ECHO) };
        for (a, b) in pieces(start, end, self.cfg.mss) {
            if self.cache.covers(flow, a, b) {
                self.stats.cache_hits += 1;
                let echo = self.sessions[i].last_ts.map_or(stamp, |(t, at)| echo_ts(t, at, now));
                self.serve_from_cache(now, i, a, b, echo);
            } else {
                self.stats.rerequest_interests += 1;
                self.sessions[i].cc.last_interest = Some(now);
                self.push_ready(flow, Face::Upstream, LeotpHeader::interest(a, b, rate, ts));
            }
        }
    }

    /// When [`MidNode::on_timer`] has work: a hole's confirmation or purge, a keep-alive, or a token
    /// refill for a waiting queue. O(flows). It may lie in the past (a refill not yet applied, a
    /// keep-alive that became due when a new RTT sample shortened the interval): the work is due now.
    /// Packets that can leave at once are not timers: drain [`MidNode::poll_transmit`] after every
    /// call.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let cfg = &self.cfg;
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for s in &self.sessions {
            if let Some(h) = s.holes.holes.front() {
                at(h.seen + cfg.hole_purge);
            }
            if let HoleConfirm::Time(wait) = cfg.hole_confirm {
                if let Some(h) = s.holes.holes.iter().find(|h| !h.rerequested) {
                    at(h.seen + wait);
                }
            }
            if cfg.hop_cc {
                if let Some(k) = s.cc.keepalive_at(cfg) {
                    if k < s.last_active + cfg.keepalive_idle {
                        at(k);
                    }
                }
                if !s.queue.is_empty() {
                    at(s.bucket.next_refill());
                }
            }
        }
        t
    }

    /// Runs what is due at `now`: hole re-requests (time confirmation), purges, keep-alives.
    pub fn on_timer(&mut self, now: Instant) {
        let cfg = self.cfg;
        for i in 0..self.sessions.len() {
            let purged = self.sessions[i].holes.purge(now, cfg.hole_purge);
            self.stats.holes_purged += purged;
            if let HoleConfirm::Time(wait) = cfg.hole_confirm {
                self.rerequest_due(i, now, |h| h.seen + wait <= now);
            }
            let s = &self.sessions[i];
            if cfg.hop_cc {
                if let Some(k) = s.cc.keepalive_at(&cfg) {
                    if k <= now && k < s.last_active + cfg.keepalive_idle {
                        let rate = self.own_rate(s, now);
                        let at = s.holes.next().unwrap_or(0);
                        let flow = s.flow;
                        self.sessions[i].cc.last_interest = Some(now);
                        self.stats.keepalives_sent += 1;
                        self.push_ready(flow, Face::Upstream, LeotpHeader::keepalive(at, rate, ms_stamp(now)));
                    }
                }
            }
        }
    }

    /// The next packet to send at `now`, written into `buf` (see [`Transmit`]).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(t) = pop_write(&mut self.ready, buf, &mut self.pool) {
            return Some(t);
        }
        let n = self.sessions.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            let s = &mut self.sessions[i];
            if s.queue.is_empty() {
                continue;
            }
            s.bucket.refill(now);
            if !s.bucket.ready() {
                continue;
            }
            let Some(mut out) = s.queue.pop_front() else { continue };
            let wire = LEOTP_HEADER_LEN + out.header.payload_len();
            s.queue_bytes -= wire as u64;
            s.bucket.spend(wire);
            if let Some((ts, at)) = s.last_ts {
                out.header.ts_ms = echo_ts(ts, at, now);
            }
            self.rr = i + 1;
            let t = write_out(&out, buf);
            self.pool.put(out.payload);
            return Some(t);
        }
        None
    }
}
