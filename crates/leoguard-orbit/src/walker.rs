//! Walker constellations: circular orbits from (altitude, inclination, planes, satellites per plane,
//! phasing), optionally with J2 secular drift of the node and the argument of latitude.

use crate::error::OrbitError;
use crate::geo::{eci_to_ecef_sc, Vec3, EARTH_EQ_RADIUS_M, EARTH_RADIUS_M, J2, MU_EARTH};
use std::f64::consts::PI;

/// How satellites in adjacent planes are offset along the orbit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phasing {
    /// Walker's phasing factor F: plane p is shifted by 2*pi*F*p / (planes * sats_per_plane).
    Walker(u32),
    /// Hypatia's choice: every other plane is shifted by half a slot.
    HalfSlotAlternating,
}

/// One Walker shell. RAANs are spread over `raan_spread_deg` (360 for delta, 180 for star).
#[derive(Clone, Debug, PartialEq)]
pub struct WalkerShell {
    /// Shell name, used to name its satellites.
    pub name: String,
    /// Altitude above the spherical Earth, km.
    pub altitude_km: f64,
    /// Inclination, degrees in [0, 180].
    pub inclination_deg: f64,
    /// Number of orbital planes.
    pub planes: u32,
    /// Satellites in each plane.
    pub sats_per_plane: u32,
    /// Inter-plane phasing.
    pub phasing: Phasing,
    /// Spread of the ascending nodes: 360 (Walker delta) or 180 (Walker star, polar shells).
    pub raan_spread_deg: f64,
    /// Whether +Grid ISLs exist in this shell (false for bent-pipe shells like OneWeb).
    pub isls: bool,
    /// Add J2 secular drift (node regression, apsidal/mean-anomaly rate); off = pure Kepler.
    pub j2: bool,
}

/// Per-shell constants derived once so that positions cost a handful of flops.
#[derive(Clone, Debug)]
pub(crate) struct WalkerKinematics {
    radius_m: f64,
    cos_i: f64,
    sin_i: f64,
    /// Rate of the argument of latitude, rad/s.
    u_rate: f64,
    /// Rate of the ascending node, rad/s (zero without J2).
    raan_rate: f64,
    /// Initial RAAN and argument of latitude per satellite, in satellite order.
    raan0: Vec<f64>,
    u0: Vec<f64>,
}

impl WalkerShell {
    /// Checks every parameter and names the first that is wrong.
    pub fn validate(&self) -> Result<(), OrbitError> {
        if !(self.altitude_km.is_finite() && self.altitude_km > 0.0) {
            return Err(OrbitError::invalid("altitude_km", self.altitude_km, "must be > 0"));
        }
        if self.altitude_km > 100_000.0 {
            return Err(OrbitError::invalid("altitude_km", self.altitude_km, "must be <= 100000 (LEO/MEO)"));
        }
        if !(self.inclination_deg.is_finite() && (0.0..=180.0).contains(&self.inclination_deg)) {
            return Err(OrbitError::invalid("inclination_deg", self.inclination_deg, "must be in [0, 180]"));
        }
        if self.planes == 0 {
            return Err(OrbitError::invalid("planes", self.planes, "must be >= 1"));
        }
        if self.sats_per_plane == 0 {
            return Err(OrbitError::invalid("sats_per_plane", self.sats_per_plane, "must be >= 1"));
        }
        if self.len() > crate::constellation::MAX_SATELLITES {
            return Err(OrbitError::invalid(
                "planes x sats_per_plane",
                format!("{} x {} = {}", self.planes, self.sats_per_plane, self.len()),
                "at most 100000 satellites in a constellation",
            ));
        }
        if let Phasing::Walker(f) = self.phasing {
            if f >= self.planes {
                return Err(OrbitError::invalid("phasing", f, "Walker F must be in [0, planes - 1]"));
            }
        }
        if !(self.raan_spread_deg > 0.0 && self.raan_spread_deg <= 360.0) {
            // NaN fails both comparisons, so it lands here too.
            return Err(OrbitError::invalid("raan_spread_deg", self.raan_spread_deg, "must be in (0, 360]"));
        }
        Ok(())
    }

    /// Number of satellites.
    pub fn len(&self) -> usize {
        self.planes as usize * self.sats_per_plane as usize
    }

    /// Whether the shell is empty (never true for a validated shell).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keplerian mean motion n = sqrt(mu / a^3), rad/s.
    pub fn mean_motion_rad_s(&self) -> f64 {
        let a = EARTH_RADIUS_M + self.altitude_km * 1e3;
        (MU_EARTH / a.powi(3)).sqrt()
    }

    /// Initial (RAAN, argument of latitude) of satellite `sat` in plane-major order, radians.
    pub fn initial_angles(&self, plane: u32, slot: u32) -> (f64, f64) {
        let (p, s) = (f64::from(plane), f64::from(slot));
        let (np, ns) = (f64::from(self.planes), f64::from(self.sats_per_plane));
        let raan = self.raan_spread_deg.to_radians() * p / np;
        let shift = match self.phasing {
            Phasing::Walker(f) => 2.0 * PI * f64::from(f) * p / (np * ns),
            Phasing::HalfSlotAlternating => {
                if plane % 2 == 1 {
                    PI / ns
                } else {
                    0.0
                }
            }
        };
        (raan, 2.0 * PI * s / ns + shift)
    }

    pub(crate) fn kinematics(&self) -> WalkerKinematics {
        let a = EARTH_RADIUS_M + self.altitude_km * 1e3;
        let n = self.mean_motion_rad_s();
        let i = self.inclination_deg.to_radians();
        let (u_rate, raan_rate) = if self.j2 {
            // First-order secular J2 rates for e = 0 (Vallado, Fundamentals of Astrodynamics, 9-41).
            let k = 1.5 * J2 * (EARTH_EQ_RADIUS_M / a).powi(2) * n;
            let raan_dot = -k * i.cos();
            let argp_dot = 0.5 * k * (5.0 * i.cos().powi(2) - 1.0);
            let m_dot = n + 0.5 * k * (3.0 * i.cos().powi(2) - 1.0);
            (m_dot + argp_dot, raan_dot)
        } else {
            (n, 0.0)
        };
        let mut raan0 = Vec::with_capacity(self.len());
        let mut u0 = Vec::with_capacity(self.len());
        for p in 0..self.planes {
            for s in 0..self.sats_per_plane {
                let (r, u) = self.initial_angles(p, s);
                raan0.push(r);
                u0.push(u);
            }
        }
        WalkerKinematics { radius_m: a, cos_i: i.cos(), sin_i: i.sin(), u_rate, raan_rate, raan0, u0 }
    }
}

impl WalkerKinematics {
    /// Inertial position of satellite `k` at `t` seconds after the epoch (per satellite: the
    /// reference [`ecef_into`](Self::ecef_into) is tested against; test builds only).
    #[cfg(test)]
    pub(crate) fn eci(&self, k: usize, t: f64) -> Vec3 {
        let raan = self.raan0[k] + self.raan_rate * t;
        let u = self.u0[k] + self.u_rate * t;
        self.eci_sc(raan.sin_cos(), u.sin_cos())
    }

    /// The inertial position from the sines and cosines of RAAN and argument of latitude.
    #[inline]
    fn eci_sc(&self, (so, co): (f64, f64), (su, cu): (f64, f64)) -> Vec3 {
        let r = self.radius_m;
        [r * (co * cu - so * su * self.cos_i), r * (so * cu + co * su * self.cos_i), r * (su * self.sin_i)]
    }

    /// Earth-fixed positions of every satellite at `t`, appended to `out`, with `earth` the sine and
    /// cosine of the Earth's rotation angle at `t`. The same figures as `eci` (the tests' reference) then
    /// [`eci_to_ecef`](crate::geo::eci_to_ecef) per satellite, to the bit: a plane's satellites
    /// share one RAAN, so its sine and cosine are taken once per run of equal RAANs, and the Earth's
    /// angle once per call, instead of both per satellite (two of three `sin_cos` calls).
    pub(crate) fn ecef_into(&self, t: f64, earth: (f64, f64), out: &mut Vec<Vec3>) {
        let mut last_raan0 = f64::NAN;
        let mut raan = (0.0, 0.0);
        for (&raan0, &u0) in self.raan0.iter().zip(&self.u0) {
            if raan0.to_bits() != last_raan0.to_bits() {
                last_raan0 = raan0;
                raan = (raan0 + self.raan_rate * t).sin_cos();
            }
            let p = self.eci_sc(raan, (u0 + self.u_rate * t).sin_cos());
            out.push(eci_to_ecef_sc(p, earth.0, earth.1));
        }
    }
}

/// A named preset: a list of shells.
pub fn preset(name: &str) -> Result<Vec<WalkerShell>, OrbitError> {
    let shell = |name: &str, alt, inc, planes, spp, phasing, spread, isls| WalkerShell {
        name: name.to_string(),
        altitude_km: alt,
        inclination_deg: inc,
        planes,
        sats_per_plane: spp,
        phasing,
        raan_spread_deg: spread,
        isls,
        j2: false,
    };
    Ok(match name {
        // REFERENCE.md: 550 km, 53 deg, 72 x 22; an IETF draft writes it D:550:53.0:1584/22/17.
        "starlink-shell1" => vec![shell("starlink-shell1", 550.0, 53.0, 72, 22, Phasing::Walker(17), 360.0, true)],
        // Starlink's first-generation filing, five shells (shell 1 above plus four more).
        "starlink-gen1" => vec![
            shell("starlink-s1", 550.0, 53.0, 72, 22, Phasing::Walker(17), 360.0, true),
            shell("starlink-s2", 540.0, 53.2, 72, 22, Phasing::Walker(17), 360.0, true),
            shell("starlink-s3", 570.0, 70.0, 36, 20, Phasing::Walker(11), 360.0, true),
            shell("starlink-s4", 560.0, 97.6, 6, 58, Phasing::Walker(1), 360.0, true),
            shell("starlink-s5", 560.0, 97.6, 4, 43, Phasing::Walker(1), 360.0, true),
        ],
        // REFERENCE.md: Kuiper K1, 630 km, 51.9 deg, 34 x 34.
        "kuiper" => vec![shell("kuiper-k1", 630.0, 51.9, 34, 34, Phasing::Walker(1), 360.0, true)],
        // REFERENCE.md: OneWeb phase 1, 1200 km, 87.9 deg, 18 x 36, near-polar star, bent pipe.
        "oneweb" => vec![shell("oneweb", 1200.0, 87.9, 18, 36, Phasing::HalfSlotAlternating, 180.0, false)],
        // REFERENCE.md: Telesat, 1015 km, 98.98 deg, 27 x 13 (near-polar star).
        "telesat" => vec![shell("telesat", 1015.0, 98.98, 27, 13, Phasing::HalfSlotAlternating, 180.0, true)],
        _ => {
            return Err(OrbitError::Unknown {
                kind: "constellation preset",
                name: name.to_string(),
                known: PRESETS.join(", "),
            })
        }
    })
}

/// Names accepted by [`preset`].
pub const PRESETS: &[&str] = &["starlink-shell1", "starlink-gen1", "kuiper", "oneweb", "telesat"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::{kepler_period_s, norm};

    #[test]
    fn a_shell_of_more_than_100000_satellites_is_refused() {
        let w = WalkerShell {
            planes: 100_000,
            sats_per_plane: 100_000,
            phasing: Phasing::Walker(0),
            ..preset("oneweb").unwrap()[0].clone()
        };
        let e = w.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid planes x sats_per_plane = 100000 x 100000 = 10000000000: at most 100000 satellites in a constellation"
        );
    }

    #[test]
    fn presets_validate_and_have_expected_sizes() {
        let sizes: Vec<usize> = PRESETS.iter().map(|p| preset(p).unwrap().iter().map(WalkerShell::len).sum()).collect();
        assert_eq!(sizes, vec![1584, 4408, 1156, 648, 351]);
        for p in PRESETS {
            for s in preset(p).unwrap() {
                s.validate().unwrap();
            }
        }
        assert!(preset("nope").is_err());
    }

    #[test]
    fn satellite_returns_after_one_kepler_period_and_stays_on_radius() {
        let shell = &preset("starlink-shell1").unwrap()[0];
        let k = shell.kinematics();
        let period = kepler_period_s(shell.altitude_km * 1e3);
        for sat in [0usize, 17, 1583] {
            let p0 = k.eci(sat, 0.0);
            let p1 = k.eci(sat, period);
            let half = k.eci(sat, period / 2.0);
            assert!(crate::geo::distance(p0, p1) < 1e-3, "not periodic");
            assert!(crate::geo::distance(p0, half) > 13_000e3, "half a period should be opposite");
            assert!((norm(half) - (crate::geo::EARTH_RADIUS_M + 550e3)).abs() < 1e-6);
        }
    }

    #[test]
    fn all_at_once_positions_equal_per_satellite_ones_to_the_bit() {
        // Every preset (shared and alternating phasing), with and without J2, at times where the
        // angles wrap; the Earth angle is arbitrary here.
        for name in PRESETS {
            for mut shell in preset(name).unwrap() {
                for j2 in [false, true] {
                    shell.j2 = j2;
                    let k = shell.kinematics();
                    for t in [0.0, 0.1, 15.0, 5_731.3, 86_400.0 * 365.0] {
                        let theta = 0.37 + t * 7.292e-5;
                        let mut out = Vec::new();
                        k.ecef_into(t, theta.sin_cos(), &mut out);
                        assert_eq!(out.len(), shell.len());
                        for (i, p) in out.iter().enumerate() {
                            let want = crate::geo::eci_to_ecef(k.eci(i, t), theta);
                            assert_eq!(p.map(f64::to_bits), want.map(f64::to_bits), "{name} j2={j2} t={t} sat {i}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn validation_names_the_field() {
        let mut s = preset("kuiper").unwrap().remove(0);
        s.altitude_km = 0.0;
        assert!(s.validate().unwrap_err().to_string().contains("altitude_km"));
        s.altitude_km = 500.0;
        s.inclination_deg = 181.0;
        assert!(s.validate().unwrap_err().to_string().contains("inclination_deg"));
        s.inclination_deg = 50.0;
        s.planes = 0;
        assert!(s.validate().unwrap_err().to_string().contains("planes"));
    }
}
