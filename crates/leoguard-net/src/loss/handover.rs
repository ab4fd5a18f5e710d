//! Loss concentrated around handovers (REFERENCE.md, Starlink behaviour: loss clusters at the 15 s
//! reconfigurations, with a 30-200 ms interruption each).

use leoguard_core::{Duration, Instant, RngStream};

use super::{check_prob, LossError, LossModel, Windows};

/// Loss only near handovers: probability `p` in `[h - before, h + after)` around each handover `h`,
/// certain loss in `[h, h + interruption)` when an interruption is set, no loss elsewhere.
///
/// Precondition: `now` is non-decreasing across calls (one link's packets enter in time order); then a
/// query is amortised O(1) via a cursor. A decreasing `now` is still answered exactly (binary search).
/// A uniform is drawn only for packets inside a window and outside the interruption.
#[derive(Debug, Clone)]
pub struct HandoverCorrelated {
    windows: Windows,
    interruptions: Windows,
    before: Duration,
    after: Duration,
    p: f64,
    interruption: Option<Duration>,
    handovers: usize,
}

impl HandoverCorrelated {
    /// Builds the model; `handovers` must be non-decreasing and `p` in [0, 1].
    pub fn new(
        handovers: Vec<Instant>,
        before: Duration,
        after: Duration,
        p: f64,
        interruption: Option<Duration>,
    ) -> Result<Self, LossError> {
        let p = check_prob("handover_correlated.p", p)?;
        for (i, pair) in handovers.windows(2).enumerate() {
            if pair[1] < pair[0] {
                return Err(LossError::invalid(
                    format!("handover_correlated.handovers[{}]", i + 1),
                    pair[1],
                    &format!("must not be earlier than handovers[{i}] = {}", pair[0]),
                ));
            }
        }
        let windows =
            Windows::from_sorted(handovers.iter().map(|h| (h.0.saturating_sub(before.0), h.0.saturating_add(after.0))));
        let interruptions = Windows::from_sorted(
            handovers.iter().map(|h| (h.0, h.0.saturating_add(interruption.unwrap_or_default().0))),
        );
        Ok(HandoverCorrelated { windows, interruptions, before, after, p, interruption, handovers: handovers.len() })
    }
}

impl LossModel for HandoverCorrelated {
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool {
        // Query both cursors every time so each stays in step with `now`.
        let interrupted = self.interruptions.contains(now.0);
        let in_window = self.windows.contains(now.0);
        if interrupted {
            true
        } else if in_window {
            rng.bernoulli(self.p)
        } else {
            false
        }
    }

    fn name(&self) -> &'static str {
        "handover_correlated"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("handovers", self.handovers as f64),
            ("before_s", self.before.as_secs_f64()),
            ("after_s", self.after.as_secs_f64()),
            ("p", self.p),
            ("interruption_s", self.interruption.unwrap_or_default().as_secs_f64()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::stream;

    const MS: u64 = 1_000_000;

    #[test]
    fn drops_only_inside_windows_and_always_in_interruptions() {
        let hs: Vec<Instant> = [12_000u64, 27_000, 42_000, 57_000].iter().map(|&ms| Instant(ms * MS)).collect();
        let mut m = HandoverCorrelated::new(
            hs.clone(),
            Duration::from_millis(100),
            Duration::from_millis(300),
            0.5,
            Some(Duration::from_millis(40)),
        )
        .expect("valid");
        let mut rng = stream(2, "ho");
        let (mut in_win, mut in_win_lost) = (0u64, 0u64);
        // One packet per 0.1 ms for 60 s.
        for k in 0..600_000u64 {
            let t = k * MS / 10;
            let lost = m.drop_packet(Instant(t), &mut rng);
            let near = hs.iter().find(|h| t + 100 * MS >= h.0 && t < h.0 + 300 * MS);
            match near {
                None => assert!(!lost, "loss outside any window at {t} ns"),
                Some(h) if t >= h.0 && t < h.0 + 40 * MS => {
                    assert!(lost, "survived the interruption at {t} ns")
                }
                Some(_) => {
                    in_win += 1;
                    in_win_lost += u64::from(lost);
                }
            }
        }
        // 4 windows x 360 ms of p = 0.5 at 10 packets/ms: 14 400 packets, sigma 60.
        assert_eq!(in_win, 14_400);
        let dev = (in_win_lost as f64 - 7_200.0).abs();
        assert!(dev < 300.0, "{in_win_lost} of {in_win} lost in windows");
    }

    #[test]
    fn decreasing_now_is_still_answered_exactly() {
        let hs = vec![Instant(10 * MS), Instant(20 * MS), Instant(30 * MS)];
        let mut m =
            HandoverCorrelated::new(hs, Duration::ZERO, Duration::ZERO, 0.0, Some(Duration(MS))).expect("valid");
        let mut rng = stream(2, "ho-back");
        let probe = [35, 30, 21, 20, 10, 5, 10, 31, 30, 20, 0];
        let got: Vec<bool> = probe.iter().map(|&ms| m.drop_packet(Instant(ms * MS), &mut rng)).collect();
        let want: Vec<bool> = probe.iter().map(|&ms| ms % 10 == 0 && ms > 0).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn window_saturates_at_time_zero_and_overlaps_merge() {
        let hs = vec![Instant(5 * MS), Instant(6 * MS)];
        let mut m =
            HandoverCorrelated::new(hs, Duration::from_millis(50), Duration::from_millis(2), 1.0, None).expect("valid");
        let mut rng = stream(2, "ho-sat");
        assert!(m.drop_packet(Instant::ZERO, &mut rng));
        assert!(m.drop_packet(Instant(7 * MS), &mut rng));
        assert!(!m.drop_packet(Instant(8 * MS), &mut rng));
    }
}
