//! LEOTP (ICDCS'23, papers/leotp-slides.txt; REFERENCE.md "LEOTP"): information-centric, hop-by-hop
//! transport for LEO networks. Sans-IO: time and packets in, packets out.
//!
//! **API.** Three roles, each a state machine driven the same way by an event loop: feed it packets
//! with `handle_packet(now, .., header, payload)` (or raw UDP payloads with `handle_datagram`), drain
//! what it wants sent with `poll_transmit(now, buf) -> Option<Transmit>` until `None` (each
//! [`Transmit`] names the flow, the [`Face`] it leaves by and its header, and the datagram is written
//! into `buf`, which should hold [`LEOTP_MTU`] bytes), and call `on_timer(now)` once `now` reaches
//! `poll_timeout()`, then drain again. A [`Consumer`] fetches one flow's byte range `[0, total)`
//! (its application reads the bytes in order with [`Consumer::read`]); a [`MidNode`] (satellite or
//! ground station) serves any number of flows, named by an opaque [`FlowKey`] the engine derives
//! (e.g. from the UDP 4-tuple), with sessions created on a flow's first packet, so a path change needs
//! no signalling: the engine just delivers the flow's packets to other nodes; a [`Producer`] serves
//! byte ranges of a [`Source`]. Faces: `Upstream` points toward the producer, `Downstream` toward the
//! consumer. Nothing here reads a clock; all state is bounded ([`LeotpConfig`]) and per-packet paths
//! reuse buffers. Counters are in each role's `stats()` ([`ConsumerStats`], [`MidStats`],
//! [`ProducerStats`]); bad packets are dropped and counted there, never a panic.
//!
//! Modules: [`config`] (every constant, code defaults, paper variants, ablation switches), [`cc`]
//! (hop-by-hop congestion control and the responder's token bucket), [`cache`] (4096-byte-block LRU),
//! `holes` (a mid node's hole tracking), and one file per role.

pub mod cache;
pub mod cc;
pub mod config;
mod consumer;
mod holes;
mod mid;
mod producer;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

pub use cache::BlockCache;
pub use cc::{HopCc, TokenBucket};
pub use config::{AdditiveIncrease, BackpressureSign, HoleConfirm, LeotpConfig, LeotpError};
pub use consumer::{Consumer, ConsumerStats, Rto};
pub use mid::{MidNode, MidStats};
pub use producer::{pattern_byte, PatternSource, Producer, ProducerStats, Source};

pub use leoguard_wire::leotp::{LeotpHeader, LeotpType, LEOTP_HEADER_LEN, LEOTP_MSS, LEOTP_MTU};

use leoguard_core::{Duration, Instant};
use std::collections::VecDeque;

/// The engine's name for a flow (e.g. a hash of the UDP 4-tuple; LEOTP has no flow-id field).
pub type FlowKey = u64;

/// Which side of a node a packet arrives on or leaves by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Face {
    /// Toward the producer (Interests leave this way, Data arrives).
    Upstream,
    /// Toward the consumer (Data leaves this way, Interests arrive).
    Downstream,
}

/// A packet to send now: `wire_len` bytes were written to the caller's buffer (only the header
/// when `carry_payload` is off; `wire_len` still counts the payload, for the engine's link model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The flow.
    pub flow: FlowKey,
    /// The face it leaves by.
    pub face: Face,
    /// Its header.
    pub header: LeotpHeader,
    /// Datagram length on the wire (header and payload).
    pub wire_len: usize,
}

/// The millisecond timestamp of `now` for the `ts` field (wraps after 49.7 days, as the field does).
pub(crate) fn ms_stamp(now: Instant) -> u32 {
    (now.as_nanos() / 1_000_000) as u32
}

/// What a responder stamps on Data: the last Interest's `ts` advanced by how long ago it arrived,
/// so the requester's `now - ts` is the hop's round trip with both clocks cancelled.
pub(crate) fn echo_ts(last_ts: u32, last_at: Instant, now: Instant) -> u32 {
    last_ts.wrapping_add(ms_stamp(Instant(now.saturating_duration_since(last_at).as_nanos())))
}

/// Bits per second to bytes per second.
pub(crate) fn bytes_per_s(bps: u64) -> f64 {
    bps as f64 / 8.0
}

/// `d` scaled by a factor (for RTO backoff), saturating.
pub(crate) fn scale(d: Duration, f: f64) -> Duration {
    Duration::from_secs_f64((d.as_secs_f64() * f).min(1e9))
}

/// One queued packet with its payload (an empty, reused `Vec` when payloads are not carried).
#[derive(Debug)]
pub(crate) struct Out {
    pub flow: FlowKey,
    pub face: Face,
    pub header: LeotpHeader,
    pub payload: Vec<u8>,
}

/// Recycled payload buffers, so steady-state forwarding allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: Vec<Vec<u8>>,
}

impl Pool {
    /// Most spare buffers kept (beyond it returned buffers are freed).
    const KEEP: usize = 1024;

    /// An empty buffer.
    pub fn get(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_default()
    }

    /// Returns a buffer for reuse.
    pub fn put(&mut self, mut v: Vec<u8>) {
        if self.free.len() < Self::KEEP && v.capacity() > 0 {
            v.clear();
            self.free.push(v);
        }
    }
}

/// Writes `header` and `payload` into `buf` (as much as fits; an engine passes [`LEOTP_MTU`]
/// bytes) and returns the transmit record.
pub(crate) fn write_out(out: &Out, buf: &mut [u8]) -> Transmit {
    let wire_len = LEOTP_HEADER_LEN + out.header.payload_len();
    if buf.len() >= LEOTP_HEADER_LEN {
        // Headers in the queues were built by this module and satisfy `validate`; should one not,
        // the engine still gets the Transmit record and the buffer holds no header.
        let _ = out.header.emit(buf);
        let n = out.payload.len().min(buf.len() - LEOTP_HEADER_LEN);
        buf[LEOTP_HEADER_LEN..LEOTP_HEADER_LEN + n].copy_from_slice(&out.payload[..n]);
    }
    Transmit { flow: out.flow, face: out.face, header: out.header, wire_len }
}

/// Pops the front of `q`, writes it and recycles its buffer.
pub(crate) fn pop_write(q: &mut VecDeque<Out>, buf: &mut [u8], pool: &mut Pool) -> Option<Transmit> {
    let out = q.pop_front()?;
    let t = write_out(&out, buf);
    pool.put(out.payload);
    Some(t)
}

/// The MSS-aligned pieces of `[start, end)`: each piece ends at the next multiple of `mss`, so
/// pieces match the consumer's segments whoever splits the range.
pub(crate) fn pieces(start: u32, end: u32, mss: u32) -> impl Iterator<Item = (u32, u32)> {
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let next = ((at / mss) as u64 + 1) * mss as u64;
        let e = next.min(end as u64) as u32;
        let s = at;
        at = e;
        Some((s, e))
    })
}
