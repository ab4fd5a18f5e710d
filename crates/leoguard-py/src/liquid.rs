//! Bindings of the liquid tunnel: the `[liquid]` scenario section, its result counters, and the
//! codec throughput benchmark (`leoguard bench fec`).

use crate::{get, LeoguardError};
use leoguard_core::Duration;
use leoguard_proto::liquid::workload::Workload;
use leoguard_proto::liquid::LiquidConfig;
use leoguard_sim::scenario::RunResult;
use leoguard_sim::schemes::liquid::LiquidOptions;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn ms(field: &str, v: f64) -> PyResult<Duration> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(LeoguardError::new_err(format!("invalid liquid.{field} = {v}: must be a finite number >= 0")));
    }
    Ok(Duration::from_secs_f64(v / 1e3))
}

/// The `[liquid]` section: `symbol_size`, `block_ms`, `idle_ms`, `repair_ratio`, `adaptive`,
/// `adaptive_target`, `abandon_ms`, `in_order`, `max_block_packets`, `feedback_delay_ms`,
/// `feedback_interval_ms`, `feedback_retry_ms`, `flows`.
pub(crate) fn options(d: &Bound<'_, PyDict>) -> PyResult<Option<LiquidOptions>> {
    let Some(t) = get::<Bound<'_, PyDict>>(d, "liquid")? else { return Ok(None) };
    let mut c = LiquidConfig::default();
    if let Some(v) = get(&t, "symbol_size")? {
        c.symbol_size = v;
    }
    let durations: [(&str, &mut Duration); 6] = [
        ("block_ms", &mut c.block_time),
        ("idle_ms", &mut c.idle_time),
        ("abandon_ms", &mut c.abandon_after),
        ("feedback_delay_ms", &mut c.feedback_delay),
        ("feedback_interval_ms", &mut c.feedback_interval),
        ("feedback_retry_ms", &mut c.feedback_retry),
    ];
    for (key, slot) in durations {
        if let Some(v) = get::<f64>(&t, key)? {
            *slot = ms(key, v)?;
        }
    }
    if let Some(v) = get(&t, "repair_ratio")? {
        c.repair_ratio = v;
    }
    if let Some(v) = get(&t, "adaptive")? {
        c.adaptive = v;
    }
    if let Some(v) = get(&t, "adaptive_target")? {
        c.adaptive_target = v;
    }
    if let Some(v) = get(&t, "in_order")? {
        c.in_order = v;
    }
    if let Some(v) = get(&t, "max_block_packets")? {
        c.max_block_packets = v;
    }
    Ok(Some(LiquidOptions { cfg: c, flows: get(&t, "flows")? }))
}

/// Adds `liquid` (the tunnel counters) to a result dict when the tunnel ran.
pub(crate) fn results<'py>(py: Python<'py>, r: &RunResult, out: &Bound<'py, PyDict>) -> PyResult<()> {
    if let Some(st) = &r.liquid {
        let d = PyDict::new(py);
        for (k, v) in st.fields() {
            d.set_item(k, v)?;
        }
        out.set_item("liquid", d)?;
    }
    Ok(())
}

/// Per-core encode and decode throughput (Gbit/s of packet data) of the liquid state machines at
/// 1280-byte symbols, best of `reps` runs of the `workload` passes (decoding with one source symbol
/// in 20 lost); also the lossless decode. Releases the GIL.
#[pyfunction]
#[pyo3(signature = (blocks = 100, reps = 3))]
fn bench_fec(py: Python<'_>, blocks: u32, reps: u32) -> PyResult<(f64, f64, f64)> {
    if blocks == 0 || reps == 0 {
        return Err(LeoguardError::new_err("invalid bench_fec: blocks and reps must be > 0"));
    }
    Ok(py.allow_threads(|| {
        let w = Workload { blocks, ..Workload::default() };
        let bits = w.bytes() as f64 * 8.0;
        let best = |f: &dyn Fn()| {
            (0..reps)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let enc = best(&|| {
            std::hint::black_box(w.encode());
        });
        let datagrams = w.encode();
        let lossy = w.lose(&datagrams, w.config().symbol_size);
        let dec = best(&|| {
            std::hint::black_box(w.decode(&lossy));
        });
        let clean = best(&|| {
            std::hint::black_box(w.decode(&datagrams));
        });
        (bits / enc / 1e9, bits / dec / 1e9, bits / clean / 1e9)
    }))
}

/// Registers the functions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bench_fec, m)?)
}
