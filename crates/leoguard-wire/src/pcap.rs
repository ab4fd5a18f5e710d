//! A classic libpcap file writer (not pcapng): what tshark, Wireshark and tcpdump all read.
//!
//! Layout: a 24-byte global header (magic 0xa1b2c3d4 = microsecond timestamps, version 2.4, zone 0,
//! sigfigs 0, snaplen, link type), then per packet a 16-byte record header (ts_sec, ts_usec,
//! incl_len, orig_len) and the captured bytes. Everything is written little-endian; readers learn
//! the byte order from the magic.

use std::io::{self, Write};

/// Magic number of a classic pcap file with microsecond timestamps.
pub const PCAP_MAGIC: u32 = 0xa1b2_c3d4;
/// Magic number of a classic pcap file with nanosecond timestamps.
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Largest number of bytes stored per packet; longer packets are cut (orig_len keeps their length).
pub const PCAP_SNAPLEN: u32 = 65_535;
/// LINKTYPE_RAW: each record is a raw IPv4 or IPv6 packet, no link-layer header.
pub const LINKTYPE_RAW: u32 = 101;

/// Writes packets to a pcap file.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header to `out` and returns the writer.
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&PCAP_MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) stay 0.
        h[16..20].copy_from_slice(&PCAP_SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Appends one packet captured at `t_ns` nanoseconds (since the epoch of the run's clock);
    /// the timestamp is truncated to microseconds, the pcap resolution.
    pub fn write_packet(&mut self, t_ns: u64, bytes: &[u8]) -> io::Result<()> {
        let orig_len = u32::try_from(bytes.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet longer than 4 GiB"))?;
        self.write_record(t_ns, bytes, orig_len)
    }

    /// Appends the first bytes of a packet that was `orig_len` bytes long (a capture cut at a snaplen).
    pub fn write_record(&mut self, t_ns: u64, bytes: &[u8], orig_len: u32) -> io::Result<()> {
        let secs = u32::try_from(t_ns / 1_000_000_000)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "timestamp past 2106"))?;
        let usecs = (t_ns % 1_000_000_000 / 1_000) as u32;
        let bytes = &bytes[..bytes.len().min(orig_len as usize)];
        let incl_len = (bytes.len() as u32).min(PCAP_SNAPLEN);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&usecs.to_le_bytes());
        h[8..12].copy_from_slice(&incl_len.to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&bytes[..incl_len as usize])
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The records of a little-endian classic pcap file (microsecond or nanosecond magic) whose link type
/// is `link`, as (timestamp in ns, captured bytes). A record cut short by the end of the file keeps
/// the bytes that are there. Errors name what is wrong with the header.
pub fn read_records(pcap: &[u8], link: u32) -> Result<Vec<(u64, &[u8])>, String> {
    if pcap.len() < 24 {
        return Err(format!("{} bytes, shorter than a pcap header (24)", pcap.len()));
    }
    let le = |at: usize| u32::from_le_bytes([pcap[at], pcap[at + 1], pcap[at + 2], pcap[at + 3]]);
    let frac_ns = match le(0) {
        PCAP_MAGIC => 1000,
        PCAP_MAGIC_NS => 1,
        m => return Err(format!("magic {m:#x} is not a little-endian pcap ({PCAP_MAGIC:#x})")),
    };
    if le(20) != link {
        return Err(format!("link type {}, expected {link}", le(20)));
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let (sec, frac, incl) = (u64::from(le(at)), u64::from(le(at + 4)), le(at + 8) as usize);
        let end = (at + 16).saturating_add(incl).min(pcap.len());
        out.push((sec * 1_000_000_000 + frac * frac_ns, &pcap[at + 16..end]));
        at = at + 16 + incl;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let mut w = PcapWriter::new(Vec::new()).expect("vec");
        w.write_packet(1_500_002_999, &[1, 2, 3]).expect("write");
        w.write_packet(2_000_000_000, &[4; 70]).expect("write");
        let bytes = w.into_inner().expect("flush");
        let recs = read_records(&bytes, LINKTYPE_RAW).expect("a pcap");
        assert_eq!(recs, vec![(1_500_002_000, &[1u8, 2, 3][..]), (2_000_000_000, &[4u8; 70][..])]);
        assert!(read_records(&bytes, 1).unwrap_err().contains("link type 101"));
        assert!(read_records(&bytes[..10], LINKTYPE_RAW).unwrap_err().contains("shorter"));
        // A file cut inside its last record keeps what is there.
        assert_eq!(read_records(&bytes[..bytes.len() - 10], LINKTYPE_RAW).expect("cut")[1].1.len(), 60);
    }

    #[test]
    fn global_and_record_headers_byte_exact() {
        let mut w = PcapWriter::new(Vec::new()).expect("vec");
        // 1.500002999 s: pcap keeps microseconds, truncating the rest.
        w.write_packet(1_500_002_999, &[0x60, 0, 0, 0]).expect("vec");
        // The last representable second, a 1280-byte packet of which 2 bytes were captured.
        w.write_record(4_294_967_295_999_999_999, &[0x60, 0xAA], 1280).expect("vec");
        let out = w.into_inner().expect("vec");
        let expected: [u8; 62] = [
            0xD4, 0xC3, 0xB2, 0xA1, // magic 0xa1b2c3d4, little-endian
            0x02, 0x00, 0x04, 0x00, // version 2.4
            0x00, 0x00, 0x00, 0x00, // thiszone 0 (UTC)
            0x00, 0x00, 0x00, 0x00, // sigfigs 0
            0xFF, 0xFF, 0x00, 0x00, // snaplen 65535
            0x65, 0x00, 0x00, 0x00, // link type 101, LINKTYPE_RAW
            0x01, 0x00, 0x00, 0x00, // ts_sec 1
            0x22, 0xA1, 0x07, 0x00, // ts_usec 500002 = 0x0007a122
            0x04, 0x00, 0x00, 0x00, // incl_len 4
            0x04, 0x00, 0x00, 0x00, // orig_len 4
            0x60, 0x00, 0x00, 0x00, // the packet
            0xFF, 0xFF, 0xFF, 0xFF, // ts_sec 4294967295
            0x3F, 0x42, 0x0F, 0x00, // ts_usec 999999 = 0x000f423f
            0x02, 0x00, 0x00, 0x00, // incl_len 2
            0x00, 0x05, 0x00, 0x00, // orig_len 1280 = 0x500
            0x60, 0xAA, // the captured bytes
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn long_packets_are_cut_at_snaplen() {
        let mut w = PcapWriter::new(Vec::new()).expect("vec");
        w.write_packet(0, &vec![0xAB; 70_000]).expect("vec");
        let out = w.into_inner().expect("vec");
        assert_eq!(out.len(), 24 + 16 + 65_535);
        assert_eq!(&out[32..40], &[0xFF, 0xFF, 0x00, 0x00, 0x70, 0x11, 0x01, 0x00]);
        // 65535, 70000
    }

    #[test]
    fn timestamps_past_2106_are_an_error_not_a_wrap() {
        let mut w = PcapWriter::new(Vec::new()).expect("vec");
        assert!(w.write_packet(u64::MAX, &[]).is_err());
    }
}
