//! Memoryless and Markov loss: no loss, Bernoulli, Gilbert-Elliott.

use leoguard_core::{Instant, RngStream};

use super::{check_prob, LossError, LossModel};

/// Never drops anything, and draws nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLoss;

impl LossModel for NoLoss {
    fn drop_packet(&mut self, _now: Instant, _rng: &mut RngStream) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "none"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Independent loss: each packet is lost with probability `p` (one uniform draw per packet).
#[derive(Debug, Clone, Copy)]
pub struct Bernoulli {
    p: f64,
}

impl Bernoulli {
    /// A Bernoulli model; `p` must be in [0, 1].
    pub fn new(p: f64) -> Result<Self, LossError> {
        Ok(Bernoulli { p: check_prob("bernoulli.p", p)? })
    }

    /// The loss probability.
    pub fn p(&self) -> f64 {
        self.p
    }
}

impl LossModel for Bernoulli {
    fn drop_packet(&mut self, _now: Instant, rng: &mut RngStream) -> bool {
        rng.bernoulli(self.p)
    }

    fn name(&self) -> &'static str {
        "bernoulli"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("p", self.p)]
    }
}

/// Gilbert-Elliott two-state loss with per-packet state transitions.
///
/// On each packet the chain first moves (good -> bad with `p_gb`, bad -> good with `p_bg`), then the
/// packet is lost with the new state's loss probability; the chain starts in the good state. Two
/// uniform draws per packet. Stationary loss rate = pi_B * loss_bad + pi_G * loss_good with
/// pi_B = p_gb / (p_gb + p_bg); the bad state lasts 1 / p_bg packets on average.
///
/// Example, Tambur (NSDI'23) evaluation: `GilbertElliott::new(0.068, 0.852, 0.04, 0.5)`, a stationary
/// loss rate of ~7.4 % in bursts of ~1.17 packets in the bad state.
#[derive(Debug, Clone, Copy)]
pub struct GilbertElliott {
    p_gb: f64,
    p_bg: f64,
    loss_good: f64,
    loss_bad: f64,
    bad: bool,
}

impl GilbertElliott {
    /// A Gilbert-Elliott model; all four parameters must be in [0, 1].
    pub fn new(p_gb: f64, p_bg: f64, loss_good: f64, loss_bad: f64) -> Result<Self, LossError> {
        Ok(GilbertElliott {
            p_gb: check_prob("gilbert_elliott.p_gb", p_gb)?,
            p_bg: check_prob("gilbert_elliott.p_bg", p_bg)?,
            loss_good: check_prob("gilbert_elliott.loss_good", loss_good)?,
            loss_bad: check_prob("gilbert_elliott.loss_bad", loss_bad)?,
            bad: false,
        })
    }

    /// Tambur's evaluation parameters (REFERENCE.md, Baselines): p_gb 0.068, p_bg 0.852, 4 % / 50 % loss.
    pub fn tambur() -> Self {
        GilbertElliott { p_gb: 0.068, p_bg: 0.852, loss_good: 0.04, loss_bad: 0.5, bad: false }
    }

    /// Whether the chain is in the bad state (after the last packet).
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }

    /// The closed-form stationary loss rate pi_B * loss_bad + pi_G * loss_good.
    pub fn stationary_loss_rate(&self) -> f64 {
        let total = self.p_gb + self.p_bg;
        // A chain that never moves stays in its initial (good) state.
        let pi_b = if total > 0.0 { self.p_gb / total } else { 0.0 };
        pi_b * self.loss_bad + (1.0 - pi_b) * self.loss_good
    }
}

impl LossModel for GilbertElliott {
    fn drop_packet(&mut self, _now: Instant, rng: &mut RngStream) -> bool {
        let flip = if self.bad { self.p_bg } else { self.p_gb };
        if rng.bernoulli(flip) {
            self.bad = !self.bad;
        }
        rng.bernoulli(if self.bad { self.loss_bad } else { self.loss_good })
    }

    fn name(&self) -> &'static str {
        "gilbert_elliott"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("p_gb", self.p_gb), ("p_bg", self.p_bg), ("loss_good", self.loss_good), ("loss_bad", self.loss_bad)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::stream;

    #[test]
    fn bernoulli_rate_within_five_sigma_over_200k() {
        for &p in &[0.001, 0.01, 0.2] {
            let mut m = Bernoulli::new(p).expect("valid");
            let mut rng = stream(11, "bernoulli");
            let n = 200_000u64;
            let lost = (0..n).filter(|&i| m.drop_packet(Instant(i), &mut rng)).count() as f64;
            let sigma = (n as f64 * p * (1.0 - p)).sqrt();
            let dev = (lost - n as f64 * p).abs();
            assert!(dev <= 5.0 * sigma, "p={p}: {lost} lost, |dev| {dev} > 5 sigma {sigma}");
        }
        let mut never = Bernoulli::new(0.0).expect("valid");
        let mut always = Bernoulli::new(1.0).expect("valid");
        let mut rng = stream(1, "edge");
        assert!((0..1000).all(|i| !never.drop_packet(Instant(i), &mut rng)));
        assert!((0..1000).all(|i| always.drop_packet(Instant(i), &mut rng)));
    }

    #[test]
    fn gilbert_elliott_matches_closed_form_rate_and_burst_length() {
        let mut m = GilbertElliott::tambur();
        let expect_rate = m.stationary_loss_rate();
        // pi_B = 0.068 / 0.92 = 0.07391; rate = 0.07391 * 0.5 + 0.92609 * 0.04 = 0.07400.
        assert!((expect_rate - 0.073_999).abs() < 1e-5, "{expect_rate}");
        let mut rng = stream(5, "ge");
        let n = 1_000_000u64;
        let (mut lost, mut bad_runs, mut bad_pkts) = (0u64, 0u64, 0u64);
        let mut was_bad = false;
        for i in 0..n {
            lost += u64::from(m.drop_packet(Instant(i), &mut rng));
            let bad = m.in_bad_state();
            bad_pkts += u64::from(bad);
            bad_runs += u64::from(bad && !was_bad);
            was_bad = bad;
        }
        let rate = lost as f64 / n as f64;
        // Binomial sigma, inflated x2 for the chain's (weak, lambda = 0.08) positive correlation.
        let sigma = 2.0 * (expect_rate * (1.0 - expect_rate) / n as f64).sqrt();
        assert!((rate - expect_rate).abs() < 5.0 * sigma, "rate {rate} vs {expect_rate}");
        // Bad-state sojourns are geometric with mean 1/p_bg = 1.1737; ~63k of them: SE ~0.002.
        let mean_bad = bad_pkts as f64 / bad_runs as f64;
        assert!((mean_bad - 1.0 / 0.852).abs() < 0.02, "mean bad run {mean_bad}");
    }

    #[test]
    fn gilbert_elliott_pure_bursts_have_mean_length_one_over_p_bg() {
        // loss 0 good / 1 bad: loss bursts are exactly the bad sojourns, mean 1/0.25 = 4 packets.
        let mut m = GilbertElliott::new(0.01, 0.25, 0.0, 1.0).expect("valid");
        let mut rng = stream(6, "ge-burst");
        let (mut runs, mut lost, mut prev) = (0u64, 0u64, false);
        for i in 0..1_000_000u64 {
            let d = m.drop_packet(Instant(i), &mut rng);
            lost += u64::from(d);
            runs += u64::from(d && !prev);
            prev = d;
        }
        let mean = lost as f64 / runs as f64;
        // ~9.6k bursts, geometric sd 3.46: SE 0.035, so 0.15 is ~4 SE.
        assert!((mean - 4.0).abs() < 0.15, "mean burst {mean}");
        let rate = lost as f64 / 1e6;
        assert!((rate - 0.01 / 0.26).abs() < 0.004, "rate {rate}");
    }
}
