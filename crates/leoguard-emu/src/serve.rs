//! The data plane's protocol with its orchestrator and its results as JSON.
//!
//! Protocol (one JSON object per line on stdout, commands on stdin): after opening every TUN device
//! the data plane prints `{"ready": true, "tuns": [[node, name], ...]}`; the orchestrator configures
//! the hosts and sends `go T0` (CLOCK_MONOTONIC ns of model time 0, so both sides share the origin);
//! the data plane runs until the scenario's end or SIGTERM/SIGINT and prints the results object, then
//! keeps the TUN devices (which vanish with it) until the orchestrator has read their counters and
//! sends one more line or closes the pipe.

use crate::dataplane::DataPlane;
use crate::report::to_json;
use leoguard_core::Duration;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// Runs the protocol above on `input`/`output`; returns the results object (also printed).
pub fn serve(
    dp: DataPlane,
    duration: Duration,
    input: &mut impl BufRead,
    output: &mut impl Write,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Value, String> {
    let late_us = dp.late_us();
    let ready = json!({"ready": true, "tuns": dp.tun_names()});
    writeln!(output, "{ready}")
        .and_then(|_| output.flush())
        .map_err(|e| format!("writing to the orchestrator: {e}"))?;
    let mut line = String::new();
    input.read_line(&mut line).map_err(|e| format!("reading the go command: {e}"))?;
    let t0 = match line.trim().strip_prefix("go ").map(str::parse::<u64>) {
        Some(Ok(t)) => t,
        _ if line.is_empty() => return Err("the orchestrator closed the pipe before `go`".into()),
        _ => return Err(format!("expected `go T0_NS`, got {:?}", line.trim())),
    };
    let (report, devices) = dp.run(t0, duration, stop).map_err(|e| e.to_string())?;
    let v = to_json(&report, late_us);
    writeln!(output, "{v}").and_then(|_| output.flush()).map_err(|e| format!("writing the results: {e}"))?;
    // The hosts' drop counters live on the TUN devices, which close with this process.
    line.clear();
    let _ = input.read_line(&mut line);
    drop(devices);
    Ok(v)
}
