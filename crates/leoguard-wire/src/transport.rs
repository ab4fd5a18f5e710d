//! leoguard's own TCP carried over UDP (`leoguard-transport`, docs/wire.md "User-space transport"):
//! one UDP datagram holds one message of the sans-IO TCP in `leoguard-proto` — a data segment, an
//! ACK with SACK/DSACK blocks, or the close handshake — plus a TLV options area, so fields that later
//! transports add ride along without a change of format. Kind 1 carries StarTCP's signals (a probe's
//! flag on a zero-length data segment, the prediction and recovery notice on ACKs) in the encoding of
//! its TCP option ([`StartcpOption`]).
//!
//! ```text
//! every message:  version (1) | type | flags | options length | flow id (4)
//! data (type 1):  seq (8) | TSval µs (8) | payload length (2) | options | payload
//! ack (type 2):   cum (8) | TSecr µs (8) | rwnd (4) | SACK blocks (1) | blocks (16 each) | options
//! fin (type 3), fin-ack (type 4):  stream end (8) | options
//! ```
//! All fields are big-endian. Sequence numbers are 64-bit byte offsets of the stream, as in
//! `leoguard_proto::tcp` (no wrap). A DSACK block is implicit, as on the TCP wire (RFC 2883): the
//! first block lies below `cum` or inside the second.

use crate::error::{check_in, check_out, WireError};
use crate::startcp::StartcpOption;

/// The version this module reads and writes.
pub const TRANSPORT_VERSION: u8 = 1;
/// Bytes every message starts with: version, type, flags, options length, flow id.
pub const PREFIX_LEN: usize = 8;
/// Bytes of a data segment's header before its options.
pub const DATA_HEADER_LEN: usize = PREFIX_LEN + 18;
/// Bytes of an ACK's header before its SACK blocks.
pub const ACK_HEADER_LEN: usize = PREFIX_LEN + 21;
/// Bytes of one SACK block (start and end, 8 each).
pub const SACK_BLOCK_LEN: usize = 16;
/// Most SACK blocks one ACK carries (TCP with timestamps carries 3).
pub const MAX_SACK_BLOCKS: usize = 3;
/// Bytes of a FIN or FIN-ACK before its options.
pub const FIN_LEN: usize = PREFIX_LEN + 8;
/// Largest options area (its length is one byte).
pub const MAX_OPTIONS_LEN: usize = 255;

/// Message type of a data segment.
pub const TYPE_DATA: u8 = 1;
/// Message type of an acknowledgement.
pub const TYPE_ACK: u8 = 2;
/// Message type of the sender's close: every byte of the stream up to `end` was sent.
pub const TYPE_FIN: u8 = 3;
/// Message type of the receiver's answer to a FIN once it holds the whole stream.
pub const TYPE_FIN_ACK: u8 = 4;

/// Data flags bit 0: the segment is a retransmission.
const DATA_RETRANSMISSION: u8 = 0x01;
/// ACK flags bit 0: the TSecr field holds an echoed timestamp.
const ACK_HAS_TS_ECR: u8 = 0x01;

/// Option kinds with this bit set are critical: a receiver that does not know one drops the whole
/// datagram (and counts it); others it skips (as RFC 8200 §4.2's action bits do for IPv6 options).
pub const OPTION_CRITICAL: u8 = 0x80;
/// Option kind of StarTCP's signals (probe flag, recovery notice, predicted-handover offset): its
/// value is the data of TCP option kind 253 as the StarTCP module defines it ([`StartcpOption`]'s
/// ExID, flags and prediction: 3 or 7 bytes), so both carriers share one encoding. Not critical: a
/// stack without StarTCP ignores it; one that parses it finds it well formed ([`TlvOptions::parse`]
/// checks its value).
pub const OPTION_STARTCP: u8 = 0x01;
/// Bytes of the largest StarTCP TLV (kind, length, 7 bytes of data with a prediction).
pub const STARTCP_TLV_MAX: usize = 2 + 7;

/// One TLV option: a kind byte, a length byte, `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlvOption<'a> {
    /// Kind (0 is invalid; [`OPTION_CRITICAL`] marks those that must be understood).
    pub kind: u8,
    /// Value, at most 253 bytes (the options area is at most 255 bytes).
    pub value: &'a [u8],
}

impl TlvOption<'_> {
    /// Whether a receiver that does not know this kind must drop the datagram.
    pub fn is_critical(&self) -> bool {
        self.kind & OPTION_CRITICAL != 0
    }

    /// Bytes the option takes: kind, length, value.
    pub fn buffer_len(&self) -> usize {
        2 + self.value.len()
    }
}

/// A validated options area: TLVs back to back, each kind once, none of kind 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlvOptions<'a> {
    raw: &'a [u8],
}

impl<'a> TlvOptions<'a> {
    /// No options.
    pub const EMPTY: TlvOptions<'static> = TlvOptions { raw: &[] };

    /// Validates the options area `raw` (the bytes after a message's fixed fields).
    pub fn parse(raw: &'a [u8]) -> Result<TlvOptions<'a>, WireError> {
        if raw.len() > MAX_OPTIONS_LEN {
            return Err(WireError::InvalidField { field: "transport options area longer than 255 bytes" });
        }
        let mut seen = [false; 256];
        let mut at = 0;
        while at < raw.len() {
            let kind = raw[at];
            if kind == 0 {
                return Err(WireError::InvalidField { field: "transport option kind 0" });
            }
            if at + 2 > raw.len() || at + 2 + usize::from(raw[at + 1]) > raw.len() {
                return Err(WireError::OptionOverrun { option_type: kind, offset: at });
            }
            if std::mem::replace(&mut seen[usize::from(kind)], true) {
                return Err(WireError::DuplicateOption { subtype: kind });
            }
            let value = &raw[at + 2..at + 2 + usize::from(raw[at + 1])];
            if kind == OPTION_STARTCP {
                StartcpOption::parse_data(value)?;
            }
            at += 2 + value.len();
        }
        Ok(TlvOptions { raw })
    }

    /// Writes `options` as an options area to the start of `buf`; returns its length. The kinds must
    /// be distinct and non-zero and the area at most 255 bytes.
    pub fn emit_list(options: &[TlvOption<'_>], buf: &mut [u8]) -> Result<usize, WireError> {
        let len: usize = options.iter().map(TlvOption::buffer_len).sum();
        if len > MAX_OPTIONS_LEN {
            return Err(WireError::InvalidField { field: "transport options area longer than 255 bytes" });
        }
        check_out(buf, len)?;
        let mut at = 0;
        for o in options {
            buf[at] = o.kind;
            buf[at + 1] = o.value.len() as u8; // < 256: the whole area is
            buf[at + 2..at + 2 + o.value.len()].copy_from_slice(o.value);
            at += o.buffer_len();
        }
        TlvOptions::parse(&buf[..len])?;
        Ok(len)
    }

    /// The raw area.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// Bytes of the area.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are no options.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The options in order.
    pub fn iter(&self) -> TlvIter<'a> {
        TlvIter { raw: self.raw }
    }

    /// The value of the option of kind `kind`, if present.
    pub fn get(&self, kind: u8) -> Option<&'a [u8]> {
        self.iter().find(|o| o.kind == kind).map(|o| o.value)
    }

    /// StarTCP's signals (kind [`OPTION_STARTCP`]), if the area carries them (`parse` validated them).
    pub fn startcp(&self) -> Option<StartcpOption> {
        self.get(OPTION_STARTCP).and_then(|v| StartcpOption::parse_data(v).ok())
    }

    /// Writes an options area holding only StarTCP's signals `opt` to the start of `buf` (at least
    /// [`STARTCP_TLV_MAX`] bytes); returns its length. Parse the written bytes
    /// ([`TlvOptions::parse`]) to put them on a packet.
    pub fn emit_startcp(opt: &StartcpOption, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = 2 + opt.data_len();
        check_out(buf, len)?;
        buf[0] = OPTION_STARTCP;
        buf[1] = opt.data_len() as u8; // 3 or 7
        opt.emit_data(&mut buf[2..len])?;
        Ok(len)
    }

    /// The first critical option whose kind is not in `known` (the datagram must then be dropped).
    pub fn unknown_critical(&self, known: &[u8]) -> Option<u8> {
        self.iter().find(|o| o.is_critical() && !known.contains(&o.kind)).map(|o| o.kind)
    }
}

/// Iterator over a validated options area.
#[derive(Clone, Debug)]
pub struct TlvIter<'a> {
    raw: &'a [u8],
}

impl<'a> Iterator for TlvIter<'a> {
    type Item = TlvOption<'a>;

    fn next(&mut self) -> Option<TlvOption<'a>> {
        // The area was validated, so each TLV fits; `get` keeps this panic-free all the same.
        let (&kind, rest) = self.raw.split_first()?;
        let (&len, rest) = rest.split_first()?;
        let value = rest.get(..usize::from(len))?;
        self.raw = &rest[usize::from(len)..];
        Some(TlvOption { kind, value })
    }
}

/// A data segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataSegment<'a> {
    /// Stream offset of the first payload byte.
    pub seq: u64,
    /// Flags bit 0: a retransmission.
    pub retransmission: bool,
    /// TSval (RFC 7323): when this transmission left the sender, in microseconds of its clock.
    pub ts_us: u64,
    /// The payload (at most 65535 bytes).
    pub payload: &'a [u8],
}

/// An acknowledgement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AckRepr {
    /// Next byte expected (cumulative).
    pub cum: u64,
    /// SACK blocks [start, end), most recent first (the first may be a DSACK block); entries past
    /// `n_sack` are zero after `parse` and ignored by `emit`.
    pub sack: [(u64, u64); MAX_SACK_BLOCKS],
    /// Valid SACK blocks (0..=3).
    pub n_sack: u8,
    /// Receive window, bytes.
    pub rwnd: u32,
    /// TSecr (RFC 7323), microseconds of the sender's clock, when the receiver has a timestamp to echo.
    pub ts_ecr_us: Option<u64>,
}

impl AckRepr {
    /// The valid SACK blocks.
    pub fn blocks(&self) -> &[(u64, u64)] {
        &self.sack[..usize::from(self.n_sack.min(MAX_SACK_BLOCKS as u8))]
    }

    fn validate(&self) -> Result<(), WireError> {
        if usize::from(self.n_sack) > MAX_SACK_BLOCKS {
            return Err(WireError::InvalidField { field: "transport ACK with more than 3 SACK blocks" });
        }
        if self.blocks().iter().any(|&(a, b)| a >= b) {
            return Err(WireError::InvalidField { field: "transport SACK block that does not end after it starts" });
        }
        Ok(())
    }
}

/// What one datagram carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportMessage<'a> {
    /// Stream data.
    Data(DataSegment<'a>),
    /// An acknowledgement.
    Ack(AckRepr),
    /// The sender's close: the stream ends at `end`.
    Fin {
        /// Length of the stream, bytes.
        end: u64,
    },
    /// The receiver holds the whole stream up to `end`.
    FinAck {
        /// Length of the stream, bytes.
        end: u64,
    },
}

/// One datagram of the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransportPacket<'a> {
    /// Connection id, chosen by the sender (a datagram of another flow is not this connection's).
    pub flow: u32,
    /// The options area.
    pub options: TlvOptions<'a>,
    /// The message.
    pub message: TransportMessage<'a>,
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> TransportPacket<'a> {
    /// Parses one datagram: the version must be [`TRANSPORT_VERSION`], the lengths must add up to the
    /// datagram's exactly, and the options must be well formed.
    pub fn parse(buf: &'a [u8]) -> Result<TransportPacket<'a>, WireError> {
        check_in(buf, PREFIX_LEN, "transport header")?;
        if buf[0] != TRANSPORT_VERSION {
            return Err(WireError::UnsupportedVersion { format: "transport", version: buf[0] });
        }
        let (ty, flags, opt_len) = (buf[1], buf[2], usize::from(buf[3]));
        let flow = be32(buf, 4);
        let fixed = match ty {
            TYPE_DATA => DATA_HEADER_LEN,
            TYPE_ACK => {
                check_in(buf, ACK_HEADER_LEN, "transport ACK")?;
                let n = buf[ACK_HEADER_LEN - 1];
                if usize::from(n) > MAX_SACK_BLOCKS {
                    return Err(WireError::InvalidField { field: "transport ACK with more than 3 SACK blocks" });
                }
                ACK_HEADER_LEN + SACK_BLOCK_LEN * usize::from(n)
            }
            TYPE_FIN | TYPE_FIN_ACK => FIN_LEN,
            _ => return Err(WireError::InvalidField { field: "transport message type" }),
        };
        let what = match ty {
            TYPE_DATA => "transport data header",
            TYPE_ACK => "transport ACK",
            _ => "transport FIN",
        };
        check_in(buf, fixed + opt_len, what)?;
        let options = TlvOptions::parse(&buf[fixed..fixed + opt_len])?;
        let rest = &buf[fixed + opt_len..];
        let message = match ty {
            TYPE_DATA => {
                let seq = be64(buf, 8);
                let len = usize::from(u16::from_be_bytes([buf[24], buf[25]]));
                if rest.len() != len {
                    return Err(WireError::Inconsistent { what: "transport payload length differs from the datagram" });
                }
                if seq.checked_add(len as u64).is_none() {
                    return Err(WireError::InvalidField { field: "transport segment beyond 2^64" });
                }
                TransportMessage::Data(DataSegment {
                    seq,
                    retransmission: flags & DATA_RETRANSMISSION != 0,
                    ts_us: be64(buf, 16),
                    payload: rest,
                })
            }
            TYPE_ACK => {
                let mut ack = AckRepr {
                    cum: be64(buf, 8),
                    ts_ecr_us: (flags & ACK_HAS_TS_ECR != 0).then(|| be64(buf, 16)),
                    rwnd: be32(buf, 24),
                    n_sack: buf[28],
                    ..AckRepr::default()
                };
                for k in 0..usize::from(ack.n_sack) {
                    let at = ACK_HEADER_LEN + k * SACK_BLOCK_LEN;
                    ack.sack[k] = (be64(buf, at), be64(buf, at + 8));
                }
                ack.validate()?;
                if !rest.is_empty() {
                    return Err(WireError::Inconsistent { what: "bytes after a transport ACK" });
                }
                TransportMessage::Ack(ack)
            }
            _ => {
                if !rest.is_empty() {
                    return Err(WireError::Inconsistent { what: "bytes after a transport FIN" });
                }
                let end = be64(buf, 8);
                if ty == TYPE_FIN {
                    TransportMessage::Fin { end }
                } else {
                    TransportMessage::FinAck { end }
                }
            }
        };
        Ok(TransportPacket { flow, options, message })
    }

    /// Bytes before the payload: fixed fields, SACK blocks and options.
    pub fn header_len(&self) -> usize {
        let fixed = match &self.message {
            TransportMessage::Data(_) => DATA_HEADER_LEN,
            TransportMessage::Ack(a) => ACK_HEADER_LEN + SACK_BLOCK_LEN * a.blocks().len(),
            TransportMessage::Fin { .. } | TransportMessage::FinAck { .. } => FIN_LEN,
        };
        fixed + self.options.len()
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + if let TransportMessage::Data(d) = &self.message { d.payload.len() } else { 0 }
    }

    /// Writes everything but a data segment's payload to the start of `buf` and returns the header
    /// length: the caller then puts `payload.len()` bytes right after it (the sender's hot path fills
    /// its payload in place instead of copying it). For other messages this is all of `emit`.
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let hl = self.header_len();
        check_out(buf, hl)?;
        let (ty, flags) = match &self.message {
            TransportMessage::Data(d) => (TYPE_DATA, if d.retransmission { DATA_RETRANSMISSION } else { 0 }),
            TransportMessage::Ack(a) => (TYPE_ACK, if a.ts_ecr_us.is_some() { ACK_HAS_TS_ECR } else { 0 }),
            TransportMessage::Fin { .. } => (TYPE_FIN, 0),
            TransportMessage::FinAck { .. } => (TYPE_FIN_ACK, 0),
        };
        buf[0] = TRANSPORT_VERSION;
        buf[1] = ty;
        buf[2] = flags;
        buf[3] = self.options.len() as u8; // a validated area has at most 255 bytes
        buf[4..8].copy_from_slice(&self.flow.to_be_bytes());
        let fixed = match &self.message {
            TransportMessage::Data(d) => {
                let len = u16::try_from(d.payload.len())
                    .map_err(|_| WireError::InvalidField { field: "transport payload longer than 65535 bytes" })?;
                if d.seq.checked_add(u64::from(len)).is_none() {
                    return Err(WireError::InvalidField { field: "transport segment beyond 2^64" });
                }
                buf[8..16].copy_from_slice(&d.seq.to_be_bytes());
                buf[16..24].copy_from_slice(&d.ts_us.to_be_bytes());
                buf[24..26].copy_from_slice(&len.to_be_bytes());
                DATA_HEADER_LEN
            }
            TransportMessage::Ack(a) => {
                a.validate()?;
                buf[8..16].copy_from_slice(&a.cum.to_be_bytes());
                buf[16..24].copy_from_slice(&a.ts_ecr_us.unwrap_or(0).to_be_bytes());
                buf[24..28].copy_from_slice(&a.rwnd.to_be_bytes());
                buf[28] = a.n_sack;
                for (k, &(s, e)) in a.blocks().iter().enumerate() {
                    let at = ACK_HEADER_LEN + k * SACK_BLOCK_LEN;
                    buf[at..at + 8].copy_from_slice(&s.to_be_bytes());
                    buf[at + 8..at + 16].copy_from_slice(&e.to_be_bytes());
                }
                ACK_HEADER_LEN + SACK_BLOCK_LEN * a.blocks().len()
            }
            TransportMessage::Fin { end } | TransportMessage::FinAck { end } => {
                buf[8..16].copy_from_slice(&end.to_be_bytes());
                FIN_LEN
            }
        };
        buf[fixed..hl].copy_from_slice(self.options.as_bytes());
        Ok(hl)
    }

    /// Writes the whole datagram to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        let hl = self.emit_header(buf)?;
        if let TransportMessage::Data(d) = &self.message {
            buf[hl..len].copy_from_slice(d.payload);
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths() {
        assert_eq!(DATA_HEADER_LEN, 26);
        assert_eq!(ACK_HEADER_LEN, 29);
        assert_eq!(FIN_LEN, 16);
        let ack = AckRepr { n_sack: 3, sack: [(1, 2), (3, 4), (5, 6)], ..AckRepr::default() };
        let p = TransportPacket { flow: 0, options: TlvOptions::EMPTY, message: TransportMessage::Ack(ack) };
        assert_eq!(p.buffer_len(), 29 + 48);
    }

    #[test]
    fn options_iterate_and_flag_unknown_critical_kinds() {
        let raw = [0x02, 2, 0xAA, 0xBB, 0x81, 0, 0x7F, 1, 9];
        let o = TlvOptions::parse(&raw).expect("valid area");
        let v: Vec<_> = o.iter().map(|t| (t.kind, t.value.to_vec())).collect();
        assert_eq!(v, vec![(0x02, vec![0xAA, 0xBB]), (0x81, vec![]), (0x7F, vec![9])]);
        assert_eq!(o.get(0x7F), Some(&[9u8][..]));
        assert_eq!(o.get(0x03), None);
        assert_eq!(o.startcp(), None);
        assert_eq!(o.unknown_critical(&[]), Some(0x81));
        assert_eq!(o.unknown_critical(&[0x81]), None);
        assert!(o.iter().nth(1).is_some_and(|t| t.is_critical()));
    }

    #[test]
    fn bad_options_are_typed_errors() {
        assert_eq!(TlvOptions::parse(&[0, 0]), Err(WireError::InvalidField { field: "transport option kind 0" }));
        assert_eq!(TlvOptions::parse(&[5]), Err(WireError::OptionOverrun { option_type: 5, offset: 0 }));
        assert_eq!(TlvOptions::parse(&[5, 0, 6, 3, 1]), Err(WireError::OptionOverrun { option_type: 6, offset: 2 }));
        assert_eq!(TlvOptions::parse(&[5, 0, 5, 0]), Err(WireError::DuplicateOption { subtype: 5 }));
        let mut big = [0u8; 300];
        let opts = [TlvOption { kind: 1, value: &[0u8; 200] }, TlvOption { kind: 2, value: &[0u8; 60] }];
        assert!(matches!(TlvOptions::emit_list(&opts, &mut big), Err(WireError::InvalidField { .. })));
        let dup = [TlvOption { kind: 2, value: &[] }, TlvOption { kind: 2, value: &[] }];
        assert_eq!(TlvOptions::emit_list(&dup, &mut big), Err(WireError::DuplicateOption { subtype: 2 }));
    }

    #[test]
    fn emit_header_leaves_the_payload_to_the_caller() {
        let payload = [7u8; 10];
        let p = TransportPacket {
            flow: 9,
            options: TlvOptions::EMPTY,
            message: TransportMessage::Data(DataSegment {
                seq: 100,
                retransmission: false,
                ts_us: 5,
                payload: &payload,
            }),
        };
        let mut buf = [0u8; 64];
        let hl = p.emit_header(&mut buf).expect("room");
        assert_eq!(hl, DATA_HEADER_LEN);
        buf[hl..hl + 10].copy_from_slice(&payload);
        assert_eq!(TransportPacket::parse(&buf[..hl + 10]), Ok(p));
    }

    #[test]
    fn sack_block_must_not_be_empty_or_too_many() {
        let bad = AckRepr { n_sack: 1, sack: [(5, 5), (0, 0), (0, 0)], ..AckRepr::default() };
        let p = TransportPacket { flow: 0, options: TlvOptions::EMPTY, message: TransportMessage::Ack(bad) };
        assert!(matches!(p.emit(&mut [0u8; 64]), Err(WireError::InvalidField { .. })));
        let four = AckRepr { n_sack: 4, ..AckRepr::default() };
        let p = TransportPacket { flow: 0, options: TlvOptions::EMPTY, message: TransportMessage::Ack(four) };
        assert!(matches!(p.emit(&mut [0u8; 128]), Err(WireError::InvalidField { .. })));
    }
}
