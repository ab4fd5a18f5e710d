//! TCP as Linux behaves, sans-IO: a bulk or fixed-size sender with SACK-based loss recovery, RFC 6298
//! retransmission timeouts (Linux's 200 ms minimum), pacing when the controller asks for it, and
//! delivery-rate samples for BBR; and a receiver with delayed ACKs, SACK blocks and in-order,
//! exactly-once delivery. Sequence numbers are 64-bit byte offsets (no wrap inside a simulation).
//!
//! Loss detection: an original transmission is lost once 3 segments' worth of data above it is
//! SACKed (RFC 6675's DupThresh); a retransmission is lost once data sent after it is delivered
//! (RACK, RFC 8985, with a zero reordering window). An RTO marks everything outstanding lost, as Linux does.

use crate::cc::{AckEvent, CongestionControl, RateSample};
use leoguard_core::{Bytes, Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Endpoint parameters (Linux defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per segment.
    pub mss: u32,
    /// IP + TCP header bytes per segment on the wire (40 + 12 for timestamps).
    pub header_bytes: u32,
    /// Initial window, segments (Linux: 10).
    pub init_cwnd_segments: u64,
    /// Lower bound of the RTO (Linux: 200 ms).
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
        }
        for &(start, end) in &ack.sack[..usize::from(ack.n_sack.min(3))] {
            let first = self.flight.partition_point(|s| s.seq < start);
            for i in first..self.flight.len() {
                let s = &mut self.flight[i];
                if s.seq + u64::from(s.len) > end {
                    break;
                }
                if !s.sacked {
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
                }
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

    fn rtt_sample(&mut self, r: Duration) {
        self.min_rtt = self.min_rtt.min(r);
        // RFC 6298 (2.2)/(2.3) with alpha = 1/8, beta = 1/4, G = 1 ms, then Linux's 200 ms floor.
        let (srtt, rttvar) = match self.srtt {
            None => (r, Duration(r.0 / 2)),
            Some(s) => {
                let err = s.0.abs_diff(r.0);
                (Duration(s.0 - s.0 / 8 + r.0 / 8), Duration(self.rttvar.0 - self.rttvar.0 / 4 + err / 4))
            }
        };
        self.srtt = Some(srtt);
        self.rttvar = rttvar;
        let rto = srtt.0 + (4 * rttvar.0).max(1_000_000);
        self.rto = Duration(rto.clamp(self.cfg.min_rto.0, self.cfg.max_rto.0));
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

/// The receiving side: in-order, exactly-once delivery with delayed ACKs and SACK.
#[derive(Debug)]
pub struct TcpReceiver {
    cfg: TcpConfig,
    rcv_nxt: u64,
    /// Out-of-order data as sorted, disjoint [start, end) intervals.
    ooo: Vec<(u64, u64)>,
    last_block: Option<(u64, u64)>,
    unacked: u32,
    delack_deadline: Option<Instant>,
    /// Bytes delivered to the application, in order.
    pub delivered: u64,
    /// Segments that carried only data already received.
    pub duplicates: u64,
}

impl TcpReceiver {
    /// A receiver.
    pub fn new(cfg: TcpConfig) -> Self {
        TcpReceiver {
            cfg,
            rcv_nxt: 0,
            ooo: Vec::new(),
            last_block: None,
            unacked: 0,
            delack_deadline: None,
            delivered: 0,
            duplicates: 0,
        }
    }

    /// Next byte expected.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    /// Handles a data segment; returns the bytes newly delivered in order and an ACK to send now, if any.
    pub fn on_segment(&mut self, now: Instant, seq: u64, len: u32) -> (u64, Option<Ack>) {
        let end = seq + u64::from(len);
        let had_holes = !self.ooo.is_empty();
        if end <= self.rcv_nxt || self.ooo.iter().any(|&(a, b)| a <= seq && end <= b) {
            self.duplicates += 1;
            return (0, Some(self.ack())); // RFC 5681: ACK duplicates at once
        }
        let before = self.rcv_nxt;
        if seq <= self.rcv_nxt {
            self.rcv_nxt = end;
            // Pull in out-of-order intervals that are now contiguous.
            while let Some(&(a, b)) = self.ooo.first() {
                if a > self.rcv_nxt {
                    break;
                }
                self.rcv_nxt = self.rcv_nxt.max(b);
                self.ooo.remove(0);
            }
            self.last_block = None;
        } else {
            self.insert_ooo(seq, end);
        }
        let newly = self.rcv_nxt - before;
        self.delivered += newly;
        self.unacked += 1;
        // Immediate ACK for out-of-order data, for a segment that fills a hole, or every 2nd segment.
        if seq > before || had_holes || self.unacked >= 2 {
            return (newly, Some(self.ack()));
        }
        if self.delack_deadline.is_none() {
            self.delack_deadline = Some(now + self.cfg.delack);
        }
        (newly, None)
    }

    fn insert_ooo(&mut self, mut a: u64, mut b: u64) {
        let i = self.ooo.partition_point(|&(_, e)| e < a);
        let mut j = i;
        while j < self.ooo.len() && self.ooo[j].0 <= b {
            a = a.min(self.ooo[j].0);
            b = b.max(self.ooo[j].1);
            j += 1;
        }
        self.ooo.splice(i..j, [(a, b)]);
        self.last_block = Some((a, b));
    }

    /// When the delayed-ACK timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.delack_deadline
    }

    /// Handles the delayed-ACK timer.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Ack> {
        match self.delack_deadline {
            Some(d) if now >= d => Some(self.ack()),
            _ => None,
        }
    }

    fn ack(&mut self) -> Ack {
        self.unacked = 0;
        self.delack_deadline = None;
        let mut a = Ack { cum: self.rcv_nxt, rwnd: self.cfg.rwnd, ..Default::default() };
        // RFC 2018: the block with the latest segment first, then the others, highest first.
        let mut blocks: Vec<(u64, u64)> = Vec::with_capacity(3);
        if let Some(lb) = self.last_block {
            if let Some(&b) = self.ooo.iter().find(|&&(s, e)| s <= lb.0 && lb.1 <= e) {
                blocks.push(b);
            }
        }
        for &b in self.ooo.iter().rev() {
            if blocks.len() == 3 {
                break;
            }
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
        for (k, b) in blocks.iter().enumerate() {
            a.sack[k] = *b;
        }
        a.n_sack = blocks.len() as u8;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{AckEvent, CongestionControl};
    use leoguard_core::Bps;
    use std::collections::BTreeMap;

    /// A fixed window, halved on loss (enough to exercise the sender's machinery).
    #[derive(Debug)]
    struct Aimd {
        cwnd: u64,
        mss: u64,
    }

    impl CongestionControl for Aimd {
        fn name(&self) -> &'static str {
            "aimd"
        }
        fn on_sent(&mut self, _: Instant, _: u64, _: u64) {}
        fn on_ack(&mut self, _: Instant, a: &AckEvent) {
            if !a.in_recovery {
                self.cwnd += self.mss * a.bytes_acked / self.cwnd.max(1);
            }
        }
        fn on_congestion_event(&mut self, _: Instant, _: u64) {
            self.cwnd = (self.cwnd / 2).max(2 * self.mss);
        }
        fn on_recovery_end(&mut self, _: Instant) {}
        fn on_rto(&mut self, _: Instant, _: u64) {
            self.cwnd = self.mss;
        }
        fn cwnd(&self) -> u64 {
            self.cwnd
        }
        fn ssthresh(&self) -> u64 {
            u64::MAX
        }
        fn pacing_rate(&self) -> Option<Bps> {
            None
        }
        fn state(&self) -> &'static str {
            "aimd"
        }
    }

    struct Outcome {
        tx: TcpSender,
        rx: TcpReceiver,
        done_at: Instant,
        delivered_order_ok: bool,
        /// (transmission index, seq) of every retransmission.
        retx: Vec<(u64, u64)>,
    }

    /// Sender -> (rate, delay, drops by transmission index, blackout) -> receiver; ACKs return after `delay`.
    fn transfer(
        bytes: u64,
        rate: Bps,
        delay: Duration,
        drops: &[u64],
        blackout: Option<(Instant, Instant)>,
    ) -> Outcome {
        let cfg = TcpConfig::default();
        let mut tx = TcpSender::new(cfg, Box::new(Aimd { cwnd: 10 * 1448, mss: 1448 }), Some(bytes));
        let mut rx = TcpReceiver::new(cfg);
        // Events: time -> list of (is_ack, seg or ack).
        let mut data: BTreeMap<(Instant, u64), Segment> = BTreeMap::new();
        let mut acks: BTreeMap<(Instant, u64), Ack> = BTreeMap::new();
        let (mut now, mut link_free, mut k, mut n) = (Instant::ZERO, Instant::ZERO, 0u64, 0u64);
        let mut last_delivered = 0;
        let mut order_ok = true;
        let mut retx = Vec::new();
        while !tx.is_done() {
            while let Some(seg) = tx.poll_transmit(now) {
                let start = now.max(link_free);
                link_free = start + rate.transmission_time(Bytes(u64::from(seg.len) + 52)).unwrap();
                if seg.retransmission {
                    retx.push((k, seg.seq));
                }
                let lost = drops.contains(&k) || blackout.is_some_and(|(a, b)| link_free >= a && link_free < b);
                k += 1;
                if !lost {
                    data.insert((link_free + delay, n), seg);
                }
                n += 1;
            }
            let next = [
                data.keys().next().map(|x| x.0),
                acks.keys().next().map(|x| x.0),
                tx.poll_timeout(),
                rx.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min()
            .expect("something is pending while the transfer is unfinished");
            now = next;
            assert!(now < Instant(600_000_000_000), "transfer stuck");
            if let Some(t) = rx.poll_timeout().filter(|&t| t <= now) {
                if let Some(a) = rx.handle_timeout(t) {
                    acks.insert((now + delay, n), a);
                    n += 1;
                }
            }
            while let Some((&(t, id), _)) = data.iter().next().filter(|(key, _)| key.0 <= now) {
                let seg = data.remove(&(t, id)).unwrap();
                let (_, ack) = rx.on_segment(now, seg.seq, seg.len);
                if rx.delivered < last_delivered {
                    order_ok = false;
                }
                last_delivered = rx.delivered;
                if let Some(a) = ack {
                    acks.insert((now + delay, n), a);
                    n += 1;
                }
            }
            while let Some((&(t, id), _)) = acks.iter().next().filter(|(key, _)| key.0 <= now) {
                let a = acks.remove(&(t, id)).unwrap();
                tx.on_ack(now, &a);
            }
            tx.handle_timeout(now);
        }
        Outcome { tx, rx, done_at: now, delivered_order_ok: order_ok, retx }
    }

    #[test]
    fn lossless_transfer_delivers_everything_once_and_estimates_rtt() {
        let o = transfer(2_000_000, Bps::mbps(100), Duration::from_millis(20), &[], None);
        assert_eq!(o.rx.delivered, 2_000_000);
        assert_eq!(o.rx.duplicates, 0);
        assert_eq!(o.tx.stats.retransmissions, 0);
        assert_eq!(o.tx.stats.rtos, 0);
        let srtt = o.tx.srtt().unwrap().as_millis_f64();
        // 40 ms propagation + serialisation + up to one delayed ACK.
        assert!((40.0..=82.0).contains(&srtt), "srtt {srtt}");
        assert!(o.tx.rto() >= Duration::from_millis(200));
        assert!(o.delivered_order_ok);
    }

    #[test]
    fn isolated_losses_are_repaired_by_sack_without_spurious_retransmissions_or_rto() {
        let drops = [30, 31, 90, 200, 350];
        let o = transfer(1_000_000, Bps::mbps(50), Duration::from_millis(10), &drops, None);
        assert_eq!(o.rx.delivered, 1_000_000);
        assert_eq!(o.tx.stats.retransmissions, drops.len() as u64);
        assert_eq!(o.rx.duplicates, 0, "no segment needlessly sent twice");
        assert_eq!(o.tx.stats.rtos, 0);
        assert!(o.tx.stats.recoveries >= 3);
    }

    #[test]
    fn a_lost_retransmission_is_detected_without_waiting_for_the_rto() {
        let first = transfer(600_000, Bps::mbps(50), Duration::from_millis(10), &[40], None);
        assert_eq!(first.retx.len(), 1);
        let (k, seq) = first.retx[0];
        // Same run, but the retransmission is dropped as well.
        let o = transfer(600_000, Bps::mbps(50), Duration::from_millis(10), &[40, k], None);
        assert_eq!(o.retx.iter().map(|r| r.1).collect::<Vec<_>>(), vec![seq, seq]);
        assert_eq!(o.rx.delivered, 600_000);
        assert_eq!(o.tx.stats.rtos, 0, "RACK re-detects the lost retransmission");
        assert_eq!(o.rx.duplicates, 0);
    }

    #[test]
    fn tail_loss_recovers_through_the_rto() {
        // 100 segments of 1448 B; the last transmission is dropped: no SACK can reveal it.
        let bytes = 100 * 1448;
        let o = transfer(bytes, Bps::mbps(50), Duration::from_millis(10), &[99], None);
        assert_eq!(o.rx.delivered, bytes);
        assert_eq!(o.tx.stats.rtos, 1);
        assert_eq!(o.tx.stats.retransmissions, 1);
    }

    #[test]
    fn a_blackout_longer_than_the_rto_backs_off_and_recovers() {
        let o = transfer(
            3_000_000,
            Bps::mbps(20),
            Duration::from_millis(15),
            &[],
            Some((Instant(300_000_000), Instant(1_500_000_000))),
        );
        assert_eq!(o.rx.delivered, 3_000_000);
        assert!(o.tx.stats.rtos >= 2, "{} RTOs", o.tx.stats.rtos);
        assert!(o.done_at > Instant(1_500_000_000));
        assert!(o.delivered_order_ok);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever is dropped, every byte reaches the application exactly once and in order.
        #[test]
        fn every_byte_delivered_exactly_once_in_order(drops in proptest::collection::vec(0u64..400, 0..40),
                                                     delay_ms in 1u64..80, rate in 5u64..200) {
            let o = transfer(300_000, Bps::mbps(rate), Duration::from_millis(delay_ms), &drops, None);
            proptest::prop_assert_eq!(o.rx.delivered, 300_000);
            proptest::prop_assert_eq!(o.rx.rcv_nxt(), 300_000);
            proptest::prop_assert!(o.delivered_order_ok);
            proptest::prop_assert_eq!(o.tx.snd_una(), 300_000);
        }
    }
}
