//! LinkGuardian (SIGCOMM'23; the SATGUARD paper's "LinkGuard" baseline): link-local retransmission
//! designed for datacenter links.
//!
//! REFERENCE.md "Baselines": 16-bit sequence numbers, the receiver sends leading ACKs plus loss
//! notifications (first lost seq, hole size), retransmissions go on a priority queue and are sent
//! twice, dummy packets after bursts catch tail loss without timers, optional ordered mode, no
//! notion of handover, timers and buffers scaled by the hop's bandwidth-delay product.
//!
//! * [`LgSender`] — upstream side of one link: stamps [`Seq16`]s, keeps copies in a byte-bounded Tx
//!   buffer, retransmits on notifications (or on one fixed timer for shared links), sends dummies.
//! * [`LgReceiver`] — downstream side: detects holes, emits [`LgAck`]s, delivers in order (ordered
//!   mode) or at once (unordered mode), gives up a hole after `hole_timeout`.
//!
//! ## Loss detection
//! On one-to-one links a hole is detected by the receiver from a later sequence number (data or
//! dummy) and notified. SATGUARD §3.3 says LinkGuard-style LL-ReTx uses one fixed timer on
//! one-to-many (user) links, where out-of-order HAcks from many terminals make gaps meaningless:
//! with `fixed_timeout = Some(t)` the sender ignores notifications and retransmits whatever stays
//! unacknowledged `t` after its last transmission. There a terminal can only acknowledge the packets
//! it received (SATGUARD §3.3: "if the satellite does not receive HAck for thd seconds, the packet is
//! considered lost"; 802.11 acknowledges each frame), so the receiver acknowledges every packet
//! individually ([`LgAck::received`]) besides the cumulative leading ACK. With the cumulative ACK
//! alone, every packet received behind a hole would stay unacknowledged until the hole is repaired
//! (one timeout plus one RTT) and time out spuriously: about one RTT of packets, twice each, per loss.
//!
//! ## Tx buffer
//! LinkGuardian stamps and copies a packet in the egress pipeline, after the interface queue: the
//! Tx buffer holds what is on the wire and unacknowledged, and the timers of a packet start when it
//! leaves. A host that stamps packets when it queues them tells [`LgSender::on_send`] when the packet
//! will leave; the copy joins the Tx buffer (and its bytes count against `tx_buffer_bytes`) only
//! then, so a deep interface queue neither evicts live copies nor starts timers early. Priority
//! packets sent ahead of the queue delay it ([`LgSender::on_priority_sent`]).
//!
//! ## Dummy rule (tail loss)
//! The host calls [`LgSender::on_idle`] when its egress queue for the link drains. If the Tx buffer
//! then holds unacknowledged packets, the sender emits a *train* of `dummies_per_train` dummies
//! carrying the next (unused) sequence number, so the receiver sees that everything before it was
//! sent and notifies a lost tail. Trains are paced at one per link RTT: a train covers every copy
//! sent before it, and until its feedback can be back a later train only repeats what the data sent
//! since then reveals by itself (at partial load the egress drains after almost every packet; a
//! train per drain would send about one dummy per data packet). A drain within one RTT of the last
//! train defers the next train to one link RTT after it ([`LgSender::poll_timeout`]), so a tail is
//! probed at most one link RTT late. A train also follows a retransmission burst sent while idle (a
//! lost retransmission is a tail too), under the same pacing. While idle with unacknowledged copies
//! trains repeat every link RTT (liveness); every ACK refills a budget of `max_dummy_trains`, and
//! once the budget is spent without any ACK coming back the remaining packets are given up
//! (`GiveUpReason::NoFeedback`) so the buffer never holds them forever.
//!
//! ## Spurious retransmissions
//! Leading ACKs are cumulative, so a lost ACK costs nothing. Every ACK sent while a hole is open
//! repeats the head hole (a lost notification is repaired by the next one); the sender ignores a
//! notification for a packet retransmitted less than one link RTT ago, since that notification
//! cannot yet reflect the retransmission (FIFO link, retransmissions on the priority queue).
//!
//! ## Handover
//! None (the baseline's weakness SATGUARD §5 shows): [`LgSender::on_link_change`] discards the
//! buffer, reporting each packet given up with `GiveUpReason::LinkChange`.

use leoguard_core::{Bps, Duration, Seq16};

mod receiver;
mod sender;
#[cfg(test)]
mod tests;

pub use receiver::{LgReceiver, ReceiverStats};
pub use sender::{LgSender, SenderStats};

/// Typical packet size used only to floor the Tx buffer of very short links.
const FLOOR_PACKETS_BYTES: u64 = 64 * 1500;

/// LinkGuardian parameters for one link; build with [`LgConfig::for_link`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LgConfig {
    /// Round-trip time of the link (propagation both ways): the retransmission guard and trains' clock.
    pub link_rtt: Duration,
    /// Tx buffer capacity, bytes of data packets kept for retransmission.
    pub tx_buffer_bytes: u64,
    /// Copies of each retransmission (LinkGuardian sends 2).
    pub retx_copies: u8,
    /// Retransmission rounds per packet before it is given up.
    pub max_retries: u8,
    /// Dummies per train.
    pub dummies_per_train: u8,
    /// Trains without ACK progress before the remaining packets are given up.
    pub max_dummy_trains: u8,
    /// One fixed retransmission timer (shared one-to-many links, SATGUARD §3.3); `None`: notifications.
    pub fixed_timeout: Option<Duration>,
    /// Ordered mode: the receiver holds out-of-order packets and releases in order.
    pub ordered: bool,
    /// How long the receiver waits for a hole before giving it up.
    pub hole_timeout: Duration,
    /// Most sequence numbers the Tx buffer or the receiver's window may span (< 2^15).
    pub max_window: u16,
}

impl LgConfig {
    /// Defaults for a link of `rate` and `one_way_delay`, scaled by its bandwidth-delay product
    /// (REFERENCE.md: "Scale its timers and buffers by the hop's bandwidth-delay product").
    ///
    /// Tx buffer = (1 + `max_retries`) × rate × RTT. A copy lives one RTT until its leading ACK
    /// returns; because leading ACKs are cumulative, a packet behind a hole waits one more RTT for
    /// every recovery round of the hole (notification + retransmission, rounds one 1-RTT guard apart
    /// when feedback is continuous, as it is at line rate). The buffer holds what line rate sends
    /// while the sender may still retransmit the hole. A smaller one evicts the hole's copy while it
    /// is being repaired at sustained line rate with ~1 % loss (a hole is almost always open): the
    /// receiver then waits `hole_timeout` for a packet that will not come, its cumulative ACK
    /// stalls, and every copy behind the hole is evicted too.
    pub fn for_link(rate: Bps, one_way_delay: Duration) -> LgConfig {
        let rtt = Duration(one_way_delay.as_nanos().saturating_mul(2).max(1_000));
        let bdp = rate.bytes_in(rtt).0;
        let max_retries = 3u8;
        LgConfig {
            link_rtt: rtt,
            tx_buffer_bytes: bdp.saturating_mul(1 + u64::from(max_retries)).max(FLOOR_PACKETS_BYTES),
            retx_copies: 2,
            max_retries,
            dummies_per_train: 2,
            max_dummy_trains: 4,
            fixed_timeout: None,
            ordered: true,
            // Each retransmission round costs at most ~1 RTT of feedback plus the 1-RTT guard.
            hole_timeout: Duration(rtt.as_nanos().saturating_mul(2 * (u64::from(max_retries) + 1))),
            max_window: 1 << 14,
        }
    }

    /// Checks the parameters; sender and receiver only accept a valid configuration.
    pub fn validate(&self) -> Result<(), LgConfigError> {
        if self.link_rtt == Duration::ZERO {
            return Err(LgConfigError::Zero("link_rtt"));
        }
        if self.tx_buffer_bytes == 0 {
            return Err(LgConfigError::Zero("tx_buffer_bytes"));
        }
        if self.retx_copies == 0 {
            return Err(LgConfigError::Zero("retx_copies"));
        }
        if self.hole_timeout == Duration::ZERO {
            return Err(LgConfigError::Zero("hole_timeout"));
        }
        if self.fixed_timeout == Some(Duration::ZERO) {
            return Err(LgConfigError::Zero("fixed_timeout"));
        }
        if self.max_window == 0 || self.max_window >= 1 << 15 {
            return Err(LgConfigError::BadWindow(self.max_window));
        }
        Ok(())
    }
}

/// Why an [`LgConfig`] is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LgConfigError {
    /// A field that must be positive is zero.
    #[error("linkguardian: {0} must be greater than zero")]
    Zero(&'static str),
    /// `max_window` is zero or not below 2^15 (where 16-bit serial order breaks down).
    #[error("linkguardian: max_window must be in 1..=32767, got {0}")]
    BadWindow(u16),
}

/// Receiver-to-sender feedback (wire: LinkGuardian ACK option: leading_ack(16), first_lost(16),
/// hole_size(16), flags bit0 = loss notification present).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LgAck {
    /// Highest sequence number received in order (cumulative).
    pub leading_ack: Seq16,
    /// Loss notification: first lost sequence number and hole size.
    pub loss: Option<(Seq16, u16)>,
    /// Fixed-timer (shared) links only: the packet this ACK answers, acknowledged on its own (module
    /// docs, "Loss detection"); never together with a loss notification.
    pub received: Option<Seq16>,
}

/// What an [`Outgoing`] packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    /// A copy (0-based) of a retransmitted data packet.
    Retransmission {
        /// Which copy of this round.
        copy: u8,
    },
    /// A dummy carrying the next unused sequence number (no payload; the host sizes it).
    Dummy,
}

/// A packet the sender wants on the wire besides the host's new data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing<T> {
    /// Sequence number to stamp.
    pub seq: Seq16,
    /// The data packet (`None` for a dummy).
    pub item: Option<T>,
    /// Bytes of the data packet (0 for a dummy).
    pub bytes: u32,
    /// Retransmission or dummy.
    pub kind: OutKind,
    /// LinkGuardian puts these on a priority queue; the host decides what priority means.
    pub priority: bool,
}

/// Why the sender stopped trying to deliver a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUpReason {
    /// `max_retries` retransmission rounds were spent.
    RetriesExhausted,
    /// The Tx buffer was full and this was the oldest copy.
    BufferFull,
    /// [`LgSender::on_link_change`] discarded it.
    LinkChange,
    /// Dummy trains brought no feedback (module docs, "Dummy rule").
    NoFeedback,
}

/// Something the sender reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LgEvent {
    /// Acknowledged without a retransmission.
    Delivered {
        /// Its sequence number.
        seq: Seq16,
    },
    /// Acknowledged after retransmission.
    Recovered {
        /// Its sequence number.
        seq: Seq16,
        /// Retransmission rounds it took.
        retries: u8,
    },
    /// No longer retransmitted.
    GivenUp {
        /// Its sequence number.
        seq: Seq16,
        /// Why.
        reason: GiveUpReason,
    },
}
