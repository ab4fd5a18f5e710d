//! leoguard's Hop-by-Hop options: SATGUARD's HSeq, FSeq and HAck (SATGUARD §3.2-§3.5, §3.6
//! implementation) and LinkGuardian's sequence number and ACK.
//!
//! They use the RFC 4727 experimental option types with act = 00, so routers that do not know them
//! skip them (RFC 8200 §4.2): 0x3E (chg = 1) for fields rewritten on every hop, 0x1E (chg = 0) for
//! fields that stay fixed end to end. Several options share a type, so the first data byte is a
//! subtype. Every multi-byte field is big-endian. Reserved flag bits are sent as zero and ignored on
//! receipt. See docs/wire.md for the byte layouts.

use leoguard_core::Seq16;

use crate::error::{check_in, check_out, WireError};

/// RFC 4727 experimental option type, act = 00, chg = 1: data that changes en route.
pub const OPT_TYPE_CHANGING: u8 = 0x3E;
/// RFC 4727 experimental option type, act = 00, chg = 0: data that stays fixed en route.
pub const OPT_TYPE_FIXED: u8 = 0x1E;

/// Subtype of the SATGUARD hop option (HSeq), carried in type 0x3E.
pub const SUBTYPE_SATGUARD_HOP: u8 = 0x01;
/// Subtype of the SATGUARD flow option (FSeq), carried in type 0x1E.
pub const SUBTYPE_SATGUARD_FLOW: u8 = 0x02;
/// Subtype of the SATGUARD HAck option, carried in type 0x1E.
pub const SUBTYPE_SATGUARD_HACK: u8 = 0x03;
/// Subtype of the LinkGuardian sequence option, carried in type 0x3E.
pub const SUBTYPE_LINKGUARDIAN_SEQ: u8 = 0x04;
/// Subtype of the LinkGuardian ACK option, carried in type 0x1E.
pub const SUBTYPE_LINKGUARDIAN_ACK: u8 = 0x05;

/// Beam tag of a HAck sent over a one-to-one link (an ISL), where there is no beam (SATGUARD §3.3).
pub const BEAM_NONE: u16 = 0;

const FLAG_RETX: u8 = 0x01;
const FLAG_MIGRATED: u8 = 0x02;
const FLAG_DELAY_SENSITIVE: u8 = 0x01;
const FLAG_DUMMY: u8 = 0x02;
const FLAG_LOSS: u8 = 0x01;
const FLAG_RECEIVED: u8 = 0x02;

/// SATGUARD hop option: the per-hop sequence number HSeq (SATGUARD §3.2), rewritten by each
/// upstream node, hence option type 0x3E (chg = 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SatguardHop {
    /// HSeq of this packet on this hop; a retransmission gets a new one (SATGUARD §3.5).
    pub hseq: Seq16,
    /// Flags bit 0: this is a link-local retransmission.
    pub retransmission: bool,
    /// Flags bit 1: the packet was migrated from another satellite's buffer (SATGUARD §3.4).
    pub migrated: bool,
}

/// SATGUARD flow option: the per-flow sequence number FSeq (SATGUARD §3.4), set once at the network
/// entry and never modified, hence option type 0x1E (chg = 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SatguardFlow {
    /// FSeq, which the ground reorder buffer orders by.
    pub fseq: Seq16,
    /// Flags bit 0: the flow is delay-sensitive.
    pub delay_sensitive: bool,
}

/// SATGUARD HAck option: link-local feedback carrying "the biggest interval of the most recently
/// received consecutive HSeq" (SATGUARD §3.5) and the beam tag (SATGUARD §3.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SatguardHack {
    /// First HSeq of the interval.
    pub cum_start: Seq16,
    /// Last HSeq of the interval (inclusive; not before `cum_start` in serial arithmetic).
    pub cum_end: Seq16,
    /// Beam the sender is served by; [`BEAM_NONE`] on a one-to-one link.
    pub beam: u16,
}

/// LinkGuardian sequence option: the per-link sequence number, rewritten on every link (type 0x3E).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkGuardianSeq {
    /// Link sequence number.
    pub seq: Seq16,
    /// Flags bit 0: this is a retransmission.
    pub retransmission: bool,
    /// Flags bit 1: a dummy packet sent after a burst to expose tail loss.
    pub dummy: bool,
}

/// A LinkGuardian loss notification: the first lost sequence number and the size of the hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkGuardianLoss {
    /// First sequence number of the hole.
    pub first_lost: Seq16,
    /// Number of consecutive lost sequence numbers (at least 1).
    pub hole_size: u16,
}

/// LinkGuardian ACK option: the leading ACK, plus a loss notification when there is one, or the
/// acknowledgement of one received packet on a shared link (type 0x1E).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkGuardianAck {
    /// Highest sequence number received so far.
    pub leading_ack: Seq16,
    /// The loss notification (flags bit 0); when absent its fields are sent as zero and ignored.
    pub loss: Option<LinkGuardianLoss>,
    /// On a shared (one-to-many) link with a fixed retransmission timer, the one packet this ACK
    /// acknowledges (flags bit 1, carried in the `first_lost` field; never with `loss`): without it
    /// every packet received behind a hole would time out (SATGUARD §3.3).
    pub received: Option<Seq16>,
}

/// One leoguard option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeoOption {
    /// SATGUARD HSeq.
    SatguardHop(SatguardHop),
    /// SATGUARD FSeq.
    SatguardFlow(SatguardFlow),
    /// SATGUARD HAck.
    SatguardHack(SatguardHack),
    /// LinkGuardian sequence number.
    LinkGuardianSeq(LinkGuardianSeq),
    /// LinkGuardian leading ACK and loss notification.
    LinkGuardianAck(LinkGuardianAck),
}

/// The option type and Opt Data Len a subtype travels with, or `None` for an undefined subtype.
pub fn subtype_layout(subtype: u8) -> Option<(u8, u8)> {
    match subtype {
        SUBTYPE_SATGUARD_HOP => Some((OPT_TYPE_CHANGING, 4)),
        SUBTYPE_SATGUARD_FLOW => Some((OPT_TYPE_FIXED, 4)),
        SUBTYPE_SATGUARD_HACK => Some((OPT_TYPE_FIXED, 8)),
        SUBTYPE_LINKGUARDIAN_SEQ => Some((OPT_TYPE_CHANGING, 4)),
        SUBTYPE_LINKGUARDIAN_ACK => Some((OPT_TYPE_FIXED, 8)),
        _ => None,
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn flag(on: bool, mask: u8) -> u8 {
    if on {
        mask
    } else {
        0
    }
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

impl LeoOption {
    /// The subtype byte.
    pub fn subtype(&self) -> u8 {
        match self {
            LeoOption::SatguardHop(_) => SUBTYPE_SATGUARD_HOP,
            LeoOption::SatguardFlow(_) => SUBTYPE_SATGUARD_FLOW,
            LeoOption::SatguardHack(_) => SUBTYPE_SATGUARD_HACK,
            LeoOption::LinkGuardianSeq(_) => SUBTYPE_LINKGUARDIAN_SEQ,
            LeoOption::LinkGuardianAck(_) => SUBTYPE_LINKGUARDIAN_ACK,
        }
    }

    fn layout(&self) -> (u8, u8) {
        subtype_layout(self.subtype()).expect("invariant: every variant has a defined subtype")
    }

    /// The option type (0x1E or 0x3E).
    pub fn option_type(&self) -> u8 {
        self.layout().0
    }

    /// Opt Data Len (subtype byte included).
    pub fn data_len(&self) -> u8 {
        self.layout().1
    }

    /// Bytes the whole option takes: type, length and data.
    pub fn buffer_len(&self) -> usize {
        2 + usize::from(self.data_len())
    }

    /// Parses the option data (`data`, subtype byte first) of an option of type `option_type`.
    pub fn parse_data(option_type: u8, data: &[u8]) -> Result<LeoOption, WireError> {
        let Some(&subtype) = data.first() else {
            return Err(WireError::MissingSubtype { option_type });
        };
        let (ty, expected) = match subtype_layout(subtype) {
            Some(l) if l.0 == option_type => l,
            _ => return Err(WireError::UnknownSubtype { option_type, subtype }),
        };
        debug_assert_eq!(ty, option_type);
        if data.len() != usize::from(expected) {
            // Opt Data Len is one byte, so data.len() <= 255.
            let len = u8::try_from(data.len()).unwrap_or(u8::MAX);
            return Err(WireError::OptionLength { subtype, len, expected });
        }
        let flags = data[1];
        Ok(match subtype {
            SUBTYPE_SATGUARD_HOP => LeoOption::SatguardHop(SatguardHop {
                hseq: Seq16(be16(data, 2)),
                retransmission: flags & FLAG_RETX != 0,
                migrated: flags & FLAG_MIGRATED != 0,
            }),
            SUBTYPE_SATGUARD_FLOW => LeoOption::SatguardFlow(SatguardFlow {
                fseq: Seq16(be16(data, 2)),
                delay_sensitive: flags & FLAG_DELAY_SENSITIVE != 0,
            }),
            SUBTYPE_SATGUARD_HACK => {
                let hack = SatguardHack {
                    cum_start: Seq16(be16(data, 2)),
                    cum_end: Seq16(be16(data, 4)),
                    beam: be16(data, 6),
                };
                hack.validate()?;
                LeoOption::SatguardHack(hack)
            }
            SUBTYPE_LINKGUARDIAN_SEQ => LeoOption::LinkGuardianSeq(LinkGuardianSeq {
                seq: Seq16(be16(data, 2)),
                retransmission: flags & FLAG_RETX != 0,
                dummy: flags & FLAG_DUMMY != 0,
            }),
            _ => {
                let ack = LinkGuardianAck {
                    leading_ack: Seq16(be16(data, 2)),
                    loss: (flags & FLAG_LOSS != 0)
                        .then(|| LinkGuardianLoss { first_lost: Seq16(be16(data, 4)), hole_size: be16(data, 6) }),
                    received: (flags & FLAG_RECEIVED != 0).then(|| Seq16(be16(data, 4))),
                };
                ack.validate()?;
                LeoOption::LinkGuardianAck(ack)
            }
        })
    }

    /// Parses one whole option (type, length, data) at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<LeoOption, WireError> {
        check_in(buf, 2, "option")?;
        let option_type = buf[0];
        if option_type != OPT_TYPE_CHANGING && option_type != OPT_TYPE_FIXED {
            return Err(WireError::InvalidField { field: "option type (not a leoguard option)" });
        }
        let end = 2 + usize::from(buf[1]);
        if buf.len() < end {
            return Err(WireError::OptionOverrun { option_type, offset: 0 });
        }
        LeoOption::parse_data(option_type, &buf[2..end])
    }

    /// Writes the whole option (type, length, data) to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        let (option_type, data_len) = self.layout();
        let b = &mut buf[..len];
        b.fill(0);
        b[0] = option_type;
        b[1] = data_len;
        b[2] = self.subtype();
        match self {
            LeoOption::SatguardHop(h) => {
                b[3] = flag(h.retransmission, FLAG_RETX) | flag(h.migrated, FLAG_MIGRATED);
                put16(b, 4, h.hseq.0);
            }
            LeoOption::SatguardFlow(f) => {
                b[3] = flag(f.delay_sensitive, FLAG_DELAY_SENSITIVE);
                put16(b, 4, f.fseq.0);
            }
            LeoOption::SatguardHack(h) => {
                h.validate()?;
                put16(b, 4, h.cum_start.0);
                put16(b, 6, h.cum_end.0);
                put16(b, 8, h.beam);
            }
            LeoOption::LinkGuardianSeq(s) => {
                b[3] = flag(s.retransmission, FLAG_RETX) | flag(s.dummy, FLAG_DUMMY);
                put16(b, 4, s.seq.0);
            }
            LeoOption::LinkGuardianAck(a) => {
                a.validate()?;
                put16(b, 4, a.leading_ack.0);
                if let Some(loss) = a.loss {
                    b[3] = FLAG_LOSS;
                    put16(b, 6, loss.first_lost.0);
                    put16(b, 8, loss.hole_size);
                } else if let Some(r) = a.received {
                    b[3] = FLAG_RECEIVED;
                    put16(b, 6, r.0);
                }
            }
        }
        Ok(len)
    }
}

impl SatguardHack {
    /// Checks that `cum_end` does not come before `cum_start` (RFC 1982), i.e. the interval is
    /// non-empty and shorter than 2^15.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.cum_end.diff(self.cum_start) < 0 {
            return Err(WireError::InvalidField { field: "HAck interval ends before it starts" });
        }
        Ok(())
    }

    /// Number of HSeq values the interval covers.
    pub fn len(&self) -> u32 {
        u32::from(self.cum_end.0.wrapping_sub(self.cum_start.0)) + 1
    }

    /// Always false: a HAck interval holds at least one HSeq (kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `hseq` lies in [`cum_start`, `cum_end`] (wrap-aware).
    pub fn covers(&self, hseq: Seq16) -> bool {
        hseq.within(self.cum_start, self.cum_end)
    }
}

impl LinkGuardianAck {
    /// Checks that a loss notification, when present, names a hole of at least one packet, and that
    /// an ACK does not carry both a notification and a per-packet acknowledgement (one field holds both).
    pub fn validate(&self) -> Result<(), WireError> {
        match (self.loss, self.received) {
            (Some(l), _) if l.hole_size == 0 => Err(WireError::InvalidField { field: "LinkGuardian hole size 0" }),
            (Some(_), Some(_)) => Err(WireError::InvalidField {
                field: "LinkGuardian ack with both a loss notification and a received seq",
            }),
            _ => Ok(()),
        }
    }
}
