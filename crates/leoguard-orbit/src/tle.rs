//! TLE input (CelesTrak's 3-line format) propagated with the `sgp4` crate (a port of Vallado's
//! reference SGP4; leoguard does not implement its own propagator).
//!
//! TLEs are mean elements fitted with WGS-72 (Vallado et al. 2006, "Revisiting Spacetrack Report #3"),
//! so they are propagated in the crate's AFSPC-compatible mode: WGS-72 constants, AFSPC epoch and
//! sidereal time (the last two matter only for deep-space orbits). The crate's default,
//! `Constants::from_elements`, uses WGS-84, whose different J2 and ke shift the secular drift rates:
//! a LEO TLE two months old then lands ~2 km from where skyfield and python-sgp4 (WGS-72) put it.

use crate::constellation::MAX_SATELLITES;
use crate::error::OrbitError;
use crate::geo::{eci_to_ecef, gmst_rad, Vec3, EARTH_EQ_RADIUS_M, MU_EARTH};
use std::collections::{HashMap, HashSet};

/// One satellite from a TLE file, ready to propagate.
#[derive(Clone, Debug)]
pub struct TleSatellite {
    /// Name from line 0 (trimmed).
    pub name: String,
    /// NORAD catalogue number.
    pub norad_id: u64,
    /// TLE epoch as a Unix time, seconds.
    pub epoch_unix_s: f64,
    /// Inclination, degrees.
    pub inclination_deg: f64,
    /// Mean motion, revolutions per day.
    pub mean_motion_rev_day: f64,
    constants: sgp4::Constants,
}

/// Modulo-10 checksum of a TLE line (digits count their value, '-' counts 1).
pub fn tle_checksum(line: &str) -> u32 {
    line.bytes()
        .take(68)
        .map(|b| match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'-' => 1,
            _ => 0,
        })
        .sum::<u32>()
        % 10
}

/// The longest name line accepted (CelesTrak's names have at most 24 characters).
pub const MAX_NAME_LEN: usize = 80;

/// The 1-based column of the first tab in a line (other control characters are refused earlier).
fn tab_column(line: &str) -> Option<usize> {
    line.chars().position(|c| c == '\t').map(|i| i + 1)
}

fn check_line(
    line: &str,
    lineno: usize,
    want: char,
    malformed: &impl Fn(usize, String) -> OrbitError,
) -> Result<(), OrbitError> {
    let err = |reason: String| malformed(lineno, reason);
    if !line.is_ascii() {
        return Err(err("contains non-ASCII characters".into()));
    }
    if let Some(col) = tab_column(line) {
        return Err(err(format!("line {want} has a tab at column {col}: TLE columns are fixed, use spaces")));
    }
    if !line.starts_with(want) {
        return Err(err(format!("expected line number {want} in column 1, found '{}'", &line[..1])));
    }
    if line.len() != 69 {
        return Err(err(format!("line {want} must be 69 characters long, found {}", line.len())));
    }
    let given = line.as_bytes()[68];
    if !given.is_ascii_digit() {
        return Err(err(format!("checksum column 69 is '{}', not a digit", given as char)));
    }
    let computed = tle_checksum(line);
    if u32::from(given - b'0') != computed {
        return Err(err(format!("bad checksum: column 69 says {}, computed {computed}", given as char)));
    }
    Ok(())
}

/// Why an orbit cannot be flown, if it cannot: mean motion and eccentricity out of range, or a
/// perigee below the Earth's surface. Kepler's third law gives the semi-major axis from the mean
/// motion, a = (mu / n^2)^(1/3); the perigee radius is a (1 - e).
fn impossible_orbit(mean_motion_rev_day: f64, eccentricity: f64) -> Option<String> {
    let mm = mean_motion_rev_day;
    if !(mm.is_finite() && mm > 0.0) {
        return Some(format!("mean_motion = {mm} rev/day: must be > 0"));
    }
    if !(0.0..1.0).contains(&eccentricity) {
        return Some(format!("eccentricity = {eccentricity}: must be in [0, 1) for a closed orbit"));
    }
    let n = mm * 2.0 * std::f64::consts::PI / 86_400.0;
    let a_m = (MU_EARTH / (n * n)).cbrt();
    let perigee_m = a_m * (1.0 - eccentricity);
    (perigee_m < EARTH_EQ_RADIUS_M).then(|| {
        format!(
            "perigee radius a(1-e) = {:.1} km is below the Earth's surface ({:.3} km) \
             (mean_motion = {mm} rev/day, eccentricity = {eccentricity})",
            perigee_m / 1e3,
            EARTH_EQ_RADIUS_M / 1e3
        )
    })
}

/// Parses a 3-line TLE text (name line, line 1, line 2, repeated). Blank lines are ignored.
/// Errors say "TLE text"; [`parse_tle`] names where the text came from.
pub fn parse_tle_text(text: &str) -> Result<Vec<TleSatellite>, OrbitError> {
    parse_tle(text, "TLE text")
}

/// Parses a 3-line TLE text whose errors name `origin` (e.g. `file sats.tle`) and the line. Refused:
/// malformed lines, names over [`MAX_NAME_LEN`] characters or with control characters, orbits that
/// cannot be flown (perigee below the surface), a satellite listed twice (the same catalogue number)
/// and more than [`MAX_SATELLITES`] satellites. Satellites that share a name are kept, the later ones
/// named `NAME #catalogue` (names identify satellites in every result).
pub fn parse_tle(text: &str, origin: &str) -> Result<Vec<TleSatellite>, OrbitError> {
    let fault = |what: &'static str| {
        move |line: usize, reason: String| OrbitError::Tle { what, origin: origin.to_string(), line, reason }
    };
    let malformed = fault("malformed TLE");
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches(['\r', ' '])))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    // Before any other check, so that a binary file is called one (and not "3 lines per satellite").
    for &(n, l) in &lines {
        if let Some((col, c)) = l.chars().enumerate().find(|&(_, c)| c.is_control() && c != '\t') {
            let reason = format!("control character 0x{:02x} at column {}: not a text file?", u32::from(c), col + 1);
            return Err(malformed(n, reason));
        }
    }
    if lines.is_empty() {
        let reason = if text.is_empty() { "it is empty" } else { "it has blank lines only" };
        return Err(OrbitError::TleEmpty { origin: origin.to_string(), reason });
    }
    if lines.len() % 3 != 0 {
        let (n, _) = lines[lines.len() - lines.len() % 3];
        return Err(malformed(
            n,
            format!("expected 3 lines per satellite (name, line 1, line 2); {} left over", lines.len() % 3),
        ));
    }
    if lines.len() / 3 > MAX_SATELLITES {
        return Err(malformed(
            lines[3 * MAX_SATELLITES].0,
            format!("{} satellites; at most {MAX_SATELLITES} are supported", lines.len() / 3),
        ));
    }
    let mut out = Vec::with_capacity(lines.len() / 3);
    // Lookups only (never iterated), so the map's order cannot reach any output.
    let mut by_id: HashMap<u64, (usize, String)> = HashMap::new();
    let mut by_name: HashSet<String> = HashSet::new();
    for chunk in lines.chunks(3) {
        let (n0, name) = chunk[0];
        let (n1, l1) = chunk[1];
        let (n2, l2) = chunk[2];
        if name.starts_with("1 ") && name.len() == 69 {
            return Err(malformed(n0, "expected a name line (3-line format), found line 1".into()));
        }
        if let Some(col) = tab_column(name) {
            return Err(malformed(n0, format!("name line has a tab at column {col}")));
        }
        let name = name.trim_start_matches("0 ").trim().to_string();
        if name.chars().count() > MAX_NAME_LEN {
            return Err(malformed(
                n0,
                format!("name line is {} characters long; at most {MAX_NAME_LEN} allowed", name.chars().count()),
            ));
        }
        check_line(l1, n1, '1', &malformed)?;
        check_line(l2, n2, '2', &malformed)?;
        if l1[2..7] != l2[2..7] {
            return Err(malformed(n2, "catalogue numbers of line 1 and line 2 differ".into()));
        }
        let elements = sgp4::Elements::from_tle(Some(name.clone()), l1.as_bytes(), l2.as_bytes())
            .map_err(|e| malformed(n1, e.to_string()))?;
        if let Some(why) = impossible_orbit(elements.mean_motion, elements.eccentricity) {
            return Err(fault("impossible orbit")(
                n2,
                format!("satellite '{name}' (catalogue {}): {why}", elements.norad_id),
            ));
        }
        let id = elements.norad_id;
        if let Some((first, other)) = by_id.get(&id) {
            return Err(fault("duplicate satellite")(
                n0,
                format!("'{name}' repeats catalogue number {id} of '{other}' at line {first}"),
            ));
        }
        // Different satellites may share a name (CelesTrak's debris files: "COSMOS 2251 DEB"); names
        // identify satellites in every result table, so a repeated one gets its catalogue number.
        let name = if by_name.contains(&name) { format!("{name} #{id}") } else { name };
        by_id.insert(id, (n0, name.clone()));
        by_name.insert(name.clone());
        let constants = sgp4::Constants::from_elements_afspc_compatibility_mode(&elements)
            .map_err(|e| malformed(n2, e.to_string()))?;
        let epoch_unix_s = elements.datetime.and_utc().timestamp_micros() as f64 * 1e-6;
        out.push(TleSatellite {
            name,
            norad_id: elements.norad_id,
            epoch_unix_s,
            inclination_deg: elements.inclination,
            mean_motion_rev_day: elements.mean_motion,
            constants,
        });
    }
    Ok(out)
}

impl TleSatellite {
    /// TEME position (metres) at a Unix time.
    pub fn teme(&self, unix_s: f64) -> Result<Vec3, OrbitError> {
        let minutes = (unix_s - self.epoch_unix_s) / 60.0;
        // AFSPC mode to match the constants (it differs only for Lyddane deep-space orbits).
        let p = self
            .constants
            .propagate_afspc_compatibility_mode(sgp4::MinutesSinceEpoch(minutes))
            .map_err(|e| OrbitError::Propagation { sat: self.name.clone(), minutes, reason: e.to_string() })?;
        Ok([p.position[0] * 1e3, p.position[1] * 1e3, p.position[2] * 1e3])
    }

    /// ECEF position (metres) at a Unix time: TEME rotated by GMST (polar motion ignored).
    pub fn ecef(&self, unix_s: f64) -> Result<Vec3, OrbitError> {
        Ok(eci_to_ecef(self.teme(unix_s)?, gmst_rad(unix_s)))
    }
}

/// Writes a checksummed TLE pair for a circular orbit, e.g. to export a Walker shell for other tools.
#[allow(clippy::too_many_arguments)]
pub fn format_circular_tle(
    norad_id: u32,
    epoch_year: u32,
    epoch_day: f64,
    inclination_deg: f64,
    raan_deg: f64,
    mean_anomaly_deg: f64,
    mean_motion_rev_day: f64,
) -> (String, String) {
    let yy = epoch_year % 100;
    let body1 = format!("1 {norad_id:05}U 00000A   {yy:02}{epoch_day:012.8}  .00000000  00000-0  00000-0 0  999");
    let body2 = format!(
        "2 {norad_id:05} {inc:8.4} {raan:8.4} 0000001 {argp:8.4} {ma:8.4} {mm:11.8}    0",
        inc = inclination_deg,
        raan = raan_deg.rem_euclid(360.0),
        argp = 0.0,
        ma = mean_anomaly_deg.rem_euclid(360.0),
        mm = mean_motion_rev_day,
    );
    let l1 = format!("{body1}{}", tle_checksum(&body1));
    let l2 = format!("{body2}{}", tle_checksum(&body2));
    (l1, l2)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A well-known ISS TLE (Vallado's test set style, checksums valid).
    const ISS: &str = "ISS (ZARYA)\n\
1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927\n\
2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537\n";

    #[test]
    fn parses_a_real_tle() {
        let sats = parse_tle_text(ISS).unwrap();
        assert_eq!(sats.len(), 1);
        assert_eq!(sats[0].norad_id, 25544);
        assert_eq!(sats[0].name, "ISS (ZARYA)");
        let p = sats[0].teme(sats[0].epoch_unix_s).unwrap();
        let r = crate::geo::norm(p) / 1e3;
        assert!((6_600.0..6_800.0).contains(&r), "radius {r}");
    }

    #[test]
    fn rejects_bad_checksum_and_length() {
        let bad = ISS.replace("0  2927", "0  2928");
        let e = parse_tle_text(&bad).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("checksum"), "{e}");
        let short = ISS.replace("15.72125391563537", "15.7212539156353");
        let e = parse_tle_text(&short).unwrap_err().to_string();
        assert!(e.contains("69 characters"), "{e}");
        let e = parse_tle_text("ISS\n").unwrap_err().to_string();
        assert!(e.contains("3 lines"), "{e}");
    }

    #[test]
    fn a_two_month_old_tle_matches_skyfield_to_a_metre() {
        // Issue 13's case (python/tests/data/skyfield_tle_reference.json, tools/make_skyfield_reference.py):
        // a TLE of 2025-11-01 propagated to 2026-01-01T00:00Z, 61 days on. skyfield (python-sgp4,
        // WGS-72) puts it at this TEME position; the crate's WGS-84 default was 2.13 km off.
        const OLD: &str = "OLD-TLE\n\
1 44713U 19074A   25305.41666667  .00002182  00000-0  16538-3 0  9996\n\
2 44713  53.0536 210.3275 0001427  87.1034 273.0120 15.06406234 33451\n";
        let sat = &parse_tle_text(OLD).unwrap()[0];
        let skyfield_km = [4083.003591, 1104.8419465, 5474.6733152];
        let p = sat.teme(1_767_225_600.0).unwrap();
        let d = crate::geo::distance(p, skyfield_km.map(|v| v * 1e3));
        assert!(d < 1.0, "{d} m from skyfield");
    }

    /// ISS with line 2's columns `at..at + field.len()` replaced (checksum recomputed) and a new name.
    fn iss_with(name: &str, at: usize, field: &str) -> String {
        let mut lines: Vec<String> = ISS.lines().map(str::to_string).collect();
        lines[0] = name.to_string();
        let l2 = &mut lines[2];
        l2.replace_range(at..at + field.len(), field);
        let sum = tle_checksum(l2);
        l2.replace_range(68..69, &sum.to_string());
        lines.join("\n") + "\n"
    }

    #[test]
    fn refuses_orbits_below_the_surface_naming_satellite_and_line() {
        let e = parse_tle(&(ISS.to_string() + &iss_with("LOW", 52, "99.00000000")), "file x.tle").unwrap_err();
        let e = e.to_string();
        assert!(e.starts_with("impossible orbit in file x.tle at line 6: satellite 'LOW' (catalogue 25544):"), "{e}");
        assert!(e.contains("perigee radius a(1-e) = 1972.5 km is below the Earth's surface (6378.137 km)"), "{e}");
        let e = parse_tle_text(&iss_with("ECC", 26, "9900000")).unwrap_err().to_string();
        assert!(e.contains("eccentricity = 0.99)"), "{e}");
        let e = parse_tle_text(&iss_with("ZERO", 52, "00.00000000")).unwrap_err().to_string();
        assert!(e.ends_with("mean_motion = 0 rev/day: must be > 0"), "{e}");
        // The ISS itself (perigee ~6,700 km) and a GEO satellite's 1.0027 rev/day are fine.
        assert!(parse_tle_text(&iss_with("GEO", 52, " 1.00270000")).is_ok());
    }

    #[test]
    fn refuses_a_satellite_listed_twice() {
        let e = parse_tle_text(&format!("{ISS}\n{ISS}")).unwrap_err().to_string();
        assert_eq!(
            e,
            "duplicate satellite in TLE text at line 5: 'ISS (ZARYA)' repeats catalogue number 25544 of \
             'ISS (ZARYA)' at line 1"
        );
        let other = ISS.replace("1 25544U", "1 25545U").replace("2 25544 ", "2 25545 ");
        let other: String = other
            .lines()
            .map(|l| if l.len() == 69 { format!("{}{}\n", &l[..68], tle_checksum(l)) } else { format!("{l}\n") })
            .collect();
        // Another satellite (catalogue 25545) under the same name is kept, named apart by its number.
        let sats = parse_tle_text(&format!("{ISS}{other}")).unwrap();
        let names: Vec<&str> = sats.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ISS (ZARYA)", "ISS (ZARYA) #25545"]);
    }

    #[test]
    fn empty_binary_and_tabbed_texts_are_named() {
        assert_eq!(parse_tle("", "file e.tle").unwrap_err().to_string(), "no TLE in file e.tle: it is empty");
        let e = parse_tle(" \n\n", "file e.tle").unwrap_err().to_string();
        assert_eq!(e, "no TLE in file e.tle: it has blank lines only");
        let e = parse_tle_text("\u{0}\u{1}ELF\n").unwrap_err().to_string();
        assert!(e.ends_with("line 1: control character 0x00 at column 1: not a text file?"), "{e}");
        let e = parse_tle_text(&ISS.replace("1 25544U 98067A", "1 25544U\t98067A")).unwrap_err().to_string();
        assert!(e.ends_with("line 2: line 1 has a tab at column 9: TLE columns are fixed, use spaces"), "{e}");
        let e = parse_tle_text(&ISS.replace("ISS (ZARYA)", &"N".repeat(81))).unwrap_err().to_string();
        assert!(e.ends_with("name line is 81 characters long; at most 80 allowed"), "{e}");
        assert!(parse_tle_text(&format!("\u{feff}{ISS}")).is_ok(), "a byte-order mark is skipped");
    }

    #[test]
    fn formatted_tle_round_trips() {
        let (l1, l2) = format_circular_tle(42, 2026, 1.0, 53.0, 10.0, 20.0, 15.19);
        let text = format!("SAT-42\n{l1}\n{l2}\n");
        let sats = parse_tle_text(&text).unwrap();
        assert_eq!(sats[0].norad_id, 42);
        assert!((sats[0].inclination_deg - 53.0).abs() < 1e-9);
    }
}
