//! LEOTP mid nodes in the data plane: the simulator's mid node (leoguard-net's [`LeotpMid`], the same
//! code and bookkeeping) on real datagrams, with `carry_payload` on, so the caches hold the real bytes
//! and what a mid node sends is a real UDP datagram carrying them.
//!
//! A node chosen as a mid node (leoguard-net's `mid_nodes`, the placement the simulator uses) takes
//! every UDP packet of a LEOTP flow that arrives over a link and is not addressed to it, as the
//! authors' code intercepts flows transparently (TPROXY): Interests (the flow's reverse direction,
//! from the consumer) enter it from downstream, Data from upstream. A flow is a UDP 4-tuple, named
//! with the consumer's half first so both directions map to one session. What the mid node sends
//! leaves as a datagram with the flow's own addresses in the face's direction (the consumer's toward
//! the producer for Interests, the producer's toward the consumer for Data), routed by the node's
//! table; so a path change needs no signalling, as in the simulator. Data the mid node sends keeps
//! the producer's send time as its network entry time, so the data plane's one-way delay of a range
//! recovered in the network counts from the producer's send, as the simulator's does.

use crate::packet::AddrKey;
use crate::plane::{Cause, Meta, NodePlugin, Out, Owner, Plane, REVERSE};
use leoguard_core::Instant;
use leoguard_net::packet::Packet;
use leoguard_net::schemes::leotp::{LeotpMid, LeotpMidTotals, MidSend};
use leoguard_net::LinkId;
use leoguard_proto::leotp::{Face, LeotpConfig, LeotpError};
use leoguard_wire::LeotpPacket;
use std::collections::HashMap;

/// One end of a flow: address and port.
pub type End = (AddrKey, u16);

/// A LEOTP flow the mid nodes have seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// The consumer's address and port.
    pub consumer: End,
    /// The producer's address and port.
    pub producer: End,
    /// The consumer's node (Data is routed to it).
    pub consumer_node: u32,
    /// The producer's node (Interests are routed to it).
    pub producer_node: u32,
    /// The configured flow the data plane accounts it as (index + 1).
    pub flow: u32,
}

/// What the LEOTP mid nodes did to packets (the data plane's accounting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeotpHostStats {
    /// Datagrams a mid node took in.
    pub intercepted: u64,
    /// Datagrams the mid nodes sent.
    pub generated: u64,
    /// Datagrams of a LEOTP flow that were no LEOTP datagram (dropped, cause `malformed`).
    pub malformed: u64,
}

/// The LEOTP mid nodes of the data plane, by node.
pub struct LeotpHost {
    pub(crate) mids: Vec<Option<LeotpMid>>,
    pub(crate) sessions: Vec<Session>,
    index: HashMap<(bool, End, End), u32>,
    /// Counters.
    pub stats: LeotpHostStats,
}

impl LeotpHost {
    /// No mid nodes.
    pub fn none() -> LeotpHost {
        LeotpHost { mids: Vec::new(), sessions: Vec::new(), index: HashMap::new(), stats: LeotpHostStats::default() }
    }

    /// A mid node with configuration `cfg` (payloads carried whatever it says) on each of `mids`.
    pub fn new(cfg: LeotpConfig, mids: &[u32], nodes: usize) -> Result<LeotpHost, LeotpError> {
        let cfg = LeotpConfig { carry_payload: true, ..cfg };
        let mut h = LeotpHost::none();
        h.mids = (0..nodes).map(|_| None).collect();
        for &n in mids {
            if let Some(slot) = h.mids.get_mut(n as usize) {
                *slot = Some(LeotpMid::new(cfg)?);
            }
        }
        Ok(h)
    }

    /// Whether `node` runs a mid node.
    pub fn runs_at(&self, node: u32) -> bool {
        self.mids.get(node as usize).is_some_and(Option::is_some)
    }

    /// Nodes that run a mid node.
    pub fn nodes(&self) -> Vec<u32> {
        (0..self.mids.len() as u32).filter(|&n| self.runs_at(n)).collect()
    }

    /// The session id of `s` (made on first sight).
    pub(crate) fn session(&mut self, s: Session) -> u32 {
        let key = (s.v6, s.consumer, s.producer);
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.sessions.len() as u32;
        self.sessions.push(s);
        self.index.insert(key, id);
        id
    }

    /// The mid nodes' counters summed (none: `nodes` = 0).
    pub fn totals(&self) -> LeotpMidTotals {
        let mut t = LeotpMidTotals::default();
        for m in self.mids.iter().flatten() {
            t += m.totals();
        }
        t
    }
}

/// A UDP datagram's place in an IP packet: (IPv6, source, destination, payload start, payload end);
/// `None` for anything else (other protocols, fragments, lengths that do not add up).
pub fn udp_payload(p: &[u8]) -> Option<(bool, End, End, usize, usize)> {
    let h = crate::packet::parse(p)?;
    let off = h.transport?;
    if h.proto != 17 || h.ip_len > p.len() {
        return None;
    }
    let u = p.get(off..off + 8)?;
    let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
    // A first fragment's UDP length runs past its IP length.
    if ulen < 8 || off + ulen > h.ip_len {
        return None;
    }
    Some((h.v6, (h.src, h.sport), (h.dst, h.dport), off + 8, off + ulen))
}

/// Writes an IP packet carrying UDP `payload` from `src` to `dst` into `buf` (IPv4 with its header
/// checksum and no UDP checksum, as RFC 768 allows; IPv6 with the mandatory UDP checksum); returns its
/// length, or `None` if it does not fit.
pub fn write_udp(buf: &mut [u8], v6: bool, src: End, dst: End, payload: &[u8]) -> Option<usize> {
    let ip = if v6 { 40 } else { 20 };
    let ulen = 8 + payload.len();
    let n = ip + ulen;
    if n > buf.len() || ulen > usize::from(u16::MAX) {
        return None;
    }
    if v6 {
        buf[..4].copy_from_slice(&[0x60, 0, 0, 0]);
        buf[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
        buf[6] = 17;
        buf[7] = 64;
        buf[8..24].copy_from_slice(&src.0.to_be_bytes());
        buf[24..40].copy_from_slice(&dst.0.to_be_bytes());
    } else {
        buf[..20].fill(0);
        buf[0] = 0x45;
        buf[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        buf[6] = 0x40; // don't fragment
        buf[8] = 64;
        buf[9] = 17;
        buf[12..16].copy_from_slice(&(src.0 as u32).to_be_bytes());
        buf[16..20].copy_from_slice(&(dst.0 as u32).to_be_bytes());
        let c = ipv4_checksum(&buf[..20]);
        buf[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let u = &mut buf[ip..n];
    u[0..2].copy_from_slice(&src.1.to_be_bytes());
    u[2..4].copy_from_slice(&dst.1.to_be_bytes());
    u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    u[6..8].fill(0);
    u[8..].copy_from_slice(payload);
    if v6 {
        let (s, d) = (std::net::Ipv6Addr::from(src.0), std::net::Ipv6Addr::from(dst.0));
        let c = match leoguard_wire::udp::ipv6_pseudo_checksum(&s, &d, 17, u) {
            0 => 0xffff,
            c => c,
        };
        u[6..8].copy_from_slice(&c.to_be_bytes());
    }
    Some(n)
}

/// The IPv4 header checksum (RFC 791) of `h` with its checksum field zero.
fn ipv4_checksum(h: &[u8]) -> u16 {
    leoguard_wire::udp::internet_checksum(&[h])
}

impl LeotpHost {
    /// Sends what `node`'s mid node has ready at `t` and arms its timer.
    fn drain<P: Plane>(&mut self, pl: &mut P, node: u32, t: u64) {
        let Some(mut mid) = self.mids.get_mut(node as usize).and_then(Option::take) else { return };
        let timer = mid.drain(Instant(t), |s| self.send(pl, node, &s, t));
        self.mids[node as usize] = Some(mid);
        if let Some(at) = timer {
            pl.timer(at.as_nanos().max(t), Owner::Leotp, node, 0);
        }
    }

    /// One datagram of a mid node as a real packet, routed from `node` toward the face's end.
    fn send<P: Plane>(&mut self, pl: &mut P, node: u32, s: &MidSend<'_>, t: u64) {
        let Some(&sess) = self.sessions.get(s.flow as usize) else { return };
        self.stats.generated += 1;
        let (from, to, dst_node, flow) = match s.face {
            Face::Upstream => (sess.consumer, sess.producer, sess.producer_node, sess.flow | REVERSE),
            Face::Downstream => (sess.producer, sess.consumer, sess.consumer_node, sess.flow),
        };
        let Some(slot) = pl.alloc() else { return };
        let Some(len) = write_udp(pl.buf_mut(slot), sess.v6, from, to, s.datagram) else {
            pl.drop_slot(slot, Cause::TooBig);
            return;
        };
        // Data keeps the producer's send time (the one-way delay counts from it); a Data's entry order
        // is its offset, so `reordered` counts ranges delivered below one delivered before.
        let t_in = if s.face == Face::Downstream { s.sent_at.as_nanos() } else { t };
        let entry = u64::from(s.header.start);
        *pl.meta(slot) = Meta { len: len as u32, t_in, dst_node, entry, flow, fields_only: false };
        *pl.packet(slot) =
            Packet { flow: s.flow, size: len as u32, dst: dst_node, sent_at: s.sent_at, ..Default::default() };
        pl.out(Out::Routed { node, slot });
    }
}

impl NodePlugin for LeotpHost {
    fn runs_at(&self, node: u32) -> bool {
        LeotpHost::runs_at(self, node)
    }

    /// Takes a datagram of a LEOTP flow not addressed to the node (or a malformed one, dropped).
    fn on_arrive<P: Plane>(&mut self, pl: &mut P, node: u32, _link: LinkId, slot: u32, t: u64) -> bool {
        let m = *pl.meta(slot);
        if m.flow == 0 || m.dst_node == node || !pl.is_leotp_flow(m.flow & !REVERSE) {
            return true;
        }
        let Some((v6, src, dst, a, b)) = udp_payload(&pl.buf(slot)[..m.len as usize]) else { return true };
        let Ok(pkt) = LeotpPacket::parse(&pl.buf(slot)[a..b]) else {
            // Dropped and counted as the data plane's drop (cause `malformed`), never handed on.
            self.stats.malformed += 1;
            pl.drop_slot(slot, Cause::Malformed);
            return false;
        };
        // Interests travel the flow's reverse direction (from the consumer), Data its data direction.
        let reverse = m.flow & REVERSE != 0;
        let (consumer, producer, face) =
            if reverse { (src, dst, Face::Downstream) } else { (dst, src, Face::Upstream) };
        let (Some(cn), Some(pn)) = (pl.node_of(consumer.0), pl.node_of(producer.0)) else {
            return true;
        };
        let id = self.session(Session {
            v6,
            consumer,
            producer,
            consumer_node: cn,
            producer_node: pn,
            flow: m.flow & !REVERSE,
        });
        let Some(mid) = self.mids.get_mut(node as usize).and_then(Option::as_mut) else { return true };
        mid.arrive(Instant(t), id, face, pkt.header, pkt.payload, Instant(m.t_in));
        self.stats.intercepted += 1;
        pl.release(slot);
        self.drain(pl, node, t);
        false
    }

    fn on_timer<P: Plane>(&mut self, pl: &mut P, node: u32, _token: u64, t: u64) {
        let Some(mid) = self.mids.get_mut(node as usize).and_then(Option::as_mut) else { return };
        mid.on_timer(Instant(t));
        self.drain(pl, node, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::v4_key;

    #[test]
    fn a_written_datagram_parses_back_with_valid_checksums() {
        let payload = b"leotp datagram bytes";
        for v6 in [false, true] {
            let (src, dst) = if v6 {
                ((0xfd00_u128 << 112 | 1, 6101), (0xfd00_u128 << 112 | 9, 6100))
            } else {
                ((v4_key([10, 108, 0, 9]), 6101), (v4_key([10, 108, 0, 1]), 6100))
            };
            let mut buf = [0u8; 200];
            let n = write_udp(&mut buf, v6, src, dst, payload).expect("fits");
            assert_eq!(n, if v6 { 40 } else { 20 } + 8 + payload.len());
            let (pv6, s, d, a, b) = udp_payload(&buf[..n]).expect("parses");
            assert_eq!((pv6, s, d, &buf[a..b]), (v6, src, dst, &payload[..]));
            let h = crate::packet::parse(&buf[..n]).expect("the data plane's parser reads it too");
            assert_eq!((h.src, h.dst, h.proto, h.sport, h.dport), (src.0, dst.0, 17, src.1, dst.1));
            if v6 {
                // A correct UDP checksum sums (with the pseudo-header) to zero.
                let s6 = std::net::Ipv6Addr::from(src.0);
                let d6 = std::net::Ipv6Addr::from(dst.0);
                assert_eq!(leoguard_wire::udp::ipv6_pseudo_checksum(&s6, &d6, 17, &buf[40..n]), 0);
            } else {
                assert_eq!(ipv4_checksum(&buf[..20]), 0, "a correct IPv4 header sums to zero");
            }
        }
        assert_eq!(write_udp(&mut [0u8; 40], false, (0, 1), (0, 2), &[0; 13]), None, "too small a buffer");
    }

    #[test]
    fn other_protocols_fragments_and_short_lengths_are_not_udp_datagrams() {
        let mut buf = [0u8; 100];
        let n = write_udp(&mut buf, false, (v4_key([10, 0, 0, 1]), 1), (v4_key([10, 0, 0, 2]), 2), &[7; 10]).unwrap();
        let mut tcp = buf;
        tcp[9] = 6;
        assert!(udp_payload(&tcp[..n]).is_none());
        let mut frag = buf;
        frag[7] = 1;
        assert!(udp_payload(&frag[..n]).is_none());
        assert!(udp_payload(&buf[..n - 1]).is_none(), "IP total length beyond the bytes");
        let mut ulen = buf;
        ulen[24..26].copy_from_slice(&100u16.to_be_bytes());
        assert!(udp_payload(&ulen[..n]).is_none(), "UDP length beyond the IP packet");
    }

    #[test]
    fn mid_nodes_sit_where_asked_and_both_directions_share_a_session() {
        let h = LeotpHost::new(LeotpConfig::default(), &[1, 3, 99], 5).expect("valid");
        assert_eq!(h.nodes(), vec![1, 3], "a node beyond the network is ignored");
        assert!(h.runs_at(1) && !h.runs_at(0) && !h.runs_at(99));
        assert_eq!(h.totals().nodes, 2);
        let mut h = h;
        let s = Session {
            v6: false,
            consumer: (v4_key([10, 0, 0, 9]), 6101),
            producer: (v4_key([10, 0, 0, 1]), 6100),
            consumer_node: 4,
            producer_node: 0,
            flow: 1,
        };
        assert_eq!(h.session(s), 0);
        assert_eq!(h.session(s), 0, "the same 4-tuple, consumer's half first, is the same session");
        assert_eq!(h.session(Session { consumer: (s.consumer.0, 6102), ..s }), 1);
        let bad = LeotpConfig { cache_blocks: 0, ..LeotpConfig::default() };
        let err = LeotpHost::new(bad, &[1], 5).err().expect("refused").to_string();
        assert!(err.contains("cache_blocks"), "{err}");
        assert_eq!(LeotpHost::none().totals().nodes, 0);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..120)) {
            let _ = udp_payload(&b);
        }
    }
}
