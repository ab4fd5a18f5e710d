//! Packet captures of simulator runs: a tap on chosen nodes records every packet put on a link
//! leaving them and every packet arriving at them over a link, and the records become real IPv6
//! packets in a classic pcap file (LINKTYPE_RAW) through `leoguard-wire`, which tshark and Wireshark
//! open. docs/simulator.md ("Packet captures") describes what a capture shows.
//!
//! The tap sees packets as a probe on the wire would: arrivals before the node's per-hop hook runs
//! (with the header the upstream node stamped), departures as they are put on the link (after the
//! hook stamped them). A packet the link's queue turns away, or offered to a link that is down, never
//! reaches the wire and is not recorded; one the loss model drops was sent and is.

use crate::engine::{NodeId, Packet, NET_CONTROL, NET_RETX, NET_SR};
use crate::tcp_agent::FLAG_ACK;
use leoguard_core::Instant;
use leoguard_wire::udp::ipv6_pseudo_checksum;
use leoguard_wire::{
    HbhRepr, Ipv6Packet, Ipv6Repr, PcapWriter, UdpPacket, WireError, HACK_HOP_LIMIT, NEXT_HEADER_NONE, NEXT_HEADER_UDP,
};
use std::net::Ipv6Addr;

/// Packets a capture records by default before it stops (and counts the rest).
pub const DEFAULT_MAX_PACKETS: usize = 1_000_000;
/// Bytes of each packet a capture keeps by default (the headers; the zero payload is cut).
pub const DEFAULT_SNAPLEN: u32 = 128;
/// Largest snaplen (the pcap file header's).
pub const MAX_SNAPLEN: u32 = leoguard_wire::pcap::PCAP_SNAPLEN;
/// IPv6 Next Header value of TCP.
pub const NEXT_HEADER_TCP: u8 = 6;
/// Length of the TCP header a capture writes (no options).
pub const TCP_HEADER_LEN: usize = 20;
/// Hop limit a data packet leaves its source with; each link crossed takes one off.
pub const INITIAL_HOP_LIMIT: u8 = 64;
/// First port of the flows' ports: flow `i` sends from `PORT_BASE + 2i` to `PORT_BASE + 2i + 1`
/// (ephemeral ports, RFC 6335, so no dissector claims the zero payload).
pub const PORT_BASE: u16 = 49_152;

const TCP_FLAG_ACK: u8 = 0x10;
use leoguard_net::schemes::wire::{self, LINK_LOCAL_DST};

/// Where to capture and how much (a scenario's `capture`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSpec {
    /// Node ids to tap.
    pub nodes: Vec<u32>,
    /// Packets recorded at most; later ones are counted, not recorded.
    pub max_packets: usize,
    /// Bytes kept of each packet (the pcap record's length; the original length is kept).
    pub snaplen: u32,
}

impl CaptureSpec {
    /// A capture at `nodes` with the default limits.
    pub fn at(nodes: Vec<u32>) -> CaptureSpec {
        CaptureSpec { nodes, max_packets: DEFAULT_MAX_PACKETS, snaplen: DEFAULT_SNAPLEN }
    }
}

/// Which way the packet crossed the tapped node's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Arrived over the link (`to` is the tapped node).
    Arrive,
    /// Put on the link (`from` is the tapped node).
    Depart,
}

/// One packet the tap saw: when, on which link, and the fields that go on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureRecord {
    /// When (arrival of the last bit, or the moment the packet was put on the link).
    pub t: Instant,
    /// Sending end of the link.
    pub from: NodeId,
    /// Receiving end of the link.
    pub to: NodeId,
    /// Which way it crossed the tapped node.
    pub dir: Direction,
    /// Flow of the packet.
    pub flow: u32,
    /// Destination node.
    pub dst: u32,
    /// Simulated size, bytes (the frame's original length).
    pub size: u32,
    /// Transport sequence number (control packets: scheme-defined).
    pub seq: u64,
    /// Transport acknowledgement (control packets: scheme-defined).
    pub ack: u64,
    /// Transport flags (`tcp_agent::FLAG_*`).
    pub flags: u16,
    /// Links crossed before the link it is on (the hop limit on the wire is 64 minus this).
    pub hops: u16,
    /// Network-header fields: Traffic Class, scheme flags (`NET_*`), HSeq, FSeq.
    pub tc: u8,
    /// `NetFields::flags`.
    pub net_flags: u8,
    /// `NetFields::hseq`.
    pub hseq: u16,
    /// `NetFields::fseq`.
    pub fseq: u16,
}

impl CaptureRecord {
    /// The record of packet `p` crossing the link `from` -> `to` at `t`.
    pub fn new(t: Instant, from: NodeId, to: NodeId, dir: Direction, p: &Packet) -> CaptureRecord {
        // An arriving packet has already been counted on this link (`Network::arrive`).
        let hops = if dir == Direction::Arrive { p.hops.saturating_sub(1) } else { p.hops };
        CaptureRecord {
            t,
            from,
            to,
            dir,
            flow: p.flow,
            dst: p.dst,
            size: p.size,
            seq: p.seq,
            ack: p.ack,
            flags: p.flags,
            hops,
            tc: p.net.tc,
            net_flags: p.net.flags,
            hseq: p.net.hseq,
            fseq: p.net.fseq,
        }
    }
}

/// The simulator's tap: a per-node switch and a bounded record list.
#[derive(Debug, Default)]
pub struct CaptureTap {
    at: Vec<bool>,
    max: usize,
    records: Vec<CaptureRecord>,
    missed: u64,
}

impl CaptureTap {
    /// A tap on `at` (ids past `nodes` are ignored) keeping at most `max_packets` records.
    pub fn new(nodes: usize, at: &[NodeId], max_packets: usize) -> CaptureTap {
        let mut on = vec![false; nodes];
        for n in at {
            if let Some(x) = on.get_mut(n.0 as usize) {
                *x = true;
            }
        }
        CaptureTap { at: on, max: max_packets, records: Vec::with_capacity(max_packets.min(4096)), missed: 0 }
    }

    /// Whether `node` is tapped.
    #[inline]
    pub fn taps(&self, node: NodeId) -> bool {
        self.at.get(node.0 as usize).copied().unwrap_or(false)
    }

    /// Keeps `r`, or counts it as missed once `max_packets` are kept.
    #[inline]
    pub fn record(&mut self, r: CaptureRecord) {
        if self.records.len() < self.max {
            self.records.push(r);
        } else {
            self.missed += 1;
        }
    }

    /// The records, in time order.
    pub fn records(&self) -> &[CaptureRecord] {
        &self.records
    }

    /// Packets seen after the limit was reached.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

/// Which scheme's options a capture writes (leoguard-net's `WireScheme`).
pub use leoguard_net::schemes::wire::WireScheme as Scheme;

/// The transport a flow's packets carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP (the minimal 20-byte header).
    Tcp,
    /// UDP.
    Udp,
}

/// What the conversion needs to know of a flow: its ends and transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowEnds {
    /// Sender node.
    pub src: u32,
    /// Receiver node.
    pub dst: u32,
    /// Transport.
    pub transport: Transport,
}

/// A pcap file made from capture records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureFile {
    /// The pcap bytes.
    pub pcap: Vec<u8>,
    /// Packets written.
    pub written: u64,
    /// Records that could not be made into a valid packet (not written; a bug if ever non-zero).
    pub unconverted: u64,
}

/// The IPv6 address of node `node`: `fd00::<node id>` (a unique local address, RFC 4193).
pub fn node_addr(node: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (node >> 16) as u16, node as u16)
}

/// Ports of flow `flow`: (sender's, receiver's).
pub fn flow_ports(flow: u32) -> (u16, u16) {
    // 8192 flows per port pair space; flows beyond share ports (their addresses still differ).
    let p = PORT_BASE + 2 * (flow % 8192) as u16;
    (p, p + 1)
}

/// The Hop-by-Hop header of a data packet, if it carries any scheme field (leoguard-net's mapping,
/// which the emulator writes into real packets too).
fn data_hbh(r: &CaptureRecord, scheme: Scheme, next_header: u8) -> Option<HbhRepr> {
    wire::data_hbh(scheme, r.net_flags, r.hseq, r.fseq, r.tc, next_header)
}

/// Reused buffers of the conversion.
#[derive(Debug, Default)]
struct Scratch {
    zeros: Vec<u8>,
    upper: Vec<u8>,
    frame: Vec<u8>,
}

impl Scratch {
    fn zeros(&mut self, n: usize) -> &[u8] {
        if self.zeros.len() < n {
            self.zeros.resize(n, 0);
        }
        &self.zeros[..n]
    }
}

/// The transport header of a routed packet.
#[derive(Clone, Copy, Debug)]
struct Upper {
    transport: Transport,
    src_port: u16,
    dst_port: u16,
    /// A TCP ACK (else TCP data).
    ack: bool,
}

/// Writes into `s.frame` the IPv6 packet of record `r`: `header` and `hbh`, then the transport
/// header (if any) and zero payload up to the record's size.
fn assemble(
    s: &mut Scratch,
    r: &CaptureRecord,
    header: Ipv6Repr,
    hbh: Option<HbhRepr>,
    upper: Option<Upper>,
) -> Result<(), WireError> {
    let (src, dst) = (header.src, header.dst);
    let head = leoguard_wire::IPV6_HEADER_LEN + hbh.map_or(0, |h| h.buffer_len());
    let min_upper = match upper.map(|u| u.transport) {
        Some(Transport::Tcp) => TCP_HEADER_LEN,
        Some(Transport::Udp) => leoguard_wire::udp::UDP_HEADER_LEN,
        None => 0,
    };
    // The simulated size counts the headers; a size smaller than the real headers (a 52-byte
    // simulated TCP ACK is 60 bytes as IPv6 + TCP) gives a frame of just the headers.
    let upper_len = (r.size as usize).saturating_sub(head).max(min_upper);
    // The buffer is reused from record to record (after an error, the next record allocates anew).
    let mut bytes = std::mem::take(&mut s.upper);
    bytes.clear();
    bytes.resize(upper_len, 0);
    match upper {
        Some(u @ Upper { transport: Transport::Udp, .. }) => {
            let payload = s.zeros(upper_len - leoguard_wire::udp::UDP_HEADER_LEN);
            UdpPacket { src_port: u.src_port, dst_port: u.dst_port, payload }.emit(&mut bytes, &src, &dst)?;
        }
        Some(u @ Upper { transport: Transport::Tcp, .. }) => emit_tcp(&mut bytes, r, u, &src, &dst),
        None => {}
    }
    let packet = Ipv6Packet::new(header, hbh, &bytes)?;
    s.frame.clear();
    s.frame.resize(packet.buffer_len(), 0);
    packet.emit(&mut s.frame)?;
    s.upper = bytes;
    Ok(())
}

/// Writes a 20-byte TCP header (RFC 9293 §3.1) at the start of `seg` (the whole segment, payload
/// zero) with its checksum over the IPv6 pseudo-header (RFC 8200 §8.1). Data segments carry the
/// packet's sequence number; ACKs the cumulative ACK and the advertised window (the simulator keeps
/// an ACK's window in its `seq`), with the ACK flag.
fn emit_tcp(seg: &mut [u8], r: &CaptureRecord, u: Upper, src: &Ipv6Addr, dst: &Ipv6Addr) {
    let (seq, ack, flags, window) = if u.ack {
        (0u32, r.ack as u32, TCP_FLAG_ACK, (r.seq & u64::from(u32::MAX)).min(u64::from(u16::MAX)) as u16)
    } else {
        (r.seq as u32, 0u32, 0u8, u16::MAX)
    };
    seg[0..2].copy_from_slice(&u.src_port.to_be_bytes());
    seg[2..4].copy_from_slice(&u.dst_port.to_be_bytes());
    seg[4..8].copy_from_slice(&seq.to_be_bytes());
    seg[8..12].copy_from_slice(&ack.to_be_bytes());
    seg[12] = (TCP_HEADER_LEN as u8 / 4) << 4; // data offset in 32-bit words, no options
    seg[13] = flags;
    seg[14..16].copy_from_slice(&window.to_be_bytes());
    seg[16..20].fill(0); // checksum (computed below), urgent pointer
    let sum = ipv6_pseudo_checksum(src, dst, NEXT_HEADER_TCP, seg);
    seg[16..18].copy_from_slice(&sum.to_be_bytes());
}

/// Makes record `r` into an IPv6 packet in `s.frame`.
///
/// - Link-local control packets (`NET_CONTROL`, no destination node): a SATGUARD HAck, or a
///   LinkGuardian ACK or dummy, between the link's ends with hop limit 255 and No Next Header.
/// - SATGUARD's source-routed migration packets (`NET_SR`, §3.2): between the link's ends with No
///   Next Header (leoguard-wire has no segment routing header); their size is kept.
/// - Everything else is routed between the flow's ends: data, TCP ACKs, LinkGuardian retransmissions
///   (which travel on the engine's control lane, `NET_CONTROL | NET_RETX`) with the flow's transport
///   header; other routed signalling (SATGUARD's voids) with its options and No Next Header.
fn convert(s: &mut Scratch, r: &CaptureRecord, flows: &[FlowEnds], scheme: Scheme) -> Result<(), WireError> {
    let (from, to) = (node_addr(r.from.0), node_addr(r.to.0));
    let link_local = |tc: u8| Ipv6Repr {
        traffic_class: tc,
        flow_label: 0,
        payload_len: 0,
        next_header: NEXT_HEADER_NONE,
        hop_limit: HACK_HOP_LIMIT,
        src: from,
        dst: to,
    };
    let control = r.net_flags & NET_CONTROL != 0;
    if control && r.dst == LINK_LOCAL_DST {
        let Some(hbh) = wire::control_hbh(scheme, r.net_flags, r.hseq, r.ack, NEXT_HEADER_NONE) else {
            return assemble(s, r, link_local(r.tc), None, None);
        };
        let header = match hbh.hack {
            Some(hack) => Ipv6Packet::hack(from, to, hack)?.header,
            None => link_local(r.tc),
        };
        return assemble(s, r, header, Some(hbh), None);
    }
    let Some(f) = flows.get(r.flow as usize).filter(|_| r.net_flags & NET_SR == 0) else {
        return assemble(s, r, link_local(r.tc), None, None);
    };
    // Data goes sender -> receiver; TCP ACKs come back.
    let forward = r.dst == f.dst;
    let (src_node, dst_node) = if forward { (f.src, f.dst) } else { (f.dst, f.src) };
    let (sp, dp) = flow_ports(r.flow);
    let (src_port, dst_port) = if forward { (sp, dp) } else { (dp, sp) };
    let upper = (!control || r.net_flags & NET_RETX != 0).then_some(Upper {
        transport: f.transport,
        src_port,
        dst_port,
        ack: r.flags & FLAG_ACK != 0,
    });
    let next_header = match upper.map(|u| u.transport) {
        Some(Transport::Tcp) => NEXT_HEADER_TCP,
        Some(Transport::Udp) => NEXT_HEADER_UDP,
        None => NEXT_HEADER_NONE,
    };
    let header = Ipv6Repr {
        traffic_class: r.tc,
        flow_label: 0,
        payload_len: 0,
        next_header,
        hop_limit: INITIAL_HOP_LIMIT.saturating_sub(r.hops.min(63) as u8),
        src: node_addr(src_node),
        dst: node_addr(dst_node),
    };
    assemble(s, r, header, data_hbh(r, scheme, next_header), upper)
}

/// The IPv6 packet of one record (whole, not cut at a snaplen): what [`to_pcap`] writes.
pub fn packet_bytes(r: &CaptureRecord, flows: &[FlowEnds], scheme: Scheme) -> Result<Vec<u8>, WireError> {
    let mut s = Scratch::default();
    convert(&mut s, r, flows, scheme)?;
    Ok(s.frame)
}

/// Appends one pcap record of `frame` keeping its first `snaplen` bytes (`orig_len` = its length).
///
/// `PcapWriter::write_packet` keeps up to 65535 bytes and has no snaplen, so records are cut here;
/// the record header is the one `leoguard_wire::pcap` documents (ts_sec, ts_usec, incl_len,
/// orig_len, little-endian, as the file header `PcapWriter::new` wrote announces).
fn write_cut(out: &mut Vec<u8>, t: Instant, frame: &[u8], snaplen: u32) -> Option<()> {
    let t_ns = t.as_nanos();
    let secs = u32::try_from(t_ns / 1_000_000_000).ok()?;
    let usecs = (t_ns % 1_000_000_000 / 1_000) as u32;
    let orig = u32::try_from(frame.len()).ok()?;
    let incl = orig.min(snaplen).min(MAX_SNAPLEN);
    for v in [secs, usecs, incl, orig] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&frame[..incl as usize]);
    Some(())
}

/// Makes capture records into a pcap file (link type RAW: bare IPv6 packets) whose records keep at
/// most `snaplen` bytes of each packet.
pub fn to_pcap(records: &[CaptureRecord], flows: &[FlowEnds], scheme: Scheme, snaplen: u32) -> CaptureFile {
    let mut out = CaptureFile::default();
    // Writing to a Vec cannot fail; the header is PcapWriter's (magic, version, link type).
    out.pcap = match PcapWriter::new(Vec::new()).and_then(PcapWriter::into_inner) {
        Ok(v) => v,
        Err(_) => return out,
    };
    out.pcap.reserve(records.len() * (16 + snaplen.min(256) as usize));
    let mut s = Scratch::default();
    for r in records {
        let ok =
            convert(&mut s, r, flows, scheme).is_ok() && write_cut(&mut out.pcap, r.t, &s.frame, snaplen).is_some();
        if ok {
            out.written += 1;
        } else {
            out.unconverted += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{NetFields, NET_FSEQ, NET_HSEQ};
    use leoguard_core::Seq16;
    use leoguard_wire::{Ipv6Packet, TC_DELAY_SENSITIVE};
    use leoguard_wire::{LinkGuardianLoss, LinkGuardianSeq, SatguardFlow, SatguardHack, SatguardHop};

    const FLOWS: [FlowEnds; 2] = [
        FlowEnds { src: 0, dst: 3, transport: Transport::Udp },
        FlowEnds { src: 0, dst: 3, transport: Transport::Tcp },
    ];

    fn rec(dir: Direction, p: Packet) -> CaptureRecord {
        CaptureRecord::new(Instant(1_500_002_999), NodeId(1), NodeId(2), dir, &p)
    }

    fn data(flow: u32, size: u32, net: NetFields) -> Packet {
        Packet { flow, seq: 7, size, dst: 3, hops: 1, net, ..Default::default() }
    }

    #[test]
    fn a_satguard_data_packet_parses_back_with_its_options() {
        let net = NetFields {
            tc: TC_DELAY_SENSITIVE,
            flags: NET_FSEQ | NET_HSEQ | NET_RETX,
            hseq: 0x0102,
            fseq: 0xFFFF,
            ..Default::default()
        };
        let r = rec(Direction::Depart, data(0, 1216, net));
        let bytes = packet_bytes(&r, &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(bytes.len(), 1216, "padded to the simulated size");
        let p = Ipv6Packet::parse(&bytes).unwrap();
        assert_eq!(p.header.traffic_class, TC_DELAY_SENSITIVE);
        assert_eq!(p.header.hop_limit, 63, "one link crossed before this one");
        assert_eq!((p.header.src, p.header.dst), (node_addr(0), node_addr(3)));
        assert_eq!(p.header.src, "fd00::".parse::<Ipv6Addr>().unwrap());
        let hbh = p.hbh.unwrap();
        assert_eq!(hbh.hop, Some(SatguardHop { hseq: Seq16(0x0102), retransmission: true, migrated: false }));
        assert_eq!(hbh.flow, Some(SatguardFlow { fseq: Seq16(0xFFFF), delay_sensitive: true }));
        assert_eq!((hbh.hack, hbh.lg_seq, hbh.next_header), (None, None, NEXT_HEADER_UDP));
        let udp = UdpPacket::parse(p.payload, &p.header.src, &p.header.dst).unwrap();
        assert_eq!((udp.src_port, udp.dst_port), flow_ports(0));
        assert_eq!(udp.payload.len(), 1216 - 40 - 16 - 8);
        assert!(udp.payload.iter().all(|&b| b == 0));
        // Arriving, the same packet was counted on this link already: the wire hop limit is the same.
        let mut arrived = data(0, 1216, net);
        arrived.hops = 2;
        let a = packet_bytes(&rec(Direction::Arrive, arrived), &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(a, bytes);
    }

    #[test]
    fn a_hack_is_a_link_local_packet_between_the_link_ends() {
        let p = Packet {
            flow: 0,
            seq: 5, // the data link it acknowledges
            ack: 0xFFFE | (1 << 16) | (3 << 32),
            size: 56,
            dst: u32::MAX,
            net: NetFields { flags: NET_CONTROL, ..Default::default() },
            ..Default::default()
        };
        let bytes = packet_bytes(&rec(Direction::Arrive, p), &FLOWS, Scheme::Satguard).unwrap();
        let want = SatguardHack { cum_start: Seq16(0xFFFE), cum_end: Seq16(1), beam: 3 };
        let mut reference = vec![0u8; 56];
        Ipv6Packet::hack(node_addr(1), node_addr(2), want).unwrap().emit(&mut reference).unwrap();
        assert_eq!(bytes, reference, "exactly the wire crate's HAck packet");
        let parsed = Ipv6Packet::parse(&bytes).unwrap();
        assert_eq!(parsed.as_hack(), Some(want));
        assert_eq!(parsed.header.hop_limit, 255);
    }

    #[test]
    fn linkguardian_fields_become_linkguardian_options() {
        let seq = NetFields { tc: TC_DELAY_SENSITIVE, flags: NET_HSEQ | NET_RETX, hseq: 42, ..Default::default() };
        let bytes = packet_bytes(&rec(Direction::Depart, data(0, 1208, seq)), &FLOWS, Scheme::LinkGuardian).unwrap();
        let hbh = Ipv6Packet::parse(&bytes).unwrap().hbh.unwrap();
        assert_eq!(hbh.lg_seq, Some(LinkGuardianSeq { seq: Seq16(42), retransmission: true, dummy: false }));
        assert_eq!((hbh.hop, hbh.flow), (None, None));
        let ack = Packet {
            flow: u32::MAX,
            ack: 300 | (290 << 16) | (2 << 32) | (1 << 48),
            size: 56,
            dst: u32::MAX,
            net: NetFields { flags: NET_CONTROL, ..Default::default() },
            ..Default::default()
        };
        let bytes = packet_bytes(&rec(Direction::Depart, ack), &FLOWS, Scheme::LinkGuardian).unwrap();
        assert_eq!(bytes.len(), 56);
        let lg = Ipv6Packet::parse(&bytes).unwrap().hbh.unwrap().lg_ack.unwrap();
        assert_eq!(lg.loss, Some(LinkGuardianLoss { first_lost: Seq16(290), hole_size: 2 }));
        assert_eq!(lg.leading_ack, Seq16(300));
        let dummy = Packet { net: NetFields { flags: NET_CONTROL | NET_HSEQ, hseq: 9, ..Default::default() }, ..ack };
        let bytes = packet_bytes(&rec(Direction::Depart, dummy), &FLOWS, Scheme::LinkGuardian).unwrap();
        let s = Ipv6Packet::parse(&bytes).unwrap().hbh.unwrap().lg_seq.unwrap();
        assert!(s.dummy && s.seq == Seq16(9));
        // A retransmission rides the engine's control lane but is the flow's data packet.
        let retx = NetFields { flags: NET_CONTROL | NET_RETX | NET_HSEQ, hseq: 43, ..seq };
        let bytes = packet_bytes(&rec(Direction::Depart, data(0, 1208, retx)), &FLOWS, Scheme::LinkGuardian).unwrap();
        let p = Ipv6Packet::parse(&bytes).unwrap();
        assert_eq!((p.header.src, p.header.dst, p.upper_protocol()), (node_addr(0), node_addr(3), NEXT_HEADER_UDP));
        assert_eq!(p.hbh.unwrap().lg_seq, Some(LinkGuardianSeq { seq: Seq16(43), retransmission: true, dummy: false }));
    }

    #[test]
    fn routed_signalling_keeps_its_options_and_carries_no_transport() {
        // A SATGUARD void: a control packet routed to the flow's exit with the FSeq it stands for.
        let net = NetFields { tc: TC_DELAY_SENSITIVE, flags: NET_CONTROL | NET_FSEQ, fseq: 77, ..Default::default() };
        let bytes = packet_bytes(&rec(Direction::Arrive, data(0, 48, net)), &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(bytes.len(), 48);
        let p = Ipv6Packet::parse(&bytes).unwrap();
        assert_eq!((p.header.src, p.header.dst, p.header.hop_limit), (node_addr(0), node_addr(3), 64));
        let hbh = p.hbh.unwrap();
        assert_eq!((hbh.next_header, hbh.hop), (NEXT_HEADER_NONE, None));
        assert_eq!(hbh.flow, Some(SatguardFlow { fseq: Seq16(77), delay_sensitive: true }));
    }

    /// RFC 1071: the one's-complement sum over pseudo-header and segment, checksum included, is 0xFFFF
    /// (`ipv6_pseudo_checksum` returns its complement, 0).
    fn tcp_checksum_ok(bytes: &[u8]) -> (Ipv6Packet<'_>, bool) {
        let p = Ipv6Packet::parse(bytes).unwrap();
        let ok = ipv6_pseudo_checksum(&p.header.src, &p.header.dst, NEXT_HEADER_TCP, p.payload) == 0;
        (p, ok)
    }

    #[test]
    fn tcp_segments_have_a_valid_checksum_and_acks_go_back() {
        let mut d = data(1, 1500, NetFields::default());
        d.seq = (1 << 32) + 1448; // truncated to 32 bits on the wire
        let bytes = packet_bytes(&rec(Direction::Depart, d), &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(bytes.len(), 1500);
        let (p, ok) = tcp_checksum_ok(&bytes);
        assert!(ok, "TCP checksum");
        assert!(p.hbh.is_none(), "an unprotected packet has no Hop-by-Hop header");
        assert_eq!(p.header.next_header, NEXT_HEADER_TCP);
        let t = p.payload;
        assert_eq!(u32::from_be_bytes([t[4], t[5], t[6], t[7]]), 1448);
        assert_eq!((t[12], t[13]), (0x50, 0), "20-byte header, no ACK flag on data");
        let (sp, dp) = flow_ports(1);
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), sp);

        let a = Packet {
            flow: 1,
            seq: 1 << 20, // the advertised window
            ack: 123_456,
            size: 52,
            dst: 0,
            flags: FLAG_ACK,
            net: NetFields {
                tc: TC_DELAY_SENSITIVE,
                flags: NET_FSEQ | NET_HSEQ,
                hseq: 4,
                fseq: 2,
                ..Default::default()
            },
            ..Default::default()
        };
        let bytes = packet_bytes(&rec(Direction::Depart, a), &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(bytes.len(), 40 + 16 + 20, "a simulated size below the real headers gives just the headers");
        let (p, ok) = tcp_checksum_ok(&bytes);
        assert!(ok, "TCP checksum behind a Hop-by-Hop header");
        assert_eq!((p.header.src, p.header.dst), (node_addr(3), node_addr(0)));
        assert_eq!(p.hbh.unwrap().next_header, NEXT_HEADER_TCP);
        let t = p.payload;
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), dp, "from the receiver's port");
        assert_eq!(u32::from_be_bytes([t[8], t[9], t[10], t[11]]), 123_456);
        assert_eq!(t[13], TCP_FLAG_ACK);
        assert_eq!(u16::from_be_bytes([t[14], t[15]]), u16::MAX, "window capped at 16 bits");
    }

    #[test]
    fn pcap_records_are_cut_at_the_snaplen_and_keep_the_original_length() {
        let net = NetFields { tc: TC_DELAY_SENSITIVE, flags: NET_FSEQ | NET_HSEQ, ..Default::default() };
        let recs = [rec(Direction::Depart, data(0, 1216, net)), rec(Direction::Depart, data(0, 100, net))];
        let f = to_pcap(&recs, &FLOWS, Scheme::Satguard, 128);
        assert_eq!((f.written, f.unconverted), (2, 0));
        let header = PcapWriter::new(Vec::new()).unwrap().into_inner().unwrap();
        assert_eq!(&f.pcap[..24], &header[..], "PcapWriter's file header");
        let le = |at: usize| u32::from_le_bytes(f.pcap[at..at + 4].try_into().unwrap());
        assert_eq!((le(24), le(28), le(32), le(36)), (1, 500_002, 128, 1216));
        let full = packet_bytes(&recs[0], &FLOWS, Scheme::Satguard).unwrap();
        assert_eq!(&f.pcap[40..168], &full[..128]);
        assert_eq!((le(168 + 8), le(168 + 12)), (100, 100), "a short packet is kept whole");
        assert_eq!(f.pcap.len(), 24 + 16 + 128 + 16 + 100);
        // Same records, same bytes.
        assert_eq!(to_pcap(&recs, &FLOWS, Scheme::Satguard, 128), f);
    }

    /// A 3-hop lossy chain with SATGUARD, a delay-sensitive CBR flow and a TCP flow, tapped at node 1.
    fn chain_with_capture(max_packets: usize) -> crate::scenario::Scenario {
        use crate::engine::QueueLimit;
        use crate::loss::LossSpec;
        use crate::scenario::{FlowKind, FlowSpec, LinkSpec, Scenario};
        use leoguard_core::{Bps, Duration};
        let link = |a, b| LinkSpec {
            a,
            b,
            rate: Bps::mbps(20),
            delay: Duration::from_millis(2),
            queue: QueueLimit::Packets(50),
            loss_ab: LossSpec::Bernoulli { p: 0.02 },
            loss_ba: LossSpec::Bernoulli { p: 0.02 },
            rate_schedule: None,
        };
        let flow = |kind, tc| FlowSpec { src: 0, dst: 3, kind, start: Instant::ZERO, tc };
        Scenario {
            nodes: 4,
            links: vec![link(0, 1), link(1, 2), link(2, 3)],
            flows: vec![
                flow(FlowKind::Cbr { rate: Bps::mbps(2), size: 1200 }, TC_DELAY_SENSITIVE),
                flow(FlowKind::Tcp { cc: "cubic".into(), bytes: Some(300_000), rate: None }, 0),
            ],
            duration: Duration::from_millis(500),
            seed: 2,
            sample_every: Duration::from_millis(100),
            satguard: Some(crate::schemes::satguard::SatguardOptions::default()),
            capture: Some(CaptureSpec { nodes: vec![1], max_packets, snaplen: MAX_SNAPLEN }),
            ..Default::default()
        }
    }

    #[test]
    fn a_run_captures_what_crosses_the_tapped_node_and_every_packet_parses() {
        let s = chain_with_capture(DEFAULT_MAX_PACKETS);
        let mut run = crate::scenario::Running::new(&s).unwrap();
        run.advance(run.end());
        let r = run.collect();
        let pcap = r.capture.as_ref().expect("a capture");
        assert_eq!(r.capture_missed, 0);
        // What the links say crossed node 1's interfaces: every packet delivered to it, every packet
        // it offered that was not turned away by the queue or a down link.
        let into: u64 = r.links.iter().filter(|l| l.to == 1).map(|l| l.stats.delivered).sum();
        let out: u64 = (r.links.iter().filter(|l| l.from == 1))
            .map(|l| l.stats.offered - l.stats.drops_queue - l.stats.drops_down)
            .sum();
        let (mut at, mut n, mut kinds) = (24, 0u64, [0u32; 4]);
        while at < pcap.len() {
            let le = |i: usize| u32::from_le_bytes(pcap[i..i + 4].try_into().unwrap()) as usize;
            let (incl, orig) = (le(at + 8), le(at + 12));
            assert_eq!(incl, orig, "snaplen 65535 keeps whole packets");
            let p = Ipv6Packet::parse(&pcap[at + 16..at + 16 + incl]).unwrap();
            let hbh = p.hbh.unwrap_or(HbhRepr::new(p.header.next_header));
            match (p.as_hack(), hbh.hop.zip(hbh.flow), p.upper_protocol()) {
                (Some(_), ..) => kinds[0] += 1,
                (None, Some(_), NEXT_HEADER_UDP) => kinds[1] += 1,
                (None, _, NEXT_HEADER_TCP) => kinds[2] += 1,
                _ => kinds[3] += 1,
            }
            at += 16 + incl;
            n += 1;
        }
        assert_eq!(n, into + out);
        assert!(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0, "HAcks, protected UDP, TCP: {kinds:?}");
        assert_eq!(kinds[3], 0, "nothing else: {kinds:?}");
        // Same seed, same bytes; a small limit records the first packets and counts the rest.
        let again = crate::scenario::run(&s).unwrap();
        assert_eq!(again.capture.as_ref(), Some(pcap));
        let small = crate::scenario::run(&chain_with_capture(10)).unwrap();
        assert_eq!(small.capture_missed, n - 10);
    }

    #[test]
    fn bad_capture_fields_are_refused_by_name() {
        let mut s = chain_with_capture(1);
        s.capture = Some(CaptureSpec::at(vec![1, 4]));
        let e = crate::scenario::run(&s).unwrap_err().to_string();
        assert_eq!(e, "invalid capture.nodes[1] = 4: is not a node");
        s.capture = Some(CaptureSpec { snaplen: 0, ..CaptureSpec::at(vec![1]) });
        assert!(crate::scenario::run(&s).unwrap_err().to_string().starts_with("invalid capture.snaplen = 0"));
    }

    #[test]
    fn the_tap_keeps_max_packets_and_counts_the_rest() {
        let mut tap = CaptureTap::new(4, &[NodeId(2), NodeId(9)], 3);
        assert!(tap.taps(NodeId(2)) && !tap.taps(NodeId(1)) && !tap.taps(NodeId(9)));
        for _ in 0..5 {
            tap.record(rec(Direction::Arrive, Packet::default()));
        }
        assert_eq!((tap.records().len(), tap.missed()), (3, 2));
    }
}
