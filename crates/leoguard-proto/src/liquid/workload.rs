//! The throughput workload behind `cargo bench --bench liquid` and `leoguard bench fec`: the callers
//! time these passes with a wall clock (this crate reads none).
//!
//! Encode: `blocks` source blocks of `packets_per_block` packets of `packet_bytes` bytes each, pushed
//! at one virtual instant, closed by `max_block_packets`, every datagram drained (source symbols and
//! the default 10 % repair). Decode: those datagrams with a share of the source symbols dropped
//! (`drop_every`-th source symbol), so every block is decoded (liquid.md, "Decoder"), fed to a decoder and
//! every packet drained. Throughput counts packet bytes (what the tunnel carries), not symbol bytes.

use super::wire::SymbolHeader;
use super::{Decoder, Encoder, LiquidConfig};
use leoguard_core::Instant;

/// Parameters of one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Source blocks.
    pub blocks: u32,
    /// Packets per block.
    pub packets_per_block: u32,
    /// Bytes per packet.
    pub packet_bytes: usize,
    /// Every n-th source symbol is dropped before decoding (0: none).
    pub drop_every: u32,
}

impl Default for Workload {
    fn default() -> Self {
        // 200 packets of 1500 B = 235 symbols of 1280 B per block (a 5 ms block at ~480 Mbit/s);
        // one source symbol in 20 lost, under the 10 % repair.
        Workload { blocks: 100, packets_per_block: 200, packet_bytes: 1500, drop_every: 20 }
    }
}

impl Workload {
    /// The tunnel configuration of the workload (defaults, blocks closed by packet count).
    pub fn config(&self) -> LiquidConfig {
        LiquidConfig { max_block_packets: self.packets_per_block.max(1), ..LiquidConfig::default() }
    }

    /// Packet bytes one pass carries.
    pub fn bytes(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.packets_per_block) * self.packet_bytes as u64
    }

    /// Encodes every block; returns the datagrams.
    pub fn encode(&self) -> Vec<Vec<u8>> {
        // config() is valid for any workload: max_block_packets is clamped below.
        let cfg = LiquidConfig { max_block_packets: self.packets_per_block.clamp(1, 8192), ..self.config() };
        let Ok(mut enc) = Encoder::new(cfg) else { return Vec::new() };
        let mut packet = vec![0u8; self.packet_bytes];
        let mut out = Vec::new();
        for i in 0..u64::from(self.blocks) * u64::from(self.packets_per_block) {
            packet[..8.min(self.packet_bytes)].copy_from_slice(&i.to_be_bytes()[..8.min(self.packet_bytes)]);
            enc.push(Instant::ZERO, &packet);
            while let Some(d) = enc.poll_transmit(Instant::ZERO) {
                out.push(d);
            }
        }
        out
    }

    /// Drops the workload's share of source symbols from `datagrams`.
    pub fn lose(&self, datagrams: &[Vec<u8>], symbol_size: u16) -> Vec<Vec<u8>> {
        let mut n = 0u32;
        let mut kept = Vec::with_capacity(datagrams.len());
        for d in datagrams {
            let source = SymbolHeader::parse(d, symbol_size).is_ok_and(|(h, _)| !h.repair);
            if source {
                n += 1;
                if self.drop_every > 0 && n % self.drop_every == 0 {
                    continue;
                }
            }
            kept.push(d.clone());
        }
        kept
    }

    /// Decodes `datagrams`; returns (packets delivered, packet bytes delivered).
    pub fn decode(&self, datagrams: &[Vec<u8>]) -> (u64, u64) {
        let cfg = LiquidConfig { max_block_packets: self.packets_per_block.clamp(1, 8192), ..self.config() };
        let Ok(mut dec) = Decoder::new(cfg) else { return (0, 0) };
        let (mut n, mut bytes) = (0u64, 0u64);
        for d in datagrams {
            let _ = dec.on_datagram(Instant::ZERO, d);
            while let Some(p) = dec.poll_packet() {
                n += 1;
                bytes += p.len() as u64;
            }
        }
        (n, bytes)
    }
}
