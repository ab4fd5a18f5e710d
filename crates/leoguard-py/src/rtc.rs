//! Bindings of the WebRTC flows and the Tambur scheme: scenario dicts in, result columns out.

use crate::{get, set_table, LeoguardError};
use leoguard_core::parquet::Column;
use leoguard_core::Duration;
use leoguard_proto::tambur::TamburConfig;
use leoguard_sim::scenario::{FlowKind, RunResult};
use leoguard_sim::schemes::tambur::TamburOptions;
use leoguard_sim::webrtc::{Fec, WebrtcConfig};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn secs(field: &str, v: f64) -> PyResult<Duration> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(LeoguardError::new_err(format!("invalid {field} = {v}: must be a finite number >= 0")));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Tambur's code parameters from a dict (`tau`, `u_fraction`, `parity_ratio`, `loss_memory_s`).
fn code(d: Option<&Bound<'_, PyDict>>, field: &str) -> PyResult<TamburConfig> {
    let mut c = TamburConfig::default();
    let Some(d) = d else { return Ok(c) };
    if let Some(v) = get(d, "tau")? {
        c.tau = v;
    }
    if let Some(v) = get(d, "u_fraction")? {
        c.u_fraction = v;
    }
    if let Some(v) = get(d, "parity_ratio")? {
        c.parity_ratio = v;
    }
    if let Some(v) = get::<f64>(d, "loss_memory_s")? {
        c.loss_memory = secs(&format!("{field}.loss_memory_s"), v)?;
    }
    Ok(c)
}

/// A `kind = "webrtc"` flow (flows[i]).
pub(crate) fn webrtc_flow(f: &Bound<'_, PyDict>, i: usize) -> PyResult<FlowKind> {
    let mut c = WebrtcConfig::default();
    if let Some(v) = get(f, "bitrate_bps")? {
        c.bitrate_bps = v;
    }
    if let Some(v) = get(f, "fps")? {
        c.fps = v;
    }
    if let Some(v) = get::<f64>(f, "keyframe_interval_s")? {
        // 0: key frames only at the start and on request (libwebrtc's default).
        c.keyframe_interval = (v > 0.0).then(|| secs(&format!("flows[{i}].keyframe_interval_s"), v)).transpose()?;
    }
    for (key, slot) in [
        ("key_ratio", &mut c.key_ratio),
        ("size_sigma", &mut c.size_sigma),
        ("pacing_factor", &mut c.pacing_factor),
        ("jitter_percentile", &mut c.jitter_percentile),
    ] {
        if let Some(v) = get(f, key)? {
            *slot = v;
        }
    }
    if let Some(v) = get(f, "max_payload")? {
        c.max_payload = v;
    }
    if let Some(v) = get::<f64>(f, "history_s")? {
        c.history = secs(&format!("flows[{i}].history_s"), v)?;
    }
    if let Some(v) = get::<f64>(f, "jitter_window_s")? {
        c.jitter_window = secs(&format!("flows[{i}].jitter_window_s"), v)?;
    }
    let fec: String = get(f, "fec")?.unwrap_or_else(|| "none".into());
    c.fec = match fec.as_str() {
        "none" => Fec::None,
        "tambur" => Fec::Tambur(code(get::<Bound<'_, PyDict>>(f, "tambur")?.as_ref(), &format!("flows[{i}].tambur"))?),
        other => return Err(LeoguardError::new_err(format!("unknown flows[{i}].fec '{other}' (known: none, tambur)"))),
    };
    // NACK: on without FEC, off with Tambur (its evaluation repairs loss by FEC alone), unless given.
    c.nack = get(f, "nack")?.unwrap_or(matches!(c.fec, Fec::None));
    Ok(FlowKind::Webrtc(c))
}

/// The `[tambur]` section.
pub(crate) fn tambur(d: &Bound<'_, PyDict>) -> PyResult<Option<TamburOptions>> {
    let Some(t) = get::<Bound<'_, PyDict>>(d, "tambur")? else { return Ok(None) };
    let mut o = TamburOptions { code: code(Some(&t), "tambur")?, ..Default::default() };
    if let Some(ms) = get::<f64>(&t, "slot_ms")? {
        o.slot = secs("tambur.slot_ms", ms / 1e3)?;
    }
    o.flows = get(&t, "flows")?;
    Ok(Some(o))
}

/// Adds `webrtc`, `webrtc_frames`, `webrtc_fps` and `tambur` to a result dict.
pub(crate) fn results<'py>(py: Python<'py>, r: &RunResult, out: &Bound<'py, PyDict>) -> PyResult<()> {
    let fr = &r.webrtc_frames;
    let (e2e, jb) = leoguard_sim::scenario::derived::frame_delays_ms(fr);
    set_table(
        out,
        "webrtc_frames",
        vec![
            ("flow", Column::U32(fr.iter().map(|x| x.flow).collect())),
            ("frame", Column::U64(fr.iter().map(|x| x.frame).collect())),
            ("key", Column::Bool(fr.iter().map(|x| x.key).collect())),
            ("size", Column::U32(fr.iter().map(|x| x.size).collect())),
            ("capture_ns", Column::U64(fr.iter().map(|x| x.capture_ns).collect())),
            ("complete_ns", Column::OptU64(fr.iter().map(|x| x.complete_ns).collect())),
            ("render_ns", Column::OptU64(fr.iter().map(|x| x.render_ns).collect())),
            ("e2e_ms", Column::OptF64(e2e)),
            ("jb_ms", Column::OptF64(jb)),
        ],
    )?;
    let fp = &r.webrtc_fps;
    set_table(
        out,
        "webrtc_fps",
        vec![
            ("flow", Column::U32(fp.iter().map(|x| x.flow).collect())),
            ("t_s", Column::F64(fp.iter().map(|x| x.t_s).collect())),
            ("fps", Column::F64(fp.iter().map(|x| x.fps).collect())),
        ],
    )?;
    let w = &r.webrtc;
    let s = PyDict::new(py);
    macro_rules! col {
        ($($f:ident),*) => { $( s.set_item(stringify!($f), w.iter().map(|x| x.$f).collect::<Vec<_>>())?; )* };
    }
    col!(flow, frames_sent, key_frames, frames_rendered, e2e_p50_ms, e2e_p95_ms, e2e_mean_ms, jb_p50_ms);
    col!(jb_p95_ms, jb_mean_ms, fps_mean, fps_std, freezes, freeze_s, nacks, nacked_packets, plis);
    col!(retransmissions, media_packets, parity_packets, fec_recovered, bytes_sent);
    out.set_item("webrtc", s)?;
    if let Some(st) = &r.tambur {
        let d = PyDict::new(py);
        for (k, v) in st.fields() {
            d.set_item(k, v)?;
        }
        out.set_item("tambur", d)?;
    }
    Ok(())
}
