//! StarTCP's signals in leoguard's own TCP packets (papers/startcp.txt §2; the state machines are
//! `leoguard_proto::startcp`): one experimental TCP option.
//!
//! It uses the shared experimental option kind 253 (RFC 4727) with an RFC 6994 Experiment
//! Identifier, so it can coexist with other experiments using kind 253. The ExID is `0x5354`
//! (ASCII "ST"), chosen by leoguard and **not registered with IANA**: it is for leoguard's emulated
//! and simulated paths; a deployment on the Internet would request its own (RFC 6994 §4).
//!
//! ```text
//!  0        1        2        3        4        5        6        7        8
//! +--------+--------+--------+--------+--------+--------+--------+--------+--------+
//! |  253   | length |  ExID 0x53 0x54 | flags  | next handover, us (u32, if H)     |
//! +--------+--------+--------+--------+--------+--------+--------+--------+--------+
//! flags: 0x01 P probe (sender -> receiver: a stalled sender's probe, no data)
//!        0x02 R recovery notice (receiver -> sender: the link is back, resume)
//!        0x04 H a prediction follows; bits 3-7 reserved (sent 0, ignored)
//! length: 5 without a prediction, 9 with one
//! ```
//!
//! The prediction is the time from **this packet's own send time** to the next predicted handover,
//! in microseconds (big-endian u32, up to about 71 minutes). Carrying an offset instead of a time
//! means the two ends need no clock synchronisation: the sender takes the handover to be at
//! `arrival - OWD + offset` on its own clock, with its one-way delay estimate (half the minimum RTT).
//! `emit` writes exactly [`StartcpOption::buffer_len`] bytes; padding the TCP options area to a
//! multiple of 4 (NOPs) is the header writer's job.

use crate::error::{check_in, check_out, WireError};

/// TCP option kind for RFC 6994 shared experiments (RFC 4727: 253 and 254).
pub const TCP_OPT_EXP: u8 = 253;
/// leoguard's StarTCP Experiment Identifier (not IANA-registered; see the module docs).
pub const STARTCP_EXID: u16 = 0x5354;
/// Option length without a prediction.
pub const LEN_BARE: u8 = 5;
/// Option length with a prediction.
pub const LEN_PREDICTION: u8 = 9;

const FLAG_PROBE: u8 = 0x01;
const FLAG_RECOVERED: u8 = 0x02;
const FLAG_PREDICTION: u8 = 0x04;

/// TCP option kinds 0 (End of Option List) and 1 (No-Operation), one byte each (RFC 9293).
const TCP_OPT_EOL: u8 = 0;
const TCP_OPT_NOP: u8 = 1;

/// The StarTCP option: probe flag, recovery notice, predicted next handover.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StartcpOption {
    /// A stalled sender's probe (flag P).
    pub probe: bool,
    /// The receiver's recovery notice (flag R).
    pub recovered: bool,
    /// Microseconds from this packet's send time to the next predicted handover (flag H).
    pub next_handover_us: Option<u32>,
}

impl StartcpOption {
    /// Bytes the option takes: 5, or 9 with a prediction.
    pub fn buffer_len(&self) -> usize {
        usize::from(if self.next_handover_us.is_some() { LEN_PREDICTION } else { LEN_BARE })
    }

    /// Parses the option at the start of `buf` (bytes after its length are not looked at).
    pub fn parse(buf: &[u8]) -> Result<StartcpOption, WireError> {
        check_in(buf, 2, "StarTCP option")?;
        if buf[0] != TCP_OPT_EXP {
            return Err(WireError::InvalidField { field: "StarTCP option kind (not 253)" });
        }
        let len = buf[1];
        if len < 4 {
            // Too short even for the ExID: no experiment can be identified.
            return Err(WireError::TcpOptionLength { kind: TCP_OPT_EXP, len, expected: LEN_BARE });
        }
        check_in(buf, usize::from(len), "StarTCP option")?;
        Self::parse_data(&buf[2..usize::from(len)])
    }

    /// Parses the option's data, the bytes after its kind and length (ExID, flags, prediction): the
    /// value of `leoguard-transport`'s TLV option kind 1 ([`crate::transport::OPTION_STARTCP`]).
    /// Exactly 3 or 7 bytes, as the flags say.
    pub fn parse_data(data: &[u8]) -> Result<StartcpOption, WireError> {
        // Errors name the TCP option's length (the data's plus its kind and length bytes).
        let len = u8::try_from(data.len() + 2).unwrap_or(u8::MAX);
        if data.len() < 2 {
            return Err(WireError::TcpOptionLength { kind: TCP_OPT_EXP, len, expected: LEN_BARE });
        }
        if u16::from_be_bytes([data[0], data[1]]) != STARTCP_EXID {
            return Err(WireError::InvalidField { field: "StarTCP ExID (another experiment's option)" });
        }
        if len < LEN_BARE {
            return Err(WireError::TcpOptionLength { kind: TCP_OPT_EXP, len, expected: LEN_BARE });
        }
        let flags = data[2];
        let expected = if flags & FLAG_PREDICTION != 0 { LEN_PREDICTION } else { LEN_BARE };
        if len != expected {
            return Err(WireError::TcpOptionLength { kind: TCP_OPT_EXP, len, expected });
        }
        Ok(StartcpOption {
            probe: flags & FLAG_PROBE != 0,
            recovered: flags & FLAG_RECOVERED != 0,
            next_handover_us: (expected == LEN_PREDICTION)
                .then(|| u32::from_be_bytes([data[3], data[4], data[5], data[6]])),
        })
    }

    /// Bytes of the option's data (its length less the kind and length bytes): 3, or 7 with a
    /// prediction.
    pub fn data_len(&self) -> usize {
        self.buffer_len() - 2
    }

    /// Writes the option to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        buf[0] = TCP_OPT_EXP;
        buf[1] = len as u8; // 5 or 9
        self.emit_data(&mut buf[2..len])?;
        Ok(len)
    }

    /// Writes the option's data (ExID, flags, prediction; see [`StartcpOption::parse_data`]) to the
    /// start of `buf`; returns its length.
    pub fn emit_data(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.data_len();
        check_out(buf, len)?;
        let b = &mut buf[..len];
        b[0..2].copy_from_slice(&STARTCP_EXID.to_be_bytes());
        b[2] = if self.probe { FLAG_PROBE } else { 0 } | if self.recovered { FLAG_RECOVERED } else { 0 };
        if let Some(us) = self.next_handover_us {
            b[2] |= FLAG_PREDICTION;
            b[3..7].copy_from_slice(&us.to_be_bytes());
        }
        Ok(len)
    }

    /// Finds the StarTCP option in a TCP header's options area (RFC 9293 §3.1: End of Option List,
    /// No-Operation, and kind-length-data options). Other options, kind 253 with another ExID
    /// included, are skipped; a malformed option list or a second StarTCP option is an error.
    pub fn find(options: &[u8]) -> Result<Option<StartcpOption>, WireError> {
        let mut found = None;
        let mut at = 0;
        while at < options.len() {
            let kind = options[at];
            match kind {
                TCP_OPT_EOL => break,
                TCP_OPT_NOP => {
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let Some(&len) = options.get(at + 1) else {
                return Err(WireError::Truncated { what: "TCP option length", need: at + 2, have: options.len() });
            };
            if len < 2 {
                return Err(WireError::TcpOptionLength { kind, len, expected: 2 });
            }
            let end = at + usize::from(len);
            if end > options.len() {
                return Err(WireError::OptionOverrun { option_type: kind, offset: at });
            }
            let opt = &options[at..end];
            if kind == TCP_OPT_EXP && len >= 4 && u16::from_be_bytes([opt[2], opt[3]]) == STARTCP_EXID {
                if found.is_some() {
                    return Err(WireError::Inconsistent { what: "two StarTCP options in one TCP header" });
                }
                found = Some(StartcpOption::parse(opt)?);
            }
            at = end;
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// parse(bytes) == opt and emit(opt) == bytes.
    fn both_ways(bytes: &[u8], opt: StartcpOption) {
        assert_eq!(StartcpOption::parse(bytes), Ok(opt), "parse {bytes:02x?}");
        let mut out = [0xAAu8; 12];
        let n = opt.emit(&mut out).expect("emit");
        assert_eq!(&out[..n], bytes, "emit {opt:?}");
        assert_eq!(opt.buffer_len(), bytes.len());
    }

    #[test]
    fn vector_probe() {
        both_ways(
            &[
                0xFD, // kind 253: RFC 6994 shared experimental option
                0x05, // length: no prediction
                0x53, 0x54, // ExID "ST"
                0x01, // flags: P (probe)
            ],
            StartcpOption { probe: true, recovered: false, next_handover_us: None },
        );
    }

    #[test]
    fn vector_prediction_and_notice() {
        both_ways(
            &[
                0xFD, 0x09, // kind 253, length 9: a prediction follows
                0x53, 0x54, // ExID
                0x06, // flags: R (recovery notice) | H (prediction)
                0x00, 0xE4, 0xE1, 0xC0, // 15 000 000 us: the next handover 15 s after this packet left
            ],
            StartcpOption { probe: false, recovered: true, next_handover_us: Some(15_000_000) },
        );
        both_ways(
            &[0xFD, 0x09, 0x53, 0x54, 0x04, 0xFF, 0xFF, 0xFF, 0xFF],
            StartcpOption { probe: false, recovered: false, next_handover_us: Some(u32::MAX) },
        );
        both_ways(&[0xFD, 0x05, 0x53, 0x54, 0x00], StartcpOption::default());
    }

    #[test]
    fn reserved_flags_are_ignored_and_trailing_bytes_not_read() {
        let opt = StartcpOption::parse(&[0xFD, 0x05, 0x53, 0x54, 0xF9, 0xEE]).unwrap();
        assert_eq!(opt, StartcpOption { probe: true, recovered: false, next_handover_us: None });
    }

    #[test]
    fn bad_lengths_kinds_and_exids_are_errors() {
        let len = |len, expected| Err(WireError::TcpOptionLength { kind: 253, len, expected });
        assert_eq!(StartcpOption::parse(&[]), Err(WireError::Truncated { what: "StarTCP option", need: 2, have: 0 }));
        assert_eq!(
            StartcpOption::parse(&[0xFD]),
            Err(WireError::Truncated { what: "StarTCP option", need: 2, have: 1 })
        );
        assert_eq!(StartcpOption::parse(&[0xFD, 0x02, 0x53, 0x54, 0x00]), len(2, 5));
        assert_eq!(StartcpOption::parse(&[0xFD, 0x04, 0x53, 0x54, 0x00]), len(4, 5));
        // H set but length 5, H clear but length 9.
        assert_eq!(StartcpOption::parse(&[0xFD, 0x05, 0x53, 0x54, 0x04]), len(5, 9));
        assert_eq!(StartcpOption::parse(&[0xFD, 0x09, 0x53, 0x54, 0x00, 0, 0, 0, 1]), len(9, 5));
        assert_eq!(StartcpOption::parse(&[0xFD, 0x0A, 0x53, 0x54, 0x04, 0, 0, 0, 1, 0]), len(10, 9));
        // The length runs past the buffer.
        assert_eq!(
            StartcpOption::parse(&[0xFD, 0x09, 0x53, 0x54, 0x04, 0, 0]),
            Err(WireError::Truncated { what: "StarTCP option", need: 9, have: 7 })
        );
        assert_eq!(
            StartcpOption::parse(&[0xFE, 0x05, 0x53, 0x54, 0x00]),
            Err(WireError::InvalidField { field: "StarTCP option kind (not 253)" })
        );
        assert_eq!(
            StartcpOption::parse(&[0xFD, 0x05, 0xF9, 0x89, 0x00]),
            Err(WireError::InvalidField { field: "StarTCP ExID (another experiment's option)" })
        );
        let mut small = [0u8; 8];
        let opt = StartcpOption { next_handover_us: Some(1), ..StartcpOption::default() };
        assert_eq!(opt.emit(&mut small), Err(WireError::BufferTooSmall { need: 9, have: 8 }));
        assert_eq!(WireError::TcpOptionLength { kind: 253, len: 4, expected: 5 }.kind(), "tcp_option_length");
    }

    #[test]
    fn found_among_other_tcp_options() {
        let opts = [
            0x01, 0x01, // NOP NOP
            0x08, 0x0A, 0, 0, 0, 1, 0, 0, 0, 2, // timestamps
            0xFD, 0x05, 0xF9, 0x89, 0x00, // kind 253 of another experiment: skipped
            0xFD, 0x09, 0x53, 0x54, 0x05, 0x00, 0x00, 0x03, 0xE8, // ours: probe + 1000 us
            0x00, 0xFF, 0xFF, // End of Option List, then padding not looked at
        ];
        let want = StartcpOption { probe: true, recovered: false, next_handover_us: Some(1000) };
        assert_eq!(StartcpOption::find(&opts), Ok(Some(want)));
        assert_eq!(StartcpOption::find(&opts[..12]), Ok(None));
        assert_eq!(StartcpOption::find(&[]), Ok(None));
        assert_eq!(
            StartcpOption::find(&[0x08]),
            Err(WireError::Truncated { what: "TCP option length", need: 2, have: 1 })
        );
        assert_eq!(
            StartcpOption::find(&[0x01, 0x08, 0x01]),
            Err(WireError::TcpOptionLength { kind: 8, len: 1, expected: 2 })
        );
        assert_eq!(StartcpOption::find(&[0x08, 0x0A, 0]), Err(WireError::OptionOverrun { option_type: 8, offset: 0 }));
        let twice = [0xFD, 0x05, 0x53, 0x54, 0x00, 0xFD, 0x05, 0x53, 0x54, 0x01];
        assert_eq!(
            StartcpOption::find(&twice),
            Err(WireError::Inconsistent { what: "two StarTCP options in one TCP header" })
        );
        // A malformed StarTCP option inside a well-formed list is its own error.
        assert_eq!(
            StartcpOption::find(&[0x01, 0xFD, 0x05, 0x53, 0x54, 0x04]),
            Err(WireError::TcpOptionLength { kind: 253, len: 5, expected: 9 })
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5354),
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// Every option round-trips; any bytes parse or fail without panicking, and what parses
        /// emits to the same bytes (reserved flags aside).
        #[test]
        fn round_trip(probe: bool, recovered: bool, next: Option<u32>) {
            let opt = StartcpOption { probe, recovered, next_handover_us: next };
            let mut buf = [0u8; 9];
            let n = opt.emit(&mut buf).unwrap();
            proptest::prop_assert_eq!(StartcpOption::parse(&buf[..n]), Ok(opt));
            proptest::prop_assert_eq!(StartcpOption::find(&buf[..n]), Ok(Some(opt)));
        }

        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            if let Ok(opt) = StartcpOption::parse(&bytes) {
                let mut buf = [0u8; 9];
                let n = opt.emit(&mut buf).unwrap();
                proptest::prop_assert_eq!(&buf[..4], &bytes[..4]);
                proptest::prop_assert_eq!(buf[4], bytes[4] & 0x07);
                proptest::prop_assert_eq!(&buf[5..n], &bytes[5..n]);
            }
            let _ = StartcpOption::find(&bytes);
        }
    }
}
