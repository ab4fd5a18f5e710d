//! LEOTP mid nodes (ICDCS'23; REFERENCE.md "LEOTP") as a per-node hook, written once against the host
//! interface so the simulator and the emulator run the same code.
//!
//! Every node chosen as a mid node ([`MidPlacement`]: all nodes between the ends, satellites only, or
//! a seeded random fraction of them) runs one [`MidNode`] for all LEOTP flows through it. The hook
//! takes every LEOTP packet that arrives over a link and is not addressed to the node (the authors'
//! code intercepts flows transparently with TPROXY): Interests enter the mid node from downstream,
//! Data from upstream. What the mid node sends is routed by the node's ordinary table: Interests to
//! the flow's producer node, Data to its consumer node ([`LeotpFlows`], the engine's 4-tuple). So a
//! path change needs no signalling: the nodes of a new path create sessions on the first packet,
//! and what was stranded on the old one is recovered by the consumer's timeouts. With hop-by-hop
//! congestion control the mid node's token buckets pace what it sends downstream (the hook calls
//! `poll_transmit` again when a bucket refills); without it the mid node forwards at once.
//!
//! **Packets.** A LEOTP datagram is a [`Packet`] with [`FLAG_LEOTP`]; the 19-byte header travels in
//! the packet's fields ([`to_packet`] / [`header_of`], the one mapping both engines use; the emulator
//! writes the real header into the UDP payload instead): `seq` = range start, `ack` = range end in its
//! low 32 bits and the `ts` field in its high 32, `sack[0].0` = the `wnd` field (as u16), and the
//! flags say Data ([`FLAG_LEOTP_DATA`]) and VPH ([`FLAG_LEOTP_VPH`]; a Data's `len` is otherwise
//! `end - start`). `size` is the IPv4 + UDP datagram ([`UDP_IP_OVERHEAD`] + 19 + payload bytes).
//! Data's `sent_at` is when the producer sent the range; a mid node keeps it across its queue and
//! its cache ([`SentRing`]), so the consumer's one-way delay of a range recovered in the network
//! counts from the producer's send (the recovery time included).

use crate::host::{Agent, Ctx};
use crate::link::LinkId;
use crate::packet::Packet;
use leoguard_core::{Duration, Instant};
use leoguard_proto::leotp::{Face, LeotpConfig, LeotpError, LeotpHeader, LeotpType, MidNode, MidStats};
use std::sync::Arc;

/// Packet flag: a LEOTP datagram (clear of the TCP, web and WebRTC flags, which use bits 0-7).
pub const FLAG_LEOTP: u16 = 1 << 12;
/// Packet flag: LEOTP Data (else an Interest).
pub const FLAG_LEOTP_DATA: u16 = 1 << 13;
/// Packet flag: a LEOTP Void Packet Header (Data with `len` = 0).
pub const FLAG_LEOTP_VPH: u16 = 1 << 14;
/// Packet flag: Data sent again (a mid node's answer from its cache, or a producer's resend).
pub const FLAG_LEOTP_RETX: u16 = 1 << 11;
/// IPv4 (20) and UDP (8) header bytes around a LEOTP datagram (the authors' code runs over UDP).
pub const UDP_IP_OVERHEAD: u32 = 28;

/// The packet carrying a LEOTP datagram of `flow` to node `dst` (see the module docs).
pub fn to_packet(flow: u32, dst: u32, h: &LeotpHeader, sent_at: Instant) -> Packet {
    let mut flags = FLAG_LEOTP;
    if h.kind == LeotpType::Data {
        flags |= FLAG_LEOTP_DATA;
        if h.len == 0 {
            flags |= FLAG_LEOTP_VPH;
        }
    }
    let mut p = Packet {
        flow,
        dst,
        seq: u64::from(h.start),
        ack: u64::from(h.end) | u64::from(h.ts_ms) << 32,
        size: UDP_IP_OVERHEAD + leoguard_proto::leotp::LEOTP_HEADER_LEN as u32 + h.payload_len() as u32,
        sent_at,
        flags,
        ..Default::default()
    };
    p.sack[0].0 = u64::from(h.wnd as u16);
    p
}

/// The LEOTP header a packet carries (`None` for other traffic).
pub fn header_of(p: &Packet) -> Option<LeotpHeader> {
    if p.flags & FLAG_LEOTP == 0 {
        return None;
    }
    let (start, end, ts_ms) = (p.seq as u32, p.ack as u32, (p.ack >> 32) as u32);
    let wnd = p.sack[0].0 as u16 as i16;
    Some(if p.flags & FLAG_LEOTP_DATA == 0 {
        LeotpHeader { kind: LeotpType::Interest, wnd, ts_ms, len: 0, start, end }
    } else if p.flags & FLAG_LEOTP_VPH != 0 {
        LeotpHeader::vph(start, end, wnd, ts_ms)
    } else {
        LeotpHeader::data(start, end, wnd, ts_ms)
    })
}

/// The ends of every LEOTP flow, by flow id: what the real network's UDP 4-tuple tells a mid node.
#[derive(Clone, Debug, Default)]
pub struct LeotpFlows {
    ends: Vec<Option<FlowEnds>>,
}

/// Where a LEOTP flow's consumer and producer run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowEnds {
    /// The consumer's node (Data is routed to it).
    pub consumer: u32,
    /// The producer's node (Interests are routed to it).
    pub producer: u32,
}

impl LeotpFlows {
    /// Registers flow `flow`.
    pub fn insert(&mut self, flow: u32, ends: FlowEnds) {
        let f = flow as usize;
        if self.ends.len() <= f {
            self.ends.resize(f + 1, None);
        }
        self.ends[f] = Some(ends);
    }

    /// The ends of `flow`, if it is a LEOTP flow.
    pub fn get(&self, flow: u32) -> Option<FlowEnds> {
        self.ends.get(flow as usize).copied().flatten()
    }

    /// Every node that hosts a flow end.
    pub fn end_nodes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.ends.iter().flatten().flat_map(|e| [e.consumer, e.producer]).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Which nodes run a mid node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MidPlacement {
    /// Every node that is not a flow end (satellites and ground stations).
    All,
    /// Satellites only (ground stations forward without LEOTP).
    Satellites,
    /// Ground stations and a seeded random fraction of the satellites (the paper's 25 % option); on
    /// a topology without satellites, that fraction of all the nodes between the ends.
    Fraction(f64),
}

impl MidPlacement {
    /// Checks the fraction; the error names the field.
    pub fn validate(&self) -> Result<(), LeotpError> {
        match *self {
            MidPlacement::Fraction(f) if !(f.is_finite() && f > 0.0 && f <= 1.0) => Err(LeotpError::Invalid {
                field: "mid_nodes",
                value: f.to_string(),
                reason: "a fraction must be in (0, 1]",
            }),
            _ => Ok(()),
        }
    }
}

/// The mid nodes of a run: among `nodes` nodes, leaving out the flow ends, by `placement`;
/// `satellite(n)` says whether node n is a satellite (`None`: the topology has no such notion). The
/// fraction's draw uses the stream `leotp/mid-nodes` of `seed`.
pub fn mid_nodes(
    nodes: u32,
    ends: &[u32],
    satellite: Option<&dyn Fn(u32) -> bool>,
    placement: MidPlacement,
    seed: u64,
) -> Result<Vec<u32>, LeotpError> {
    placement.validate()?;
    let between: Vec<u32> = (0..nodes).filter(|n| !ends.contains(n)).collect();
    let is_sat = |n: u32| satellite.is_some_and(|f| f(n));
    let mut out = match placement {
        MidPlacement::All => between,
        MidPlacement::Satellites => {
            if satellite.is_none() {
                return Err(LeotpError::Invalid {
                    field: "mid_nodes",
                    value: "satellites".into(),
                    reason: "needs a leo-path or constellation topology (this one has no satellites)",
                });
            }
            between.into_iter().filter(|&n| is_sat(n)).collect()
        }
        MidPlacement::Fraction(f) => {
            let (mut pool, mut keep): (Vec<u32>, Vec<u32>) =
                if satellite.is_some() { between.iter().partition(|&&n| is_sat(n)) } else { (between, Vec::new()) };
            let k = ((pool.len() as f64) * f).round() as usize;
            let mut rng = leoguard_core::stream(seed, "leotp/mid-nodes");
            // Partial Fisher-Yates: the first k of a seeded shuffle.
            for i in 0..k.min(pool.len()) {
                let j = i + (rng.next_u64() % (pool.len() - i) as u64) as usize;
                pool.swap(i, j);
            }
            keep.extend_from_slice(&pool[..k.min(pool.len())]);
            keep
        }
    };
    out.sort_unstable();
    Ok(out)
}

crate::counters! {
    /// The LEOTP mid nodes' counters, summed over nodes (the fields of [`MidStats`]) and the number
    /// of mid nodes.
    pub struct LeotpMidTotals {
        /// Nodes running a mid node.
        nodes,
        /// Interests forwarded upstream (keep-alives excluded).
        interests_forwarded,
        /// Keep-alives sent upstream.
        keepalives_sent,
        /// Data forwarded downstream (VPHs excluded).
        data_forwarded,
        /// Data cached.
        data_cached,
        /// Ranges answered from a cache.
        cache_hits,
        /// Holes opened.
        holes_detected,
        /// VPHs generated.
        vph_sent,
        /// VPHs passed on.
        vph_forwarded,
        /// Holes re-requested.
        rerequests,
        /// Interests those re-requests sent upstream.
        rerequest_interests,
        /// Re-requests a VPH from upstream made unnecessary.
        rerequests_suppressed_by_vph,
        /// Holes filled by late Data.
        holes_filled,
        /// Holes purged.
        holes_purged,
        /// Holes dropped at `max_holes`.
        holes_dropped,
        /// Offset resynchronisations.
        resyncs,
        /// Packets dropped at a full per-flow queue.
        queue_drops,
        /// Malformed packets dropped.
        malformed_dropped,
        /// Interests for more than one MSS dropped.
        out_of_range_dropped,
        /// Sessions created.
        sessions_created,
        /// Sessions evicted.
        sessions_evicted,
        /// Data sent again downstream (cache answers and late Data below what was forwarded).
        data_resent,
        ;
        /// Largest per-flow queue seen at any mid node, packets.
        max_queue,
    }
}

impl LeotpMidTotals {
    fn from_stats(s: &MidStats) -> LeotpMidTotals {
        LeotpMidTotals {
            nodes: 1,
            interests_forwarded: s.interests_forwarded,
            keepalives_sent: s.keepalives_sent,
            data_forwarded: s.data_forwarded,
            data_cached: s.data_cached,
            cache_hits: s.cache_hits,
            holes_detected: s.holes_detected,
            vph_sent: s.vph_sent,
            vph_forwarded: s.vph_forwarded,
            rerequests: s.rerequests,
            rerequest_interests: s.rerequest_interests,
            rerequests_suppressed_by_vph: s.rerequests_suppressed_by_vph,
            holes_filled: s.holes_filled,
            holes_purged: s.holes_purged,
            holes_dropped: s.holes_dropped,
            resyncs: s.resyncs,
            queue_drops: s.queue_drops,
            malformed_dropped: s.malformed_dropped,
            out_of_range_dropped: s.out_of_range_dropped,
            sessions_created: s.sessions_created,
            sessions_evicted: s.sessions_evicted,
            data_resent: 0,
            max_queue: 0,
        }
    }
}

/// When the producer sent each MSS segment of a flow, as far back as a mid node's cache reaches: a
/// ring indexed by segment number (ranges are MSS-aligned: each ends at a multiple of the MSS).
#[derive(Clone, Debug)]
pub struct SentRing {
    mss: u32,
    slots: Vec<(u32, Instant)>,
}

impl SentRing {
    /// A ring of `segments` entries.
    pub fn new(mss: u32, segments: usize) -> SentRing {
        SentRing { mss: mss.max(1), slots: vec![(u32::MAX, Instant::ZERO); segments.max(1)] }
    }

    /// Remembers the first send time seen for the segment starting at `start`.
    pub fn note(&mut self, start: u32, at: Instant) {
        let k = start / self.mss;
        let n = self.slots.len();
        let slot = &mut self.slots[k as usize % n];
        if slot.0 != k {
            *slot = (k, at);
        }
    }

    /// The send time of the segment starting at `start`, if still known.
    pub fn get(&self, start: u32) -> Option<Instant> {
        let k = start / self.mss;
        let slot = self.slots[k as usize % self.slots.len()];
        (slot.0 == k).then_some(slot.1)
    }
}

/// One datagram a mid node sends ([`LeotpMid::drain`]).
#[derive(Clone, Copy, Debug)]
pub struct MidSend<'a> {
    /// The flow id.
    pub flow: u32,
    /// The face it leaves by (upstream: toward the producer).
    pub face: Face,
    /// Its header.
    pub header: LeotpHeader,
    /// The LEOTP datagram as written (header, and the payload when `carry_payload` is on).
    pub datagram: &'a [u8],
    /// When the producer sent the range (Data downstream, kept across the queue and the cache), or
    /// now (what the mid node makes itself: Interests, VPHs).
    pub sent_at: Instant,
    /// Data at or below what already went down (a cache answer or late Data that filled a hole).
    pub retx: bool,
}

/// A LEOTP mid node with the bookkeeping both engines need around [`MidNode`]: producer send times per
/// segment, what went down per flow, its timer, its counters. Engine-agnostic: the simulator's
/// [`LeotpHook`] wraps it in the host interface (ranges as packet fields), the emulator in its data
/// plane (real datagrams, `carry_payload` on).
#[derive(Debug)]
pub struct LeotpMid {
    mid: MidNode,
    /// Per flow id: producer send times (created with the flow's first Data here) and the end of
    /// the highest range sent downstream.
    sent: Vec<Option<(SentRing, u32)>>,
    ring: usize,
    mss: u32,
    buf: Vec<u8>,
    /// The timer armed last (a later one is not armed while it is pending).
    armed: Option<Instant>,
    max_queue: u64,
    resent: u64,
}

impl LeotpMid {
    /// A mid node with configuration `cfg`.
    pub fn new(cfg: LeotpConfig) -> Result<LeotpMid, LeotpError> {
        let ring = if cfg.in_network_retx { cfg.cache_blocks as usize * 4096 / cfg.mss as usize + 1 } else { 1024 };
        // Only the header is written when payloads are not carried (the simulator carries ranges).
        let buf =
            if cfg.carry_payload { leoguard_proto::leotp::LEOTP_MTU } else { leoguard_proto::leotp::LEOTP_HEADER_LEN };
        Ok(LeotpMid {
            mss: cfg.mss,
            ring: ring.clamp(1024, 1 << 20),
            mid: MidNode::new(cfg)?,
            sent: Vec::new(),
            buf: vec![0; buf],
            armed: None,
            max_queue: 0,
            resent: 0,
        })
    }

    /// The mid node (for its counters).
    pub fn mid(&self) -> &MidNode {
        &self.mid
    }

    /// This node's counters.
    pub fn totals(&self) -> LeotpMidTotals {
        let mut t = LeotpMidTotals::from_stats(&self.mid.stats());
        t.max_queue = self.max_queue;
        t.data_resent = self.resent;
        t
    }

    fn ring_of(sent: &mut Vec<Option<(SentRing, u32)>>, mss: u32, ring: usize, flow: u32) -> &mut (SentRing, u32) {
        let f = flow as usize;
        if sent.len() <= f {
            sent.resize(f + 1, None);
        }
        sent[f].get_or_insert_with(|| (SentRing::new(mss, ring), 0))
    }

    /// A packet of `flow` arriving on `face` (Interests from downstream, Data from upstream), sent by
    /// the producer at `sent_at` if it is Data; `payload` as [`MidNode::handle_packet`] takes it.
    pub fn arrive(&mut self, now: Instant, flow: u32, face: Face, h: LeotpHeader, payload: &[u8], sent_at: Instant) {
        if h.kind == LeotpType::Data && h.len > 0 {
            Self::ring_of(&mut self.sent, self.mss, self.ring, flow).0.note(h.start, sent_at);
        }
        self.mid.handle_packet(now, u64::from(flow), face, h, payload);
    }

    /// The mid node's timer fired at `now` (the one [`LeotpMid::drain`] asked for, or later).
    pub fn on_timer(&mut self, now: Instant) {
        if self.armed.is_some_and(|a| a <= now) {
            self.armed = None;
        }
        self.mid.on_timer(now);
    }

    /// Hands `emit` every datagram ready at `now`; returns a timer to arm, if a new one is needed.
    pub fn drain(&mut self, now: Instant, mut emit: impl FnMut(MidSend<'_>)) -> Option<Instant> {
        while let Some(t) = self.mid.poll_transmit(now, &mut self.buf) {
            let flow = t.flow as u32;
            let h = t.header;
            let (sent_at, retx) = match t.face {
                Face::Upstream => (now, false),
                Face::Downstream => {
                    let q = self.mid.queued(t.flow) as u64;
                    self.max_queue = self.max_queue.max(q + 1);
                    match h.kind {
                        LeotpType::Data if h.len > 0 => {
                            // A range at or below what already went down is sent again: from the
                            // cache, or late Data that filled a hole here. It keeps the producer's
                            // send time of its first copy.
                            let (ring, high) = Self::ring_of(&mut self.sent, self.mss, self.ring, flow);
                            let retx = h.end <= *high;
                            *high = (*high).max(h.end);
                            (ring.get(h.start).unwrap_or(now), retx)
                        }
                        _ => (now, false),
                    }
                }
            };
            self.resent += u64::from(retx);
            let n = t.wire_len.min(self.buf.len());
            emit(MidSend { flow, face: t.face, header: h, datagram: &self.buf[..n], sent_at, retx });
        }
        let at = self.mid.poll_timeout()?;
        // A deadline already due is work `on_timer` does at once; one in the past after a drain (a
        // refill not yet applied) is retried a microsecond later, never in a loop at `now`.
        let at = at.max(now + Duration::from_micros(1));
        if self.armed.is_none_or(|a| at < a || a < now) {
            self.armed = Some(at);
            return Some(at);
        }
        None
    }
}

/// The LEOTP mid node of one network node, on the host interface (the simulator's packets).
#[derive(Debug)]
pub struct LeotpHook {
    core: LeotpMid,
    flows: Arc<LeotpFlows>,
}

impl LeotpHook {
    /// A mid node with configuration `cfg` for the flows in `flows`.
    pub fn new(cfg: LeotpConfig, flows: Arc<LeotpFlows>) -> Result<LeotpHook, LeotpError> {
        Ok(LeotpHook { core: LeotpMid::new(cfg)?, flows })
    }

    /// The mid node (for its counters).
    pub fn mid(&self) -> &MidNode {
        self.core.mid()
    }

    /// This node's counters.
    pub fn totals(&self) -> LeotpMidTotals {
        self.core.totals()
    }

    /// Sends what the mid node has ready now and arms the next timer.
    fn drain(&mut self, ctx: &mut Ctx) {
        let flows = &self.flows;
        let timer = self.core.drain(ctx.now(), |s| {
            let Some(ends) = flows.get(s.flow) else { return };
            let p = match s.face {
                Face::Upstream => to_packet(s.flow, ends.producer, &s.header, s.sent_at),
                Face::Downstream => {
                    let mut p = to_packet(s.flow, ends.consumer, &s.header, s.sent_at);
                    if s.retx {
                        p.flags |= FLAG_LEOTP_RETX;
                    }
                    p
                }
            };
            ctx.send(p);
        });
        if let Some(at) = timer {
            ctx.timer(at, 0);
        }
    }
}

impl Agent for LeotpHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, _token: u64, ctx: &mut Ctx) {
        self.core.on_timer(ctx.now());
        self.drain(ctx);
    }

    fn on_arrive(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        let Some(h) = header_of(p) else { return true };
        if p.dst == ctx.node().0 || self.flows.get(p.flow).is_none() {
            return true;
        }
        let face = match h.kind {
            LeotpType::Interest => Face::Downstream,
            LeotpType::Data => Face::Upstream,
        };
        self.core.arrive(ctx.now(), p.flow, face, h, &[], p.sent_at);
        self.drain(ctx);
        false
    }
}

/// Builds the hook of every mid node.
pub fn build_hooks(cfg: LeotpConfig, flows: &Arc<LeotpFlows>, mids: &[u32]) -> Result<super::NodeHooks, LeotpError> {
    let mut out: super::NodeHooks = Vec::new();
    for &n in mids {
        out.push((n, Box::new(LeotpHook::new(cfg, Arc::clone(flows))?)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_survives_the_packet_both_ways() {
        for h in [
            LeotpHeader::interest(1453, 2906, 20_000_000, 0xDEAD_BEEF),
            LeotpHeader::keepalive(7, 100_000, 3),
            LeotpHeader::data(0, 1453, 128, 42),
            LeotpHeader::data(4_294_965_000, 4_294_966_453, -1, u32::MAX),
            LeotpHeader::vph(100, 5000, 0, 9),
        ] {
            let p = to_packet(3, 9, &h, Instant(5));
            assert_eq!(header_of(&p), Some(h));
            assert_eq!(p.size, 28 + 19 + h.payload_len() as u32);
        }
        assert_eq!(header_of(&Packet::default()), None);
    }

    #[test]
    fn placement_all_satellites_and_a_seeded_fraction() {
        let sat = |n: u32| n >= 2;
        let ends = [0, 9];
        assert_eq!(mid_nodes(10, &ends, None, MidPlacement::All, 1).unwrap(), (1..9).collect::<Vec<_>>());
        assert_eq!(mid_nodes(10, &ends, Some(&sat), MidPlacement::Satellites, 1).unwrap(), (2..9).collect::<Vec<_>>());
        assert!(mid_nodes(10, &ends, None, MidPlacement::Satellites, 1).is_err());
        let f = mid_nodes(10, &ends, Some(&sat), MidPlacement::Fraction(0.25), 7).unwrap();
        // Ground 1 always, and round(7 * 0.25) = 2 of the 7 satellites.
        assert_eq!(f.len(), 3);
        assert!(f.contains(&1));
        assert_eq!(f, mid_nodes(10, &ends, Some(&sat), MidPlacement::Fraction(0.25), 7).unwrap());
        let err = mid_nodes(10, &ends, None, MidPlacement::Fraction(0.0), 1).unwrap_err();
        assert!(err.to_string().contains("mid_nodes"), "{err}");
    }

    #[test]
    fn sent_ring_keeps_the_first_send_per_segment() {
        let mut r = SentRing::new(1453, 4);
        r.note(0, Instant(1));
        r.note(0, Instant(2));
        assert_eq!(r.get(0), Some(Instant(1)));
        r.note(4 * 1453, Instant(3)); // the same slot, a later segment
        assert_eq!(r.get(0), None);
        assert_eq!(r.get(4 * 1453), Some(Instant(3)));
    }
}
