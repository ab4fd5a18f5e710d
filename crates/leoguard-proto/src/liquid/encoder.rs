//! Tunnel entry: frames packets into source blocks, sends source symbols as they fill, proactive
//! repair when a block closes and more repair when feedback reports a block short.

use super::wire::{self, SymbolHeader, NO_FIRST};
use super::{repair_for_block, LiquidConfig, LiquidError, FRAME_PREFIX, MAX_BLOCK_SYMBOLS, MAX_PACKET};
use leoguard_core::Instant;
use raptorq::{ObjectTransmissionInformation, SourceBlockEncoder};
use std::collections::VecDeque;

/// Weight kept by the older reports in the adaptive loss estimate at each new report (7/8).
const LOSS_DECAY: f64 = 0.875;
/// Highest encoding symbol id RFC 6330 allows (24 bits).
const MAX_ESI: u32 = (1 << 24) - 1;

/// Counters of an encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EncoderStats {
    /// Packets accepted into blocks.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets refused (empty or longer than `MAX_PACKET`).
    pub rejected: u64,
    /// Source blocks closed.
    pub blocks: u64,
    /// Source symbols sent.
    pub source_symbols: u64,
    /// Proactive repair symbols sent when blocks closed.
    pub repair_symbols: u64,
    /// Repair symbols sent in answer to feedback.
    pub extra_repair: u64,
    /// Feedback datagrams accepted.
    pub feedback: u64,
    /// Feedback datagrams that did not parse.
    pub feedback_malformed: u64,
    /// Feedback entries for blocks the encoder no longer (or never) held.
    pub feedback_stale: u64,
    /// Short reports answered with repair.
    pub short_reports: u64,
    /// Blocks dropped `abandon_after` after they opened.
    pub blocks_abandoned: u64,
    /// Current symbol loss estimate from feedback (adaptive policy), 0 before any report.
    pub loss_estimate: f64,
}

impl EncoderStats {
    /// Repair symbols (proactive and on feedback) per source symbol.
    pub fn overhead(&self) -> f64 {
        if self.source_symbols == 0 {
            0.0
        } else {
            (self.repair_symbols + self.extra_repair) as f64 / self.source_symbols as f64
        }
    }
}

/// The block being filled.
struct OpenBlock {
    id: u32,
    data: Vec<u8>,
    opened: Instant,
    last_push: Instant,
    packets: u32,
    /// Source symbols already sent (all full).
    sent: u32,
    /// Offset of the first frame starting in the symbol being filled.
    first: u16,
}

/// A closed block kept for repair on feedback until it is abandoned.
struct ClosedBlock {
    id: u32,
    k: u32,
    opened: Instant,
    /// None once the decoder reported it complete (nothing more to send).
    enc: Option<SourceBlockEncoder>,
    /// Repair symbols sent so far (the next repair ESI is `k + repaired`).
    repaired: u32,
    /// Symbols sent when the block closed (for the loss estimate).
    sent_at_close: u32,
    /// Highest short-report round answered.
    answered_round: u8,
    /// A report of this block already fed the loss estimate.
    sampled: bool,
}

/// One direction's tunnel entry (see the module docs).
pub struct Encoder {
    cfg: LiquidConfig,
    next_block: u32,
    open: Option<OpenBlock>,
    closed: VecDeque<ClosedBlock>,
    out: VecDeque<Vec<u8>>,
    stats: EncoderStats,
    /// Decayed sums of symbols lost and sent over reported blocks.
    lost_sum: f64,
    sent_sum: f64,
}

impl Encoder {
    /// An encoder with `cfg` (validated).
    pub fn new(cfg: LiquidConfig) -> Result<Encoder, LiquidError> {
        cfg.validate()?;
        Ok(Encoder {
            cfg,
            next_block: 0,
            open: None,
            closed: VecDeque::new(),
            out: VecDeque::new(),
            stats: EncoderStats::default(),
            lost_sum: 0.0,
            sent_sum: 0.0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LiquidConfig {
        &self.cfg
    }

    /// A packet entering the tunnel. Empty packets and packets over `MAX_PACKET` bytes are refused
    /// (counted in `rejected`): a zero length prefix marks the padding at the end of a block.
    pub fn push(&mut self, now: Instant, packet: &[u8]) {
        if packet.is_empty() || packet.len() > MAX_PACKET {
            self.stats.rejected += 1;
            return;
        }
        self.handle_timeout(now);
        let t = self.cfg.symbol_size as usize;
        // A block never exceeds MAX_BLOCK_SYMBOLS: close it first if this frame would.
        if let Some(b) = &self.open {
            let after = b.data.len() + FRAME_PREFIX + packet.len();
            if after.div_ceil(t) > MAX_BLOCK_SYMBOLS as usize {
                self.close(now);
            }
        }
        let open = self.open.get_or_insert_with(|| {
            let id = self.next_block;
            self.next_block = self.next_block.wrapping_add(1);
            OpenBlock { id, data: Vec::new(), opened: now, last_push: now, packets: 0, sent: 0, first: NO_FIRST }
        });
        let start = open.data.len();
        // Invariant: every full symbol has been sent, so the frame starts in symbol `sent`.
        if open.first == NO_FIRST {
            // start - sent·t < t <= 8192 fits u16.
            open.first = (start - open.sent as usize * t) as u16;
        }
        // packet.len() <= MAX_PACKET = u16::MAX.
        open.data.extend_from_slice(&(packet.len() as u16).to_be_bytes());
        open.data.extend_from_slice(packet);
        open.packets += 1;
        open.last_push = now;
        self.stats.packets += 1;
        self.stats.bytes += packet.len() as u64;
        while open.data.len() >= (open.sent as usize + 1) * t {
            let s = open.sent as usize;
            let header = SymbolHeader { repair: false, block: open.id, esi: open.sent, k: 0, first: open.first };
            self.out.push_back(header.datagram(&open.data[s * t..(s + 1) * t]));
            self.stats.source_symbols += 1;
            open.sent += 1;
            open.first = NO_FIRST;
        }
        if open.packets >= self.cfg.max_block_packets {
            self.close(now);
        }
    }

    /// Closes the open block: sends its last (padded) source symbol and its proactive repair.
    fn close(&mut self, now: Instant) {
        let Some(mut b) = self.open.take() else { return };
        let t = self.cfg.symbol_size as usize;
        let len = b.data.len();
        let k = len.div_ceil(t);
        // A block of one symbol that none of its symbols left yet uses a symbol as long as its
        // data: its source and repair symbols then carry no padding (a lone ACK costs ~2 × its size,
        // not 2 × 1280 bytes).
        let sym = if k == 1 && b.sent == 0 { len } else { t };
        // k <= MAX_BLOCK_SYMBOLS (push closes blocks before they grow past it) fits u16/u32.
        let k16 = k as u16;
        if (b.sent as usize) < k {
            // The last symbol goes without its zero padding; the decoder pads it again.
            let s = b.sent as usize;
            let header = SymbolHeader { repair: false, block: b.id, esi: b.sent, k: k16, first: b.first };
            self.out.push_back(header.datagram(&b.data[s * t..]));
            self.stats.source_symbols += 1;
        }
        // Zero padding; the decoder reads a zero length prefix as the end of the block's frames.
        b.data.resize(k * sym, 0);
        // sym <= symbol_size fits u16.
        let oti = ObjectTransmissionInformation::new(b.data.len() as u64, sym as u16, 1, 1, 1);
        // RaptorQ's source block number is 8 bits; the block id on our wire is the full 32.
        let enc = SourceBlockEncoder::new(b.id as u8, &oti, &b.data);
        let loss = (self.sent_sum > 0.0).then(|| self.lost_sum / self.sent_sum);
        let r = repair_for_block(k as u32, &self.cfg, loss);
        let mut closed = ClosedBlock {
            id: b.id,
            k: k as u32,
            opened: b.opened,
            enc: Some(enc),
            repaired: 0,
            sent_at_close: k as u32 + r,
            answered_round: 0,
            sampled: false,
        };
        self.stats.repair_symbols += u64::from(Self::send_repair(&mut self.out, &mut closed, r));
        self.stats.blocks += 1;
        self.closed.push_back(closed);
        let _ = now;
    }

    /// Queues `n` more repair symbols of `b`; returns how many were queued (ESIs are capped).
    fn send_repair(out: &mut VecDeque<Vec<u8>>, b: &mut ClosedBlock, n: u32) -> u32 {
        let Some(enc) = &b.enc else { return 0 };
        let n = n.min(MAX_ESI.saturating_sub(b.k + b.repaired));
        if n == 0 {
            return 0;
        }
        for p in enc.repair_packets(b.repaired, n) {
            let header = SymbolHeader {
                repair: true,
                block: b.id,
                esi: p.payload_id().encoding_symbol_id(),
                // b.k <= MAX_BLOCK_SYMBOLS fits u16.
                k: b.k as u16,
                first: NO_FIRST,
            };
            out.push_back(header.datagram(p.data()));
        }
        b.repaired += n;
        n
    }

    /// A feedback datagram from the decoder: feeds the loss estimate and answers short blocks.
    pub fn on_feedback(&mut self, now: Instant, datagram: &[u8]) -> Result<(), LiquidError> {
        self.handle_timeout(now);
        let entries = match wire::parse_feedback(datagram) {
            Ok(e) => e,
            Err(e) => {
                self.stats.feedback_malformed += 1;
                return Err(e);
            }
        };
        self.stats.feedback += 1;
        for e in entries {
            let Some(front) = self.closed.front() else {
                self.stats.feedback_stale += 1;
                continue;
            };
            let idx = e.block.wrapping_sub(front.id) as usize;
            let Some(b) = self.closed.get_mut(idx) else {
                self.stats.feedback_stale += 1;
                continue;
            };
            if b.enc.is_none() {
                self.stats.feedback_stale += 1;
                continue;
            }
            if !b.sampled {
                b.sampled = true;
                let lost = f64::from(b.sent_at_close.saturating_sub(u32::from(e.received)));
                self.lost_sum = self.lost_sum * LOSS_DECAY + lost;
                self.sent_sum = self.sent_sum * LOSS_DECAY + f64::from(b.sent_at_close);
                self.stats.loss_estimate = self.lost_sum / self.sent_sum;
            }
            if e.complete {
                b.enc = None;
            } else if e.round > b.answered_round {
                b.answered_round = e.round;
                // RaptorQ needs ~k symbols (k + 1 for a ~99.99 % decode, RFC 6330 Annex); send the
                // shortfall plus one, inflated for the loss the answer itself will meet.
                let need = (b.k + 1).saturating_sub(u32::from(e.received)).max(1);
                let p = self.stats.loss_estimate.min(0.5);
                let need = ((f64::from(need) / (1.0 - p)).ceil() as u32).min(b.k + 1);
                self.stats.extra_repair += u64::from(Self::send_repair(&mut self.out, b, need));
                self.stats.short_reports += 1;
            }
        }
        Ok(())
    }

    /// The next datagram to send, if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.handle_timeout(now);
        self.out.pop_front()
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let close = self.open.as_ref().map(|b| self.close_at(b));
        let abandon = self.closed.front().map(|b| b.opened + self.cfg.abandon_after);
        match (close, abandon) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn close_at(&self, b: &OpenBlock) -> Instant {
        (b.opened + self.cfg.block_time).min(b.last_push + self.cfg.idle_time)
    }

    /// Closes the open block when due and drops blocks past `abandon_after`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(b) = &self.open {
            if self.close_at(b) <= now {
                self.close(now);
            }
        }
        while let Some(b) = self.closed.front() {
            if b.opened + self.cfg.abandon_after > now {
                break;
            }
            if b.enc.is_some() {
                self.stats.blocks_abandoned += 1;
            }
            self.closed.pop_front();
        }
    }

    /// Counters.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }
}
