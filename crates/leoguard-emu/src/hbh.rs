//! The per-hop schemes' fields in the real packets: the data plane writes a packet's Hop-by-Hop header
//! as it leaves on an emulated link, reads it back where it arrives, strips it where the packet leaves
//! the emulated network, and builds link-local control packets (HAcks, LinkGuardian ACKs and
//! dummies) as real IPv6 packets. Only IPv6 packets carry the header; all of it goes through
//! leoguard-wire's parser and emitter.

use leoguard_wire::HbhRepr;
use std::net::Ipv6Addr;

/// IPv6 header length.
const V6: usize = 40;
/// Next Header value of a Hop-by-Hop options header.
const HOP_BY_HOP: u8 = 0;

/// Whether `buf[..len]` is an IPv6 packet.
pub fn is_v6(buf: &[u8], len: usize) -> bool {
    len >= V6 && buf[0] >> 4 == 6
}

fn hbh_len(buf: &[u8], len: usize) -> Option<usize> {
    if !is_v6(buf, len) || buf[6] != HOP_BY_HOP || len < V6 + 2 {
        return None;
    }
    let n = (usize::from(buf[V6 + 1]) + 1) * 8;
    (V6 + n <= len).then_some(n)
}

fn set_payload_len(buf: &mut [u8], len: usize) {
    let pl = (len - V6) as u16;
    buf[4..6].copy_from_slice(&pl.to_be_bytes());
}

/// The packet's Hop-by-Hop header, if it has a well-formed one.
pub fn read(buf: &[u8], len: usize) -> Option<HbhRepr> {
    let n = hbh_len(buf, len)?;
    HbhRepr::parse(&buf[V6..V6 + n]).ok()
}

/// Removes the packet's Hop-by-Hop header (if any); returns the new length.
pub fn strip(buf: &mut [u8], len: usize) -> usize {
    let Some(n) = hbh_len(buf, len) else { return len };
    buf[6] = buf[V6];
    buf.copy_within(V6 + n..len, V6);
    let len = len - n;
    set_payload_len(buf, len);
    len
}

/// Makes `h` the packet's Hop-by-Hop header (replacing any; `None` removes it). Returns the new
/// length, or `None` (the packet unchanged) if it is no IPv6 packet or the header does not fit.
pub fn set(buf: &mut [u8], len: usize, h: Option<&HbhRepr>) -> Option<usize> {
    if !is_v6(buf, len) {
        return None;
    }
    // The common case on a path: the next hop's header has the size of the previous hop's, and is
    // written in its place without moving the payload.
    if let (Some(h), Some(old)) = (h, hbh_len(buf, len)) {
        if h.buffer_len() == old {
            let mut h = *h;
            h.next_header = buf[V6];
            h.emit(&mut buf[V6..V6 + old]).ok()?;
            return Some(len);
        }
    }
    let len = strip(buf, len);
    let Some(h) = h else { return Some(len) };
    let n = h.buffer_len();
    if len + n > buf.len() {
        return None;
    }
    let mut h = *h;
    h.next_header = buf[6];
    buf.copy_within(V6..len, V6 + n);
    h.emit(&mut buf[V6..V6 + n]).ok()?;
    buf[6] = HOP_BY_HOP;
    let len = len + n;
    set_payload_len(buf, len);
    Some(len)
}

/// The address a link end has on control packets: `fd00:6c67:ffff::<node + 1>`.
pub fn node_addr(node: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x6c67, 0xffff, 0, 0, 0, ((node + 1) >> 16) as u16, (node + 1) as u16)
}

/// The length [`control`] gives a control packet carrying `h`, padded to `size`, in a buffer of
/// `buf_len` bytes (`None`: the header does not fit).
pub fn control_len(h: &HbhRepr, size: usize, buf_len: usize) -> Option<usize> {
    (V6 + h.buffer_len() <= buf_len).then(|| (V6 + h.buffer_len()).max(size.min(buf_len)))
}

/// Writes a link-local control packet from `from` to `to` carrying `h` (Next Header "no next header",
/// hop limit 255 as for link-local signalling), followed by zero bytes up to `size` so the link charges
/// the size the scheme modelled. Returns its length.
pub fn control(buf: &mut [u8], from: u32, to: u32, tc: u8, h: &HbhRepr, size: usize) -> Option<usize> {
    let mut h = *h;
    h.next_header = leoguard_wire::NEXT_HEADER_NONE;
    let n = h.buffer_len();
    let len = control_len(&h, size, buf.len())?;
    buf[..len].fill(0);
    buf[0] = 0x60 | (tc >> 4);
    buf[1] = tc << 4;
    buf[6] = HOP_BY_HOP;
    buf[7] = 255;
    buf[8..24].copy_from_slice(&node_addr(from).octets());
    buf[24..40].copy_from_slice(&node_addr(to).octets());
    h.emit(&mut buf[V6..V6 + n]).ok()?;
    set_payload_len(buf, len);
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::Seq16;
    use leoguard_wire::{SatguardFlow, SatguardHack, SatguardHop};

    fn udp_packet(payload: usize) -> (Vec<u8>, usize) {
        let mut b = vec![0u8; 2048];
        b[0] = 0x60;
        b[6] = 17;
        b[7] = 64;
        let len = V6 + 8 + payload;
        set_payload_len(&mut b, len);
        for (i, x) in b[V6..len].iter_mut().enumerate() {
            *x = i as u8;
        }
        (b, len)
    }

    #[test]
    fn a_header_goes_in_comes_back_and_leaves_the_packet_as_it_was() {
        let (mut b, len) = udp_packet(100);
        let orig = b[..len].to_vec();
        let mut h = HbhRepr::new(0);
        h.hop = Some(SatguardHop { hseq: Seq16(9), retransmission: true, migrated: false });
        h.flow = Some(SatguardFlow { fseq: Seq16(3), delay_sensitive: true });
        let l2 = set(&mut b, len, Some(&h)).unwrap();
        assert_eq!(l2, len + h.buffer_len());
        let back = read(&b, l2).unwrap();
        assert_eq!((back.hop, back.flow, back.next_header), (h.hop, h.flow, 17));
        // A second hop rewrites the header in place of the first.
        h.hop = Some(SatguardHop { hseq: Seq16(10), retransmission: false, migrated: true });
        let l3 = set(&mut b, l2, Some(&h)).unwrap();
        assert_eq!(l3, l2);
        assert_eq!(read(&b, l3).unwrap().hop, h.hop);
        let l4 = strip(&mut b, l3);
        assert_eq!(&b[..l4], &orig[..], "stripping restores the original packet");
        assert_eq!(strip(&mut b, l4), l4, "nothing to strip");
    }

    #[test]
    fn control_packets_parse_as_ipv6_with_their_option() {
        let mut b = vec![0u8; 2048];
        let mut h = HbhRepr::new(0);
        h.hack = Some(SatguardHack { cum_start: Seq16(1), cum_end: Seq16(5), beam: 2 });
        let len = control(&mut b, 3, 4, 0xb8, &h, 56).unwrap();
        assert_eq!(len, 56);
        let ip = leoguard_wire::Ipv6Repr::parse(&b[..len]).unwrap();
        assert_eq!((ip.src, ip.dst, ip.traffic_class, ip.hop_limit), (node_addr(3), node_addr(4), 0xb8, 255));
        assert_eq!(read(&b, len).unwrap().hack, h.hack);
    }

    #[test]
    fn a_control_packets_fields_read_back_as_its_header_gives_them() {
        // A control packet no capture taps travels as its fields only (schemes.rs): its far end must get
        // exactly what the bytes would have carried, and the link must charge the same length.
        use leoguard_net::packet::{NetFields, Packet, NET_CONTROL};
        use leoguard_net::schemes::wire::{apply_hbh, packet_hbh, WireScheme, LINK_LOCAL_DST};
        let cases = [
            (WireScheme::Satguard, 0, 7 | 9 << 16 | 3 << 32, 56),
            (WireScheme::LinkGuardian, 0, 4 | 2 << 16 | 5 << 32 | 1 << 48, 64),
            (WireScheme::LinkGuardian, 0, 4 | 6 << 16 | 1 << 49, 0),
            (WireScheme::LinkGuardian, leoguard_net::packet::NET_HSEQ, 0, 1500),
        ];
        for (scheme, flags, ack, size) in cases {
            let p = Packet {
                seq: 3,
                ack,
                size,
                dst: LINK_LOCAL_DST,
                net: NetFields { flags: NET_CONTROL | flags, hseq: 11, tc: 0xb8, ..Default::default() },
                ..Default::default()
            };
            let h = packet_hbh(scheme, &p, leoguard_wire::NEXT_HEADER_NONE).unwrap();
            let mut b = vec![0u8; 2048];
            let len = control(&mut b, 1, 2, p.net.tc, &h, size as usize).unwrap();
            assert_eq!(control_len(&h, size as usize, b.len()), Some(len), "{scheme:?}");
            let (mut wire, mut fields) = (p, p);
            wire.net.flags |= NET_RETX_AND_MIGRATED;
            fields.net.flags |= NET_RETX_AND_MIGRATED;
            apply_hbh(read(&b, len).as_ref(), &mut wire);
            apply_hbh(Some(&h), &mut fields);
            assert_eq!(wire, fields, "{scheme:?}");
        }
    }
    const NET_RETX_AND_MIGRATED: u8 = leoguard_net::packet::NET_RETX | leoguard_net::packet::NET_MIGRATED;

    proptest::proptest! {
        #[test]
        fn arbitrary_packets_never_panic(bytes in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..300)) {
            let mut b = vec![0u8; 2048];
            let len = bytes.len();
            b[..len].copy_from_slice(&bytes);
            let _ = read(&b, len);
            let l = strip(&mut b, len);
            proptest::prop_assert!(l <= len);
            let _ = set(&mut b, l, None);
        }
    }
}
