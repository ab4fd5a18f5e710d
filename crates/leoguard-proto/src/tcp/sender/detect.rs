//! Loss marking: RACK (RFC 8985 with Linux's reordering window) or the older DupThresh model.

use super::TcpSender;
use crate::tcp::rack::sent_after;
use leoguard_core::{Duration, Instant};
use std::cmp::Reverse;

impl TcpSender {
    /// Marks segments lost; true if any was newly marked.
    pub(super) fn detect_losses(&mut self, now: Instant, newest_delivered_sent_at: Instant) -> bool {
        if self.rec.rack {
            self.rack_detect(now)
        } else {
            self.legacy_detect(now, newest_delivered_sent_at)
        }
    }

    pub(super) fn mark_lost(&mut self, now: Instant, i: usize) {
        let s = &mut self.flight[i];
        s.lost = true;
        s.lost_tag = true;
        if self.packet_events {
            self.cc.on_packet_lost(now, s.sent_at, u64::from(s.len));
        }
        if s.rout {
            s.rout = false;
            self.retrans_out -= 1;
        }
        self.pipe -= u64::from(s.len);
        self.lost_total += u64::from(s.len);
        self.lost.push(Reverse(s.seq));
    }

    /// RACK (RFC 8985 §6.2, Linux `tcp_rack_detect_loss`): a segment sent before the most recently
    /// sent delivered one is lost once it has been out for RACK's RTT plus the reordering window;
    /// the reordering timer is armed for the first one not yet due.
    pub(super) fn rack_detect(&mut self, now: Instant) -> bool {
        let Some((xmit, xend)) = self.rack.xmit else { return false };
        let srtt = self.srtt.unwrap_or(Duration::ZERO);
        let min_rtt = if self.min_rtt.0 == u64::MAX { Duration::ZERO } else { self.min_rtt };
        let reo = self.rack.window(self.in_recovery || self.in_loss, self.sacked_segs, min_rtt, srtt);
        let wait = self.rack.rtt + reo;
        let mut newly = false;
        let mut timer: Option<Instant> = None;
        // Originals, in send (= sequence) order, from where the last scan stopped.
        let mut i = self.flight.partition_point(|s| s.seq < self.loss_scan_seq);
        while i < self.flight.len() {
            let s = self.flight[i];
            if s.sacked || s.lost || s.retrans {
                self.loss_scan_seq = s.end();
                i += 1;
                continue;
            }
            if !sent_after(xmit, xend, s.sent_at, s.end()) {
                break;
            }
            let due = s.sent_at + wait;
            if due > now {
                timer = Some(due);
                break;
            }
            self.mark_lost(now, i);
            newly = true;
            self.loss_scan_seq = s.end();
            i += 1;
        }
        // Retransmissions, in send order.
        while let Some(&(seq, at)) = self.retx.front() {
            let Some(i) = self.index_of(seq) else {
                self.retx.pop_front();
                continue;
            };
            let s = self.flight[i];
            if s.sacked || s.lost || s.sent_at != at {
                self.retx.pop_front(); // delivered, already lost, or resent since
                continue;
            }
            if !sent_after(xmit, xend, at, s.end()) {
                break;
            }
            let due = at + wait;
            if due > now {
                timer = Some(timer.map_or(due, |t| t.min(due)));
                break;
            }
            self.retx.pop_front();
            self.mark_lost(now, i);
            newly = true;
        }
        self.reo_deadline = timer;
        newly
    }

    /// The earlier model: DupThresh (3 segments SACKed above) for originals, RACK with a zero window
    /// for retransmissions.
    pub(super) fn legacy_detect(&mut self, now: Instant, newest_delivered_sent_at: Instant) -> bool {
        let thresh = 3 * u64::from(self.cfg.mss);
        let mut newly = false;
        // Each original is classified once, so the scan resumes where the last one stopped.
        let from = self.flight.partition_point(|s| s.seq < self.loss_scan_seq);
        for i in from..self.flight.len() {
            let s = self.flight[i];
            self.loss_scan_seq = s.seq;
            if s.end() + thresh > self.highest_sacked {
                break;
            }
            self.loss_scan_seq = s.seq + 1;
            if !s.sacked && !s.lost && !s.retrans {
                self.mark_lost(now, i);
                newly = true;
            }
        }
        while let Some(&(seq, at)) = self.retx.front() {
            if at >= newest_delivered_sent_at {
                break;
            }
            self.retx.pop_front();
            if let Some(i) = self.index_of(seq) {
                let s = self.flight[i];
                if s.retrans && !s.sacked && !s.lost && s.sent_at == at {
                    self.mark_lost(now, i);
                    newly = true;
                }
            }
        }
        newly
    }
}
