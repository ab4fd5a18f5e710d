//! The data plane's protocol with its orchestrator and its results as JSON.
//!
//! Protocol (one JSON object per line on stdout, commands on stdin): after opening every TUN device
//! the data plane prints `{"ready": true, "tuns": [[node, name], ...]}`; the orchestrator configures
//! the hosts and sends `go T0` (CLOCK_MONOTONIC ns of model time 0, so both sides share the origin);
//! the data plane runs until the scenario's end or SIGTERM/SIGINT and prints the results object, then
//! keeps the TUN devices (which vanish with it) until the orchestrator has read their counters and
//! sends one more line or closes the pipe.

use crate::dataplane::{DataPlane, Report};
use crate::hist::Histogram;
use leoguard_core::Duration;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn us(h: &Histogram) -> Value {
    let q = |x: f64| h.quantile(x).map(|v| (v as f64 / 1e3 * 1e3).round() / 1e3);
    json!({"p50": q(0.5), "p99": q(0.99), "max": (h.max() as f64 / 1e3 * 1e3).round() / 1e3, "n": h.count()})
}

fn ms(h: &Histogram) -> Value {
    let q = |x: f64| h.quantile(x).map(|v| (v as f64 / 1e6 * 1e4).round() / 1e4);
    json!({"p50": q(0.5), "p99": q(0.99), "mean": (h.mean() / 1e6 * 1e4).round() / 1e4, "n": h.count()})
}

/// Per CPU: (busy, total) jiffies from /proc/stat (busy: all but idle and iowait); empty if unreadable.
pub fn cpu_times() -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else { return Vec::new() };
    text.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
            let total: u64 = v.iter().sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total - idle, total)
        })
        .collect()
}

/// Each CPU's busy share between two `cpu_times` readings.
pub fn busy_shares(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(&(b0, t0), &(b1, t1))| {
            let t = t1.saturating_sub(t0).max(1) as f64;
            (b1.saturating_sub(b0) as f64 / t * 1e3).round() / 1e3
        })
        .collect()
}

/// The report as one JSON object.
pub fn to_json(r: &Report, late_us: u64) -> Value {
    let drops: serde_json::Map<String, Value> = r
        .drops
        .iter()
        .map(|(c, n)| {
            (serde_json::to_value(c).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(), json!(n))
        })
        .collect();
    let realtime_ok = r.timing.quantile(0.99).is_none_or(|p| p <= late_us * 1000);
    json!({
        "elapsed_s": r.elapsed_ns as f64 / 1e9,
        "entered": r.entered,
        "delivered": r.delivered,
        "delivered_bytes": r.delivered_bytes,
        "in_flight": r.in_flight,
        "drops": drops,
        "drops_unexplained": r.unexplained(),
        "packet_hops": r.packet_hops,
        "timing_error_us": us(&r.timing),
        "event_lateness_us": us(&r.event_lateness),
        "late_deliveries": r.late,
        "late_threshold_us": late_us,
        "realtime_ok": realtime_ok,
        "cpu_s": r.cpu_s,
        "busy_s": r.busy_ns as f64 / 1e9,
        "cpu_busy_share": r.cpu_busy_share,
        "capture": r.capture.map(|(w, m)| json!({"written": w, "missed": m})),
        "scheme": r.scheme_counters.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "scheme_host": {
            "generated": r.scheme_host.generated, "absorbed": r.scheme_host.absorbed,
            "masters_evicted_early": r.scheme_host.masters_evicted_early,
            "retx_without_bytes": r.scheme_host.retx_without_bytes, "unstamped": r.scheme_host.unstamped,
        },
        "leotp": (r.leotp.nodes > 0).then(|| {
            let mut m: serde_json::Map<String, Value> =
                r.leotp.fields().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
            m.insert("intercepted".into(), json!(r.leotp_host.intercepted));
            m.insert("generated".into(), json!(r.leotp_host.generated));
            m.insert("malformed".into(), json!(r.leotp_host.malformed));
            Value::Object(m)
        }),
        "offload": {
            "hosts": r.offload_hosts, "uso_hosts": r.uso_hosts, "note": r.offload_note,
            "reads": r.tun.reads, "read_packets": r.tun.read_packets,
            "writes": r.tun.writes, "written_packets": r.tun.written_packets,
            "refused_reads": r.tun.refused_reads, "failed_writes": r.tun.failed_writes,
            "flush_us": us(&r.flush_time),
            "packets_per_read": (r.tun.reads > 0).then(|| r.tun.read_packets as f64 / r.tun.reads as f64),
            "packets_per_write": (r.tun.writes > 0).then(|| r.tun.written_packets as f64 / r.tun.writes as f64),
        },
        "driver_error": r.driver_error,
        "priority_set": r.priority_set,
        "flows": r.flows.iter().map(|f| json!({
            "sent": f.sent, "delivered": f.delivered, "delivered_bytes": f.delivered_bytes,
            "rev_sent": f.rev_sent, "rev_delivered": f.rev_delivered, "reordered": f.reordered,
            "owd_ms": ms(&f.owd), "rev_owd_ms": ms(&f.rev_owd),
        })).collect::<Vec<_>>(),
        "links": r.links.iter().map(|(a, b, s, loss, lossy)| json!({
            "from_node": a, "to_node": b, "offered": s.offered, "delivered": s.delivered,
            "delivered_bytes": s.delivered_bytes, "drops_queue": s.drops_queue, "drops_loss": s.drops_loss,
            "drops_down": s.drops_down, "busy_ns": s.busy_ns, "max_queue_bytes": s.max_queue_bytes,
            "loss_model": loss, "lossy_seconds": lossy,
        })).collect::<Vec<_>>(),
    })
}

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
