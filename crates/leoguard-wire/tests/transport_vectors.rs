//! Byte-exact test vectors of the transport format (leoguard's TCP over UDP), written by hand from
//! docs/wire.md "User-space transport": each asserts parse(bytes) == repr and emit(repr) == bytes, and
//! the error vectors assert the typed error.

use leoguard_wire::transport::{STARTCP_TLV_MAX, TRANSPORT_VERSION};
use leoguard_wire::{
    AckRepr, DataSegment, StartcpOption, TlvOption, TlvOptions, TransportMessage, TransportPacket, WireError,
};

fn both_ways(bytes: &[u8], packet: TransportPacket<'_>) {
    assert_eq!(TransportPacket::parse(bytes), Ok(packet), "parse {bytes:02x?}");
    let mut out = [0xAAu8; 256];
    let n = packet.emit(&mut out).expect("emit");
    assert_eq!(&out[..n], bytes, "emit {packet:?}");
    assert_eq!(packet.buffer_len(), bytes.len());
}

#[test]
fn data_segment_with_payload() {
    let bytes = [
        0x01, // version 1
        0x01, // type: data
        0x00, // flags: original transmission
        0x00, // options length 0
        0x00, 0x00, 0x12, 0x34, // flow id 0x1234
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, // seq 65536
        0x00, 0x00, 0x00, 0x00, 0x00, 0x0F, 0x42, 0x40, // TSval 1 000 000 µs
        0x00, 0x04, // payload length 4
        b'l', b'e', b'o', b'!', // payload
    ];
    both_ways(
        &bytes,
        TransportPacket {
            flow: 0x1234,
            options: TlvOptions::EMPTY,
            message: TransportMessage::Data(DataSegment {
                seq: 65536,
                retransmission: false,
                ts_us: 1_000_000,
                payload: b"leo!",
            }),
        },
    );
}

#[test]
fn retransmitted_segment_with_an_unknown_option() {
    let bytes = [
        0x01, 0x01, // version 1, data
        0x01, // flags: retransmission
        0x05, // options length 5
        0xDE, 0xAD, 0xBE, 0xEF, // flow id
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // seq
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2A, // TSval 42 µs
        0x00, 0x01, // payload length 1
        0x7E, 0x03, 0x10, 0x20, 0x30, // option kind 126 (not critical, unknown here), 3 bytes of value
        0xFF, // payload
    ];
    let raw = [0x7E, 0x03, 0x10, 0x20, 0x30];
    let options = TlvOptions::parse(&raw).expect("options");
    assert_eq!(options.get(0x7E), Some(&[0x10, 0x20, 0x30][..]));
    assert_eq!(options.startcp(), None);
    assert_eq!(options.unknown_critical(&[]), None);
    both_ways(
        &bytes,
        TransportPacket {
            flow: 0xDEAD_BEEF,
            options,
            message: TransportMessage::Data(DataSegment {
                seq: 0x0102_0304_0506_0708,
                retransmission: true,
                ts_us: 42,
                payload: &[0xFF],
            }),
        },
    );
    // The same area built by the encoder.
    let mut area = [0u8; 8];
    let n = TlvOptions::emit_list(&[TlvOption { kind: 0x7E, value: &[0x10, 0x20, 0x30] }], &mut area).expect("encode");
    assert_eq!(&area[..n], &raw);
}

#[test]
fn startcp_probe() {
    // A stalled StarTCP sender's probe: a data segment without payload at snd_nxt, with kind 1
    // carrying the StarTCP option's data (ExID "ST", flags P).
    let bytes = [
        0x01, 0x01, // version 1, data
        0x00, // flags: not a retransmission
        0x05, // options length 5
        0x00, 0x00, 0x00, 0x09, // flow id 9
        0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, // seq 1 MiB (snd_nxt)
        0x00, 0x00, 0x00, 0x00, 0x01, 0xC9, 0xC3, 0x80, // TSval 30 000 000 µs
        0x00, 0x00, // payload length 0
        0x01, 0x03, // option kind 1 (StarTCP), 3 bytes
        0x53, 0x54, // ExID "ST" (as in TCP option 253)
        0x01, // flags: P (probe)
    ];
    let probe = StartcpOption { probe: true, recovered: false, next_handover_us: None };
    let mut area = [0u8; STARTCP_TLV_MAX];
    let n = TlvOptions::emit_startcp(&probe, &mut area).expect("encode");
    assert_eq!(&area[..n], &bytes[26..31]);
    let options = TlvOptions::parse(&area[..n]).expect("valid area");
    assert_eq!(options.startcp(), Some(probe));
    both_ways(
        &bytes,
        TransportPacket {
            flow: 9,
            options,
            message: TransportMessage::Data(DataSegment {
                seq: 1 << 20,
                retransmission: false,
                ts_us: 30_000_000,
                payload: &[],
            }),
        },
    );
    // The TLV's value is byte for byte the data of the TCP option (kind 253, length 5).
    let mut tcp = [0u8; 9];
    let m = probe.emit(&mut tcp).expect("tcp option");
    assert_eq!(&tcp[2..m], &bytes[28..31]);
}

#[test]
fn startcp_ack_with_a_prediction_and_a_recovery_notice() {
    let bytes = [
        0x01, 0x02, // version 1, ACK
        0x01, // flags: TSecr present
        0x09, // options length 9
        0x00, 0x00, 0x00, 0x09, // flow id 9
        0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, // cum 1 MiB
        0x00, 0x00, 0x00, 0x00, 0x01, 0xC9, 0xC3, 0x80, // TSecr 30 000 000 µs
        0x04, 0x00, 0x00, 0x00, // rwnd 64 MiB
        0x00, // no SACK blocks
        0x01, 0x07, // option kind 1 (StarTCP), 7 bytes
        0x53, 0x54, // ExID "ST"
        0x06, // flags: R (recovery notice) | H (a prediction follows)
        0x00, 0xE4, 0xE1, 0xC0, // the next handover 15 000 000 µs after this ACK left
    ];
    let sig = StartcpOption { probe: false, recovered: true, next_handover_us: Some(15_000_000) };
    let mut area = [0u8; STARTCP_TLV_MAX];
    let n = TlvOptions::emit_startcp(&sig, &mut area).expect("encode");
    assert_eq!(n, STARTCP_TLV_MAX);
    assert_eq!(&area[..n], &bytes[29..]);
    let options = TlvOptions::parse(&area[..n]).expect("valid area");
    assert_eq!(options.startcp(), Some(sig));
    let ack = AckRepr { cum: 1 << 20, rwnd: 64 << 20, ts_ecr_us: Some(30_000_000), ..AckRepr::default() };
    both_ways(&bytes, TransportPacket { flow: 9, options, message: TransportMessage::Ack(ack) });
}

#[test]
fn ack_without_sack_or_timestamp() {
    let bytes = [
        0x01, 0x02, // version 1, ACK
        0x00, // flags: no TSecr
        0x00, // options length
        0x00, 0x00, 0x00, 0x07, // flow id 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0xA8, // cum 1448
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // TSecr (absent)
        0x04, 0x00, 0x00, 0x00, // rwnd 64 MiB
        0x00, // no SACK blocks
    ];
    both_ways(
        &bytes,
        TransportPacket {
            flow: 7,
            options: TlvOptions::EMPTY,
            message: TransportMessage::Ack(AckRepr { cum: 1448, rwnd: 64 << 20, ..AckRepr::default() }),
        },
    );
}

#[test]
fn ack_with_a_dsack_block_and_two_sack_blocks() {
    let bytes = [
        0x01, 0x02, // version 1, ACK
        0x01, // flags: TSecr present
        0x00, // options length
        0x00, 0x00, 0x00, 0x01, // flow id 1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x27, 0x10, // cum 10000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xE8, // TSecr 1000 µs
        0x00, 0x01, 0x00, 0x00, // rwnd 65536
        0x03, // 3 blocks
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xE8, // DSACK [1000,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xD0, //        2000): below cum
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4E, 0x20, // SACK [20000,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x75, 0x30, //       30000)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9C, 0x40, // SACK [40000,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC3, 0x50, //       50000)
    ];
    let ack = AckRepr {
        cum: 10_000,
        sack: [(1000, 2000), (20_000, 30_000), (40_000, 50_000)],
        n_sack: 3,
        rwnd: 65_536,
        ts_ecr_us: Some(1000),
    };
    both_ways(&bytes, TransportPacket { flow: 1, options: TlvOptions::EMPTY, message: TransportMessage::Ack(ack) });
}

#[test]
fn fin_and_fin_ack() {
    let fin = [
        0x01, 0x03, 0x00, 0x00, // version 1, FIN, no flags, no options
        0x00, 0x00, 0x00, 0x02, // flow id 2
        0x00, 0x00, 0x00, 0x00, 0x3B, 0x9A, 0xCA, 0x00, // end 1e9
    ];
    both_ways(
        &fin,
        TransportPacket { flow: 2, options: TlvOptions::EMPTY, message: TransportMessage::Fin { end: 1_000_000_000 } },
    );
    let mut fin_ack = fin;
    fin_ack[1] = 0x04;
    both_ways(
        &fin_ack,
        TransportPacket {
            flow: 2,
            options: TlvOptions::EMPTY,
            message: TransportMessage::FinAck { end: 1_000_000_000 },
        },
    );
}

#[test]
fn reserved_flag_bits_are_ignored() {
    let mut bytes = [0x01, 0x03, 0xFE, 0x00, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
    assert_eq!(
        TransportPacket::parse(&bytes),
        Ok(TransportPacket { flow: 2, options: TlvOptions::EMPTY, message: TransportMessage::Fin { end: 9 } })
    );
    bytes[1] = 0x02; // an ACK with flags 0xFE: no TSecr
    let ack = [&bytes[..16], &[0u8; 13][..]].concat();
    match TransportPacket::parse(&ack).map(|p| p.message) {
        Ok(TransportMessage::Ack(a)) => assert_eq!(a.ts_ecr_us, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_are_typed() {
    let fin = [0x01, 0x03, 0x00, 0x00, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
    // Shorter than the common header.
    assert_eq!(
        TransportPacket::parse(&fin[..5]),
        Err(WireError::Truncated { what: "transport header", need: 8, have: 5 })
    );
    // A version this code does not speak.
    let mut v2 = fin;
    v2[0] = 2;
    assert_eq!(TransportPacket::parse(&v2), Err(WireError::UnsupportedVersion { format: "transport", version: 2 }));
    assert_eq!(TRANSPORT_VERSION, 1);
    // Unknown message type.
    let mut t9 = fin;
    t9[1] = 9;
    assert_eq!(TransportPacket::parse(&t9), Err(WireError::InvalidField { field: "transport message type" }));
    // A FIN cut short, and one with trailing bytes.
    assert_eq!(
        TransportPacket::parse(&fin[..12]),
        Err(WireError::Truncated { what: "transport FIN", need: 16, have: 12 })
    );
    let long = [&fin[..], &[0]].concat();
    assert_eq!(TransportPacket::parse(&long), Err(WireError::Inconsistent { what: "bytes after a transport FIN" }));
    // Options length running past the datagram.
    let mut opt = fin;
    opt[3] = 4;
    assert_eq!(TransportPacket::parse(&opt), Err(WireError::Truncated { what: "transport FIN", need: 20, have: 16 }));
    // A data header cut short.
    let data = [1u8, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3];
    assert_eq!(
        TransportPacket::parse(&data[..20]),
        Err(WireError::Truncated { what: "transport data header", need: 26, have: 20 })
    );
    assert!(TransportPacket::parse(&data).is_ok());
    // Payload length differing from what follows, either way.
    for cut in [&data[..28], &[&data[..], &[4]].concat()[..]] {
        assert_eq!(
            TransportPacket::parse(cut),
            Err(WireError::Inconsistent { what: "transport payload length differs from the datagram" })
        );
    }
    // A segment whose end lies beyond 2^64.
    let mut wrap = data;
    wrap[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(TransportPacket::parse(&wrap), Err(WireError::InvalidField { field: "transport segment beyond 2^64" }));
    // An ACK claiming 4 SACK blocks, one with an empty block, one with its blocks cut short.
    let mut ack = [0u8; 29 + 16];
    ack[..8].copy_from_slice(&[1, 2, 0, 0, 0, 0, 0, 1]);
    ack[28] = 4;
    assert_eq!(
        TransportPacket::parse(&ack),
        Err(WireError::InvalidField { field: "transport ACK with more than 3 SACK blocks" })
    );
    ack[28] = 1;
    assert_eq!(
        TransportPacket::parse(&ack),
        Err(WireError::InvalidField { field: "transport SACK block that does not end after it starts" })
    );
    assert_eq!(
        TransportPacket::parse(&ack[..40]),
        Err(WireError::Truncated { what: "transport ACK", need: 45, have: 40 })
    );
    // A bad options area inside a valid message.
    let mut bad_opt = [0u8; 18];
    bad_opt[..16].copy_from_slice(&fin);
    bad_opt[3] = 2;
    bad_opt[16..].copy_from_slice(&[0x05, 0x01]);
    assert_eq!(TransportPacket::parse(&bad_opt), Err(WireError::OptionOverrun { option_type: 5, offset: 0 }));
    // A StarTCP option (kind 1) whose data is not the TCP option's: too short, another ExID, the
    // prediction flag without a prediction, a prediction without the flag.
    for (value, err) in [
        (&[0x53][..], WireError::TcpOptionLength { kind: 253, len: 3, expected: 5 }),
        (&[0x53, 0x54], WireError::TcpOptionLength { kind: 253, len: 4, expected: 5 }),
        (&[0xF9, 0x89, 0x00], WireError::InvalidField { field: "StarTCP ExID (another experiment's option)" }),
        (&[0x53, 0x54, 0x04], WireError::TcpOptionLength { kind: 253, len: 5, expected: 9 }),
        (&[0x53, 0x54, 0x00, 0, 0, 0, 1], WireError::TcpOptionLength { kind: 253, len: 9, expected: 5 }),
    ] {
        let area = [&[0x01, value.len() as u8][..], value].concat();
        assert_eq!(TlvOptions::parse(&area), Err(err), "{area:02x?}");
        let mut dgram = fin.to_vec();
        dgram[3] = area.len() as u8;
        dgram.extend_from_slice(&area);
        assert_eq!(TransportPacket::parse(&dgram), Err(err), "{dgram:02x?}");
    }
    assert_eq!(
        TlvOptions::emit_startcp(&StartcpOption::default(), &mut [0u8; 4]),
        Err(WireError::BufferTooSmall { need: 5, have: 4 })
    );
    // emit into too small a buffer.
    let p = TransportPacket::parse(&fin).expect("valid");
    assert_eq!(p.emit(&mut [0u8; 10]), Err(WireError::BufferTooSmall { need: 16, have: 10 }));
}
