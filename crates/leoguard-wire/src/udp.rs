//! UDP over IPv6 (RFC 768, with the RFC 8200 §8.1 pseudo-header checksum): the payload leoguard's
//! emulator and captures carry above the Hop-by-Hop header.

use std::net::Ipv6Addr;

use crate::error::{check_in, check_out, WireError};
use crate::ipv6::NEXT_HEADER_UDP;

/// Length of the UDP header in bytes.
pub const UDP_HEADER_LEN: usize = 8;

/// A UDP datagram borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpPacket<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Application data.
    pub payload: &'a [u8],
}

/// The Internet checksum (RFC 1071) of `parts` taken as one byte string: the one's-complement sum of
/// its 16-bit words, complemented. Every part but the last must have an even length.
pub fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for bytes in parts {
        let mut chunks = bytes.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum (RFC 1071) over the IPv6 pseudo-header (RFC 8200 §8.1) and `upper`, the
/// upper-layer packet with its checksum field as it stands.
pub fn ipv6_pseudo_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, upper: &[u8]) -> u16 {
    // Upper-Layer Packet Length is 32 bits in the pseudo-header; UDP lengths fit in 16.
    let len = (upper.len() as u32).to_be_bytes();
    internet_checksum(&[&src.octets(), &dst.octets(), &len, &[0, 0, 0, next_header], upper])
}

impl<'a> UdpPacket<'a> {
    /// Parses the UDP datagram that is the whole of `buf` (the upper-layer payload of an IPv6 packet
    /// from `src` to `dst`): the length field must equal `buf.len()` and the checksum must verify.
    pub fn parse(buf: &'a [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<UdpPacket<'a>, WireError> {
        check_in(buf, UDP_HEADER_LEN, "UDP header")?;
        let len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
        if len != buf.len() {
            return Err(WireError::Inconsistent { what: "UDP length differs from the IPv6 payload" });
        }
        // RFC 8200 §8.1: a zero UDP checksum over IPv6 is invalid; a correct one sums to zero.
        if buf[6..8] == [0, 0] || ipv6_pseudo_checksum(src, dst, NEXT_HEADER_UDP, buf) != 0 {
            return Err(WireError::BadChecksum);
        }
        Ok(UdpPacket {
            src_port: u16::from_be_bytes([buf[0], buf[1]]),
            dst_port: u16::from_be_bytes([buf[2], buf[3]]),
            payload: &buf[UDP_HEADER_LEN..],
        })
    }

    /// Bytes `emit` writes: header plus payload.
    pub fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN + self.payload.len()
    }

    /// Writes the datagram with its checksum for an IPv6 packet from `src` to `dst`.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize, WireError> {
        let len = self.buffer_len();
        let len16 = u16::try_from(len)
            .map_err(|_| WireError::InvalidField { field: "UDP datagram longer than 65535 bytes" })?;
        check_out(buf, len)?;
        let b = &mut buf[..len];
        b[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        b[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        b[4..6].copy_from_slice(&len16.to_be_bytes());
        b[6..8].fill(0);
        b[UDP_HEADER_LEN..].copy_from_slice(self.payload);
        let mut sum = ipv6_pseudo_checksum(src, dst, NEXT_HEADER_UDP, b);
        if sum == 0 {
            // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
            sum = 0xFFFF;
        }
        b[6..8].copy_from_slice(&sum.to_be_bytes());
        Ok(len)
    }
}
