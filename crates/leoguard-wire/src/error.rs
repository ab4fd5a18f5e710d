//! The one error type of every parser and emitter in this crate (STYLE.md rule 7: bad network input is
//! a typed error that the caller drops and counts, never a panic).

use thiserror::Error;

/// What a node must do with an option type it does not recognise: the two high-order bits of the
/// option type (RFC 8200 §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptionAction {
    /// 00: skip over this option and continue processing the header.
    Skip,
    /// 01: discard the packet.
    Discard,
    /// 10: discard the packet and send an ICMP Parameter Problem, Code 2, to the source.
    DiscardIcmp,
    /// 11: discard and send ICMP Parameter Problem, Code 2, only if the destination was not multicast.
    DiscardIcmpUnicast,
}

impl OptionAction {
    /// The action encoded in the two high-order bits of `option_type`.
    pub fn of(option_type: u8) -> OptionAction {
        match option_type >> 6 {
            0 => OptionAction::Skip,
            1 => OptionAction::Discard,
            2 => OptionAction::DiscardIcmp,
            _ => OptionAction::DiscardIcmpUnicast,
        }
    }

    /// The two bits as a number in 0..=3.
    pub fn bits(self) -> u8 {
        match self {
            OptionAction::Skip => 0,
            OptionAction::Discard => 1,
            OptionAction::DiscardIcmp => 2,
            OptionAction::DiscardIcmpUnicast => 3,
        }
    }
}

/// Why a buffer could not be parsed or a representation could not be emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// The input ends before the structure named by `what` does.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// Which structure is cut short.
        what: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The output buffer is too small for `emit`.
    #[error("output buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes `emit` must write.
        need: usize,
        /// Bytes the caller gave.
        have: usize,
    },
    /// The IPv6 version field is not 6.
    #[error("IP version {version}, expected 6")]
    BadVersion {
        /// The version nibble found.
        version: u8,
    },
    /// A leoguard format's version byte names a version this code does not speak.
    #[error("{format} version {version} is not supported")]
    UnsupportedVersion {
        /// Which format.
        format: &'static str,
        /// The version byte found.
        version: u8,
    },
    /// The Hop-by-Hop header's Hdr Ext Len runs past the end of the buffer (RFC 8200 §4.3).
    #[error("Hop-by-Hop header of {header_len} bytes runs past the {available} bytes available")]
    HeaderOverrun {
        /// Header length implied by Hdr Ext Len, in bytes.
        header_len: usize,
        /// Bytes available.
        available: usize,
    },
    /// An option's length runs past the end of its options header.
    #[error("option type {option_type:#04x} at offset {offset} runs past the end of the header")]
    OptionOverrun {
        /// The option type.
        option_type: u8,
        /// Offset of the option type byte within the header.
        offset: usize,
    },
    /// An unrecognised option whose action bits say not to skip it (RFC 8200 §4.2): the packet
    /// must be discarded (and counted).
    #[error("unknown option type {option_type:#04x} with action {action:?}")]
    UnknownOption {
        /// The option type.
        option_type: u8,
        /// What RFC 8200 says to do with the packet.
        action: OptionAction,
    },
    /// A leoguard option (type 0x1E/0x3E) with no data, so no subtype byte.
    #[error("leoguard option type {option_type:#04x} without a subtype")]
    MissingSubtype {
        /// The option type.
        option_type: u8,
    },
    /// A leoguard option type carrying a subtype leoguard does not define for that type.
    #[error("unknown leoguard subtype {subtype:#04x} in option type {option_type:#04x}")]
    UnknownSubtype {
        /// The option type.
        option_type: u8,
        /// The subtype byte.
        subtype: u8,
    },
    /// A leoguard option whose data length does not match its subtype.
    #[error("leoguard subtype {subtype:#04x} with {len} data bytes, expected {expected}")]
    OptionLength {
        /// The subtype byte.
        subtype: u8,
        /// Opt Data Len found.
        len: u8,
        /// Opt Data Len the subtype has.
        expected: u8,
    },
    /// The same leoguard option (subtype) appears twice in one header.
    #[error("duplicate leoguard option subtype {subtype:#04x}")]
    DuplicateOption {
        /// The repeated subtype.
        subtype: u8,
    },
    /// A field holds a value its definition rules out.
    #[error("invalid {field}")]
    InvalidField {
        /// Which field, and what is wrong with it.
        field: &'static str,
    },
    /// The parts of a packet contradict each other (lengths, next header chain).
    #[error("inconsistent packet: {what}")]
    Inconsistent {
        /// What disagrees.
        what: &'static str,
    },
    /// A UDP checksum that does not verify (or is zero, which RFC 8200 §8.1 forbids over IPv6).
    #[error("bad UDP checksum")]
    BadChecksum,
    /// A TCP option whose length field does not fit its kind (the StarTCP option: 5, or 9 when its
    /// flags announce a prediction; any option: at least 2).
    #[error("TCP option kind {kind} with length {len}, expected {expected}")]
    TcpOptionLength {
        /// The option kind.
        kind: u8,
        /// The length field found.
        len: u8,
        /// The length the kind (and flags) call for.
        expected: u8,
    },
}

impl WireError {
    /// A short, stable name for drop counters (one per variant).
    pub fn kind(&self) -> &'static str {
        match self {
            WireError::Truncated { .. } => "truncated",
            WireError::BufferTooSmall { .. } => "buffer_too_small",
            WireError::BadVersion { .. } => "bad_version",
            WireError::UnsupportedVersion { .. } => "unsupported_version",
            WireError::HeaderOverrun { .. } => "header_overrun",
            WireError::OptionOverrun { .. } => "option_overrun",
            WireError::UnknownOption { .. } => "unknown_option",
            WireError::MissingSubtype { .. } => "missing_subtype",
            WireError::UnknownSubtype { .. } => "unknown_subtype",
            WireError::OptionLength { .. } => "option_length",
            WireError::DuplicateOption { .. } => "duplicate_option",
            WireError::InvalidField { .. } => "invalid_field",
            WireError::Inconsistent { .. } => "inconsistent",
            WireError::BadChecksum => "bad_checksum",
            WireError::TcpOptionLength { .. } => "tcp_option_length",
        }
    }
}

/// `Ok(())` when `buf` has at least `need` bytes for `emit`.
pub(crate) fn check_out(buf: &[u8], need: usize) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::BufferTooSmall { need, have: buf.len() })
    } else {
        Ok(())
    }
}

/// `Ok(())` when `buf` has at least `need` bytes of the structure `what`.
pub(crate) fn check_in(buf: &[u8], need: usize, what: &'static str) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Truncated { what, need, have: buf.len() })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_is_the_two_high_bits() {
        assert_eq!(OptionAction::of(0x1E), OptionAction::Skip);
        assert_eq!(OptionAction::of(0x3E), OptionAction::Skip);
        assert_eq!(OptionAction::of(0x5E), OptionAction::Discard);
        assert_eq!(OptionAction::of(0x9E), OptionAction::DiscardIcmp);
        assert_eq!(OptionAction::of(0xDE), OptionAction::DiscardIcmpUnicast);
        for t in 0..=255u8 {
            assert_eq!(OptionAction::of(t).bits(), t >> 6);
        }
        assert!(crate::hbh::option_may_change(0x3E) && !crate::hbh::option_may_change(0x1E));
    }
}
