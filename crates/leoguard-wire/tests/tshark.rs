//! Cross-check with an independent decoder: write a pcap of leoguard packets and read it back with
//! tshark (Wireshark's CLI). tshark must see a well-formed Hop-by-Hop header of the right length
//! holding RFC 4727 experimental options 0x3E/0x1E with leoguard's data, and raise no expert info.

use std::fs::File;
use std::io::BufWriter;
use std::net::Ipv6Addr;
use std::process::Command;

use leoguard_core::Seq16;
use leoguard_wire::{
    HbhRepr, Ipv6Packet, Ipv6Repr, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, PcapWriter, SatguardFlow,
    SatguardHack, SatguardHop, UdpPacket, NEXT_HEADER_NONE, NEXT_HEADER_UDP, TC_DELAY_SENSITIVE,
};

fn a(s: &str) -> Ipv6Addr {
    s.parse().expect("test address")
}

/// An IPv6 + HBH + UDP packet (ephemeral ports, so no heuristic dissector claims the payload).
fn udp_packet(hbh: HbhRepr) -> Vec<u8> {
    let (src, dst) = (a("2001:db8::1"), a("2001:db8::2"));
    let udp = UdpPacket { src_port: 49_152, dst_port: 49_153, payload: b"leoguard" };
    let mut upper = vec![0u8; udp.buffer_len()];
    udp.emit(&mut upper, &src, &dst).expect("udp emit");
    let header = Ipv6Repr {
        traffic_class: TC_DELAY_SENSITIVE,
        flow_label: 0x12345,
        payload_len: 0,
        next_header: 0,
        hop_limit: 64,
        src,
        dst,
    };
    let packet = Ipv6Packet::new(header, Some(hbh), &upper).expect("packet");
    let mut out = vec![0u8; packet.buffer_len()];
    packet.emit(&mut out).expect("emit");
    out
}

fn emit(packet: &Ipv6Packet<'_>) -> Vec<u8> {
    let mut out = vec![0u8; packet.buffer_len()];
    packet.emit(&mut out).expect("emit");
    out
}

fn run_tshark(args: &[&str]) -> String {
    let out = match Command::new("tshark").args(args).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run tshark ({e}): run `make setup` to install it (apt package tshark)"),
    };
    assert!(out.status.success(), "tshark {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("tshark prints UTF-8")
}

/// What tshark says about one packet's Hop-by-Hop header.
#[derive(Debug, PartialEq)]
struct HbhDecode {
    /// "[Length: N bytes]".
    len_bytes: usize,
    /// (option type, option length, "Experimental Option" hex data when tshark prints it).
    options: Vec<(u8, u8, Option<String>)>,
}

/// Pulls the Hop-by-Hop section out of one frame of `tshark -V` output, whose lines look like
///   IPv6 Hop-by-Hop Option / Next Header: UDP (17) / Length: 1 / [Length: 16 bytes] /
///   Experimental (0x3E) / Type: Experimental (0x3E) (0x3e) / (bit lines) / Length: 4 /
///   Experimental Option: 01000001 / PadN / Type: PadN (0x01) / ... / Length: 0 / PadN: <none>
fn hbh_decode(frame: &str) -> HbhDecode {
    let mut lines = frame.lines().map(str::trim).skip_while(|l| *l != "IPv6 Hop-by-Hop Option");
    assert!(lines.next().is_some(), "no IPv6 Hop-by-Hop Option in:\n{frame}");
    let mut len_bytes = None;
    let mut options: Vec<(u8, u8, Option<String>)> = Vec::new();
    let mut pending_type: Option<u8> = None;
    for l in lines {
        if l.starts_with("User Datagram Protocol") || l.starts_with('[') && l.contains("Malformed") {
            break;
        }
        if let Some(rest) = l.strip_prefix("[Length: ") {
            len_bytes = rest.strip_suffix(" bytes]").and_then(|n| n.parse().ok());
        } else if let Some(rest) = l.strip_prefix("Type: ") {
            let hex = rest.rsplit("(0x").next().and_then(|h| h.strip_suffix(')'));
            pending_type = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
            assert!(pending_type.is_some(), "cannot read option type from {l:?}");
        } else if let (Some(rest), Some(ty)) = (l.strip_prefix("Length: "), pending_type) {
            options.push((ty, rest.parse().expect("option length"), None));
            pending_type = None;
        } else if let Some(rest) = l.strip_prefix("Experimental Option: ") {
            options.last_mut().expect("data after an option").2 = Some(rest.to_string());
        }
    }
    HbhDecode { len_bytes: len_bytes.expect("[Length: N bytes] line"), options }
}

#[test]
fn tshark_decodes_leoguard_hop_by_hop_options() {
    let sg_data = udp_packet(HbhRepr {
        hop: Some(SatguardHop { hseq: Seq16(0x0102), retransmission: true, migrated: false }),
        flow: Some(SatguardFlow { fseq: Seq16(0xFFFF), delay_sensitive: true }),
        ..HbhRepr::new(NEXT_HEADER_UDP)
    });
    let hack = SatguardHack { cum_start: Seq16(0xFFFE), cum_end: Seq16(1), beam: 3 };
    let sg_hack = emit(&Ipv6Packet::hack(a("fe80::2"), a("fe80::1"), hack).expect("hack"));
    let lg_data = udp_packet(HbhRepr {
        lg_seq: Some(LinkGuardianSeq { seq: Seq16(42), retransmission: false, dummy: true }),
        ..HbhRepr::new(NEXT_HEADER_UDP)
    });
    let lg_ack_hbh = HbhRepr {
        lg_ack: Some(LinkGuardianAck {
            leading_ack: Seq16(300),
            loss: Some(LinkGuardianLoss { first_lost: Seq16(290), hole_size: 2 }),
            received: None,
        }),
        ..HbhRepr::new(NEXT_HEADER_NONE)
    };
    let lg_ack_header = Ipv6Repr {
        traffic_class: 0,
        flow_label: 0,
        payload_len: 0,
        next_header: 0,
        hop_limit: 255,
        src: a("fe80::2"),
        dst: a("fe80::1"),
    };
    let lg_ack = emit(&Ipv6Packet::new(lg_ack_header, Some(lg_ack_hbh), &[]).expect("lg ack"));

    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("leoguard-wire-tshark.pcap");
    let mut w = PcapWriter::new(BufWriter::new(File::create(&path).expect("create pcap"))).expect("pcap");
    for (i, p) in [&sg_data, &sg_hack, &lg_data, &lg_ack].into_iter().enumerate() {
        w.write_packet(1_700_000_000_000_000_000 + i as u64 * 1_500_000, p).expect("write");
    }
    w.into_inner().expect("flush");
    let file = path.to_str().expect("utf-8 path");

    let text = run_tshark(&["-r", file, "-V", "-o", "udp.check_checksum:TRUE"]);
    assert!(!text.contains("Malformed"), "tshark reports a malformed packet:\n{text}");
    assert!(!text.contains("Expert Info"), "tshark raises expert info:\n{text}");
    let frames: Vec<&str> = text.split("\nFrame ").collect();
    assert_eq!(frames.len(), 4, "four frames:\n{text}");
    for f in &frames {
        assert!(f.contains("Encapsulation type: Raw IP"), "LINKTYPE_RAW:\n{f}");
        assert!(f.contains("Internet Protocol Version 6"), "IPv6:\n{f}");
    }
    // Microsecond timestamps from integer nanoseconds: the second record is 1.5 ms after the first.
    assert!(frames[1].contains("Epoch Time: 1700000000.001500000 seconds"), "{}", frames[1]);

    let padn = |n: u8| (0x01, n, None);
    let exp = |ty: u8, n: u8, hex: &str| (ty, n, Some(hex.to_string()));
    // SATGUARD data: hop (subtype 01, flags retx, HSeq 0x0102) + flow (02, delay-sensitive, 0xffff).
    assert_eq!(
        hbh_decode(frames[0]),
        HbhDecode { len_bytes: 16, options: vec![exp(0x3e, 4, "01010102"), exp(0x1e, 4, "0201ffff"), padn(0)] }
    );
    assert!(frames[0].contains("Next Header: UDP (17)"), "{}", frames[0]);
    assert!(frames[0].contains("[Checksum Status: Good]"), "{}", frames[0]);
    assert!(frames[0].contains("DSCP: EF PHB"), "{}", frames[0]);
    // SATGUARD HAck: [65534, 1], beam 3, No Next Header.
    assert_eq!(
        hbh_decode(frames[1]),
        HbhDecode { len_bytes: 16, options: vec![exp(0x1e, 8, "0300fffe00010003"), padn(2)] }
    );
    assert!(frames[1].contains("Next Header: No Next Header for IPv6 (59)"), "{}", frames[1]);
    // LinkGuardian data: seq 42, dummy; 8 bytes, no padding.
    assert_eq!(hbh_decode(frames[2]), HbhDecode { len_bytes: 8, options: vec![exp(0x3e, 4, "0402002a")] });
    assert!(frames[2].contains("[Checksum Status: Good]"), "{}", frames[2]);
    // LinkGuardian ack: leading 300, first lost 290, hole 2.
    assert_eq!(
        hbh_decode(frames[3]),
        HbhDecode { len_bytes: 16, options: vec![exp(0x1e, 8, "0501012c01220002"), padn(2)] }
    );
    // tshark's expert summary is empty: no errors, warnings or notes anywhere.
    let expert = run_tshark(&["-r", file, "-q", "-z", "expert", "-o", "udp.check_checksum:TRUE"]);
    assert_eq!(expert.trim(), "", "tshark expert info:\n{expert}");
}
