//! Property tests: parse(emit(r)) == r for arbitrary representations, parsers never panic on arbitrary
//! or mutated bytes, and sequence fields keep their RFC 1982 order across wrap.

mod fuzz_body;

use std::net::Ipv6Addr;

use leoguard_core::Seq16;
use leoguard_wire::{
    HbhRepr, Ipv6Packet, Ipv6Repr, LeoOption, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, SatguardFlow,
    SatguardHack, SatguardHop, UdpPacket, WireError,
};
use proptest::prelude::*;

fn seq() -> impl Strategy<Value = Seq16> {
    prop_oneof![any::<u16>(), 0xFFF0u16..=0xFFFF, 0u16..16].prop_map(Seq16)
}

fn hop() -> impl Strategy<Value = SatguardHop> {
    (seq(), any::<bool>(), any::<bool>()).prop_map(|(hseq, retransmission, migrated)| SatguardHop {
        hseq,
        retransmission,
        migrated,
    })
}

fn flow() -> impl Strategy<Value = SatguardFlow> {
    (seq(), any::<bool>()).prop_map(|(fseq, delay_sensitive)| SatguardFlow { fseq, delay_sensitive })
}

fn hack() -> impl Strategy<Value = SatguardHack> {
    (seq(), 0u16..0x8000, any::<u16>()).prop_map(|(start, span, beam)| SatguardHack {
        cum_start: start,
        cum_end: start.plus(span),
        beam,
    })
}

fn lg_seq() -> impl Strategy<Value = LinkGuardianSeq> {
    (seq(), any::<bool>(), any::<bool>()).prop_map(|(seq, retransmission, dummy)| LinkGuardianSeq {
        seq,
        retransmission,
        dummy,
    })
}

fn lg_ack() -> impl Strategy<Value = LinkGuardianAck> {
    // A loss notification, a per-packet acknowledgement (shared links) or neither; never both.
    (seq(), proptest::option::of((seq(), 1u16..=u16::MAX)), proptest::option::of(seq())).prop_map(
        |(leading_ack, loss, received)| LinkGuardianAck {
            leading_ack,
            loss: loss.map(|(first_lost, hole_size)| LinkGuardianLoss { first_lost, hole_size }),
            received: if loss.is_some() { None } else { received },
        },
    )
}

fn option() -> impl Strategy<Value = LeoOption> {
    prop_oneof![
        hop().prop_map(LeoOption::SatguardHop),
        flow().prop_map(LeoOption::SatguardFlow),
        hack().prop_map(LeoOption::SatguardHack),
        lg_seq().prop_map(LeoOption::LinkGuardianSeq),
        lg_ack().prop_map(LeoOption::LinkGuardianAck),
    ]
}

fn hbh() -> impl Strategy<Value = HbhRepr> {
    use proptest::option::of;
    // Any next header but 0: the Hop-by-Hop header may not follow itself (RFC 8200 §4.1).
    (1u8..=255, of(hop()), of(flow()), of(hack()), of(lg_seq()), of(lg_ack())).prop_map(
        |(next_header, hop, flow, hack, lg_seq, lg_ack)| HbhRepr {
            next_header,
            hop,
            flow,
            hack,
            lg_seq,
            lg_ack,
            skipped_unknown: 0,
        },
    )
}

fn addr() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}

fn header() -> impl Strategy<Value = Ipv6Repr> {
    (any::<u8>(), 0u32..=0xF_FFFF, 1u8..=255, any::<u8>(), addr(), addr()).prop_map(
        |(traffic_class, flow_label, next_header, hop_limit, src, dst)| Ipv6Repr {
            traffic_class,
            flow_label,
            payload_len: 0,
            next_header,
            hop_limit,
            src,
            dst,
        },
    )
}

fn packet_bytes() -> impl Strategy<Value = Vec<u8>> {
    (header(), proptest::option::of(hbh()), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(
        |(h, hbh, payload)| {
            let p = Ipv6Packet::new(h, hbh, &payload).expect("valid packet");
            let mut b = vec![0u8; p.buffer_len()];
            p.emit(&mut b).expect("emit");
            b
        },
    )
}

proptest! {
    #[test]
    fn option_round_trip(o in option()) {
        let mut b = [0u8; 10];
        let n = o.emit(&mut b).expect("emit");
        prop_assert_eq!(n, o.buffer_len());
        prop_assert_eq!(LeoOption::parse(&b[..n]), Ok(o));
    }

    #[test]
    fn hbh_round_trip_with_minimal_padding(h in hbh()) {
        let mut b = [0u8; 48];
        let n = h.emit(&mut b).expect("emit");
        let unpadded = 2 + h.options().map(|o| o.buffer_len()).sum::<usize>();
        prop_assert!(n % 8 == 0 && n >= unpadded && n - unpadded < 8, "n {} unpadded {}", n, unpadded);
        prop_assert_eq!(usize::from(b[1]), n / 8 - 1);
        prop_assert_eq!(HbhRepr::parse_prefix(&b[..n]), Ok((h, n)));
        // Too small a buffer is an error, never a panic or a partial write past the end.
        let too_small = matches!(h.emit(&mut b[..n - 1]), Err(WireError::BufferTooSmall { .. }));
        prop_assert!(too_small);
    }

    #[test]
    fn packet_round_trip(h in header(), hbh in proptest::option::of(hbh()), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let p = Ipv6Packet::new(h, hbh, &payload).expect("valid packet");
        let mut b = vec![0u8; p.buffer_len()];
        prop_assert_eq!(p.emit(&mut b), Ok(b.len()));
        prop_assert_eq!(Ipv6Packet::parse(&b), Ok(p));
        prop_assert_eq!(Ipv6Repr::parse(&b), Ok(p.header));
    }

    #[test]
    fn udp_round_trip(src in addr(), dst in addr(), sp in any::<u16>(), dp in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let u = UdpPacket { src_port: sp, dst_port: dp, payload: &payload };
        let mut b = vec![0u8; u.buffer_len()];
        prop_assert_eq!(u.emit(&mut b, &src, &dst), Ok(b.len()));
        prop_assert_eq!(UdpPacket::parse(&b, &src, &dst), Ok(u));
    }

    #[test]
    fn parsers_survive_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..128)) {
        fuzz_body::check(&data);
    }

    #[test]
    fn truncated_packets_are_errors(b in packet_bytes(), cut in any::<proptest::sample::Index>()) {
        let keep = cut.index(b.len());
        prop_assert!(Ipv6Packet::parse(&b[..keep]).is_err());
        fuzz_body::check(&b[..keep]);
    }

    #[test]
    fn bit_flips_never_panic(mut b in packet_bytes(), at in any::<proptest::sample::Index>(), bit in 0u8..8) {
        let i = at.index(b.len());
        b[i] ^= 1 << bit;
        fuzz_body::check(&b);
    }

    #[test]
    fn sequence_order_survives_wrap_on_the_wire(s in any::<u16>(), d in 1u16..0x8000) {
        let first = SatguardHop { hseq: Seq16(s), ..SatguardHop::default() };
        let later = SatguardHop { hseq: Seq16(s).plus(d), ..SatguardHop::default() };
        let wire = |h: SatguardHop| {
            let mut b = [0u8; 6];
            LeoOption::SatguardHop(h).emit(&mut b).expect("emit");
            match LeoOption::parse(&b) {
                Ok(LeoOption::SatguardHop(h)) => h.hseq,
                other => panic!("{other:?}"),
            }
        };
        prop_assert!(wire(later).after(wire(first)));
        prop_assert_eq!(wire(later).diff(wire(first)), i32::from(d));
        // A HAck interval starting at s and ending d later covers everything in between, wrap or not.
        let h = SatguardHack { cum_start: Seq16(s), cum_end: Seq16(s).plus(d), beam: 0 };
        let mut b = [0u8; 10];
        LeoOption::SatguardHack(h).emit(&mut b).expect("emit");
        prop_assert_eq!(LeoOption::parse(&b), Ok(LeoOption::SatguardHack(h)));
        prop_assert_eq!(h.len(), u32::from(d) + 1);
        prop_assert!(h.covers(Seq16(s).plus(d / 2)) && !h.covers(Seq16(s).plus(d).next()));
        // The same interval written backwards is rejected.
        let reversed = SatguardHack { cum_start: h.cum_end, cum_end: h.cum_start, beam: 0 };
        prop_assert!(reversed.emit_check().is_err());
    }
}

/// Helper so the property reads plainly: whether emit accepts a HAck.
trait EmitCheck {
    fn emit_check(&self) -> Result<usize, WireError>;
}

impl EmitCheck for SatguardHack {
    fn emit_check(&self) -> Result<usize, WireError> {
        LeoOption::SatguardHack(*self).emit(&mut [0u8; 10])
    }
}
