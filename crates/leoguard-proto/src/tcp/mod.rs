//! TCP as Linux behaves, sans-IO: a bulk or fixed-size sender with SACK-based loss recovery, RFC 6298
//! retransmission timeouts (as Linux: at least srtt + 200 ms), pacing when the controller asks for it, and
//! delivery-rate samples for BBR; and a receiver with delayed ACKs, SACK blocks and in-order,
//! exactly-once delivery. Sequence numbers are 64-bit byte offsets (no wrap inside a simulation).
//!
//! Loss detection: an original transmission is lost once 3 segments' worth of data above it is
//! SACKed (RFC 6675's DupThresh); a retransmission is lost once data sent after it is delivered
//! (RACK, RFC 8985, with a zero reordering window). An RTO marks everything outstanding lost, as Linux does.

use leoguard_core::Duration;

mod receiver;
mod sender;
#[cfg(test)]
mod tests;

pub use receiver::TcpReceiver;
pub use sender::{SenderStats, TcpSender};

/// Endpoint parameters (Linux defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per segment.
    pub mss: u32,
    /// IP + TCP header bytes per segment on the wire (40 + 12 for timestamps).
    pub header_bytes: u32,
    /// Initial window, segments (Linux: 10).
    pub init_cwnd_segments: u64,
    /// Lower bound of the RTO's variance term (Linux's `rto_min`, 200 ms): RTO >= srtt + min_rto.
    pub min_rto: Duration,
    /// Upper bound of the RTO (Linux: 120 s).
    pub max_rto: Duration,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub initial_rto: Duration,
    /// Delayed-ACK timeout (Linux: 40 ms minimum).
    pub delack: Duration,
    /// Receive window the receiver advertises, bytes.
    pub rwnd: u64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            header_bytes: 52,
            init_cwnd_segments: 10,
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(120),
            initial_rto: Duration::from_secs(1),
            delack: Duration::from_millis(40),
            rwnd: 64 << 20,
        }
    }
}

/// A data segment to put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First byte.
    pub seq: u64,
    /// Payload length.
    pub len: u32,
    /// Whether this is a retransmission.
    pub retransmission: bool,
}

/// An acknowledgement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ack {
    /// Next byte expected (cumulative).
    pub cum: u64,
    /// Up to 3 SACK blocks [start, end), most recent first.
    pub sack: [(u64, u64); 3],
    /// Valid SACK blocks.
    pub n_sack: u8,
    /// Advertised window, bytes.
    pub rwnd: u64,
}
