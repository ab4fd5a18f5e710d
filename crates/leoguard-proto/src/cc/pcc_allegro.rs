//! PCC Allegro (Dong et al., NSDI'15; a baseline of LEOTP, REFERENCE.md "Baselines LEOTP uses"): a
//! rate-based controller that learns from the utility of what each monitor interval (MI) achieved.
//!
//! - Utility (§2.2): u = T · Sigmoid_α(L − 0.05) − x · L with T = x(1 − L), x the MI's sending rate
//!   (Mbit/s), L its loss rate and the paper's Sigmoid_α(y) = 1 / (1 + e^(α·y)), α = 100: a cliff
//!   at 5 % loss, so random loss below it costs little.
//! - Starting state: from 2 MSS/RTT the rate doubles every MI until an MI's utility falls below its
//!   predecessor's; the rate then goes back to that predecessor's (the best seen) and decisions
//!   begin.
//! - Decision making: four MIs in two pairs at r(1 + ε) and r(1 − ε), each pair in random order
//!   (randomised controlled trials). Both pairs favouring one side: move to it; otherwise stay at r
//!   and widen ε by ε_min (1 %) up to ε_max (5 %).
//! - Rate adjusting: every MI moves further in the decided direction,
//!   r_n = r_(n−1) · (1 + n · ε_min · dir), so consistent results grow the step; as results come in
//!   (in MI order) each step's utility is compared with the previous one's, and the first that falls
//!   sends the rate back to r_(n−1) and to decision making (ε back to ε_min). Like the starting
//!   state, adjusting does not wait for results (the paper's "in each MI"); the steps already under
//!   way when a fall is seen are forgotten.
//!
//! Results arrive about one RTT after an MI ends. While decision making waits for its four trials'
//! results, the controller keeps sending at the base rate in MIs whose outcome it ignores (each
//! experiment has an epoch; outcomes of other epochs are dropped). MIs last SRTT · U[1.7, 2.2] (the paper's randomised MI
//! length, about two RTTs); before any RTT sample, 100 ms stands for the RTT. Loss events and
//! timeouts do not change the rate directly: they only enter the utility. The window is a cap twice
//! rate · SRTT ([`super::pcc`]), and the controller keeps it through recovery.

use super::pcc::{self, MiOutcome};
use leoguard_core::{Duration, RngStream};

/// Allegro's sigmoid steepness α.
pub const ALPHA: f64 = 100.0;
/// The loss rate at which the sigmoid's cliff sits.
pub const LOSS_CLIFF: f64 = 0.05;
/// ε's smallest value and increment (1 %).
pub const EPS_MIN: f64 = 0.01;
/// ε's largest value (5 %).
pub const EPS_MAX: f64 = 0.05;
/// The MI length range, in SRTTs.
const MI_RTTS: (f64, f64) = (1.7, 2.2);

/// Allegro's utility of an MI at `rate_mbps` with loss rate `loss`.
pub fn utility(rate_mbps: f64, loss: f64) -> f64 {
    let sigmoid = 1.0 / (1.0 + (ALPHA * (loss - LOSS_CLIFF)).exp());
    rate_mbps * (1.0 - loss) * sigmoid - rate_mbps * loss
}

/// Allegro's state (the paper's three).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Doubling until the utility falls.
    Starting,
    /// Randomised trials around the rate.
    Deciding,
    /// Moving in the decided direction with a growing step.
    Adjusting,
}

/// What an MI was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Start,
    /// Trial k of the four.
    Trial(u8),
    /// An MI of rate adjusting, one step further.
    Step,
    /// Sent while waiting; its outcome is not used.
    Filler,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    epoch: u32,
    role: Role,
}

/// The PCC Allegro controller.
#[derive(Clone, Debug)]
pub struct Allegro {
    core: pcc::Core<Tag>,
    rng: RngStream,
    phase: Phase,
    epoch: u32,
    /// The rate the next filler (or, starting, the next doubling) builds on, Mbit/s.
    rate: f64,
    /// Starting: the latest Start MI's (rate, utility).
    last_start: Option<(f64, f64)>,
    /// Starting: the first MI is open (later ones double).
    started: bool,
    /// Deciding: ε, the trials' signs (+1: r(1 + ε)), how many are sent, their utilities.
    eps: f64,
    trial_sign: [f64; 4],
    trials_sent: usize,
    trial_u: [Option<f64>; 4],
    /// Adjusting: direction, the latest step n opened, and the latest result's (rate, utility).
    dir: f64,
    round: u32,
    prev: (f64, f64),
    /// The open MI's length (drawn when it opened).
    mi_len: Duration,
    /// Decisions taken: up, down, inconclusive; and the latest (+1, −1, 0).
    decisions: [u64; 3],
    last_decision: Option<i8>,
}

impl Allegro {
    /// Allegro with random stream seed 0.
    pub fn new(mss: u64, init_cwnd_segments: u64) -> Allegro {
        Allegro::with_seed(mss, init_cwnd_segments, 0)
    }

    /// Allegro whose trial orders are drawn from `seed` (STYLE.md rule 3). It starts at 2 MSS per
    /// (assumed 100 ms) RTT whatever the initial window (the paper's start).
    pub fn with_seed(mss: u64, _init_cwnd_segments: u64, seed: u64) -> Allegro {
        let mss = mss.max(1);
        Allegro {
            core: pcc::Core::new(mss),
            rng: leoguard_core::stream(seed, "cc/pcc-allegro"),
            phase: Phase::Starting,
            epoch: 0,
            rate: (2 * mss * 8) as f64 / pcc::DEFAULT_RTT.as_secs_f64() / 1e6,
            last_start: None,
            started: false,
            eps: EPS_MIN,
            trial_sign: [0.0; 4],
            trials_sent: 0,
            trial_u: [None; 4],
            dir: 0.0,
            round: 0,
            prev: (0.0, 0.0),
            mi_len: pcc::DEFAULT_RTT,
            decisions: [0; 3],
            last_decision: None,
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

    /// ε of the current (or next) trials.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// Decisions taken so far: (up, down, inconclusive).
    pub fn decisions(&self) -> (u64, u64, u64) {
        (self.decisions[0], self.decisions[1], self.decisions[2])
    }

    /// The latest decision: +1 up, −1 down, 0 inconclusive.
    pub fn last_decision(&self) -> Option<i8> {
        self.last_decision
    }

    fn record(&mut self, d: i8) {
        self.decisions[match d {
            1 => 0,
            -1 => 1,
            _ => 2,
        }] += 1;
        self.last_decision = Some(d);
    }

    /// The lowest rate: 2 MSS per RTT.
    fn min_rate(&self) -> f64 {
        let rtt = self.core.srtt.unwrap_or(pcc::DEFAULT_RTT).as_secs_f64().max(1e-6);
        (2 * self.core.mss * 8) as f64 / rtt / 1e6
    }

    /// Starts a round of four trials around `rate` with `eps`.
    fn start_trials(&mut self, rate: f64, eps: f64) {
        self.phase = Phase::Deciding;
        self.epoch += 1;
        self.rate = rate.max(self.min_rate());
        self.eps = eps;
        for pair in 0..2 {
            let up_first = self.rng.bernoulli(0.5);
            self.trial_sign[2 * pair] = if up_first { 1.0 } else { -1.0 };
            self.trial_sign[2 * pair + 1] = -self.trial_sign[2 * pair];
        }
        self.trials_sent = 0;
        self.trial_u = [None; 4];
    }

    /// Moves to rate adjusting from `rate` (whose utility is `u`) in direction `dir`; the next MI
    /// is step 1, r_1 = r_0 (1 + ε_min · dir).
    fn start_adjusting(&mut self, rate: f64, u: f64, dir: f64) {
        self.phase = Phase::Adjusting;
        self.epoch += 1;
        self.dir = dir;
        self.round = 0;
        self.rate = rate;
        self.prev = (rate, u);
    }

    /// The rate and label of the MI to open now.
    fn next_mi(&mut self) -> (f64, Role) {
        match self.phase {
            Phase::Starting => {
                if self.started {
                    self.rate *= 2.0;
                }
                self.started = true;
                (self.rate, Role::Start)
            }
            Phase::Deciding if self.trials_sent < 4 => {
                let k = self.trials_sent;
                self.trials_sent += 1;
                (self.rate * (1.0 + self.trial_sign[k] * self.eps), Role::Trial(k as u8))
            }
            Phase::Adjusting => {
                self.round += 1;
                let step = 1.0 + f64::from(self.round) * EPS_MIN * self.dir;
                self.rate = (self.rate * step).max(self.min_rate());
                (self.rate, Role::Step)
            }
            _ => (self.rate, Role::Filler),
        }
    }

    /// Acts on one MI's outcome.
    fn on_outcome(&mut self, o: &MiOutcome<Tag>) {
        if o.tag.epoch != self.epoch {
            return;
        }
        let u = utility(o.rate_mbps(), o.loss_rate());
        match (self.phase, o.tag.role) {
            (Phase::Starting, Role::Start) => match self.last_start {
                Some((r, u_prev)) if u < u_prev => self.start_trials(r, EPS_MIN),
                _ => self.last_start = Some((o.rate_mbps(), u)),
            },
            (Phase::Deciding, Role::Trial(k)) => {
                self.trial_u[usize::from(k)] = Some(u);
                if self.trial_u.iter().all(Option::is_some) {
                    self.decide();
                }
            }
            (Phase::Adjusting, Role::Step) => {
                if u >= self.prev.1 {
                    self.prev = (o.rate_mbps(), u);
                } else {
                    // Back to r_(n-1), and to decision making.
                    self.start_trials(self.prev.0, EPS_MIN);
                }
            }
            _ => {}
        }
    }

    /// Both pairs agree: move; otherwise try again with a wider ε.
    fn decide(&mut self) {
        let mut votes = [0.0; 2];
        for (pair, vote) in votes.iter_mut().enumerate() {
            let (a, b) = (2 * pair, 2 * pair + 1);
            let (ua, ub) = (self.trial_u[a].unwrap_or(0.0), self.trial_u[b].unwrap_or(0.0));
            // The side whose utility is higher, as a direction (0 on a tie).
            *vote = if ua > ub {
                self.trial_sign[a]
            } else if ub > ua {
                self.trial_sign[b]
            } else {
                0.0
            };
        }
        if votes[0] != 0.0 && votes[0] == votes[1] {
            let dir = votes[0];
            self.record(dir as i8);
            let to = self.rate * (1.0 + dir * self.eps);
            // The utility at the chosen rate: the mean of its two trials.
            let (mut sum, mut n) = (0.0, 0.0);
            for k in 0..4 {
                if self.trial_sign[k] == dir {
                    sum += self.trial_u[k].unwrap_or(0.0);
                    n += 1.0;
                }
            }
            let u = sum / n;
            self.eps = EPS_MIN;
            self.start_adjusting(to, u, dir);
        } else {
            self.record(0);
            let eps = (self.eps + EPS_MIN).min(EPS_MAX);
            self.start_trials(self.rate, eps);
        }
    }

    fn mi_duration(&mut self) -> Duration {
        let rtt = self.core.srtt.unwrap_or(pcc::DEFAULT_RTT);
        Duration::from_secs_f64(rtt.as_secs_f64() * self.rng.uniform_range(MI_RTTS.0, MI_RTTS.1))
    }
}

impl pcc::Algorithm for Allegro {
    type Tag = Tag;
    const NAME: &'static str = "pcc-allegro";

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
        Allegro::on_outcome(self, o);
    }

    fn mi_len(&self) -> Duration {
        self.mi_len
    }

    fn on_mi_opened(&mut self) {
        self.mi_len = self.mi_duration();
    }

    fn idle_rate_mbps(&self) -> f64 {
        self.rate
    }

    fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::Starting => "starting",
            Phase::Deciding => "decision_making",
            Phase::Adjusting => "rate_adjusting",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CongestionControl;
    use leoguard_core::{Bps, Instant};

    const MSS: u64 = 1000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    /// Opens the next MI and feeds its outcome at once: loss rate `loss(rate, role)`.
    fn mi(cc: &mut Allegro, loss: impl Fn(f64, Role) -> f64) -> (f64, Role) {
        let (rate, role) = cc.next_mi();
        let tag = Tag { epoch: cc.epoch, role };
        let sent = 1_000_000;
        let lost = (loss(rate, role) * sent as f64).round() as u64;
        let o = MiOutcome {
            tag,
            rate: pcc::from_mbps(rate),
            start: Instant::ZERO,
            end: Instant::ZERO,
            sent,
            acked: sent - lost,
            lost,
            rtt_samples: 0,
            rtt_gradient: 0.0,
            start_rtt: None,
            end_rtt: None,
        };
        cc.on_outcome(&o);
        (pcc::mbps(o.rate), role)
    }

    /// A 10 Mbit/s bottleneck: what is sent above it is lost.
    fn bottleneck(rate: f64, _: Role) -> f64 {
        (1.0 - 10.0 / rate).max(0.0)
    }

    #[test]
    fn utility_against_hand_computed_values() {
        // L = 0: 10 / (1 + e^-5) = 9.933071.
        assert!(close(utility(10.0, 0.0), 9.933_071_49), "{}", utility(10.0, 0.0));
        // L = 2 %: 10 · 0.98 / (1 + e^-3) − 0.2 = 9.8 · 0.952574 − 0.2 = 9.135227.
        assert!(close(utility(10.0, 0.02), 9.135_227_0), "{}", utility(10.0, 0.02));
        // L = 5 %: at the cliff the sigmoid is 1/2: 10 · 0.95 / 2 − 0.5 = 4.25.
        assert!(close(utility(10.0, 0.05), 4.25));
        // L = 10 %: 9 / (1 + e^5) − 1 = 0.060235 − 1.
        assert!(close(utility(10.0, 0.1), -0.939_764_9), "{}", utility(10.0, 0.1));
        // Linear in the rate.
        assert!(close(utility(20.0, 0.02), 2.0 * utility(10.0, 0.02)));
    }

    #[test]
    fn starting_doubles_until_the_utility_falls_then_trials_the_best_rate() {
        let mut cc = Allegro::new(MSS, 10);
        let r0 = 2.0 * 1000.0 * 8.0 / 0.1 / 1e6; // 2 MSS per 100 ms = 0.16 Mbit/s
        let mut rates = Vec::new();
        loop {
            let (r, role) = mi(&mut cc, bottleneck);
            assert_eq!(role, Role::Start);
            rates.push(r);
            if cc.phase() != Phase::Starting {
                break;
            }
        }
        // 0.16 · 2^k: 0.16 ... 10.24 (2.3 % lost: utility still up), 20.48 (51 % lost: down).
        assert_eq!(rates.len(), 8, "{rates:?}");
        for (k, r) in rates.iter().enumerate() {
            assert!(close(*r, r0 * f64::from(1u32 << k)), "{rates:?}");
        }
        assert_eq!(cc.phase(), Phase::Deciding);
        // Trials around the best rate, 10.24, at ±1 %.
        let (r, role) = mi(&mut cc, bottleneck);
        assert!(matches!(role, Role::Trial(0)));
        assert!(close(r, 10.24 * 1.01) || close(r, 10.24 * 0.99), "{r}");
    }

    #[test]
    fn both_pairs_up_moves_up_then_steps_grow_until_the_utility_falls() {
        let mut cc = Allegro::new(MSS, 10);
        cc.start_trials(8.0, EPS_MIN);
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (r, _) = mi(&mut cc, bottleneck);
            seen.push(r);
        }
        // Randomised pairs: each pair holds one trial above and one below.
        for pair in seen.chunks(2) {
            let mut p = pair.to_vec();
            p.sort_by(f64::total_cmp);
            assert!(close(p[0], 7.92) && close(p[1], 8.08), "{seen:?}");
        }
        assert_eq!((cc.last_decision(), cc.phase()), (Some(1), Phase::Adjusting));
        // r0 = 8.08; r1 = r0 · 1.01, r2 = r1 · 1.02, r3 = r2 · 1.03, r4 = r3 · 1.04: 8.161, 8.324,
        // 8.574, 8.917, 9.363, 9.924 (r6 = r5 · 1.06), 10.619 (6 % lost: utility falls).
        let mut r = 8.08;
        for n in 1..=7 {
            r *= 1.0 + f64::from(n) * 0.01;
            let (got, role) = mi(&mut cc, bottleneck);
            assert_eq!(role, Role::Step);
            assert!(close(got, r), "step {n}: {got} vs {r}");
        }
        // 10.619 lost 5.8 %: back to r6 = 9.924 and to trials at ±1 %.
        assert_eq!(cc.phase(), Phase::Deciding);
        assert!(close(cc.rate, r / 1.07), "{}", cc.rate);
        assert_eq!(cc.eps(), EPS_MIN);
        assert_eq!(cc.decisions(), (1, 0, 0));
    }

    #[test]
    fn disagreeing_pairs_widen_eps_up_to_five_percent_and_a_down_decision_moves_down() {
        let mut cc = Allegro::new(MSS, 10);
        cc.start_trials(10.0, EPS_MIN);
        // First pair favours up, second down (loss on the second pair's upper trial only).
        let split = |rate: f64, role: Role| match role {
            Role::Trial(2 | 3) if rate > 10.0 => 0.2,
            Role::Trial(0 | 1) if rate < 10.0 => 0.2,
            _ => 0.0,
        };
        for (round, eps) in [0.01, 0.02, 0.03, 0.04, 0.05, 0.05].into_iter().enumerate() {
            assert!(close(cc.eps(), eps), "round {round}: {}", cc.eps());
            for _ in 0..4 {
                let (r, _) = mi(&mut cc, split);
                assert!(close(r, 10.0 * (1.0 + eps)) || close(r, 10.0 * (1.0 - eps)), "{r}");
            }
            assert_eq!(cc.last_decision(), Some(0));
        }
        assert_eq!(cc.decisions(), (0, 0, 6));
        // Now both pairs favour down (everything above 10 loses 20 %): move to r(1 − 5 %), then steps.
        let down = |rate: f64, _: Role| if rate > 10.0 { 0.2 } else { 0.0 };
        for _ in 0..4 {
            mi(&mut cc, down);
        }
        assert_eq!((cc.last_decision(), cc.phase(), cc.eps()), (Some(-1), Phase::Adjusting, EPS_MIN));
        let (r, role) = mi(&mut cc, down);
        assert_eq!(role, Role::Step);
        assert!(close(r, 9.5 * 0.99), "{r}");
        // Lower rates lose utility without loss: the step back fails, back to trials at 9.5.
        assert_eq!(cc.phase(), Phase::Deciding);
        assert!(close(cc.rate, 9.5));
    }

    #[test]
    fn outcomes_of_other_epochs_and_fillers_are_ignored() {
        let mut cc = Allegro::new(MSS, 10);
        cc.start_trials(10.0, EPS_MIN);
        let (_, role) = cc.next_mi();
        let stale = Tag { epoch: cc.epoch - 1, role };
        let o = MiOutcome {
            tag: stale,
            rate: Bps::mbps(10),
            start: Instant::ZERO,
            end: Instant::ZERO,
            sent: 1000,
            acked: 1000,
            lost: 0,
            rtt_samples: 0,
            rtt_gradient: 0.0,
            start_rtt: None,
            end_rtt: None,
        };
        cc.on_outcome(&o);
        assert_eq!(cc.trial_u, [None; 4]);
        for _ in 0..3 {
            cc.next_mi();
        }
        // The four trials are out: fillers at the base rate follow until their outcomes arrive.
        assert_eq!(cc.next_mi(), (10.0, Role::Filler));
        assert_eq!(cc.next_mi(), (10.0, Role::Filler));
    }

    #[test]
    fn on_a_paced_path_it_starts_doubles_and_settles_near_the_bottleneck() {
        let mut cc = Allegro::with_seed(MSS, 10, 7);
        let rtt = Duration::from_millis(40);
        let now = pcc::drive(&mut cc, Instant::ZERO, 0.3, rtt, |r| (1.0 - 10.0 / r).max(0.0));
        assert_eq!(cc.phase(), Phase::Starting, "0.16 Mbit/s doubling every ~2 RTT: not there yet");
        assert!(cc.rate_mbps() >= 0.32, "{}", cc.rate_mbps());
        let now = pcc::drive(&mut cc, now, 1.0, rtt, |r| (1.0 - 10.0 / r).max(0.0));
        assert_ne!(cc.phase(), Phase::Starting);
        pcc::drive(&mut cc, now, 10.0, rtt, |r| (1.0 - 10.0 / r).max(0.0));
        let r = cc.rate_mbps();
        assert!((8.5..11.0).contains(&r), "{r}");
        let (up, down, _) = cc.decisions();
        assert!(up > 0 && down > 0, "{:?}", cc.decisions());
        // The window leaves room: twice rate x SRTT.
        assert!(cc.cwnd() + 16 >= (2.0 * r * 1e6 / 8.0 * 0.04) as u64, "{}", cc.cwnd());
        assert!(cc.owns_recovery_window() && cc.pacing_rate().is_some());
    }
}
