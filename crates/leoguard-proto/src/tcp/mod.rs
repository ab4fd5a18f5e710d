//! TCP as Linux behaves, sans-IO: a bulk or fixed-size sender with SACK-based loss recovery, RFC 6298
//! retransmission timeouts (as Linux: at least srtt + 200 ms), pacing when the controller asks for it, and
//! delivery-rate samples for BBR; and a receiver with delayed ACKs (quick ACKs at the start), SACK and
//! DSACK blocks, timestamps, and in-order, exactly-once delivery. Sequence numbers are 64-bit byte
//! offsets (no wrap inside a simulation).
//!
//! Loss recovery follows Linux (REFERENCE.md "Linux TCP loss recovery"), each mechanism switchable in
//! [`Recovery`]:
//! - RACK (RFC 8985) marks a segment lost once a segment sent after it was delivered more than a
//!   reordering window ago; the window is zero until reordering is seen (while 3 segments are SACKed
//!   or during recovery, Linux's DupThresh-equivalent), then min_rtt/4, widened a step per DSACK round
//!   and reset after 16 recoveries without one;
//! - Tail Loss Probes (a probe after 2 SRTT instead of waiting for the RTO);
//! - DSACK (RFC 2883) at the receiver; undo of spurious recoveries at the sender when every
//!   retransmission of an episode was DSACKed or the echoed timestamp predates the first
//!   retransmission (Eifel, RFC 3522); F-RTO (RFC 5682) for spurious timeouts;
//! - PRR (RFC 6937) clocks out sending during recovery;
//! - the window grows only while the sender is cwnd-limited.
//!
//! StarTCP (handover-aware stalling, [`crate::startcp`]) is off unless the endpoints are built with
//! [`TcpSender::with_startcp`] and [`TcpReceiver::with_startcp`]; off, nothing changes.
//!
//! [`Recovery::legacy`] is the earlier model (DupThresh for originals, RACK with a zero window for
//! retransmissions, none of the rest), kept to reproduce older results.

use crate::startcp::Signal;
use leoguard_core::{Duration, Instant};

pub mod info;
pub(crate) mod rack;
mod receiver;
#[cfg(test)]
mod recovery_tests;
mod sender;
#[cfg(test)]
mod startcp_tests;
#[cfg(test)]
mod tests;

pub use info::{CaState, TcpInfo};
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
    /// Which loss-recovery mechanisms are on.
    pub recovery: Recovery,
}

/// The loss-recovery mechanisms, each switchable (for ablations and to reproduce the older model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// RACK with Linux's adaptive reordering window for every segment (off: DupThresh for originals,
    /// a zero window for retransmissions).
    pub rack: bool,
    /// Tail Loss Probes.
    pub tlp: bool,
    /// The receiver reports duplicate segments (DSACK).
    pub dsack: bool,
    /// Undo of spurious recoveries (all retransmissions DSACKed, or Eifel with timestamps).
    pub undo: bool,
    /// F-RTO: detect and undo spurious retransmission timeouts.
    pub frto: bool,
    /// Proportional Rate Reduction during recovery (off: the controller's reduced window at once).
    pub prr: bool,
    /// The window grows only while the sender is cwnd-limited (Linux `tcp_is_cwnd_limited`).
    pub cwnd_limited: bool,
    /// The receiver ACKs every segment for its first 16 (Linux's quick-ACK mode at the start).
    pub quickack: bool,
    /// HyStart leaves slow start early on a delay increase or a long ACK train (CUBIC's, Linux's
    /// default; on in the older model too, which always had it).
    pub hystart: bool,
}

impl Recovery {
    /// Linux's defaults (kernel 5.x/6.x), except quick ACKs: the model has no piggybacked ACKs, so on
    /// request/response connections a quick ACK would put a pure ACK in front of data that Linux
    /// carries in the data segment itself.
    pub const fn linux() -> Recovery {
        Recovery {
            rack: true,
            tlp: true,
            dsack: true,
            undo: true,
            frto: true,
            prr: true,
            cwnd_limited: true,
            quickack: false,
            hystart: true,
        }
    }

    /// The model before the Linux mechanisms were added: everything off.
    pub const fn legacy() -> Recovery {
        Recovery {
            rack: false,
            tlp: false,
            dsack: false,
            undo: false,
            frto: false,
            prr: false,
            cwnd_limited: false,
            quickack: false,
            hystart: true,
        }
    }

    /// The switches by name, for configuration ("rack", "tlp", ...).
    pub const NAMES: [&'static str; 9] =
        ["rack", "tlp", "dsack", "undo", "frto", "prr", "cwnd_limited", "quickack", "hystart"];

    /// Sets the switch called `name`; false if there is none.
    pub fn set(&mut self, name: &str, on: bool) -> bool {
        let f = match name {
            "rack" => &mut self.rack,
            "tlp" => &mut self.tlp,
            "dsack" => &mut self.dsack,
            "undo" => &mut self.undo,
            "frto" => &mut self.frto,
            "prr" => &mut self.prr,
            "cwnd_limited" => &mut self.cwnd_limited,
            "quickack" => &mut self.quickack,
            "hystart" => &mut self.hystart,
            _ => return false,
        };
        *f = on;
        true
    }
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery::linux()
    }
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
            recovery: Recovery::linux(),
        }
    }
}

/// A data segment (or a StarTCP probe) to put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First byte.
    pub seq: u64,
    /// Payload length.
    pub len: u32,
    /// Whether this is a retransmission.
    pub retransmission: bool,
    /// Timestamp value (RFC 7323 TSval): when this transmission left the sender.
    pub ts: Instant,
    /// A StarTCP probe from a stalled sender (`startcp` §2.3): zero-length at `seq = snd_nxt`, so it
    /// carries no data and a receiver never counts it as data or as a duplicate; on the wire it is a
    /// bare header with the StarTCP option's probe flag. Always false without StarTCP.
    pub probe: bool,
}

/// An acknowledgement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ack {
    /// Next byte expected (cumulative).
    pub cum: u64,
    /// Up to 3 SACK blocks [start, end), most recent first. A first block below `cum` or inside the
    /// second reports a duplicate segment (DSACK, RFC 2883), as on the wire.
    pub sack: [(u64, u64); 3],
    /// Valid SACK blocks.
    pub n_sack: u8,
    /// Advertised window, bytes.
    pub rwnd: u64,
    /// Echoed timestamp (RFC 7323 TSecr), if the receiver has one.
    pub ts_ecr: Option<Instant>,
    /// StarTCP's signals (predicted handover, recovery notice); none without StarTCP.
    pub startcp: Signal,
}

impl Ack {
    /// The DSACK block this ACK carries, if its first SACK block reports a duplicate (RFC 2883 §4).
    pub fn dsack(&self) -> Option<(u64, u64)> {
        let first = self.sack[0];
        (self.n_sack > 0
            && (first.1 <= self.cum || (self.n_sack > 1 && self.sack[1].0 <= first.0 && first.1 <= self.sack[1].1)))
            .then_some(first)
    }

    /// The SACK blocks that report data held (the DSACK block excluded).
    pub fn sack_blocks(&self) -> &[(u64, u64)] {
        let n = usize::from(self.n_sack.min(3));
        if self.dsack().is_some() {
            &self.sack[1..n]
        } else {
            &self.sack[..n]
        }
    }
}
