//! The throughput workload behind `cargo bench --bench liquid` and `leoguard bench fec`: the callers
//! time these passes with a wall clock (this crate reads none).
//!
//! Encode: `blocks` source blocks of `packets_per_block` packets of `packet_bytes` bytes each, pushed
//! at one virtual instant, closed by `max_block_packets`, every datagram drained (source symbols and
//! the default 10 % repair). Decode: those datagrams with a share of the source symbols dropped
//! (`drop_every`-th source symbol), so every block is decoded (liquid.md, "Decoder"), fed to a decoder and
//! every packet drained. Throughput counts packet bytes (what the tunnel carries), not symbol bytes.
//! [`SolverCase`]: one block for each of the decoder's two solvers.

use super::systematic::SystematicDecoder;
use super::wire::SymbolHeader;
use super::{Decoder, Encoder, LiquidConfig, MAX_BLOCK_SYMBOLS};
use leoguard_core::Instant;
use raptorq::{EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder, SourceBlockEncoder};

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

/// One block decoded by each of the decoder's two solvers (`liquid.md`, "Decoder"): `k` source
/// symbols of `t` bytes, `missing` of them lost (spread evenly) and as many repair symbols received
/// plus two. `cargo bench --bench liquid` times both on the same symbols.
pub struct SolverCase {
    k: u32,
    t: usize,
    symbols: Vec<Option<Vec<u8>>>,
    repair: Vec<(u32, Vec<u8>)>,
    systematic: SystematicDecoder,
}

impl SolverCase {
    /// The block (its bytes a fixed pattern: the solvers' cost does not depend on them). `k` is at
    /// most [`super::MAX_BLOCK_SYMBOLS`] and `t` at most 65535 (clamped), `missing` at most `k`.
    pub fn new(k: u32, missing: u32, t: usize) -> SolverCase {
        let k = k.clamp(1, MAX_BLOCK_SYMBOLS);
        let t = t.clamp(1, usize::from(u16::MAX));
        let missing = missing.min(k);
        let n = k as usize;
        let data: Vec<u8> = (0..n * t).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect();
        let oti = ObjectTransmissionInformation::new((n * t) as u64, t as u16, 1, 1, 1);
        let enc = SourceBlockEncoder::new(0, &oti, &data);
        let step = n / (missing as usize).max(1);
        let symbols = data
            .chunks(t)
            .enumerate()
            .map(|(i, c)| (missing == 0 || i % step != 0 || i / step >= missing as usize).then(|| c.to_vec()))
            .collect();
        let repair = enc
            .repair_packets(0, missing + 2)
            .into_iter()
            .map(|p| {
                let (id, d) = p.split();
                (id.encoding_symbol_id(), d)
            })
            .collect();
        SolverCase { k, t, symbols, repair, systematic: SystematicDecoder::default() }
    }

    /// Source symbols missing.
    pub fn missing(&self) -> usize {
        self.symbols.iter().filter(|s| s.is_none()).count()
    }

    /// Whether the decoder gives a block like this one to the few-missing solver (its size aside).
    pub fn few_missing(&self) -> bool {
        SystematicDecoder::applies(self.k, self.missing() as u32)
    }

    /// Decodes with the few-missing solver, its generator kept from the last call unless `fresh`;
    /// whether it decoded.
    pub fn systematic(&mut self, fresh: bool) -> bool {
        if fresh {
            self.systematic = SystematicDecoder::default();
        }
        let mut symbols = self.symbols.clone();
        self.systematic.decode(self.k, self.t, &mut symbols, &self.repair).is_some()
    }

    /// Decodes with the `raptorq` crate's decoder; whether it decoded.
    pub fn full(&self) -> bool {
        crate_decode(self.k as usize, self.t, &self.symbols, &self.repair).is_some()
    }
}

/// The `raptorq` crate's decoder on one block's symbols (`k` source symbols of `t` bytes, `None`
/// where lost, and repair symbols by ESI): the block, or `None`.
pub(crate) fn crate_decode(
    k: usize,
    t: usize,
    symbols: &[Option<Vec<u8>>],
    repair: &[(u32, Vec<u8>)],
) -> Option<Vec<u8>> {
    let oti = ObjectTransmissionInformation::new((k * t) as u64, t as u16, 1, 1, 1);
    let mut dec = SourceBlockDecoder::new(0, &oti, (k * t) as u64);
    let mut packets: Vec<EncodingPacket> = symbols
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| EncodingPacket::new(PayloadId::new(0, i as u32), s.clone())))
        .collect();
    packets.extend(repair.iter().map(|(e, s)| EncodingPacket::new(PayloadId::new(0, *e), s.clone())));
    dec.decode(packets)
}
