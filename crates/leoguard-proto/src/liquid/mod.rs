//! Liquid data tunnel (papers/liquid-data-oneweb.txt; REFERENCE.md "Liquid data transport"): packets
//! entering a tunnel are erasure-coded with RaptorQ (RFC 6330, the `raptorq` crate) so that losses on
//! the satellite path are repaired inside the tunnel instead of by the end-to-end transport.
//!
//! One direction of a tunnel is an [`Encoder`] at the entry and a [`Decoder`] at the exit. Packets are
//! framed into source blocks (a 2-byte length prefix per packet, packets may span symbols) that close
//! `block_time` after their first packet or `idle_time` after their last one; each source symbol is
//! sent as soon as it fills, so the exit delivers packets whose symbols arrived without waiting for
//! the block. When a block closes the encoder adds proactive repair symbols ([`repair_for_block`]);
//! the decoder reports per-block reception counts ([`wire::FeedbackEntry`]) and the encoder answers a
//! short block with more repair. Blocks are given up `abandon_after` after they opened.
//!
//! Sans-IO (STYLE.md rule 1): the host calls `push`/`on_datagram`/`on_feedback` with `now`, drains
//! `poll_transmit`/`poll_packet`/`poll_feedback`, and calls `handle_timeout` at `poll_timeout`.
//! Security (AEAD) is the host's: the real tunnel wraps every datagram.

mod decoder;
mod encoder;
mod systematic;
pub mod wire;
pub mod workload;

#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod systematic_tests;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, DecoderStats};
pub use encoder::{Encoder, EncoderStats};

use leoguard_core::Duration;

/// Most source symbols in one block: bounds the decoder's memory and the cost of one RaptorQ solve
/// (RFC 6330 allows 56403; a block this large is ~10 MB at 1280-byte symbols).
pub const MAX_BLOCK_SYMBOLS: u32 = 8192;
/// Largest packet the tunnel carries (its frame length prefix is 16 bits).
pub const MAX_PACKET: usize = u16::MAX as usize;
/// Bytes of the length prefix framing each packet inside a block.
pub const FRAME_PREFIX: usize = 2;

/// Parameters of one tunnel direction; the encoder and decoder of a direction must agree on
/// `symbol_size` (the other fields may differ).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiquidConfig {
    /// Bytes per symbol (REFERENCE.md: 1280).
    pub symbol_size: u16,
    /// A source block closes this long after its first packet (5 ms).
    pub block_time: Duration,
    /// ... or this long after its last packet (1 ms).
    pub idle_time: Duration,
    /// Proactive repair symbols per source symbol when not adaptive (0.10; at least 1 per block when
    /// positive; 0 = repair only on feedback).
    pub repair_ratio: f64,
    /// Size the proactive repair from the loss reported in feedback ([`repair_for_block`]).
    pub adaptive: bool,
    /// Adaptive policy: the probability that a block arrives short that the repair is sized for.
    pub adaptive_target: f64,
    /// Blocks are given up this long after they opened (1 s).
    pub abandon_after: Duration,
    /// The decoder delivers packets in entry order (else as soon as each is available).
    pub in_order: bool,
    /// A block closes when it holds this many packets.
    pub max_block_packets: u32,
    /// The decoder reports a short block after no symbol of it arrived for this long.
    pub feedback_delay: Duration,
    /// Counts of blocks that completed are reported at most this often.
    pub feedback_interval: Duration,
    /// A block still short this long after it was reported is reported again.
    pub feedback_retry: Duration,
}

impl Default for LiquidConfig {
    fn default() -> Self {
        LiquidConfig {
            symbol_size: 1280,
            block_time: Duration::from_millis(5),
            idle_time: Duration::from_millis(1),
            repair_ratio: 0.10,
            adaptive: false,
            adaptive_target: 1e-3,
            abandon_after: Duration::from_secs(1),
            in_order: false,
            max_block_packets: 1024,
            feedback_delay: Duration::from_millis(2),
            feedback_interval: Duration::from_millis(20),
            feedback_retry: Duration::from_millis(100),
        }
    }
}

/// Bad configuration or bad input.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LiquidError {
    /// A parameter is out of range.
    #[error("liquid {field} = {value}: {reason}")]
    Invalid {
        /// The parameter.
        field: &'static str,
        /// Its value.
        value: String,
        /// The rule.
        reason: &'static str,
    },
    /// A datagram that does not parse or contradicts what is known of its block (dropped, counted).
    #[error("malformed liquid datagram: {0}")]
    Malformed(&'static str),
}

fn invalid(field: &'static str, value: impl ToString, reason: &'static str) -> LiquidError {
    LiquidError::Invalid { field, value: value.to_string(), reason }
}

impl LiquidConfig {
    /// Checks every parameter; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), LiquidError> {
        // A symbol must hold at least a frame prefix; the datagram must fit a UDP payload.
        if !(16..=8192).contains(&self.symbol_size) {
            return Err(invalid("symbol_size", self.symbol_size, "must be 16..=8192 bytes"));
        }
        if self.block_time == Duration::ZERO {
            return Err(invalid("block_time", self.block_time, "must be positive"));
        }
        if self.idle_time == Duration::ZERO || self.idle_time > self.block_time {
            return Err(invalid("idle_time", self.idle_time, "must be positive and at most block_time"));
        }
        if !self.repair_ratio.is_finite() || !(0.0..=4.0).contains(&self.repair_ratio) {
            return Err(invalid("repair_ratio", self.repair_ratio, "must be 0..=4"));
        }
        if !self.adaptive_target.is_finite() || !(1e-9..0.5).contains(&self.adaptive_target) {
            return Err(invalid("adaptive_target", self.adaptive_target, "must be in [1e-9, 0.5)"));
        }
        if self.abandon_after <= self.block_time {
            return Err(invalid("abandon_after", self.abandon_after, "must exceed block_time"));
        }
        if self.max_block_packets == 0 || self.max_block_packets > MAX_BLOCK_SYMBOLS {
            return Err(invalid("max_block_packets", self.max_block_packets, "must be 1..=8192"));
        }
        if self.feedback_delay == Duration::ZERO || self.feedback_delay >= self.abandon_after {
            return Err(invalid("feedback_delay", self.feedback_delay, "must be positive and below abandon_after"));
        }
        if self.feedback_interval == Duration::ZERO {
            return Err(invalid("feedback_interval", self.feedback_interval, "must be positive"));
        }
        if self.feedback_retry == Duration::ZERO {
            return Err(invalid("feedback_retry", self.feedback_retry, "must be positive"));
        }
        Ok(())
    }
}

/// Proactive repair symbols for a block of `k` source symbols.
///
/// Fixed policy (`adaptive = false`, or no loss measured yet): `ceil(repair_ratio · k)`, at least 1
/// when `repair_ratio > 0`. Adaptive policy with a measured symbol loss rate `p`: the smallest
/// `r >= 1` such that P[more than `r` of the `k + r` symbols are lost] <= `adaptive_target` under
/// independent losses at rate `p` (a binomial tail), capped at `k` (100 % overhead). RaptorQ decodes
/// from any `k` received symbols with probability ~99 % and `k + 2` with ~99.9999 % (RFC 6330
/// §5.1.2 / Annex), so the residual is dominated by the tail, and feedback covers the rest.
pub fn repair_for_block(k: u32, cfg: &LiquidConfig, loss: Option<f64>) -> u32 {
    match loss {
        Some(p) if cfg.adaptive => binomial_repair(k, p.clamp(0.0, 0.99), cfg.adaptive_target),
        _ if cfg.repair_ratio <= 0.0 => 0,
        // ratio <= 4 and k <= 8192: the product fits u32.
        _ => ((cfg.repair_ratio * f64::from(k)).ceil() as u32).max(1),
    }
}

/// Smallest `r` in `1..=k` with P[Binomial(k + r, p) > r] <= target (else `k`).
fn binomial_repair(k: u32, p: f64, target: f64) -> u32 {
    if p <= 0.0 {
        return 1;
    }
    let q = 1.0 - p;
    for r in 1..=k.max(1) {
        let n = k + r;
        // P[X <= r] summed term by term: t_0 = q^n, t_{i+1} = t_i · (n - i)/(i + 1) · p/q.
        // Log space for the first term: q^n underflows for long blocks at high loss.
        let mut log_t = f64::from(n) * q.ln();
        let mut cdf = 0.0;
        for i in 0..=r {
            cdf += log_t.exp();
            log_t += (f64::from(n - i) / f64::from(i + 1)).ln() + (p / q).ln();
        }
        if 1.0 - cdf <= target {
            return r;
        }
    }
    k.max(1)
}
