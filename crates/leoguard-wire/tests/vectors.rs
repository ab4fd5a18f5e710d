//! Byte-exact test vectors, written by hand from RFC 8200 (IPv6, Hop-by-Hop options, UDP checksum),
//! RFC 4727 (experimental option types) and docs/wire.md: each asserts parse(bytes) == repr and
//! emit(repr) == bytes.

use std::net::Ipv6Addr;

use leoguard_core::Seq16;
use leoguard_wire::{
    HbhRepr, Ipv6Packet, Ipv6Repr, LeoOption, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, OptionAction,
    SatguardFlow, SatguardHack, SatguardHop, UdpPacket, WireError,
};

fn a(s: &str) -> Ipv6Addr {
    s.parse().expect("test address")
}

fn option_both_ways(bytes: &[u8], opt: LeoOption) {
    assert_eq!(LeoOption::parse(bytes), Ok(opt), "parse {bytes:02x?}");
    let mut out = [0xAAu8; 16];
    let n = opt.emit(&mut out).expect("emit");
    assert_eq!(&out[..n], bytes, "emit {opt:?}");
    assert_eq!(opt.buffer_len(), bytes.len());
}

fn hbh_both_ways(bytes: &[u8], repr: HbhRepr) {
    assert_eq!(HbhRepr::parse(bytes), Ok(repr), "parse {bytes:02x?}");
    let mut out = [0xAAu8; 64];
    let n = repr.emit(&mut out).expect("emit");
    assert_eq!(&out[..n], bytes, "emit {repr:?}");
    assert_eq!(repr.buffer_len(), bytes.len());
}

fn packet_both_ways(bytes: &[u8], packet: Ipv6Packet<'_>) {
    assert_eq!(Ipv6Packet::parse(bytes), Ok(packet), "parse {bytes:02x?}");
    let mut out = [0xAAu8; 256];
    let n = packet.emit(&mut out).expect("emit");
    assert_eq!(&out[..n], bytes, "emit {packet:?}");
}

#[test]
fn option_satguard_hop() {
    option_both_ways(
        &[
            0x3E, // option type: act 00, chg 1, RFC 4727 experimental
            0x04, // Opt Data Len
            0x01, // subtype: SATGUARD hop
            0x03, // flags: retransmission | migrated
            0x12, 0x34, // HSeq 0x1234
        ],
        LeoOption::SatguardHop(SatguardHop { hseq: Seq16(0x1234), retransmission: true, migrated: true }),
    );
}

#[test]
fn option_satguard_flow() {
    option_both_ways(
        &[
            0x1E, // option type: act 00, chg 0
            0x04, // Opt Data Len
            0x02, // subtype: SATGUARD flow
            0x01, // flags: delay-sensitive
            0xFF, 0xFE, // FSeq 65534
        ],
        LeoOption::SatguardFlow(SatguardFlow { fseq: Seq16(0xFFFE), delay_sensitive: true }),
    );
}

#[test]
fn option_satguard_hack_across_wrap() {
    option_both_ways(
        &[
            0x1E, // option type: act 00, chg 0
            0x08, // Opt Data Len
            0x03, // subtype: SATGUARD HAck
            0x00, // flags: none defined
            0xFF, 0xF0, // cum_start 65520
            0x00, 0x05, // cum_end 5: the interval wraps (22 HSeqs)
            0x00, 0x07, // beam 7
        ],
        LeoOption::SatguardHack(SatguardHack { cum_start: Seq16(0xFFF0), cum_end: Seq16(5), beam: 7 }),
    );
}

#[test]
fn option_linkguardian_seq() {
    option_both_ways(
        &[
            0x3E, // option type: act 00, chg 1
            0x04, // Opt Data Len
            0x04, // subtype: LinkGuardian seq
            0x02, // flags: dummy
            0x00, 0x2A, // seq 42
        ],
        LeoOption::LinkGuardianSeq(LinkGuardianSeq { seq: Seq16(42), retransmission: false, dummy: true }),
    );
}

#[test]
fn option_linkguardian_ack() {
    option_both_ways(
        &[
            0x1E, // option type: act 00, chg 0
            0x08, // Opt Data Len
            0x05, // subtype: LinkGuardian ack
            0x01, // flags: loss notification present
            0x01, 0x00, // leading ACK 256
            0x00, 0xF8, // first lost 248
            0x00, 0x03, // hole size 3
        ],
        LeoOption::LinkGuardianAck(LinkGuardianAck {
            leading_ack: Seq16(256),
            loss: Some(LinkGuardianLoss { first_lost: Seq16(248), hole_size: 3 }),
            received: None,
        }),
    );
    option_both_ways(
        &[
            0x1E, 0x08, // type, Opt Data Len
            0x05, // subtype: LinkGuardian ack
            0x00, // flags: no loss notification
            0x00, 0x07, // leading ACK 7
            0x00, 0x00, 0x00, 0x00, // first lost, hole size: unused, zero
        ],
        LeoOption::LinkGuardianAck(LinkGuardianAck { leading_ack: Seq16(7), loss: None, received: None }),
    );
    option_both_ways(
        &[
            0x1E, 0x08, // type, Opt Data Len
            0x05, // subtype: LinkGuardian ack
            0x02, // flags: per-packet acknowledgement (shared link)
            0x00, 0x07, // leading ACK 7
            0x00, 0x0C, // received 12 (in the first-lost field)
            0x00, 0x00, // hole size: unused, zero
        ],
        LeoOption::LinkGuardianAck(LinkGuardianAck { leading_ack: Seq16(7), loss: None, received: Some(Seq16(12)) }),
    );
}

fn data_hbh() -> HbhRepr {
    HbhRepr {
        hop: Some(SatguardHop { hseq: Seq16(1), ..SatguardHop::default() }),
        flow: Some(SatguardFlow { fseq: Seq16(7), delay_sensitive: true }),
        ..HbhRepr::new(17)
    }
}

/// SATGUARD data packet's Hop-by-Hop header: hop + flow options = 16 bytes.
const DATA_HBH: [u8; 16] = [
    0x11, // Next Header: UDP
    0x01, // Hdr Ext Len: 1 => (1 + 1) * 8 = 16 bytes
    0x3E, 0x04, 0x01, 0x00, 0x00, 0x01, // hop: type, len, subtype, flags, HSeq 1
    0x1E, 0x04, 0x02, 0x01, 0x00, 0x07, // flow: type, len, subtype, flags delay-sensitive, FSeq 7
    0x01, 0x00, // PadN with 0 data bytes: 14 -> 16
];

#[test]
fn hbh_satguard_data() {
    hbh_both_ways(&DATA_HBH, data_hbh());
}

#[test]
fn hbh_hack() {
    hbh_both_ways(
        &[
            0x3B, // Next Header: 59, No Next Header
            0x01, // Hdr Ext Len: 16 bytes
            0x1E, 0x08, 0x03, 0x00, // HAck: type, len, subtype, flags
            0x00, 0x0A, 0x00, 0x0C, // cum_start 10, cum_end 12
            0x00, 0x00, // beam 0: one-to-one link
            0x01, 0x02, 0x00, 0x00, // PadN with 2 data bytes: 12 -> 16
        ],
        HbhRepr { hack: Some(SatguardHack { cum_start: Seq16(10), cum_end: Seq16(12), beam: 0 }), ..HbhRepr::new(59) },
    );
}

#[test]
fn hbh_linkguardian_data_and_ack() {
    hbh_both_ways(
        &[
            0x11, // Next Header: UDP
            0x00, // Hdr Ext Len: 8 bytes
            0x3E, 0x04, 0x04, 0x01, 0xFF, 0xFF, // LG seq: retransmission, seq 65535; no padding
        ],
        HbhRepr {
            lg_seq: Some(LinkGuardianSeq { seq: Seq16(0xFFFF), retransmission: true, dummy: false }),
            ..HbhRepr::new(17)
        },
    );
    hbh_both_ways(
        &[
            0x3B, 0x01, // No Next Header, 16 bytes
            0x1E, 0x08, 0x05, 0x01, // LG ack: type, len, subtype, flags loss
            0x00, 0x02, 0xFF, 0xFE, 0x00, 0x04, // leading 2, first lost 65534, hole 4
            0x01, 0x02, 0x00, 0x00, // PadN, 2 data bytes
        ],
        HbhRepr {
            lg_ack: Some(LinkGuardianAck {
                leading_ack: Seq16(2),
                loss: Some(LinkGuardianLoss { first_lost: Seq16(0xFFFE), hole_size: 4 }),
                received: None,
            }),
            ..HbhRepr::new(59)
        },
    );
}

#[test]
fn hbh_all_five_and_none() {
    hbh_both_ways(
        &[
            0x06, // Next Header: TCP
            0x04, // Hdr Ext Len: (4 + 1) * 8 = 40 bytes
            0x3E, 0x04, 0x01, 0x01, 0x00, 0x10, // hop: retransmission, HSeq 16
            0x1E, 0x04, 0x02, 0x00, 0x00, 0x20, // flow: FSeq 32
            0x1E, 0x08, 0x03, 0x00, 0x00, 0x01, 0x00, 0x02, 0x01, 0x00, // HAck [1, 2] beam 256
            0x3E, 0x04, 0x04, 0x00, 0x00, 0x30, // LG seq 48
            0x1E, 0x08, 0x05, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, // LG ack 64
        ], // 2 + 6 + 6 + 10 + 6 + 10 = 40: no padding
        HbhRepr {
            next_header: 6,
            hop: Some(SatguardHop { hseq: Seq16(16), retransmission: true, migrated: false }),
            flow: Some(SatguardFlow { fseq: Seq16(32), delay_sensitive: false }),
            hack: Some(SatguardHack { cum_start: Seq16(1), cum_end: Seq16(2), beam: 256 }),
            lg_seq: Some(LinkGuardianSeq { seq: Seq16(48), ..LinkGuardianSeq::default() }),
            lg_ack: Some(LinkGuardianAck { leading_ack: Seq16(64), loss: None, received: None }),
            skipped_unknown: 0,
        },
    );
    hbh_both_ways(
        &[0x3B, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00], // no options: PadN with 4 data bytes
        HbhRepr::new(59),
    );
}

#[test]
fn parse_accepts_other_padding_and_skips_unknown_act00() {
    // Same options as DATA_HBH, laid out differently: Pad1 first, an unknown act=00 option (Router
    // Alert, RFC 2711: type 0x05, 2 bytes), then padding as PadN and Pad1 bytes to 24 bytes.
    let bytes = [
        0x11, 0x02, // UDP, 24 bytes
        0x00, // Pad1
        0x05, 0x02, 0x00, 0x00, // Router Alert (act 00): skipped and counted
        0x3E, 0x04, 0x01, 0x00, 0x00, 0x01, // hop, HSeq 1
        0x01, 0x01, 0x00, // PadN, 1 data byte
        0x1E, 0x04, 0x02, 0x01, 0x00, 0x07, // flow, FSeq 7
        0x00, 0x00, // Pad1, Pad1
    ];
    assert_eq!(HbhRepr::parse_prefix(&bytes), Ok((HbhRepr { skipped_unknown: 1, ..data_hbh() }, 24)));
}

#[test]
fn parse_rejects() {
    let e = |b: &[u8]| HbhRepr::parse(b).expect_err("must reject");
    assert!(matches!(e(&[0x11]), WireError::Truncated { .. }));
    // Hdr Ext Len 1 says 16 bytes; only 8 given.
    assert_eq!(e(&[0x11, 0x01, 0x01, 0x04, 0, 0, 0, 0]), WireError::HeaderOverrun { header_len: 16, available: 8 });
    // PadN claiming 5 data bytes in a header with room for 4.
    assert_eq!(e(&[0x11, 0x00, 0x01, 0x05, 0, 0, 0, 0]), WireError::OptionOverrun { option_type: 1, offset: 2 });
    // An option type as the last byte: no room for its length.
    assert_eq!(e(&[0x11, 0x00, 0x01, 0x03, 0, 0, 0, 0x3E]), WireError::OptionOverrun { option_type: 0x3E, offset: 7 });
    // Hop option with 5 data bytes, then PadN with 5 data bytes: 2 + 7 + 7 = 16.
    assert_eq!(
        e(&[0x11, 0x01, 0x3E, 0x05, 0x01, 0, 0, 1, 0, 0x01, 0x05, 0, 0, 0, 0, 0]),
        WireError::OptionLength { subtype: 1, len: 5, expected: 4 }
    );
    // Subtype 0x09 is not defined; subtype 0x02 (flow) is defined only under 0x1E.
    assert_eq!(
        e(&[0x11, 0x00, 0x3E, 0x04, 0x09, 0x00, 0x00, 0x01]),
        WireError::UnknownSubtype { option_type: 0x3E, subtype: 9 }
    );
    assert_eq!(
        e(&[0x11, 0x00, 0x3E, 0x04, 0x02, 0x00, 0x00, 0x01]),
        WireError::UnknownSubtype { option_type: 0x3E, subtype: 2 }
    );
    // A leoguard option type with no data.
    assert_eq!(e(&[0x11, 0x00, 0x1E, 0x00, 0x01, 0x02, 0x00, 0x00]), WireError::MissingSubtype { option_type: 0x1E });
    // Two hop options.
    assert_eq!(
        e(&[0x11, 0x01, 0x3E, 0x04, 0x01, 0, 0, 1, 0x3E, 0x04, 0x01, 0, 0, 2, 0x01, 0x00]),
        WireError::DuplicateOption { subtype: 1 }
    );
    // Unknown options whose action is not "skip": 0x5E (RFC 4727, act 01), 0x9E (10), 0xDE (11).
    for (ty, action) in
        [(0x5E, OptionAction::Discard), (0x9E, OptionAction::DiscardIcmp), (0xDE, OptionAction::DiscardIcmpUnicast)]
    {
        assert_eq!(e(&[0x11, 0x00, ty, 0x04, 0x01, 0, 0, 1]), WireError::UnknownOption { option_type: ty, action });
    }
    // HAck interval that ends before it starts; LinkGuardian loss with an empty hole.
    assert!(matches!(
        e(&[0x3B, 0x01, 0x1E, 0x08, 0x03, 0, 0x00, 0x05, 0x00, 0x04, 0, 0, 0x01, 0x02, 0, 0]),
        WireError::InvalidField { .. }
    ));
    assert!(matches!(
        e(&[0x3B, 0x01, 0x1E, 0x08, 0x05, 0x01, 0, 5, 0, 4, 0, 0, 0x01, 0x02, 0, 0]),
        WireError::InvalidField { .. }
    ));
}

#[test]
fn emit_rejects_small_buffers_and_bad_fields() {
    let mut out = [0u8; 15];
    assert_eq!(data_hbh().emit(&mut out), Err(WireError::BufferTooSmall { need: 16, have: 15 }));
    let bad =
        HbhRepr { hack: Some(SatguardHack { cum_start: Seq16(5), cum_end: Seq16(4), beam: 0 }), ..HbhRepr::new(59) };
    assert!(matches!(bad.emit(&mut [0u8; 64]), Err(WireError::InvalidField { .. })));
    let header = Ipv6Repr {
        traffic_class: 0,
        flow_label: 0x10_0000,
        payload_len: 0,
        next_header: 59,
        hop_limit: 1,
        src: a("::1"),
        dst: a("::1"),
    };
    assert!(matches!(header.emit(&mut [0u8; 40]), Err(WireError::InvalidField { .. })));
}

/// SATGUARD data packet: IPv6 + HBH (hop + flow) + UDP 5000 -> 5001 carrying "leo!".
const DATA_PACKET: [u8; 68] = [
    // IPv6 fixed header (RFC 8200 §3)
    0x6B, 0x81, 0x23, 0x45, // version 6 | TC 0xB8 (DSCP EF) | flow label 0x12345
    0x00, 0x1C, // payload length 28 = 16 HBH + 8 UDP + 4 data
    0x00, // next header 0: Hop-by-Hop
    0x40, // hop limit 64
    0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src 2001:db8::1
    0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst 2001:db8::2
    // Hop-by-Hop header, as DATA_HBH
    0x11, 0x01, 0x3E, 0x04, 0x01, 0x00, 0x00, 0x01, 0x1E, 0x04, 0x02, 0x01, 0x00, 0x07, 0x01, 0x00,
    // UDP (RFC 768)
    0x13, 0x88, // src port 5000
    0x13, 0x89, // dst port 5001
    0x00, 0x0C, // length 12
    // Checksum by hand (RFC 8200 §8.1 pseudo-header, RFC 1071): 0x2001*2 + 0x0db8*2 + 1 + 2 (addresses)
    // + 0x000c (length) + 0x11 (next header) + 0x1388 + 0x1389 + 0x000c (UDP header) + 0x6c65 + 0x6f21
    // ("leo!") = 0x15e35 -> folded 0x5e36 -> complement 0xa1c9.
    0xA1, 0xC9, b'l', b'e', b'o', b'!',
];

#[test]
fn full_satguard_data_packet() {
    let header = Ipv6Repr {
        traffic_class: 0xB8,
        flow_label: 0x12345,
        payload_len: 28,
        next_header: 0,
        hop_limit: 64,
        src: a("2001:db8::1"),
        dst: a("2001:db8::2"),
    };
    let packet = Ipv6Packet { header, hbh: Some(data_hbh()), payload: &DATA_PACKET[56..] };
    packet_both_ways(&DATA_PACKET, packet);
    assert_eq!(Ipv6Packet::new(header, Some(data_hbh()), &DATA_PACKET[56..]), Ok(packet));
    assert!(packet.header.is_delay_sensitive());
    let udp = UdpPacket::parse(packet.payload, &header.src, &header.dst).expect("udp");
    assert_eq!(udp, UdpPacket { src_port: 5000, dst_port: 5001, payload: b"leo!" });
    let mut out = [0u8; 12];
    assert_eq!(udp.emit(&mut out, &header.src, &header.dst), Ok(12));
    assert_eq!(out, DATA_PACKET[56..]);
    // A flipped payload bit fails the checksum.
    let mut bad = out;
    bad[11] ^= 1;
    assert_eq!(UdpPacket::parse(&bad, &header.src, &header.dst), Err(WireError::BadChecksum));
}

/// SATGUARD HAck packet: link-local, HBH with the HAck option, No Next Header.
const HACK_PACKET: [u8; 56] = [
    0x6B, 0x80, 0x00, 0x00, // version 6 | TC 0xB8 | flow label 0
    0x00, 0x10, // payload length 16: the HBH header only
    0x00, // next header: Hop-by-Hop
    0xFF, // hop limit 255
    0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // src fe80::2 (downstream node)
    0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // dst fe80::1 (upstream node)
    0x3B, 0x01, // HBH: No Next Header, 16 bytes
    0x1E, 0x08, 0x03, 0x00, 0xFF, 0xFE, 0x00, 0x01, 0x00, 0x03, // HAck [65534, 1] beam 3
    0x01, 0x02, 0x00, 0x00, // PadN, 2 data bytes
];

#[test]
fn full_hack_packet() {
    let hack = SatguardHack { cum_start: Seq16(0xFFFE), cum_end: Seq16(1), beam: 3 };
    let packet = Ipv6Packet::hack(a("fe80::2"), a("fe80::1"), hack).expect("hack");
    packet_both_ways(&HACK_PACKET, packet);
    assert_eq!(packet.as_hack(), Some(hack));
    assert_eq!(hack.len(), 4);
    assert!(hack.covers(Seq16(0)) && !hack.covers(Seq16(2)));
}

#[test]
fn full_packet_without_hbh_and_inconsistent_ones() {
    let bytes = [
        0x60, 0x00, 0x00, 0x00, // version 6, TC 0, flow label 0
        0x00, 0x02, // payload length 2
        0x3B, 0x01, // No Next Header, hop limit 1
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // ::1
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // ::1
        0xAB, 0xCD, // payload
    ];
    let header = Ipv6Repr {
        traffic_class: 0,
        flow_label: 0,
        payload_len: 2,
        next_header: 59,
        hop_limit: 1,
        src: a("::1"),
        dst: a("::1"),
    };
    packet_both_ways(&bytes, Ipv6Packet { header, hbh: None, payload: &[0xAB, 0xCD] });
    // Trailing bytes past the payload length (link padding) are ignored; a short buffer is not.
    let mut long = bytes.to_vec();
    long.push(0);
    assert_eq!(Ipv6Packet::parse(&long).map(|p| p.payload.len()), Ok(2));
    assert!(matches!(Ipv6Packet::parse(&bytes[..41]), Err(WireError::Truncated { .. })));
    let mut v4 = bytes;
    v4[0] = 0x45;
    assert_eq!(Ipv6Packet::parse(&v4), Err(WireError::BadVersion { version: 4 }));
    let wrong_len = Ipv6Packet { header: Ipv6Repr { payload_len: 3, ..header }, hbh: None, payload: &[1, 2] };
    assert!(matches!(wrong_len.emit(&mut [0u8; 64]), Err(WireError::Inconsistent { .. })));
    let hbh_without_header = Ipv6Packet { header, hbh: Some(HbhRepr::new(59)), payload: &[] };
    assert!(matches!(hbh_without_header.emit(&mut [0u8; 64]), Err(WireError::Inconsistent { .. })));
}

#[test]
fn traffic_class_in_place() {
    let mut bytes = DATA_PACKET;
    assert_eq!(leoguard_wire::read_traffic_class(&bytes), Ok(0xB8));
    leoguard_wire::write_traffic_class(&mut bytes, 0x01).expect("write");
    assert_eq!(&bytes[..4], &[0x60, 0x11, 0x23, 0x45], "flow label and version untouched");
    let p = Ipv6Packet::parse(&bytes).expect("parse");
    assert_eq!(p.header.traffic_class, 0x01);
    assert!(!p.header.is_delay_sensitive());
    let mut h = p.header;
    h.set_delay_sensitive(true);
    assert_eq!(h.traffic_class, 0xB9, "ECN bits kept");
    assert!(h.is_delay_sensitive());
    assert_eq!(leoguard_wire::TC_DELAY_SENSITIVE, 0xB8);
}

#[test]
fn rewrite_hseq_in_place() {
    let mut bytes = DATA_PACKET;
    let hop = SatguardHop { hseq: Seq16(0xBEEF), retransmission: true, migrated: false };
    Ipv6Packet::rewrite_option(&mut bytes, LeoOption::SatguardHop(hop)).expect("rewrite");
    let mut expected = DATA_PACKET;
    expected[40 + 5] = 0x01; // flags: retransmission
    expected[40 + 6] = 0xBE; // HSeq
    expected[40 + 7] = 0xEF;
    assert_eq!(bytes, expected);
    let lg = LeoOption::LinkGuardianSeq(LinkGuardianSeq::default());
    assert!(matches!(Ipv6Packet::rewrite_option(&mut bytes, lg), Err(WireError::Inconsistent { .. })));
}

/// The header sizes docs/wire.md lists, computed by emit.
#[test]
fn header_sizes_in_docs() {
    let hop = Some(SatguardHop::default());
    let flow = Some(SatguardFlow::default());
    let hack = Some(SatguardHack::default());
    let lg_seq = Some(LinkGuardianSeq::default());
    let lg_ack = Some(LinkGuardianAck::default());
    let base = HbhRepr::new(17);
    let cases = [
        ("no options", base, 8),
        ("hop", HbhRepr { hop, ..base }, 8),
        ("flow", HbhRepr { flow, ..base }, 8),
        ("hop + flow (SATGUARD data)", HbhRepr { hop, flow, ..base }, 16),
        ("HAck", HbhRepr { hack, ..base }, 16),
        ("hop + flow + HAck", HbhRepr { hop, flow, hack, ..base }, 24),
        ("LinkGuardian seq", HbhRepr { lg_seq, ..base }, 8),
        ("LinkGuardian ack", HbhRepr { lg_ack, ..base }, 16),
        ("LinkGuardian seq + ack", HbhRepr { lg_seq, lg_ack, ..base }, 24),
        ("all five", HbhRepr { hop, flow, hack, lg_seq, lg_ack, ..base }, 40),
    ];
    for (name, repr, len) in cases {
        assert_eq!(repr.buffer_len(), len, "{name}");
        let mut out = [0u8; 64];
        assert_eq!(repr.emit(&mut out), Ok(len), "{name}");
    }
    assert_eq!(HACK_PACKET.len(), 56, "a HAck packet is 56 bytes of IPv6");
}
