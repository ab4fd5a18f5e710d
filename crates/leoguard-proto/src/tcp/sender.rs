//! The sending side: SACK scoreboard, loss detection (DupThresh for originals, RACK for
//! retransmissions), RFC 6298 RTO, pacing, delivery-rate samples.

use super::{Ack, Segment, TcpConfig};
use crate::cc::{AckEvent, CongestionControl, RateSample};
use leoguard_core::{Bytes, Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u64,
    len: u32,
    sent_at: Instant,
    retrans: bool,
    sacked: bool,
    lost: bool,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: bool,
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Fast-recovery episodes.
    pub recoveries: u64,
    /// Bytes cumulatively acknowledged.
    pub bytes_acked: u64,
}

/// The sending side of one connection.
#[derive(Debug)]
pub struct TcpSender {
    cfg: TcpConfig,
    cc: Box<dyn CongestionControl>,
    /// Total bytes the application has to send (`None`: unlimited bulk transfer).
    limit: Option<u64>,
    snd_una: u64,
    snd_nxt: u64,
    flight: VecDeque<Sent>,
    /// Bytes outstanding that are neither SACKed nor marked lost (RFC 6675's pipe).
    pipe: u64,
    lost: BinaryHeap<Reverse<u64>>,
    /// Retransmissions in send order, for RACK.
    retx: VecDeque<(u64, Instant)>,
    highest_sacked: u64,
    /// Recent spans [lo, hi) in which every segment in flight is known SACKed (empty spans unused).
    sacked_spans: [(u64, u64); 4],
    sacked_spans_next: usize,
    /// Originals below this sequence number have been classified by the DupThresh scan.
    loss_scan_seq: u64,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Duration,
    rto: Duration,
    rto_deadline: Option<Instant>,
    in_recovery: bool,
    /// After an RTO until everything outstanding then is acknowledged (Linux's Loss state).
    in_loss: bool,
    recovery_point: u64,
    pacing_next: Instant,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    peer_rwnd: u64,
    /// Counters.
    pub stats: SenderStats,
}

impl TcpSender {
    /// A sender with controller `cc` that has `limit` bytes to send (`None`: bulk).
    pub fn new(cfg: TcpConfig, cc: Box<dyn CongestionControl>, limit: Option<u64>) -> Self {
        TcpSender {
            cfg,
            cc,
            limit,
            snd_una: 0,
            snd_nxt: 0,
            flight: VecDeque::new(),
            pipe: 0,
            lost: BinaryHeap::new(),
            retx: VecDeque::new(),
            highest_sacked: 0,
            sacked_spans: [(0, 0); 4],
            sacked_spans_next: 0,
            loss_scan_seq: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: Duration(u64::MAX),
            rto: cfg.initial_rto,
            rto_deadline: None,
            in_recovery: false,
            in_loss: false,
            recovery_point: 0,
            pacing_next: Instant::ZERO,
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent_time: Instant::ZERO,
            peer_rwnd: cfg.rwnd,
            stats: SenderStats::default(),
        }
    }

    /// The link layer predicts a handover (passed to the controller: SaTCP acts on it).
    pub fn cc_report_handover(&mut self, now: Instant) {
        self.cc.on_handover_report(now);
    }

    /// The congestion controller.
    pub fn cc(&self) -> &dyn CongestionControl {
        self.cc.as_ref()
    }

    /// Smoothed RTT, if sampled.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// Bytes in flight (RFC 6675 pipe).
    pub fn in_flight(&self) -> u64 {
        self.pipe
    }

    /// Whether every byte the application had has been acknowledged.
    pub fn is_done(&self) -> bool {
        self.limit.is_some_and(|l| self.snd_una >= l)
    }

    /// First unacknowledged byte.
    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }

    /// Next new byte to send.
    pub fn snd_nxt(&self) -> u64 {
        self.snd_nxt
    }

    /// Bytes the application has handed over so far (`None`: unlimited bulk transfer).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The application writes `bytes` more to a persistent connection (an HTTP request or response
    /// on a kept-alive connection, a proxy relaying what it received). The connection is idle until
    /// then ([`TcpSender::is_done`] is true while everything written is acknowledged); sending resumes
    /// with the controller's state as the idle period left it. A no-op on a bulk (unlimited) sender.
    pub fn write(&mut self, bytes: u64) {
        if let Some(l) = &mut self.limit {
            *l += bytes;
        }
    }

    /// Rebuilds the connection from byte `at` on with controller `cc`, as a new connection that
    /// continues the same byte stream (a split-TCP proxy re-established after its state migrated,
    /// M-PEP): nothing is in flight, the scoreboard and the RTT estimator start afresh (RFC 6298's
    /// initial RTO), the controller starts in slow start; bytes written so far and the counters are
    /// kept. `at` is what the peer's receiver holds in order (synchronised by the reconnection).
    pub fn restart(&mut self, cc: Box<dyn CongestionControl>, at: u64) {
        let (stats, una) = (self.stats, self.snd_una);
        let limit = self.limit.map(|l| l.max(at));
        *self = TcpSender::new(self.cfg, cc, limit);
        self.snd_una = at;
        self.snd_nxt = at;
        self.highest_sacked = at;
        self.loss_scan_seq = at;
        self.stats = stats;
        self.stats.bytes_acked += at.saturating_sub(una);
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        self.flight.binary_search_by_key(&seq, |s| s.seq).ok()
    }

    fn next_lost(&mut self) -> Option<usize> {
        while let Some(&Reverse(seq)) = self.lost.peek() {
            match self.index_of(seq) {
                Some(i) if self.flight[i].lost && !self.flight[i].sacked => return Some(i),
                _ => {
                    self.lost.pop(); // acknowledged or SACKed since it was marked
                }
            }
        }
        None
    }

    /// The next segment to send now, if the window, the receiver and pacing allow one.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        if self.cc.pacing_rate().is_some() && now < self.pacing_next {
            return None;
        }
        let cwnd = self.cc.cwnd();
        let mss = u64::from(self.cfg.mss);
        if let Some(i) = self.next_lost() {
            let len = u64::from(self.flight[i].len);
            if self.pipe + len > cwnd.max(mss) {
                return None;
            }
            self.lost.pop();
            let s = &mut self.flight[i];
            s.lost = false;
            s.retrans = true;
            s.sent_at = now;
            let seg = Segment { seq: s.seq, len: s.len, retransmission: true };
            self.retx.push_back((seg.seq, now));
            self.stats.retransmissions += 1;
            self.on_emit(now, len);
            return Some(seg);
        }
        let end = self.limit.unwrap_or(u64::MAX);
        if self.snd_nxt >= end {
            return None;
        }
        let len = mss.min(end - self.snd_nxt);
        if self.pipe + len > cwnd || self.snd_nxt + len > self.snd_una + self.peer_rwnd {
            return None;
        }
        if self.flight.is_empty() {
            // Delivery-rate estimation restarts its send interval when the pipe was empty.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let seg = Segment { seq: self.snd_nxt, len: len as u32, retransmission: false };
        self.flight.push_back(Sent {
            seq: seg.seq,
            len: seg.len,
            sent_at: now,
            retrans: false,
            sacked: false,
            lost: false,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: false,
        });
        self.snd_nxt += len;
        self.on_emit(now, len);
        Some(seg)
    }

    fn on_emit(&mut self, now: Instant, len: u64) {
        self.pipe += len;
        self.stats.segments_sent += 1;
        self.cc.on_sent(now, len, self.pipe);
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        if let Some(rate) = self.cc.pacing_rate() {
            let wire = Bytes(len + u64::from(self.cfg.header_bytes));
            self.pacing_next = now + rate.transmission_time(wire).unwrap_or(Duration::ZERO);
        }
    }

    /// When the sender next needs `handle_timeout` (RTO) or can send again (pacing).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Pacing only matters while there is something to send.
        let has_data = !self.lost.is_empty() || self.snd_nxt < self.limit.unwrap_or(u64::MAX);
        let pace = (self.cc.pacing_rate().is_some() && has_data).then_some(self.pacing_next);
        match (self.rto_deadline, pace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Handles the retransmission timer: RFC 6298 backoff, everything outstanding marked lost.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(deadline) = self.rto_deadline else {
            return;
        };
        if now < deadline {
            return;
        }
        if self.flight.is_empty() {
            self.rto_deadline = None;
            return;
        }
        self.stats.rtos += 1;
        let prior = self.pipe;
        self.lost.clear();
        self.retx.clear();
        for s in &mut self.flight {
            if !s.sacked {
                s.lost = true;
                self.lost.push(Reverse(s.seq));
            }
        }
        self.pipe = 0;
        self.in_recovery = false;
        self.in_loss = true;
        self.recovery_point = self.snd_nxt;
        self.cc.on_rto(now, prior);
        self.rto = Duration((self.rto.as_nanos() * 2).min(self.cfg.max_rto.as_nanos()));
        self.rto_deadline = Some(now + self.rto);
    }

    /// Processes an ACK from the receiver.
    pub fn on_ack(&mut self, now: Instant, ack: &Ack) {
        self.peer_rwnd = ack.rwnd;
        let prior_in_flight = self.pipe;
        let mut bytes_acked = 0u64;
        let mut rtt: Option<Duration> = None;
        let mut newest: Option<Sent> = None;
        let consider = |s: &Sent, newest: &mut Option<Sent>| {
            if newest.is_none_or(|n| s.sent_at >= n.sent_at) {
                *newest = Some(*s);
            }
        };
        let advanced = ack.cum > self.snd_una;
        while let Some(front) = self.flight.front() {
            if front.seq + u64::from(front.len) > ack.cum {
                break;
            }
            let s = self.flight.pop_front().unwrap_or_else(|| unreachable!("front exists"));
            if !s.sacked {
                bytes_acked += u64::from(s.len);
                if !s.lost {
                    self.pipe -= u64::from(s.len);
                }
                if !s.retrans {
                    rtt = Some(now.saturating_duration_since(s.sent_at));
                }
                consider(&s, &mut newest);
            }
        }
        if advanced {
            self.stats.bytes_acked += ack.cum - self.snd_una;
            self.snd_una = ack.cum;
            // After a restart the receiver may hold out-of-order data from the old connection: one
            // retransmission that fills the hole acknowledges beyond what this connection sent.
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
        }
        for &(start, end) in &ack.sack[..usize::from(ack.n_sack.min(3))] {
            // A block inside a span already known SACKed changes nothing (most ACKs repeat older blocks).
            if self.sacked_spans.iter().any(|&(a, b)| a <= start && end <= b) {
                continue;
            }
            let first = self.flight.partition_point(|s| s.seq < start);
            let mut i = first;
            while i < self.flight.len() {
                let s = &mut self.flight[i];
                let s_end = s.seq + u64::from(s.len);
                if s_end > end {
                    break;
                }
                if s.sacked {
                    // Skip the rest of a known SACKed span in one search instead of walking it.
                    let seq = s.seq;
                    i = match self.sacked_spans.iter().find(|&&(a, b)| a <= seq && s_end <= b) {
                        Some(&(_, b)) => self.flight.partition_point(|t| t.seq + u64::from(t.len) <= b),
                        None => i + 1,
                    };
                    continue;
                }
                s.sacked = true;
                bytes_acked += u64::from(s.len);
                if !s.lost {
                    self.pipe -= u64::from(s.len);
                }
                s.lost = false;
                if !s.retrans {
                    rtt = Some(now.saturating_duration_since(s.sent_at));
                }
                let copy = *s;
                consider(&copy, &mut newest);
                self.highest_sacked = self.highest_sacked.max(end);
                i += 1;
            }
            if i > first {
                let last = &self.flight[i - 1];
                self.note_sacked_span(self.flight[first].seq, last.seq + u64::from(last.len));
            }
        }
        if let Some(r) = rtt {
            self.rtt_sample(r);
        }
        // Delivery-rate sample from the most recently sent packet this ACK delivered.
        let mut rate = None;
        if let Some(p) = newest {
            self.delivered += bytes_acked;
            let send_elapsed = p.sent_at.saturating_duration_since(p.first_sent_time);
            let ack_elapsed = now.saturating_duration_since(p.delivered_time);
            self.first_sent_time = p.sent_at;
            self.delivered_time = now;
            rate = Some(RateSample {
                delivered: self.delivered - p.delivered,
                interval: send_elapsed.max(ack_elapsed),
                prior_delivered: p.delivered,
                total_delivered: self.delivered,
                is_app_limited: p.app_limited,
            });
            self.detect_losses(now, p.sent_at);
        }
        // Leaving fast recovery or the post-RTO Loss state: the controller may restore its window
        // (BBR does, as Linux's bbr_set_cwnd_to_recover_or_restore).
        if (self.in_recovery || self.in_loss) && self.snd_una >= self.recovery_point {
            self.in_recovery = false;
            self.in_loss = false;
            self.cc.on_recovery_end(now);
        }
        if bytes_acked > 0 {
            let ev = AckEvent {
                bytes_acked,
                prior_in_flight,
                in_flight: self.pipe,
                rtt,
                srtt: self.srtt.unwrap_or(Duration::ZERO),
                min_rtt: if self.min_rtt.0 == u64::MAX { Duration::ZERO } else { self.min_rtt },
                rate,
                in_recovery: self.in_recovery,
            };
            self.cc.on_ack(now, &ev);
        }
        if advanced {
            // RFC 6298 (5.3): restart the timer when new data is acknowledged.
            self.rto_deadline = (!self.flight.is_empty()).then_some(now + self.rto);
        }
    }

    /// Records that every segment in flight within [lo, hi) is SACKed. That stays true (SACKed marks
    /// are never cleared and new segments start above `snd_nxt`), so a span may be kept until replaced:
    /// one it contains, else the oldest.
    fn note_sacked_span(&mut self, lo: u64, hi: u64) {
        let slot = match self.sacked_spans.iter().position(|&(a, b)| lo <= a && b <= hi) {
            Some(k) => k,
            None => {
                self.sacked_spans_next = (self.sacked_spans_next + 1) % self.sacked_spans.len();
                self.sacked_spans_next
            }
        };
        self.sacked_spans[slot] = (lo, hi);
    }

    fn rtt_sample(&mut self, r: Duration) {
        self.min_rtt = self.min_rtt.min(r);
        // RFC 6298 (2.2)/(2.3) with alpha = 1/8, beta = 1/4, as Linux computes it (`tcp_rtt_estimator`,
        // `tcp_set_rto`): the 200 ms minimum bounds the variance term, not the sum, so the RTO is at
        // least srtt + 200 ms. (Bounding the sum fires spurious timeouts on long stable paths whose
        // RTT is near 200 ms, a whole window marked lost and resent at once.)
        let (srtt, rttvar) = match self.srtt {
            None => (r, Duration(r.0 / 2)),
            Some(s) => {
                let err = s.0.abs_diff(r.0);
                (Duration(s.0 - s.0 / 8 + r.0 / 8), Duration(self.rttvar.0 - self.rttvar.0 / 4 + err / 4))
            }
        };
        self.srtt = Some(srtt);
        self.rttvar = rttvar;
        let rto = srtt.0 + (4 * rttvar.0).max(self.cfg.min_rto.0);
        self.rto = Duration(rto.min(self.cfg.max_rto.0));
    }

    fn detect_losses(&mut self, now: Instant, newest_delivered_sent_at: Instant) {
        let thresh = 3 * u64::from(self.cfg.mss);
        let mut newly = false;
        // Originals: DupThresh by SACKed bytes above them. Each original is classified once, so the
        // scan resumes where the last one stopped (a cursor, not a walk from the front every ACK).
        let from = self.flight.partition_point(|s| s.seq < self.loss_scan_seq);
        for s in self.flight.range_mut(from..) {
            self.loss_scan_seq = s.seq;
            if s.seq + u64::from(s.len) + thresh > self.highest_sacked {
                break;
            }
            self.loss_scan_seq = s.seq + 1;
            if !s.sacked && !s.lost && !s.retrans {
                s.lost = true;
                self.pipe -= u64::from(s.len);
                self.lost.push(Reverse(s.seq));
                newly = true;
            }
        }
        // Retransmissions: RACK, lost once something sent after them was delivered.
        while let Some(&(seq, at)) = self.retx.front() {
            if at >= newest_delivered_sent_at {
                break;
            }
            self.retx.pop_front();
            if let Some(i) = self.index_of(seq) {
                let s = &mut self.flight[i];
                if s.retrans && !s.sacked && !s.lost && s.sent_at == at {
                    s.lost = true;
                    self.pipe -= u64::from(s.len);
                    self.lost.push(Reverse(seq));
                    newly = true;
                }
            }
        }
        if newly && !self.in_recovery && !self.in_loss {
            self.in_recovery = true;
            self.recovery_point = self.snd_nxt;
            self.stats.recoveries += 1;
            self.cc.on_congestion_event(now, self.pipe);
        }
    }
}
