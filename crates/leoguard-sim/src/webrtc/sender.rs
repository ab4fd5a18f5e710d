//! The WebRTC sender: a video encoder's frame sizes, RTP packetisation, pacing, the retransmission
//! history (RFC 4585 generic NACK answered from it) and Tambur parity.

use super::{lock, Fec, FrameInfo, SharedHeaders, WebrtcConfig};
use super::{
    FEC_HEADER, FLAG_DLRR, FLAG_FEC, FLAG_MEDIA, FLAG_NACK, FLAG_PLI, FLAG_RR, FLAG_RTX, RTCP_BASE, RTP_OVERHEAD,
};
use crate::engine::{NetFields, NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Duration, Instant, RngStream};
use leoguard_proto::tambur::{RedundancyPolicy, StreamLayout};
use std::collections::VecDeque;

const TOKEN_FRAME: u64 = 1;
const TOKEN_PACE: u64 = 2;

/// libwebrtc's RTT before any measurement (kDefaultRttMs).
pub const DEFAULT_RTT: Duration = Duration::from_millis(100);

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Frames captured and sent.
    pub frames: u64,
    /// Of which key frames.
    pub key_frames: u64,
    /// Media packets (first transmissions).
    pub media_packets: u64,
    /// Retransmitted media packets.
    pub retransmissions: u64,
    /// NACKed packets no longer in the history.
    pub retx_missed: u64,
    /// Parity packets.
    pub parity_packets: u64,
    /// Bytes sent (all packets of the flow's sender).
    pub bytes_sent: u64,
    /// PLIs received.
    pub plis: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u64,
    size: u32,
    at: Instant,
    last_retx: Option<Instant>,
}

/// The sending end of a WebRTC video flow.
#[derive(Debug)]
pub struct WebrtcSender {
    /// Flow id.
    pub flow: u32,
    /// Receiver's node.
    pub dst: NodeId,
    /// Parameters.
    pub cfg: WebrtcConfig,
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
    /// First capture.
    pub start: Instant,
    /// Counters.
    pub stats: SenderStats,
    pub(crate) headers: SharedHeaders,
    rng: RngStream,
    frame: u64,
    seq: u64,
    last_key: Option<Instant>,
    key_request: bool,
    rtt: Duration,
    history: VecDeque<Sent>,
    queue: VecDeque<Packet>,
    next_send: Instant,
    pace_armed: bool,
    layout: Option<StreamLayout>,
    policy: Option<RedundancyPolicy>,
}

impl WebrtcSender {
    /// A sender of flow `flow` to `dst`; `rng` draws the frame sizes.
    pub fn new(flow: u32, dst: NodeId, cfg: WebrtcConfig, headers: SharedHeaders, rng: RngStream) -> Self {
        let (layout, policy) = match cfg.fec {
            Fec::Tambur(t) => (Some(StreamLayout::new(t)), Some(RedundancyPolicy::new(t))),
            Fec::None => (None, None),
        };
        WebrtcSender {
            flow,
            dst,
            cfg,
            tc: 0,
            start: Instant::ZERO,
            stats: SenderStats::default(),
            headers,
            rng,
            frame: 0,
            seq: 0,
            last_key: None,
            key_request: false,
            rtt: DEFAULT_RTT,
            history: VecDeque::new(),
            queue: VecDeque::new(),
            next_send: Instant::ZERO,
            pace_armed: false,
            layout,
            policy,
        }
    }

    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.rng.uniform().max(1e-300);
        let u2 = self.rng.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Payload bytes of the next frame: key frames `key_ratio` mean deltas, deltas log-normal around
    /// the mean (the log-normal's mean is kept at the mean delta size).
    fn frame_size(&mut self, key: bool) -> u32 {
        let mean = self.cfg.mean_delta_bytes();
        let s = self.cfg.size_sigma;
        let bytes = if key { mean * self.cfg.key_ratio } else { mean * (s * self.normal() - s * s / 2.0).exp() };
        bytes.round().clamp(1.0, 4.0e6) as u32
    }

    fn packet(&self, seq: u64, size: u32, flags: u16) -> Packet {
        Packet {
            flow: self.flow,
            seq,
            size,
            dst: self.dst.0,
            flags,
            net: NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        }
    }

    fn capture(&mut self, now: Instant) {
        let key = self.frame == 0
            || self.key_request
            || self
                .cfg
                .keyframe_interval
                .zip(self.last_key)
                .is_some_and(|(k, t)| now.saturating_duration_since(t) + Duration::from_micros(1) >= k);
        if key {
            self.key_request = false;
            self.last_key = Some(now);
            self.stats.key_frames += 1;
        }
        let size = self.frame_size(key);
        let n = size.div_ceil(self.cfg.max_payload).max(1);
        let first = self.seq;
        // Equal payloads, the first ones a byte larger where the size does not divide (libwebrtc's
        // RtpPacketizer splits a frame into packets of near-equal size).
        let (q, r) = (size / n, size % n);
        for i in 0..n {
            let payload = q + u32::from(i < r);
            let p = self.packet(first + u64::from(i), payload + RTP_OVERHEAD, FLAG_MEDIA);
            self.queue.push_back(p);
        }
        self.seq += u64::from(n);
        self.stats.media_packets += u64::from(n);
        self.stats.frames += 1;
        let mut info =
            FrameInfo { frame: self.frame, capture: now, key, size, first_seq: first, n_packets: n, layout: None };
        let mut parity = Vec::new();
        let fec = match (self.layout.as_mut(), self.policy.as_ref()) {
            (Some(lay), Some(pol)) => {
                let (l, _) = lay.next(n, pol.parity_count(now, n));
                Some((l, lay.window().next().map_or(l.frame, |w| w.frame)))
            }
            _ => None,
        };
        if let Some((l, oldest)) = fec {
            info.layout = Some(l);
            if l.n_parity > 0 {
                // A parity symbol is as long as the longest payload it combines (frames f-tau..=f;
                // shorter ones are padded), plus Tambur's header.
                let longest = {
                    let h = lock(&self.headers);
                    let older = h.frames[oldest as usize..].iter().map(|f| f.size.div_ceil(f.n_packets)).max();
                    older.unwrap_or(0).max(q + u32::from(r > 0))
                };
                for k in 0..u64::from(l.n_parity) {
                    parity.push(self.packet(l.parity_first + k, longest + RTP_OVERHEAD + FEC_HEADER, FLAG_FEC));
                }
            }
            self.stats.parity_packets += u64::from(l.n_parity);
        }
        {
            let mut h = lock(&self.headers);
            h.by_seq.insert(first, self.frame);
            if let Some(l) = info.layout.filter(|l| l.n_parity > 0) {
                h.by_parity.insert(l.parity_first, self.frame);
            }
            h.frames.push(info);
        }
        // FEC goes after the frame's media (libwebrtc's pacer sends FEC at the lowest priority).
        self.queue.extend(parity);
        self.frame += 1;
    }

    fn pump(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        let pace = self.cfg.bitrate_bps as f64 * self.cfg.pacing_factor;
        while let Some(p) = self.queue.front() {
            if pace > 0.0 && self.next_send > now {
                break;
            }
            let mut p = *p;
            self.queue.pop_front();
            p.sent_at = now;
            self.stats.bytes_sent += u64::from(p.size);
            if p.flags & FLAG_MEDIA != 0 && p.flags & FLAG_RTX == 0 {
                self.history.push_back(Sent { seq: p.seq, size: p.size, at: now, last_retx: None });
            }
            if pace > 0.0 {
                let gap = Duration::from_nanos((f64::from(p.size) * 8.0 / pace * 1e9).round() as u64);
                self.next_send = self.next_send.max(now) + gap;
            }
            ctx.send(p);
        }
        while self.history.front().is_some_and(|s| now.saturating_duration_since(s.at) > self.cfg.history) {
            self.history.pop_front();
        }
        if !self.queue.is_empty() && !self.pace_armed {
            self.pace_armed = true;
            ctx.timer(self.next_send, TOKEN_PACE);
        }
    }

    /// Answers a generic NACK from the history: a packet is retransmitted at most once per RTT
    /// (libwebrtc's RTPSender::ReSendPacket refuses a packet resent less than an RTT ago), ahead of
    /// new media (retransmissions have priority in libwebrtc's pacer).
    fn on_nack(&mut self, seqs: &[u64], now: Instant) {
        let mut retx = Vec::new();
        for &s in seqs {
            let Some(front) = self.history.front().map(|h| h.seq) else {
                self.stats.retx_missed += 1;
                continue;
            };
            let Some(h) = s.checked_sub(front).and_then(|i| self.history.get_mut(i as usize)) else {
                self.stats.retx_missed += 1;
                continue;
            };
            if h.last_retx.is_some_and(|t| now.saturating_duration_since(t) < self.rtt) {
                continue;
            }
            h.last_retx = Some(now);
            retx.push((h.seq, h.size));
        }
        for &(seq, size) in retx.iter().rev() {
            let p = self.packet(seq, size, FLAG_MEDIA | FLAG_RTX);
            self.queue.push_front(p);
        }
        self.stats.retransmissions += retx.len() as u64;
    }
}

impl Agent for WebrtcSender {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        ctx.timer(self.start.max(ctx.now()), TOKEN_FRAME);
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        if p.flow != self.flow {
            return;
        }
        let now = ctx.now();
        if p.flags & (FLAG_NACK | FLAG_RR) != 0 && p.ack > 0 {
            // The receiver's RTT estimate rides in its RTCP (RFC 3550 lets the sender compute the same
            // figure from LSR/DLSR).
            self.rtt = Duration::from_nanos(p.ack);
        }
        if p.flags & FLAG_NACK != 0 {
            let seqs = lock(&self.headers).nacks.get(p.seq as usize).cloned().unwrap_or_default();
            if self.cfg.nack {
                self.on_nack(&seqs, now);
            }
        } else if p.flags & FLAG_PLI != 0 {
            self.stats.plis += 1;
            self.key_request = true;
        } else if p.flags & FLAG_RR != 0 {
            if let Some(pol) = self.policy.as_mut() {
                pol.on_feedback(now, p.seq > 0);
            }
            // XR DLRR: echo the receiver reference time at once.
            let mut d = self.packet(0, RTCP_BASE + 12, FLAG_DLRR);
            d.ack = p.sent_at.as_nanos();
            d.sent_at = now;
            ctx.send(d);
        }
        self.pump(ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let now = ctx.now();
        if token == TOKEN_FRAME {
            self.capture(now);
            let next = self.start + Duration::from_nanos(self.frame * 1_000_000_000 / u64::from(self.cfg.fps));
            ctx.timer(next, TOKEN_FRAME);
        } else if token == TOKEN_PACE {
            self.pace_armed = false;
        }
        self.pump(ctx);
    }
}
