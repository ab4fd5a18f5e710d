//! A WebRTC video call (one direction) as simulator agents: an RTP sender with key/delta frames,
//! pacing, a retransmission history and optional Tambur FEC, and a receiver with libwebrtc's NACK
//! behaviour, key frame requests, frame dependencies and an adaptive jitter buffer. Per-frame
//! capture / complete / render times give the SATGUARD paper's WebRTC metrics (§4, Figs 15–17:
//! user-perceived delay, jitter-buffer delay, frames per second). See docs/webrtc.md.
//!
//! Packets carry no payload: what real RTP/RTCP packets carry in their headers (RTP timestamp and
//! frame boundaries, the NACKed sequence numbers, Tambur's FEC header listing the frame layouts) is
//! kept in a [`Headers`] table shared by the two ends and keyed by what the packet carries; the
//! receiver reads only the entries of packets that reached it.

pub mod jitter;
pub mod receiver;
pub mod sender;

pub use receiver::WebrtcReceiver;
pub use sender::WebrtcSender;

use leoguard_core::{Duration, Instant};
use leoguard_proto::tambur::{FrameLayout, TamburConfig};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Packet flag: RTP media.
pub const FLAG_MEDIA: u16 = 1;
/// Packet flag: a retransmission (RFC 4588 RTX) of a media packet.
pub const FLAG_RTX: u16 = 4;
/// Packet flag: a Tambur parity packet.
pub const FLAG_FEC: u16 = 8;
/// Packet flag: RTCP generic NACK (RFC 4585 §6.2.1).
pub const FLAG_NACK: u16 = 16;
/// Packet flag: RTCP Picture Loss Indication (RFC 4585 §6.3.1).
pub const FLAG_PLI: u16 = 32;
/// Packet flag: RTCP receiver report with an XR receiver reference time (RFC 3611 §4.4).
pub const FLAG_RR: u16 = 64;
/// Packet flag: RTCP XR DLRR answering a receiver reference time (RFC 3611 §4.5).
pub const FLAG_DLRR: u16 = 128;

/// IPv4 (20) + UDP (8) + RTP (12) + header extensions (12: transport-wide sequence number and
/// absolute send time in a one-byte-header extension block, RFC 8285) per media packet.
pub const RTP_OVERHEAD: u32 = 52;
/// Tambur's FEC header (frame number, parity index, layouts of the covered frames), bytes.
pub const FEC_HEADER: u32 = 16;
/// IPv4 + UDP + RTCP common header and SSRCs: the fixed part of an RTCP feedback packet.
pub const RTCP_BASE: u32 = 20 + 8 + 12;

/// Forward error correction of a WebRTC flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fec {
    /// None (loss repaired by NACK/retransmission and key frames only).
    None,
    /// Tambur's streaming code over the video frames.
    Tambur(TamburConfig),
}

/// Parameters of a WebRTC flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebrtcConfig {
    /// Target video bitrate, bit/s (payload; headers come on top).
    pub bitrate_bps: u64,
    /// Frames per second.
    pub fps: u32,
    /// Periodic key frame interval (None: key frames only at the start and on PLI).
    pub keyframe_interval: Option<Duration>,
    /// Key frame size over the mean delta frame size.
    pub key_ratio: f64,
    /// Standard deviation of the log of delta frame sizes (log-normal variation around the mean).
    pub size_sigma: f64,
    /// Largest RTP payload, bytes (libwebrtc: 1200).
    pub max_payload: u32,
    /// Pacing rate over the target bitrate (libwebrtc's pacing factor 2.5); 0: burst per frame.
    pub pacing_factor: f64,
    /// Generic NACK and retransmission on.
    pub nack: bool,
    /// How long the sender keeps sent packets for retransmission.
    pub history: Duration,
    /// FEC.
    pub fec: Fec,
    /// Jitter buffer: window of the delay-variation estimate.
    pub jitter_window: Duration,
    /// Jitter buffer: percentile of the frame delay variation covered.
    pub jitter_percentile: f64,
}

impl Default for WebrtcConfig {
    fn default() -> Self {
        WebrtcConfig {
            bitrate_bps: 2_500_000,
            fps: 30,
            keyframe_interval: Some(Duration::from_secs(3)),
            key_ratio: 6.0,
            size_sigma: 0.25,
            max_payload: 1200,
            pacing_factor: 2.5,
            nack: true,
            history: Duration::from_secs(1),
            fec: Fec::None,
            jitter_window: Duration::from_secs(5),
            jitter_percentile: 99.0,
        }
    }
}

impl WebrtcConfig {
    /// Time between captured frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.fps.max(1)))
    }

    /// Mean delta frame payload, bytes: the bitrate's bytes per frame, less what the periodic key
    /// frames (each `key_ratio` deltas) take of a key interval.
    pub fn mean_delta_bytes(&self) -> f64 {
        let per_frame = self.bitrate_bps as f64 / 8.0 / f64::from(self.fps.max(1));
        match self.keyframe_interval {
            Some(k) => {
                let n = (k.as_secs_f64() * f64::from(self.fps)).max(1.0);
                per_frame * n / (n - 1.0 + self.key_ratio)
            }
            None => per_frame,
        }
    }

    /// Checks the parameters; the error names the field (relative to the flow).
    pub fn validate(&self) -> Result<(), (&'static str, String, &'static str)> {
        if !(10_000..=100_000_000).contains(&self.bitrate_bps) {
            return Err(("bitrate_mbps", (self.bitrate_bps as f64 / 1e6).to_string(), "must be in [0.01, 100] Mbit/s"));
        }
        if !(1..=120).contains(&self.fps) {
            return Err(("fps", self.fps.to_string(), "must be in [1, 120]"));
        }
        if let Some(k) = self.keyframe_interval {
            if k < self.frame_interval() {
                return Err(("keyframe_interval_s", k.as_secs_f64().to_string(), "must be at least one frame"));
            }
        }
        if !(1.0..=50.0).contains(&self.key_ratio) {
            return Err(("key_ratio", self.key_ratio.to_string(), "must be in [1, 50]"));
        }
        if !(0.0..=2.0).contains(&self.size_sigma) {
            return Err(("size_sigma", self.size_sigma.to_string(), "must be in [0, 2]"));
        }
        if !(100..=9000).contains(&self.max_payload) {
            return Err(("max_payload", self.max_payload.to_string(), "must be in [100, 9000] bytes"));
        }
        if !(self.pacing_factor == 0.0 || (1.0..=100.0).contains(&self.pacing_factor)) {
            return Err(("pacing_factor", self.pacing_factor.to_string(), "must be 0 (burst) or in [1, 100]"));
        }
        if self.history < Duration::from_millis(100) {
            return Err(("history_s", self.history.as_secs_f64().to_string(), "must be >= 0.1 s"));
        }
        if self.jitter_window < self.frame_interval() {
            return Err((
                "jitter_window_s",
                self.jitter_window.as_secs_f64().to_string(),
                "must be at least one frame",
            ));
        }
        if !(50.0..=100.0).contains(&self.jitter_percentile) {
            return Err(("jitter_percentile", self.jitter_percentile.to_string(), "must be in [50, 100]"));
        }
        if let Fec::Tambur(t) = self.fec {
            t.validate().map_err(|_| ("tambur", format!("{t:?}"), "invalid Tambur parameters"))?;
        }
        Ok(())
    }
}

/// What the headers of a frame's packets tell the receiver.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameInfo {
    /// Frame number.
    pub frame: u64,
    /// Capture time (RTP timestamp).
    pub capture: Instant,
    /// Key frame.
    pub key: bool,
    /// Payload bytes.
    pub size: u32,
    /// First RTP sequence number.
    pub first_seq: u64,
    /// Packets.
    pub n_packets: u32,
    /// Tambur layout (FEC on).
    pub layout: Option<FrameLayout>,
}

/// Header contents of one flow's packets, shared by its two ends (see the module doc).
#[derive(Debug, Default)]
pub struct Headers {
    /// Frames by number.
    pub frames: Vec<FrameInfo>,
    /// Frame number by first sequence number.
    pub by_seq: BTreeMap<u64, u64>,
    /// Frame number by first parity number.
    pub by_parity: BTreeMap<u64, u64>,
    /// Sequence numbers listed by each NACK packet (by its number).
    pub nacks: Vec<Vec<u64>>,
}

impl Headers {
    /// The frame a media sequence number belongs to.
    pub fn frame_of_seq(&self, seq: u64) -> Option<&FrameInfo> {
        let (_, &f) = self.by_seq.range(..=seq).next_back()?;
        let i = self.frames.get(f as usize)?;
        (seq < i.first_seq + u64::from(i.n_packets)).then_some(i)
    }

    /// The frame a parity number belongs to.
    pub fn frame_of_parity(&self, id: u64) -> Option<&FrameInfo> {
        let (_, &f) = self.by_parity.range(..=id).next_back()?;
        self.frames.get(f as usize)
    }
}

/// The shared table.
pub type SharedHeaders = Arc<Mutex<Headers>>;

/// Locks the table (a poisoned lock only means another agent panicked; the data is still whole).
pub(crate) fn lock(h: &SharedHeaders) -> std::sync::MutexGuard<'_, Headers> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

/// One frame's life (per-frame results).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRow {
    /// Flow index.
    pub flow: u32,
    /// Frame number.
    pub frame: u64,
    /// Key frame.
    pub key: bool,
    /// Payload bytes.
    pub size: u32,
    /// Capture, ns.
    pub capture_ns: u64,
    /// All packets received or recovered, ns.
    pub complete_ns: Option<u64>,
    /// Rendered, ns (None: never rendered).
    pub render_ns: Option<u64>,
}

/// Frames rendered during one second of a flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FpsRow {
    /// Flow index.
    pub flow: u32,
    /// Start of the second, s.
    pub t_s: f64,
    /// Frames rendered in [t_s, t_s + 1).
    pub fps: f64,
}

/// Per-flow summary of a WebRTC flow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WebrtcSummary {
    /// Flow index.
    pub flow: u32,
    /// Frames captured and sent.
    pub frames_sent: u64,
    /// Of which key frames.
    pub key_frames: u64,
    /// Frames rendered.
    pub frames_rendered: u64,
    /// Capture-to-render delay, ms: median, 95th percentile, mean (rendered frames).
    pub e2e_p50_ms: f64,
    /// 95th percentile.
    pub e2e_p95_ms: f64,
    /// Mean.
    pub e2e_mean_ms: f64,
    /// Jitter-buffer delay (complete-to-render), ms: median.
    pub jb_p50_ms: f64,
    /// 95th percentile.
    pub jb_p95_ms: f64,
    /// Mean.
    pub jb_mean_ms: f64,
    /// Frames rendered per second: mean over whole seconds of the call.
    pub fps_mean: f64,
    /// Standard deviation.
    pub fps_std: f64,
    /// Freezes (W3C webrtc-stats freezeCount definition).
    pub freezes: u64,
    /// Their total duration, s.
    pub freeze_s: f64,
    /// NACK packets sent by the receiver.
    pub nacks: u64,
    /// Sequence numbers requested by them (with repeats).
    pub nacked_packets: u64,
    /// Key frame requests (PLI) sent.
    pub plis: u64,
    /// Media packets retransmitted.
    pub retransmissions: u64,
    /// Media packets sent (first transmissions).
    pub media_packets: u64,
    /// Parity packets sent (Tambur).
    pub parity_packets: u64,
    /// Media packets recovered by FEC.
    pub fec_recovered: u64,
    /// Bytes on the wire from the sender (media, retransmissions, parity).
    pub bytes_sent: u64,
}

/// Linear-interpolated percentile of sorted values (p in [0, 100]).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let x = (p / 100.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
}

/// Freezes among render times (ns, ascending): W3C webrtc-stats `freezeCount`: a gap between two
/// rendered frames longer than max(3 · d, d + 150 ms), d the mean duration of the last 30 rendered
/// frames' gaps (libwebrtc's VideoQualityObserver). Returns (count, total duration in s).
pub fn freezes(render_ns: &[u64]) -> (u64, f64) {
    let mut gaps: std::collections::VecDeque<f64> = std::collections::VecDeque::new();
    let (mut n, mut total) = (0u64, 0.0);
    for w in render_ns.windows(2) {
        let gap = (w[1] - w[0]) as f64 / 1e6;
        if !gaps.is_empty() {
            let d = gaps.iter().sum::<f64>() / gaps.len() as f64;
            if gap > (3.0 * d).max(d + 150.0) {
                n += 1;
                total += gap / 1e3;
            }
        }
        gaps.push_back(gap);
        if gaps.len() > 30 {
            gaps.pop_front();
        }
    }
    (n, total)
}

/// Frames rendered per whole second from `start` (the first render) to `end` (seconds that ended
/// before `end`).
pub fn fps_series(flow: u32, render_ns: &[u64], start: Instant, end: Instant) -> Vec<FpsRow> {
    let secs = end.saturating_duration_since(start).as_nanos() / 1_000_000_000;
    let mut counts = vec![0u32; secs as usize];
    for &r in render_ns {
        let k = r.saturating_sub(start.as_nanos()) / 1_000_000_000;
        if r >= start.as_nanos() && k < secs {
            counts[k as usize] += 1;
        }
    }
    (counts.iter().enumerate())
        .map(|(k, &c)| FpsRow { flow, t_s: start.as_secs_f64() + k as f64, fps: f64::from(c) })
        .collect()
}

/// Fills the delay, FPS and freeze figures of `s` from the flow's frames.
pub fn summarize(s: &mut WebrtcSummary, rows: &[FrameRow], fps: &[FpsRow]) {
    let mut e2e: Vec<f64> = Vec::new();
    let mut jb: Vec<f64> = Vec::new();
    let mut renders: Vec<u64> = Vec::new();
    for r in rows {
        if let Some(t) = r.render_ns {
            e2e.push((t - r.capture_ns) as f64 / 1e6);
            if let Some(c) = r.complete_ns {
                jb.push(t.saturating_sub(c) as f64 / 1e6);
            }
            renders.push(t);
        }
    }
    renders.sort_unstable();
    e2e.sort_by(f64::total_cmp);
    jb.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    s.frames_rendered = renders.len() as u64;
    (s.e2e_p50_ms, s.e2e_p95_ms, s.e2e_mean_ms) = (percentile(&e2e, 50.0), percentile(&e2e, 95.0), mean(&e2e));
    (s.jb_p50_ms, s.jb_p95_ms, s.jb_mean_ms) = (percentile(&jb, 50.0), percentile(&jb, 95.0), mean(&jb));
    let f: Vec<f64> = fps.iter().map(|r| r.fps).collect();
    s.fps_mean = mean(&f);
    s.fps_std = if f.is_empty() {
        f64::NAN
    } else {
        (f.iter().map(|x| (x - s.fps_mean).powi(2)).sum::<f64>() / f.len() as f64).sqrt()
    };
    (s.freezes, s.freeze_s) = freezes(&renders);
}

/// The two ends of a WebRTC flow from `src` to `dst`, first frame captured at `start`; frame sizes
/// drawn from the run seed's stream "webrtc/<flow>". Returns (sender, receiver).
pub fn agents(
    flow: u32,
    src: u32,
    dst: u32,
    cfg: WebrtcConfig,
    start: Instant,
    tc: u8,
    seed: u64,
) -> (Box<dyn crate::sim::Agent>, Box<dyn crate::sim::Agent>) {
    use crate::engine::NodeId;
    let headers = SharedHeaders::default();
    let rng = leoguard_core::stream(seed, &format!("webrtc/{flow}"));
    let mut tx = WebrtcSender::new(flow, NodeId(dst), cfg, Arc::clone(&headers), rng);
    tx.start = start;
    tx.tc = tc;
    let mut rx = WebrtcReceiver::new(flow, NodeId(src), cfg, headers);
    rx.start = start;
    rx.tc = tc;
    (Box::new(tx), Box::new(rx))
}

/// Attaches a WebRTC flow (see [`agents`]) to `sim`; returns (sender, receiver).
#[allow(clippy::too_many_arguments)]
pub fn attach(
    sim: &mut crate::sim::Sim,
    flow: u32,
    src: u32,
    dst: u32,
    cfg: WebrtcConfig,
    start: Instant,
    tc: u8,
    seed: u64,
) -> (crate::sim::AgentId, crate::sim::AgentId) {
    use crate::engine::NodeId;
    let (tx, rx) = agents(flow, src, dst, cfg, start, tc, seed);
    (sim.attach_flow(NodeId(src), flow, tx), sim.attach_flow(NodeId(dst), flow, rx))
}

/// The results of a WebRTC flow up to `end`: per-frame rows, the FPS series and the summary.
pub fn collect(
    sim: &crate::sim::Sim,
    flow: u32,
    ends: (crate::sim::AgentId, crate::sim::AgentId),
    end: Instant,
) -> (Vec<FrameRow>, Vec<FpsRow>, WebrtcSummary) {
    let get = |id| sim.agent_by_id(id).map(|a| a.as_any());
    let (Some(tx), Some(rx)) = (
        get(ends.0).and_then(|a| a.downcast_ref::<WebrtcSender>()),
        get(ends.1).and_then(|a| a.downcast_ref::<WebrtcReceiver>()),
    ) else {
        return (Vec::new(), Vec::new(), WebrtcSummary { flow, ..Default::default() });
    };
    let h = lock(&tx.headers);
    let rows: Vec<FrameRow> = (h.frames.iter())
        .map(|i| FrameRow {
            flow,
            frame: i.frame,
            key: i.key,
            size: i.size,
            capture_ns: i.capture.as_nanos(),
            complete_ns: rx.complete.get(i.frame as usize).copied().flatten().map(|t| t.as_nanos()),
            // A render time past the end of the run has not happened yet.
            render_ns: rx.render.get(i.frame as usize).copied().flatten().filter(|&t| t <= end).map(|t| t.as_nanos()),
        })
        .collect();
    drop(h);
    let renders: Vec<u64> = rows.iter().filter_map(|r| r.render_ns).collect();
    // Seconds of the call counted from its first rendered frame (playout start).
    let first = renders.iter().min().map_or(end, |&t| Instant(t));
    let fps = fps_series(flow, &renders, first, end);
    let mut s = WebrtcSummary {
        flow,
        frames_sent: tx.stats.frames,
        key_frames: tx.stats.key_frames,
        nacks: rx.stats.nacks,
        nacked_packets: rx.stats.nacked_packets,
        plis: rx.stats.plis,
        retransmissions: tx.stats.retransmissions,
        media_packets: tx.stats.media_packets,
        parity_packets: tx.stats.parity_packets,
        fec_recovered: rx.stats.fec_recovered,
        bytes_sent: tx.stats.bytes_sent,
        ..Default::default()
    };
    summarize(&mut s, &rows, &fps);
    (rows, fps, s)
}

#[cfg(test)]
mod tests;
