//! Loss models of the relay: independent (Bernoulli) loss and the two-state Gilbert-Elliott channel
//! (Gilbert 1960, Elliott 1963; the parameterisation of `tc netem loss gemodel`: p = P(good -> bad),
//! r = P(bad -> good), 1-h = loss probability in bad, 1-k = loss probability in good).

use leoguard_core::RngStream;

/// A loss model with its state.
#[derive(Clone, Debug, PartialEq)]
pub enum LossModel {
    /// Never drops.
    None,
    /// Drops each datagram independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott.
    GilbertElliott {
        /// P(good -> bad) per datagram.
        p: f64,
        /// P(bad -> good) per datagram.
        r: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Currently in the bad state.
        bad: bool,
    },
}

impl LossModel {
    /// Parse `none`, `bernoulli:P` or `ge:P,R,LOSS_BAD[,LOSS_GOOD]` (probabilities in 0..=1).
    pub fn parse(spec: &str) -> Result<LossModel, String> {
        let prob = |s: &str, what: &str| -> Result<f64, String> {
            match s.trim().parse::<f64>() {
                Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
                _ => Err(format!("{what} must be a probability in 0..=1, got {s:?}")),
            }
        };
        if spec == "none" {
            return Ok(LossModel::None);
        }
        if let Some(p) = spec.strip_prefix("bernoulli:") {
            return Ok(LossModel::Bernoulli { p: prob(p, "bernoulli p")? });
        }
        if let Some(rest) = spec.strip_prefix("ge:") {
            let v: Vec<&str> = rest.split(',').collect();
            if v.len() != 3 && v.len() != 4 {
                return Err("ge needs P,R,LOSS_BAD[,LOSS_GOOD]".into());
            }
            return Ok(LossModel::GilbertElliott {
                p: prob(v[0], "ge P")?,
                r: prob(v[1], "ge R")?,
                loss_bad: prob(v[2], "ge LOSS_BAD")?,
                loss_good: if v.len() == 4 { prob(v[3], "ge LOSS_GOOD")? } else { 0.0 },
                bad: false,
            });
        }
        Err(format!("unknown loss model {spec:?} (none, bernoulli:P, ge:P,R,LOSS_BAD[,LOSS_GOOD])"))
    }

    /// Long-run loss rate (the stationary mean).
    pub fn mean_loss(&self) -> f64 {
        match self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => *p,
            LossModel::GilbertElliott { p, r, loss_bad, loss_good, .. } => {
                if p + r == 0.0 {
                    return *loss_good;
                }
                let pi_bad = p / (p + r);
                pi_bad * loss_bad + (1.0 - pi_bad) * loss_good
            }
        }
    }

    /// Decide the fate of the next datagram: true = drop.
    pub fn drop_next(&mut self, rng: &mut RngStream) -> bool {
        match self {
            LossModel::None => false,
            LossModel::Bernoulli { p } => rng.bernoulli(*p),
            LossModel::GilbertElliott { p, r, loss_bad, loss_good, bad } => {
                // Transition first, then draw the loss in the new state (as netem does).
                *bad = if *bad { !rng.bernoulli(*r) } else { rng.bernoulli(*p) };
                rng.bernoulli(if *bad { *loss_bad } else { *loss_good })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_core::stream;

    #[test]
    fn parse_and_errors() {
        assert_eq!(LossModel::parse("bernoulli:0.05"), Ok(LossModel::Bernoulli { p: 0.05 }));
        assert!(LossModel::parse("bernoulli:1.5").is_err());
        assert!(LossModel::parse("ge:0.1,0.2").is_err());
        assert!(LossModel::parse("pareto:1").is_err());
        let ge = LossModel::parse("ge:0.01,0.3,0.5").expect("ge");
        // pi_bad = 0.01 / 0.31; loss = pi_bad * 0.5.
        assert!((ge.mean_loss() - 0.01 / 0.31 * 0.5).abs() < 1e-12);
    }

    #[test]
    fn empirical_rates_match_the_stationary_mean_and_seed_repeats() {
        for spec in ["bernoulli:0.05", "ge:0.01,0.25,0.8,0.01"] {
            let mut m = LossModel::parse(spec).expect("model");
            let mut rng = stream(11, "loss");
            let n = 400_000;
            let drops: Vec<bool> = (0..n).map(|_| m.drop_next(&mut rng)).collect();
            let rate = drops.iter().filter(|d| **d).count() as f64 / n as f64;
            let mean = m.mean_loss();
            assert!((rate - mean).abs() < 0.1 * mean, "{spec}: {rate} vs {mean}");
            let mut m2 = LossModel::parse(spec).expect("model");
            let mut rng2 = stream(11, "loss");
            let again: Vec<bool> = (0..n).map(|_| m2.drop_next(&mut rng2)).collect();
            assert_eq!(drops, again);
        }
        // Gilbert-Elliott losses come in bursts: mean burst length 1 / r when loss_bad = 1, loss_good = 0.
        let mut m = LossModel::parse("ge:0.01,0.25,1").expect("model");
        let mut rng = stream(3, "burst");
        let (mut bursts, mut lost, mut prev) = (0u32, 0u32, false);
        for _ in 0..400_000 {
            let d = m.drop_next(&mut rng);
            if d {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = d;
        }
        let mean_burst = f64::from(lost) / f64::from(bursts);
        assert!((mean_burst - 4.0).abs() < 0.3, "{mean_burst}");
    }
}
