//! The hosts' TUN devices and the data plane's reads and writes on them.
//!
//! With offloads on (`EmuConfig::offload`, the default) a device is opened with `IFF_VNET_HDR` and
//! `TUNSETOFFLOAD` (checksum, TSO4/TSO6, and USO where the kernel has it): the host's kernel then
//! hands the data plane TCP super-packets of up to 64 KB, as it would a NIC with segmentation
//! offload, and one read carries tens of segments. A read is split into its MTU segments at once
//! (checksums, IP IDs, lengths and sequence numbers rewritten per segment) and each segment enters the
//! emulated network on its own: queued, delayed, lost and reordered as a packet of its own. On the way
//! out, a segment with more of its link's packets arriving right behind it is held briefly (the data
//! plane's `WRITE_HOLD_NS`, or until [`MAX_PENDING`] wait), anything else is written at the end of the
//! current pass over due events, and segments of one flow that are contiguous are coalesced into one
//! GSO write (GRO), so the receiving kernel handles a super-packet too. Each packet's lateness is
//! taken when its batch's write begins, so the hold is part of the reported timing error.
//!
//! The segmentation and coalescing are `tun-rs`'s (a port of wireguard-go's, which Tailscale and
//! WireGuard run): `recv_multiple` splits, `send_multiple` with a [`GROTable`] coalesces. A kernel
//! that refuses the offloads gets a plain device (one packet per read and write), and the run says so.

use crate::plane::{Cause, SLOT};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use tun_rs::{DeviceBuilder, GROTable, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

/// Packets held for one host's write before they are written whatever the pass does.
pub const MAX_PENDING: usize = IDEAL_BATCH_SIZE;

/// The virtio header flags of a queued packet before `send_multiple` (flags are 0 to 7).
const UNWRITTEN: u8 = 0xff;

/// Bytes one read may return: a 64 KB super-packet and its virtio header.
const RX_BYTES: usize = VIRTIO_NET_HDR_LEN + 65_535;

/// Reads and writes on one device (all offload figures are zero on a plain device).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TunStats {
    /// Read calls that returned a packet.
    pub reads: u64,
    /// Packets those reads carried (segments of super-packets counted one by one).
    pub read_packets: u64,
    /// Write calls made.
    pub writes: u64,
    /// Packets those writes carried.
    pub written_packets: u64,
    /// Reads the device could not split (malformed or oversized super-packets), counted as drops.
    pub refused_reads: u64,
    /// Write calls that failed.
    pub failed_writes: u64,
}

impl std::ops::AddAssign for TunStats {
    fn add_assign(&mut self, b: TunStats) {
        self.reads += b.reads;
        self.read_packets += b.read_packets;
        self.writes += b.writes;
        self.written_packets += b.written_packets;
        self.refused_reads += b.refused_reads;
        self.failed_writes += b.failed_writes;
    }
}

/// The outcome of one read.
pub(crate) enum Read {
    /// Nothing waiting.
    Empty,
    /// This many packets, `packet(0..n)`.
    Packets(usize),
    /// A read that could not be split: one drop of this cause.
    Refused(Cause),
}

/// Whether GRO could merge `pkt` with a neighbour of its flow: a TCP segment with data (or, with `udp`,
/// a UDP datagram), in IPv4 without options or IPv6 without extension headers. Anything else (a bare
/// ACK, ICMP) is not worth holding for.
pub(crate) fn gro_candidate(pkt: &[u8], udp: bool) -> bool {
    let (proto, l4, total) = match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 && pkt[0] & 0x0f == 5 => {
            (pkt[9], 20, usize::from(u16::from_be_bytes([pkt[2], pkt[3]])))
        }
        Some(6) if pkt.len() >= 40 => (pkt[6], 40, 40 + usize::from(u16::from_be_bytes([pkt[4], pkt[5]]))),
        _ => return false,
    };
    match proto {
        6 => pkt.len() > l4 + 12 && total > l4 + usize::from(pkt[l4 + 12] >> 4) * 4,
        17 => udp && total > l4 + 8,
        _ => false,
    }
}

/// One host's TUN device.
pub(crate) struct HostTun {
    dev: SyncDevice,
    offload: bool,
    udp_gso: bool,
    rx: Vec<u8>,
    segs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Packets to write, each behind room for the virtio header; the first `tx_n` are in use.
    tx: Vec<Vec<u8>>,
    tx_n: usize,
    gro: GROTable,
    pub(crate) stats: TunStats,
}

impl HostTun {
    /// Creates TUN device `name` in the current namespace, non-blocking; with `offload`, asks the
    /// kernel for segmentation offloads and falls back to a plain device if it refuses (the reason is
    /// returned beside the device).
    pub(crate) fn open(name: &str, offload: bool) -> io::Result<(HostTun, Option<String>)> {
        let (dev, why_not) = if offload {
            match DeviceBuilder::new().name(name).offload(true).build_sync() {
                Ok(d) => (d, None),
                Err(e) => (DeviceBuilder::new().name(name).build_sync()?, Some(format!("TUN offloads refused: {e}"))),
            }
        } else {
            (DeviceBuilder::new().name(name).build_sync()?, None)
        };
        dev.set_nonblocking(true)?;
        let offload = dev.tcp_gso();
        let udp_gso = dev.udp_gso();
        let batch = if offload { IDEAL_BATCH_SIZE } else { 1 };
        Ok((
            HostTun {
                dev,
                offload,
                udp_gso,
                rx: if offload { vec![0; RX_BYTES] } else { Vec::new() },
                segs: vec![vec![0; SLOT]; batch],
                sizes: vec![0; batch],
                tx: Vec::new(),
                tx_n: 0,
                gro: GROTable::default(),
                stats: TunStats::default(),
            },
            why_not,
        ))
    }

    /// Whether the device has segmentation offloads.
    pub(crate) fn offload(&self) -> bool {
        self.offload
    }

    /// Whether the kernel also segments UDP for it (USO, Linux >= 6.2).
    pub(crate) fn udp_gso(&self) -> bool {
        self.udp_gso
    }

    /// Reads once. A plain device's packet longer than a slot reads as `SLOT` bytes (the caller
    /// refuses it as too big); an offloaded super-packet that cannot be split is refused here.
    pub(crate) fn recv(&mut self) -> Read {
        let r = if self.offload {
            self.dev.recv_multiple(&mut self.rx, &mut self.segs, &mut self.sizes, 0)
        } else {
            self.dev.recv(&mut self.segs[0]).map(|n| {
                self.sizes[0] = n;
                1
            })
        };
        match r {
            Ok(n) => {
                self.stats.reads += 1;
                self.stats.read_packets += n as u64;
                if self.offload {
                    for i in 0..n {
                        udp6_zero_checksum_fix(&mut self.segs[i][..self.sizes[i]]);
                    }
                }
                Read::Packets(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => Read::Empty,
            Err(e) => {
                // A GSO read that does not split: more segments than buffers, segments longer than a
                // slot, or headers that do not parse.
                self.stats.reads += 1;
                self.stats.refused_reads += 1;
                let msg = e.to_string();
                Read::Refused(if msg.contains("too small") || msg.contains("overflows") || msg.contains("too many") {
                    Cause::TooBig
                } else {
                    Cause::Malformed
                })
            }
        }
    }

    /// Packet `i` of the last read.
    pub(crate) fn packet(&self, i: usize) -> &[u8] {
        &self.segs[i][..self.sizes[i]]
    }

    /// Hands `pkt` to the host: written now on a plain device; queued for [`HostTun::flush`] with
    /// offloads. Returns whether the queue is full (flush it now). A plain device's failed write is
    /// an error.
    pub(crate) fn send(&mut self, pkt: &[u8]) -> io::Result<bool> {
        if !self.offload {
            self.stats.writes += 1;
            return match self.dev.send(pkt) {
                Ok(_) => {
                    self.stats.written_packets += 1;
                    Ok(false)
                }
                Err(e) => {
                    self.stats.failed_writes += 1;
                    Err(e)
                }
            };
        }
        if self.tx_n == self.tx.len() {
            // Room for a whole coalesced super-packet: GRO appends into the first buffer of a run and
            // merges nothing into a buffer that would have to grow.
            self.tx.push(Vec::with_capacity(RX_BYTES + VIRTIO_NET_HDR_LEN));
        }
        let b = &mut self.tx[self.tx_n];
        b.clear();
        // The header's flags byte holds a mark no header has: `send_multiple` writes a header into
        // every buffer it writes and none into the buffers it coalesced into another, so the marks
        // left after it count the packets that went out inside another's write.
        b.resize(VIRTIO_NET_HDR_LEN, 0);
        b[0] = UNWRITTEN;
        b.extend_from_slice(pkt);
        self.tx_n += 1;
        Ok(self.tx_n >= MAX_PENDING)
    }

    /// Writes what is queued, coalescing contiguous segments of a flow. Returns the number of
    /// packets handed over and whether every write succeeded.
    pub(crate) fn flush(&mut self) -> (usize, bool) {
        let n = std::mem::take(&mut self.tx_n);
        if n == 0 {
            return (0, true);
        }
        let r = self.dev.send_multiple(&mut self.gro, &mut self.tx[..n], VIRTIO_NET_HDR_LEN);
        self.stats.writes += self.tx[..n].iter().filter(|b| b[0] != UNWRITTEN).count() as u64;
        self.stats.written_packets += n as u64;
        let ok = r.is_ok();
        if !ok {
            self.stats.failed_writes += 1;
        }
        (n, ok)
    }
}

impl AsRawFd for HostTun {
    fn as_raw_fd(&self) -> RawFd {
        self.dev.as_raw_fd()
    }
}

/// Writes 0xffff where an IPv6 UDP datagram's checksum reads 0. `tun-rs` completes the checksum of a
/// datagram the host's kernel left to the device (one not segmented) without the rule that a UDP
/// checksum computing to 0 is sent as 0xffff (RFC 768; the kernel's own completion does it, and
/// tun-rs's GSO split does), so about one datagram in 65,536 left with 0, which IPv6 forbids: the
/// receiving kernel dropped it (`InCsumErrors`), a loss nothing in the network caused. In ones'
/// complement both values are the same sum. A host's own zero checksum (RFC 6936 tunnels) is never
/// left to the device, but it would be rewritten too: the emulator's hosts send none.
pub(crate) fn udp6_zero_checksum_fix(pkt: &mut [u8]) {
    const UDP: u8 = 17;
    if pkt.len() >= 48 && pkt[0] >> 4 == 6 && pkt[6] == UDP && pkt[46] == 0 && pkt[47] == 0 {
        pkt[46] = 0xff;
        pkt[47] = 0xff;
    }
}

#[cfg(test)]
mod tests {
    use super::{gro_candidate, udp6_zero_checksum_fix};
    use leoguard_wire::udp::ipv6_pseudo_checksum;
    use std::net::Ipv6Addr;

    #[test]
    fn a_udp_datagram_whose_checksum_completes_to_zero_leaves_with_0xffff() {
        let (src, dst) = ("fd00:6c67::1".parse::<Ipv6Addr>().unwrap(), "fd00:6c67::3".parse::<Ipv6Addr>().unwrap());
        // A datagram whose ones'-complement sum (pseudo-header included) is 0xffff: its checksum
        // computes to 0, as one in 65,536 does.
        let mut udp = vec![0x9c, 0x40, 0x13, 0x88, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0];
        let sum = !ipv6_pseudo_checksum(&src, &dst, 17, &udp);
        udp[14..16].copy_from_slice(&(0xffff - sum).to_be_bytes());
        assert_eq!(ipv6_pseudo_checksum(&src, &dst, 17, &udp), 0, "the checksum computes to 0");
        let mut pkt = v6(17, &udp);
        pkt[8..24].copy_from_slice(&src.octets());
        pkt[24..40].copy_from_slice(&dst.octets());
        // What the device's checksum completion wrote (the computed value as it is): 0, which an IPv6
        // receiver drops. The fix writes its other form, which verifies.
        udp6_zero_checksum_fix(&mut pkt);
        assert_eq!(&pkt[46..48], &[0xff, 0xff]);
        assert_eq!(ipv6_pseudo_checksum(&src, &dst, 17, &pkt[40..]), 0, "the sum over it verifies");
        // Anything else is left as it is.
        for (proto, check) in [(17u8, [0x12, 0x34]), (6, [0, 0])] {
            let mut l4 = udp.clone();
            l4[6..8].copy_from_slice(&check);
            let mut other = v6(proto, &l4);
            let before = other.clone();
            udp6_zero_checksum_fix(&mut other);
            assert_eq!(other, before);
        }
        let mut v4 = vec![0x45; 28];
        v4[9] = 17;
        let before = v4.clone();
        udp6_zero_checksum_fix(&mut v4);
        assert_eq!(v4, before);
    }

    /// An IPv6 packet with next header `proto` and `l4` as its payload.
    fn v6(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        p.extend_from_slice(&[proto, 64]);
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(l4);
        p
    }

    fn tcp(payload: usize) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[12] = 5 << 4;
        h.extend(std::iter::repeat_n(7, payload));
        h
    }

    #[test]
    fn only_data_segments_are_held_for_coalescing() {
        assert!(gro_candidate(&v6(6, &tcp(1000)), false));
        assert!(!gro_candidate(&v6(6, &tcp(0)), false), "a bare ACK is written at once");
        assert!(!gro_candidate(&v6(58, &[128, 0, 0, 0, 0, 1, 0, 1]), true), "ICMPv6");
        let udp = [0u8, 1, 0, 2, 0, 12, 0, 0, 1, 2, 3, 4];
        assert!(gro_candidate(&v6(17, &udp), true));
        assert!(!gro_candidate(&v6(17, &udp), false), "UDP only where the device takes USO");
        let mut v4 = vec![0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0];
        v4.extend_from_slice(&[0; 8]);
        v4.extend_from_slice(&tcp(20));
        assert!(gro_candidate(&v4, false));
        v4[0] = 0x46; // IPv4 options: not merged
        assert!(!gro_candidate(&v4, false));
        assert!(!gro_candidate(&[0x60, 0, 0], false), "too short");
    }
}
