//! A constellation: one or more shells (Walker or TLE), an epoch, satellite positions at any time, and
//! the +Grid ISL topology with the grazing rule and an optional latitude cut.

use crate::error::OrbitError;
use crate::geo::{gmst_rad, segment_clears_grazing, Geodetic, Vec3};
use crate::tle::{parse_tle_text, TleSatellite};
use crate::walker::{preset, Phasing, WalkerKinematics, WalkerShell};

/// Default epoch: 2026-01-01T00:00:00Z (Unix seconds).
pub const DEFAULT_EPOCH_UNIX_S: f64 = 1_767_225_600.0;

/// The earliest epoch, 1900-01-01T00:00:00Z (Unix seconds). Epochs lie in [1900, 2200): wide of any
/// satellite's life, and well inside what the sidereal-time polynomial and Python's datetime handle
/// (1e300 used to pass here and then fail as an OverflowError in `info()`).
pub const MIN_EPOCH_UNIX_S: f64 = -2_208_988_800.0;
/// The first epoch refused, 2200-01-01T00:00:00Z (Unix seconds).
pub const MAX_EPOCH_UNIX_S: f64 = 7_258_118_400.0;

/// Positions are computed only within 100 Julian years of the epoch: far beyond what any orbit
/// model here means (no drag in Walker shells, SGP4 fits are good for days), while the argument of
/// latitude there (~3.5e6 rad) still resolves to millimetres in an f64. NaN, inf and 1e300 would
/// otherwise give positions of NaN, i.e. a result of nulls.
pub const MAX_ABS_T_S: f64 = 100.0 * 365.25 * 86_400.0;

/// The most satellites a constellation may hold, over all shells (CelesTrak lists ~10,000 active
/// satellites; Starlink's full second generation is ~30,000).
pub const MAX_SATELLITES: usize = 100_000;

/// A shell of a constellation.
#[derive(Clone, Debug)]
pub enum Shell {
    /// An analytic Walker shell.
    Walker(WalkerShell),
    /// Satellites read from a TLE file; `name` labels the shell.
    Tle {
        /// Shell name.
        name: String,
        /// The satellites.
        sats: Vec<TleSatellite>,
    },
}

/// Static facts about one satellite.
#[derive(Clone, Debug, PartialEq)]
pub struct SatInfo {
    /// Name, e.g. `starlink-shell1-P03-S17` or the TLE name.
    pub name: String,
    /// Index of the shell it belongs to.
    pub shell: u32,
    /// Plane within the shell (TLE shells: 0).
    pub plane: u32,
    /// Slot within the plane (TLE shells: position in file).
    pub slot: u32,
}

/// An undirected ISL between two satellites (global indices, `a < b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isl {
    /// Lower satellite index.
    pub a: u32,
    /// Higher satellite index.
    pub b: u32,
    /// True for links between planes (subject to the latitude cut).
    pub cross_plane: bool,
}

/// Options for the ISL topology.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct IslOptions {
    /// Cross-plane ISLs are down while either end is above this |latitude| (degrees); `None` = never.
    pub cross_plane_max_lat_deg: Option<f64>,
}

/// A whole constellation with its time origin.
#[derive(Clone, Debug)]
pub struct Constellation {
    /// Display name.
    pub name: String,
    /// The shells.
    pub shells: Vec<Shell>,
    /// Unix time of simulation time zero.
    pub epoch_unix_s: f64,
    /// ISL options.
    pub isl_options: IslOptions,
    sats: Vec<SatInfo>,
    /// First global satellite index of each shell.
    offsets: Vec<usize>,
    kin: Vec<Option<WalkerKinematics>>,
    isls: Vec<Isl>,
    gmst0: f64,
}

impl Constellation {
    /// Builds a constellation from shells; every shell is validated.
    pub fn new(name: &str, shells: Vec<Shell>, epoch_unix_s: f64) -> Result<Self, OrbitError> {
        if shells.is_empty() {
            return Err(OrbitError::invalid("shells", 0, "a constellation needs at least one shell"));
        }
        if !(epoch_unix_s.is_finite() && (MIN_EPOCH_UNIX_S..MAX_EPOCH_UNIX_S).contains(&epoch_unix_s)) {
            return Err(OrbitError::invalid(
                "epoch",
                epoch_unix_s,
                "must be a Unix time from 1900-01-01 (-2208988800) to 2200-01-01 (7258118400)",
            ));
        }
        let mut total = 0usize;
        for shell in &shells {
            total += match shell {
                Shell::Walker(w) => {
                    w.validate()?;
                    w.len()
                }
                Shell::Tle { sats, .. } => sats.len(),
            };
        }
        if total > MAX_SATELLITES {
            return Err(OrbitError::invalid("satellites", total, "at most 100000 in a constellation (all shells)"));
        }
        let mut sats = Vec::new();
        let mut offsets = Vec::new();
        let mut kin = Vec::new();
        let mut isls = Vec::new();
        for (si, shell) in shells.iter().enumerate() {
            offsets.push(sats.len());
            let si32 = si as u32;
            match shell {
                Shell::Walker(w) => {
                    let base = sats.len() as u32;
                    for p in 0..w.planes {
                        for s in 0..w.sats_per_plane {
                            sats.push(SatInfo {
                                name: format!("{}-P{p:02}-S{s:02}", w.name),
                                shell: si32,
                                plane: p,
                                slot: s,
                            });
                        }
                    }
                    if w.isls {
                        plus_grid(w, base, &mut isls);
                    }
                    kin.push(Some(w.kinematics()));
                }
                Shell::Tle { sats: tle, .. } => {
                    if tle.is_empty() {
                        return Err(OrbitError::invalid("shells", "empty TLE shell", "needs at least one satellite"));
                    }
                    for (i, t) in tle.iter().enumerate() {
                        sats.push(SatInfo { name: t.name.clone(), shell: si32, plane: 0, slot: i as u32 });
                    }
                    kin.push(None);
                }
            }
        }
        Ok(Constellation {
            name: name.to_string(),
            shells,
            epoch_unix_s,
            isl_options: IslOptions::default(),
            sats,
            offsets,
            kin,
            isls,
            gmst0: gmst_rad(epoch_unix_s),
        })
    }

    /// A named preset (see [`crate::walker::PRESETS`]) at the default epoch.
    pub fn preset(name: &str) -> Result<Self, OrbitError> {
        let shells = preset(name)?.into_iter().map(Shell::Walker).collect();
        Constellation::new(name, shells, DEFAULT_EPOCH_UNIX_S)
    }

    /// A constellation from TLE text; time zero is the latest TLE epoch unless `epoch_unix_s` is given.
    pub fn from_tle_text(name: &str, text: &str, epoch_unix_s: Option<f64>) -> Result<Self, OrbitError> {
        let sats = parse_tle_text(text)?;
        let latest = sats.iter().map(|s| s.epoch_unix_s).fold(f64::MIN, f64::max);
        Constellation::new(name, vec![Shell::Tle { name: name.to_string(), sats }], epoch_unix_s.unwrap_or(latest))
    }

    /// Number of satellites.
    pub fn len(&self) -> usize {
        self.sats.len()
    }

    /// Whether there are no satellites (never true for a built constellation).
    pub fn is_empty(&self) -> bool {
        self.sats.is_empty()
    }

    /// Static facts about every satellite, in global index order.
    pub fn satellites(&self) -> &[SatInfo] {
        &self.sats
    }

    /// All +Grid ISLs (whether or not they are up at a given time).
    pub fn isls(&self) -> &[Isl] {
        &self.isls
    }

    /// Earth rotation angle at `t` seconds after the epoch.
    #[inline]
    pub fn earth_angle(&self, t: f64) -> f64 {
        self.gmst0 + crate::geo::OMEGA_EARTH * t
    }

    /// ECEF positions of all satellites at `t` seconds after the epoch, written into `out`; `t` must
    /// be finite and within [`MAX_ABS_T_S`] of the epoch.
    pub fn positions_into(&self, t: f64, out: &mut Vec<Vec3>) -> Result<(), OrbitError> {
        if !(t.is_finite() && t.abs() <= MAX_ABS_T_S) {
            return Err(OrbitError::invalid("t", t, "must be finite and within 100 years (3155760000 s) of the epoch"));
        }
        out.clear();
        out.reserve(self.sats.len());
        let earth = self.earth_angle(t).sin_cos();
        for (shell, kin) in self.shells.iter().zip(&self.kin) {
            match (shell, kin) {
                (Shell::Walker(_), Some(k)) => k.ecef_into(t, earth, out),
                (Shell::Tle { sats, .. }, _) => {
                    let unix = self.epoch_unix_s + t;
                    for s in sats {
                        out.push(s.ecef(unix)?);
                    }
                }
                (Shell::Walker(_), None) => unreachable!("walker shells always have kinematics"),
            }
        }
        Ok(())
    }

    /// ECEF positions of all satellites at `t`.
    pub fn positions(&self, t: f64) -> Result<Vec<Vec3>, OrbitError> {
        let mut v = Vec::new();
        self.positions_into(t, &mut v)?;
        Ok(v)
    }

    /// Altitude of each shell in metres (TLE shells: mean altitude of their satellites at t = 0).
    pub fn shell_altitudes_m(&self) -> Result<Vec<f64>, OrbitError> {
        let pos = self.positions(0.0)?;
        Ok(self
            .shells
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Shell::Walker(w) => w.altitude_km * 1e3,
                Shell::Tle { sats, .. } => {
                    let o = self.offsets[i];
                    (o..o + sats.len()).map(|k| Geodetic::from_ecef(pos[k]).alt_m).sum::<f64>() / sats.len() as f64
                }
            })
            .collect())
    }

    /// Whether ISL `isl` is usable given satellite positions: grazing rule, then the latitude cut.
    #[inline]
    pub fn isl_up(&self, isl: &Isl, pos: &[Vec3]) -> bool {
        let (pa, pb) = (pos[isl.a as usize], pos[isl.b as usize]);
        if !segment_clears_grazing(pa, pb) {
            return false;
        }
        if let (true, Some(max_lat)) = (isl.cross_plane, self.isl_options.cross_plane_max_lat_deg) {
            let sin_max = max_lat.to_radians().sin();
            let above = |p: Vec3| (p[2] / crate::geo::norm(p)).abs() > sin_max;
            if above(pa) || above(pb) {
                return false;
            }
        }
        true
    }
}

/// +Grid: next satellite in the plane and the same slot in the next plane. The seam between the
/// last and first plane is linked only for delta shells (a star shell's seam planes counter-rotate).
fn plus_grid(w: &WalkerShell, base: u32, isls: &mut Vec<Isl>) {
    let (np, ns) = (w.planes, w.sats_per_plane);
    let idx = |p: u32, s: u32| base + p * ns + s;
    let mut push = |x: u32, y: u32, cross: bool| {
        let (a, b) = if x < y { (x, y) } else { (y, x) };
        if a != b && !isls.iter().rev().take(8).any(|l| l.a == a && l.b == b) {
            isls.push(Isl { a, b, cross_plane: cross });
        }
    };
    let full_ring = (w.raan_spread_deg - 360.0).abs() < 1e-9;
    for p in 0..np {
        for s in 0..ns {
            if ns > 1 {
                push(idx(p, s), idx(p, (s + 1) % ns), false);
            }
            if p + 1 < np {
                push(idx(p, s), idx(p + 1, s), true);
            } else if full_ring && np > 2 {
                // Across the seam the Walker offset has accumulated to F whole slots: the neighbour
                // of (P-1, s) is (0, s + F), which sits where "plane P, slot s" would.
                let f = match w.phasing {
                    Phasing::Walker(f) => f,
                    Phasing::HalfSlotAlternating => 0,
                };
                push(idx(p, s), idx(0, (s + f) % ns), true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::{distance, max_isl_length_m};

    #[test]
    fn plus_grid_has_four_isls_per_satellite() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        assert_eq!(c.len(), 1584);
        assert_eq!(c.isls().len(), 2 * 1584);
        let mut deg = vec![0u32; c.len()];
        for l in c.isls() {
            deg[l.a as usize] += 1;
            deg[l.b as usize] += 1;
        }
        assert!(deg.iter().all(|&d| d == 4));
    }

    #[test]
    fn seam_links_are_as_short_as_other_cross_plane_links() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let pos = c.positions(0.0).unwrap();
        let len = |l: &Isl| distance(pos[l.a as usize], pos[l.b as usize]);
        let plane = |i: u32| c.satellites()[i as usize].plane;
        let (seam, inner): (Vec<&Isl>, Vec<&Isl>) =
            c.isls().iter().filter(|l| l.cross_plane).partition(|l| plane(l.a).abs_diff(plane(l.b)) > 1);
        assert_eq!(seam.len(), 22);
        let inner_max = inner.iter().map(|l| len(l)).fold(0.0, f64::max);
        for l in seam {
            assert!(len(l) <= inner_max * 1.01, "seam ISL {l:?} is {} m, others at most {inner_max} m", len(l));
        }
    }

    #[test]
    fn isls_never_exceed_the_grazing_limit_when_up() {
        let c = Constellation::preset("starlink-shell1").unwrap();
        let limit = max_isl_length_m(550e3);
        for t in [0.0, 1000.0, 4321.5] {
            let pos = c.positions(t).unwrap();
            for l in c.isls() {
                let d = distance(pos[l.a as usize], pos[l.b as usize]);
                assert_eq!(c.isl_up(l, &pos), d <= limit + 1.0, "isl {l:?} length {d}");
            }
        }
    }

    #[test]
    fn latitude_cut_removes_only_cross_plane_links_at_high_latitude() {
        let mut c = Constellation::preset("starlink-shell1").unwrap();
        let pos = c.positions(100.0).unwrap();
        let up_before = c.isls().iter().filter(|l| c.isl_up(l, &pos)).count();
        c.isl_options.cross_plane_max_lat_deg = Some(45.0);
        let up_after: Vec<&Isl> = c.isls().iter().filter(|l| c.isl_up(l, &pos)).collect();
        assert!(up_after.len() < up_before);
        for l in c.isls().iter().filter(|l| !l.cross_plane) {
            assert!(c.isl_up(l, &pos));
        }
    }

    #[test]
    fn times_and_epochs_outside_the_models_range_are_refused() {
        let c = Constellation::preset("oneweb").unwrap();
        assert!(c.positions(-3.1e9).is_ok());
        for t in [f64::NAN, f64::INFINITY, 3.2e9, -1e300] {
            let e = c.positions(t).unwrap_err().to_string();
            assert!(e.starts_with("invalid t = ") && e.contains("within 100 years"), "{e}");
        }
        let shells = || preset("oneweb").unwrap().into_iter().map(Shell::Walker).collect();
        let e = Constellation::new("x", shells(), 1e300).unwrap_err().to_string();
        assert!(e.starts_with("invalid epoch = 1e300: must be a Unix time from 1900-01-01"), "{e}");
        assert!(Constellation::new("x", shells(), MIN_EPOCH_UNIX_S).is_ok());
    }

    #[test]
    fn oneweb_has_no_isls_and_polar_star_has_no_seam() {
        assert!(Constellation::preset("oneweb").unwrap().isls().is_empty());
        let t = Constellation::preset("telesat").unwrap();
        assert_eq!(t.isls().len(), 27 * 13 + 26 * 13);
    }
}
