//! The packet struct both engines hand to per-hop schemes and endpoints, and the network-header
//! fields of in-network schemes.

use leoguard_core::Instant;

/// A packet as the engines' per-hop schemes and the simulator's endpoints see it: a plain struct (the
/// simulator keeps it in a pool; the emulator derives it from the real bytes and writes `net` back
/// into them as IPv6 Hop-by-Hop options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Flow the packet belongs to.
    pub flow: u32,
    /// Sequence number within the flow (bytes or packets, as the transport defines).
    pub seq: u64,
    /// Size on the wire, bytes.
    pub size: u32,
    /// Destination node.
    pub dst: u32,
    /// When the sender emitted it.
    pub sent_at: Instant,
    /// Links crossed so far.
    pub hops: u16,
    /// Transport-defined flags (ACK, retransmission, ...).
    pub flags: u16,
    /// Transport-defined second number (e.g. a cumulative ACK).
    pub ack: u64,
    /// SACK blocks carried by an ACK, [start, end).
    pub sack: [(u64, u64); 3],
    /// Valid entries of `sack`.
    pub n_sack: u8,
    /// Echoed timestamp an ACK carries (TCP's TSecr; the TSval of data is `sent_at`).
    pub ts_ecr: Option<Instant>,
    /// Fields per-hop schemes carry in the network header (SATGUARD's HSeq/FSeq, LinkGuardian's seq).
    pub net: NetFields,
}

/// Network-header fields of in-network schemes (IPv6 Traffic Class and Hop-by-Hop options on the
/// wire, see leoguard-wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetFields {
    /// IPv6 Traffic Class (SATGUARD §3.5: operators mark delay-sensitive traffic here).
    pub tc: u8,
    /// Scheme flags (`NET_*`).
    pub flags: u8,
    /// Per-hop sequence number (SATGUARD HSeq, LinkGuardian seq), rewritten at every hop.
    pub hseq: u16,
    /// Per-flow sequence number set at the network entry (SATGUARD FSeq).
    pub fseq: u16,
    /// Source route the packet follows (`NET_SR`): an index into the scheme's route table (SATGUARD
    /// §3.6 moves buffers over ISLs by segment routing).
    pub route: u32,
    /// Position in that route: the index of the link the packet is on.
    pub segment: u16,
    /// What the scheme does with a source-routed packet at the route's end.
    pub sr_kind: u8,
}

/// `NetFields::flags`: the packet carries an FSeq.
pub const NET_FSEQ: u8 = 1;
/// `NetFields::flags`: the packet carries an HSeq from the hop it just crossed.
pub const NET_HSEQ: u8 = 2;
/// `NetFields::flags`: link-local retransmission.
pub const NET_RETX: u8 = 4;
/// `NetFields::flags`: a link-local control packet (HAck, LinkGuardian ACK); never forwarded.
pub const NET_CONTROL: u8 = 8;
/// `NetFields::flags`: source-routed by a scheme over the links in `route` (never routed by nodes).
pub const NET_SR: u8 = 16;
/// `NetFields::flags`: sent from a buffer migrated from another node (SATGUARD §3.2).
pub const NET_MIGRATED: u8 = 32;
/// `NetFields::flags`: a void: the packet with this FSeq was dropped by congestion inside the
/// network, so the exit's reorder buffer need not wait for it (a control packet, routed like data).
pub const NET_VOID: u8 = 64;
/// `NetFields::flags`: a packet a scheme held at this node and handed back to routing (SATGUARD's
/// parked packets going out paced); node-local, cleared before the packet leaves the node.
pub const NET_UNPARKED: u8 = 128;
