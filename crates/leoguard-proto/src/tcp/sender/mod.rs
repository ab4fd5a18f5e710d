//! The sending side: SACK scoreboard, Tail Loss Probes, the RFC 6298 timer, pacing, delivery-rate
//! samples and what goes out next. Loss marking (RACK or the older DupThresh) is in `detect`; the
//! recovery state machine (recovery and Loss states, F-RTO, PRR, undo) in `recovery`; StarTCP's
//! stalls in `stall`.

mod detect;
mod info;
mod recovery;
mod stall;
mod timers;

use super::rack::{Deferred, Rack};
use super::{Ack, Recovery, Segment, TcpConfig};
use crate::cc::{AckEvent, CongestionControl, RateSample};
use crate::startcp::SendingController;
use leoguard_core::{Bytes, Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u64,
    len: u32,
    sent_at: Instant,
    /// Ever retransmitted (Linux `TCPCB_EVER_RETRANS`).
    retrans: bool,
    /// A retransmission of it is outstanding (Linux `TCPCB_SACKED_RETRANS`, counted in `retrans_out`).
    rout: bool,
    sacked: bool,
    lost: bool,
    /// Marked lost and not delivered since, resent or not (Linux `TCPCB_LOST`, counted in `lost_out`).
    lost_tag: bool,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: bool,
}

impl Sent {
    fn end(&self) -> u64 {
        self.seq + u64::from(self.len)
    }
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments (Tail Loss Probes that resent a segment included).
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Fast-recovery episodes.
    pub recoveries: u64,
    /// Bytes cumulatively acknowledged.
    pub bytes_acked: u64,
    /// Tail Loss Probes sent.
    pub tlps: u64,
    /// ACKs that carried a DSACK block.
    pub dsacks: u64,
    /// Window reductions undone as spurious (DSACK, Eifel or F-RTO).
    pub undos: u64,
    /// Of those, retransmission timeouts found spurious by F-RTO.
    pub frto_undos: u64,
}

/// Probe the sender owes after its Tail Loss Probe timer fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    New,
    Retransmit(u64),
}

/// The sending side of one connection.
#[derive(Debug)]
pub struct TcpSender {
    cfg: TcpConfig,
    rec: Recovery,
    cc: Box<dyn CongestionControl>,
    /// Total bytes the application has to send (`None`: unlimited bulk transfer).
    limit: Option<u64>,
    snd_una: u64,
    snd_nxt: u64,
    flight: VecDeque<Sent>,
    /// Bytes outstanding that are neither SACKed nor marked lost (RFC 6675's pipe).
    pipe: u64,
    lost: BinaryHeap<Reverse<u64>>,
    /// Bytes ever marked lost (Linux `tp->lost`, in bytes): an ACK's share is its `lost_bytes`.
    lost_total: u64,
    /// Retransmissions in send order, for RACK.
    retx: VecDeque<(u64, Instant)>,
    highest_sacked: u64,
    /// Segments SACKed above `snd_una` (Linux `sacked_out`).
    sacked_segs: u64,
    /// Linux `tp->reordering`: the reordering degree measured, segments (3 until measured).
    reordering: u64,
    /// Retransmissions outstanding (Linux `retrans_out`).
    retrans_out: u64,
    /// Recent spans [lo, hi) in which every segment in flight is known SACKed (empty spans unused).
    sacked_spans: [(u64, u64); 4],
    sacked_spans_next: usize,
    /// Originals below this sequence number need no further loss scan (delivered, lost or resent).
    loss_scan_seq: u64,
    rack: Rack,
    /// The controller wants per-segment delivered/lost events (`wants_packet_events`, asked once).
    packet_events: bool,
    reo_deadline: Option<Instant>,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Duration,
    rto: Duration,
    rto_deadline: Option<Instant>,
    pto_deadline: Option<Instant>,
    probe: Option<Probe>,
    /// `snd_nxt` when the outstanding Tail Loss Probe went out, and whether it was a retransmission.
    tlp_high: Option<(u64, bool)>,
    in_recovery: bool,
    /// After an RTO until everything outstanding then is acknowledged (Linux's Loss state).
    in_loss: bool,
    recovery_point: u64,
    /// Undo bookkeeping (Linux `undo_marker`, `undo_retrans`, `retrans_stamp`, `prior_cwnd`,
    /// `prior_ssthresh`).
    undo_marker: Option<u64>,
    undo_retrans: i64,
    retrans_stamp: Option<Instant>,
    prior_cwnd: u64,
    prior_ssthresh: u64,
    /// F-RTO is judging the last timeout; `frto_new`: send new data rather than retransmit (step 2b).
    frto: bool,
    frto_new: bool,
    /// The timeout's resend of the head is owed, whatever the window (Linux `tcp_retransmit_timer`
    /// sends it directly; segments the timeout left outstanding may fill the window of one).
    rto_head: bool,
    /// PRR (RFC 6937): bytes delivered and sent since recovery started, and the window it allows.
    prr_delivered: u64,
    prr_out: u64,
    prr_cwnd: u64,
    /// Linux `tcp_cwnd_validate`: whether the window limited sending in the current window of data.
    is_cwnd_limited: bool,
    max_in_flight: u64,
    cwnd_usage_seq: u64,
    pacing_next: Instant,
    /// The last `poll_transmit` that sent nothing was held back by pacing alone (so the pacing time
    /// is a wake-up the caller needs; when the window or the receiver holds sending back, it is not).
    paced: bool,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    peer_rwnd: u64,
    /// StarTCP's Sending Controller, when on.
    star: Option<Box<SendingController>>,
    /// Counters.
    pub stats: SenderStats,
}

impl TcpSender {
    /// A sender with controller `cc` that has `limit` bytes to send (`None`: bulk).
    pub fn new(cfg: TcpConfig, mut cc: Box<dyn CongestionControl>, limit: Option<u64>) -> Self {
        cc.set_hystart(cfg.recovery.hystart);
        let packet_events = cc.wants_packet_events();
        TcpSender {
            cfg,
            rec: cfg.recovery,
            cc,
            limit,
            snd_una: 0,
            snd_nxt: 0,
            flight: VecDeque::new(),
            pipe: 0,
            lost: BinaryHeap::new(),
            lost_total: 0,
            retx: VecDeque::new(),
            highest_sacked: 0,
            sacked_segs: 0,
            reordering: 3,
            retrans_out: 0,
            sacked_spans: [(0, 0); 4],
            sacked_spans_next: 0,
            loss_scan_seq: 0,
            rack: Rack::new(),
            reo_deadline: None,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: Duration(u64::MAX),
            rto: cfg.initial_rto,
            rto_deadline: None,
            pto_deadline: None,
            probe: None,
            tlp_high: None,
            in_recovery: false,
            in_loss: false,
            recovery_point: 0,
            undo_marker: None,
            undo_retrans: -1,
            retrans_stamp: None,
            prior_cwnd: 0,
            prior_ssthresh: 0,
            frto: false,
            frto_new: false,
            rto_head: false,
            prr_delivered: 0,
            prr_out: 0,
            prr_cwnd: 0,
            is_cwnd_limited: false,
            max_in_flight: 0,
            cwnd_usage_seq: 0,
            pacing_next: Instant::ZERO,
            paced: false,
            packet_events,
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent_time: Instant::ZERO,
            peer_rwnd: cfg.rwnd,
            star: None,
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

    /// RACK's reordering-window steps (1 until DSACKs widen it).
    pub fn reordering_steps(&self) -> u32 {
        self.rack.steps()
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
        let star = self.star.take();
        *self = TcpSender::new(self.cfg, cc, limit);
        self.star = star;
        self.snd_una = at;
        self.snd_nxt = at;
        self.highest_sacked = at;
        self.loss_scan_seq = at;
        self.cwnd_usage_seq = at;
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

    /// The window sending is held to now: PRR's during recovery (for controllers that leave it to
    /// the sender), else the controller's.
    fn window(&self) -> u64 {
        if self.in_recovery && self.rec.prr && !self.cc.owns_recovery_window() {
            self.prr_cwnd
        } else {
            self.cc.cwnd()
        }
    }

    /// The next segment to send now, if the window, the receiver and pacing allow one. While
    /// StarTCP stalls, only its probes (zero-length, `probe` set) come out, on their schedule.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        if self.star.is_some() && self.star_update(now) {
            return self.star_probe(now);
        }
        if self.cc.pacing_rate().is_some() && now < self.pacing_next {
            self.paced = true;
            return None;
        }
        self.paced = false;
        if let Some(p) = self.probe.take() {
            if let Some(seg) = self.send_probe(now, p) {
                return Some(seg);
            }
        }
        let cwnd = self.window();
        let mss = u64::from(self.cfg.mss);
        // F-RTO step 2b: after the first ACK following a timeout, new data tests whether it was spurious.
        if !self.frto_new {
            if let Some(i) = self.next_lost() {
                let len = u64::from(self.flight[i].len);
                if !std::mem::take(&mut self.rto_head) && self.pipe + len > cwnd.max(mss) {
                    self.cwnd_validate(true);
                    return None;
                }
                self.lost.pop();
                return Some(self.retransmit(now, i, true));
            }
        }
        let end = self.limit.unwrap_or(u64::MAX);
        if self.snd_nxt >= end {
            self.cwnd_validate(false);
            return None;
        }
        let len = mss.min(end - self.snd_nxt);
        if self.pipe + len > cwnd {
            self.cwnd_validate(true);
            return None;
        }
        if self.snd_nxt + len > self.snd_una + self.peer_rwnd {
            self.cwnd_validate(false);
            return None;
        }
        Some(self.send_new(now, len))
    }

    /// Resends `flight[i]`; `was_lost`: it was marked lost (a probe resends one that was not).
    fn retransmit(&mut self, now: Instant, i: usize, was_lost: bool) -> Segment {
        let (delivered, delivered_time, first_sent_time) = (self.delivered, self.delivered_time, self.first_sent_time);
        let s = &mut self.flight[i];
        s.lost = false;
        s.retrans = true;
        let counted = s.rout;
        s.rout = true;
        s.sent_at = now;
        // Linux `tcp_rate_skb_sent` runs on every transmission: a resent segment's delivery-rate
        // sample starts from the resend. Kept from the first sending, an ACK of a resend reported a
        // `prior_delivered` from before the loss, so BBR never saw a round end while recovery lasted
        // (its PROBE_RTT and packet conservation could not finish).
        s.delivered = delivered;
        s.delivered_time = delivered_time;
        s.first_sent_time = first_sent_time;
        let seg = Segment { seq: s.seq, len: s.len, retransmission: true, ts: now, probe: false };
        let len = u64::from(s.len);
        if !counted {
            self.retrans_out += 1;
        }
        self.retx.push_back((seg.seq, now));
        self.stats.retransmissions += 1;
        // Linux `__tcp_retransmit_skb`: the episode's first retransmission time and its count.
        self.retrans_stamp.get_or_insert(now);
        self.undo_retrans = self.undo_retrans.max(0) + 1;
        if was_lost {
            self.on_emit(now, len, len);
        } else {
            self.on_emit(now, len, 0); // already counted in the pipe
        }
        seg
    }

    fn send_new(&mut self, now: Instant, len: u64) -> Segment {
        if self.flight.is_empty() {
            // Delivery-rate estimation restarts its send interval when the pipe was empty.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let seg = Segment { seq: self.snd_nxt, len: len as u32, retransmission: false, ts: now, probe: false };
        self.flight.push_back(Sent {
            seq: seg.seq,
            len: seg.len,
            sent_at: now,
            retrans: false,
            rout: false,
            sacked: false,
            lost: false,
            lost_tag: false,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: false,
        });
        self.snd_nxt += len;
        self.on_emit(now, len, len);
        // Linux `tcp_write_xmit` re-arms the probe after every transmission of new data, so a burst's
        // probe timeout counts from its last segment, with the burst's `packets_out`.
        self.schedule_probe(now);
        seg
    }

    /// Sends what the Tail Loss Probe timer asked for (beyond the window: it is one segment).
    fn send_probe(&mut self, now: Instant, p: Probe) -> Option<Segment> {
        let end = self.limit.unwrap_or(u64::MAX);
        let seg = match p {
            Probe::New if self.snd_nxt < end && self.snd_nxt < self.snd_una + self.peer_rwnd => {
                let len = u64::from(self.cfg.mss).min(end - self.snd_nxt);
                self.send_new(now, len)
            }
            Probe::Retransmit(seq) => {
                let i = self.index_of(seq)?;
                if self.flight[i].sacked {
                    return None;
                }
                let was_lost = self.flight[i].lost;
                self.retransmit(now, i, was_lost)
            }
            Probe::New => return None,
        };
        self.stats.tlps += 1;
        self.tlp_high = Some((self.snd_nxt, seg.retransmission));
        self.pto_deadline = None;
        self.rto_deadline = Some(now + self.rto);
        Some(seg)
    }

    fn on_emit(&mut self, now: Instant, len: u64, pipe_add: u64) {
        self.pipe += pipe_add;
        self.stats.segments_sent += 1;
        if self.in_recovery {
            self.prr_out += len;
        }
        self.cc.on_sent(now, len, self.pipe);
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        if let Some(rate) = self.cc.pacing_rate() {
            let wire = Bytes(len + u64::from(self.cfg.header_bytes));
            self.pacing_next = now + rate.transmission_time(wire).unwrap_or(Duration::ZERO);
        }
    }

    /// Linux `tcp_cwnd_validate`: remember whether the window limited sending over the current
    /// window of data, and the most that was in flight.
    fn cwnd_validate(&mut self, limited: bool) {
        if self.snd_una >= self.cwnd_usage_seq || limited || (!self.is_cwnd_limited && self.pipe > self.max_in_flight) {
            self.is_cwnd_limited = limited;
            self.max_in_flight = self.pipe;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// Linux `tcp_is_cwnd_limited`.
    fn cwnd_limited(&self) -> bool {
        if !self.rec.cwnd_limited || self.is_cwnd_limited {
            return true;
        }
        // In slow start, grow to twice what was in flight.
        self.cc.cwnd() < self.cc.ssthresh() && self.cc.cwnd() < 2 * self.max_in_flight
    }

    /// Processes an ACK from the receiver.
    pub fn on_ack(&mut self, now: Instant, ack: &Ack) {
        self.peer_rwnd = ack.rwnd;
        let prior_in_flight = self.pipe;
        let prior_lost = self.lost_total;
        let prior_highest_sacked = self.highest_sacked;
        let mut bytes_acked = 0u64;
        let mut newly_sacked = false;
        let mut orig_delivered = false;
        let mut rtt: Option<Duration> = None;
        let mut newest: Option<Sent> = None;
        // Lowest original delivered below the highest SACKed sequence (Linux `reord`).
        let mut reord: Option<u64> = None;
        let consider = |s: &Sent, newest: &mut Option<Sent>| {
            if newest.is_none_or(|n| s.sent_at >= n.sent_at) {
                *newest = Some(*s);
            }
        };
        let dsack = if self.rec.dsack || self.rec.undo || self.rec.rack { ack.dsack() } else { None };
        if let Some((ds, de)) = dsack {
            self.on_dsack(ds, de);
        }
        let advanced = ack.cum > self.snd_una;
        // RACK hears of the cumulatively acknowledged segments after the SACKed ones, as in Linux.
        let mut cum_rack = Deferred::default();
        while let Some(front) = self.flight.front() {
            if front.end() > ack.cum {
                break;
            }
            let s = self.flight.pop_front().unwrap_or_else(|| unreachable!("front exists"));
            if s.rout {
                self.retrans_out -= 1;
            }
            if s.sacked {
                self.sacked_segs -= 1;
                continue;
            }
            bytes_acked += u64::from(s.len);
            credit_delivered(self.cc.as_mut(), self.packet_events, &mut self.pipe, now, &s);
            if !s.retrans {
                rtt = Some(now.saturating_duration_since(s.sent_at));
                // F-RTO's evidence: data sent before the timeout, never resent, was delivered.
                orig_delivered |= s.end() <= self.recovery_point;
                // Delivered below data SACKed before it: the path reorders (Linux
                // `tcp_clean_rtx_queue` -> `tcp_check_sack_reordering`).
                if s.seq < prior_highest_sacked {
                    self.rack.reord_seen = true;
                    reord = Some(reord.map_or(s.seq, |r: u64| r.min(s.seq)));
                }
            }
            cum_rack.note(now, s.sent_at, s.end(), s.retrans, self.min_rtt);
            consider(&s, &mut newest);
        }
        if advanced {
            self.rto_head = false;
            self.stats.bytes_acked += ack.cum - self.snd_una;
            self.snd_una = ack.cum;
            // After a restart the receiver may hold out-of-order data from the old connection: one
            // retransmission that fills the hole acknowledges beyond what this connection sent.
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
        }
        // Linux processes SACK blocks in ascending order.
        let mut blocks = [(0u64, 0u64); 3];
        let n = ack.sack_blocks().len();
        blocks[..n].copy_from_slice(ack.sack_blocks());
        blocks[..n].sort_unstable();
        for &(start, end) in &blocks[..n] {
            // A block inside a span already known SACKed changes nothing (most ACKs repeat older blocks).
            if self.sacked_spans.iter().any(|&(a, b)| a <= start && end <= b) {
                continue;
            }
            let first = self.flight.partition_point(|s| s.seq < start);
            let mut i = first;
            while i < self.flight.len() {
                let s = &mut self.flight[i];
                let s_end = s.end();
                if s_end > end {
                    break;
                }
                if s.sacked {
                    // Skip the rest of a known SACKed span in one search instead of walking it.
                    let seq = s.seq;
                    i = match self.sacked_spans.iter().find(|&&(a, b)| a <= seq && s_end <= b) {
                        Some(&(_, b)) => self.flight.partition_point(|t| t.end() <= b),
                        None => i + 1,
                    };
                    continue;
                }
                s.sacked = true;
                s.lost_tag = false;
                self.sacked_segs += 1;
                newly_sacked = true;
                bytes_acked += u64::from(s.len);
                credit_delivered(self.cc.as_mut(), self.packet_events, &mut self.pipe, now, s);
                s.lost = false;
                if s.rout {
                    s.rout = false;
                    self.retrans_out -= 1;
                }
                if !s.retrans {
                    rtt = Some(now.saturating_duration_since(s.sent_at));
                    orig_delivered |= s_end <= self.recovery_point;
                    if s.seq < self.highest_sacked {
                        self.rack.reord_seen = true;
                        reord = Some(reord.map_or(s.seq, |r: u64| r.min(s.seq)));
                    }
                }
                let copy = *s;
                self.rack.advance(now, copy.sent_at, s_end, copy.retrans, self.min_rtt);
                consider(&copy, &mut newest);
                self.highest_sacked = self.highest_sacked.max(s_end);
                i += 1;
            }
            if i > first {
                let last = &self.flight[i - 1];
                self.note_sacked_span(self.flight[first].seq, last.end());
            }
        }
        self.rack.apply(cum_rack);
        if let Some(low) = reord {
            self.check_sack_reordering(low);
        }
        if let Some(r) = rtt {
            self.rtt_sample(r);
            if let Some(star) = &mut self.star {
                star.on_rtt_sample(now, r);
            }
        }
        // Delivery-rate sample from the most recently sent packet this ACK delivered.
        let mut rate = None;
        let mut newly_lost = false;
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
            if self.star.is_some() {
                rate = self.star_filter_rate(now, &p, rate);
            }
            if self.rec.rack {
                self.rack.update_window(p.delivered, self.delivered);
            }
        }
        self.process_tlp_ack(now, ack, dsack, advanced, newly_sacked);
        // The recovery state machine (Linux `tcp_fastretrans_alert`).
        let mut skip_detection = false;
        if self.in_loss {
            skip_detection = self.process_loss(now, ack, advanced, newly_sacked, orig_delivered);
        } else if self.in_recovery {
            if self.snd_una >= self.recovery_point {
                if self.may_undo(ack.ts_ecr) {
                    self.undo(now, false);
                } else {
                    self.in_recovery = false;
                    self.cc.on_recovery_end(now);
                }
            } else if advanced && self.rec.undo && self.undo_marker.is_some() && self.packet_delayed(ack.ts_ecr) {
                // Linux `tcp_try_undo_partial`: the hole was filled by the delayed original. With
                // retransmissions still out, keep clocking out data but mark and resend nothing more.
                self.rack.reord_seen = true;
                if self.retrans_out > 0 {
                    skip_detection = true;
                } else {
                    self.undo(now, true);
                }
            }
            if self.in_recovery && self.try_undo_dsack(now) {
                // back in the Open state
            }
        } else {
            self.try_undo_dsack(now);
        }
        if !skip_detection && newest.is_some() {
            newly_lost = self.detect_losses(now, newest.map_or(Instant::ZERO, |p| p.sent_at));
        }
        if newly_lost {
            self.on_new_losses(now, bytes_acked);
        } else if self.in_recovery {
            self.prr_update(bytes_acked, advanced, false);
        }
        if bytes_acked > 0 {
            let ev = AckEvent {
                bytes_acked,
                prior_in_flight,
                in_flight: self.pipe,
                lost_bytes: self.lost_total - prior_lost,
                rtt,
                srtt: self.srtt.unwrap_or(Duration::ZERO),
                min_rtt: if self.min_rtt.0 == u64::MAX { Duration::ZERO } else { self.min_rtt },
                rate,
                in_recovery: self.in_recovery,
                // Linux `tcp_may_raise_cwnd`: the window grows only on an ACK that acknowledges new
                // data cumulatively (FLAG_DATA_ACKED), or, once reordering above tcp_reordering (3)
                // was measured, on any forward progress; a SACK-only ACK never grows it.
                cwnd_limited: self.cwnd_limited() && (advanced || self.reordering > 3),
            };
            self.cc.on_ack(now, &ev);
        }
        if advanced {
            // RFC 6298 (5.3): restart the timer when new data is acknowledged.
            self.rto_deadline = (!self.flight.is_empty()).then_some(now + self.rto);
        }
        if advanced || bytes_acked > 0 {
            self.schedule_probe(now);
        }
        if self.flight.is_empty() {
            self.pto_deadline = None;
            self.reo_deadline = None;
        }
        if self.star.is_some() {
            self.star_on_ack(now, ack, bytes_acked, rate);
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
}

/// A segment delivered (cumulatively or by SACK): out of the pipe unless it was already counted out
/// as lost, and reported to a controller that asked for per-segment events (PCC), with its RTT sample
/// (none for a retransmission: Karn). Window-based controllers are not called per segment.
fn credit_delivered(cc: &mut dyn CongestionControl, events: bool, pipe: &mut u64, now: Instant, s: &Sent) {
    if s.lost {
        return;
    }
    *pipe -= u64::from(s.len);
    if events {
        let sample = (!s.retrans).then(|| now.saturating_duration_since(s.sent_at));
        cc.on_packet_delivered(now, s.sent_at, u64::from(s.len), sample);
    }
}
