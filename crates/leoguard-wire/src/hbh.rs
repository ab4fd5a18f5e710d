//! The IPv6 Hop-by-Hop Options header (RFC 8200 §4.3) holding leoguard's options.
//!
//! Layout: Next Header (1), Hdr Ext Len (1, in 8-octet units not counting the first 8), then options
//! in TLV form (RFC 8200 §4.2) padded with Pad1/PadN so the header is a multiple of 8 bytes long.

use crate::error::{check_in, check_out, OptionAction, WireError};
use crate::options::{
    LeoOption, LinkGuardianAck, LinkGuardianSeq, SatguardFlow, SatguardHack, SatguardHop, OPT_TYPE_CHANGING,
    OPT_TYPE_FIXED,
};

/// Option type Pad1: a single byte of padding, no length or data (RFC 8200 §4.2).
pub const OPT_PAD1: u8 = 0;
/// Option type PadN: two or more bytes of padding (RFC 8200 §4.2).
pub const OPT_PADN: u8 = 1;

/// Whether the data of an option of this type may change en route (the chg bit, RFC 8200 §4.2).
pub fn option_may_change(option_type: u8) -> bool {
    option_type & 0x20 != 0
}

/// A Hop-by-Hop Options header as leoguard sees it: the next header, leoguard's five options (each at
/// most once) and how many unknown act = 00 options it skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HbhRepr {
    /// Protocol of the header that follows.
    pub next_header: u8,
    /// SATGUARD HSeq (type 0x3E, subtype 0x01).
    pub hop: Option<SatguardHop>,
    /// SATGUARD FSeq (type 0x1E, subtype 0x02).
    pub flow: Option<SatguardFlow>,
    /// SATGUARD HAck (type 0x1E, subtype 0x03).
    pub hack: Option<SatguardHack>,
    /// LinkGuardian sequence number (type 0x3E, subtype 0x04).
    pub lg_seq: Option<LinkGuardianSeq>,
    /// LinkGuardian ACK (type 0x1E, subtype 0x05).
    pub lg_ack: Option<LinkGuardianAck>,
    /// Unknown options with act = 00 that parsing skipped (RFC 8200 §4.2); `emit` does not write them.
    pub skipped_unknown: u16,
}

impl HbhRepr {
    /// An empty header (no options) followed by `next_header`.
    pub fn new(next_header: u8) -> HbhRepr {
        HbhRepr { next_header, ..HbhRepr::default() }
    }

    /// The leoguard options present, in emit order (ascending subtype).
    pub fn options(&self) -> impl Iterator<Item = LeoOption> {
        [
            self.hop.map(LeoOption::SatguardHop),
            self.flow.map(LeoOption::SatguardFlow),
            self.hack.map(LeoOption::SatguardHack),
            self.lg_seq.map(LeoOption::LinkGuardianSeq),
            self.lg_ack.map(LeoOption::LinkGuardianAck),
        ]
        .into_iter()
        .flatten()
    }

    /// Stores `opt`, failing if an option of the same subtype is already present.
    pub fn insert(&mut self, opt: LeoOption) -> Result<(), WireError> {
        fn put<T>(slot: &mut Option<T>, v: T, subtype: u8) -> Result<(), WireError> {
            if slot.is_some() {
                return Err(WireError::DuplicateOption { subtype });
            }
            *slot = Some(v);
            Ok(())
        }
        let subtype = opt.subtype();
        match opt {
            LeoOption::SatguardHop(v) => put(&mut self.hop, v, subtype),
            LeoOption::SatguardFlow(v) => put(&mut self.flow, v, subtype),
            LeoOption::SatguardHack(v) => put(&mut self.hack, v, subtype),
            LeoOption::LinkGuardianSeq(v) => put(&mut self.lg_seq, v, subtype),
            LeoOption::LinkGuardianAck(v) => put(&mut self.lg_ack, v, subtype),
        }
    }

    /// Parses a whole Hop-by-Hop header at the start of `buf` (bytes after it are ignored).
    pub fn parse(buf: &[u8]) -> Result<HbhRepr, WireError> {
        HbhRepr::parse_prefix(buf).map(|(repr, _)| repr)
    }

    /// Parses the Hop-by-Hop header at the start of `buf`; returns it and its length in bytes (which
    /// may exceed [`HbhRepr::buffer_len`] when the sender padded more, or put in unknown options).
    pub fn parse_prefix(buf: &[u8]) -> Result<(HbhRepr, usize), WireError> {
        check_in(buf, 2, "Hop-by-Hop header")?;
        let header_len = (usize::from(buf[1]) + 1) * 8;
        if buf.len() < header_len {
            return Err(WireError::HeaderOverrun { header_len, available: buf.len() });
        }
        let mut repr = HbhRepr::new(buf[0]);
        let mut at = 2;
        while at < header_len {
            let option_type = buf[at];
            if option_type == OPT_PAD1 {
                at += 1;
                continue;
            }
            let overrun = WireError::OptionOverrun { option_type, offset: at };
            if at + 2 > header_len {
                return Err(overrun);
            }
            let end = at + 2 + usize::from(buf[at + 1]);
            if end > header_len {
                return Err(overrun);
            }
            let data = &buf[at + 2..end];
            match option_type {
                // RFC 8200 does not ask receivers to check what PadN carries; accept any.
                OPT_PADN => {}
                OPT_TYPE_CHANGING | OPT_TYPE_FIXED => {
                    repr.insert(LeoOption::parse_data(option_type, data)?)?;
                }
                _ => match OptionAction::of(option_type) {
                    OptionAction::Skip => repr.skipped_unknown = repr.skipped_unknown.saturating_add(1),
                    action => return Err(WireError::UnknownOption { option_type, action }),
                },
            }
            at = end;
        }
        Ok((repr, header_len))
    }

    /// Bytes of the options (without padding).
    fn options_len(&self) -> usize {
        self.options().map(|o| o.buffer_len()).sum()
    }

    /// Bytes `emit` writes: 2 + the options, rounded up to a multiple of 8.
    pub fn buffer_len(&self) -> usize {
        (2 + self.options_len()).div_ceil(8) * 8
    }

    /// Writes the header to the start of `buf`: options in ascending subtype order, then the fewest
    /// padding bytes that make the length a multiple of 8 (Pad1 for one byte, PadN for more, as RFC
    /// 8200 §4.2 requires). Returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        // At most 2 + 6 + 6 + 10 + 6 + 10 = 40 bytes, so Hdr Ext Len fits in a byte.
        let hdr_ext_len = u8::try_from(len / 8 - 1).expect("invariant: header is at most 40 bytes");
        buf[0] = self.next_header;
        buf[1] = hdr_ext_len;
        let mut at = 2;
        for opt in self.options() {
            at += opt.emit(&mut buf[at..len])?;
        }
        match len - at {
            0 => {}
            1 => buf[at] = OPT_PAD1,
            n => {
                buf[at] = OPT_PADN;
                buf[at + 1] = u8::try_from(n - 2).expect("invariant: padding is under 8 bytes");
                buf[at + 2..len].fill(0);
            }
        }
        Ok(len)
    }
}

/// Offset of the option with `option_type` whose first data byte is `subtype`, in a Hop-by-Hop
/// header that [`HbhRepr::parse_prefix`] has already accepted (so every length is in bounds).
pub(crate) fn find_leo_option(hbh: &[u8], header_len: usize, option_type: u8, subtype: u8) -> Option<usize> {
    let mut at = 2;
    while at < header_len {
        let ty = *hbh.get(at)?;
        if ty == OPT_PAD1 {
            at += 1;
            continue;
        }
        let len = usize::from(*hbh.get(at + 1)?);
        if ty == option_type && len > 0 && hbh.get(at + 2) == Some(&subtype) {
            return Some(at);
        }
        at += 2 + len;
    }
    None
}
