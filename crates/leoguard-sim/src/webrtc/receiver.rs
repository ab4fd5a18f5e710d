//! The WebRTC receiver: libwebrtc's NACK module, frame assembly and dependencies, key frame
//! requests, Tambur decoding and playout timing (see docs/webrtc.md for the rules and sources).
//!
//! NACK (libwebrtc `NackRequester`): a sequence gap puts the missing numbers on the NACK list and
//! they are requested at once (`send_nack_delay` 0); every 20 ms (`kProcessIntervalMs`) entries whose
//! last request is at least an RTT old are requested again; after 10 requests (`kMaxNackRetries`) an
//! entry is dropped, and a list above 1000 entries (`kMaxNackPackets`) is cleared with a key frame
//! request. RTT is 100 ms (`kDefaultRttMs`) until the first RTCP XR round trip measures it.
//!
//! Dependencies: every delta frame references the previous frame (VP8/H.264 without temporal
//! layers, libwebrtc's default), so a frame is decodable once complete and its predecessor decoded;
//! a key frame is decodable once complete, and a complete key frame newer than a stuck frame
//! replaces it (the frames between are never rendered). A frame that can no longer be completed (a
//! NACK entry given up, or with NACK off, its Tambur window passed) triggers a PLI at once; libwebrtc
//! repeats the request every 200 ms while a key frame is needed (`max_wait_for_keyframe`) and asks
//! for one if no frame was decodable for 3 s (`max_wait_for_frame`).

use super::jitter::JitterBuffer;
use super::sender::DEFAULT_RTT;
use super::{lock, Fec, SharedHeaders, WebrtcConfig};
use super::{FLAG_DLRR, FLAG_FEC, FLAG_MEDIA, FLAG_NACK, FLAG_PLI, FLAG_RR, FLAG_RTX, RTCP_BASE};
use crate::engine::{NetFields, NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Duration, Instant};
use leoguard_proto::tambur::Decoder;
use std::collections::{BTreeMap, BTreeSet};

const TOKEN_PROCESS: u64 = 1;
const TOKEN_REPORT: u64 = 2;
/// libwebrtc NackRequester kProcessIntervalMs.
const PROCESS_INTERVAL: Duration = Duration::from_millis(20);
/// libwebrtc kMaxNackRetries.
const MAX_NACK_RETRIES: u32 = 10;
/// libwebrtc kMaxNackPackets.
const MAX_NACK_PACKETS: usize = 1000;
/// RTCP report interval for video (libwebrtc/RFC 3550 default 1 s).
const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// libwebrtc max_wait_for_keyframe.
const KEYFRAME_WAIT: Duration = Duration::from_millis(200);
/// libwebrtc max_wait_for_frame.
const FRAME_WAIT: Duration = Duration::from_secs(3);

/// Receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// NACK packets sent.
    pub nacks: u64,
    /// Sequence numbers requested (with repeats).
    pub nacked_packets: u64,
    /// NACK entries given up after the retry limit.
    pub nack_given_up: u64,
    /// PLIs sent.
    pub plis: u64,
    /// Media packets recovered by Tambur.
    pub fec_recovered: u64,
    /// Duplicate media packets.
    pub duplicates: u64,
}

#[derive(Clone, Copy, Debug)]
struct NackEntry {
    sent: Option<Instant>,
    retries: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct FrameState {
    have: u32,
    retransmitted: bool,
    lost: bool,
}

/// The receiving end of a WebRTC video flow.
#[derive(Debug)]
pub struct WebrtcReceiver {
    /// Flow id.
    pub flow: u32,
    /// Sender's node (RTCP goes there).
    pub src: NodeId,
    /// Parameters.
    pub cfg: WebrtcConfig,
    /// IPv6 Traffic Class of its RTCP.
    pub tc: u8,
    /// When the flow starts.
    pub start: Instant,
    /// Counters.
    pub stats: ReceiverStats,
    /// Per frame number: when it became complete.
    pub complete: Vec<Option<Instant>>,
    /// Per frame number: when it was rendered.
    pub render: Vec<Option<Instant>>,
    /// Playout timing.
    pub jb: JitterBuffer,
    /// RTT estimate.
    pub rtt: Duration,
    headers: SharedHeaders,
    got: BTreeSet<u64>,
    expected: u64,
    nack: BTreeMap<u64, NackEntry>,
    frames: BTreeMap<u64, FrameState>,
    next_decode: u64,
    key_needed: bool,
    last_progress: Instant,
    last_pli: Option<Instant>,
    last_render: Instant,
    newest_frame: u64,
    decoder: Option<Decoder>,
    losses: u64,
    last_loss_report: Option<Instant>,
    parity_pending: bool,
}

impl WebrtcReceiver {
    /// A receiver of flow `flow` sent from `src`.
    pub fn new(flow: u32, src: NodeId, cfg: WebrtcConfig, headers: SharedHeaders) -> Self {
        let decoder = match cfg.fec {
            Fec::Tambur(t) => Some(Decoder::new(t.tau, None)),
            Fec::None => None,
        };
        WebrtcReceiver {
            flow,
            src,
            cfg,
            tc: 0,
            start: Instant::ZERO,
            stats: ReceiverStats::default(),
            complete: Vec::new(),
            render: Vec::new(),
            jb: JitterBuffer::new(cfg.jitter_window, cfg.jitter_percentile),
            rtt: DEFAULT_RTT,
            headers,
            got: BTreeSet::new(),
            expected: 0,
            nack: BTreeMap::new(),
            frames: BTreeMap::new(),
            next_decode: 0,
            key_needed: false,
            last_progress: Instant::ZERO,
            last_pli: None,
            last_render: Instant::ZERO,
            newest_frame: 0,
            decoder,
            losses: 0,
            last_loss_report: None,
            parity_pending: false,
        }
    }

    fn rtcp(&self, flags: u16, size: u32, now: Instant) -> Packet {
        Packet {
            flow: self.flow,
            size,
            dst: self.src.0,
            sent_at: now,
            flags,
            ack: self.rtt.as_nanos(),
            net: NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        }
    }

    fn send_pli(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        self.key_needed = true;
        self.last_pli = Some(now);
        self.stats.plis += 1;
        ctx.send(self.rtcp(FLAG_PLI, RTCP_BASE, now));
    }

    fn send_report(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        // RR (report block 24 bytes) + XR receiver reference time (20 bytes); `seq` = packets found
        // missing since the last report (the report block's loss count).
        let mut p = self.rtcp(FLAG_RR, RTCP_BASE + 24 + 20, now);
        p.seq = std::mem::take(&mut self.losses);
        if p.seq > 0 {
            self.last_loss_report = Some(now);
        }
        ctx.send(p);
    }

    /// Sends one generic NACK for `seqs` (RFC 4585 §6.2.1: 4 bytes per FCI, each covering a packet
    /// id and the 16 following in a bitmask).
    fn send_nack(&mut self, seqs: Vec<u64>, ctx: &mut Ctx) {
        if seqs.is_empty() {
            return;
        }
        let mut fci = 0u32;
        let mut base: Option<u64> = None;
        for &s in &seqs {
            if base.is_none_or(|b| s > b + 16) {
                base = Some(s);
                fci += 1;
            }
        }
        self.stats.nacks += 1;
        self.stats.nacked_packets += seqs.len() as u64;
        let id = {
            let mut h = lock(&self.headers);
            h.nacks.push(seqs);
            h.nacks.len() as u64 - 1
        };
        let mut p = self.rtcp(FLAG_NACK, RTCP_BASE + 4 * fci, ctx.now());
        p.seq = id;
        ctx.send(p);
    }

    fn frame_slot(&mut self, f: u64) {
        if self.complete.len() <= f as usize {
            self.complete.resize(f as usize + 1, None);
            self.render.resize(f as usize + 1, None);
        }
    }

    /// Media packet `seq` is now present (received or recovered) at `now`.
    fn on_media(&mut self, seq: u64, rtx: bool, now: Instant) {
        if !self.got.insert(seq) {
            self.stats.duplicates += 1;
            return;
        }
        self.nack.remove(&seq);
        let Some(info) = lock(&self.headers).frame_of_seq(seq).copied() else { return };
        if info.frame < self.next_decode {
            return; // already decoded past (a late copy)
        }
        self.newest_frame = self.newest_frame.max(info.frame);
        if let (Some(d), Some(l)) = (self.decoder.as_mut(), info.layout) {
            d.add_layout(l);
            d.add_data(seq, None);
        }
        let st = self.frames.entry(info.frame).or_default();
        st.have += 1;
        st.retransmitted |= rtx;
        let (have, retransmitted) = (st.have, st.retransmitted);
        if have == info.n_packets {
            self.frame_slot(info.frame);
            self.complete[info.frame as usize] = Some(now);
            self.jb.on_complete(now, info.capture, retransmitted);
        }
    }

    /// Gap detection on a newly arrived media sequence number.
    fn detect_gap(&mut self, seq: u64, ctx: &mut Ctx) {
        if seq < self.expected {
            return;
        }
        let now = ctx.now();
        let missing: Vec<u64> = (self.expected..seq).filter(|s| !self.got.contains(s)).collect();
        self.expected = seq + 1;
        if missing.is_empty() {
            return;
        }
        self.losses += missing.len() as u64;
        for &m in &missing {
            self.nack.insert(m, NackEntry { sent: None, retries: 0 });
        }
        if self.nack.len() > MAX_NACK_PACKETS {
            self.nack.clear();
            self.send_pli(ctx);
            return;
        }
        if self.cfg.nack {
            self.process_nacks(ctx, true);
        }
        // With FEC, loss is fed back at once (at most once per frame interval) to drive Tambur's
        // redundancy policy.
        if self.decoder.is_some()
            && self.last_loss_report.is_none_or(|t| now.saturating_duration_since(t) >= self.cfg.frame_interval())
        {
            self.send_report(ctx);
        }
    }

    /// Requests the NACK list entries that are due (`new_only`: those never requested).
    fn process_nacks(&mut self, ctx: &mut Ctx, new_only: bool) {
        let now = ctx.now();
        let mut batch = Vec::new();
        let mut dropped = Vec::new();
        for (&s, e) in self.nack.iter_mut() {
            let due = match e.sent {
                None => true,
                Some(t) => !new_only && now.saturating_duration_since(t) >= self.rtt,
            };
            if !due {
                continue;
            }
            if e.retries >= MAX_NACK_RETRIES {
                dropped.push(s);
                continue;
            }
            e.retries += 1;
            e.sent = Some(now);
            batch.push(s);
        }
        for s in dropped {
            self.nack.remove(&s);
            self.stats.nack_given_up += 1;
            self.give_up(s);
        }
        self.send_nack(batch, ctx);
    }

    /// The frame holding `seq` can no longer complete.
    fn give_up(&mut self, seq: u64) {
        let f = lock(&self.headers).frame_of_seq(seq).map(|i| i.frame);
        if let Some(f) = f.filter(|&f| f >= self.next_decode) {
            self.frames.entry(f).or_default().lost = true;
        }
    }

    fn tambur(&mut self, now: Instant) {
        let Some(d) = self.decoder.as_mut() else { return };
        if self.nack.is_empty() && !self.parity_pending {
            return; // nothing known to be missing and no new equation
        }
        self.parity_pending = false;
        let rec = d.solve();
        d.expire(self.newest_frame);
        self.stats.fec_recovered += rec.len() as u64;
        for s in rec {
            self.on_media(s, false, now);
        }
    }

    /// Frames whose Tambur window has passed while incomplete cannot be completed without NACK.
    fn fec_deadline(&mut self) {
        let Fec::Tambur(t) = self.cfg.fec else { return };
        if self.cfg.nack {
            return;
        }
        let newest = self.newest_frame;
        let mut lost = Vec::new();
        let h = lock(&self.headers);
        for f in self.next_decode..newest.saturating_sub(u64::from(t.tau)) {
            let n = h.frames.get(f as usize).map_or(0, |i| i.n_packets);
            let have = self.frames.get(&f).map_or(0, |s| s.have);
            if have < n {
                lost.push(f);
            }
        }
        drop(h);
        for f in lost {
            self.frames.entry(f).or_default().lost = true;
        }
    }

    /// Decodes and schedules rendering of every frame that has become decodable.
    fn advance(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        self.fec_deadline();
        loop {
            let f = self.next_decode;
            let complete = |r: &Self, g: u64| r.complete.get(g as usize).is_some_and(|c| c.is_some());
            let stuck = self.key_needed || self.frames.get(&f).is_some_and(|s| s.lost);
            if stuck && self.last_pli.is_none_or(|t| now.saturating_duration_since(t) >= KEYFRAME_WAIT) {
                self.send_pli(ctx);
            }
            // A complete key frame newer than a stuck or incomplete frame takes over.
            if stuck || !complete(self, f) {
                let h = lock(&self.headers);
                let key = (f + 1..=self.newest_frame)
                    .find(|&g| h.frames.get(g as usize).is_some_and(|i| i.key) && complete(self, g));
                let key = key.or_else(|| {
                    (self.key_needed && h.frames.get(f as usize).is_some_and(|i| i.key) && complete(self, f))
                        .then_some(f)
                });
                drop(h);
                match key {
                    Some(k) => {
                        self.next_decode = k;
                        self.key_needed = false;
                        self.frames = self.frames.split_off(&k);
                        // libwebrtc's NackRequester drops the requests older than a decoded key frame.
                        let first = lock(&self.headers).frames.get(k as usize).map_or(0, |i| i.first_seq);
                        self.nack = self.nack.split_off(&first);
                    }
                    None => break,
                }
            }
            let f = self.next_decode;
            let Some(info) = lock(&self.headers).frames.get(f as usize).copied() else { break };
            let r = self.jb.render_time(now, info.capture, self.rtt).max(self.last_render);
            self.frame_slot(f);
            self.render[f as usize] = Some(r);
            self.last_render = r;
            self.last_progress = now;
            self.frames.remove(&f);
            self.next_decode = f + 1;
            let first = info.first_seq;
            self.got = self.got.split_off(&first);
            self.nack = self.nack.split_off(&first);
        }
    }
}

impl Agent for WebrtcReceiver {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        let t = self.start.max(ctx.now());
        self.last_progress = t;
        ctx.timer(t, TOKEN_PROCESS);
        ctx.timer(t, TOKEN_REPORT);
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        if p.flow != self.flow {
            return;
        }
        let now = ctx.now();
        if p.flags & FLAG_MEDIA != 0 {
            let rtx = p.flags & FLAG_RTX != 0;
            self.detect_gap(p.seq, ctx);
            self.on_media(p.seq, rtx, now);
            self.tambur(now);
        } else if p.flags & FLAG_FEC != 0 {
            let info = lock(&self.headers).frame_of_parity(p.seq).copied();
            if let (Some(info), Some(d)) = (info, self.decoder.as_mut()) {
                if info.frame + 1 >= self.next_decode {
                    // The FEC header lists the layouts of the frames the parity covers.
                    let h = lock(&self.headers);
                    for g in info.frame.saturating_sub(2 * u64::from(d_tau(&self.cfg)))..=info.frame {
                        if let Some(l) = h.frames.get(g as usize).and_then(|i| i.layout) {
                            d.add_layout(l);
                        }
                    }
                    drop(h);
                    d.add_parity(info.frame, p.seq, None);
                    self.parity_pending = true;
                    self.newest_frame = self.newest_frame.max(info.frame);
                    self.tambur(now);
                }
            }
        } else if p.flags & FLAG_DLRR != 0 {
            self.rtt = now.saturating_duration_since(Instant(p.ack)).max(Duration::from_micros(1));
        }
        self.advance(ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let now = ctx.now();
        match token {
            TOKEN_PROCESS => {
                if self.cfg.nack {
                    self.process_nacks(ctx, false);
                }
                if now.saturating_duration_since(self.last_progress) >= FRAME_WAIT
                    && self.last_pli.is_none_or(|t| now.saturating_duration_since(t) >= FRAME_WAIT)
                {
                    self.send_pli(ctx);
                }
                self.advance(ctx);
                ctx.timer(now + PROCESS_INTERVAL, TOKEN_PROCESS);
            }
            TOKEN_REPORT => {
                self.send_report(ctx);
                ctx.timer(now + REPORT_INTERVAL, TOKEN_REPORT);
            }
            _ => {}
        }
    }
}

fn d_tau(cfg: &WebrtcConfig) -> u32 {
    match cfg.fec {
        Fec::Tambur(t) => t.tau,
        Fec::None => 0,
    }
}
