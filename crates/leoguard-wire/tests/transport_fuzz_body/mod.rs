// The body shared by the cargo-fuzz target fuzz/fuzz_targets/transport.rs (which `include!`s this
// file) and the stable-Rust smoke test tests/transport_fuzz_smoke.rs: the transport parser on any
// bytes; whatever parses must emit to the same bytes (the format has one encoding per value, reserved
// flag bits and an absent TSecr aside) and parse back to the same value. Any panic is a bug.
// (Plain comments, not `//!`: `include!` cannot take inner doc comments.)

use leoguard_wire::{TlvOptions, TransportMessage, TransportPacket};

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
    }
}
