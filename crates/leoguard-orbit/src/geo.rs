//! Geometry on a spherical Earth (R = 6371 km, REFERENCE.md): ECEF vectors, geodetic conversion,
//! elevation angles, and the closed forms for maximum ground-link and ISL lengths.
//!
//! leoguard uses a spherical Earth for all ground geometry, as Hypatia does and as the closed forms
//! in REFERENCE.md assume; TLE satellites are propagated by SGP4 (WGS-72) and rotated to ECEF.

/// Mean Earth radius, metres.
pub const EARTH_RADIUS_M: f64 = 6_371_000.0;
/// Earth's gravitational parameter, m^3/s^2 (WGS-84).
pub const MU_EARTH: f64 = 3.986_004_418e14;
/// Earth's rotation rate, rad/s (sidereal).
pub const OMEGA_EARTH: f64 = 7.292_115_146_706_979e-5;
/// J2 zonal harmonic (WGS-84).
pub const J2: f64 = 1.082_626_68e-3;
/// Equatorial radius used with J2, metres (WGS-84).
pub const EARTH_EQ_RADIUS_M: f64 = 6_378_137.0;
/// Lowest altitude a laser ISL may pass (REFERENCE.md: the 80 km grazing rule).
pub const ISL_GRAZING_ALTITUDE_M: f64 = 80_000.0;

pub use leoguard_core::SPEED_OF_LIGHT_M_S;

/// A 3-vector in metres (ECEF unless said otherwise).
pub type Vec3 = [f64; 3];

/// Dot product.
#[inline]
pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Euclidean norm.
#[inline]
pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// `a - b`.
#[inline]
pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// Straight-line distance between two points.
#[inline]
pub fn distance(a: Vec3, b: Vec3) -> f64 {
    norm(sub(a, b))
}

/// Propagation delay over `metres` at the speed of light, in seconds.
#[inline]
pub fn light_delay_s(metres: f64) -> f64 {
    metres / SPEED_OF_LIGHT_M_S
}

/// Latitude/longitude (degrees) and altitude (metres) over the spherical Earth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geodetic {
    /// Latitude, degrees north.
    pub lat_deg: f64,
    /// Longitude, degrees east in (-180, 180].
    pub lon_deg: f64,
    /// Altitude above the sphere, metres.
    pub alt_m: f64,
}

impl Geodetic {
    /// ECEF position of this point.
    pub fn to_ecef(self) -> Vec3 {
        let (lat, lon) = (self.lat_deg.to_radians(), self.lon_deg.to_radians());
        let r = EARTH_RADIUS_M + self.alt_m;
        [r * lat.cos() * lon.cos(), r * lat.cos() * lon.sin(), r * lat.sin()]
    }

    /// The point at ECEF position `p`.
    pub fn from_ecef(p: Vec3) -> Geodetic {
        let r = norm(p);
        let lat = (p[2] / r).clamp(-1.0, 1.0).asin();
        let lon = p[1].atan2(p[0]);
        Geodetic { lat_deg: lat.to_degrees(), lon_deg: lon.to_degrees(), alt_m: r - EARTH_RADIUS_M }
    }
}

/// Elevation (degrees) of `target` seen from ground point `ground` (both ECEF).
#[inline]
pub fn elevation_deg(ground: Vec3, target: Vec3) -> f64 {
    let d = sub(target, ground);
    let s = dot(d, ground) / (norm(d) * norm(ground));
    s.clamp(-1.0, 1.0).asin().to_degrees()
}

/// Great-circle distance between two surface points, metres.
pub fn great_circle_m(a: Geodetic, b: Geodetic) -> f64 {
    let (p1, p2) = (a.lat_deg.to_radians(), b.lat_deg.to_radians());
    let dp = p2 - p1;
    let dl = (b.lon_deg - a.lon_deg).to_radians();
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_M * h.sqrt().min(1.0).asin()
}

/// Longest ground-satellite link at minimum elevation `min_el_deg` to a shell at `alt_m`:
/// d = sqrt((R+h)^2 - R^2 cos^2 e) - R sin e.
pub fn max_gsl_length_m(alt_m: f64, min_el_deg: f64) -> f64 {
    let e = min_el_deg.to_radians();
    let r = EARTH_RADIUS_M;
    ((r + alt_m).powi(2) - (r * e.cos()).powi(2)).sqrt() - r * e.sin()
}

/// Longest ISL between two satellites at `alt_m` that stays above the grazing altitude:
/// 2 sqrt((R+h)^2 - (R+80 km)^2).
pub fn max_isl_length_m(alt_m: f64) -> f64 {
    let r = EARTH_RADIUS_M;
    2.0 * ((r + alt_m).powi(2) - (r + ISL_GRAZING_ALTITUDE_M).powi(2)).sqrt()
}

/// Whether the segment a-b stays above the grazing altitude (closest approach to Earth's centre).
#[inline]
pub fn segment_clears_grazing(a: Vec3, b: Vec3) -> bool {
    let d = sub(b, a);
    let dd = dot(d, d);
    let t = if dd > 0.0 { (-dot(a, d) / dd).clamp(0.0, 1.0) } else { 0.0 };
    let c = [a[0] + t * d[0], a[1] + t * d[1], a[2] + t * d[2]];
    dot(c, c) >= (EARTH_RADIUS_M + ISL_GRAZING_ALTITUDE_M).powi(2)
}

/// Orbital period of a circular orbit at altitude `alt_m` (Kepler's third law), seconds.
pub fn kepler_period_s(alt_m: f64) -> f64 {
    let a = EARTH_RADIUS_M + alt_m;
    2.0 * std::f64::consts::PI * (a.powi(3) / MU_EARTH).sqrt()
}

/// Greenwich mean sidereal angle (radians) at a Unix time, IAU-82 as used by SGP4 (`gstime`).
pub fn gmst_rad(unix_s: f64) -> f64 {
    sgp4::iau_epoch_to_sidereal_time(julian_years_since_j2000(unix_s))
}

/// Julian years since J2000 (2000-01-01 12:00 UTC) for a Unix time.
pub fn julian_years_since_j2000(unix_s: f64) -> f64 {
    // J2000 is Unix 946_728_000.
    (unix_s - 946_728_000.0) / (86_400.0 * 365.25)
}

/// Rotate an inertial (TEME/ECI) vector into ECEF given the Earth rotation angle `theta`.
#[inline]
pub fn eci_to_ecef(p: Vec3, theta: f64) -> Vec3 {
    let (s, c) = theta.sin_cos();
    eci_to_ecef_sc(p, s, c)
}

/// [`eci_to_ecef`] given the sine and cosine of the rotation angle (for many vectors at one time).
#[inline]
pub fn eci_to_ecef_sc(p: Vec3, sin_theta: f64, cos_theta: f64) -> Vec3 {
    let (s, c) = (sin_theta, cos_theta);
    [c * p[0] + s * p[1], -s * p[0] + c * p[1], p[2]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_forms_match_reference() {
        // REFERENCE.md: 25 deg at 550 km gives ~1123 km; ISL max ~5017 km at 550 km.
        let g = max_gsl_length_m(550e3, 25.0) / 1e3;
        assert!((g - 1123.0).abs() < 1.0, "gsl {g}");
        // REFERENCE.md's ~5017 km takes the equatorial radius (6378 km); with R = 6371 km the same
        // formula gives 5013.9 km. Check ours exactly and the reference within that radius spread.
        let i = max_isl_length_m(550e3) / 1e3;
        let exact = 2.0 * (6921.0f64.powi(2) - 6451.0f64.powi(2)).sqrt();
        assert!((i - exact).abs() < 1e-6, "isl {i}");
        assert!((i - 5017.0).abs() < 4.0, "isl {i}");
        // Period ~5731 s at 550 km (REFERENCE.md).
        let p = kepler_period_s(550e3);
        assert!((p - 5731.0).abs() < 5.0, "period {p}");
    }

    #[test]
    fn geodetic_round_trip_and_elevation() {
        let g = Geodetic { lat_deg: 40.7, lon_deg: -74.0, alt_m: 0.0 };
        let back = Geodetic::from_ecef(g.to_ecef());
        assert!((back.lat_deg - g.lat_deg).abs() < 1e-9 && (back.lon_deg - g.lon_deg).abs() < 1e-9);
        let zenith = Geodetic { alt_m: 550e3, ..g }.to_ecef();
        assert!((elevation_deg(g.to_ecef(), zenith) - 90.0).abs() < 1e-6);
    }

    #[test]
    fn grazing_rule_matches_closed_form() {
        let h = 550e3;
        let r = EARTH_RADIUS_M + h;
        let half = max_isl_length_m(h) / 2.0 / r; // sin of half the central angle
        let ang = half.asin();
        let mk = |a: f64| [r * a.cos(), r * a.sin(), 0.0];
        assert!(segment_clears_grazing(mk(-ang * 0.999), mk(ang * 0.999)));
        assert!(!segment_clears_grazing(mk(-ang * 1.001), mk(ang * 1.001)));
    }

    #[test]
    fn gmst_at_j2000_is_about_280_46_deg() {
        let g = gmst_rad(946_728_000.0).to_degrees();
        assert!((g - 280.46).abs() < 0.01, "gmst {g}");
    }
}
