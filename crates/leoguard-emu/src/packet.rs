//! Just enough IP parsing for the data plane to route and account packets: the addresses, the
//! transport protocol and the ports of IPv4 and IPv6 packets (Hop-by-Hop options skipped). Malformed
//! packets give `None` and are dropped and counted by the caller, never a panic.

/// An address as one integer: IPv6 as is, IPv4 as the IPv4-mapped IPv6 address (::ffff:a.b.c.d).
pub type AddrKey = u128;

/// IPv4-mapped key of an IPv4 address.
pub fn v4_key(a: [u8; 4]) -> AddrKey {
    (0xffff_u128 << 32) | u128::from(u32::from_be_bytes(a))
}

/// What the data plane reads from a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Source address.
    pub src: AddrKey,
    /// Destination address.
    pub dst: AddrKey,
    /// Transport protocol (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...).
    pub proto: u8,
    /// Source port (0 for protocols without ports).
    pub sport: u16,
    /// Destination port (0 for protocols without ports).
    pub dport: u16,
    /// Whether the destination is a multicast address.
    pub multicast: bool,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Where the transport header starts (`None` in a later IPv4 fragment, which carries none).
    pub transport: Option<usize>,
    /// The packet's length as its IP header gives it (IPv4 total length, IPv6 40 + payload length).
    pub ip_len: usize,
}

const HOP_BY_HOP: u8 = 0;

/// Parses an IP packet's header; `None` if it is not a well-formed IPv4 or IPv6 packet.
pub fn parse(p: &[u8]) -> Option<Header> {
    let version = p.first()? >> 4;
    let (src, dst, mut proto, mut off, multicast, ip_len) = match version {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 || p.len() < ihl {
                return None;
            }
            let s: [u8; 4] = p[12..16].try_into().ok()?;
            let d: [u8; 4] = p[16..20].try_into().ok()?;
            // Later fragments carry no transport header.
            let frag_off = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            let proto = p[9];
            let off = if frag_off == 0 { ihl } else { usize::MAX };
            let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
            (v4_key(s), v4_key(d), proto, off, (224..240).contains(&d[0]), total)
        }
        6 => {
            if p.len() < 40 {
                return None;
            }
            let s = u128::from_be_bytes(p[8..24].try_into().ok()?);
            let d = u128::from_be_bytes(p[24..40].try_into().ok()?);
            (s, d, p[6], 40, p[24] == 0xff, 40 + usize::from(u16::from_be_bytes([p[4], p[5]])))
        }
        _ => return None,
    };
    if version == 6 && proto == HOP_BY_HOP {
        let len = (usize::from(*p.get(off + 1)?) + 1) * 8;
        proto = *p.get(off)?;
        off += len;
    }
    let (sport, dport) = match proto {
        6 | 17 if off != usize::MAX => {
            let b = p.get(off..off + 4)?;
            (u16::from_be_bytes([b[0], b[1]]), u16::from_be_bytes([b[2], b[3]]))
        }
        _ => (0, 0),
    };
    let transport = (off != usize::MAX).then_some(off);
    Some(Header { src, dst, proto, sport, dport, multicast, v6: version == 6, transport, ip_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_udp_and_ipv4_tcp() {
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 17;
        v6[23] = 1;
        v6[39] = 2;
        v6[40..44].copy_from_slice(&[0x13, 0x88, 0x14, 0x51]);
        let h = parse(&v6).unwrap();
        assert_eq!((h.src, h.dst, h.proto, h.sport, h.dport, h.multicast, h.v6), (1, 2, 17, 5000, 5201, false, true));
        let mut v4 = vec![0u8; 40];
        v4[0] = 0x45;
        v4[9] = 6;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        v4[20..24].copy_from_slice(&[0x00, 0x50, 0x9c, 0x40]);
        let h = parse(&v4).unwrap();
        assert_eq!((h.src, h.dst, h.sport, h.dport), (v4_key([10, 0, 0, 1]), v4_key([10, 0, 0, 2]), 80, 40000));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..80)) {
            let _ = parse(&b);
        }
    }
}
