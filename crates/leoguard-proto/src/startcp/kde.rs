//! StarTCP §2.1: the handover base phase as the densest residue of interruption start times modulo
//! the period T, by a circular (wrapped) kernel density estimate.
//!
//! Residues are angles θ = 2π (t mod T) / T. The kernel is the von Mises kernel
//! K(Δθ) = exp(κ (cos Δθ − 1)) with κ = 1/σθ², σθ = 2π σ / T: the circular analogue of a Gaussian of
//! standard deviation σ (for σ ≪ T the two agree), so residues on either side of the 0/T boundary
//! count as neighbours. `cos Δθ − 1` is computed as `−2 sin²(Δθ/2)`, exact for tiny angles.
//!
//! **One vote per period.** At a candidate phase φ each event belongs to the handover nearest to it,
//! number round((t − φ)/T); the events of one number contribute only their largest kernel value. A
//! handover seen in n periods scores up to n, while a burst of false interruptions inside one period
//! (slow start's gaps one RTT apart, an idle spell) scores at most 1 however many gaps it has: without
//! this, three slow-start gaps 60 ms apart would outvote two real handovers. `support` counts the
//! periods with an event within two bandwidths of the phase.
//!
//! **Where the density is evaluated:** at the samples (every event's own residue, O(n²) for the at
//! most `max_events` events), not on a grid. The best sample is then refined by the mean-shift
//! fixed-point iteration θ ← atan2(Σ Kᵢ sin θᵢ, Σ Kᵢ cos θᵢ) over each period's voting event, whose
//! fixed points are the stationary points of the von Mises density, so the phase returned is the
//! local maximum itself and not the nearest event (with ±20 ms jitter the difference is several
//! milliseconds). Ties between samples go to the most recent event, so the result is deterministic.

use leoguard_core::{Duration, Instant};
use std::f64::consts::TAU;

/// Mean-shift iterations at most (it converges in a handful for well-separated clusters).
const MEAN_SHIFT_STEPS: usize = 50;

/// The densest phase found by [`densest_phase`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// Base phase in [0, T).
    pub phase: Duration,
    /// Events whose residue lies within two bandwidths of the phase (circularly).
    pub support: usize,
    /// The density at the phase, in events (each event contributes at most 1).
    pub density: f64,
}

fn angle(t: Instant, period: Duration) -> f64 {
    (t.as_nanos() % period.as_nanos()) as f64 / period.as_nanos() as f64 * TAU
}

/// The von Mises kernel for an angle difference `d` with concentration `kappa`, 1 at `d = 0`.
fn kernel(d: f64, kappa: f64) -> f64 {
    let s = (d / 2.0).sin();
    (-2.0 * kappa * s * s).exp()
}

/// Circular distance between two angles, in [0, π].
fn circ_dist(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(TAU);
    d.min(TAU - d)
}

/// The densest residue of `starts` modulo `period` with kernel bandwidth `bandwidth` (see the module
/// documentation), or `None` without events or with a zero period or bandwidth. `starts` must be in
/// time order; ties go to the later event.
pub fn densest_phase(starts: &[Instant], period: Duration, bandwidth: Duration) -> Option<Peak> {
    if starts.is_empty() || period == Duration::ZERO || bandwidth == Duration::ZERO {
        return None;
    }
    let sigma = bandwidth.as_nanos() as f64 / period.as_nanos() as f64 * TAU;
    let kappa = 1.0 / (sigma * sigma);
    let theta: Vec<f64> = starts.iter().map(|&t| angle(t, period)).collect();
    let votes = Votes { starts, theta: &theta, period, kappa };
    let mut best = (f64::NEG_INFINITY, 0.0);
    for &t in &theta {
        let f = votes.density(t);
        if f >= best.0 {
            best = (f, t);
        }
    }
    let mut at = best.1;
    for _ in 0..MEAN_SHIFT_STEPS {
        let (mut s, mut c) = (0.0, 0.0);
        votes.for_each_vote(at, |w, t| {
            s += w * t.sin();
            c += w * t.cos();
        });
        if s == 0.0 && c == 0.0 {
            break;
        }
        let next = s.atan2(c).rem_euclid(TAU);
        let moved = circ_dist(next, at);
        at = next;
        if moved < 1e-12 {
            break;
        }
    }
    let mut support = 0;
    votes.for_each_vote(at, |_, t| support += usize::from(circ_dist(at, t) <= 2.0 * sigma));
    let ns = (at / TAU * period.as_nanos() as f64).round() as u64 % period.as_nanos();
    Some(Peak { phase: Duration(ns), support, density: votes.density(at) })
}

/// The events with their angles, voting one per period.
struct Votes<'a> {
    starts: &'a [Instant],
    theta: &'a [f64],
    period: Duration,
    kappa: f64,
}

impl Votes<'_> {
    /// Calls `f(weight, angle)` for the event of largest kernel value in each period, at phase `at`.
    fn for_each_vote(&self, at: f64, mut f: impl FnMut(f64, f64)) {
        let p = self.period.as_nanos() as f64;
        let phase_ns = at / TAU * p;
        let mut group: Option<(i64, f64, f64)> = None; // (handover number, weight, angle)
        for (&t, &th) in self.starts.iter().zip(self.theta) {
            let k = ((t.as_nanos() as f64 - phase_ns) / p).round() as i64;
            let w = kernel(at - th, self.kappa);
            match &mut group {
                Some((gk, gw, gt)) if *gk == k => {
                    if w >= *gw {
                        (*gw, *gt) = (w, th);
                    }
                }
                _ => {
                    if let Some((_, gw, gt)) = group {
                        f(gw, gt);
                    }
                    group = Some((k, w, th));
                }
            }
        }
        if let Some((_, gw, gt)) = group {
            f(gw, gt);
        }
    }

    fn density(&self, at: f64) -> f64 {
        let mut sum = 0.0;
        self.for_each_vote(at, |w, _| sum += w);
        sum
    }
}

/// The first instant strictly after `now` at phase `phase` of a schedule with period `period`.
pub fn next_at_phase(now: Instant, phase: Duration, period: Duration) -> Instant {
    let p = period.as_nanos().max(1);
    let base = now.as_nanos() / p * p + phase.as_nanos() % p;
    if base > now.as_nanos() {
        Instant(base)
    } else {
        Instant(base.saturating_add(p))
    }
}
