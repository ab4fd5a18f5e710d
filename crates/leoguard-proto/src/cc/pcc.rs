//! What PCC Allegro (NSDI'15) and PCC Vivace (NSDI'18) share: monitor intervals (MIs) built from the
//! sender's per-segment callbacks, and how a rate becomes a pacing rate and a window.
//!
//! An MI is a span of sending time at one target rate. Every segment sent (or resent) in it counts
//! towards it; a segment's delivery or loss is attributed to the MI it was last sent in (by its send
//! time, [`CongestionControl::on_packet_delivered`] / [`CongestionControl::on_packet_lost`]). The
//! MI's outcome is known once every byte sent in it is delivered or lost, or, for the few that never
//! are (a Tail Loss Probe resends a segment that was not marked lost: its delivery counts in the
//! probe's MI), once [`stale_after`] has passed since the MI ended; bytes still unresolved then count
//! as lost. Outcomes come out in MI order.
//!
//! The RTT gradient dRTT/dt of an MI is the slope of a least-squares line through its RTT samples
//! against their send times, as PCC-Uspace computes it (running sums: no allocation per packet);
//! with fewer than two samples at distinct times it is 0.
//!
//! The rate of an MI in the utility is its target rate (the pacer holds the sender to it; the window
//! is kept at twice rate x SRTT so that it does not).
//!
//! [`CongestionControl::on_packet_delivered`]: super::CongestionControl::on_packet_delivered
//! [`CongestionControl::on_packet_lost`]: super::CongestionControl::on_packet_lost

use leoguard_core::{Bps, Duration, Instant};
use std::collections::VecDeque;

/// RTT assumed before the first sample (PCC-Uspace's initial RTT): sizes the first MIs and rates.
pub const DEFAULT_RTT: Duration = Duration::from_millis(100);
/// An MI ends only once it holds this many segments, so that its loss rate means something.
pub const MIN_PACKETS: u64 = 4;
/// The window never falls below this many segments.
const MIN_CWND_SEGMENTS: u64 = 4;

/// How long after an MI ended its unresolved bytes count as lost: 4 SRTT, at least 200 ms (well past
/// RACK's and the Tail Loss Probe's timers; the retransmission timer resolves the rest before).
pub fn stale_after(srtt: Option<Duration>) -> Duration {
    let s = srtt.unwrap_or(DEFAULT_RTT).as_nanos();
    Duration((4 * s).max(Duration::from_millis(200).as_nanos()))
}

/// The window a rate-based controller keeps: twice rate x SRTT (at least 4 segments), large enough
/// that pacing, not the window, sets the sending rate.
pub fn cwnd_for(rate: Bps, srtt: Option<Duration>, mss: u64) -> u64 {
    let rtt = srtt.filter(|s| *s > Duration::ZERO).unwrap_or(DEFAULT_RTT);
    (2 * rate.bytes_in(rtt).0).max(MIN_CWND_SEGMENTS * mss)
}

/// Megabits per second of a rate (the utility functions' unit).
pub fn mbps(rate: Bps) -> f64 {
    rate.0 as f64 / 1e6
}

/// A rate from megabits per second (rounded down, at least 1 bit/s).
pub fn from_mbps(x: f64) -> Bps {
    Bps((x * 1e6).max(1.0) as u64)
}

/// Least-squares sums of (x = send time since the MI's start, y = RTT), seconds.
#[derive(Clone, Copy, Debug, Default)]
struct Regression {
    n: u32,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl Regression {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }

    /// The slope dy/dx, 0 without two samples at distinct times.
    fn slope(&self) -> f64 {
        let n = f64::from(self.n);
        let den = n * self.sxx - self.sx * self.sx;
        if self.n < 2 || den.abs() <= f64::EPSILON * n * self.sxx.max(1e-300) {
            return 0.0;
        }
        (n * self.sxy - self.sx * self.sy) / den
    }
}

#[derive(Clone, Copy, Debug)]
struct Mi<T> {
    tag: T,
    rate: Bps,
    start: Instant,
    /// When the next MI started (`None` while this one is open).
    end: Option<Instant>,
    last_sent: Instant,
    packets: u64,
    sent: u64,
    acked: u64,
    lost: u64,
    reg: Regression,
    /// RTT samples of the earliest- and latest-sent segments: (send time, RTT).
    first_rtt: Option<(Instant, Duration)>,
    last_rtt: Option<(Instant, Duration)>,
}

/// What one MI found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiOutcome<T> {
    /// The controller's label for the MI.
    pub tag: T,
    /// Its target sending rate.
    pub rate: Bps,
    /// When it started and ended.
    pub start: Instant,
    /// When the next MI started.
    pub end: Instant,
    /// Bytes sent in it.
    pub sent: u64,
    /// Of those, bytes delivered.
    pub acked: u64,
    /// Bytes lost (unresolved bytes of a stale MI included).
    pub lost: u64,
    /// RTT samples taken.
    pub rtt_samples: u32,
    /// dRTT/dt, seconds per second (least-squares slope over the MI's samples).
    pub rtt_gradient: f64,
    /// RTT of the earliest- and latest-sent sampled segments.
    pub start_rtt: Option<Duration>,
    /// See `start_rtt`.
    pub end_rtt: Option<Duration>,
}

impl<T> MiOutcome<T> {
    /// Loss rate L: lost / (delivered + lost), 0 for an empty MI.
    pub fn loss_rate(&self) -> f64 {
        let total = self.acked + self.lost;
        if total == 0 {
            0.0
        } else {
            self.lost as f64 / total as f64
        }
    }

    /// The MI's rate in Mbit/s.
    pub fn rate_mbps(&self) -> f64 {
        mbps(self.rate)
    }
}

/// The MIs whose outcome is not known yet, oldest first; the last one is open while sending goes on.
#[derive(Clone, Debug)]
pub struct Monitor<T> {
    mis: VecDeque<Mi<T>>,
}

impl<T> Default for Monitor<T> {
    fn default() -> Self {
        Monitor { mis: VecDeque::new() }
    }
}

impl<T: Copy> Monitor<T> {
    /// Whether the open MI has run `duration` with at least [`MIN_PACKETS`] segments and nothing
    /// sent yet at `now` (so that every segment of one instant falls in one MI); true without one.
    pub fn due(&self, now: Instant, duration: Duration) -> bool {
        match self.mis.back() {
            Some(mi) if mi.end.is_none() => {
                now >= mi.start + duration && mi.packets >= MIN_PACKETS && now > mi.last_sent
            }
            _ => true,
        }
    }

    /// Ends the open MI (if any) at `now` and opens one at `rate` labelled `tag`.
    pub fn open(&mut self, now: Instant, rate: Bps, tag: T) {
        if let Some(mi) = self.mis.back_mut() {
            if mi.end.is_none() {
                mi.end = Some(now);
            }
        }
        self.mis.push_back(Mi {
            tag,
            rate,
            start: now,
            end: None,
            last_sent: Instant::ZERO,
            packets: 0,
            sent: 0,
            acked: 0,
            lost: 0,
            reg: Regression::default(),
            first_rtt: None,
            last_rtt: None,
        });
    }

    /// The open MI's target rate and label.
    pub fn current(&self) -> Option<(Bps, T)> {
        self.mis.back().filter(|mi| mi.end.is_none()).map(|mi| (mi.rate, mi.tag))
    }

    /// MIs awaiting their outcome (the open one included).
    pub fn len(&self) -> usize {
        self.mis.len()
    }

    /// Whether no MI is tracked.
    pub fn is_empty(&self) -> bool {
        self.mis.is_empty()
    }

    /// A segment of `bytes` left at `now`: it counts in the open MI.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        if let Some(mi) = self.mis.back_mut().filter(|mi| mi.end.is_none()) {
            mi.packets += 1;
            mi.sent += bytes;
            mi.last_sent = now;
        }
    }

    /// The MI a segment sent at `sent_at` was counted in (recent MIs are searched first).
    fn find(&mut self, sent_at: Instant) -> Option<&mut Mi<T>> {
        self.mis.iter_mut().rev().find(|mi| mi.start <= sent_at && mi.end.is_none_or(|e| sent_at < e))
    }

    /// A segment sent at `sent_at` was delivered, with RTT sample `rtt` if it gave one.
    pub fn on_delivered(&mut self, sent_at: Instant, bytes: u64, rtt: Option<Duration>) {
        let Some(mi) = self.find(sent_at) else { return };
        mi.acked += bytes;
        if let Some(r) = rtt {
            let x = sent_at.saturating_duration_since(mi.start).as_secs_f64();
            mi.reg.add(x, r.as_secs_f64());
            if mi.first_rtt.is_none_or(|(t, _)| sent_at < t) {
                mi.first_rtt = Some((sent_at, r));
            }
            if mi.last_rtt.is_none_or(|(t, _)| sent_at >= t) {
                mi.last_rtt = Some((sent_at, r));
            }
        }
    }

    /// A segment sent at `sent_at` was marked lost.
    pub fn on_lost(&mut self, sent_at: Instant, bytes: u64) {
        if let Some(mi) = self.find(sent_at) {
            mi.lost += bytes;
        }
    }

    /// The oldest MI's outcome, once it is ended and every byte of it is resolved (or it is stale:
    /// `stale_after` past its end).
    pub fn pop(&mut self, now: Instant, stale_after: Duration) -> Option<MiOutcome<T>> {
        let mi = self.mis.front()?;
        let end = mi.end?;
        let resolved = mi.acked + mi.lost >= mi.sent;
        if !resolved && now < end + stale_after {
            return None;
        }
        let mi = self.mis.pop_front()?;
        Some(MiOutcome {
            tag: mi.tag,
            rate: mi.rate,
            start: mi.start,
            end,
            sent: mi.sent,
            acked: mi.acked,
            lost: mi.lost.max(mi.sent.saturating_sub(mi.acked)),
            rtt_samples: mi.reg.n,
            rtt_gradient: mi.reg.slope(),
            start_rtt: mi.first_rtt.map(|(_, r)| r),
            end_rtt: mi.last_rtt.map(|(_, r)| r),
        })
    }
}

/// What both algorithms keep alike: the segment size, the MIs in flight and the smoothed RTT.
#[derive(Clone, Debug)]
pub(crate) struct Core<T> {
    pub mss: u64,
    pub monitor: Monitor<T>,
    pub srtt: Option<Duration>,
}

impl<T> Core<T> {
    pub fn new(mss: u64) -> Core<T> {
        Core { mss, monitor: Monitor::default(), srtt: None }
    }
}

/// A PCC algorithm: how it picks each MI's rate and learns from each MI's outcome. The
/// [`CongestionControl`](super::CongestionControl) plumbing Allegro and Vivace share (an MI opened on
/// a send when the open one is due, outcomes taken on ACKs, the per-segment hooks feeding the
/// monitor, a rate-based window and pacing, no window cuts) is implemented once, for every
/// `Algorithm`.
pub(crate) trait Algorithm: std::fmt::Debug + Send {
    /// What each MI carries to its outcome.
    type Tag: Copy;
    /// The registry name.
    const NAME: &'static str;
    fn core(&self) -> &Core<Self::Tag>;
    fn core_mut(&mut self) -> &mut Core<Self::Tag>;
    /// The next MI's rate (Mbit/s) and tag.
    fn next_tagged_mi(&mut self) -> (f64, Self::Tag);
    /// Learns from one MI's outcome.
    fn on_outcome(&mut self, o: &MiOutcome<Self::Tag>);
    /// How long the open MI lasts.
    fn mi_len(&self) -> Duration;
    /// An MI was just opened.
    fn on_mi_opened(&mut self) {}
    /// The rate sent at while no MI is open, Mbit/s.
    fn idle_rate_mbps(&self) -> f64;
    /// The phase, for telemetry.
    fn phase_name(&self) -> &'static str;

    /// The rate being sent at, Mbit/s.
    fn sending_rate_mbps(&self) -> f64 {
        self.core().monitor.current().map_or(self.idle_rate_mbps(), |(r, _)| mbps(r))
    }

    /// Takes every MI outcome that is known at `now`, in MI order.
    fn process_outcomes(&mut self, now: Instant) {
        let stale = stale_after(self.core().srtt);
        while let Some(o) = self.core_mut().monitor.pop(now, stale) {
            self.on_outcome(&o);
        }
    }
}

impl<A: Algorithm> super::CongestionControl for A {
    fn name(&self) -> &'static str {
        A::NAME
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, _in_flight: u64) {
        self.process_outcomes(now);
        if self.core().monitor.due(now, self.mi_len()) {
            let (rate, tag) = self.next_tagged_mi();
            self.core_mut().monitor.open(now, from_mbps(rate), tag);
            self.on_mi_opened();
        }
        self.core_mut().monitor.on_sent(now, bytes);
    }

    fn on_ack(&mut self, now: Instant, ack: &super::AckEvent) {
        if ack.srtt > Duration::ZERO {
            self.core_mut().srtt = Some(ack.srtt);
        }
        self.process_outcomes(now);
    }

    fn on_packet_delivered(&mut self, _now: Instant, sent_at: Instant, bytes: u64, rtt: Option<Duration>) {
        self.core_mut().monitor.on_delivered(sent_at, bytes, rtt);
    }

    fn on_packet_lost(&mut self, _now: Instant, sent_at: Instant, bytes: u64) {
        self.core_mut().monitor.on_lost(sent_at, bytes);
    }

    fn wants_packet_events(&self) -> bool {
        true
    }

    fn on_congestion_event(&mut self, _now: Instant, _in_flight: u64) {}

    fn on_recovery_end(&mut self, _now: Instant) {}

    fn on_rto(&mut self, _now: Instant, _in_flight: u64) {}

    fn cwnd(&self) -> u64 {
        cwnd_for(from_mbps(self.sending_rate_mbps()), self.core().srtt, self.core().mss)
    }

    fn ssthresh(&self) -> u64 {
        u64::MAX
    }

    fn pacing_rate(&self) -> Option<Bps> {
        Some(from_mbps(self.sending_rate_mbps()))
    }

    fn state(&self) -> &'static str {
        self.phase_name()
    }

    fn owns_recovery_window(&self) -> bool {
        true
    }
}

/// (Tests) Drives `cc` on a fluid path for `secs` seconds: 1000-byte segments paced at the
/// controller's rate, each delivered (with an RTT sample of `rtt`) or lost one `rtt` after it left,
/// a fraction `loss(rate_mbps)` of them lost (spread evenly). Returns the time reached.
#[cfg(test)]
pub(crate) fn drive(
    cc: &mut dyn super::CongestionControl,
    from: Instant,
    secs: f64,
    rtt: Duration,
    loss: impl Fn(f64) -> f64,
) -> Instant {
    use super::AckEvent;
    let end = from + Duration::from_secs_f64(secs);
    let mut now = from;
    let mut pending: VecDeque<(Instant, bool)> = VecDeque::new();
    let mut debt = 0.0;
    while now < end {
        let rate = cc.pacing_rate().expect("PCC paces");
        while pending.front().is_some_and(|(t, _)| *t + rtt <= now) {
            let (sent, lost) = pending.pop_front().unwrap_or_else(|| unreachable!("front exists"));
            let at = sent + rtt;
            if lost {
                cc.on_packet_lost(at, sent, 1000);
            } else {
                cc.on_packet_delivered(at, sent, 1000, Some(rtt));
                cc.on_ack(at, &AckEvent::sample(1000, rtt));
            }
        }
        cc.on_sent(now, 1000, 0);
        debt += loss(mbps(rate)).clamp(0.0, 1.0);
        let lost = debt >= 1.0;
        if lost {
            debt -= 1.0;
        }
        pending.push_back((now, lost));
        now += rate.transmission_time(leoguard_core::Bytes(1000)).unwrap_or(Duration::from_millis(1));
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(n)
    }

    #[test]
    fn segments_are_attributed_to_the_mi_they_were_sent_in_and_outcomes_come_in_order() {
        let mut m: Monitor<u8> = Monitor::default();
        assert!(m.due(ms(0), Duration::from_millis(10)));
        m.open(ms(0), Bps::mbps(10), 1);
        for t in 0..4 {
            m.on_sent(ms(t), 1000);
        }
        assert!(!m.due(ms(3), Duration::from_millis(10)), "too early");
        assert!(m.due(ms(10), Duration::from_millis(10)));
        m.open(ms(10), Bps::mbps(20), 2);
        for t in 10..14 {
            m.on_sent(ms(t), 1000);
        }
        m.open(ms(20), Bps::mbps(40), 3);
        // MI 2 resolves first, but MI 1 comes out first.
        for t in 10..14 {
            m.on_delivered(ms(t), 1000, Some(Duration::from_millis(50)));
        }
        assert_eq!(m.pop(ms(70), Duration::from_secs(1)), None);
        m.on_delivered(ms(0), 1000, Some(Duration::from_millis(50)));
        m.on_delivered(ms(1), 1000, None);
        m.on_lost(ms(2), 1000);
        m.on_lost(ms(3), 1000);
        let a = m.pop(ms(70), Duration::from_secs(1)).expect("MI 1 resolved");
        assert_eq!((a.tag, a.sent, a.acked, a.lost, a.rtt_samples), (1, 4000, 2000, 2000, 1));
        assert_eq!(a.loss_rate(), 0.5);
        assert_eq!((a.start, a.end, a.rate_mbps()), (ms(0), ms(10), 10.0));
        let b = m.pop(ms(70), Duration::from_secs(1)).expect("MI 2 resolved");
        assert_eq!((b.tag, b.loss_rate(), b.rtt_gradient), (2, 0.0, 0.0));
        // The open MI never comes out.
        assert_eq!(m.pop(ms(5000), Duration::ZERO), None);
        assert_eq!(m.current(), Some((Bps::mbps(40), 3)));
    }

    #[test]
    fn the_rtt_gradient_is_the_least_squares_slope() {
        let mut m: Monitor<()> = Monitor::default();
        m.open(ms(0), Bps::mbps(10), ());
        // RTT 50, 52, 54, 56 ms for sends at 0, 10, 20, 30 ms: slope 0.2 s/s; then an outlier-free
        // line with noise: the least-squares slope of (0,50)(10,53)(20,53)(30,56) is 0.18.
        for t in [0, 10, 20, 30] {
            m.on_sent(ms(t), 1000);
        }
        m.open(ms(40), Bps::mbps(10), ());
        for t in [40, 50, 60, 70] {
            m.on_sent(ms(t), 1000);
        }
        m.open(ms(80), Bps::mbps(10), ());
        for (t, r) in [(0, 50), (10, 52), (20, 54), (30, 56)] {
            m.on_delivered(ms(t), 1000, Some(Duration::from_millis(r)));
        }
        for (t, r) in [(40, 50), (50, 53), (60, 53), (70, 56)] {
            m.on_delivered(ms(t), 1000, Some(Duration::from_millis(r)));
        }
        let a = m.pop(ms(200), Duration::from_secs(1)).expect("resolved");
        assert!((a.rtt_gradient - 0.2).abs() < 1e-9, "{}", a.rtt_gradient);
        assert_eq!((a.start_rtt, a.end_rtt), (Some(Duration::from_millis(50)), Some(Duration::from_millis(56))));
        let b = m.pop(ms(200), Duration::from_secs(1)).expect("resolved");
        assert!((b.rtt_gradient - 0.18).abs() < 1e-9, "{}", b.rtt_gradient);
    }

    #[test]
    fn a_stale_mi_comes_out_with_its_unresolved_bytes_lost() {
        let mut m: Monitor<()> = Monitor::default();
        m.open(ms(0), Bps::mbps(10), ());
        for t in 0..4 {
            m.on_sent(ms(t), 1000);
        }
        m.open(ms(10), Bps::mbps(10), ());
        m.on_delivered(ms(0), 1000, None);
        let stale = stale_after(Some(Duration::from_millis(50)));
        assert_eq!(stale, Duration::from_millis(200));
        assert_eq!(m.pop(ms(209), stale), None);
        let o = m.pop(ms(210), stale).expect("stale");
        assert_eq!((o.acked, o.lost), (1000, 3000));
    }

    #[test]
    fn the_window_is_twice_rate_times_srtt() {
        let w = cwnd_for(Bps::mbps(20), Some(Duration::from_millis(40)), 1448);
        assert_eq!(w, 200_000);
        assert_eq!(cwnd_for(Bps(1000), Some(Duration::from_millis(40)), 1448), 4 * 1448);
        assert_eq!(cwnd_for(Bps::mbps(8), None, 1448), 200_000);
    }
}
