//! Link loss models: sans-IO and deterministic (STYLE.md rules 1, 3, 5).
//!
//! A model never reads a clock or a global RNG: the engine passes the packet's entry time `now` and the
//! link's own [`RngStream`], consumed per packet. Randomness that is not per packet (the `starlink`
//! model's second states and rates) is drawn from the link's [`DrawKey`], keyed by (seed, link, time
//! index), never from the packet stream: two runs of one scenario and seed see the same lossy seconds
//! whatever the traffic, the scheme or the engine (common random numbers). `now` must be non-decreasing per link (the engine's event order guarantees
//! it); every model stays correct, just slower or coarser, if it is not (see each model's docs).
//! Calibration and derivations are in `docs/loss-models.md`.
//!
//! Adding a model = one new file + one [`LossSpec`] variant.

mod basic;
mod cycle;
mod handover;
mod starlink;
mod trace;

use std::fmt;

use leoguard_core::{DrawKey, Duration, Instant, RngStream};

pub use basic::{Bernoulli, GilbertElliott, NoLoss};
pub use cycle::{CycleProfile, MAX_CYCLE_BINS};
pub use handover::HandoverCorrelated;
pub use starlink::{Starlink, StarlinkFit};
pub use trace::{parse_drop_list, parse_plr_csv, DropList, TracePerSecond};

/// One second in nanoseconds: the bin width of the per-second models.
pub(crate) const SECOND_NS: u64 = 1_000_000_000;

/// A link loss model: decides, packet by packet, whether a packet entering the link is lost.
pub trait LossModel: fmt::Debug + Send {
    /// Whether a packet entering the link at `now` is lost.
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool;
    /// Registry name.
    fn name(&self) -> &'static str;
    /// The model's parameters for reports, as (name, value).
    fn params(&self) -> Vec<(&'static str, f64)>;
    /// Binds the model's time-indexed randomness to `key` (a link binds its own key when the model is
    /// attached). Models without such randomness ignore it.
    fn bind(&mut self, _key: DrawKey) {}
    /// The lossy seconds of `[0, until)` as (second, loss rate), for models with per-second states
    /// drawn from the bound key; `None` for the others. A pure function of the key and `until`, so two
    /// runs of one scenario and seed report the same list whatever their traffic.
    fn lossy_seconds(&self, _until: Instant) -> Option<Vec<(u64, f64)>> {
        None
    }
}

/// Errors from building a loss model or parsing its input files.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LossError {
    /// A parameter is out of its domain; `field` is the dotted path, e.g. `bernoulli.p`.
    #[error("invalid {field} = {value}: {reason}")]
    Invalid {
        /// Dotted path of the field, e.g. `composite[1].bernoulli.p`.
        field: String,
        /// The offending value as written.
        value: String,
        /// What the value must satisfy.
        reason: String,
    },
    /// An input file could not be parsed; `line` is 1-based.
    #[error("{what} line {line}: {problem}")]
    Parse {
        /// Which kind of file (e.g. "PLR CSV").
        what: &'static str,
        /// 1-based line number.
        line: usize,
        /// What is wrong on that line.
        problem: String,
    },
}

impl LossError {
    /// An [`LossError::Invalid`] for `field` with value `value`.
    pub(crate) fn invalid(field: impl Into<String>, value: impl fmt::Display, reason: &str) -> Self {
        LossError::Invalid { field: field.into(), value: value.to_string(), reason: reason.to_string() }
    }

    /// The same error with `prefix.` in front of the field path (for nested specs).
    fn prefixed(self, prefix: &str) -> Self {
        match self {
            LossError::Invalid { field, value, reason } => {
                LossError::Invalid { field: format!("{prefix}.{field}"), value, reason }
            }
            other => other,
        }
    }
}

/// Checks that `v` is a probability (finite, in [0, 1]); NaN fails.
pub(crate) fn check_prob(field: &str, v: f64) -> Result<f64, LossError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(LossError::invalid(field, v, "must be in [0, 1]"))
    }
}

/// Sorted, merged half-open windows `[start, end)` in ns, queried with a forward cursor.
///
/// Queries at non-decreasing times cost amortised O(1); a query earlier than the previous one falls
/// back to a binary search, so a decreasing `now` is answered correctly, only more slowly.
#[derive(Debug, Clone, Default)]
pub(crate) struct Windows {
    spans: Vec<(u64, u64)>,
    /// Index of the first span whose end is after the last queried time.
    cursor: usize,
    last: u64,
}

impl Windows {
    /// Builds from spans sorted by start; overlapping or touching spans are merged, empty ones dropped.
    pub(crate) fn from_sorted(spans: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (s, e) in spans {
            if e <= s {
                continue;
            }
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        Windows { spans: merged, cursor: 0, last: 0 }
    }

    /// Whether `t` lies inside a window.
    pub(crate) fn contains(&mut self, t: u64) -> bool {
        if t >= self.last {
            while self.cursor < self.spans.len() && self.spans[self.cursor].1 <= t {
                self.cursor += 1;
            }
        } else {
            // Time went backwards: precondition broken, recover exactly by binary search.
            self.cursor = self.spans.partition_point(|&(_, e)| e <= t);
        }
        self.last = t;
        self.spans.get(self.cursor).is_some_and(|&(s, _)| s <= t)
    }

    /// Number of merged windows.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }
}

/// A packet is lost if any component drops it; every component is consulted, in order, on every packet.
///
/// Consulting all of them (no short-circuit) keeps each component's state and RNG consumption
/// independent of the others' outcomes, so the drop sequence is a pure function of (seed, times).
#[derive(Debug)]
pub struct Composite(pub Vec<Box<dyn LossModel>>);

impl LossModel for Composite {
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool {
        let mut lost = false;
        for m in &mut self.0 {
            lost |= m.drop_packet(now, rng);
        }
        lost
    }

    fn name(&self) -> &'static str {
        "composite"
    }

    fn bind(&mut self, key: DrawKey) {
        for (i, m) in self.0.iter_mut().enumerate() {
            m.bind(key.part(i as u64));
        }
    }

    fn lossy_seconds(&self, until: Instant) -> Option<Vec<(u64, f64)>> {
        // A second is lossy if any component's is; rates combine as independent losses.
        let mut merged: std::collections::BTreeMap<u64, f64> = std::collections::BTreeMap::new();
        let mut any = false;
        for list in self.0.iter().filter_map(|m| m.lossy_seconds(until)) {
            any = true;
            for (sec, r) in list {
                let keep = merged.entry(sec).or_insert(0.0);
                *keep = 1.0 - (1.0 - *keep) * (1.0 - r);
            }
        }
        any.then(|| merged.into_iter().collect())
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        let mut out = vec![("components", self.0.len() as f64)];
        for m in &self.0 {
            out.extend(m.params());
        }
        out
    }
}

/// Offered and dropped packet counts, for reporting a run's realised loss rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossCounter {
    /// Packets offered to the model.
    pub offered: u64,
    /// Packets the model dropped.
    pub dropped: u64,
}

impl LossCounter {
    /// Records one packet's outcome.
    pub fn record(&mut self, dropped: bool) {
        self.offered += 1;
        self.dropped += u64::from(dropped);
    }

    /// Realised loss rate, dropped / offered (0 when nothing was offered).
    pub fn rate(&self) -> f64 {
        if self.offered == 0 {
            0.0
        } else {
            self.dropped as f64 / self.offered as f64
        }
    }
}

/// A loss model that counts what passes through it; it reports the inner model's name and parameters.
#[derive(Debug)]
pub struct Counted<M> {
    inner: M,
    counter: LossCounter,
}

impl<M: LossModel> Counted<M> {
    /// Wraps `inner` with zeroed counters.
    pub fn new(inner: M) -> Self {
        Counted { inner, counter: LossCounter::default() }
    }

    /// The counts so far.
    pub fn counter(&self) -> LossCounter {
        self.counter
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: LossModel> LossModel for Counted<M> {
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool {
        let lost = self.inner.drop_packet(now, rng);
        self.counter.record(lost);
        lost
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        self.inner.params()
    }

    fn bind(&mut self, key: DrawKey) {
        self.inner.bind(key);
    }

    fn lossy_seconds(&self, until: Instant) -> Option<Vec<(u64, f64)>> {
        self.inner.lossy_seconds(until)
    }
}

/// A loss model's configuration: the one registry mapping names to models (plain data, no serde).
#[derive(Debug, Clone, PartialEq)]
pub enum LossSpec {
    /// No loss ("none").
    None,
    /// Independent loss with probability `p` ("bernoulli").
    Bernoulli {
        /// Per-packet loss probability.
        p: f64,
    },
    /// Two-state Markov loss ("gilbert_elliott"), see [`GilbertElliott`].
    GilbertElliott {
        /// P(good -> bad) per packet.
        p_gb: f64,
        /// P(bad -> good) per packet.
        p_bg: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
    /// Loss around handover instants ("handover_correlated"), see [`HandoverCorrelated`].
    HandoverCorrelated {
        /// Handover instants, non-decreasing.
        handovers: Vec<Instant>,
        /// Window length before each handover.
        before: Duration,
        /// Window length after each handover.
        after: Duration,
        /// Loss probability inside a window.
        p: f64,
        /// Optional interruption from each handover on, during which every packet is lost.
        interruption: Option<Duration>,
    },
    /// Starlink per-second loss fitted to SATGUARD Fig 5 plus outages ("starlink"), see [`Starlink`].
    Starlink {
        /// Which second-of-period (0..15) is the handover-boundary second.
        boundary_offset_s: u64,
        /// Handover interruptions (start, duration), sorted by start; every packet inside is lost.
        outages: Vec<(Instant, Duration)>,
    },
    /// Replay of a per-second loss-rate trace ("trace_per_second"), see [`TracePerSecond`].
    TracePerSecond {
        /// Loss rate of second k (0-based) of the trace.
        rates: Vec<f64>,
        /// Whether to start over after the last second (else no loss after it).
        looping: bool,
    },
    /// Drop exactly the listed 0-based packet indices ("drop_list"), see [`DropList`].
    DropList {
        /// Strictly increasing packet indices.
        indices: Vec<u64>,
    },
    /// Per-packet loss by position in a repeating cycle ("cycle_profile"), see [`CycleProfile`].
    CycleProfile {
        /// Cycle length (Starlink's reconfiguration schedule: 15 s).
        period: Duration,
        /// The first cycle boundary after t = 0 of the run, modulo `period`.
        phase: Duration,
        /// Loss probability of each of the cycle's equal bins, from the boundary on.
        probs: Vec<f64>,
        /// Outage mode: slots of this length lost as a whole (`None`: each packet on its own).
        slot: Option<Duration>,
    },
    /// Lost if any component drops the packet ("composite"), see [`Composite`].
    Composite(Vec<LossSpec>),
}

impl LossSpec {
    /// The registry name of the model this spec builds.
    pub fn name(&self) -> &'static str {
        match self {
            LossSpec::None => "none",
            LossSpec::Bernoulli { .. } => "bernoulli",
            LossSpec::GilbertElliott { .. } => "gilbert_elliott",
            LossSpec::HandoverCorrelated { .. } => "handover_correlated",
            LossSpec::Starlink { .. } => "starlink",
            LossSpec::TracePerSecond { .. } => "trace_per_second",
            LossSpec::DropList { .. } => "drop_list",
            LossSpec::CycleProfile { .. } => "cycle_profile",
            LossSpec::Composite(_) => "composite",
        }
    }

    /// Checks every parameter; errors name the field and value, e.g. `invalid bernoulli.p = 1.5: ...`.
    pub fn validate(&self) -> Result<(), LossError> {
        // Building is cheap and runs exactly the checks the constructors run: one source of truth.
        self.build().map(|_| ())
    }

    /// Validates and builds the model.
    pub fn build(&self) -> Result<Box<dyn LossModel>, LossError> {
        Ok(match self {
            LossSpec::None => Box::new(NoLoss),
            LossSpec::Bernoulli { p } => Box::new(Bernoulli::new(*p)?),
            LossSpec::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                Box::new(GilbertElliott::new(*p_gb, *p_bg, *loss_good, *loss_bad)?)
            }
            LossSpec::HandoverCorrelated { handovers, before, after, p, interruption } => {
                Box::new(HandoverCorrelated::new(handovers.clone(), *before, *after, *p, *interruption)?)
            }
            LossSpec::Starlink { boundary_offset_s, outages } => {
                Box::new(Starlink::new(StarlinkFit::satguard_fig5(), *boundary_offset_s, outages)?)
            }
            LossSpec::TracePerSecond { rates, looping } => Box::new(TracePerSecond::new(rates.clone(), *looping)?),
            LossSpec::DropList { indices } => Box::new(DropList::new(indices.clone())?),
            LossSpec::CycleProfile { period, phase, probs, slot } => {
                let m = CycleProfile::new(*period, *phase, probs.clone())?;
                Box::new(match slot {
                    Some(d) => m.with_slot(*d)?,
                    None => m,
                })
            }
            LossSpec::Composite(parts) => {
                let mut models = Vec::with_capacity(parts.len());
                for (i, part) in parts.iter().enumerate() {
                    models.push(part.build().map_err(|e| e.prefixed(&format!("composite[{i}]")))?);
                }
                Box::new(Composite(models))
            }
        })
    }
}

/// The measurement behind SATGUARD Fig 5, for tests; fails (never skips) when the file is missing.
#[cfg(test)]
pub(crate) fn measured_plr() -> Vec<f64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/satguard-fig5/plr_per_second.csv");
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read the Starlink measurement {path}: {e}; the loss-model tests need it"));
    parse_plr_csv(&text).expect("the measurement parses")
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::stream;

    fn ms(n: u64) -> Instant {
        Instant(n * 1_000_000)
    }

    #[test]
    fn windows_cursor_and_backwards_queries_agree_with_brute_force() {
        let spans = vec![(10, 20), (15, 30), (40, 41), (50, 50), (60, 70)];
        let brute = |t: u64| [(10, 30), (40, 41), (60, 70)].iter().any(|&(s, e)| s <= t && t < e);
        let mut w = Windows::from_sorted(spans);
        assert_eq!(w.len(), 3);
        for t in 0..80 {
            assert_eq!(w.contains(t), brute(t), "forward t={t}");
        }
        let mut g = stream(3, "windows");
        for _ in 0..2000 {
            let t = g.next_u64() % 90;
            assert_eq!(w.contains(t), brute(t), "random t={t}");
        }
    }

    #[test]
    fn composite_consults_every_component_and_ors_them() {
        // The drop list must see packet 3 even though the Bernoulli(1) in front already dropped it.
        let spec = LossSpec::Composite(vec![
            LossSpec::TracePerSecond { rates: vec![1.0, 0.0], looping: false },
            LossSpec::DropList { indices: vec![3, 7] },
        ]);
        let mut m = spec.build().expect("valid spec");
        let mut rng = stream(1, "composite");
        // Packets 0..4 in second 0 (all lost to the trace), 4..10 in second 1 (lost only if listed).
        let got: Vec<bool> = (0..10).map(|i| m.drop_packet(ms(if i < 4 { 100 } else { 1500 }), &mut rng)).collect();
        let want = [true, true, true, true, false, false, false, true, false, false];
        assert_eq!(got, want);
    }

    #[test]
    fn composite_rng_consumption_is_the_sum_of_its_parts() {
        let mut c = LossSpec::Composite(vec![LossSpec::Bernoulli { p: 0.3 }, LossSpec::Bernoulli { p: 0.6 }])
            .build()
            .expect("valid");
        let mut a = Bernoulli::new(0.3).expect("valid");
        let mut b = Bernoulli::new(0.6).expect("valid");
        let (mut r1, mut r2) = (stream(9, "c"), stream(9, "c"));
        for i in 0..10_000 {
            let want = {
                let x = a.drop_packet(ms(i), &mut r2);
                let y = b.drop_packet(ms(i), &mut r2);
                x || y
            };
            assert_eq!(c.drop_packet(ms(i), &mut r1), want, "packet {i}");
        }
    }

    #[test]
    fn counter_reports_realised_rate() {
        let mut m = Counted::new(DropList::new(vec![0, 2, 4]).expect("sorted"));
        let mut rng = stream(1, "count");
        for i in 0..10 {
            m.drop_packet(ms(i), &mut rng);
        }
        assert_eq!(m.counter(), LossCounter { offered: 10, dropped: 3 });
        assert!((m.counter().rate() - 0.3).abs() < 1e-12);
        assert_eq!(LossCounter::default().rate(), 0.0);
        assert_eq!(m.name(), "drop_list");
    }

    fn all_specs() -> Vec<LossSpec> {
        vec![
            LossSpec::Bernoulli { p: 0.05 },
            LossSpec::GilbertElliott { p_gb: 0.068, p_bg: 0.852, loss_good: 0.04, loss_bad: 0.5 },
            LossSpec::HandoverCorrelated {
                handovers: (1..20).map(|k| Instant(k * 15 * SECOND_NS)).collect(),
                before: Duration::from_millis(200),
                after: Duration::from_millis(300),
                p: 0.3,
                interruption: Some(Duration::from_millis(50)),
            },
            LossSpec::Starlink {
                boundary_offset_s: 7,
                outages: vec![(Instant(7 * SECOND_NS), Duration::from_millis(80))],
            },
            LossSpec::TracePerSecond { rates: vec![0.0, 0.1, 0.02], looping: true },
            LossSpec::CycleProfile {
                period: Duration::from_secs(15),
                phase: Duration::from_secs(12),
                probs: vec![0.2, 0.05, 0.01, 0.0, 0.0],
                slot: None,
            },
        ]
    }

    #[test]
    fn same_seed_same_drops_different_seed_different_drops() {
        let run = |spec: &LossSpec, seed: u64| -> Vec<bool> {
            let mut m = spec.build().expect("valid");
            let mut rng = stream(seed, "link/0");
            // 20 000 packets, one every 5 ms: 100 s of traffic.
            (0..20_000u64).map(|i| m.drop_packet(Instant(i * 5_000_000), &mut rng)).collect()
        };
        let composite = LossSpec::Composite(all_specs());
        for spec in all_specs().iter().chain([&composite]) {
            let a = run(spec, 42);
            assert_eq!(a, run(spec, 42), "{} not reproducible", spec.name());
            assert!(a.iter().any(|&d| d), "{} dropped nothing", spec.name());
            assert_ne!(a, run(spec, 43), "{} ignores the seed", spec.name());
        }
    }

    #[test]
    fn bad_specs_name_field_and_value() {
        let cases: Vec<(LossSpec, &str)> = vec![
            (LossSpec::Bernoulli { p: 1.5 }, "invalid bernoulli.p = 1.5: must be in [0, 1]"),
            (LossSpec::Bernoulli { p: f64::NAN }, "invalid bernoulli.p = NaN"),
            (
                LossSpec::GilbertElliott { p_gb: 0.1, p_bg: -0.2, loss_good: 0.0, loss_bad: 1.0 },
                "invalid gilbert_elliott.p_bg = -0.2",
            ),
            (
                LossSpec::GilbertElliott { p_gb: 0.1, p_bg: 0.2, loss_good: 0.0, loss_bad: 2.0 },
                "invalid gilbert_elliott.loss_bad = 2",
            ),
            (
                LossSpec::HandoverCorrelated {
                    handovers: vec![Instant(5), Instant(3)],
                    before: Duration::ZERO,
                    after: Duration::ZERO,
                    p: 0.5,
                    interruption: None,
                },
                "invalid handover_correlated.handovers[1] = 0.000000003s",
            ),
            (
                LossSpec::HandoverCorrelated {
                    handovers: vec![],
                    before: Duration::ZERO,
                    after: Duration::ZERO,
                    p: -1.0,
                    interruption: None,
                },
                "invalid handover_correlated.p = -1",
            ),
            (LossSpec::Starlink { boundary_offset_s: 15, outages: vec![] }, "invalid starlink.boundary_offset_s = 15"),
            (
                LossSpec::Starlink {
                    boundary_offset_s: 0,
                    outages: vec![(Instant(9), Duration::ZERO), (Instant(2), Duration::ZERO)],
                },
                "invalid starlink.outages[1].start",
            ),
            (
                LossSpec::TracePerSecond { rates: vec![0.0, 1.2], looping: false },
                "invalid trace_per_second.rates[1] = 1.2",
            ),
            (LossSpec::DropList { indices: vec![1, 4, 4] }, "invalid drop_list.indices[2] = 4"),
            (
                LossSpec::Composite(vec![LossSpec::None, LossSpec::Bernoulli { p: 2.0 }]),
                "invalid composite[1].bernoulli.p = 2",
            ),
        ];
        for (spec, want) in cases {
            let err = spec.validate().expect_err("must be rejected").to_string();
            assert!(err.starts_with(want), "got {err:?}, want prefix {want:?}");
            assert!(spec.build().is_err());
        }
        for spec in all_specs() {
            spec.validate().expect("valid spec");
        }
    }
}
