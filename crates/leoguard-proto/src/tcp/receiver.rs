//! The receiving side: in-order, exactly-once delivery, delayed ACKs (quick ACKs at the start), SACK
//! and DSACK blocks, timestamps echoed as RFC 7323 says; with StarTCP, the Handover Manager.

use super::{Ack, Segment, TcpConfig};
use crate::startcp::{ArrivalKind, HandoverManager, StartcpConfig, StartcpError};
use leoguard_core::Instant;

/// Linux `TCP_MAX_QUICKACKS`: segments ACKed at once at the start of a connection.
const QUICKACKS: u32 = 16;

/// The receiving side: in-order, exactly-once delivery with delayed ACKs and SACK.
#[derive(Debug)]
pub struct TcpReceiver {
    cfg: TcpConfig,
    rcv_nxt: u64,
    /// Out-of-order data as sorted, disjoint [start, end) intervals.
    ooo: Vec<(u64, u64)>,
    last_block: Option<(u64, u64)>,
    /// A duplicate to report in the next ACK (DSACK).
    dsack: Option<(u64, u64)>,
    unacked: u32,
    quick_left: u32,
    delack_deadline: Option<Instant>,
    /// RFC 7323 TS.Recent and the left edge of the window when the last ACK went out (Last.ACK.sent).
    ts_recent: Option<Instant>,
    last_ack_sent: u64,
    /// Bytes delivered to the application, in order.
    pub delivered: u64,
    /// Segments that carried only data already received.
    pub duplicates: u64,
    /// StarTCP's Handover Manager, when on.
    star: Option<Box<HandoverManager>>,
    /// The latest time seen (StarTCP's prediction offsets on ACKs built without a time).
    now: Instant,
}

impl TcpReceiver {
    /// A receiver.
    pub fn new(cfg: TcpConfig) -> Self {
        TcpReceiver {
            cfg,
            rcv_nxt: 0,
            ooo: Vec::new(),
            last_block: None,
            dsack: None,
            unacked: 0,
            quick_left: if cfg.recovery.quickack { QUICKACKS } else { 0 },
            delack_deadline: None,
            ts_recent: None,
            last_ack_sent: 0,
            delivered: 0,
            duplicates: 0,
            star: None,
            now: Instant::ZERO,
        }
    }

    /// A receiver with StarTCP's Handover Manager: arrivals feed it, every ACK carries its signal
    /// (the predicted next handover, the recovery notice), and a recovery notice is ACKed at once.
    pub fn with_startcp(cfg: TcpConfig, star: StartcpConfig) -> Result<Self, StartcpError> {
        let mut rx = TcpReceiver::new(cfg);
        rx.star = Some(Box::new(HandoverManager::new(star)?));
        Ok(rx)
    }

    /// StarTCP's Handover Manager (detected interruptions, the predicted phase), when on.
    pub fn startcp(&self) -> Option<&HandoverManager> {
        self.star.as_deref()
    }

    /// Handles a segment from the wire: a probe (or any zero-length segment) goes to
    /// [`TcpReceiver::on_probe`], data to [`TcpReceiver::on_segment`].
    pub fn handle_segment(&mut self, now: Instant, seg: &Segment) -> (u64, Option<Ack>) {
        if seg.probe || seg.len == 0 {
            return (0, self.on_probe(now));
        }
        self.on_segment(now, seg.seq, seg.len, seg.ts)
    }

    /// A StarTCP probe arrived (no data: never delivered, never a duplicate, no timestamp taken).
    /// Returns an ACK to send now when it carries a recovery notice; without StarTCP, nothing.
    pub fn on_probe(&mut self, now: Instant) -> Option<Ack> {
        self.now = now;
        let star = self.star.as_mut()?;
        star.on_arrival(now, ArrivalKind::Probe).then(|| self.ack())
    }

    /// Next byte expected.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    /// Handles a data segment sent at `ts` (its TSval); returns the bytes newly delivered in order and
    /// an ACK to send now, if any. A zero-length segment is a StarTCP probe ([`TcpReceiver::on_probe`]).
    pub fn on_segment(&mut self, now: Instant, seq: u64, len: u32, ts: Instant) -> (u64, Option<Ack>) {
        if len == 0 {
            return (0, self.on_probe(now));
        }
        self.now = now;
        // StarTCP: a recovery notice owed is ACKed at once.
        let notice = self.star.as_mut().is_some_and(|m| m.on_arrival(now, ArrivalKind::Data));
        let end = seq + u64::from(len);
        // RFC 7323 §4.3: TS.Recent follows segments that cover the left edge of the last ACK.
        if seq <= self.last_ack_sent && self.ts_recent.is_none_or(|r| ts >= r) {
            self.ts_recent = Some(ts);
        }
        let had_holes = !self.ooo.is_empty();
        if end <= self.rcv_nxt || self.ooo.iter().any(|&(a, b)| a <= seq && end <= b) {
            self.duplicates += 1;
            if self.cfg.recovery.dsack {
                self.dsack = Some((seq, end));
            }
            return (0, Some(self.ack())); // RFC 5681: ACK duplicates at once
        }
        if seq < self.rcv_nxt && self.cfg.recovery.dsack {
            self.dsack = Some((seq, self.rcv_nxt)); // partly a duplicate
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
        // Immediate ACK for out-of-order data, for a segment that fills a hole, every 2nd segment,
        // a duplicate part to report, and every segment in quick-ACK mode.
        if seq > before || had_holes || self.unacked >= 2 || self.dsack.is_some() || self.quick_left > 0 || notice {
            self.quick_left = self.quick_left.saturating_sub(1);
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

    /// Out-of-order bytes held above `rcv_nxt`.
    pub fn ooo_bytes(&self) -> u64 {
        self.ooo.iter().map(|&(a, b)| b - a).sum()
    }

    /// An ACK of the current state, sent now (a window update or a reconnection; clears the delayed
    /// ACK). StarTCP's prediction offset is taken from the latest time the receiver saw.
    pub fn ack_now(&mut self) -> Ack {
        self.ack()
    }

    /// When the delayed-ACK timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.delack_deadline
    }

    /// Handles the delayed-ACK timer.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Ack> {
        self.now = self.now.max(now);
        match self.delack_deadline {
            Some(d) if now >= d => Some(self.ack()),
            _ => None,
        }
    }

    fn ack(&mut self) -> Ack {
        self.unacked = 0;
        self.delack_deadline = None;
        self.last_ack_sent = self.rcv_nxt;
        let mut a = Ack { cum: self.rcv_nxt, rwnd: self.cfg.rwnd, ts_ecr: self.ts_recent, ..Default::default() };
        if let Some(star) = &mut self.star {
            a.startcp = star.signal(self.now);
        }
        // RFC 2883: a duplicate is reported in the first block (once); RFC 2018: then the block with
        // the latest segment, then the others, highest first.
        let mut blocks: Vec<(u64, u64)> = Vec::with_capacity(4);
        let dup = usize::from(self.dsack.is_some());
        if let Some(d) = self.dsack.take() {
            blocks.push(d);
            // A duplicate above rcv_nxt is reported with the block that holds it next (RFC 2883 §4.2).
            if let Some(&b) = self.ooo.iter().find(|&&(s, e)| s <= d.0 && d.1 <= e) {
                blocks.push(b);
            }
        }
        if let Some(lb) = self.last_block {
            if let Some(&b) = self.ooo.iter().find(|&&(s, e)| s <= lb.0 && lb.1 <= e) {
                if !blocks[dup..].contains(&b) {
                    blocks.push(b);
                }
            }
        }
        for &b in self.ooo.iter().rev() {
            if blocks.len() == 3 {
                break;
            }
            if !blocks[dup..].contains(&b) {
                blocks.push(b);
            }
        }
        blocks.truncate(3);
        for (k, b) in blocks.iter().enumerate() {
            a.sack[k] = *b;
        }
        a.n_sack = blocks.len() as u8;
        a
    }
}
