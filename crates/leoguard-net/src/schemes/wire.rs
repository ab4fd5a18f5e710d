//! How the per-hop schemes' packet fields ([`NetFields`], a control packet's `ack`) map to IPv6
//! Hop-by-Hop options of `leoguard-wire`, both ways. The simulator's captures write packets with it;
//! the emulator writes it into the real packets on every emulated link and reads it back at the far
//! end, so the schemes there run on what the wire carried.

use crate::packet::{Packet, NET_CONTROL, NET_FSEQ, NET_HSEQ, NET_MIGRATED, NET_RETX};
use leoguard_core::Seq16;
use leoguard_wire::{
    is_delay_sensitive_tc, HbhRepr, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, SatguardFlow, SatguardHack,
    SatguardHop,
};

/// Destination of link-local control packets (HAcks, LinkGuardian ACKs and dummies): never routed.
pub const LINK_LOCAL_DST: u32 = u32::MAX;

/// Which scheme's options a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireScheme {
    /// No per-hop scheme: no Hop-by-Hop header.
    None,
    /// SATGUARD: HSeq, FSeq, HAck options.
    Satguard,
    /// LinkGuardian: seq and ACK options.
    LinkGuardian,
}

/// The SATGUARD HAck a control packet carries: the hooks pack it as `ack = start | end << 16 |
/// beam << 32` (schemes/satguard `on_arrive`).
pub fn satguard_hack(ack: u64) -> SatguardHack {
    SatguardHack { cum_start: Seq16(ack as u16), cum_end: Seq16((ack >> 16) as u16), beam: (ack >> 32) as u16 }
}

/// The LinkGuardian ACK a control packet carries: the hooks pack it as `leading_ack | first_lost << 16
/// | hole_size << 32 | loss << 48 | received << 49`, the received seq in the `first_lost` bits
/// (schemes/linkguardian `encode_ack`).
pub fn linkguardian_ack(ack: u64) -> LinkGuardianAck {
    let loss = ((ack >> 48) & 1 == 1)
        .then_some(LinkGuardianLoss { first_lost: Seq16((ack >> 16) as u16), hole_size: (ack >> 32) as u16 });
    let received = (loss.is_none() && (ack >> 49) & 1 == 1).then_some(Seq16((ack >> 16) as u16));
    LinkGuardianAck { leading_ack: Seq16(ack as u16), loss, received }
}

/// The Hop-by-Hop header of a data packet with these fields, if it carries any scheme field.
pub fn data_hbh(scheme: WireScheme, net_flags: u8, hseq: u16, fseq: u16, tc: u8, next_header: u8) -> Option<HbhRepr> {
    let mut h = HbhRepr::new(next_header);
    let f = net_flags;
    match scheme {
        WireScheme::None => {}
        WireScheme::Satguard => {
            if f & NET_HSEQ != 0 {
                h.hop = Some(SatguardHop {
                    hseq: Seq16(hseq),
                    retransmission: f & NET_RETX != 0,
                    migrated: f & NET_MIGRATED != 0,
                });
            }
            if f & NET_FSEQ != 0 {
                h.flow = Some(SatguardFlow { fseq: Seq16(fseq), delay_sensitive: is_delay_sensitive_tc(tc) });
            }
        }
        WireScheme::LinkGuardian => {
            if f & NET_HSEQ != 0 {
                h.lg_seq = Some(LinkGuardianSeq { seq: Seq16(hseq), retransmission: f & NET_RETX != 0, dummy: false });
            }
        }
    }
    (h.options().next().is_some()).then_some(h)
}

/// Bytes the scheme's Hop-by-Hop header adds to a protected data packet (SATGUARD: HSeq and FSeq;
/// LinkGuardian: its sequence number; none: 0).
pub fn data_header_bytes(scheme: WireScheme) -> u32 {
    data_hbh(scheme, NET_HSEQ | NET_FSEQ, 0, 0, 0, leoguard_wire::NEXT_HEADER_UDP).map_or(0, |h| h.buffer_len() as u32)
}

/// The Hop-by-Hop header of a link-local control packet: a SATGUARD HAck, a LinkGuardian dummy (it
/// carries a link sequence number) or a LinkGuardian ACK.
pub fn control_hbh(scheme: WireScheme, net_flags: u8, hseq: u16, ack: u64, next_header: u8) -> Option<HbhRepr> {
    let mut h = HbhRepr::new(next_header);
    match scheme {
        WireScheme::Satguard => h.hack = Some(satguard_hack(ack)),
        WireScheme::LinkGuardian if net_flags & NET_HSEQ != 0 => {
            h.lg_seq = Some(LinkGuardianSeq { seq: Seq16(hseq), retransmission: false, dummy: true });
        }
        WireScheme::LinkGuardian => h.lg_ack = Some(linkguardian_ack(ack)),
        WireScheme::None => return None,
    }
    Some(h)
}

/// The Hop-by-Hop header of `p` as it leaves on a link: a control packet's or a data packet's.
pub fn packet_hbh(scheme: WireScheme, p: &Packet, next_header: u8) -> Option<HbhRepr> {
    if p.net.flags & NET_CONTROL != 0 && p.dst == LINK_LOCAL_DST {
        control_hbh(scheme, p.net.flags, p.net.hseq, p.ack, next_header)
    } else {
        data_hbh(scheme, p.net.flags, p.net.hseq, p.net.fseq, p.net.tc, next_header)
    }
}

/// Sets `p`'s scheme fields from the header a packet arrived with (the inverse of [`packet_hbh`]):
/// HSeq, FSeq and their flags for data, the packed acknowledgement for control packets. Fields the
/// header does not carry are cleared, so a hook sees only what the wire delivered.
pub fn apply_hbh(h: Option<&HbhRepr>, p: &mut Packet) {
    p.net.flags &= !(NET_HSEQ | NET_FSEQ | NET_RETX | NET_MIGRATED);
    let Some(h) = h else { return };
    if let Some(hop) = h.hop {
        p.net.flags |= NET_HSEQ;
        p.net.hseq = hop.hseq.0;
        if hop.retransmission {
            p.net.flags |= NET_RETX;
        }
        if hop.migrated {
            p.net.flags |= NET_MIGRATED;
        }
    }
    if let Some(flow) = h.flow {
        p.net.flags |= NET_FSEQ;
        p.net.fseq = flow.fseq.0;
    }
    if let Some(s) = h.lg_seq {
        p.net.flags |= NET_HSEQ;
        p.net.hseq = s.seq.0;
        if s.retransmission {
            p.net.flags |= NET_RETX;
        }
    }
    if let Some(a) = h.hack {
        p.ack = u64::from(a.cum_start.0) | u64::from(a.cum_end.0) << 16 | u64::from(a.beam) << 32;
    }
    if let Some(a) = h.lg_ack {
        p.ack = u64::from(a.leading_ack.0);
        if let Some(l) = a.loss {
            p.ack |= u64::from(l.first_lost.0) << 16 | u64::from(l.hole_size) << 32 | 1 << 48;
        } else if let Some(r) = a.received {
            p.ack |= u64::from(r.0) << 16 | 1 << 49;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::NetFields;

    #[test]
    fn fields_survive_the_header_both_ways() {
        for (scheme, flags) in [
            (WireScheme::Satguard, NET_HSEQ | NET_FSEQ | NET_RETX),
            (WireScheme::Satguard, NET_HSEQ | NET_MIGRATED),
            (WireScheme::LinkGuardian, NET_HSEQ | NET_RETX),
        ] {
            let p = Packet {
                net: NetFields { tc: 0xb8, flags, hseq: 65_000, fseq: 7, ..Default::default() },
                ..Default::default()
            };
            let h = packet_hbh(scheme, &p, 17).unwrap();
            let mut buf = vec![0; h.buffer_len()];
            h.emit(&mut buf).unwrap();
            let mut q = Packet { net: NetFields { tc: 0xb8, ..Default::default() }, ..Default::default() };
            apply_hbh(Some(&HbhRepr::parse(&buf).unwrap()), &mut q);
            let fseq_kept = if flags & NET_FSEQ != 0 { p.net.fseq } else { 0 };
            assert_eq!((q.net.flags, q.net.hseq, q.net.fseq), (flags, p.net.hseq, fseq_kept), "{scheme:?}");
        }
        for (scheme, ack) in [
            (WireScheme::Satguard, 10 | 20 << 16 | 3 << 32),
            (WireScheme::LinkGuardian, 5 | 9 << 16 | 4 << 32 | 1 << 48),
            // A shared link's per-packet acknowledgement (the emulator lost it before: every packet
            // behind a hole timed out there, twice each).
            (WireScheme::LinkGuardian, 5 | 9 << 16 | 1 << 49),
            (WireScheme::LinkGuardian, 65_535),
        ] {
            let p = Packet {
                dst: LINK_LOCAL_DST,
                ack,
                net: NetFields { flags: NET_CONTROL, ..Default::default() },
                ..Default::default()
            };
            let h = packet_hbh(scheme, &p, 59).unwrap();
            let mut buf = vec![0; h.buffer_len()];
            h.emit(&mut buf).unwrap();
            let mut q = Packet::default();
            apply_hbh(Some(&HbhRepr::parse(&buf).unwrap()), &mut q);
            assert_eq!(q.ack, ack, "{scheme:?}");
        }
    }
}
