//! The receiver's playout timing: when a decodable frame is rendered.
//!
//! As libwebrtc's `VCMTiming`: a frame is rendered at its capture time mapped to local time plus the
//! *current delay*, which moves towards a *target delay* by at most 100 ms per second of media
//! (`kDelayMaxChangeMsPerS`) and jumps up at once by the lateness of a frame that was ready after its
//! render time (capped at the target). The target is the jitter estimate + the operating-system
//! jitter allowance (10 ms, `OPERATING_SYSTEM_JITTER`) + the render delay (10 ms,
//! `kDefaultRenderDelayMs`), plus one RTT once three frames were delayed by retransmission within
//! 60 s (libwebrtc's jitter estimator adds `rtt × rtt_mult`, rtt_mult = 1 with NACK, after
//! `kNackLimit` = 3 NACKed frames; `kNackCountTimeout` = 60 s).
//!
//! The jitter estimate itself is not libwebrtc's Kalman filter (frame delay against frame size, noise
//! threshold 2.33 σ): it is the empirical `percentile` (default 99, the Gaussian quantile 2.33 σ
//! stands for) of the frame transit delays above their minimum over the last `window` of frames
//! not delayed by retransmission (libwebrtc keeps those out of the estimate too). The capture-to-local
//! time mapping (libwebrtc's `TimestampExtrapolator`) is the minimum transit delay over the window.

use leoguard_core::{Duration, Instant};
use std::collections::VecDeque;

/// libwebrtc OPERATING_SYSTEM_JITTER.
pub const OS_JITTER: Duration = Duration::from_millis(10);
/// libwebrtc kDefaultRenderDelayMs.
pub const RENDER_DELAY: Duration = Duration::from_millis(10);
/// libwebrtc kDelayMaxChangeMsPerS, as a fraction of media time.
const MAX_CHANGE_PER_S: f64 = 0.1;
/// libwebrtc kNackLimit.
const NACK_LIMIT: usize = 3;
/// libwebrtc kNackCountTimeoutMs.
const NACK_TIMEOUT: Duration = Duration::from_secs(60);

/// Playout timing state.
#[derive(Clone, Debug)]
pub struct JitterBuffer {
    window: Duration,
    percentile: f64,
    /// (complete time, transit ns) of frames not delayed by retransmission, within the window.
    samples: VecDeque<(Instant, u64)>,
    /// (complete time, transit ns) of all complete frames, within the window (for the mapping).
    all: VecDeque<(Instant, u64)>,
    nacked: VecDeque<Instant>,
    current: Option<Duration>,
    last_capture: Option<Instant>,
}

impl JitterBuffer {
    /// Empty state.
    pub fn new(window: Duration, percentile: f64) -> Self {
        JitterBuffer {
            window,
            percentile,
            samples: VecDeque::new(),
            all: VecDeque::new(),
            nacked: VecDeque::new(),
            current: None,
            last_capture: None,
        }
    }

    fn prune(&mut self, now: Instant) {
        let cut = |t: Instant| now.saturating_duration_since(t) > self.window;
        while self.samples.front().is_some_and(|s| cut(s.0)) {
            self.samples.pop_front();
        }
        while self.all.front().is_some_and(|s| cut(s.0)) {
            self.all.pop_front();
        }
        while self.nacked.front().is_some_and(|&t| now.saturating_duration_since(t) > NACK_TIMEOUT) {
            self.nacked.pop_front();
        }
    }

    /// A frame captured at `capture` became complete at `now`.
    pub fn on_complete(&mut self, now: Instant, capture: Instant, retransmitted: bool) {
        let transit = now.saturating_duration_since(capture).as_nanos();
        self.all.push_back((now, transit));
        if retransmitted {
            self.nacked.push_back(now);
        } else {
            self.samples.push_back((now, transit));
        }
        self.prune(now);
    }

    /// Minimum transit over the window (the capture-to-local-time mapping).
    pub fn base(&self) -> Duration {
        Duration::from_nanos(self.all.iter().map(|s| s.1).min().unwrap_or(0))
    }

    /// The jitter estimate: percentile of transit above the window's minimum.
    pub fn jitter(&self) -> Duration {
        let base = self.base().as_nanos();
        let mut v: Vec<f64> = self.samples.iter().map(|s| s.1.saturating_sub(base) as f64).collect();
        if v.is_empty() {
            return Duration::ZERO;
        }
        v.sort_by(f64::total_cmp);
        Duration::from_nanos(super::percentile(&v, self.percentile).max(0.0) as u64)
    }

    /// The target delay given the current RTT.
    pub fn target(&self, rtt: Duration) -> Duration {
        let nack = if self.nacked.len() >= NACK_LIMIT { rtt } else { Duration::ZERO };
        self.jitter() + OS_JITTER + nack + RENDER_DELAY
    }

    /// The current delay (None before the first frame).
    pub fn current(&self) -> Option<Duration> {
        self.current
    }

    /// Render time of a frame captured at `capture` that is ready for decoding at `now`.
    pub fn render_time(&mut self, now: Instant, capture: Instant, rtt: Duration) -> Instant {
        self.prune(now);
        let target = self.target(rtt);
        let cur = match (self.current, self.last_capture) {
            (Some(c), Some(prev)) => {
                let media = capture.saturating_duration_since(prev).as_secs_f64();
                let max_change = media * MAX_CHANGE_PER_S * 1e9;
                let diff = (target.as_nanos() as f64 - c.as_nanos() as f64).clamp(-max_change, max_change);
                Duration::from_nanos((c.as_nanos() as f64 + diff).max(0.0) as u64)
            }
            _ => target,
        };
        let mut cur = cur;
        // A frame ready after its render time pushes the delay up by its lateness (up to the target).
        let render = capture + self.base() + cur;
        if now > render {
            let late = now - render;
            cur = (cur + late).min(target.max(cur));
        }
        self.current = Some(cur);
        self.last_capture = Some(capture);
        (capture + self.base() + cur).max(now)
    }
}
