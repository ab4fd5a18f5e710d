//! Bindings of LEOTP in the simulator: the `[leotp]` scenario section and the mid nodes' counters.

use crate::{get, LeoguardError};
use leoguard_core::Duration;
use leoguard_net::schemes::leotp::MidPlacement;
use leoguard_proto::leotp::{HoleConfirm, LeotpConfig};
use leoguard_sim::scenario::{LeotpSpec, RunResult};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn ms(field: &str, v: f64) -> PyResult<Duration> {
    if !(v.is_finite() && v > 0.0) {
        return Err(LeoguardError::new_err(format!("invalid leotp.{field} = {v}: must be a finite number > 0")));
    }
    Ok(Duration::from_secs_f64(v / 1e3))
}

/// The `[leotp]` section as the Python front resolves it: `paper` (the paper's variants where code
/// and paper differ), `in_network_retx`, `hop_cc`, `mid_nodes` ("all", "satellites" or a fraction),
/// `bl_tar_mss`, `hole_confirm` ("time" or "count") with `hole_confirm_ms` / `hole_confirm_packets`,
/// `hole_purge_ms`, `cache_blocks`, `queue_segments`, `min_rtt_window_ms`.
pub(crate) fn spec(d: &Bound<'_, PyDict>) -> PyResult<LeotpSpec> {
    let mut spec = LeotpSpec::default();
    let Some(t) = get::<Bound<'_, PyDict>>(d, "leotp")? else { return Ok(spec) };
    let mut c = if get::<bool>(&t, "paper")? == Some(true) { LeotpConfig::paper() } else { LeotpConfig::default() };
    if let Some(v) = get(&t, "in_network_retx")? {
        c.in_network_retx = v;
    }
    if let Some(v) = get(&t, "hop_cc")? {
        c.hop_cc = v;
    }
    if let Some(v) = get(&t, "bl_tar_mss")? {
        c.bl_tar_mss = v;
    }
    if let Some(v) = get(&t, "cache_blocks")? {
        c.cache_blocks = v;
    }
    if let Some(v) = get(&t, "queue_segments")? {
        c.queue_segments = v;
    }
    if let Some(v) = get::<f64>(&t, "hole_purge_ms")? {
        c.hole_purge = ms("hole_purge_ms", v)?;
    }
    if let Some(v) = get::<f64>(&t, "min_rtt_window_ms")? {
        c.min_rtt_window = ms("min_rtt_window_ms", v)?;
    }
    match get::<String>(&t, "hole_confirm")?.as_deref() {
        None => {}
        Some("time") => {
            let wait = get::<f64>(&t, "hole_confirm_ms")?.unwrap_or(10.0);
            c.hole_confirm = HoleConfirm::Time(ms("hole_confirm_ms", wait)?);
        }
        Some("count") => c.hole_confirm = HoleConfirm::Packets(get(&t, "hole_confirm_packets")?.unwrap_or(5)),
        Some(other) => {
            return Err(LeoguardError::new_err(format!(
                "invalid leotp.hole_confirm = {other:?}: must be \"time\" or \"count\""
            )))
        }
    }
    spec.placement = match get::<Bound<'_, PyAny>>(&t, "mid_nodes")? {
        None => MidPlacement::All,
        Some(v) => match v.extract::<String>() {
            Ok(s) if s == "all" => MidPlacement::All,
            Ok(s) if s == "satellites" => MidPlacement::Satellites,
            Ok(s) => {
                return Err(LeoguardError::new_err(format!(
                    "invalid leotp.mid_nodes = {s:?}: must be \"all\", \"satellites\" or a fraction in (0, 1]"
                )))
            }
            Err(_) => MidPlacement::Fraction(v.extract::<f64>()?),
        },
    };
    c.carry_payload = false;
    spec.cfg = c;
    Ok(spec)
}

/// Adds `leotp` (the mid nodes' counters summed) to a result dict when the run had LEOTP flows.
pub(crate) fn results<'py>(r: &RunResult, out: &Bound<'py, PyDict>) -> PyResult<()> {
    if let Some(st) = &r.leotp {
        let d = PyDict::new(out.py());
        for (k, v) in st.fields() {
            d.set_item(k, v)?;
        }
        out.set_item("leotp", d)?;
    }
    Ok(())
}
