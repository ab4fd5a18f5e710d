//! SATGUARD §3.2, handover-aware buffer migration, between the hooks of the old and the new
//! satellite of a ground node.
//!
//! The connectivity cache ([`crate::topo::constellation::PlannedHandover`]) tells the old satellite when
//! its downlink to a ground node goes away and which satellite serves the ground node next. A lead
//! `t = buffer_bytes / link capacity` before the handover, the old satellite starts moving its
//! unacknowledged packets over the ISL route to the new satellite (segment routing, §3.6), and copies
//! every packet it still sends on the old downlink until the handover. At the handover it sends a
//! *commit* naming which of the moved packets are still unacknowledged (ranges of migration sequence
//! numbers, so HAcks that came back after a packet was moved are not wasted). The new satellite holds
//! the moved packets and, once its own downlink is up and the commit is in, sends the committed ones
//! as link-local retransmissions: its own Tx buffer covers them from then on. A commit that does not
//! arrive within a grace time after the link comes up releases every moved packet (duplicates are
//! dropped at the network exit by FSeq).
//!
//! In the simulator a moved packet is the data packet itself with `NET_SR` set, `route` naming the
//! handover and `hseq` carrying the migration sequence number; a commit carries up to
//! [`RANGES_PER_COMMIT`] ranges in its `seq`, `ack` and `sack` fields. Their wire size is an IPv6
//! encapsulation with a segment routing header (RFC 8754: 8 bytes + 16 per segment).

use crate::packet::Packet;
use leoguard_core::Instant;
use leoguard_core::KeyMap;
use std::collections::BTreeMap;

/// `NetFields::sr_kind`: a moved copy of a buffered packet.
pub const SR_COPY: u8 = 1;
/// `NetFields::sr_kind`: a packet that reached the old satellite after the handover, sent on to the
/// new one (which routes it as if it had arrived there).
pub const SR_REDIRECT: u8 = 2;
/// `NetFields::sr_kind`: the commit of a migration.
pub const SR_COMMIT: u8 = 3;

/// Migration-sequence ranges one commit packet carries (four 16-bit numbers per 64-bit field).
pub const RANGES_PER_COMMIT: usize = 16;

/// Bytes an IPv6-in-IPv6 encapsulation with a segment routing header of `segments` adds.
pub fn encap_bytes(segments: usize) -> u32 {
    (40 + 8 + 16 * segments) as u32
}

/// Size of a commit packet with `ranges` ranges over a route of `segments` links.
pub fn commit_bytes(segments: usize, ranges: usize) -> u32 {
    encap_bytes(segments) + 8 + 4 * ranges as u32
}

/// A migration under way at the old satellite.
#[derive(Debug, Default)]
pub struct Outgoing {
    /// The handover (index into the connectivity cache).
    pub plan: usize,
    /// Next migration sequence number.
    pub next: u16,
    /// Migration sequence number of every packet moved, by end-to-end key.
    pub moved: KeyMap<u16>,
}

/// Moved packets waiting at the new satellite.
#[derive(Debug, Default)]
pub struct Inbox {
    /// By migration sequence number.
    pub copies: BTreeMap<u16, Packet>,
    /// Committed ranges (inclusive).
    pub commit: Vec<(u16, u16)>,
    /// The last commit packet arrived.
    pub committed: bool,
    /// When the inbox is released without a commit (set once the new link is up).
    pub deadline: Option<Instant>,
}

/// Packs sorted migration sequence numbers into inclusive ranges.
pub fn ranges(mut seqs: Vec<u16>) -> Vec<(u16, u16)> {
    seqs.sort_unstable();
    seqs.dedup();
    let mut out: Vec<(u16, u16)> = Vec::new();
    for s in seqs {
        match out.last_mut() {
            Some(r) if r.1.checked_add(1) == Some(s) => r.1 = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// Writes up to [`RANGES_PER_COMMIT`] ranges into a commit packet's fields.
pub fn pack_commit(p: &mut Packet, rs: &[(u16, u16)]) {
    let mut words = [0u64; 8];
    for (i, &(a, b)) in rs.iter().take(RANGES_PER_COMMIT).enumerate() {
        let v = (u64::from(a) << 16) | u64::from(b);
        words[i / 2] |= v << (32 * (i % 2));
    }
    p.seq = words[0];
    p.ack = words[1];
    p.sack = [(words[2], words[3]), (words[4], words[5]), (words[6], words[7])];
    p.n_sack = rs.len().min(RANGES_PER_COMMIT) as u8;
}

/// Reads the ranges of a commit packet.
pub fn unpack_commit(p: &Packet) -> Vec<(u16, u16)> {
    let words = [p.seq, p.ack, p.sack[0].0, p.sack[0].1, p.sack[1].0, p.sack[1].1, p.sack[2].0, p.sack[2].1];
    (0..usize::from(p.n_sack).min(RANGES_PER_COMMIT))
        .map(|i| {
            let v = (words[i / 2] >> (32 * (i % 2))) as u32;
            ((v >> 16) as u16, v as u16)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_pack_and_unpack() {
        assert_eq!(ranges(vec![5, 3, 4, 9, 10, 65535, 3]), vec![(3, 5), (9, 10), (65535, 65535)]);
        let rs: Vec<(u16, u16)> = (0..16).map(|i| (i * 100, i * 100 + 7)).collect();
        let mut p = Packet::default();
        pack_commit(&mut p, &rs);
        assert_eq!(unpack_commit(&p), rs);
        pack_commit(&mut p, &rs[..3]);
        assert_eq!(unpack_commit(&p), rs[..3].to_vec());
    }
}
