//! LEOTP's header (ICDCS'23; REFERENCE.md "LEOTP": the layout of the authors' code over UDP). The
//! state machines that use it are `leoguard_proto::leotp`.
//!
//! 19 bytes, **little-endian** (the authors' code writes its C struct as it sits in memory; the one
//! leoguard format that is not big-endian):
//!
//! ```text
//!  0      1      2      3      4      5      6      7      8      9      10 ... 14 ... 18
//! +------+------+------+------+------+------+------+------+------+------+------+------+
//! | type |    wnd i16  |        ts u32 (ms)        |          len u32          | start u32 | end u32 |
//! +------+------+------+------+------+------+------+------+------+------+------+------+
//! type: 0 Interest, 1 Data (the values are leoguard's: REFERENCE.md names the two types only)
//! ```
//!
//! - An Interest asks for the byte range `[start, end)` (at most one MSS; the state machines check
//!   that) and carries the requester's rate in `wnd`, in units of 0.01 Mbit/s, capped at 300 Mbit/s;
//!   its `len` is 0. An Interest for the empty range (`start == end`) is a rate-only keep-alive.
//! - A Data packet carries `[start, end)` with `len = end - start` payload bytes after the header, and
//!   in `wnd` the producer's spare send-queue room in MSS. A Data packet with `len = 0` is a Void
//!   Packet Header (VPH): no payload, it tells nodes downstream that `[start, end)` is a hole
//!   already being recovered upstream.
//! - `ts` is a millisecond timestamp: the requester's clock in an Interest, and in Data the
//!   responder's echo of it advanced by the time it held the Interest, so `now - ts` at the requester
//!   is the hop's round trip with the two clocks cancelled.
//!
//! The UDP payload is at most [`LEOTP_MTU`] = 1472 bytes, so a Data packet carries at most
//! [`LEOTP_MSS`] = 1453 bytes.

use crate::error::{check_in, check_out, WireError};

/// Header length, bytes.
pub const LEOTP_HEADER_LEN: usize = 19;
/// Largest UDP payload LEOTP sends (1500-byte IPv4 MTU less 28 bytes of IP and UDP headers).
pub const LEOTP_MTU: usize = 1472;
/// Largest Data payload: the MTU less the header.
pub const LEOTP_MSS: usize = LEOTP_MTU - LEOTP_HEADER_LEN;
/// One unit of an Interest's rate field: 0.01 Mbit/s.
pub const RATE_UNIT_BPS: u64 = 10_000;
/// Highest rate an Interest can ask for (300 Mbit/s, 30 000 units).
pub const MAX_RATE_BPS: u64 = 300_000_000;

/// What a LEOTP packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeotpType {
    /// A request for a byte range (travels from consumer to producer).
    Interest,
    /// Data for a byte range, or a VPH (travels from producer to consumer).
    Data,
}

impl LeotpType {
    /// The type byte.
    pub fn byte(self) -> u8 {
        match self {
            LeotpType::Interest => 0,
            LeotpType::Data => 1,
        }
    }
}

/// An Interest's rate field for `bps`, rounded to the nearest 0.01 Mbit/s and capped at 300 Mbit/s.
pub fn rate_to_wnd(bps: u64) -> i16 {
    let units = (bps.min(MAX_RATE_BPS) + RATE_UNIT_BPS / 2) / RATE_UNIT_BPS;
    units as i16 // at most 30 000, which fits
}

/// The rate an Interest's `wnd` asks for, bit/s; `None` for a negative field. Fields above the
/// 300 Mbit/s cap read as the cap.
pub fn wnd_to_rate(wnd: i16) -> Option<u64> {
    (wnd >= 0).then(|| (wnd as u64 * RATE_UNIT_BPS).min(MAX_RATE_BPS))
}

/// The 19-byte LEOTP header, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeotpHeader {
    /// Interest or Data.
    pub kind: LeotpType,
    /// Interest: requested rate in 0.01 Mbit/s; Data: the producer's spare send-queue room in MSS.
    pub wnd: i16,
    /// Timestamp, milliseconds (see the module docs).
    pub ts_ms: u32,
    /// Payload length: 0 in an Interest and in a VPH, `end - start` in other Data.
    pub len: u32,
    /// First byte of the range.
    pub start: u32,
    /// One past the last byte of the range.
    pub end: u32,
}

impl LeotpHeader {
    /// An Interest for `[start, end)` at `rate_bps`.
    pub fn interest(start: u32, end: u32, rate_bps: u64, ts_ms: u32) -> LeotpHeader {
        LeotpHeader { kind: LeotpType::Interest, wnd: rate_to_wnd(rate_bps), ts_ms, len: 0, start, end }
    }

    /// A rate-only keep-alive: an Interest for the empty range at `at`.
    pub fn keepalive(at: u32, rate_bps: u64, ts_ms: u32) -> LeotpHeader {
        LeotpHeader::interest(at, at, rate_bps, ts_ms)
    }

    /// Data for `[start, end)` (`end - start` payload bytes follow), `wnd` MSS of send-queue room.
    pub fn data(start: u32, end: u32, wnd: i16, ts_ms: u32) -> LeotpHeader {
        LeotpHeader { kind: LeotpType::Data, wnd, ts_ms, len: end.wrapping_sub(start), start, end }
    }

    /// A Void Packet Header announcing the hole `[start, end)`.
    pub fn vph(start: u32, end: u32, wnd: i16, ts_ms: u32) -> LeotpHeader {
        LeotpHeader { kind: LeotpType::Data, wnd, ts_ms, len: 0, start, end }
    }

    /// A Data packet without payload: a VPH.
    pub fn is_vph(&self) -> bool {
        self.kind == LeotpType::Data && self.len == 0
    }

    /// An Interest for the empty range: a keep-alive.
    pub fn is_keepalive(&self) -> bool {
        self.kind == LeotpType::Interest && self.start == self.end
    }

    /// Bytes in the range.
    pub fn range_len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    /// Payload bytes that follow the header on the wire.
    pub fn payload_len(&self) -> usize {
        match self.kind {
            LeotpType::Interest => 0,
            LeotpType::Data => self.len as usize,
        }
    }

    /// The rate an Interest asks for, bit/s (`None` for Data or a negative field).
    pub fn requested_rate_bps(&self) -> Option<u64> {
        match self.kind {
            LeotpType::Interest => wnd_to_rate(self.wnd),
            LeotpType::Data => None,
        }
    }

    /// Checks the rules `parse` enforces, so `emit` never writes what `parse` would refuse.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.end < self.start {
            return Err(WireError::InvalidField { field: "LEOTP range (end before start)" });
        }
        match self.kind {
            LeotpType::Interest if self.len != 0 => {
                Err(WireError::InvalidField { field: "LEOTP Interest len (not 0)" })
            }
            LeotpType::Data if self.len as usize > LEOTP_MSS => {
                Err(WireError::InvalidField { field: "LEOTP Data len (over one MSS)" })
            }
            LeotpType::Data if self.len != 0 && self.len != self.end - self.start => {
                Err(WireError::Inconsistent { what: "LEOTP Data len differs from its range" })
            }
            _ => Ok(()),
        }
    }

    /// Parses the header at the start of `buf` (bytes after it are not looked at).
    pub fn parse(buf: &[u8]) -> Result<LeotpHeader, WireError> {
        check_in(buf, LEOTP_HEADER_LEN, "LEOTP header")?;
        let kind = match buf[0] {
            0 => LeotpType::Interest,
            1 => LeotpType::Data,
            _ => return Err(WireError::InvalidField { field: "LEOTP type (not Interest 0 or Data 1)" }),
        };
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let h = LeotpHeader {
            kind,
            wnd: i16::from_le_bytes([buf[1], buf[2]]),
            ts_ms: u32_at(3),
            len: u32_at(7),
            start: u32_at(11),
            end: u32_at(15),
        };
        h.validate()?;
        Ok(h)
    }

    /// Writes the header to the start of `buf`; returns [`LEOTP_HEADER_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.validate()?;
        check_out(buf, LEOTP_HEADER_LEN)?;
        buf[0] = self.kind.byte();
        buf[1..3].copy_from_slice(&self.wnd.to_le_bytes());
        buf[3..7].copy_from_slice(&self.ts_ms.to_le_bytes());
        buf[7..11].copy_from_slice(&self.len.to_le_bytes());
        buf[11..15].copy_from_slice(&self.start.to_le_bytes());
        buf[15..19].copy_from_slice(&self.end.to_le_bytes());
        Ok(LEOTP_HEADER_LEN)
    }
}

/// A whole LEOTP datagram (the UDP payload): header and payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeotpPacket<'a> {
    /// The header.
    pub header: LeotpHeader,
    /// `header.len` bytes of Data; empty for an Interest or a VPH.
    pub payload: &'a [u8],
}

impl<'a> LeotpPacket<'a> {
    /// Parses a datagram: a valid header followed by exactly its payload.
    pub fn parse(buf: &'a [u8]) -> Result<LeotpPacket<'a>, WireError> {
        let header = LeotpHeader::parse(buf)?;
        let need = LEOTP_HEADER_LEN + header.payload_len();
        check_in(buf, need, "LEOTP payload")?;
        if buf.len() != need {
            return Err(WireError::Inconsistent { what: "LEOTP datagram longer than its header says" });
        }
        Ok(LeotpPacket { header, payload: &buf[LEOTP_HEADER_LEN..] })
    }

    /// Datagram length.
    pub fn buffer_len(&self) -> usize {
        LEOTP_HEADER_LEN + self.header.payload_len()
    }

    /// Writes the datagram; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.payload.len() != self.header.payload_len() {
            return Err(WireError::Inconsistent { what: "LEOTP payload length differs from the header's len" });
        }
        let n = self.buffer_len();
        check_out(buf, n)?;
        self.header.emit(buf)?;
        buf[LEOTP_HEADER_LEN..n].copy_from_slice(self.payload);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// parse(bytes) == header and emit(header) == bytes.
    fn both_ways(bytes: &[u8; 19], h: LeotpHeader) {
        assert_eq!(LeotpHeader::parse(bytes), Ok(h), "parse {bytes:02x?}");
        let mut out = [0xAAu8; 24];
        assert_eq!(h.emit(&mut out), Ok(19));
        assert_eq!(&out[..19], bytes, "emit {h:?}");
        assert_eq!(out[19], 0xAA, "emit writes 19 bytes only");
    }

    #[test]
    fn vector_interest() {
        // Interest for [2906, 4359) (the third MSS) at 20 Mbit/s, sent at t = 1000 ms.
        both_ways(
            &[
                0x00, // type: Interest
                0xD0, 0x07, // wnd 2000 = 20.00 Mbit/s
                0xE8, 0x03, 0x00, 0x00, // ts 1000 ms
                0x00, 0x00, 0x00, 0x00, // len 0
                0x5A, 0x0B, 0x00, 0x00, // start 2906
                0x07, 0x11, 0x00, 0x00, // end 4359
            ],
            LeotpHeader::interest(2906, 4359, 20_000_000, 1000),
        );
    }

    #[test]
    fn vector_data_and_vph() {
        // Data for [0, 1453), 100 MSS of room at the producer, ts 0x01020304.
        let data = LeotpHeader::data(0, 1453, 100, 0x0102_0304);
        both_ways(
            &[
                0x01, // type: Data
                0x64, 0x00, // wnd 100 (MSS of room)
                0x04, 0x03, 0x02, 0x01, // ts
                0xAD, 0x05, 0x00, 0x00, // len 1453
                0x00, 0x00, 0x00, 0x00, // start 0
                0xAD, 0x05, 0x00, 0x00, // end 1453
            ],
            data,
        );
        assert!(!data.is_vph());
        // VPH for the hole [0x10000, 0x20000), wnd -1 (the field is signed).
        let vph = LeotpHeader::vph(0x1_0000, 0x2_0000, -1, 0xFFFF_FFFF);
        both_ways(
            &[
                0x01, 0xFF, 0xFF, // Data, wnd -1
                0xFF, 0xFF, 0xFF, 0xFF, // ts
                0x00, 0x00, 0x00, 0x00, // len 0: a VPH
                0x00, 0x00, 0x01, 0x00, // start 65536
                0x00, 0x00, 0x02, 0x00, // end 131072
            ],
            vph,
        );
        assert!(vph.is_vph() && vph.payload_len() == 0 && vph.range_len() == 0x1_0000);
    }

    #[test]
    fn vector_keepalive_capped_rate() {
        // Keep-alive (empty range at 7) asking for 1 Gbit/s: capped at 300 Mbit/s = 30 000 units.
        let k = LeotpHeader::keepalive(7, 1_000_000_000, 5);
        both_ways(
            &[
                0x00, 0x30, 0x75, // Interest, wnd 30000
                0x05, 0x00, 0x00, 0x00, // ts 5
                0x00, 0x00, 0x00, 0x00, // len
                0x07, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, // [7, 7)
            ],
            k,
        );
        assert!(k.is_keepalive());
        assert_eq!(k.requested_rate_bps(), Some(MAX_RATE_BPS));
    }

    #[test]
    fn rate_encoding() {
        assert_eq!(rate_to_wnd(0), 0);
        assert_eq!(rate_to_wnd(100_000), 10); // the 0.1 Mbit/s floor of hop CC
        assert_eq!(rate_to_wnd(12_345_678), 1235); // rounded to the nearest 0.01 Mbit/s
        assert_eq!(rate_to_wnd(300_000_000), 30_000);
        assert_eq!(rate_to_wnd(u64::MAX), 30_000);
        assert_eq!(wnd_to_rate(1235), Some(12_350_000));
        assert_eq!(wnd_to_rate(i16::MAX), Some(MAX_RATE_BPS));
        assert_eq!(wnd_to_rate(-1), None);
    }

    #[test]
    fn bad_headers_are_typed_errors() {
        let good = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0];
        assert!(LeotpHeader::parse(&good).is_ok());
        assert_eq!(
            LeotpHeader::parse(&good[..18]),
            Err(WireError::Truncated { what: "LEOTP header", need: 19, have: 18 })
        );
        let mut b = good;
        b[0] = 2;
        assert_eq!(
            LeotpHeader::parse(&b),
            Err(WireError::InvalidField { field: "LEOTP type (not Interest 0 or Data 1)" })
        );
        let mut b = good;
        b[11] = 3; // start 3 > end 2
        assert_eq!(LeotpHeader::parse(&b), Err(WireError::InvalidField { field: "LEOTP range (end before start)" }));
        let mut b = good;
        b[7] = 1; // an Interest with a payload length
        assert_eq!(LeotpHeader::parse(&b), Err(WireError::InvalidField { field: "LEOTP Interest len (not 0)" }));
        let mut b = good;
        b[0] = 1;
        b[7] = 5; // Data [1, 2) claiming 5 bytes
        assert_eq!(
            LeotpHeader::parse(&b),
            Err(WireError::Inconsistent { what: "LEOTP Data len differs from its range" })
        );
        let big = LeotpHeader::data(0, 1454, 0, 0);
        let mut out = [0u8; 19];
        assert_eq!(big.emit(&mut out), Err(WireError::InvalidField { field: "LEOTP Data len (over one MSS)" }));
        assert_eq!(
            LeotpHeader::data(0, 1, 0, 0).emit(&mut out[..18]),
            Err(WireError::BufferTooSmall { need: 19, have: 18 })
        );
    }

    #[test]
    fn whole_datagrams() {
        let h = LeotpHeader::data(10, 14, 3, 9);
        let mut buf = [0u8; 32];
        let n = LeotpPacket { header: h, payload: b"leo!" }.emit(&mut buf).expect("emit");
        assert_eq!(n, 23);
        assert_eq!(&buf[19..23], b"leo!");
        assert_eq!(LeotpPacket::parse(&buf[..n]), Ok(LeotpPacket { header: h, payload: b"leo!" }));
        assert_eq!(
            LeotpPacket::parse(&buf[..22]),
            Err(WireError::Truncated { what: "LEOTP payload", need: 23, have: 22 })
        );
        assert_eq!(
            LeotpPacket::parse(&buf[..24]),
            Err(WireError::Inconsistent { what: "LEOTP datagram longer than its header says" })
        );
        assert_eq!(
            LeotpPacket { header: h, payload: b"leo" }.emit(&mut buf),
            Err(WireError::Inconsistent { what: "LEOTP payload length differs from the header's len" })
        );
        let vph = LeotpHeader::vph(10, 14, 3, 9);
        let n = LeotpPacket { header: vph, payload: &[] }.emit(&mut buf).expect("emit");
        assert_eq!(LeotpPacket::parse(&buf[..n]), Ok(LeotpPacket { header: vph, payload: &[] }));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x1E07),
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// Every valid header round-trips; any 19 bytes parse or fail without panicking, and what
        /// parses emits the same bytes (every field is kept as it is).
        #[test]
        fn round_trip(data: bool, wnd: i16, ts: u32, start: u32, n in 0u32..=1453, vph: bool) {
            let end = start.saturating_add(n);
            let h = if !data {
                LeotpHeader { kind: LeotpType::Interest, wnd, ts_ms: ts, len: 0, start, end }
            } else if vph {
                LeotpHeader::vph(start, end, wnd, ts)
            } else {
                LeotpHeader::data(start, end, wnd, ts)
            };
            let mut buf = [0u8; 19];
            proptest::prop_assert_eq!(h.emit(&mut buf), Ok(19));
            proptest::prop_assert_eq!(LeotpHeader::parse(&buf), Ok(h));
        }

        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            if let Ok(h) = LeotpHeader::parse(&bytes) {
                let mut buf = [0u8; 19];
                proptest::prop_assert_eq!(h.emit(&mut buf), Ok(19));
                proptest::prop_assert_eq!(&buf[..], &bytes[..19]);
            }
            let _ = LeotpPacket::parse(&bytes);
        }
    }
}
