//! PCC Vivace (Dong et al., NSDI'18, and PCC-Uspace; a baseline of LEOTP, REFERENCE.md "Baselines
//! LEOTP uses"): online gradient ascent on a latency-aware utility, one monitor interval (MI) per RTT.
//!
//! - Utility (§3): u = x^0.9 − 900 · x · max(0, dRTT/dt) − 11.35 · x · L, x the MI's sending rate in
//!   Mbit/s, dRTT/dt its RTT gradient (least-squares slope, [`super::pcc`]), L its loss rate.
//! - Starting phase: the rate doubles every MI while the utility rises; the first MI whose utility
//!   falls below its predecessor's sends the rate back to that predecessor's, and probing begins.
//! - Probing: three pairs of MIs at r(1 + 5 %) and r(1 − 5 %), each pair in random order; each pair's
//!   gradient is (u+ − u−) / (r+ − r−) and votes by its sign; the majority sets the direction and the
//!   gradient γ is the mean of the pairs that voted with it.
//! - Moving: the rate steps by θ0 · m(τ) · γ, θ0 = 1 Mbit/s per unit of utility gradient
//!   (PCC-Uspace's conversion factor), m(τ) = ((τ + 1) / 2)^1.2 the confidence amplifier after τ
//!   consecutive steps in one direction (τ = 1 for the step a probe decided). The step is bounded by
//!   the dynamic change boundary r · (0.05 + 0.05 k): each capped step raises k by one, a step within
//!   the bound sets k to the smallest value that still holds it. Steps are at least 0.5 Mbit/s, and
//!   the rate never falls below 0.5 Mbit/s. After each step the next gradient comes from the step's
//!   MI and the one before, (u_i − u_(i−1)) / (r_i − r_(i−1)); moving goes on while it points the same
//!   way and returns to probing (at the current rate, k and τ reset) when it turns.
//!
//! Results arrive about one RTT after an MI ends; meanwhile the controller keeps sending at its current
//! rate in MIs whose outcome it ignores (an epoch per experiment). Before any RTT sample, 100 ms
//! stands for the RTT. Loss events and timeouts enter only the utility; the window is a cap of twice
//! rate · SRTT, kept through recovery.

use super::pcc::{self, MiOutcome};
use leoguard_core::{Duration, RngStream};

/// The utility's rate exponent t.
pub const EXPONENT: f64 = 0.9;
/// The latency-gradient coefficient b.
pub const LATENCY_COEFF: f64 = 900.0;
/// The loss coefficient c.
pub const LOSS_COEFF: f64 = 11.35;
/// Probing rates are r(1 ± ε) with ε = 5 %.
pub const PROBE_EPS: f64 = 0.05;
/// Probing pairs per decision.
pub const PAIRS: usize = 3;
/// The confidence amplifier's exponent.
pub const AMPLIFIER_EXPONENT: f64 = 1.2;
/// θ0: Mbit/s of rate change per unit of utility gradient (utility per Mbit/s).
pub const GRADIENT_TO_RATE: f64 = 1.0;
/// The dynamic change boundary's base ω0 and increment δ, as fractions of the rate.
pub const BOUND_BASE: f64 = 0.05;
/// See [`BOUND_BASE`].
pub const BOUND_STEP: f64 = 0.05;
/// The smallest rate change, Mbit/s.
pub const MIN_STEP_MBPS: f64 = 0.5;
/// The lowest rate, Mbit/s.
pub const MIN_RATE_MBPS: f64 = 0.5;

/// Vivace's utility of an MI at `rate_mbps` with RTT gradient `rtt_gradient` (s/s) and loss rate `loss`.
pub fn utility(rate_mbps: f64, rtt_gradient: f64, loss: f64) -> f64 {
    rate_mbps.powf(EXPONENT) - LATENCY_COEFF * rate_mbps * rtt_gradient.max(0.0) - LOSS_COEFF * rate_mbps * loss
}

/// The confidence amplifier m(τ) = ((τ + 1) / 2)^1.2 after τ consecutive steps in one direction.
pub fn amplifier(rounds: u32) -> f64 {
    ((f64::from(rounds) + 1.0) / 2.0).powf(AMPLIFIER_EXPONENT)
}

/// The rate change (Mbit/s) for gradient `gradient` after `rounds` consecutive steps at `rate_mbps`
/// in direction `dir` (±1), updating the boundary counter `k`: θ0 · m(τ) · γ, capped at
/// r · (0.05 + 0.05 k), at least 0.5 Mbit/s.
pub fn rate_step(gradient: f64, rounds: u32, k: &mut u32, rate_mbps: f64, dir: f64) -> f64 {
    let raw = GRADIENT_TO_RATE * amplifier(rounds) * gradient;
    let bound = rate_mbps * (BOUND_BASE + BOUND_STEP * f64::from(*k));
    let step = if raw.abs() > bound {
        *k += 1;
        bound.copysign(raw)
    } else {
        // The smallest k whose boundary still holds this change.
        let need = ((raw.abs() / rate_mbps.max(f64::MIN_POSITIVE) - BOUND_BASE) / BOUND_STEP).ceil();
        *k = need.max(0.0) as u32;
        raw
    };
    if step.abs() < MIN_STEP_MBPS {
        MIN_STEP_MBPS * dir.signum()
    } else {
        step
    }
}

/// Vivace's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Doubling while the utility rises.
    Starting,
    /// Three randomised pairs around the rate.
    Probing,
    /// Gradient steps in the decided direction.
    Moving,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Start,
    /// Probe k of the six.
    Probe(u8),
    /// The first MI at a step's rate.
    Step,
    /// Sent while waiting; its outcome is not used.
    Filler,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    epoch: u32,
    role: Role,
}

/// The PCC Vivace controller.
#[derive(Clone, Debug)]
pub struct Vivace {
    core: pcc::Core<Tag>,
    rng: RngStream,
    phase: Phase,
    epoch: u32,
    /// The rate fillers (and, starting, the next doubling) build on, Mbit/s.
    rate: f64,
    last_start: Option<(f64, f64)>,
    /// Starting: the first MI is open (later ones double).
    started: bool,
    probe_sign: [f64; 2 * PAIRS],
    probes_sent: usize,
    probe_u: [Option<f64>; 2 * PAIRS],
    dir: f64,
    rounds: u32,
    k: u32,
    /// The latest step's MI (rate, utility), or the probed rate and its mean probe utility.
    prev: (f64, f64),
    step_pending: bool,
    /// The latest gradient and step, for tests and telemetry.
    last_gradient: f64,
    last_step: f64,
}

impl Vivace {
    /// Vivace with random stream seed 0.
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Vivace {
        Vivace::with_seed(mss, init_cwnd_segments, 0)
    }

    /// Vivace whose probe orders are drawn from `seed` (STYLE.md rule 3). It starts at the initial
    /// window per (assumed 100 ms) RTT, PCC-Uspace's start.
    pub fn with_seed(mss: u64, init_cwnd_segments: u64, seed: u64) -> Vivace {
        let mss = mss.max(1);
        let start = (init_cwnd_segments.max(1) * mss * 8) as f64 / pcc::DEFAULT_RTT.as_secs_f64() / 1e6;
        Vivace {
            core: pcc::Core::new(mss),
            rng: leoguard_core::stream(seed, "cc/pcc-vivace"),
            phase: Phase::Starting,
            epoch: 0,
            rate: start.max(MIN_RATE_MBPS),
            last_start: None,
            started: false,
            probe_sign: [0.0; 2 * PAIRS],
            probes_sent: 0,
            probe_u: [None; 2 * PAIRS],
            dir: 0.0,
            rounds: 0,
            k: 0,
            prev: (0.0, 0.0),
            step_pending: false,
            last_gradient: 0.0,
            last_step: 0.0,
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The rate being sent at, Mbit/s.
    pub fn rate_mbps(&self) -> f64 {
        pcc::Algorithm::sending_rate_mbps(self)
    }

    /// The latest utility gradient (utility per Mbit/s) and rate step (Mbit/s).
    pub fn last_move(&self) -> (f64, f64) {
        (self.last_gradient, self.last_step)
    }

    /// Consecutive steps in one direction (τ) and the boundary counter k.
    pub fn rounds_and_bound(&self) -> (u32, u32) {
        (self.rounds, self.k)
    }

    fn start_probing(&mut self, rate: f64) {
        self.phase = Phase::Probing;
        self.epoch += 1;
        self.rate = rate.max(MIN_RATE_MBPS);
        self.rounds = 0;
        self.k = 0;
        for pair in 0..PAIRS {
            let up_first = self.rng.bernoulli(0.5);
            self.probe_sign[2 * pair] = if up_first { 1.0 } else { -1.0 };
            self.probe_sign[2 * pair + 1] = -self.probe_sign[2 * pair];
        }
        self.probes_sent = 0;
        self.probe_u = [None; 2 * PAIRS];
    }

    /// Steps from `rate` (utility `u`) along gradient `gamma`, the `rounds`-th step this way.
    fn step(&mut self, rate: f64, u: f64, gamma: f64) {
        let step = rate_step(gamma, self.rounds, &mut self.k, rate, self.dir);
        self.last_gradient = gamma;
        self.last_step = step;
        self.prev = (rate, u);
        self.rate = (rate + step).max(MIN_RATE_MBPS);
        self.phase = Phase::Moving;
        self.epoch += 1;
        self.step_pending = true;
    }

    fn next_mi(&mut self) -> (f64, Role) {
        match self.phase {
            Phase::Starting => {
                if self.started {
                    self.rate *= 2.0;
                }
                self.started = true;
                (self.rate, Role::Start)
            }
            Phase::Probing if self.probes_sent < 2 * PAIRS => {
                let k = self.probes_sent;
                self.probes_sent += 1;
                (self.rate * (1.0 + self.probe_sign[k] * PROBE_EPS), Role::Probe(k as u8))
            }
            Phase::Moving if self.step_pending => {
                self.step_pending = false;
                (self.rate, Role::Step)
            }
            _ => (self.rate, Role::Filler),
        }
    }

    fn on_outcome(&mut self, o: &MiOutcome<Tag>) {
        if o.tag.epoch != self.epoch {
            return;
        }
        let x = o.rate_mbps();
        let u = utility(x, o.rtt_gradient, o.loss_rate());
        match (self.phase, o.tag.role) {
            (Phase::Starting, Role::Start) => match self.last_start {
                Some((r, u_prev)) if u < u_prev => self.start_probing(r),
                _ => self.last_start = Some((x, u)),
            },
            (Phase::Probing, Role::Probe(k)) => {
                self.probe_u[usize::from(k)] = Some(u);
                if self.probe_u.iter().all(Option::is_some) {
                    self.decide();
                }
            }
            (Phase::Moving, Role::Step) => {
                let dr = x - self.prev.0;
                let gamma = if dr.abs() > 1e-9 { (u - self.prev.1) / dr } else { 0.0 };
                if gamma * self.dir > 0.0 {
                    self.rounds += 1;
                    self.step(x, u, gamma);
                } else {
                    self.start_probing(x);
                }
            }
            _ => {}
        }
    }

    /// The three pairs' gradients vote; the majority's mean gradient makes the first step.
    fn decide(&mut self) {
        let mut g = [0.0; PAIRS];
        let mut mean_u = 0.0;
        for (pair, gp) in g.iter_mut().enumerate() {
            let (a, b) = (2 * pair, 2 * pair + 1);
            let (ua, ub) = (self.probe_u[a].unwrap_or(0.0), self.probe_u[b].unwrap_or(0.0));
            let (ra, rb) = (
                self.rate * (1.0 + self.probe_sign[a] * PROBE_EPS),
                self.rate * (1.0 + self.probe_sign[b] * PROBE_EPS),
            );
            *gp = (ua - ub) / (ra - rb);
            mean_u += (ua + ub) / (2 * PAIRS) as f64;
        }
        let ups = g.iter().filter(|&&x| x > 0.0).count();
        self.dir = if 2 * ups > PAIRS { 1.0 } else { -1.0 };
        let (mut sum, mut n) = (0.0, 0.0);
        for &gp in &g {
            if (gp > 0.0) == (self.dir > 0.0) {
                sum += gp;
                n += 1.0;
            }
        }
        self.rounds = 1;
        self.k = 0;
        self.step(self.rate, mean_u, sum / n);
    }
}

impl pcc::Algorithm for Vivace {
    type Tag = Tag;
    const NAME: &'static str = "pcc-vivace";

    fn core(&self) -> &pcc::Core<Tag> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut pcc::Core<Tag> {
        &mut self.core
    }

    fn next_tagged_mi(&mut self) -> (f64, Tag) {
        let (rate, role) = self.next_mi();
        (rate, Tag { epoch: self.epoch, role })
    }

    fn on_outcome(&mut self, o: &MiOutcome<Tag>) {
        Vivace::on_outcome(self, o);
    }

    fn mi_len(&self) -> Duration {
        // One MI per RTT.
        self.core.srtt.unwrap_or(pcc::DEFAULT_RTT)
    }

    fn idle_rate_mbps(&self) -> f64 {
        self.rate
    }

    fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::Starting => "starting",
            Phase::Probing => "probing",
            Phase::Moving => "moving",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CongestionControl;
    use leoguard_core::Instant;

    const MSS: u64 = 1000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    /// Opens the next MI and feeds its outcome at once, with (RTT gradient, loss) from `f(rate, role)`.
    fn mi(cc: &mut Vivace, f: impl Fn(f64, Role) -> (f64, f64)) -> (f64, Role) {
        let (rate, role) = cc.next_mi();
        let (grad, loss) = f(rate, role);
        let sent = 1_000_000;
        let lost = (loss * sent as f64).round() as u64;
        let o = MiOutcome {
            tag: Tag { epoch: cc.epoch, role },
            rate: pcc::from_mbps(rate),
            start: Instant::ZERO,
            end: Instant::ZERO,
            sent,
            acked: sent - lost,
            lost,
            rtt_samples: 2,
            rtt_gradient: grad,
            start_rtt: None,
            end_rtt: None,
        };
        cc.on_outcome(&o);
        (pcc::mbps(o.rate), role)
    }

    fn lossless(_: f64, _: Role) -> (f64, f64) {
        (0.0, 0.0)
    }

    #[test]
    fn utility_against_hand_computed_values() {
        // 10^0.9 = 7.943282.
        assert!(close(utility(10.0, 0.0, 0.0), 7.943_282_347));
        // A 1 % RTT gradient costs 900 · 10 · 0.01 = 90.
        assert!(close(utility(10.0, 0.01, 0.0), -82.056_717_653));
        // A falling RTT is no reward.
        assert!(close(utility(10.0, -0.05, 0.0), 7.943_282_347));
        // 2 % loss costs 11.35 · 10 · 0.02 = 2.27.
        assert!(close(utility(10.0, 0.0, 0.02), 5.673_282_347));
        // 20^0.9 − 900 · 20 · 0.002 − 11.35 · 20 · 0.01 = 14.820289 − 36 − 2.27.
        assert!(close(utility(20.0, 0.002, 0.01), -23.447_311_018));
    }

    #[test]
    fn the_amplifier_and_the_dynamic_boundary_shape_the_step() {
        assert!(close(amplifier(1), 1.0));
        assert!(close(amplifier(2), 1.626_707_657));
        assert!(close(amplifier(3), 2.297_396_710));
        let mut k = 0;
        // γ = 0.6 at 20 Mbit/s, τ = 1: 0.6 within 20 · 5 % = 1.0; k stays 0.
        assert!(close(rate_step(0.6, 1, &mut k, 20.0, 1.0), 0.6));
        assert_eq!(k, 0);
        // γ = 0.2: below the 0.5 Mbit/s minimum step.
        assert!(close(rate_step(0.2, 1, &mut k, 20.0, 1.0), 0.5));
        assert!(close(rate_step(-0.2, 1, &mut k, 20.0, -1.0), -0.5));
        // γ = 3, τ = 3: 3 · 2.2974 = 6.89 capped at 1.0 (k -> 1); τ = 4: 3 · 3.0028 = 9.01 capped at
        // 20 · 10 % = 2.0 (k -> 2); γ = 0.9, τ = 5: 0.9 · 3.7372 = 3.363 capped at 3.0 (k -> 3).
        assert!(close(rate_step(3.0, 3, &mut k, 20.0, 1.0), 1.0));
        assert_eq!(k, 1);
        assert!(close(rate_step(3.0, 4, &mut k, 20.0, 1.0), 2.0));
        assert_eq!(k, 2);
        assert!(close(rate_step(0.9, 5, &mut k, 20.0, 1.0), 3.0));
        assert_eq!(k, 3);
        // Within the bound (20 % = 4.0): 0.4 · 3.7372 = 1.4949 needs only 20 · (5 + 5) % = 2: k = 1.
        assert!(close(rate_step(0.4, 5, &mut k, 20.0, 1.0), 1.494_877_128));
        assert_eq!(k, 1);
        // A steep fall is capped the same way downwards.
        let mut k = 0;
        assert!(close(rate_step(-50.0, 1, &mut k, 20.0, -1.0), -1.0));
        assert_eq!(k, 1);
    }

    #[test]
    fn starting_doubles_while_the_utility_rises_then_probes_the_best_rate() {
        let mut cc = Vivace::new(1448, 10);
        // 10 · 1448 B per 100 ms = 1.1584 Mbit/s; above 20 Mbit/s the queue grows: dRTT/dt > 0.
        let queue = |rate: f64, _: Role| (((rate - 20.0) / 20.0).max(0.0), 0.0);
        let mut rates = Vec::new();
        while cc.phase() == Phase::Starting {
            let (r, role) = mi(&mut cc, queue);
            assert_eq!(role, Role::Start);
            rates.push(r);
        }
        // 1.1584, 2.3168, 4.6336, 9.2672, 18.5344 (utility up), 37.0688 (down): back to 18.5344.
        assert_eq!(rates.len(), 6, "{rates:?}");
        for (k, r) in rates.iter().enumerate() {
            assert!(close(*r, 1.1584 * f64::from(1u32 << k)), "{rates:?}");
        }
        assert_eq!(cc.phase(), Phase::Probing);
        assert!(close(cc.rate, 18.5344));
        // Six probes at ±5 %, three pairs with one of each.
        let mut probes = Vec::new();
        for _ in 0..6 {
            let (r, role) = mi(&mut cc, queue);
            assert!(matches!(role, Role::Probe(_)));
            probes.push(r);
        }
        for pair in probes.chunks(2) {
            let mut p = pair.to_vec();
            p.sort_by(f64::total_cmp);
            assert!(close(p[0], 18.5344 * 0.95) && close(p[1], 18.5344 * 1.05), "{probes:?}");
        }
        assert_eq!(cc.phase(), Phase::Moving);
    }

    #[test]
    fn the_majority_of_three_pairs_decides_and_only_its_pairs_make_the_gradient() {
        let mut cc = Vivace::new(MSS, 10);
        cc.start_probing(20.0);
        // Pairs 0 and 1 lossless (g = (21^0.9 − 19^0.9) / 2 = 0.667052); pair 2's upper probe sees
        // a 0.1 % RTT gradient: 900 · 21 · 0.001 = 18.9 less utility, so it votes down.
        let f = |rate: f64, role: Role| match role {
            Role::Probe(4 | 5) if rate > 20.0 => (0.001, 0.0),
            _ => (0.0, 0.0),
        };
        for _ in 0..6 {
            mi(&mut cc, f);
        }
        assert_eq!(cc.phase(), Phase::Moving);
        let (g, step) = cc.last_move();
        assert!(close(g, 0.667_051_601), "{g}");
        // τ = 1: m = 1; 0.667 within 20 · 5 % = 1; above the 0.5 minimum.
        assert!(close(step, 0.667_051_601));
        assert!(close(cc.rate, 20.667_051_601));
        assert_eq!(cc.rounds_and_bound(), (1, 0));
        // Two pairs down out of three: a down decision, from the two down pairs' mean gradient.
        let mut cc = Vivace::new(MSS, 10);
        cc.start_probing(20.0);
        let f = |rate: f64, role: Role| match role {
            Role::Probe(0..=3) if rate > 20.0 => (0.001, 0.0),
            _ => (0.0, 0.0),
        };
        for _ in 0..6 {
            mi(&mut cc, f);
        }
        // Each down pair: (21^0.9 − 18.9 − 19^0.9) / 2 = 0.667052 − 9.45 = −8.782948; capped at −1.
        let (g, step) = cc.last_move();
        assert!(close(g, -8.782_948_399), "{g}");
        assert!(close(step, -1.0));
        assert!(close(cc.rate, 19.0));
        assert_eq!(cc.rounds_and_bound(), (1, 1));
    }

    #[test]
    fn moving_amplifies_consistent_steps_and_probes_again_when_the_gradient_turns() {
        let mut cc = Vivace::new(MSS, 10);
        cc.start_probing(20.0);
        for _ in 0..6 {
            mi(&mut cc, lossless);
        }
        // Probed at 20 (mean probe utility = mean of 21^0.9 and 19^0.9 = 14.820665), stepped to
        // 20.667052. Its MI is lossless: γ = (20.667052^0.9 − 14.820665) / 0.667052.
        let u0 = (21f64.powf(0.9) + 19f64.powf(0.9)) / 2.0;
        let r1 = 20.0 + 0.667_051_601;
        let (r, role) = mi(&mut cc, lossless);
        assert_eq!(role, Role::Step);
        assert!(close(r, r1));
        let g1 = (r1.powf(0.9) - u0) / (r1 - 20.0);
        let (g, step) = cc.last_move();
        assert!(close(g, g1), "{g} vs {g1}");
        // τ = 2: 1.626708 · γ = 1.088 exceeds r1 · 5 % = 1.0334: capped there, k -> 1.
        assert!(1.626_707_657 * g1 > 0.05 * r1);
        assert!(close(step, 0.05 * r1), "{step}");
        assert_eq!(cc.rounds_and_bound(), (2, 1));
        // The next step's MI sees the queue grow: the gradient turns; probing at that rate.
        let r2 = r1 + step;
        let (r, _) = mi(&mut cc, |_, _| (0.01, 0.0));
        assert!(close(r, r2));
        assert_eq!(cc.phase(), Phase::Probing);
        assert!(close(cc.rate, r2));
        assert_eq!(cc.rounds_and_bound(), (0, 0));
    }

    #[test]
    fn the_rate_never_falls_below_half_a_megabit() {
        let mut cc = Vivace::new(MSS, 10);
        cc.start_probing(0.6);
        for _ in 0..6 {
            mi(&mut cc, |_, _| (0.0, 0.5));
        }
        assert!(close(cc.rate, MIN_RATE_MBPS), "{}", cc.rate);
    }

    #[test]
    fn on_a_paced_path_it_settles_near_the_bottleneck() {
        let mut cc = Vivace::with_seed(MSS, 10, 3);
        let rtt = Duration::from_millis(40);
        let loss = |r: f64| (1.0 - 10.0 / r).max(0.0);
        let now = pcc::drive(&mut cc, Instant::ZERO, 2.0, rtt, loss);
        assert_ne!(cc.phase(), Phase::Starting);
        pcc::drive(&mut cc, now, 10.0, rtt, loss);
        let r = cc.rate_mbps();
        assert!((8.0..11.0).contains(&r), "{r}");
        assert!(cc.owns_recovery_window() && cc.pacing_rate().is_some());
    }
}
