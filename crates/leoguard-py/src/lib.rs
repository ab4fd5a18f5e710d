//! Thin PyO3 bindings (`leoguard._core`). Rust errors become `leoguard._core.LeoguardError`
//! (a `ValueError`) at this boundary; long computations release the GIL.

use leoguard_orbit::attach::{InterruptionModel, Policy, SlotCriterion};
use leoguard_orbit::beams::CellGrid;
use leoguard_orbit::constellation::{Constellation, Shell};
use leoguard_orbit::geo::{kepler_period_s, Geodetic};
use leoguard_orbit::ground::{GroundNode, Role, VisibilityFilter};
use leoguard_orbit::timeline::{attachment_schedule, path_timeline, route_all_pairs, TimelineOptions};
use leoguard_orbit::tle::{format_circular_tle, parse_tle, tle_checksum};
use leoguard_orbit::walker::{Phasing, WalkerShell};
use leoguard_orbit::{Handover, OrbitError};
use numpy::PyArray1;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

mod emu;
mod leotp;
mod liquid;
mod rtc;
mod sim;
mod table;
mod tcpscript;
mod tcptrace;
mod web;

create_exception!(_core, LeoguardError, PyValueError, "A leoguard input or model error; the message names the field.");

fn err(e: OrbitError) -> PyErr {
    LeoguardError::new_err(e.to_string())
}

pub(crate) type Node = (String, f64, f64, String);

pub(crate) fn ground(n: &Node) -> PyResult<GroundNode> {
    let role = Role::parse(&n.3).map_err(err)?;
    GroundNode::new(&n.0, n.1, n.2, 0.0, role).map_err(err)
}

pub(crate) fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => {
            Ok(Some(v.extract().map_err(|e| LeoguardError::new_err(format!("invalid {key}: {e}")))?))
        }
        _ => Ok(None),
    }
}

/// Sets `out[name]` to a result table as the bytes of a Parquet file, which the Python side reads
/// with polars (`leoguard.simulate._table`): large columns cross without numpy.
pub(crate) fn set_table(
    out: &Bound<'_, PyDict>,
    name: &str,
    columns: Vec<(&str, leoguard_core::parquet::Column)>,
) -> PyResult<()> {
    out.set_item(name, Py::new(out.py(), table::ResultTable::new(columns)?)?)
}

pub(crate) fn need<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    get(d, key)?.ok_or_else(|| LeoguardError::new_err(format!("missing field {key}")))
}

fn shell_from_dict(d: &Bound<'_, PyDict>, i: usize) -> PyResult<Shell> {
    let name: String = get(d, "name")?.unwrap_or_else(|| format!("shell{i}"));
    if let Some(text) = get::<String>(d, "tle")? {
        // `tle_file`: the path the text was read from, so that errors name the file.
        let origin = match get::<String>(d, "tle_file")? {
            Some(path) => format!("file {path}"),
            None => format!("TLE of shell '{name}'"),
        };
        let sats = parse_tle(&text, &origin).map_err(err)?;
        return Ok(Shell::Tle { name, sats });
    }
    let phasing = match d.get_item("phasing")? {
        None => Phasing::Walker(1),
        Some(v) if v.is_none() => Phasing::Walker(1),
        Some(v) => {
            if let Ok(s) = v.extract::<String>() {
                if s == "half-slot" {
                    Phasing::HalfSlotAlternating
                } else {
                    return Err(LeoguardError::new_err(format!(
                        "invalid phasing = {s}: use an integer F or 'half-slot'"
                    )));
                }
            } else {
                let f: u32 = v.extract().map_err(|_| {
                    LeoguardError::new_err(format!(
                        "invalid phasing = {v}: use an integer F in [0, planes - 1] or 'half-slot'"
                    ))
                })?;
                Phasing::Walker(f)
            }
        }
    };
    // Any Python int (a huge one too) gets the same message; the shell's total is checked later.
    let count = |key: &str| -> PyResult<u32> {
        let v: Bound<'_, PyAny> = need(d, key)?;
        v.extract::<u32>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| LeoguardError::new_err(format!("invalid {key} = {v}: must be an integer in [1, 100000]")))
    };
    Ok(Shell::Walker(WalkerShell {
        name,
        altitude_km: need(d, "altitude_km")?,
        inclination_deg: need(d, "inclination_deg")?,
        planes: count("planes")?,
        sats_per_plane: count("sats_per_plane")?,
        phasing,
        raan_spread_deg: get(d, "raan_spread_deg")?.unwrap_or(360.0),
        isls: get(d, "isls")?.unwrap_or(true),
        j2: get(d, "j2")?.unwrap_or(false),
    }))
}

fn handovers_dict<'py>(py: Python<'py>, hs: &[Handover], names: &[String]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let sat = |s: Option<u32>| s.map(|s| names[s as usize].clone());
    d.set_item("t_s", hs.iter().map(|h| h.t_s).collect::<Vec<_>>())?;
    d.set_item("node", hs.iter().map(|h| h.node).collect::<Vec<_>>())?;
    d.set_item("from_sat", hs.iter().map(|h| sat(h.from)).collect::<Vec<_>>())?;
    d.set_item("to_sat", hs.iter().map(|h| sat(h.to)).collect::<Vec<_>>())?;
    d.set_item("reason", hs.iter().map(|h| h.reason.as_str()).collect::<Vec<_>>())?;
    d.set_item("interruption_ms", hs.iter().map(|h| h.interruption_s * 1e3).collect::<Vec<_>>())?;
    Ok(d)
}

fn slots_dict<'py>(
    py: Python<'py>,
    slots: &[leoguard_orbit::attach::Slot],
    names: &[String],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("node", slots.iter().map(|s| s.node).collect::<Vec<_>>())?;
    d.set_item("sat", slots.iter().map(|s| names[s.sat as usize].clone()).collect::<Vec<_>>())?;
    d.set_item("slot_start_s", slots.iter().map(|s| s.start_s).collect::<Vec<_>>())?;
    d.set_item("slot_end_s", slots.iter().map(|s| s.end_s).collect::<Vec<_>>())?;
    Ok(d)
}

/// Timeline options from Python arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) fn options(
    c: &Constellation,
    duration_s: f64,
    step_s: f64,
    min_elevation_deg: f64,
    policy: &str,
    period_s: Option<f64>,
    phase_s: Option<f64>,
    criterion: &str,
    interruption: (String, f64, f64),
    seed: u64,
) -> PyResult<TimelineOptions> {
    let mut pol = Policy::parse(policy, c.epoch_unix_s).map_err(err)?;
    // Parsed under every policy, so that a misspelt criterion is never silently ignored.
    let criterion = SlotCriterion::parse(criterion).map_err(err)?;
    if let Policy::GlobalSchedule { period_s: p, phase_s: ph, criterion: cr } = &mut pol {
        if let Some(v) = period_s {
            *p = v;
        }
        *ph = match phase_s {
            Some(v) => v,
            None => (12.0 - c.epoch_unix_s).rem_euclid(*p),
        };
        *cr = criterion;
    }
    let intr = match interruption.0.as_str() {
        "none" => InterruptionModel::None,
        "fixed" => InterruptionModel::Fixed(interruption.1),
        "uniform" => InterruptionModel::Uniform(interruption.1, interruption.2),
        "3owd" => InterruptionModel::ThreeOwd,
        other => {
            return Err(LeoguardError::new_err(format!(
                "unknown interruption model '{other}' (known: none, fixed, uniform, 3owd)"
            )))
        }
    };
    let o = TimelineOptions { duration_s, step_s, min_elevation_deg, policy: pol, interruption: intr, seed };
    o.steps().map_err(err)?;
    Ok(o)
}

/// A constellation (Walker and/or TLE shells) with its epoch.
#[pyclass(name = "Constellation", module = "leoguard._core", frozen)]
pub(crate) struct PyConstellation {
    pub(crate) inner: Constellation,
    names: Vec<String>,
}

impl PyConstellation {
    fn wrap(inner: Constellation) -> Self {
        let names = inner.satellites().iter().map(|s| s.name.clone()).collect();
        PyConstellation { inner, names }
    }
}

#[pymethods]
impl PyConstellation {
    /// Builds from shell dicts (Walker parameters, or {"tle": text}); `epoch_unix_s` None = default.
    #[new]
    #[pyo3(signature = (name, shells, epoch_unix_s=None, cross_plane_max_lat_deg=None))]
    fn new(
        name: &str,
        shells: &Bound<'_, PyList>,
        epoch_unix_s: Option<f64>,
        cross_plane_max_lat_deg: Option<f64>,
    ) -> PyResult<Self> {
        let mut v = Vec::new();
        let mut has_tle_epoch = None;
        for (i, s) in shells.iter().enumerate() {
            let d = s.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("shell {i} must be a dict")))?;
            let sh = shell_from_dict(d, i)?;
            if let Shell::Tle { sats, .. } = &sh {
                let latest = sats.iter().map(|s| s.epoch_unix_s).fold(f64::MIN, f64::max);
                has_tle_epoch = Some(has_tle_epoch.map_or(latest, |e: f64| e.max(latest)));
            }
            v.push(sh);
        }
        let epoch = epoch_unix_s.or(has_tle_epoch).unwrap_or(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S);
        let mut c = Constellation::new(name, v, epoch).map_err(err)?;
        if let Some(lat) = cross_plane_max_lat_deg {
            if !(lat.is_finite() && (0.0..=90.0).contains(&lat)) {
                return Err(err(OrbitError::invalid("cross_plane_max_lat_deg", lat, "must be in [0, 90]")));
            }
            c.isl_options.cross_plane_max_lat_deg = Some(lat);
        }
        Ok(PyConstellation::wrap(c))
    }

    /// The shells of a named preset, as dicts.
    #[staticmethod]
    fn preset_shells(py: Python<'_>, name: &str) -> PyResult<Vec<Py<PyDict>>> {
        leoguard_orbit::walker::preset(name)
            .map_err(err)?
            .into_iter()
            .map(|w| {
                let d = PyDict::new(py);
                d.set_item("name", &w.name)?;
                d.set_item("altitude_km", w.altitude_km)?;
                d.set_item("inclination_deg", w.inclination_deg)?;
                d.set_item("planes", w.planes)?;
                d.set_item("sats_per_plane", w.sats_per_plane)?;
                match w.phasing {
                    Phasing::Walker(f) => d.set_item("phasing", f)?,
                    Phasing::HalfSlotAlternating => d.set_item("phasing", "half-slot")?,
                }
                d.set_item("raan_spread_deg", w.raan_spread_deg)?;
                d.set_item("isls", w.isls)?;
                d.set_item("j2", w.j2)?;
                Ok(d.unbind())
            })
            .collect()
    }

    /// Number of satellites.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    /// Unix time of t = 0.
    #[getter]
    fn epoch_unix_s(&self) -> f64 {
        self.inner.epoch_unix_s
    }

    /// Summary: shells with their parameters, period, satellites and ISL counts.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("name", &self.inner.name)?;
        d.set_item("satellites", self.inner.len())?;
        d.set_item("isls", self.inner.isls().len())?;
        d.set_item("epoch_unix_s", self.inner.epoch_unix_s)?;
        let alts = self.inner.shell_altitudes_m().map_err(err)?;
        let shells = PyList::empty(py);
        for (s, alt) in self.inner.shells.iter().zip(alts) {
            let sd = PyDict::new(py);
            match s {
                Shell::Walker(w) => {
                    sd.set_item("name", &w.name)?;
                    sd.set_item("kind", "walker")?;
                    sd.set_item("altitude_km", w.altitude_km)?;
                    sd.set_item("inclination_deg", w.inclination_deg)?;
                    sd.set_item("planes", w.planes)?;
                    sd.set_item("sats_per_plane", w.sats_per_plane)?;
                    sd.set_item("satellites", w.len())?;
                    sd.set_item(
                        "phasing",
                        match w.phasing {
                            Phasing::Walker(f) => format!("F={f}"),
                            Phasing::HalfSlotAlternating => "half-slot".into(),
                        },
                    )?;
                    sd.set_item("raan_spread_deg", w.raan_spread_deg)?;
                    sd.set_item("isls", w.isls)?;
                    sd.set_item("period_s", kepler_period_s(w.altitude_km * 1e3))?;
                }
                Shell::Tle { name, sats } => {
                    sd.set_item("name", name)?;
                    sd.set_item("kind", "tle")?;
                    sd.set_item("altitude_km", alt / 1e3)?;
                    sd.set_item("satellites", sats.len())?;
                    let mm = sats.iter().map(|s| s.mean_motion_rev_day).sum::<f64>() / sats.len() as f64;
                    sd.set_item("period_s", 86_400.0 / mm)?;
                    let inc = sats.iter().map(|s| s.inclination_deg).sum::<f64>() / sats.len() as f64;
                    sd.set_item("inclination_deg", inc)?;
                    sd.set_item("isls", false)?;
                }
            }
            shells.append(sd)?;
        }
        d.set_item("shells", shells)?;
        Ok(d)
    }

    /// Satellite names, shells, planes and slots.
    fn satellites<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.satellites();
        let d = PyDict::new(py);
        d.set_item("sat", &self.names)?;
        d.set_item("shell", s.iter().map(|x| x.shell).collect::<Vec<_>>())?;
        d.set_item("plane", s.iter().map(|x| x.plane).collect::<Vec<_>>())?;
        d.set_item("slot", s.iter().map(|x| x.slot).collect::<Vec<_>>())?;
        Ok(d)
    }

    /// ECEF (m) and geodetic positions of all satellites at `t` seconds after the epoch.
    fn positions<'py>(&self, py: Python<'py>, t: f64) -> PyResult<Bound<'py, PyDict>> {
        let pos = self.inner.positions(t).map_err(err)?;
        let geo: Vec<Geodetic> = pos.iter().map(|&p| Geodetic::from_ecef(p)).collect();
        let d = PyDict::new(py);
        d.set_item("sat", &self.names)?;
        for (k, key) in ["x_m", "y_m", "z_m"].iter().enumerate() {
            d.set_item(key, PyArray1::from_vec(py, pos.iter().map(|p| p[k]).collect()))?;
        }
        d.set_item("lat_deg", PyArray1::from_vec(py, geo.iter().map(|g| g.lat_deg).collect()))?;
        d.set_item("lon_deg", PyArray1::from_vec(py, geo.iter().map(|g| g.lon_deg).collect()))?;
        d.set_item("alt_km", PyArray1::from_vec(py, geo.iter().map(|g| g.alt_m / 1e3).collect()))?;
        Ok(d)
    }

    /// TEME positions (km) of TLE satellites at a Unix time (for validation against other SGP4s).
    fn tle_teme_km(&self, unix_s: f64) -> PyResult<Vec<(String, f64, f64, f64)>> {
        let mut out = Vec::new();
        for s in &self.inner.shells {
            if let Shell::Tle { sats, .. } = s {
                for t in sats {
                    let p = t.teme(unix_s).map_err(err)?;
                    out.push((t.name.clone(), p[0] / 1e3, p[1] / 1e3, p[2] / 1e3));
                }
            }
        }
        Ok(out)
    }

    /// All ISLs at `t`: endpoints, whether cross-plane, whether up, and length.
    fn isls<'py>(&self, py: Python<'py>, t: f64) -> PyResult<Bound<'py, PyDict>> {
        let pos = self.inner.positions(t).map_err(err)?;
        let l = self.inner.isls();
        let d = PyDict::new(py);
        d.set_item("a", l.iter().map(|x| self.names[x.a as usize].clone()).collect::<Vec<_>>())?;
        d.set_item("b", l.iter().map(|x| self.names[x.b as usize].clone()).collect::<Vec<_>>())?;
        d.set_item("cross_plane", l.iter().map(|x| x.cross_plane).collect::<Vec<_>>())?;
        d.set_item("up", l.iter().map(|x| self.inner.isl_up(x, &pos)).collect::<Vec<_>>())?;
        d.set_item(
            "length_km",
            PyArray1::from_vec(
                py,
                l.iter().map(|x| leoguard_orbit::geo::distance(pos[x.a as usize], pos[x.b as usize]) / 1e3).collect(),
            ),
        )?;
        Ok(d)
    }

    /// Path timeline between two ground nodes (name, lat, lon, role).
    #[pyo3(signature = (a, b, duration_s, step_s, min_elevation_deg, policy, period_s, phase_s, criterion, interruption, seed))]
    #[allow(clippy::too_many_arguments)]
    fn path_timeline<'py>(
        &self,
        py: Python<'py>,
        a: Node,
        b: Node,
        duration_s: f64,
        step_s: f64,
        min_elevation_deg: f64,
        policy: &str,
        period_s: Option<f64>,
        phase_s: Option<f64>,
        criterion: &str,
        interruption: (String, f64, f64),
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (ga, gb) = (ground(&a)?, ground(&b)?);
        let o = options(
            &self.inner,
            duration_s,
            step_s,
            min_elevation_deg,
            policy,
            period_s,
            phase_s,
            criterion,
            interruption,
            seed,
        )?;
        let tl = py.allow_threads(|| path_timeline(&self.inner, &ga, &gb, &o)).map_err(err)?;
        let steps = PyDict::new(py);
        steps.set_item("t_s", PyArray1::from_vec(py, tl.steps.iter().map(|s| s.t_s).collect()))?;
        steps.set_item("reachable", tl.steps.iter().map(|s| s.reachable()).collect::<Vec<_>>())?;
        steps.set_item("owd_ms", PyArray1::from_vec(py, tl.steps.iter().map(|s| s.owd_s() * 1e3).collect()))?;
        steps.set_item("hops", tl.steps.iter().map(|s| s.hop_delays_s.len() as u32).collect::<Vec<_>>())?;
        steps.set_item(
            "src_sat",
            tl.steps.iter().map(|s| s.sats.first().map(|&x| self.names[x as usize].clone())).collect::<Vec<_>>(),
        )?;
        steps.set_item(
            "dst_sat",
            tl.steps.iter().map(|s| s.sats.last().map(|&x| self.names[x as usize].clone())).collect::<Vec<_>>(),
        )?;
        steps.set_item(
            "path",
            tl.steps
                .iter()
                .map(|s| {
                    if s.sats.is_empty() {
                        Vec::new()
                    } else {
                        let mut p = vec![a.0.clone()];
                        p.extend(s.sats.iter().map(|&x| self.names[x as usize].clone()));
                        p.push(b.0.clone());
                        p
                    }
                })
                .collect::<Vec<_>>(),
        )?;
        steps.set_item(
            "hop_delays_ms",
            tl.steps.iter().map(|s| s.hop_delays_s.iter().map(|d| d * 1e3).collect::<Vec<_>>()).collect::<Vec<_>>(),
        )?;
        let out = PyDict::new(py);
        out.set_item("steps", steps)?;
        out.set_item("handovers", handovers_dict(py, &tl.handovers, &self.names)?)?;
        out.set_item("outages", tl.outages.clone())?;
        out.set_item("slots", slots_dict(py, &tl.slots, &self.names)?)?;
        Ok(out)
    }

    /// Connectivity cache and handovers for many ground nodes.
    #[pyo3(signature = (nodes, duration_s, step_s, min_elevation_deg, policy, period_s, phase_s, criterion, interruption, seed))]
    #[allow(clippy::too_many_arguments)]
    fn attachment_schedule<'py>(
        &self,
        py: Python<'py>,
        nodes: Vec<Node>,
        duration_s: f64,
        step_s: f64,
        min_elevation_deg: f64,
        policy: &str,
        period_s: Option<f64>,
        phase_s: Option<f64>,
        criterion: &str,
        interruption: (String, f64, f64),
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let g: Vec<GroundNode> = nodes.iter().map(ground).collect::<PyResult<_>>()?;
        let o = options(
            &self.inner,
            duration_s,
            step_s,
            min_elevation_deg,
            policy,
            period_s,
            phase_s,
            criterion,
            interruption,
            seed,
        )?;
        let (slots, hs) = py.allow_threads(|| attachment_schedule(&self.inner, &g, &o)).map_err(err)?;
        let out = PyDict::new(py);
        out.set_item("slots", slots_dict(py, &slots, &self.names)?)?;
        out.set_item("handovers", handovers_dict(py, &hs, &self.names)?)?;
        Ok(out)
    }

    /// Routes between all pairs of ground nodes at every step (benchmark workload).
    fn route_all_pairs<'py>(
        &self,
        py: Python<'py>,
        nodes: Vec<Node>,
        duration_s: f64,
        step_s: f64,
        min_elevation_deg: f64,
        threads: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let g: Vec<GroundNode> = nodes.iter().map(ground).collect::<PyResult<_>>()?;
        let o = options(
            &self.inner,
            duration_s,
            step_s,
            min_elevation_deg,
            "best-path",
            None,
            None,
            "highest-elevation",
            ("none".into(), 0.0, 0.0),
            0,
        )?;
        let st = py.allow_threads(|| route_all_pairs(&self.inner, &g, &o, threads)).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("snapshots", st.snapshots)?;
        d.set_item("pairs", st.pairs)?;
        d.set_item("reachable", st.reachable)?;
        d.set_item("mean_owd_ms", if st.reachable > 0 { st.owd_sum_s * 1e3 / st.reachable as f64 } else { f64::NAN })?;
        d.set_item("mean_hops", if st.reachable > 0 { st.hop_sum as f64 / st.reachable as f64 } else { f64::NAN })?;
        Ok(d)
    }

    /// Beams at time `t`: each ground node's H3 cell, the satellite whose beam serves it (highest
    /// elevation), the cell-centre distance and the beam timeout thd = 2d/c.
    fn beams<'py>(
        &self,
        py: Python<'py>,
        nodes: Vec<Node>,
        t: f64,
        resolution: u8,
        min_elevation_deg: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let grid = CellGrid::new(resolution).map_err(err)?;
        let alt = self.inner.shell_altitudes_m().map_err(err)?.into_iter().fold(0.0, f64::max);
        let f = VisibilityFilter::new(min_elevation_deg, alt).map_err(err)?;
        let g: Vec<GroundNode> = nodes.iter().map(ground).collect::<PyResult<_>>()?;
        let cells: Vec<u64> =
            g.iter().map(|n| grid.cell_of(n.pos.lat_deg, n.pos.lon_deg)).collect::<Result<_, _>>().map_err(err)?;
        let pos = self.inner.positions(t).map_err(err)?;
        let beams = grid.assign(&cells, &pos, &f).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("node", nodes.iter().map(|n| n.0.clone()).collect::<Vec<_>>())?;
        d.set_item("cell", cells.iter().map(|c| format!("{c:x}")).collect::<Vec<_>>())?;
        d.set_item("sat", beams.iter().map(|b| b.map(|b| self.names[b.sat as usize].clone())).collect::<Vec<_>>())?;
        d.set_item("distance_km", beams.iter().map(|b| b.map(|b| b.distance_m / 1e3)).collect::<Vec<_>>())?;
        d.set_item("timeout_ms", beams.iter().map(|b| b.map(|b| b.timeout_s() * 1e3)).collect::<Vec<_>>())?;
        Ok(d)
    }

    /// H3 cells (hex strings) whose centres see satellite `sat` (index) at `t`.
    fn footprint(&self, sat: usize, t: f64, resolution: u8, min_elevation_deg: f64) -> PyResult<Vec<String>> {
        if sat >= self.inner.len() {
            return Err(err(OrbitError::invalid("sat", sat, "is not a satellite index of this constellation")));
        }
        let grid = CellGrid::new(resolution).map_err(err)?;
        let alt = self.inner.shell_altitudes_m().map_err(err)?.into_iter().fold(0.0, f64::max);
        let f = VisibilityFilter::new(min_elevation_deg, alt).map_err(err)?;
        let pos = self.inner.positions(t).map_err(err)?;
        Ok(grid.footprint(pos[sat], &f).map_err(err)?.into_iter().map(|c| format!("{c:x}")).collect())
    }
}

/// Distance (km) from an H3 cell's centre to an ECEF point (m), and the beam timeout 2d/c (ms).
#[pyfunction]
fn beam_timeout_ms(cell_hex: &str, x_m: f64, y_m: f64, z_m: f64) -> PyResult<(f64, f64)> {
    let cell = u64::from_str_radix(cell_hex, 16)
        .map_err(|_| err(OrbitError::invalid("cell", cell_hex, "must be a hex H3 index")))?;
    let d = CellGrid::distance_m(cell, [x_m, y_m, z_m]).map_err(err)?;
    Ok((d / 1e3, 2.0 * d / leoguard_core::SPEED_OF_LIGHT_M_S * 1e3))
}

/// Checksum digit of a TLE line.
#[pyfunction]
fn tle_line_checksum(line: &str) -> u32 {
    tle_checksum(line)
}

/// A TLE pair for a circular orbit (to export Walker shells).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn circular_tle(
    norad_id: u32,
    epoch_year: u32,
    epoch_day: f64,
    inclination_deg: f64,
    raan_deg: f64,
    mean_anomaly_deg: f64,
    mean_motion_rev_day: f64,
) -> (String, String) {
    format_circular_tle(
        norad_id,
        epoch_year,
        epoch_day,
        inclination_deg,
        raan_deg,
        mean_anomaly_deg,
        mean_motion_rev_day,
    )
}

/// Initial (RAAN, argument of latitude) in degrees of each satellite of a Walker shell dict.
#[pyfunction]
fn walker_elements(shell: &Bound<'_, PyDict>) -> PyResult<Vec<(f64, f64)>> {
    match shell_from_dict(shell, 0)? {
        Shell::Walker(w) => {
            w.validate().map_err(err)?;
            let mut v = Vec::with_capacity(w.len());
            for p in 0..w.planes {
                for s in 0..w.sats_per_plane {
                    let (r, u) = w.initial_angles(p, s);
                    v.push((r.to_degrees(), u.to_degrees()));
                }
            }
            Ok(v)
        }
        Shell::Tle { .. } => Err(LeoguardError::new_err("walker_elements needs a Walker shell")),
    }
}

/// Greenwich mean sidereal angle (radians) at a Unix time (IAU-82, as SGP4 uses).
#[pyfunction]
fn gmst_rad(unix_s: f64) -> f64 {
    leoguard_orbit::geo::gmst_rad(unix_s)
}

/// The native module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LeoguardError", m.py().get_type::<LeoguardError>())?;
    m.add_class::<PyConstellation>()?;
    m.add_class::<table::ResultTable>()?;
    m.add_function(wrap_pyfunction!(beam_timeout_ms, m)?)?;
    m.add_function(wrap_pyfunction!(tle_line_checksum, m)?)?;
    m.add_function(wrap_pyfunction!(circular_tle, m)?)?;
    m.add_function(wrap_pyfunction!(walker_elements, m)?)?;
    m.add_function(wrap_pyfunction!(gmst_rad, m)?)?;
    m.add("PRESETS", leoguard_orbit::walker::PRESETS.to_vec())?;
    m.add("SLOT_CRITERIA", leoguard_orbit::SLOT_CRITERIA.to_vec())?;
    m.add("STARTCP_FEATURES", leoguard_proto::startcp::FEATURES.to_vec())?;
    sim::register(m)?;
    emu::register(m)?;
    liquid::register(m)?;
    web::register(m)?;
    tcpscript::register(m)?;
    tcptrace::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
