// The body shared by the cargo-fuzz target fuzz/fuzz_targets/leotp.rs (which `include!`s this file)
// and the stable-Rust smoke test tests/leotp_fuzz_smoke.rs: LEOTP's header and datagram parsers on
// any bytes. Whatever parses must emit to the same bytes (every header field is kept as it is) and
// parse back to the same value. Any panic is a bug.
// (Plain comments, not `//!`: `include!` cannot take inner doc comments.)

use leoguard_wire::leotp::{LeotpHeader, LeotpPacket, LEOTP_HEADER_LEN, LEOTP_MSS};

/// Runs both parsers on `data` and checks the round trip of whatever parses.
pub fn check(data: &[u8]) {
    if let Ok(h) = LeotpHeader::parse(data) {
        let mut buf = [0u8; LEOTP_HEADER_LEN];
        assert_eq!(h.emit(&mut buf), Ok(LEOTP_HEADER_LEN));
        assert_eq!(buf[..], data[..LEOTP_HEADER_LEN]);
        assert_eq!(LeotpHeader::parse(&buf), Ok(h));
        assert!(h.start <= h.end && h.payload_len() <= LEOTP_MSS);
        if h.is_vph() {
            assert_eq!(h.payload_len(), 0);
        }
    }
    if let Ok(p) = LeotpPacket::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        assert_eq!(p.emit(&mut buf), Ok(data.len()));
        assert_eq!(buf, data);
        assert_eq!(LeotpPacket::parse(&buf), Ok(p));
    }
}
