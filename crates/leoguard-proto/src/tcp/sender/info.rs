//! The sender's TCP_INFO snapshot and the state Linux keeps only for it (the CA state as
//! `tcp_fastretrans_alert` leaves it, `tp->reordering`).

use super::TcpSender;
use crate::tcp::info::{CaState, TcpInfo};
use leoguard_core::{Duration, Instant};

/// Linux `TCP_INFINITE_SSTHRESH`.
const INFINITE_SSTHRESH: u64 = 0x7fff_ffff;
/// Linux `sysctl_tcp_max_reordering`.
const MAX_REORDERING: u64 = 300;

impl TcpSender {
    /// A TCP_INFO-like snapshot (Linux `tcp_get_info`).
    pub fn info(&self) -> TcpInfo {
        let mss = u64::from(self.cfg.mss).max(1);
        let ssthresh = self.cc.ssthresh();
        let us = |d: Duration| d.as_nanos() / 1000;
        TcpInfo {
            ca_state: self.ca_state(),
            // During recovery Linux's `snd_cwnd` is PRR's window (`tcp_cwnd_reduction`).
            snd_cwnd: self.window() / mss,
            snd_ssthresh: if ssthresh == u64::MAX { INFINITE_SSTHRESH } else { ssthresh / mss },
            snd_mss: mss,
            unacked: self.flight.len() as u64,
            sacked: self.sacked_segs,
            lost: self.flight.iter().filter(|s| s.lost_tag).count() as u64,
            retrans: self.retrans_out,
            total_retrans: self.stats.retransmissions,
            reordering: self.reordering,
            rtt_us: self.srtt.map_or(0, us),
            rttvar_us: us(self.rttvar),
            min_rtt_us: if self.min_rtt.0 == u64::MAX { u64::from(u32::MAX) } else { us(self.min_rtt) },
            rto_us: us(self.rto),
            pacing_rate: self.cc.pacing_rate().map(|r| r.0 / 8),
            cc_state: self.cc.state(),
        }
    }

    /// Linux's `icsk_ca_state` as `tcp_fastretrans_alert` leaves it: Loss after a timeout, Recovery
    /// during fast recovery, CWR while a Tail Loss Probe's reduction is pending, else Disorder when
    /// anything is SACKed, marked lost or retransmitted and unacknowledged (`tcp_try_keep_open`:
    /// `tcp_left_out(tp) || tcp_any_retrans_done(sk)`), else Open.
    pub(super) fn ca_state(&self) -> CaState {
        if self.in_loss {
            CaState::Loss
        } else if self.in_recovery {
            CaState::Recovery
        } else if self.sacked_segs > 0
            || self.retrans_out > 0
            || self.flight.iter().any(|s| s.lost_tag)
            || self.flight.front().is_some_and(|s| s.retrans)
        {
            CaState::Disorder
        } else {
            CaState::Open
        }
    }

    /// Linux `tcp_check_sack_reordering`: an original below the highest SACKed sequence was
    /// delivered (`low_seq`, the lowest such): the path reorders by at least that distance.
    pub(super) fn check_sack_reordering(&mut self, low_seq: u64) {
        // `tcp_highest_sack_seq`: snd_una once nothing is SACKed.
        let fack = if self.sacked_segs == 0 { self.snd_una } else { self.highest_sacked };
        if low_seq >= fack {
            return;
        }
        let mss = u64::from(self.cfg.mss).max(1);
        let metric = fack - low_seq;
        if metric > self.reordering * mss {
            self.reordering = metric.div_ceil(mss).min(MAX_REORDERING);
        }
        self.rack.reord_seen = true;
    }

    /// The handshake's RTT sample (Linux `tcp_synack_rtt_meas` for a passive open, the SYN's
    /// acknowledgement in `tcp_clean_rtx_queue` for an active one): seeds SRTT, min RTT and the RTO,
    /// and tells the controller (which Linux initialises only then).
    pub fn on_handshake_rtt(&mut self, now: Instant, rtt: Duration) {
        self.rtt_sample(rtt);
        if let Some(srtt) = self.srtt {
            self.cc.on_handshake_rtt(now, srtt);
        }
    }
}
