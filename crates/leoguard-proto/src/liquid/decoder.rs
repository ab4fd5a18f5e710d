//! Tunnel exit: collects symbols per block, cuts packets out of the source symbols as they arrive,
//! decodes with RaptorQ when source symbols are missing, delivers every packet at most once
//! (optionally in entry order) and reports per-block reception counts to the encoder.

use super::systematic::SystematicDecoder;
use super::wire::{self, FeedbackEntry, SymbolHeader, NO_FIRST};
use super::{LiquidConfig, LiquidError, FRAME_PREFIX, MAX_BLOCK_SYMBOLS};
use leoguard_core::Instant;
use raptorq::{EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

/// Blocks the decoder accepts ahead of the highest it has seen (bounds the state a bogus block id
/// can create; a longer jump is accepted once every held block has been abandoned).
pub const MAX_AHEAD: u32 = 1024;

/// Counters of a decoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Symbol datagrams accepted.
    pub datagrams: u64,
    /// Distinct source symbols received.
    pub source_symbols: u64,
    /// Distinct repair symbols received.
    pub repair_symbols: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Their bytes.
    pub delivered_bytes: u64,
    /// Delivered packets that needed a decoded (not received) symbol.
    pub recovered: u64,
    /// Blocks whose source symbols all arrived.
    pub blocks_complete: u64,
    /// Blocks completed by RaptorQ decoding.
    pub blocks_recovered: u64,
    /// Blocks abandoned incomplete.
    pub blocks_lost: u64,
    /// Decode attempts with enough symbols that failed (RaptorQ's rare singular case).
    pub decode_failures: u64,
    /// Symbols received twice.
    pub duplicates: u64,
    /// Datagrams that did not parse or contradicted their block.
    pub malformed: u64,
    /// Symbols of blocks too far ahead to hold.
    pub unknown_block: u64,
    /// Symbols of blocks already abandoned or retired.
    pub stale: u64,
    /// Feedback datagrams produced.
    pub feedback_sent: u64,
    /// Short-block reports among their entries.
    pub short_reports: u64,
}

/// Where a frame of a block stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// Known to start here; not cut out yet.
    Pending,
    /// Cut out; the frame holds this many packet bytes.
    Cut(u32),
    /// The block's padding starts here.
    End,
}

struct Block {
    k: Option<u32>,
    /// Bytes per symbol of this block: `symbol_size`, or the block's data length if it is a block
    /// of one symbol (known once a symbol says so).
    sym: Option<usize>,
    /// Source symbols (received or decoded), indexed by ESI.
    symbols: Vec<Option<Vec<u8>>>,
    /// Symbols filled by decoding.
    decoded: Vec<bool>,
    /// Repair symbols held until a decode needs them.
    repair: Vec<(u32, Vec<u8>)>,
    seen: HashSet<u32>,
    have_source: u32,
    complete: bool,
    rq: Option<SourceBlockDecoder>,
    frames: BTreeMap<u32, Frame>,
    /// The offsets of `frames` still `Pending` (so a cut looks at those, not at every frame).
    pending: BTreeSet<u32>,
    /// Packets cut out but held (in-order mode), by frame offset.
    held: BTreeMap<u32, Vec<u8>>,
    /// In-order: offset of the next frame to release.
    cursor: u32,
    opened: Instant,
    last_arrival: Instant,
    reported: bool,
    round: u8,
    retry_at: Option<Instant>,
}

impl Block {
    fn new(now: Instant) -> Block {
        let mut frames = BTreeMap::new();
        // A block's first frame starts at its first byte.
        frames.insert(0, Frame::Pending);
        Block {
            k: None,
            sym: None,
            symbols: Vec::new(),
            decoded: Vec::new(),
            repair: Vec::new(),
            seen: HashSet::new(),
            have_source: 0,
            complete: false,
            rq: None,
            frames,
            pending: BTreeSet::from([0]),
            held: BTreeMap::new(),
            cursor: 0,
            opened: now,
            last_arrival: now,
            reported: false,
            round: 0,
            retry_at: None,
        }
    }

    fn received(&self) -> u16 {
        self.seen.len().min(u16::MAX as usize) as u16
    }
}

/// One direction's tunnel exit (see the module docs).
pub struct Decoder {
    cfg: LiquidConfig,
    /// Decodes blocks with few source symbols missing (`systematic`); the crate's decoder the rest.
    systematic: SystematicDecoder,
    blocks: BTreeMap<u32, Block>,
    /// Blocks below this id are retired.
    floor: u32,
    /// Highest block id seen (None before the first datagram).
    highest: Option<u32>,
    /// In-order mode: the block whose packets are released next.
    cursor: u32,
    /// Blocks whose report or retry is still to come.
    active: BTreeSet<u32>,
    /// `handle_timeout` has nothing to do before this instant (None: not until an arrival says
    /// otherwise). A lower bound on the held blocks' report, retry and abandon times: lowered to zero
    /// by anything that can close a block or bring work forward (a new block, a block's size learnt, a
    /// block completed), and to an arrival's report time when it lands in a closed, unreported block
    /// (a block that joins `active` late, or an arrival stamped earlier than the last). So a datagram
    /// scans the held blocks only when one may be due, not on every arrival.
    scan_at: Option<Instant>,
    out: VecDeque<Vec<u8>>,
    urgent: Vec<FeedbackEntry>,
    periodic: Vec<FeedbackEntry>,
    next_periodic: Instant,
    stats: DecoderStats,
}

impl Decoder {
    /// A decoder with `cfg` (validated).
    pub fn new(cfg: LiquidConfig) -> Result<Decoder, LiquidError> {
        cfg.validate()?;
        Ok(Decoder {
            cfg,
            systematic: SystematicDecoder::default(),
            blocks: BTreeMap::new(),
            floor: 0,
            highest: None,
            cursor: 0,
            active: BTreeSet::new(),
            scan_at: Some(Instant::ZERO),
            out: VecDeque::new(),
            urgent: Vec::new(),
            periodic: Vec::new(),
            next_periodic: Instant::ZERO,
            stats: DecoderStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LiquidConfig {
        &self.cfg
    }

    /// A symbol datagram from the encoder. Malformed datagrams return `Err` (and are counted);
    /// duplicates and symbols of unknown or retired blocks are dropped and counted.
    pub fn on_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), LiquidError> {
        self.handle_timeout(now);
        let (h, symbol) = match SymbolHeader::parse(datagram, self.cfg.symbol_size) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        if (h.k != 0 && u32::from(h.k) > MAX_BLOCK_SYMBOLS) || (!h.repair && h.esi >= MAX_BLOCK_SYMBOLS) {
            self.stats.malformed += 1;
            return Err(LiquidError::Malformed("block larger than MAX_BLOCK_SYMBOLS"));
        }
        if !self.admit(now, h.block) {
            return Ok(());
        }
        // admit() created the block.
        let Some(b) = self.blocks.get_mut(&h.block) else { return Ok(()) };
        let sym = match Self::check_consistent(b, &h, symbol.len(), self.cfg.symbol_size as usize) {
            Ok(sym) => sym,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        if !b.seen.insert(h.esi) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        self.stats.datagrams += 1;
        b.last_arrival = now;
        if h.k != 0 {
            if b.k.is_none() {
                // Its size known, the block is closed: its report may be due now.
                self.scan_at = Some(Instant::ZERO);
            }
            b.k = Some(u32::from(h.k));
        }
        if sym.is_some() {
            b.sym = sym;
        }
        if !b.reported {
            self.active.insert(h.block);
            if b.complete || b.k.is_some() || self.highest.is_some_and(|x| x > h.block) {
                // Closed: its report is due one feedback delay after this arrival.
                let due = now + self.cfg.feedback_delay;
                self.scan_at = Some(self.scan_at.map_or(due, |t| t.min(due)));
            }
        }
        if h.repair {
            self.stats.repair_symbols += 1;
        } else {
            self.stats.source_symbols += 1;
        }
        if b.complete {
            // Counted for the feedback; the block needs nothing more.
            return Ok(());
        }
        // Short symbols (a block's last) are padded back to the block's symbol size.
        let mut data = symbol.to_vec();
        data.resize(b.sym.unwrap_or(self.cfg.symbol_size as usize), 0);
        if h.repair {
            b.repair.push((h.esi, data));
        } else {
            let i = h.esi as usize;
            if b.symbols.len() <= i {
                b.symbols.resize(i + 1, None);
                b.decoded.resize(i + 1, false);
            }
            // `seen` let each ESI through once, and decoding completes a block (handled above).
            b.symbols[i] = Some(data);
            b.have_source += 1;
            if h.first != NO_FIRST {
                // Only the first symbol of a block can be shorter than symbol_size: offsets are
                // counted in symbol_size units.
                let off = h.esi * u32::from(self.cfg.symbol_size) + u32::from(h.first);
                if let std::collections::btree_map::Entry::Vacant(v) = b.frames.entry(off) {
                    v.insert(Frame::Pending);
                    b.pending.insert(off);
                }
            }
        }
        self.try_complete(h.block, h.esi, h.repair);
        self.cut(h.block);
        self.release();
        Ok(())
    }

    /// Whether a symbol of block `id` may be taken; creates it (and placeholders for skipped ids).
    fn admit(&mut self, now: Instant, id: u32) -> bool {
        if self.highest.is_none_or(|h| id > h) {
            // A new block (or a later one closing those before it) may bring a report forward.
            self.scan_at = Some(Instant::ZERO);
        }
        let Some(highest) = self.highest else {
            self.floor = id;
            self.cursor = id;
            self.highest = Some(id);
            self.blocks.insert(id, Block::new(now));
            return true;
        };
        if id < self.floor {
            self.stats.stale += 1;
            return false;
        }
        if id <= highest {
            if self.blocks.contains_key(&id) {
                return true;
            }
            self.stats.stale += 1;
            return false;
        }
        if id - highest > MAX_AHEAD {
            if !self.blocks.is_empty() {
                self.stats.unknown_block += 1;
                return false;
            }
            // Everything held was abandoned (a long outage): resynchronise on this block.
            self.floor = id;
            self.cursor = id;
            self.highest = Some(id);
            self.blocks.insert(id, Block::new(now));
            return true;
        }
        // Blocks skipped over lost all their symbols so far: hold them so that they are reported
        // short (and repaired on feedback) like any other.
        for skipped in highest + 1..id {
            self.blocks.insert(skipped, Block::new(now));
            self.active.insert(skipped);
        }
        self.blocks.insert(id, Block::new(now));
        self.highest = Some(id);
        true
    }

    /// Checks a symbol against what its block already said; returns the block's symbol size if
    /// this symbol determines it.
    fn check_consistent(b: &Block, h: &SymbolHeader, len: usize, t: usize) -> Result<Option<usize>, LiquidError> {
        let k = b.k.or((h.k != 0).then_some(u32::from(h.k)));
        if b.k.is_some_and(|bk| h.k != 0 && u32::from(h.k) != bk) {
            return Err(LiquidError::Malformed("block size differs from earlier symbols"));
        }
        if let Some(k) = k {
            if !h.repair && h.esi >= k {
                return Err(LiquidError::Malformed("source symbol id beyond the block"));
            }
            if b.symbols.len() > k as usize && b.symbols[k as usize..].iter().any(Option::is_some) {
                return Err(LiquidError::Malformed("block size below symbols already received"));
            }
        }
        let last = !h.repair && k.is_some_and(|k| h.esi + 1 == k);
        let sym = match k {
            // A one-symbol block: its symbols are as long as its data (or full ones).
            Some(1) => Some(len),
            // The last source symbol may be short; every other symbol is full.
            Some(_) if last => Some(t),
            _ if len == t => (k.is_some() || !h.repair).then_some(t),
            _ => return Err(LiquidError::Malformed("short symbol that is not its block's last")),
        };
        if let (Some(s), Some(have)) = (sym, b.sym) {
            if s != have {
                return Err(LiquidError::Malformed("symbol length differs from its block's"));
            }
        }
        if h.first != NO_FIRST && usize::from(h.first) >= len {
            return Err(LiquidError::Malformed("frame offset outside the symbol"));
        }
        Ok(sym)
    }

    /// Completes block `id` if it can, after symbol `esi` (a repair symbol if `repair`) arrived: by its
    /// source symbols alone, or by decoding once it holds as many symbols as it has source symbols
    /// (the new symbol is handed to a decoder already started; only then is it copied).
    fn try_complete(&mut self, id: u32, esi: u32, repair: bool) {
        let Some(b) = self.blocks.get_mut(&id) else { return };
        let Some(k) = b.k else { return };
        // sym <= symbol_size fits u16.
        let t = b.sym.unwrap_or(self.cfg.symbol_size as usize) as u16;
        if b.complete {
            return;
        }
        if b.have_source == k {
            b.complete = true;
            self.scan_at = Some(Instant::ZERO);
            b.repair = Vec::new();
            b.rq = None;
            self.stats.blocks_complete += 1;
            return;
        }
        if b.seen.len() < k as usize {
            return;
        }
        if self.systematic.takes(k, k - b.have_source) {
            b.symbols.resize(k as usize, None);
            b.decoded.resize(k as usize, false);
            let Some(found) = self.systematic.decode(k, usize::from(t), &mut b.symbols, &b.repair) else {
                self.stats.decode_failures += 1;
                return;
            };
            for (i, s) in found {
                b.symbols[i] = Some(s);
                b.decoded[i] = true;
            }
            self.finish_decoded(id);
            return;
        }
        let result = match &mut b.rq {
            Some(rq) => {
                let sym = if repair {
                    b.repair.last().map(|(_, s)| s.clone())
                } else {
                    b.symbols.get(esi as usize).cloned().flatten()
                };
                let fresh = sym.map(|s| EncodingPacket::new(PayloadId::new(id as u8, esi), s));
                rq.decode(fresh)
            }
            None => {
                let oti = ObjectTransmissionInformation::new(u64::from(k) * u64::from(t), t, 1, 1, 1);
                let mut rq = SourceBlockDecoder::new(id as u8, &oti, u64::from(k) * u64::from(t));
                let sbn = id as u8;
                let mut packets = Vec::with_capacity(b.seen.len());
                for (i, s) in b.symbols.iter().enumerate() {
                    if let Some(s) = s {
                        packets.push(EncodingPacket::new(PayloadId::new(sbn, i as u32), s.clone()));
                    }
                }
                for (esi, s) in &b.repair {
                    packets.push(EncodingPacket::new(PayloadId::new(sbn, *esi), s.clone()));
                }
                let r = rq.decode(packets);
                b.rq = Some(rq);
                r
            }
        };
        let Some(data) = result else {
            self.stats.decode_failures += 1;
            return;
        };
        b.symbols.resize(k as usize, None);
        b.decoded.resize(k as usize, false);
        for (i, chunk) in data.chunks_exact(t as usize).enumerate() {
            if b.symbols[i].is_none() {
                b.symbols[i] = Some(chunk.to_vec());
                b.decoded[i] = true;
            }
        }
        self.finish_decoded(id);
    }

    /// Block `id` holds every source symbol after decoding: it is complete, its repair and decoder
    /// state go.
    fn finish_decoded(&mut self, id: u32) {
        let Some(b) = self.blocks.get_mut(&id) else { return };
        let Some(k) = b.k else { return };
        b.have_source = k;
        b.complete = true;
        self.scan_at = Some(Instant::ZERO);
        b.repair = Vec::new();
        b.rq = None;
        self.stats.blocks_recovered += 1;
    }

    /// Copies `len` bytes of block `b` at `off`, if every symbol they lie in is present; also says
    /// whether any of them was decoded.
    fn read(b: &Block, t: usize, off: usize, len: usize) -> Option<(Vec<u8>, bool)> {
        // A frame waiting on a lost symbol is tried on every arrival of its block: find that out
        // before copying.
        if len > 0 && !(off / t..=(off + len - 1) / t).all(|s| b.symbols.get(s).is_some_and(Option::is_some)) {
            return None;
        }
        let mut out = Vec::with_capacity(len);
        let mut recovered = false;
        let mut pos = off;
        while pos < off + len {
            let s = pos / t;
            let sym = b.symbols.get(s)?.as_ref()?;
            recovered |= b.decoded[s];
            let from = pos - s * t;
            let take = (t - from).min(off + len - pos);
            out.extend_from_slice(&sym[from..from + take]);
            pos += take;
        }
        Some((out, recovered))
    }

    /// Cuts every packet of block `id` whose bytes are present.
    fn cut(&mut self, id: u32) {
        let in_order = self.cfg.in_order;
        let Some(b) = self.blocks.get_mut(&id) else { return };
        let t = b.sym.unwrap_or(self.cfg.symbol_size as usize);
        let limit = b.k.map_or(MAX_BLOCK_SYMBOLS as usize * t, |k| k as usize * t);
        // Lowest offset first: packets leave in entry order whenever their bytes allow. A frame cut
        // adds the next one (at a higher offset) to `pending`, where this walk finds it.
        let mut from = 0;
        while let Some(&off) = b.pending.range(from..).next() {
            from = off + 1;
            let o = off as usize;
            if o == limit || o + FRAME_PREFIX > limit {
                // The frame chain reached the end of the block (no room for a prefix: padding).
                b.frames.insert(off, Frame::End);
                b.pending.remove(&off);
                continue;
            }
            let Some((prefix, _)) = Self::read(b, t, o, FRAME_PREFIX) else { continue };
            let len = u16::from_be_bytes([prefix[0], prefix[1]]) as usize;
            if len == 0 {
                b.frames.insert(off, Frame::End);
                b.pending.remove(&off);
                continue;
            }
            if o + FRAME_PREFIX + len > limit {
                // Only a corrupted symbol can say this; drop the frame rather than read past the block.
                b.frames.insert(off, Frame::End);
                b.pending.remove(&off);
                self.stats.malformed += 1;
                continue;
            }
            let Some((packet, recovered)) = Self::read(b, t, o + FRAME_PREFIX, len) else { continue };
            // len <= u16::MAX.
            b.frames.insert(off, Frame::Cut(len as u32));
            b.pending.remove(&off);
            self.stats.recovered += u64::from(recovered);
            let next = (o + FRAME_PREFIX + len) as u32;
            let f = b.frames.entry(next).or_insert(Frame::Pending);
            if *f == Frame::Pending {
                b.pending.insert(next);
            }
            if in_order {
                b.held.insert(off, packet);
            } else {
                self.stats.delivered += 1;
                self.stats.delivered_bytes += packet.len() as u64;
                self.out.push_back(packet);
            }
        }
        if b.complete {
            // Every frame is cut now: the data and its symbols are no longer needed.
            b.symbols = Vec::new();
            b.decoded = Vec::new();
        }
    }

    /// In-order mode: releases held packets of the blocks at the cursor.
    fn release(&mut self) {
        if !self.cfg.in_order {
            return;
        }
        while let Some(b) = self.blocks.get_mut(&self.cursor) {
            while let Some(&Frame::Cut(len)) = b.frames.get(&b.cursor) {
                if let Some(p) = b.held.remove(&b.cursor) {
                    self.stats.delivered += 1;
                    self.stats.delivered_bytes += p.len() as u64;
                    self.out.push_back(p);
                }
                b.cursor += FRAME_PREFIX as u32 + len;
            }
            let finished = b.complete && b.pending.is_empty();
            if !finished {
                return;
            }
            self.cursor += 1;
        }
    }

    /// Releases everything a block still holds (it is being abandoned), in offset order.
    fn flush(&mut self, b: &mut Block) {
        for (_, p) in std::mem::take(&mut b.held) {
            self.stats.delivered += 1;
            self.stats.delivered_bytes += p.len() as u64;
            self.out.push_back(p);
        }
    }

    /// The next packet leaving the tunnel.
    pub fn poll_packet(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// A feedback datagram for the encoder, if one is due.
    pub fn poll_feedback(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.handle_timeout(now);
        let periodic_due = !self.periodic.is_empty() && now >= self.next_periodic;
        if self.urgent.is_empty() && !periodic_due {
            return None;
        }
        let mut entries = std::mem::take(&mut self.urgent);
        if periodic_due || !self.periodic.is_empty() {
            // Completed blocks ride along with any short report.
            entries.append(&mut self.periodic);
            self.next_periodic = now + self.cfg.feedback_interval;
        }
        if entries.len() > wire::MAX_FEEDBACK_ENTRIES {
            // The rest go out in the next datagram.
            let rest = entries.split_off(wire::MAX_FEEDBACK_ENTRIES);
            self.urgent = rest;
        }
        self.stats.feedback_sent += 1;
        Some(wire::emit_feedback(&entries))
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for id in &self.active {
            if let Some(b) = self.blocks.get(id) {
                if !b.reported {
                    if !self.closed(*id, b) {
                        continue; // reportable once its size or a later block arrives
                    }
                    consider(b.last_arrival + self.cfg.feedback_delay);
                } else if let Some(r) = b.retry_at {
                    consider(r);
                }
            }
        }
        if let Some(b) = self.blocks.values().next() {
            consider(b.opened + self.cfg.abandon_after);
        }
        if !self.urgent.is_empty() {
            consider(Instant::ZERO);
        } else if !self.periodic.is_empty() {
            consider(self.next_periodic);
        }
        next
    }

    /// Reports blocks that went quiet, retries short ones, abandons old ones.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.scan_at.is_none_or(|t| now < t) {
            return;
        }
        let mut done = Vec::new();
        for &id in &self.active {
            let Some(b) = self.blocks.get_mut(&id) else {
                done.push(id);
                continue;
            };
            if !b.reported {
                // A block the encoder may still be filling (its size unknown and no later block
                // seen) is not short: its missing symbols may not have been sent yet. Reporting it
                // would make the encoder send repair for symbols nobody lost.
                let closed = b.complete || b.k.is_some() || self.highest.is_some_and(|h| h > id);
                if !closed || b.last_arrival + self.cfg.feedback_delay > now {
                    continue;
                }
                b.reported = true;
                let e = FeedbackEntry { block: id, received: b.received(), complete: b.complete, round: 0 };
                if b.complete {
                    self.periodic.push(e);
                    done.push(id);
                    continue;
                }
            } else if b.complete || b.retry_at.is_some_and(|r| r > now) {
                if b.complete {
                    done.push(id);
                }
                continue;
            }
            b.round = b.round.saturating_add(1);
            b.retry_at = Some(now + self.cfg.feedback_retry);
            self.stats.short_reports += 1;
            self.urgent.push(FeedbackEntry { block: id, received: b.received(), complete: false, round: b.round });
        }
        for id in done {
            self.active.remove(&id);
        }
        // Abandon from the oldest block on, so that `floor` only grows.
        while let Some((&id, b)) = self.blocks.first_key_value() {
            if b.opened + self.cfg.abandon_after > now {
                break;
            }
            let Some(mut b) = self.blocks.remove(&id) else { break };
            if !b.complete {
                self.stats.blocks_lost += 1;
            }
            self.active.remove(&id);
            if self.cfg.in_order && id >= self.cursor {
                // Release what this block still holds in order (and anything before it).
                self.release();
                self.flush(&mut b);
                self.cursor = id + 1;
            }
            self.floor = id + 1;
        }
        if self.cfg.in_order {
            self.release();
        }
        self.scan_at = self.next_scan();
    }

    /// The earliest instant a scan of the held blocks can find work, as they stand (`scan_at`):
    /// a closed block's report, a short block's retry, the oldest block's abandonment (and at once
    /// for a block to retire from `active`, though the scan that calls this has just retired them).
    /// Unlike `poll_timeout`, feedback already queued does not count (sending it is
    /// `poll_feedback`'s), nor do blocks not yet closed (what closes one resets `scan_at`).
    fn next_scan(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for id in &self.active {
            match self.blocks.get(id) {
                Some(b) if !b.reported => {
                    if self.closed(*id, b) {
                        consider(b.last_arrival + self.cfg.feedback_delay);
                    }
                }
                Some(b) if !b.complete => consider(b.retry_at.unwrap_or(Instant::ZERO)),
                _ => consider(Instant::ZERO),
            }
        }
        if let Some(b) = self.blocks.values().next() {
            consider(b.opened + self.cfg.abandon_after);
        }
        next
    }

    /// Whether block `id` is closed at the encoder as far as this end knows: complete, its size
    /// known, or a later block seen.
    fn closed(&self, id: u32, b: &Block) -> bool {
        b.complete || b.k.is_some() || self.highest.is_some_and(|h| h > id)
    }

    /// Makes the next `handle_timeout` scan the held blocks whatever `scan_at` says: a twin decoder
    /// made to scan on every call behaves as if scans were never skipped.
    #[cfg(test)]
    pub(super) fn rescan(&mut self) {
        self.scan_at = Some(Instant::ZERO);
    }

    /// `scan_at`, for tests.
    #[cfg(test)]
    pub(super) fn scan_at(&self) -> Option<Instant> {
        self.scan_at
    }

    /// Sends every block to the crate's decoder (tests compare the two solvers).
    #[cfg(test)]
    pub(crate) fn crate_solver_only(&mut self) {
        self.systematic.off = true;
    }

    /// Blocks the few-missing solver decoded.
    #[cfg(test)]
    pub(crate) fn systematic_decodes(&self) -> u64 {
        self.systematic.decoded
    }

    /// Counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }
}
