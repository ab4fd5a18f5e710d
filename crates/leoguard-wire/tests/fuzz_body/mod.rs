// The body shared by the cargo-fuzz target (fuzz/fuzz_targets/parse.rs, which `include!`s this file)
// and the stable-Rust smoke test (tests/fuzz_smoke.rs). It feeds the bytes to every parser; whatever
// parses must emit, and the emitted bytes must parse back to the same value. Any panic is a bug.
// (Plain comments, not `//!`: `include!` cannot take inner doc comments.)

use std::net::Ipv6Addr;

use leoguard_wire::{
    read_traffic_class, write_traffic_class, HbhRepr, Ipv6Packet, Ipv6Repr, LeoOption, UdpPacket, IPV6_HEADER_LEN,
};

/// Runs every parser on `data` and checks emit/parse round trips of whatever parses.
pub fn check(data: &[u8]) {
    if let Ok(p) = Ipv6Packet::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf).expect("a parsed packet emits");
        assert_eq!(n, buf.len());
        // Skipped unknown options are counted, not re-emitted.
        let mut expected = p;
        if let Some(h) = &mut expected.hbh {
            h.skipped_unknown = 0;
        }
        assert_eq!(Ipv6Packet::parse(&buf), Ok(expected));
        // Rewriting an option in place touches only that option.
        if let Some(mut hop) = p.hbh.and_then(|h| h.hop) {
            hop.hseq = hop.hseq.next();
            let mut copy = data.to_vec();
            Ipv6Packet::rewrite_option(&mut copy, LeoOption::SatguardHop(hop)).expect("rewrite");
            let q = Ipv6Packet::parse(&copy).expect("rewritten packet parses");
            assert_eq!(q.hbh.and_then(|h| h.hop), Some(hop));
            assert_eq!(q.hbh.map(|h| HbhRepr { hop: None, ..h }), p.hbh.map(|h| HbhRepr { hop: None, ..h }));
        }
    }
    if let Ok((h, used)) = HbhRepr::parse_prefix(data) {
        assert!(used % 8 == 0 && used <= data.len() && h.buffer_len() <= used);
        let mut buf = vec![0u8; h.buffer_len()];
        assert_eq!(h.emit(&mut buf), Ok(buf.len()));
        assert_eq!(HbhRepr::parse(&buf), Ok(HbhRepr { skipped_unknown: 0, ..h }));
    }
    if let Ok(o) = LeoOption::parse(data) {
        let mut buf = vec![0u8; o.buffer_len()];
        assert_eq!(o.emit(&mut buf), Ok(buf.len()));
        assert_eq!(LeoOption::parse(&buf), Ok(o));
    }
    if let Ok(h) = Ipv6Repr::parse(data) {
        let mut buf = vec![0u8; IPV6_HEADER_LEN + usize::from(h.payload_len)];
        assert_eq!(h.emit(&mut buf), Ok(IPV6_HEADER_LEN));
        assert_eq!(Ipv6Repr::parse(&buf), Ok(h));
        assert_eq!(read_traffic_class(data), Ok(h.traffic_class));
    }
    let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::from([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]));
    if let Ok(u) = UdpPacket::parse(data, &src, &dst) {
        let mut buf = vec![0u8; u.buffer_len()];
        assert_eq!(u.emit(&mut buf, &src, &dst), Ok(buf.len()));
        assert_eq!(UdpPacket::parse(&buf, &src, &dst), Ok(u));
    }
    let mut copy = data.to_vec();
    if write_traffic_class(&mut copy, 0xB8).is_ok() {
        assert_eq!(read_traffic_class(&copy), Ok(0xB8));
        assert_eq!(copy[2..], data[2..]);
    }
}
