//! A whole IPv6 packet: fixed header, optional Hop-by-Hop header, and the rest as opaque payload.

use std::net::Ipv6Addr;

use crate::error::{check_out, WireError};
use crate::hbh::{find_leo_option, HbhRepr};
use crate::ipv6::{Ipv6Repr, IPV6_HEADER_LEN, NEXT_HEADER_HOP_BY_HOP, NEXT_HEADER_NONE, TC_DELAY_SENSITIVE};
use crate::options::{LeoOption, SatguardHack};

/// Hop limit of a HAck packet: like NDP (RFC 4861 §7.1.1), a receiver can require 255 to know the
/// HAck came from the neighbour and was not forwarded.
pub const HACK_HOP_LIMIT: u8 = 255;

/// An IPv6 packet: the fixed header, the Hop-by-Hop header when `header.next_header` is 0, and the
/// bytes after them (`payload`, whose protocol is `hbh.next_header`, or `header.next_header` when
/// there is no Hop-by-Hop header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Packet<'a> {
    /// The fixed header; `payload_len` and `next_header` agree with `hbh` and `payload` (after
    /// `parse`, `payload_len` is what `emit` writes: skipped options and extra padding are not counted).
    pub header: Ipv6Repr,
    /// The Hop-by-Hop Options header, if any.
    pub hbh: Option<HbhRepr>,
    /// Everything after the extension headers leoguard parses.
    pub payload: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    /// Assembles a packet, filling in `header.payload_len` and, when `hbh` is present,
    /// `header.next_header` = 0 (the upper protocol then goes in `hbh.next_header`).
    pub fn new(mut header: Ipv6Repr, hbh: Option<HbhRepr>, payload: &'a [u8]) -> Result<Ipv6Packet<'a>, WireError> {
        if hbh.is_some() {
            header.next_header = NEXT_HEADER_HOP_BY_HOP;
        }
        let len = hbh.map_or(0, |h| h.buffer_len()) + payload.len();
        header.payload_len = u16::try_from(len)
            .map_err(|_| WireError::InvalidField { field: "IPv6 payload longer than 65535 bytes" })?;
        let packet = Ipv6Packet { header, hbh, payload };
        packet.check()?;
        Ok(packet)
    }

    /// A SATGUARD HAck packet (link-local feedback, SATGUARD §3.2): IPv6 header, Hop-by-Hop header
    /// with only the HAck option, No Next Header, no payload.
    pub fn hack(src: Ipv6Addr, dst: Ipv6Addr, hack: SatguardHack) -> Result<Ipv6Packet<'static>, WireError> {
        hack.validate()?;
        let header = Ipv6Repr {
            traffic_class: TC_DELAY_SENSITIVE,
            flow_label: 0,
            payload_len: 0,
            next_header: NEXT_HEADER_HOP_BY_HOP,
            hop_limit: HACK_HOP_LIMIT,
            src,
            dst,
        };
        let hbh = HbhRepr { hack: Some(hack), ..HbhRepr::new(NEXT_HEADER_NONE) };
        Ipv6Packet::new(header, Some(hbh), &[])
    }

    /// The HAck this packet carries, if it has the shape of a HAck packet (Hop-by-Hop header with a
    /// HAck option, No Next Header).
    pub fn as_hack(&self) -> Option<SatguardHack> {
        let hbh = self.hbh?;
        (hbh.next_header == NEXT_HEADER_NONE).then_some(hbh.hack).flatten()
    }

    /// Protocol of `payload`.
    pub fn upper_protocol(&self) -> u8 {
        self.hbh.map_or(self.header.next_header, |h| h.next_header)
    }

    /// Checks that the header agrees with the Hop-by-Hop header and the payload.
    fn check(&self) -> Result<(), WireError> {
        let has_hbh = self.header.next_header == NEXT_HEADER_HOP_BY_HOP;
        if has_hbh != self.hbh.is_some() {
            return Err(WireError::Inconsistent { what: "next header 0 without a Hop-by-Hop header, or the reverse" });
        }
        if self.hbh.is_some_and(|h| h.next_header == NEXT_HEADER_HOP_BY_HOP) {
            // RFC 8200 §4.1: the Hop-by-Hop header may only follow the IPv6 header directly.
            return Err(WireError::Inconsistent { what: "Hop-by-Hop header not directly after the IPv6 header" });
        }
        let len = self.hbh.map_or(0, |h| h.buffer_len()) + self.payload.len();
        if usize::from(self.header.payload_len) != len {
            return Err(WireError::Inconsistent { what: "payload length differs from the headers and payload" });
        }
        Ok(())
    }

    /// Parses an IPv6 packet at the start of `buf`; bytes past the IPv6 payload length are ignored.
    pub fn parse(buf: &'a [u8]) -> Result<Ipv6Packet<'a>, WireError> {
        let header = Ipv6Repr::parse(buf)?;
        let body = &buf[IPV6_HEADER_LEN..IPV6_HEADER_LEN + usize::from(header.payload_len)];
        let (hbh, payload) = if header.next_header == NEXT_HEADER_HOP_BY_HOP {
            let (hbh, used) = HbhRepr::parse_prefix(body)?;
            if hbh.next_header == NEXT_HEADER_HOP_BY_HOP {
                return Err(WireError::Inconsistent { what: "Hop-by-Hop header not directly after the IPv6 header" });
            }
            (Some(hbh), &body[used..])
        } else {
            (None, body)
        };
        // Options we skipped (or extra padding) make the parsed header longer than we would emit it;
        // keep payload_len as what emit will write so that emit(parse(b)) is self-consistent.
        let mut header = header;
        let len = hbh.map_or(0, |h| h.buffer_len()) + payload.len();
        header.payload_len = u16::try_from(len).expect("invariant: no longer than the parsed payload");
        Ok(Ipv6Packet { header, hbh, payload })
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN + usize::from(self.header.payload_len)
    }

    /// Writes the packet to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let len = self.buffer_len();
        check_out(buf, len)?;
        let mut at = self.header.emit(buf)?;
        if let Some(hbh) = &self.hbh {
            at += hbh.emit(&mut buf[at..])?;
        }
        buf[at..len].copy_from_slice(self.payload);
        Ok(len)
    }

    /// Overwrites, in the IPv6 packet in `buf`, the Hop-by-Hop option of the same kind as `opt` with
    /// `opt`, leaving every other byte alone: how a forwarder rewrites HSeq (SATGUARD §3.2) or the
    /// LinkGuardian sequence number per hop without re-serialising the packet (so options it skipped
    /// survive, as RFC 8200 §4.2 wants). Fails if the packet does not parse or lacks that option.
    pub fn rewrite_option(buf: &mut [u8], opt: LeoOption) -> Result<(), WireError> {
        let header = Ipv6Repr::parse(buf)?;
        if header.next_header != NEXT_HEADER_HOP_BY_HOP {
            return Err(WireError::Inconsistent { what: "no Hop-by-Hop header to rewrite" });
        }
        let end = IPV6_HEADER_LEN + usize::from(header.payload_len);
        let hbh = &mut buf[IPV6_HEADER_LEN..end];
        let (_, header_len) = HbhRepr::parse_prefix(hbh)?;
        let at = find_leo_option(hbh, header_len, opt.option_type(), opt.subtype())
            .ok_or(WireError::Inconsistent { what: "option to rewrite is not in the packet" })?;
        opt.emit(&mut hbh[at..header_len])?;
        Ok(())
    }
}
