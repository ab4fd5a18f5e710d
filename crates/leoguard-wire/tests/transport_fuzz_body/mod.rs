// The body shared by the cargo-fuzz target fuzz/fuzz_targets/transport.rs (which `include!`s this
// file) and the stable-Rust smoke test tests/transport_fuzz_smoke.rs: the transport parser on any
// bytes; whatever parses must emit to the same bytes (the format has one encoding per value, reserved
// flag bits and an absent TSecr aside) and parse back to the same value. Any panic is a bug.
// (Plain comments, not `//!`: `include!` cannot take inner doc comments.)

use leoguard_wire::transport::{OPTION_STARTCP, STARTCP_TLV_MAX};
use leoguard_wire::{StartcpOption, TlvOptions, TransportMessage, TransportPacket};

/// Runs the transport parser on `data` and checks the round trip of whatever parses.
pub fn check(data: &[u8]) {
    if let Ok(p) = TransportPacket::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        assert_eq!(p.emit(&mut buf), Ok(buf.len()));
        assert_eq!(buf.len(), data.len(), "every byte of a valid datagram is accounted for");
        // Equal but for the reserved flag bits and an absent TSecr's field, which are sent as zero.
        let mut expected = data.to_vec();
        expected[2] = buf[2];
        if matches!(p.message, TransportMessage::Ack(a) if a.ts_ecr_us.is_none()) {
            expected[16..24].fill(0);
        }
        assert_eq!(buf, expected);
        assert_eq!(TransportPacket::parse(&buf), Ok(p));
        for o in p.options.iter() {
            assert!(o.kind != 0 && o.buffer_len() <= p.options.len());
        }
        check_startcp(&p.options);
        if let TransportMessage::Ack(a) = p.message {
            assert!(a.blocks().iter().all(|&(s, e)| s < e));
        }
        let mut hdr = vec![0u8; p.header_len()];
        assert_eq!(p.emit_header(&mut hdr), Ok(hdr.len()));
        assert_eq!(hdr[..], buf[..hdr.len()]);
    }
    if let Ok(o) = TlvOptions::parse(data) {
        let list: Vec<_> = o.iter().collect();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(TlvOptions::emit_list(&list, &mut buf), Ok(data.len()));
        assert_eq!(buf, data);
        check_startcp(&o);
    }
    // Kind 1's value on its own: StarTCP's option data (the TCP option's bytes after kind and length).
    if let Ok(s) = StartcpOption::parse_data(data) {
        let mut tcp = [0u8; 9];
        let n = s.emit(&mut tcp).expect("room");
        assert_eq!(n, data.len() + 2);
        assert_eq!(StartcpOption::parse(&tcp[..n]), Ok(s));
        // Equal but for the reserved flag bits.
        assert_eq!(tcp[2..4], data[..2]);
        assert_eq!(tcp[4], data[2] & 0x07);
        assert_eq!(tcp[5..n], data[3..]);
    }
}

/// A parsed area's StarTCP option (kind 1) is well formed and emits to the bytes it came from.
fn check_startcp(o: &TlvOptions<'_>) {
    match (o.get(OPTION_STARTCP), o.startcp()) {
        (None, None) => {}
        (Some(raw), Some(s)) => {
            let mut area = [0u8; STARTCP_TLV_MAX];
            let n = TlvOptions::emit_startcp(&s, &mut area).expect("room");
            assert_eq!(n, raw.len() + 2);
            assert_eq!(area[2..4], raw[..2]);
            assert_eq!(area[4], raw[2] & 0x07, "reserved flag bits are sent as zero");
            assert_eq!(area[5..n], raw[3..]);
            assert_eq!(TlvOptions::parse(&area[..n]).map(|a| a.startcp()), Ok(Some(s)));
        }
        (raw, s) => panic!("a validated area's StarTCP option {raw:02x?} parsed as {s:?}"),
    }
}
