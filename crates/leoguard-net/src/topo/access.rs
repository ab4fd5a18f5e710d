//! A measured access link on a constellation's ground terminal (issue 29, docs/realism.md): what a real
//! dish's link adds to the propagation the constellation engine computes. The Python front fits and
//! draws it (python/leoguard/access.py, keyed by seed and time: common random numbers); here it is
//! applied, the same way in both engines: an extra one-way delay on the terminal's ground link at every
//! routing step, and the dish's capacity per second on whichever satellite's link serves it then.

use super::{Control, NetBuilder};
use crate::link::LinkId;
use leoguard_core::{Bps, Duration, Instant};
use leoguard_orbit::attach::Slot;
use std::collections::BTreeMap;

/// One ground terminal's access link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroundAccess {
    /// Extra one-way delay of the ground link at each routing step (index = step; the last holds).
    pub extra: Vec<Duration>,
    /// The dish's capacity in each second of the run: (uplink, downlink); empty = the links' own.
    pub rates: Vec<(Bps, Bps)>,
}

impl GroundAccess {
    /// The extra delay at routing step `k`.
    pub fn extra_at(&self, k: usize) -> Duration {
        self.extra.get(k).or(self.extra.last()).copied().unwrap_or(Duration::ZERO)
    }

    /// Checks the rates (> 0 and at most `max`); `field` names the terminal in errors.
    pub fn validate(&self, max: Bps) -> Result<(), String> {
        for (s, &(up, down)) in self.rates.iter().enumerate() {
            for (name, r) in [("uplink", up), ("downlink", down)] {
                if r.0 == 0 || r > max {
                    return Err(format!("rates[{s}] {name} = {} bit/s must be in (0, {}]", r.0, max.0));
                }
            }
        }
        Ok(())
    }

    /// Checks a topology's access links: at most one per ground node (`grounds`), each valid, and no
    /// measured capacity where a pass profile (`gsl_pass`) also sets the ground links' rates.
    pub fn check_all(access: &[Option<GroundAccess>], grounds: usize, gsl_pass: bool) -> Result<(), String> {
        if access.len() > grounds {
            return Err("more entries than ground nodes".into());
        }
        for a in access.iter().flatten() {
            if !a.rates.is_empty() && gsl_pass {
                return Err("a terminal's measured capacity and gsl_pass both set the GSL rates: give one".into());
            }
            a.validate(super::MAX_LINK_RATE)?;
        }
        Ok(())
    }

    /// Schedules the capacity of each second on the ground links of the slots that serve the terminal
    /// then (a handover moves it to the new satellite's links from the slot's start).
    pub fn schedule_rates(
        &self,
        sim: &mut impl NetBuilder,
        ground: u32,
        slots: &[Slot],
        gsl: &BTreeMap<(u32, u32), (LinkId, LinkId)>,
    ) {
        if self.rates.is_empty() {
            return;
        }
        let at = |s: f64| Instant((s.max(0.0) * 1e9).round() as u64);
        for slot in slots {
            let Some(&(up, down)) = gsl.get(&(ground, slot.sat)) else { continue };
            let mut s = slot.start_s.max(0.0).floor() as usize;
            while (s as f64) < slot.end_s && s < self.rates.len() {
                let (ru, rd) = self.rates[s];
                let t = at((s as f64).max(slot.start_s));
                sim.schedule_controls(
                    t,
                    vec![Control::Rate { link: up, rate: ru }, Control::Rate { link: down, rate: rd }],
                );
                s += 1;
            }
        }
    }
}
