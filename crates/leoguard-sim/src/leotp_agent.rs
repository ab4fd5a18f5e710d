//! LEOTP flows in the simulator (docs/leotp.md, "In the simulator"): a producer agent at the flow's
//! `src` (the data's sender, as for TCP) and a consumer agent at its `dst`, hosting the sans-IO
//! [`Producer`] and [`Consumer`] of `leoguard-proto`; the mid nodes between them are per-node hooks
//! (`leoguard_net::schemes::leotp`). Packets carry the LEOTP header in their fields
//! ([`to_packet`] / [`header_of`]); ranges travel without payload bytes (`carry_payload` off).

use crate::engine::{NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Duration, Instant};
use leoguard_net::schemes::leotp::{header_of, to_packet, SentRing, FLAG_LEOTP_RETX};
use leoguard_proto::leotp::{Consumer, LeotpConfig, LeotpError, PatternSource, Producer, LEOTP_HEADER_LEN};
use std::any::Any;

const TOKEN_PROTO: u64 = 0;
const TOKEN_SAMPLE: u64 = 1;

/// One Data packet that delivered new bytes to the consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeotpRecord {
    /// Range start.
    pub start: u64,
    /// When the producer sent the range (the first copy's send for a range a mid node resent).
    pub sent_at: Instant,
    /// Arrival at the consumer.
    pub received_at: Instant,
    /// Whether this copy was sent again (a mid node's cache answer or late fill, or a producer
    /// resend after a consumer timeout).
    pub retransmission: bool,
    /// Links crossed since the last node that sent it (the last mid node, or the producer).
    pub hops: u16,
}

/// One sample of a consumer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeotpSample {
    /// When.
    pub t: Instant,
    /// The consumer's hop congestion window, bytes.
    pub cwnd: u64,
    /// Its smoothed RTT (zero before a sample).
    pub srtt: Duration,
    /// Bytes delivered in order so far.
    pub delivered: u64,
    /// Interests retransmitted after a timeout so far.
    pub retransmissions: u64,
}

/// Arms `at` unless an earlier timer is pending (`armed`); a deadline already due is retried a
/// microsecond later, so a state machine that leaves it due cannot loop at one instant.
fn arm(armed: &mut Option<Instant>, at: Option<Instant>, ctx: &mut Ctx) {
    let now = ctx.now();
    if armed.is_some_and(|a| a <= now) {
        *armed = None;
    }
    if let Some(at) = at {
        let at = at.max(now + Duration::from_micros(1));
        if armed.is_none_or(|a| at < a) {
            *armed = Some(at);
            ctx.timer(at, TOKEN_PROTO);
        }
    }
}

/// The consumer of one LEOTP flow.
#[derive(Debug)]
pub struct LeotpConsumerAgent {
    /// Flow id.
    pub flow: u32,
    /// The producer's node (Interests are routed to it).
    pub producer: NodeId,
    /// The state machine.
    pub consumer: Consumer,
    /// When the flow starts.
    pub start_at: Instant,
    /// When the last byte was delivered (fixed-size transfers).
    pub completed_at: Option<Instant>,
    /// Every Data packet that delivered new bytes.
    pub records: Vec<LeotpRecord>,
    /// Sampling interval of `samples` (zero: none).
    pub sample_every: Duration,
    /// Consumer state over time.
    pub samples: Vec<LeotpSample>,
    mss: u32,
    armed: Option<Instant>,
    buf: Vec<u8>,
}

impl LeotpConsumerAgent {
    /// A consumer of `bytes` (or as many as the offsets allow) of flow `flow` from `producer`,
    /// starting at `start`.
    pub fn new(
        cfg: LeotpConfig,
        flow: u32,
        producer: NodeId,
        bytes: Option<u64>,
        start: Instant,
        sample_every: Duration,
    ) -> Result<Self, LeotpError> {
        Ok(LeotpConsumerAgent {
            flow,
            producer,
            consumer: Consumer::new(cfg, u64::from(flow), bytes, start)?,
            start_at: start,
            completed_at: None,
            records: Vec::new(),
            sample_every,
            samples: Vec::new(),
            mss: cfg.mss,
            armed: None,
            buf: vec![0; LEOTP_HEADER_LEN],
        })
    }

    fn pump(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        while let Some(t) = self.consumer.poll_transmit(now, &mut self.buf) {
            ctx.send(to_packet(self.flow, self.producer.0, &t.header, now));
        }
        arm(&mut self.armed, self.consumer.poll_timeout(), ctx);
    }

    fn sample(&mut self, now: Instant) {
        let st = self.consumer.stats();
        self.samples.push(LeotpSample {
            t: now,
            cwnd: (self.consumer.cc().cwnd() * f64::from(self.mss)) as u64,
            srtt: self.consumer.rto().srtt().unwrap_or(Duration::ZERO),
            delivered: self.consumer.delivered(),
            retransmissions: st.retransmissions,
        });
    }
}

impl Agent for LeotpConsumerAgent {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        arm(&mut self.armed, self.consumer.poll_timeout().map(|t| t.max(self.start_at)), ctx);
        if self.sample_every > Duration::ZERO {
            ctx.timer(self.start_at.max(ctx.now()) + self.sample_every, TOKEN_SAMPLE);
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let Some(h) = header_of(p) else { return };
        let now = ctx.now();
        let before = self.consumer.stats().data_received;
        self.consumer.handle_packet(now, h, &[]);
        if self.consumer.stats().data_received > before {
            self.records.push(LeotpRecord {
                start: u64::from(h.start),
                sent_at: p.sent_at,
                received_at: now,
                retransmission: p.flags & FLAG_LEOTP_RETX != 0,
                hops: p.hops,
            });
        }
        if self.completed_at.is_none() && self.consumer.is_complete() {
            self.completed_at = Some(now);
        }
        self.pump(ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let now = ctx.now();
        if token == TOKEN_SAMPLE {
            self.sample(now);
            if self.completed_at.is_none() {
                ctx.timer(now + self.sample_every, TOKEN_SAMPLE);
            }
            return;
        }
        if now < self.start_at {
            return;
        }
        if self.consumer.poll_timeout().is_some_and(|t| t <= now) {
            self.consumer.on_timer(now);
        }
        self.pump(ctx);
    }
}

/// Segments whose first send time the producer remembers: more than the consumer's 20 000-MSS
/// Interest buffer, so every range it can ask for again is still there.
const PRODUCER_RING: usize = 1 << 15;

/// The producer of one LEOTP flow.
#[derive(Debug)]
pub struct LeotpProducerAgent {
    /// Flow id.
    pub flow: u32,
    /// The consumer's node (Data is routed to it).
    pub consumer: NodeId,
    /// The state machine.
    pub producer: Producer<PatternSource>,
    /// Data packets sent again (a range at or below the highest sent: a consumer timeout's).
    pub resent: u64,
    high: u32,
    /// When each segment was first sent: a resend carries that time, so the consumer's one-way delay
    /// of a range the producer sent again counts from its first send, as for a mid node's resend.
    first_sent: SentRing,
    armed: Option<Instant>,
    buf: Vec<u8>,
}

impl LeotpProducerAgent {
    /// A producer of `bytes` (or as many as the offsets allow) for flow `flow`'s consumer.
    pub fn new(cfg: LeotpConfig, flow: u32, consumer: NodeId, bytes: Option<u64>) -> Result<Self, LeotpError> {
        let total = bytes.unwrap_or(u64::from(u32::MAX));
        let cfg_mss = cfg.mss;
        Ok(LeotpProducerAgent {
            flow,
            consumer,
            producer: Producer::new(cfg, PatternSource { total })?,
            resent: 0,
            high: 0,
            first_sent: SentRing::new(cfg_mss, PRODUCER_RING),
            armed: None,
            buf: vec![0; LEOTP_HEADER_LEN],
        })
    }

    fn pump(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        while let Some(t) = self.producer.poll_transmit(now, &mut self.buf) {
            let h = &t.header;
            let resend = h.end <= self.high;
            let sent_at = if resend { self.first_sent.get(h.start).unwrap_or(now) } else { now };
            if h.end > h.start && !resend {
                self.first_sent.note(h.start, now);
            }
            let mut p = to_packet(self.flow, self.consumer.0, h, sent_at);
            if resend {
                p.flags |= FLAG_LEOTP_RETX;
                self.resent += 1;
            }
            self.high = self.high.max(t.header.end);
            ctx.send(p);
        }
        arm(&mut self.armed, self.producer.poll_timeout(), ctx);
    }
}

impl Agent for LeotpProducerAgent {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let Some(h) = header_of(p) else { return };
        self.producer.handle_packet(ctx.now(), u64::from(self.flow), h);
        self.pump(ctx);
    }

    fn on_timer(&mut self, _token: u64, ctx: &mut Ctx) {
        self.producer.on_timer(ctx.now());
        self.pump(ctx);
    }
}
