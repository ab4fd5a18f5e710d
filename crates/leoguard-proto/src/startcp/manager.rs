//! The receiver's Handover Manager (StarTCP §2.1, §2.3): interruption detection from packet
//! arrivals, handover prediction by KDE, recovery notices.

use super::kde::{self, Peak};
use super::{ArrivalKind, Signal, StartcpConfig, StartcpError};
use leoguard_core::{Duration, Instant};
use std::collections::VecDeque;

/// Gaps that start within this of the end of an interruption that opened a new window are one
/// episode: the episode casts one vote for the phase, at the start of its longest gap (the others are
/// recorded all the same). A sender that kept sending into a handover's interruption (BBR) has its
/// window full of lost segments when the link comes back and stops until the first ACKs after it
/// arrive ("sending blocking", §1): a second, shorter gap about a round trip after the first, at the
/// same place in every period, which with a vote of its own ties with the handover and can win the
/// phase (seen on the emulator: a prediction 176 ms late). One second covers a few round trips of a
/// LEO path and is far below the 15 s period; shorter periods use period / 8.
pub const AFTERMATH: Duration = Duration::from_secs(1);

/// One interruption the receiver detected: a gap in arrivals above the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interruption {
    /// The last arrival before the gap (§2.1's t_i).
    pub start: Instant,
    /// From that arrival to the first one after the gap.
    pub duration: Duration,
    /// Whether the sender was stalled (probing) when the gap began, so the gap ended in a
    /// recovery notice.
    pub stalled: bool,
}

/// Where the recovery notice stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Notice {
    /// Nothing to tell.
    Idle,
    /// The link came back after an interruption that hit a stalled sender: an ACK is owed now.
    Pending,
    /// Told at least once; repeated on every probe until data shows the sender resumed.
    Sent,
}

/// The receiver's Handover Manager (StarTCP §2.1, §2.3).
///
/// - **Detection:** the expected inter-arrival time is an EWMA (gain 1/8, as SRTT) of the gaps
///   between consecutive arrivals that were not interruptions; a gap longer than expected +
///   `gap_threshold` is an interruption starting at the last arrival before it. Probes count as
///   arrivals (§2.3: they give the interruption's exact start while the sender is stalled). A sender
///   that goes idle also leaves a gap: such false interruptions are why the phase is the densest
///   residue (KDE) and not the latest one. Gaps within [`AFTERMATH`] (or period / 8) after the end of
///   the one that opened an episode cast one vote between them, for the longest. A window-limited,
///   unpaced sender (cwnd well below the
///   BDP) leaves a gap every round trip: those gaps are interruptions by this rule too, and many of
///   them per period crowd the `max_events` window; the paper runs StarTCP over BBR, whose paced
///   arrivals are steady.
/// - **Prediction:** the base phase is the KDE peak of the last `max_events` start times modulo T
///   ([`kde`], one vote per period); a prediction exists once at least `min_events` periods have
///   an interruption within two bandwidths of the peak. The next handover is the first instant
///   after `now` at that phase.
/// - **Recovery:** the first arrival after an interruption that began while the sender was probing
///   (the arrival before the gap was a probe) is the link's recovery: a notice is owed at once, and
///   is repeated on every further probe (a lost notice is replaced by the next) until data arrives,
///   showing the sender resumed. A gap that began with data is not a recovery notice, because an idle
///   sender that starts probing looks the same (data, gap, probe) and has nothing to recover from;
///   a sender whose stall came too late to see the interruption resumes on its timeout.
#[derive(Clone, Debug)]
pub struct HandoverManager {
    cfg: StartcpConfig,
    last: Option<(Instant, ArrivalKind)>,
    expected: Option<Duration>,
    starts: VecDeque<Instant>,
    peak: Option<Peak>,
    interruptions: Vec<Interruption>,
    /// The current episode: its window's end and its longest gap so far (whose start holds the
    /// episode's vote, the newest in `starts`).
    episode: Option<(Instant, Duration)>,
    notice: Notice,
    notices: u64,
}

impl HandoverManager {
    /// A manager with a validated configuration.
    pub fn new(cfg: StartcpConfig) -> Result<Self, StartcpError> {
        cfg.validate()?;
        Ok(HandoverManager {
            cfg,
            last: None,
            expected: None,
            starts: VecDeque::with_capacity(cfg.max_events as usize),
            peak: None,
            interruptions: Vec::new(),
            episode: None,
            notice: Notice::Idle,
            notices: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StartcpConfig {
        &self.cfg
    }

    /// A packet of `kind` arrived at `now` (times never decrease). Returns whether an ACK carrying a
    /// recovery notice is owed now.
    pub fn on_arrival(&mut self, now: Instant, kind: ArrivalKind) -> bool {
        if let Some((prev, prev_kind)) = self.last {
            let gap = now.saturating_duration_since(prev);
            let limit = self.expected.unwrap_or(Duration::ZERO) + self.cfg.gap_threshold;
            if gap > limit {
                let stalled = prev_kind == ArrivalKind::Probe;
                self.interruptions.push(Interruption { start: prev, duration: gap, stalled });
                match self.episode {
                    Some((until, longest)) if prev < until => {
                        if gap > longest {
                            // The longer gap takes the episode's vote.
                            self.starts.pop_back();
                            self.on_interruption(prev);
                            self.episode = Some((until, gap));
                        }
                    }
                    _ => {
                        self.on_interruption(prev);
                        let aftermath = AFTERMATH.min(Duration(self.cfg.period.as_nanos() / 8));
                        self.episode = Some((now + aftermath, gap));
                    }
                }
                if stalled {
                    self.notice = Notice::Pending;
                    self.notices += 1;
                }
            } else {
                // SRTT-style EWMA with gain 1/8 (integer nanoseconds).
                self.expected = Some(match self.expected {
                    None => gap,
                    Some(e) => Duration(e.0 - e.0 / 8 + gap.0 / 8),
                });
            }
        }
        if kind == ArrivalKind::Data && self.notice == Notice::Sent {
            self.notice = Notice::Idle; // data again: the sender has resumed
        }
        self.last = Some((now, kind));
        match self.notice {
            Notice::Pending => true,
            Notice::Sent => kind == ArrivalKind::Probe,
            Notice::Idle => false,
        }
    }

    fn on_interruption(&mut self, start: Instant) {
        if self.starts.len() == self.cfg.max_events as usize {
            self.starts.pop_front();
        }
        self.starts.push_back(start);
        let starts = self.starts.make_contiguous();
        self.peak = kde::densest_phase(starts, self.cfg.period, self.cfg.kde_bandwidth);
    }

    /// The handover base phase in [0, T), once enough interruptions support it.
    pub fn base_phase(&self) -> Option<Duration> {
        self.peak.filter(|p| p.support >= self.cfg.min_events as usize).map(|p| p.phase)
    }

    /// The KDE peak over the interruptions kept, whatever its support.
    pub fn peak(&self) -> Option<Peak> {
        self.peak
    }

    /// The next predicted handover strictly after `now`.
    pub fn predict(&self, now: Instant) -> Option<Instant> {
        self.base_phase().map(|b| kde::next_at_phase(now, b, self.cfg.period))
    }

    /// The signal to attach to an ACK sent at `now`: the prediction as an offset from `now`, and the
    /// recovery notice while one stands (attaching it counts as telling the sender).
    pub fn signal(&mut self, now: Instant) -> Signal {
        let recovered = self.notice != Notice::Idle;
        if self.notice == Notice::Pending {
            self.notice = Notice::Sent;
        }
        Signal { next_handover: self.predict(now).map(|h| h.saturating_duration_since(now)), recovered }
    }

    /// A signal that must go out at `now` in its own packet (a recovery notice not yet sent), if any.
    /// The prediction rides on every ACK through [`HandoverManager::signal`]; a transport without a
    /// steady ACK clock polls this after each arrival.
    pub fn poll_signal(&mut self, now: Instant) -> Option<Signal> {
        (self.notice == Notice::Pending).then(|| self.signal(now))
    }

    /// Whether a recovery notice stands (owed or repeated until data arrives).
    pub fn recovery_pending(&self) -> bool {
        self.notice != Notice::Idle
    }

    /// Interruptions detected so far, in order.
    pub fn interruptions(&self) -> &[Interruption] {
        &self.interruptions
    }

    /// Recovery notices raised so far (one per interruption of a stalled sender).
    pub fn notices(&self) -> u64 {
        self.notices
    }

    /// The expected inter-arrival time, once two packets arrived.
    pub fn expected_interarrival(&self) -> Option<Duration> {
        self.expected
    }
}
