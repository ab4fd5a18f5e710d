//! Binding of the packetdrill-script runner (`leoguard_proto::packetdrill`): a script's text in, its
//! outcome out as a dict ({"outcome", "message", "line", "expected", "got", "syntax", "feature"}).

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Runs one packetdrill script's text against the TCP model (the GIL is released while it runs).
#[pyfunction]
fn tcp_script_run<'py>(py: Python<'py>, text: String) -> PyResult<Bound<'py, PyDict>> {
    let outcome = py.allow_threads(|| leoguard_proto::packetdrill::run_script(&text));
    let d = PyDict::new(py);
    d.set_item("outcome", outcome.kind())?;
    d.set_item("message", outcome.to_string())?;
    if let serde_json::Value::Object(fields) = outcome.to_json() {
        for (k, v) in fields {
            match v {
                serde_json::Value::String(s) => d.set_item(k, s)?,
                serde_json::Value::Bool(b) => d.set_item(k, b)?,
                serde_json::Value::Number(n) => d.set_item(k, n.as_u64())?,
                _ => {}
            }
        }
    }
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tcp_script_run, m)?)?;
    Ok(())
}
