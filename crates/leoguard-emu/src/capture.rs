//! The emulator's capture tap (`[capture]`): every packet put on a link leaving a tapped node and every
//! packet arriving at one over a link, as the real bytes stood on the wire (the scheme's Hop-by-Hop
//! header included), with model-time timestamps, kept in memory up to `max_packets` and written as a
//! classic pcap file (LINKTYPE_RAW) that tshark opens. The simulator's capture records the same two
//! events; its packets are made from its records, these are the real ones.

use crate::config::CaptureCfg;
use leoguard_wire::PcapWriter;

/// The tap.
#[derive(Debug)]
pub struct Tap {
    tapped: Vec<bool>,
    max_packets: usize,
    snaplen: usize,
    /// (model time ns, original length, offset into `bytes`, captured length).
    records: Vec<(u64, u32, usize, u32)>,
    bytes: Vec<u8>,
    missed: u64,
}

impl Tap {
    /// A tap on `cfg.nodes` of a network of `nodes` nodes.
    pub fn new(cfg: &CaptureCfg, nodes: usize) -> Tap {
        let mut tapped = vec![false; nodes];
        for &n in &cfg.nodes {
            if let Some(t) = tapped.get_mut(n as usize) {
                *t = true;
            }
        }
        Tap {
            tapped,
            max_packets: cfg.max_packets,
            snaplen: cfg.snaplen as usize,
            records: Vec::new(),
            bytes: Vec::new(),
            missed: 0,
        }
    }

    /// Records `pkt` crossing a link of `node` at model time `t` (if the node is tapped).
    pub fn record(&mut self, node: u32, t: u64, pkt: &[u8]) {
        if !self.tapped.get(node as usize).copied().unwrap_or(false) {
            return;
        }
        if self.records.len() >= self.max_packets {
            self.missed += 1;
            return;
        }
        let n = pkt.len().min(self.snaplen);
        self.records.push((t, pkt.len() as u32, self.bytes.len(), n as u32));
        self.bytes.extend_from_slice(&pkt[..n]);
    }

    /// Writes the pcap file; returns (packets written, packets past the limit).
    pub fn write(&self, path: &str) -> std::io::Result<(u64, u64)> {
        let f = std::io::BufWriter::new(std::fs::File::create(path)?);
        let mut w = PcapWriter::new(f)?;
        for &(t, orig, off, n) in &self.records {
            w.write_record(t, &self.bytes[off..off + n as usize], orig)?;
        }
        w.into_inner()?;
        Ok((self.records.len() as u64, self.missed))
    }
}
