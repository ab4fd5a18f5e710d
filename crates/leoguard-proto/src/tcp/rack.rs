//! RACK's state (RFC 8985, Linux `tcp_recovery.c`): the most recently sent segment known delivered,
//! its RTT, and the adaptive reordering window.

use leoguard_core::{Duration, Instant};

/// Linux `TCP_RACK_RECOVERY_THRESH`: recoveries without a DSACK before the window falls back.
const RECOVERY_THRESH: u32 = 16;

/// RACK's state for one connection.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Rack {
    /// Send time and end sequence of the most recently sent segment delivered so far.
    pub xmit: Option<(Instant, u64)>,
    /// RTT of the latest delivered segment RACK accepted (Linux `rack.rtt_us`).
    pub rtt: Duration,
    /// Reordering was observed on this connection (Linux `tp->reord_seen`).
    pub reord_seen: bool,
    /// Window steps of min_rtt/4 (Linux `rack.reo_wnd_steps`, starts at 1).
    steps: u32,
    /// Recoveries left before the steps fall back to 1 (Linux `rack.reo_wnd_persist`).
    persist: u32,
    /// A DSACK arrived and the window should widen (Linux `rack.dsack_seen`).
    dsack_seen: bool,
    /// Delivered bytes when the window last widened: at most one step per round trip.
    last_delivered: u64,
}

/// Whether a segment sent at `t1` ending at `seq1` was sent after one sent at `t2` ending at `seq2`
/// (Linux `tcp_skb_sent_after`: ties on time are broken by sequence).
pub(super) fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

/// Deliveries RACK is told of later: an ACK's cumulatively acknowledged segments, which Linux walks
/// (`tcp_clean_rtx_queue`) after its SACK blocks (`tcp_sacktag_write_queue`), so that RACK's RTT ends
/// as the last cumulatively acknowledged segment's, not the newest SACKed one's.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Deferred {
    rtt: Option<Duration>,
    xmit: Option<(Instant, u64)>,
}

impl Deferred {
    /// A segment sent at `sent_at` ending at `end` was delivered at `now`; a retransmitted segment
    /// whose RTT is below min_rtt was probably the original's delivery: ambiguous, ignored.
    pub fn note(&mut self, now: Instant, sent_at: Instant, end: u64, retransmitted: bool, min_rtt: Duration) {
        let rtt = now.saturating_duration_since(sent_at);
        if retransmitted && rtt < min_rtt {
            return;
        }
        self.rtt = Some(rtt);
        if self.xmit.is_none_or(|(t, e)| sent_after(sent_at, end, t, e)) {
            self.xmit = Some((sent_at, end));
        }
    }
}

impl Rack {
    pub fn new() -> Rack {
        Rack { steps: 1, ..Default::default() }
    }

    /// A segment sent at `sent_at` ending at `end` was delivered (ACKed or SACKed) at `now` (Linux
    /// `tcp_rack_advance`). A retransmitted segment whose RTT is below min_rtt was probably the
    /// original's delivery: ambiguous, ignored.
    pub fn advance(&mut self, now: Instant, sent_at: Instant, end: u64, retransmitted: bool, min_rtt: Duration) {
        let mut d = Deferred::default();
        d.note(now, sent_at, end, retransmitted, min_rtt);
        self.apply(d);
    }

    /// Applies deliveries noted in `d` as if `advance` had been called for each, in order, now.
    pub fn apply(&mut self, d: Deferred) {
        if let Some(rtt) = d.rtt {
            self.rtt = rtt;
        }
        if let Some((t, e)) = d.xmit {
            if self.xmit.is_none_or(|(xt, xe)| sent_after(t, e, xt, xe)) {
                self.xmit = Some((t, e));
            }
        }
    }

    /// A DSACK arrived.
    pub fn on_dsack(&mut self) {
        self.dsack_seen = true;
    }

    /// Linux `tcp_rack_update_reo_wnd`, once per ACK with a rate sample whose packet was sent when
    /// `prior_delivered` bytes had been delivered (`delivered`: now).
    pub fn update_window(&mut self, prior_delivered: u64, delivered: u64) {
        // A DSACK within a round trip of the last widening is not another reason to widen.
        if prior_delivered < self.last_delivered {
            self.dsack_seen = false;
        }
        if self.dsack_seen {
            self.steps = (self.steps + 1).min(0xFF);
            self.dsack_seen = false;
            self.last_delivered = delivered;
            self.persist = RECOVERY_THRESH;
        } else if self.persist == 0 {
            self.steps = 1;
        }
    }

    /// A recovery episode started (the widened window persists for 16 of them without a DSACK).
    pub fn on_recovery(&mut self) {
        self.persist = self.persist.saturating_sub(1);
    }

    /// A recovery was undone after DSACKs (Linux `tcp_try_undo_dsack`): the window persists longer.
    pub fn on_dsack_undo(&mut self) {
        self.persist = (self.persist + 1).min(RECOVERY_THRESH);
    }

    /// The reordering window (Linux `tcp_rack_reo_wnd`): zero while no reordering has been seen and
    /// the connection is recovering or `sacked_segments` reach the duplicate threshold (3); else
    /// min_rtt/4 per step, at most SRTT.
    pub fn window(&self, recovering: bool, sacked_segments: u64, min_rtt: Duration, srtt: Duration) -> Duration {
        if !self.reord_seen && (recovering || sacked_segments >= 3) {
            return Duration::ZERO;
        }
        Duration((min_rtt.as_nanos() / 4).saturating_mul(u64::from(self.steps)).min(srtt.as_nanos()))
    }

    /// Window steps now (telemetry and tests).
    pub fn steps(&self) -> u32 {
        self.steps
    }
}
