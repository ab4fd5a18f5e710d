//! The ground segment: user terminals, ground stations (gateways) and PoPs, and which satellites
//! each can see at a given moment.

use crate::error::OrbitError;
use crate::geo::{dot, elevation_deg, norm, Geodetic, Vec3, EARTH_RADIUS_M};

/// What a ground node does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A user terminal (dish).
    Terminal,
    /// A ground station / gateway.
    GroundStation,
    /// A point of presence (reached from ground stations terrestrially).
    Pop,
}

impl Role {
    /// Parses `terminal`, `ground-station` (or `gateway`, `gs`) and `pop`.
    pub fn parse(s: &str) -> Result<Role, OrbitError> {
        match s.to_ascii_lowercase().as_str() {
            "terminal" | "user-terminal" | "ut" => Ok(Role::Terminal),
            "ground-station" | "gateway" | "gs" => Ok(Role::GroundStation),
            "pop" => Ok(Role::Pop),
            _ => Err(OrbitError::Unknown {
                kind: "ground role",
                name: s.to_string(),
                known: "terminal, ground-station, pop".into(),
            }),
        }
    }

    /// Canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Terminal => "terminal",
            Role::GroundStation => "ground-station",
            Role::Pop => "pop",
        }
    }
}

/// A place on the ground with a role.
#[derive(Clone, Debug, PartialEq)]
pub struct GroundNode {
    /// Name (city name or user label).
    pub name: String,
    /// Location.
    pub pos: Geodetic,
    /// Role.
    pub role: Role,
    ecef: Vec3,
}

impl GroundNode {
    /// A validated ground node.
    pub fn new(name: &str, lat_deg: f64, lon_deg: f64, alt_m: f64, role: Role) -> Result<Self, OrbitError> {
        if !(lat_deg.is_finite() && (-90.0..=90.0).contains(&lat_deg)) {
            return Err(OrbitError::invalid("latitude", lat_deg, "must be in [-90, 90] degrees"));
        }
        if !(lon_deg.is_finite() && (-180.0..=180.0).contains(&lon_deg)) {
            return Err(OrbitError::invalid("longitude", lon_deg, "must be in [-180, 180] degrees"));
        }
        if !(alt_m.is_finite() && (-500.0..=10_000.0).contains(&alt_m)) {
            return Err(OrbitError::invalid("altitude_m", alt_m, "must be in [-500, 10000] metres"));
        }
        let pos = Geodetic { lat_deg, lon_deg, alt_m };
        Ok(GroundNode { name: name.to_string(), pos, role, ecef: pos.to_ecef() })
    }

    /// ECEF position.
    #[inline]
    pub fn ecef(&self) -> Vec3 {
        self.ecef
    }
}

/// Validates a minimum elevation angle.
pub fn check_min_elevation(min_el_deg: f64) -> Result<(), OrbitError> {
    if !(min_el_deg.is_finite() && (0.0..=90.0).contains(&min_el_deg)) {
        return Err(OrbitError::invalid("min_elevation_deg", min_el_deg, "must be in [0, 90] degrees"));
    }
    Ok(())
}

/// Finds the satellites a ground point sees above a minimum elevation, with a cheap cone pre-filter.
#[derive(Clone, Debug)]
pub struct VisibilityFilter {
    min_el_deg: f64,
    sin_min_el: f64,
    /// cos of the largest Earth-central angle at which any satellite can still be visible.
    cos_max_central: f64,
}

impl VisibilityFilter {
    /// A filter for satellites no higher than `max_alt_m`.
    pub fn new(min_el_deg: f64, max_alt_m: f64) -> Result<Self, OrbitError> {
        check_min_elevation(min_el_deg)?;
        let e = min_el_deg.to_radians();
        // Central angle lambda = acos(R cos e / r) - e, widened by 1 % for TLE altitude spread.
        let r = EARTH_RADIUS_M + max_alt_m.max(1.0) * 1.05;
        let lam = ((EARTH_RADIUS_M * e.cos() / r).clamp(-1.0, 1.0)).acos() - e;
        Ok(VisibilityFilter {
            min_el_deg,
            sin_min_el: e.sin(),
            cos_max_central: (lam * 1.01).min(std::f64::consts::PI).cos(),
        })
    }

    /// Minimum elevation, degrees.
    pub fn min_elevation_deg(&self) -> f64 {
        self.min_el_deg
    }

    /// Whether `sat` is visible from `ground` (exact test).
    #[inline]
    pub fn visible(&self, ground: Vec3, sat: Vec3) -> bool {
        let d = [sat[0] - ground[0], sat[1] - ground[1], sat[2] - ground[2]];
        // sin(elevation) = d . g_hat / |d|  >=  sin(min)
        dot(d, ground) >= self.sin_min_el * norm(d) * norm(ground)
    }

    /// Appends `(satellite, slant range in metres)` for every visible satellite to `out` (cleared first).
    pub fn visible_into(&self, ground: Vec3, sats: &[Vec3], out: &mut Vec<(u32, f64)>) {
        out.clear();
        let gn = norm(ground);
        for (i, &s) in sats.iter().enumerate() {
            // Pre-filter: the satellite direction must lie within the visibility cone around `ground`.
            let sd = dot(s, ground);
            if sd <= 0.0 || sd * sd < self.cos_max_central * self.cos_max_central * dot(s, s) * gn * gn {
                continue;
            }
            let d = [s[0] - ground[0], s[1] - ground[1], s[2] - ground[2]];
            let dn = norm(d);
            if dot(d, ground) >= self.sin_min_el * dn * gn {
                out.push((i as u32, dn));
            }
        }
    }

    /// Elevation of `sat` from `ground` in degrees.
    pub fn elevation(&self, ground: Vec3, sat: Vec3) -> f64 {
        elevation_deg(ground, sat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constellation::Constellation;
    use crate::geo::{distance, max_gsl_length_m};

    #[test]
    fn bad_coordinates_are_rejected_by_name() {
        let e = GroundNode::new("x", 91.0, 0.0, 0.0, Role::Terminal).unwrap_err().to_string();
        assert!(e.contains("latitude") && e.contains("91"), "{e}");
        let e = GroundNode::new("x", 0.0, -181.0, 0.0, Role::Terminal).unwrap_err().to_string();
        assert!(e.contains("longitude"), "{e}");
        assert!(check_min_elevation(91.0).unwrap_err().to_string().contains("min_elevation_deg"));
        assert!(check_min_elevation(-1.0).is_err());
    }

    #[test]
    fn prefilter_agrees_with_exact_test_and_slant_range_obeys_closed_form() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let f = VisibilityFilter::new(25.0, 550e3).unwrap();
        let max = max_gsl_length_m(550e3, 25.0);
        let mut out = Vec::new();
        for (lat, lon) in [(40.7, -74.0), (51.5, -0.1), (-33.9, 151.2), (0.0, 0.0), (60.0, 10.0)] {
            let g = GroundNode::new("g", lat, lon, 0.0, Role::Terminal).unwrap();
            for t in [0.0, 333.3, 2000.0] {
                let pos = c.positions(t).unwrap();
                f.visible_into(g.ecef(), &pos, &mut out);
                let exact: Vec<u32> = (0..pos.len() as u32).filter(|&i| f.visible(g.ecef(), pos[i as usize])).collect();
                let got: Vec<u32> = out.iter().map(|x| x.0).collect();
                assert_eq!(got, exact);
                for &(i, d) in &out {
                    assert!(d <= max + 1.0, "slant {d} > {max}");
                    assert!((d - distance(g.ecef(), pos[i as usize])).abs() < 1e-6);
                    assert!(f.elevation(g.ecef(), pos[i as usize]) >= 25.0 - 1e-9);
                }
            }
        }
    }
}
