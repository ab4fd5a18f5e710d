//! The receiving side: in-order, exactly-once delivery, delayed ACKs, SACK blocks.

use super::{Ack, TcpConfig};
use leoguard_core::Instant;

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

    /// Out-of-order bytes held above `rcv_nxt`.
    pub fn ooo_bytes(&self) -> u64 {
        self.ooo.iter().map(|&(a, b)| b - a).sum()
    }

    /// An ACK of the current state, sent now (a window update or a reconnection; clears the delayed ACK).
    pub fn ack_now(&mut self) -> Ack {
        self.ack()
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
