//! The sender's recovery state machine (Linux `tcp_fastretrans_alert` and its helpers): entering
//! recovery, PRR, the Loss state after a timeout with F-RTO, Tail Loss Probe accounting, DSACK
//! counting and the undo of spurious episodes.

use super::TcpSender;
use crate::tcp::Ack;
use leoguard_core::{Duration, Instant};
use std::cmp::Reverse;

impl TcpSender {
    /// The retransmission timer fired with data outstanding (Linux `tcp_retransmit_timer` ->
    /// `tcp_enter_loss`): everything outstanding is marked lost (with RACK, except segments sent less
    /// than RACK's RTT ago), the Loss state begins with F-RTO armed where it applies, the head is owed
    /// at once and the timer backs off.
    pub(super) fn enter_loss(&mut self, now: Instant) {
        self.stats.rtos += 1;
        let prior = self.pipe;
        let first_episode = !self.in_recovery && !self.in_loss;
        if first_episode {
            self.init_undo();
        }
        self.lost.clear();
        // Retransmissions that stay outstanding (sent less than an RTT ago) keep their place in
        // RACK's send-ordered list; the others are marked lost below and leave it when scanned.
        self.reo_deadline = None;
        self.pto_deadline = None;
        self.probe = None;
        self.tlp_high = None;
        let head = self.flight.front().map_or(0, |s| s.seq);
        let rack_rtt = self.rack.rtt;
        let rack_on = self.rec.rack;
        for s in &mut self.flight {
            if s.sacked {
                continue;
            }
            // Linux `tcp_timeout_mark_lost`: with RACK, segments sent less than an RTT ago wait.
            if !s.lost && rack_on && s.seq != head && now.saturating_duration_since(s.sent_at) < rack_rtt {
                continue;
            }
            s.lost_tag = true;
            if !s.lost {
                s.lost = true;
                self.pipe -= u64::from(s.len);
                self.lost_total += u64::from(s.len);
                if self.packet_events {
                    self.cc.on_packet_lost(now, s.sent_at, u64::from(s.len));
                }
            }
            if s.rout {
                s.rout = false;
                self.retrans_out -= 1;
            }
            self.lost.push(Reverse(s.seq));
        }
        // Linux `tcp_enter_loss`: F-RTO judges a timeout only when no fast recovery was under way (or
        // the timeout repeats one): in recovery, originals SACKed after the timeout were sent before
        // the losses and say nothing about whether the timeout was spurious.
        self.frto = self.rec.frto && !self.in_recovery;
        self.in_recovery = false;
        self.in_loss = true;
        self.recovery_point = self.snd_nxt;
        self.frto_new = false;
        self.rto_head = true;
        self.cc.on_rto(now, prior);
        self.rto = Duration((self.rto.as_nanos() * 2).min(self.cfg.max_rto.as_nanos()));
        self.rto_deadline = Some(now + self.rto);
    }

    /// Linux `tcp_init_undo` (and the prior window `tcp_enter_recovery`/`tcp_enter_loss` keep).
    pub(super) fn init_undo(&mut self) {
        self.undo_marker = Some(self.snd_una);
        self.undo_retrans = if self.retrans_out > 0 { self.retrans_out as i64 } else { -1 };
        self.retrans_stamp = None;
        self.prior_cwnd = self.cc.cwnd();
        // Linux `tcp_current_ssthresh`: at least 3/4 of the window.
        self.prior_ssthresh = self.cc.ssthresh().max(self.cc.cwnd() / 4 * 3);
    }

    /// Linux `tcp_may_undo`: every retransmission of the episode was DSACKed, or the echoed timestamp
    /// shows the data arrived before the first retransmission (Eifel).
    pub(super) fn may_undo(&self, ts_ecr: Option<Instant>) -> bool {
        self.rec.undo && self.undo_marker.is_some() && (self.undo_retrans == 0 || self.packet_delayed(ts_ecr))
    }

    /// Linux `tcp_packet_delayed`.
    pub(super) fn packet_delayed(&self, ts_ecr: Option<Instant>) -> bool {
        matches!((self.retrans_stamp, ts_ecr), (Some(r), Some(e)) if e < r)
    }

    /// Linux `tcp_undo_cwnd_reduction`: the window returns to its value before the episode, the
    /// episode ends; `unmark_loss` also forgets which segments were marked lost.
    pub(super) fn undo(&mut self, now: Instant, unmark_loss: bool) {
        if unmark_loss {
            for s in &mut self.flight {
                s.lost_tag = false;
                if s.lost {
                    s.lost = false;
                    self.pipe += u64::from(s.len);
                }
            }
            self.lost.clear();
            self.loss_scan_seq = self.snd_una;
        }
        if self.in_recovery || self.in_loss {
            self.cc.on_recovery_end(now);
        }
        self.cc.undo(now, self.prior_cwnd, self.prior_ssthresh);
        self.undo_marker = None;
        self.in_recovery = false;
        self.in_loss = false;
        self.frto = false;
        self.frto_new = false;
        self.stats.undos += 1;
    }

    /// A DSACK for [start, end) (Linux `tcp_check_dsack` and the DSACK part of `tcp_sacktag_one`).
    pub(super) fn on_dsack(&mut self, start: u64, end: u64) {
        self.stats.dsacks += 1;
        self.rack.on_dsack();
        let Some(marker) = self.undo_marker else { return };
        if end <= self.snd_una {
            // Data already acknowledged and forgotten: count one (Linux's "dumb counting").
            if end > marker && self.undo_retrans > 0 {
                self.undo_retrans -= 1;
            }
            return;
        }
        let from = self.flight.partition_point(|s| s.end() <= start);
        let covered =
            self.flight.range(from..).take_while(|s| s.seq < end).filter(|s| s.retrans && s.end() > marker).count();
        self.undo_retrans = (self.undo_retrans - covered as i64).max(0);
    }

    /// Linux `tcp_try_undo_dsack`: every retransmission of the last episode was DSACKed.
    pub(super) fn try_undo_dsack(&mut self, now: Instant) -> bool {
        if self.rec.undo && self.undo_marker.is_some() && self.undo_retrans == 0 {
            self.rack.on_dsack_undo();
            self.undo(now, false);
            return true;
        }
        false
    }

    /// Linux `tcp_process_tlp_ack`: a probe that resent data and was not DSACKed repaired a loss,
    /// which costs one window reduction.
    pub(super) fn process_tlp_ack(
        &mut self,
        now: Instant,
        ack: &Ack,
        dsack: Option<(u64, u64)>,
        advanced: bool,
        sacked: bool,
    ) {
        let Some((high, retrans)) = self.tlp_high else { return };
        if ack.cum < high {
            return;
        }
        if !retrans || dsack.is_some_and(|(_, e)| e >= high) {
            self.tlp_high = None;
        } else if ack.cum > high {
            self.tlp_high = None;
            if !self.in_recovery && !self.in_loss {
                self.cc.on_congestion_event(now, self.pipe);
                self.cc.on_recovery_end(now);
            }
        } else if !advanced && !sacked {
            self.tlp_high = None;
        }
    }

    /// The Loss state after an RTO (Linux `tcp_process_loss` with F-RTO, RFC 5682); returns whether
    /// loss marking is skipped on this ACK.
    pub(super) fn process_loss(
        &mut self,
        now: Instant,
        ack: &Ack,
        advanced: bool,
        sacked: bool,
        orig_delivered: bool,
    ) -> bool {
        let recovered = self.snd_una >= self.recovery_point;
        if self.frto && orig_delivered && self.rec.undo {
            // Data never retransmitted was delivered: the timeout was spurious.
            self.stats.frto_undos += 1;
            self.undo(now, true);
            return true;
        }
        if recovered {
            if self.may_undo(ack.ts_ecr) {
                self.undo(now, false);
            } else {
                self.in_loss = false;
                self.frto = false;
                self.frto_new = false;
                self.cc.on_recovery_end(now);
            }
            return false;
        }
        if self.frto {
            self.frto_new = false;
            if self.snd_nxt > self.recovery_point {
                // Step 3a: new data went out and the ACK shows a hole: the loss was real.
                if sacked || !advanced {
                    self.frto = false;
                }
            } else if advanced {
                // Step 2b: send new data next if there is any, else give up on F-RTO (Linux moves
                // `high_seq` to `snd_nxt` here).
                self.recovery_point = self.snd_nxt;
                let end = self.limit.unwrap_or(u64::MAX);
                if self.snd_nxt < end && self.snd_nxt < self.snd_una + self.peer_rwnd {
                    self.frto_new = true;
                } else {
                    self.frto = false;
                }
            }
        }
        false
    }

    /// Segments were newly marked lost: enter recovery if not recovering yet, then PRR.
    pub(super) fn on_new_losses(&mut self, now: Instant, delivered: u64) {
        if !self.in_recovery && !self.in_loss {
            self.in_recovery = true;
            self.recovery_point = self.snd_nxt;
            self.stats.recoveries += 1;
            self.rack.on_recovery();
            self.init_undo();
            self.tlp_high = None;
            self.pto_deadline = None;
            self.prr_delivered = 0;
            self.prr_out = 0;
            self.cc.on_congestion_event(now, self.pipe);
        }
        if self.in_recovery {
            self.prr_update(delivered, false, true);
        }
    }

    /// PRR (RFC 6937 with the slow-start reduction bound, Linux `tcp_cwnd_reduction`): the window
    /// for the rest of this ACK. Linux counts in segments (its windows are in packets), so the
    /// proportional share is rounded up to whole segments, not bytes: rounded in bytes, a share of
    /// 1.4 segments would let out 0.4 of one, that is nothing.
    pub(super) fn prr_update(&mut self, delivered: u64, una_advanced: bool, newly_lost: bool) {
        let mss = u64::from(self.cfg.mss).max(1);
        let segs = |b: u64| b.div_ceil(mss) as i128;
        let ssthresh = self.cc.ssthresh();
        if delivered > 0 {
            self.prr_delivered += delivered;
            let ssthresh_segs = (ssthresh / mss) as i128;
            let sndcnt = if self.pipe > ssthresh {
                let recover_fs = (self.prior_cwnd / mss).max(1) as i128;
                (ssthresh_segs * segs(self.prr_delivered) + recover_fs - 1) / recover_fs - segs(self.prr_out)
            } else {
                let mut s = (segs(self.prr_delivered) - segs(self.prr_out)).max(segs(delivered));
                if una_advanced && !newly_lost {
                    s += 1;
                }
                s.min(ssthresh_segs - segs(self.pipe))
            };
            // Force the fast retransmit on entering recovery.
            let sndcnt = sndcnt.max(i128::from(self.prr_out == 0)).max(0) as u64;
            self.prr_cwnd = self.pipe + sndcnt * mss;
        } else if self.prr_out == 0 {
            self.prr_cwnd = self.pipe + mss;
        }
    }
}
