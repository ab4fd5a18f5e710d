//! Wire format of the liquid tunnel's datagrams (docs/liquid.md "Wire format"). All integers are
//! big-endian. Every datagram starts with a type byte and a version byte.
//!
//! Symbol datagram (source or repair), `HEADER_LEN` = 16 bytes then exactly one symbol:
//! ```text
//!  0      type      1 = source symbol, 2 = repair symbol
//!  1      version   1
//!  2..6   block     source block id (the encoder numbers blocks 0, 1, 2, ...)
//!  6..10  esi       encoding symbol id (RFC 6330 §4.4.2: 0..K-1 source, K.. repair)
//! 10..12  k         source symbols in the block; 0 = not known yet (the block is still open)
//! 12..14  first     offset inside this symbol of the first packet frame that starts in it;
//!                   0xFFFF = none starts here (and always on repair symbols)
//! 14..16  len       bytes of symbol that follow (the datagram is exactly 16 + len long)
//! 16..    symbol    symbol_size bytes, with two exceptions that save the zero padding: the last
//!                   source symbol of a block carries only the block's data in it (the decoder pads
//!                   it with zeros), and a block of one symbol uses symbols as long as its data
//!                   (its source symbol and its repair symbols alike)
//! ```
//! Feedback datagram, 4 + 8·n bytes:
//! ```text
//!  0      type      3
//!  1      version   1
//!  2..4   n         entries (at most MAX_FEEDBACK_ENTRIES)
//!  then n × { block u32, received u16 (distinct symbols), state u8 (0 short, 1 complete), round u8 }
//! ```

use crate::liquid::LiquidError;

/// Bytes before the symbol in a source or repair datagram.
pub const HEADER_LEN: usize = 16;
/// Version byte this code writes and accepts.
pub const VERSION: u8 = 1;
/// `first` value meaning "no packet frame starts in this symbol".
pub const NO_FIRST: u16 = 0xFFFF;
/// Most entries one feedback datagram carries (keeps it under 1 KiB).
pub const MAX_FEEDBACK_ENTRIES: usize = 120;
/// Bytes of one feedback entry.
pub const FEEDBACK_ENTRY_LEN: usize = 8;

const TYPE_SOURCE: u8 = 1;
const TYPE_REPAIR: u8 = 2;
const TYPE_FEEDBACK: u8 = 3;

/// Header of a source or repair symbol datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolHeader {
    /// True for a repair symbol.
    pub repair: bool,
    /// Source block id.
    pub block: u32,
    /// Encoding symbol id.
    pub esi: u32,
    /// Source symbols in the block, 0 if not known yet.
    pub k: u16,
    /// Offset of the first frame starting in this symbol, `NO_FIRST` if none.
    pub first: u16,
}

impl SymbolHeader {
    /// Parses a symbol datagram of a tunnel with `symbol_size`-byte symbols; returns the header and
    /// the symbol bytes (1 to `symbol_size` of them: whether a short symbol is allowed depends on its
    /// block, which the decoder checks). Rejects headers whose fields contradict each other.
    pub fn parse(datagram: &[u8], symbol_size: u16) -> Result<(SymbolHeader, &[u8]), LiquidError> {
        if datagram.len() < 2 {
            return Err(LiquidError::Malformed("datagram shorter than its type and version"));
        }
        let repair = match datagram[0] {
            TYPE_SOURCE => false,
            TYPE_REPAIR => true,
            TYPE_FEEDBACK => return Err(LiquidError::Malformed("feedback datagram sent to a decoder")),
            _ => return Err(LiquidError::Malformed("unknown datagram type")),
        };
        if datagram[1] != VERSION {
            return Err(LiquidError::Malformed("unknown version"));
        }
        if datagram.len() <= HEADER_LEN || datagram.len() > HEADER_LEN + symbol_size as usize {
            return Err(LiquidError::Malformed("symbol datagram of the wrong length"));
        }
        // The explicit length catches truncation, which the short symbols would otherwise hide.
        if usize::from(u16::from_be_bytes([datagram[14], datagram[15]])) != datagram.len() - HEADER_LEN {
            return Err(LiquidError::Malformed("symbol length field does not match the datagram"));
        }
        let block = u32::from_be_bytes([datagram[2], datagram[3], datagram[4], datagram[5]]);
        let esi = u32::from_be_bytes([datagram[6], datagram[7], datagram[8], datagram[9]]);
        let k = u16::from_be_bytes([datagram[10], datagram[11]]);
        let first = u16::from_be_bytes([datagram[12], datagram[13]]);
        if first != NO_FIRST && (repair || usize::from(first) >= datagram.len() - HEADER_LEN) {
            return Err(LiquidError::Malformed("frame offset outside the symbol"));
        }
        if repair && (k == 0 || esi < u32::from(k)) {
            return Err(LiquidError::Malformed("repair symbol without a valid block size"));
        }
        if !repair && k != 0 && esi >= u32::from(k) {
            return Err(LiquidError::Malformed("source symbol id beyond the block"));
        }
        // RFC 6330 §3.2: encoding symbol ids are 24 bits.
        if esi >= 1 << 24 {
            return Err(LiquidError::Malformed("symbol id beyond 24 bits"));
        }
        Ok((SymbolHeader { repair, block, esi, k, first }, &datagram[HEADER_LEN..]))
    }

    /// Writes the header into the first `HEADER_LEN` bytes of `out`, whose remaining bytes (at most
    /// 65535) are the symbol.
    pub fn emit(&self, out: &mut [u8]) {
        // Symbols are at most symbol_size <= 8192 bytes.
        let len = (out.len() - HEADER_LEN) as u16;
        out[0] = if self.repair { TYPE_REPAIR } else { TYPE_SOURCE };
        out[1] = VERSION;
        out[2..6].copy_from_slice(&self.block.to_be_bytes());
        out[6..10].copy_from_slice(&self.esi.to_be_bytes());
        out[10..12].copy_from_slice(&self.k.to_be_bytes());
        out[12..14].copy_from_slice(&self.first.to_be_bytes());
        out[14..16].copy_from_slice(&len.to_be_bytes());
    }

    /// A whole datagram: this header followed by `symbol`.
    pub fn datagram(&self, symbol: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN + symbol.len()];
        self.emit(&mut out);
        out[HEADER_LEN..].copy_from_slice(symbol);
        out
    }
}

/// What the decoder knows of one block when it reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackEntry {
    /// Source block id.
    pub block: u32,
    /// Distinct symbols of the block received so far (saturating at 65535).
    pub received: u16,
    /// True if the block is complete (decoded or all source symbols arrived).
    pub complete: bool,
    /// How many times the decoder has reported the block short (a request id for the encoder).
    pub round: u8,
}

/// Parses a feedback datagram into its entries.
pub fn parse_feedback(datagram: &[u8]) -> Result<Vec<FeedbackEntry>, LiquidError> {
    if datagram.len() < 4 {
        return Err(LiquidError::Malformed("feedback shorter than its header"));
    }
    if datagram[0] != TYPE_FEEDBACK {
        return Err(LiquidError::Malformed("not a feedback datagram"));
    }
    if datagram[1] != VERSION {
        return Err(LiquidError::Malformed("unknown version"));
    }
    let n = u16::from_be_bytes([datagram[2], datagram[3]]) as usize;
    if n > MAX_FEEDBACK_ENTRIES || datagram.len() != 4 + n * FEEDBACK_ENTRY_LEN {
        return Err(LiquidError::Malformed("feedback length does not match its entry count"));
    }
    let mut entries = Vec::with_capacity(n);
    for e in datagram[4..].chunks_exact(FEEDBACK_ENTRY_LEN) {
        let complete = match e[6] {
            0 => false,
            1 => true,
            _ => return Err(LiquidError::Malformed("unknown feedback state")),
        };
        entries.push(FeedbackEntry {
            block: u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
            received: u16::from_be_bytes([e[4], e[5]]),
            complete,
            round: e[7],
        });
    }
    Ok(entries)
}

/// Builds a feedback datagram; at most `MAX_FEEDBACK_ENTRIES` of `entries` are written.
pub fn emit_feedback(entries: &[FeedbackEntry]) -> Vec<u8> {
    let n = entries.len().min(MAX_FEEDBACK_ENTRIES);
    let mut out = Vec::with_capacity(4 + n * FEEDBACK_ENTRY_LEN);
    out.push(TYPE_FEEDBACK);
    out.push(VERSION);
    // n <= MAX_FEEDBACK_ENTRIES fits u16.
    out.extend_from_slice(&(n as u16).to_be_bytes());
    for e in &entries[..n] {
        out.extend_from_slice(&e.block.to_be_bytes());
        out.extend_from_slice(&e.received.to_be_bytes());
        out.push(u8::from(e.complete));
        out.push(e.round);
    }
    out
}
