//! What a run of the data plane measured ([`Report`]) and its results as JSON.

use crate::hist::Histogram;
use crate::plane::Cause;
use crate::tunio::TunStats;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Per-flow counters (the data direction and its reverse).
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    /// Data-direction packets that entered the emulated network.
    pub sent: u64,
    /// Data-direction packets delivered to the receiver.
    pub delivered: u64,
    /// Data-direction bytes delivered.
    pub delivered_bytes: u64,
    /// Reverse-direction packets (ACKs, replies) that entered.
    pub rev_sent: u64,
    /// Reverse-direction packets delivered.
    pub rev_delivered: u64,
    /// One-way delay of delivered data packets, ns (TUN read to TUN write).
    pub owd: Histogram,
    /// Data packets delivered after a packet of the flow that entered later (the network reordered).
    pub reordered: u64,
    /// Highest entry order delivered so far (data, reverse).
    pub(crate) last_delivered: [Option<u64>; 2],
    /// One-way delay of delivered reverse packets, ns.
    pub rev_owd: Histogram,
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Model time run, ns.
    pub elapsed_ns: u64,
    /// Packets read from hosts.
    pub entered: u64,
    /// Packets written to hosts.
    pub delivered: u64,
    /// Bytes written to hosts.
    pub delivered_bytes: u64,
    /// Drops by cause.
    pub drops: BTreeMap<Cause, u64>,
    /// Packets still inside the network at the end.
    pub in_flight: u64,
    /// Per flow (by config order).
    pub flows: Vec<FlowStats>,
    /// Lateness of each delivery against its model time, ns.
    pub timing: Histogram,
    /// Lateness of events handled, ns: of the first handled after each reading of the clock (at least
    /// every `CLOCK_EVERY` events).
    pub event_lateness: Histogram,
    /// Lateness of each batch of scheduled changes (a scenario event's link state, a routing step's
    /// routes, delays and rates) against its time, ns.
    pub control_lateness: Histogram,
    /// Deliveries later than `late_us`.
    pub late: u64,
    /// Packet-hops (link arrivals).
    pub packet_hops: u64,
    /// CPU seconds the data plane used (it spins, so about the run's length).
    pub cpu_s: f64,
    /// Time spent handling events and reading packets (not waiting or spinning), ns: what the
    /// traffic cost the data plane.
    pub busy_ns: u64,
    /// A topology driver's error, if it stopped early.
    pub driver_error: Option<String>,
    /// Whether the data plane got its nice value.
    pub priority_set: bool,
    /// Per link: (from, to, counters, loss model name, the model's lossy seconds of the run).
    #[allow(clippy::type_complexity)]
    pub links: Vec<(u32, u32, leoguard_net::LinkStats, &'static str, Option<Vec<(u64, f64)>>)>,
    /// What the per-hop scheme host did.
    pub scheme_host: crate::schemes::HostStats,
    /// The capture: (packets written, packets past `max_packets`).
    pub capture: Option<(u64, u64)>,
    /// The per-hop scheme's own counters summed over nodes (SATGUARD's or LinkGuardian's), by name.
    pub scheme_counters: Vec<(&'static str, u64)>,
    /// What the LEOTP mid nodes did to packets.
    pub leotp_host: crate::leotp::LeotpHostStats,
    /// Hosts whose TUN device has segmentation offloads (super-packets read, coalesced writes).
    pub offload_hosts: u64,
    /// Hosts whose device also segments UDP (USO).
    pub uso_hosts: u64,
    /// Why a device asked for offloads has none (the kernel's refusal), if one does not.
    pub offload_note: Option<String>,
    /// Reads and writes on the hosts' devices, summed.
    pub tun: TunStats,
    /// How long each coalesced batch of writes to one host took, ns.
    pub flush_time: Histogram,
    /// Each CPU's busy share over the run (/proc/stat), the data plane's own CPU included.
    pub cpu_busy_share: Vec<f64>,
    /// The LEOTP mid nodes' own counters summed over nodes (`nodes` = 0: none ran).
    pub leotp: leoguard_net::schemes::leotp::LeotpMidTotals,
}

impl Report {
    /// Packets neither delivered, nor dropped with a cause, nor taken by a per-hop scheme, nor still in
    /// flight (counting those the schemes created): must be zero.
    pub fn unexplained(&self) -> i64 {
        let (s, l) = (&self.scheme_host, &self.leotp_host);
        (self.entered + s.generated + l.generated) as i64
            - self.delivered as i64
            - self.drops.values().sum::<u64>() as i64
            - (s.absorbed + l.intercepted) as i64
            - self.in_flight as i64
    }
}

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
        "control_lateness_us": us(&r.control_lateness),
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
