//! The IPv6 fixed header (RFC 8200 §3) and the Traffic Class marking of delay-sensitive traffic
//! (SATGUARD §3.5 "partial traffic processing").

use std::net::Ipv6Addr;

use crate::error::{check_in, check_out, WireError};

/// Length of the IPv6 fixed header in bytes.
pub const IPV6_HEADER_LEN: usize = 40;
/// Next Header value of a Hop-by-Hop Options header (RFC 8200 §4.3).
pub const NEXT_HEADER_HOP_BY_HOP: u8 = 0;
/// Next Header value of UDP.
pub const NEXT_HEADER_UDP: u8 = 17;
/// Next Header value "No Next Header" (RFC 8200 §4.7): nothing follows, as in a HAck packet.
pub const NEXT_HEADER_NONE: u8 = 59;

/// DSCP Expedited Forwarding (RFC 3246), the code point leoguard reads as "delay-sensitive".
pub const DSCP_EF: u8 = 46;
/// The Traffic Class leoguard writes on delay-sensitive packets: DSCP EF in the upper six bits, ECN
/// Not-ECT (00) in the lower two. SATGUARD §3.5: only traffic the operator marks this way is
/// processed (HSeq/HAck/FSeq); every other packet is forwarded untouched.
pub const TC_DELAY_SENSITIVE: u8 = DSCP_EF << 2;
/// Largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0xF_FFFF;

/// The IPv6 fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Traffic Class: DSCP (upper six bits) and ECN (lower two).
    pub traffic_class: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Payload length: bytes after the fixed header, extension headers included.
    pub payload_len: u16,
    /// Protocol of the header that follows.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
}

impl Ipv6Repr {
    /// Parses the fixed header at the start of `buf`, checking that the version is 6 and that the
    /// payload the header announces fits in `buf` (bytes past it, e.g. link padding, are allowed).
    pub fn parse(buf: &[u8]) -> Result<Ipv6Repr, WireError> {
        check_in(buf, IPV6_HEADER_LEN, "IPv6 header")?;
        let version = buf[0] >> 4;
        if version != 6 {
            return Err(WireError::BadVersion { version });
        }
        let payload_len = u16::from_be_bytes([buf[4], buf[5]]);
        check_in(buf, IPV6_HEADER_LEN + usize::from(payload_len), "IPv6 payload")?;
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&buf[8..24]);
        dst.copy_from_slice(&buf[24..40]);
        Ok(Ipv6Repr {
            traffic_class: (buf[0] << 4) | (buf[1] >> 4),
            flow_label: (u32::from(buf[1] & 0x0F) << 16) | (u32::from(buf[2]) << 8) | u32::from(buf[3]),
            payload_len,
            next_header: buf[6],
            hop_limit: buf[7],
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
        })
    }

    /// Bytes `emit` writes (the fixed header only; the payload is the caller's).
    pub fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN
    }

    /// Writes the 40-byte fixed header to the start of `buf`; returns 40.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.flow_label > FLOW_LABEL_MAX {
            return Err(WireError::InvalidField { field: "flow label wider than 20 bits" });
        }
        check_out(buf, IPV6_HEADER_LEN)?;
        let word = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label;
        buf[0..4].copy_from_slice(&word.to_be_bytes());
        buf[4..6].copy_from_slice(&self.payload_len.to_be_bytes());
        buf[6] = self.next_header;
        buf[7] = self.hop_limit;
        buf[8..24].copy_from_slice(&self.src.octets());
        buf[24..40].copy_from_slice(&self.dst.octets());
        Ok(IPV6_HEADER_LEN)
    }

    /// The DSCP (upper six bits of the Traffic Class).
    pub fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }

    /// Whether SATGUARD processes this packet (SATGUARD §3.5): its DSCP is EF. The ECN bits are
    /// ignored because routers may change them en route (RFC 3168).
    pub fn is_delay_sensitive(&self) -> bool {
        is_delay_sensitive_tc(self.traffic_class)
    }

    /// Marks the packet delay-sensitive (DSCP EF) or best effort (DSCP 0), keeping the ECN bits.
    pub fn set_delay_sensitive(&mut self, on: bool) {
        let dscp = if on { DSCP_EF } else { 0 };
        self.traffic_class = (dscp << 2) | (self.traffic_class & 0b11);
    }
}

/// Whether a Traffic Class value carries DSCP EF, leoguard's delay-sensitive mark (ECN ignored).
pub fn is_delay_sensitive_tc(traffic_class: u8) -> bool {
    traffic_class >> 2 == DSCP_EF
}

/// Reads the Traffic Class of the IPv6 packet in `buf` without parsing the rest: the per-packet test
/// a router runs before deciding whether to do any SATGUARD work (SATGUARD §3.5).
pub fn read_traffic_class(buf: &[u8]) -> Result<u8, WireError> {
    check_in(buf, 2, "IPv6 header")?;
    let version = buf[0] >> 4;
    if version != 6 {
        return Err(WireError::BadVersion { version });
    }
    Ok((buf[0] << 4) | (buf[1] >> 4))
}

/// Rewrites the Traffic Class of the IPv6 packet in `buf` in place (the Traffic Class is not covered
/// by any checksum, so nothing else changes).
pub fn write_traffic_class(buf: &mut [u8], traffic_class: u8) -> Result<(), WireError> {
    read_traffic_class(buf)?;
    buf[0] = 0x60 | (traffic_class >> 4);
    buf[1] = (traffic_class << 4) | (buf[1] & 0x0F);
    Ok(())
}
