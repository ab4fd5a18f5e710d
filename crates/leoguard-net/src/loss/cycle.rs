//! Loss that depends only on where a packet falls in a repeating cycle: Starlink's 15 s
//! reconfiguration schedule, with a per-bin loss probability fitted to a measured access link (issue 29).

use leoguard_core::{DrawKey, Duration, Instant, RngStream};

use super::{check_prob, LossError, LossModel};

/// Seconds of `d` for messages (`/ 1e9`, so that 15 s prints as `15`).
fn secs(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e9
}

/// Most bins a cycle profile may have (a 15 s cycle at 1/240 s resolution; a typo's guard).
pub const MAX_CYCLE_BINS: usize = 3600;

/// A per-packet loss probability given by the position of the packet's entry time in a repeating cycle.
///
/// The cycle of length `period` is cut into `probs.len()` equal bins; bin `i` covers
/// `[phase + i·period/n, phase + (i+1)·period/n)` modulo `period`, so `phase` is the first cycle
/// boundary after t = 0 of the run (modulo `period`). A packet exactly on a bin edge belongs to the later
/// bin. Each packet is lost independently with its bin's probability: one uniform from the link's packet
/// stream per packet, always (also in a bin of probability 0 or 1), so a packet's draw does not depend on
/// the bin it fell in. The profile itself is deterministic: no keyed draws. Works for any order of `now`.
///
/// With a `slot` (outage mode), loss is a property of time, not of packets: the run is cut into slots of
/// that length, each slot is lost with its start's bin probability, drawn from the link's [`DrawKey`]
/// (common random numbers: the same lost slots whatever the traffic or the engine), and every packet
/// entering the link in a lost slot is lost. A sparse probe sees the same loss rate as per packet, but
/// a dense flow loses whole bursts in few loss events: ICMP loss on a real dish cannot tell the two
/// apart, TCP can (issue 29, docs/realism.md).
#[derive(Debug, Clone)]
pub struct CycleProfile {
    period_ns: u64,
    phase_ns: u64,
    probs: Vec<f64>,
    slot_ns: Option<u64>,
    key: DrawKey,
}

impl CycleProfile {
    /// A profile; `period` > 0, `phase` < `period`, 1 to [`MAX_CYCLE_BINS`] probabilities in [0, 1].
    pub fn new(period: Duration, phase: Duration, probs: Vec<f64>) -> Result<Self, LossError> {
        if period.as_nanos() == 0 {
            return Err(LossError::invalid("cycle_profile.period_s", secs(period), "must be > 0"));
        }
        if phase >= period {
            return Err(LossError::invalid(
                "cycle_profile.phase_s",
                secs(phase),
                &format!("must be in [0, period_s = {})", secs(period)),
            ));
        }
        if probs.is_empty() || probs.len() > MAX_CYCLE_BINS {
            return Err(LossError::invalid(
                "cycle_profile.probs",
                format!("{} bins", probs.len()),
                &format!("needs 1 to {MAX_CYCLE_BINS} bins"),
            ));
        }
        for (i, &p) in probs.iter().enumerate() {
            check_prob(&format!("cycle_profile.probs[{i}]"), p)?;
        }
        Ok(CycleProfile {
            period_ns: period.as_nanos(),
            phase_ns: phase.as_nanos(),
            probs,
            slot_ns: None,
            key: DrawKey::new(0, "cycle_profile"),
        })
    }

    /// The same profile in outage mode: slots of `slot` (> 0, at most the period) lost as a whole.
    pub fn with_slot(mut self, slot: Duration) -> Result<Self, LossError> {
        if slot.as_nanos() == 0 || slot.as_nanos() > self.period_ns {
            return Err(LossError::invalid(
                "cycle_profile.slot_s",
                secs(slot),
                &format!("must be in (0, period_s = {}]", secs(Duration(self.period_ns))),
            ));
        }
        self.slot_ns = Some(slot.as_nanos());
        Ok(self)
    }

    /// The bin a packet entering at `now` falls in.
    pub fn bin_at(&self, now: Instant) -> usize {
        let (t, p) = (now.0 % self.period_ns, self.period_ns);
        // Position since the last cycle boundary; phase < period, so no underflow.
        let pos = (t + p - self.phase_ns) % p;
        // floor(pos · n / period) = i exactly when pos is in [i·period/n, (i+1)·period/n): an edge goes to
        // the later bin. u128: pos · n overflows u64 for long periods.
        let bin = (u128::from(pos) * self.probs.len() as u128 / u128::from(p)) as usize;
        // pos < period, so bin < n; the min only guards that arithmetic.
        bin.min(self.probs.len() - 1)
    }

    /// The loss probability in force at `now`.
    pub fn prob_at(&self, now: Instant) -> f64 {
        self.probs[self.bin_at(now)]
    }

    /// The cycle-average loss probability.
    pub fn mean(&self) -> f64 {
        self.probs.iter().sum::<f64>() / self.probs.len() as f64
    }
}

impl LossModel for CycleProfile {
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool {
        // One draw per packet in both modes, so the packet stream stays aligned whatever the mode.
        let per_packet = rng.bernoulli(self.prob_at(now));
        match self.slot_ns {
            None => per_packet,
            Some(slot) => {
                let k = now.0 / slot;
                self.key.uniform(k, 0) < self.prob_at(Instant(k * slot))
            }
        }
    }

    fn bind(&mut self, key: DrawKey) {
        self.key = key.part(0x0C1C_1E00);
    }

    fn name(&self) -> &'static str {
        "cycle_profile"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("period_s", self.period_ns as f64 / 1e9),
            ("phase_s", self.phase_ns as f64 / 1e9),
            ("bins", self.probs.len() as f64),
            ("mean", self.mean()),
            ("slot_s", self.slot_ns.map_or(0.0, |n| n as f64 / 1e9)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossSpec;
    use leoguard_core::stream;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Offered and lost packets per bin, one packet every `gap_us` for `cycles` whole cycles.
    fn per_bin(m: &mut CycleProfile, gap_us: u64, cycles: u64, seed: u64) -> Vec<(u64, u64)> {
        let mut rng = stream(seed, "cycle");
        let mut out = vec![(0u64, 0u64); m.probs.len()];
        let end = cycles * m.period_ns;
        let mut t = 0;
        while t < end {
            let b = m.bin_at(Instant(t));
            out[b].0 += 1;
            out[b].1 += u64::from(m.drop_packet(Instant(t), &mut rng));
            t += gap_us * 1_000;
        }
        out
    }

    #[test]
    fn realised_loss_per_bin_stays_in_the_binomial_99_interval() {
        // A 15 s Starlink-like profile (a lossy boundary second, a quieter tail) and a fine 2 s one.
        let starlink: Vec<f64> = (0..15).map(|i| [0.2, 0.05, 0.01][i.min(2)]).collect();
        let fine: Vec<f64> = (0..40).map(|i| f64::from(i) / 40.0).chain([1.0]).collect();
        for (period, probs) in [(Duration::from_secs(15), starlink), (Duration::from_secs(2), fine)] {
            let mut m = CycleProfile::new(period, ms(300), probs.clone()).expect("valid");
            // One packet every 333 us for 30 cycles: ~90 000 per bin in `starlink`, ~4 400 in `fine`.
            let counts = per_bin(&mut m, 333, 30, 7);
            for (i, (&(n, lost), &p)) in counts.iter().zip(&probs).enumerate() {
                assert!(n > 1_000, "bin {i}: only {n} packets");
                let (nf, k) = (n as f64, lost as f64);
                if p == 0.0 || p == 1.0 {
                    assert_eq!(k, nf * p, "bin {i}: p = {p} is certain");
                    continue;
                }
                // Normal approximation of the binomial 99 % interval, with continuity correction.
                let half = 2.576 * (nf * p * (1.0 - p)).sqrt() + 0.5;
                assert!((k - nf * p).abs() <= half, "bin {i}: {lost}/{n} lost, expected {p} +- {}", half / nf);
            }
        }
    }

    #[test]
    fn a_packet_on_a_bin_edge_goes_to_the_later_bin() {
        // 3 s in 3 bins, phase 0: edges at 0, 1, 2 s.
        let m = CycleProfile::new(Duration::from_secs(3), Duration::ZERO, vec![0.1, 0.2, 0.3]).expect("valid");
        let s = |x: u64| Instant(x);
        assert_eq!(m.bin_at(s(0)), 0);
        assert_eq!(m.bin_at(s(999_999_999)), 0);
        assert_eq!(m.bin_at(s(1_000_000_000)), 1);
        assert_eq!(m.bin_at(s(2_000_000_000)), 2);
        assert_eq!(m.bin_at(s(2_999_999_999)), 2);
        assert_eq!(m.bin_at(s(3_000_000_000)), 0, "the next cycle starts in bin 0");
        assert_eq!(m.prob_at(s(4_000_000_000)), 0.2);
        // Certain bins, drawn from the packet stream as every other bin is.
        let mut c = CycleProfile::new(ms(10), Duration::ZERO, vec![1.0, 0.0]).expect("valid");
        let mut rng = stream(1, "edge");
        let got: Vec<bool> = (0..6).map(|k| c.drop_packet(Instant(k * 2_500_000), &mut rng)).collect();
        assert_eq!(got, [true, true, false, false, true, true]);
    }

    #[test]
    fn phase_shifts_the_profile() {
        let probs = vec![0.0, 0.1, 0.2, 0.3, 0.4];
        let base = CycleProfile::new(Duration::from_secs(15), Duration::ZERO, probs.clone()).expect("valid");
        let shifted = CycleProfile::new(Duration::from_secs(15), Duration::from_secs(7), probs).expect("valid");
        for k in 0..3000u64 {
            let t = Instant(k * 10_000_000);
            assert_eq!(shifted.bin_at(Instant(t.0 + 7_000_000_000)), base.bin_at(t), "t = {k}0 ms");
        }
        // Bin 0 starts at the phase; just before it is the last bin of the previous cycle.
        assert_eq!(shifted.bin_at(Instant(7_000_000_000)), 0);
        assert_eq!(shifted.bin_at(Instant(6_999_999_999)), 4);
        assert_eq!(shifted.bin_at(Instant(0)), 2, "t = 0 is 8 s into a cycle that began at -8 s");
        // Same seed, shifted profile: the same draws meet other probabilities.
        let spec = |phase_s: u64| LossSpec::CycleProfile {
            period: Duration::from_secs(2),
            phase: Duration::from_secs(phase_s),
            probs: vec![1.0, 0.0],
            slot: None,
        };
        let run = |phase_s: u64| -> Vec<bool> {
            let mut m = spec(phase_s).build().expect("valid");
            let mut rng = stream(3, "link/0");
            (0..8u64).map(|k| m.drop_packet(Instant(k * 500_000_000), &mut rng)).collect()
        };
        assert_eq!(run(0), [true, true, false, false, true, true, false, false]);
        assert_eq!(run(1), [false, false, true, true, false, false, true, true]);
    }

    #[test]
    fn invalid_specs_name_their_field() {
        let spec = |period: Duration, phase: Duration, probs: Vec<f64>| LossSpec::CycleProfile {
            period,
            phase,
            probs,
            slot: None,
        };
        let s15 = Duration::from_secs(15);
        let cases = [
            (spec(Duration::ZERO, Duration::ZERO, vec![0.1]), "invalid cycle_profile.period_s = 0: must be > 0"),
            (spec(s15, s15, vec![0.1]), "invalid cycle_profile.phase_s = 15: must be in [0, period_s = 15)"),
            (spec(s15, Duration::ZERO, vec![]), "invalid cycle_profile.probs = 0 bins: needs 1 to 3600 bins"),
            (spec(s15, Duration::ZERO, vec![0.0; 3601]), "invalid cycle_profile.probs = 3601 bins"),
            (spec(s15, Duration::ZERO, vec![0.0, 1.5]), "invalid cycle_profile.probs[1] = 1.5: must be in [0, 1]"),
            (spec(s15, Duration::ZERO, vec![f64::NAN]), "invalid cycle_profile.probs[0] = NaN"),
        ];
        for (s, want) in cases {
            let err = s.validate().expect_err("must be rejected").to_string();
            assert!(err.starts_with(want), "got {err:?}, want prefix {want:?}");
        }
        let inner = LossSpec::Composite(vec![LossSpec::None, spec(s15, Duration::ZERO, vec![-0.1])]);
        assert!(inner.validate().unwrap_err().to_string().starts_with("invalid composite[1].cycle_profile.probs[0]"));
        spec(s15, Duration::from_millis(14_999), vec![0.0; 3600]).validate().expect("the largest valid profile");
        assert_eq!(spec(s15, Duration::ZERO, vec![0.5]).name(), "cycle_profile");
    }

    #[test]
    fn outage_mode_loses_whole_slots_at_the_profile_rate_whatever_the_traffic() {
        let spec = LossSpec::CycleProfile {
            period: Duration::from_secs(15),
            phase: Duration::ZERO,
            probs: vec![0.2, 0.02],
            slot: Some(ms(20)),
        };
        // Dense traffic (a packet every 100 us) and sparse traffic (every 150 ms) on the same key: the
        // dense one loses every packet of a slot or none, and both see the same lost slots.
        let lost_slots = |gap_us: u64, stream_seed: u64| -> std::collections::BTreeMap<u64, (u64, u64)> {
            let mut m = spec.build().expect("valid");
            m.bind(DrawKey::new(5, "link/3"));
            let mut rng = stream(stream_seed, "link/3");
            let mut per_slot = std::collections::BTreeMap::new();
            let mut t = 0u64;
            while t < 300 * 1_000_000_000 {
                let e: &mut (u64, u64) = per_slot.entry(t / 20_000_000).or_default();
                e.0 += 1;
                e.1 += u64::from(m.drop_packet(Instant(t), &mut rng));
                t += gap_us * 1_000;
            }
            per_slot
        };
        let dense = lost_slots(100, 1);
        assert!(dense.values().all(|&(n, l)| l == 0 || l == n), "a slot is lost whole or not at all");
        let sparse = lost_slots(150_000, 2);
        for (k, &(n, l)) in &sparse {
            if n > 0 {
                assert_eq!(l > 0, dense[k].1 > 0, "slot {k}: the same lost slots for other traffic");
            }
        }
        // The share of lost slots per half of the cycle stays inside the binomial 99 % interval.
        for (half, p) in [(0u64, 0.2), (1, 0.02)] {
            let slots: Vec<_> = dense.iter().filter(|(&k, _)| (k * 20) % 15_000 / 7_500 == half).collect();
            let lost = slots.iter().filter(|(_, &(_, l))| l > 0).count() as f64;
            let n = slots.len() as f64;
            let sd = (p * (1.0 - p) / n).sqrt();
            let rate = lost / n;
            assert!((rate - p).abs() <= 2.576 * sd + 0.5 / n, "half {half}: {rate} vs {p}");
        }
        let bad = LossSpec::CycleProfile {
            period: Duration::from_secs(1),
            phase: Duration::ZERO,
            probs: vec![0.1],
            slot: Some(Duration::from_secs(2)),
        };
        let err = bad.validate().expect_err("a slot longer than the period").to_string();
        assert!(err.starts_with("invalid cycle_profile.slot_s = 2: must be in (0, period_s = 1]"), "{err}");
    }
}
