//! Bindings of the simulator: `simulate(dict)` runs a resolved scenario (validated by the Python
//! models first; the Rust side validates again and names fields) and returns columns.

mod topo;
use crate::{get, need, set_table, LeoguardError};
use leoguard_core::parquet::Column;
use leoguard_core::{Bps, Duration, Instant};
use leoguard_net::RateSchedule;
use leoguard_proto::satguard::hop::HopSenderStats;
use leoguard_sim::capture::CaptureSpec;
use leoguard_sim::engine::QueueLimit;
use leoguard_sim::loss::{parse_plr_csv, LossSpec};
use leoguard_sim::scenario::{
    derived, FlowKind, FlowSpec, LinkEvent, LinkSpec, RouteEvent, RunResult, Running, Scenario,
};
use leoguard_sim::schemes::linkguardian::LinkGuardianOptions;
use leoguard_sim::schemes::satguard::SatguardOptions;
use leoguard_sim::web::Http;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::Arc;

pub(super) fn secs(field: &str, v: f64) -> PyResult<Duration> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(LeoguardError::new_err(format!("invalid {field} = {v}: must be a finite number >= 0")));
    }
    Ok(Duration::from_secs_f64(v))
}

pub(super) fn loss(d: Option<Bound<'_, PyDict>>, field: &str) -> PyResult<LossSpec> {
    let Some(d) = d else {
        return Ok(LossSpec::None);
    };
    let model: String = need(&d, "model")?;
    Ok(match model.as_str() {
        "none" => LossSpec::None,
        "bernoulli" => LossSpec::Bernoulli { p: need(&d, "p")? },
        "gilbert_elliott" => LossSpec::GilbertElliott {
            p_gb: need(&d, "p_gb")?,
            p_bg: need(&d, "p_bg")?,
            loss_good: need(&d, "loss_good")?,
            loss_bad: need(&d, "loss_bad")?,
        },
        "starlink" => {
            let outages: Vec<(f64, f64)> = get(&d, "outages")?.unwrap_or_default();
            LossSpec::Starlink {
                boundary_offset_s: get(&d, "boundary_offset_s")?.unwrap_or(7),
                outages: outages
                    .into_iter()
                    .map(|(a, b)| Ok((Instant(secs(field, a)?.as_nanos()), secs(field, b)?)))
                    .collect::<PyResult<_>>()?,
            }
        }
        "trace_per_second" => {
            let text: String = need(&d, "csv_text")?;
            let rates = parse_plr_csv(&text).map_err(|e| LeoguardError::new_err(format!("{field}: {e}")))?;
            LossSpec::TracePerSecond { rates, looping: get(&d, "loop")?.unwrap_or(true) }
        }
        "drop_list" => LossSpec::DropList { indices: need(&d, "indices")? },
        // The core validates period > 0, phase < period and the probabilities, naming them.
        "cycle_profile" => LossSpec::CycleProfile {
            period: secs(&format!("{field}.period_s"), get(&d, "period_s")?.unwrap_or(15.0))?,
            phase: secs(&format!("{field}.phase_s"), get(&d, "phase_s")?.unwrap_or(0.0))?,
            probs: need(&d, "probs")?,
            slot: get::<f64>(&d, "slot_s")?.map(|x| secs(&format!("{field}.slot_s"), x)).transpose()?,
        },
        other => {
            return Err(LeoguardError::new_err(format!(
                "unknown {field}.model '{other}' (known: none, bernoulli, gilbert_elliott, starlink, trace_per_second, drop_list, cycle_profile)"
            )))
        }
    })
}

/// A link's `rate_schedule`: `period_s` and `rates_bps` (the steps, equal in length; validated with
/// the topology, naming `links[i].rate_schedule`).
fn rate_schedule(d: &Bound<'_, PyDict>, i: usize) -> PyResult<RateSchedule> {
    let period = secs(&format!("links[{i}].rate_schedule.period_s"), need(d, "period_s")?)?;
    let rates: Vec<u64> = need(d, "rates_bps")?;
    Ok(RateSchedule { period, rates: rates.into_iter().map(Bps).collect() })
}

/// A `kind = "web"` flow: `http` ("1.1" or "2"), `cc`, `corpus_seed`, `pages` (a list of corpus
/// indices), `think_s`.
fn web_flow(f: &Bound<'_, PyDict>, i: usize) -> PyResult<FlowKind> {
    let http: String = get(f, "http")?.unwrap_or_else(|| "2".to_string());
    let Some(http) = Http::parse(&http) else {
        return Err(LeoguardError::new_err(format!("invalid flows[{i}].http = '{http}': must be \"1.1\" or \"2\"")));
    };
    Ok(FlowKind::Web {
        cc: need(f, "cc")?,
        http,
        corpus_seed: get(f, "corpus_seed")?.unwrap_or(0),
        pages: need(f, "pages")?,
        think: secs(&format!("flows[{i}].think_s"), get(f, "think_s")?.unwrap_or(1.0))?,
    })
}

pub(crate) fn scenario(d: &Bound<'_, PyDict>) -> PyResult<Scenario> {
    let mut links = Vec::new();
    let ls: Bound<'_, PyList> = need(d, "links")?;
    for (i, l) in ls.iter().enumerate() {
        let l = l.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("links[{i}] must be a table")))?;
        let queue = match (get::<u64>(l, "queue_bytes")?, get::<u32>(l, "queue_packets")?) {
            (Some(b), None) => QueueLimit::Bytes(b),
            (None, Some(p)) => QueueLimit::Packets(p),
            (None, None) => QueueLimit::Bytes(1_000_000),
            _ => {
                return Err(LeoguardError::new_err(format!("links[{i}]: give queue_bytes or queue_packets, not both")))
            }
        };
        links.push(LinkSpec {
            a: need(l, "a")?,
            b: need(l, "b")?,
            rate: Bps(need(l, "rate_bps")?),
            delay: secs(&format!("links[{i}].delay_ms"), need::<f64>(l, "delay_ms")? / 1e3)?,
            queue,
            loss_ab: loss(get(l, "loss")?, &format!("links[{i}].loss"))?,
            loss_ba: loss(get(l, "loss_reverse")?, &format!("links[{i}].loss_reverse"))?,
            rate_schedule: match get::<Bound<'_, PyDict>>(l, "rate_schedule")? {
                None => None,
                Some(rs) => Some(rate_schedule(&rs, i)?),
            },
        });
    }
    let mut flows = Vec::new();
    let fs: Bound<'_, PyList> = need(d, "flows")?;
    for (i, f) in fs.iter().enumerate() {
        let f = f.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("flows[{i}] must be a table")))?;
        let kind: String = need(f, "kind")?;
        let kind = match kind.as_str() {
            "tcp" => FlowKind::Tcp { cc: need(f, "cc")?, bytes: get(f, "bytes")?, rate: get(f, "rate_bps")?.map(Bps) },
            "cbr" => FlowKind::Cbr { rate: Bps(need(f, "rate_bps")?), size: get(f, "size")?.unwrap_or(1200) },
            "web" => web_flow(f, i)?,
            "webrtc" => crate::rtc::webrtc_flow(f, i)?,
            "leotp" => FlowKind::Leotp { bytes: get(f, "bytes")? },
            other => {
                return Err(LeoguardError::new_err(format!(
                    "unknown flows[{i}].kind '{other}' (known: tcp, cbr, web, webrtc, leotp)"
                )))
            }
        };
        let start = secs(&format!("flows[{i}].start_s"), get(f, "start_s")?.unwrap_or(0.0))?;
        flows.push(FlowSpec {
            src: need(f, "src")?,
            dst: need(f, "dst")?,
            kind,
            start: Instant(start.as_nanos()),
            tc: get(f, "tc")?.unwrap_or(0),
        });
    }
    let mut events = Vec::new();
    if let Some(es) = get::<Bound<'_, PyList>>(d, "events")? {
        for (i, e) in es.iter().enumerate() {
            let e =
                e.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("events[{i}] must be a table")))?;
            let at = secs(&format!("events[{i}].t_s"), need(e, "t_s")?)?;
            events.push(LinkEvent { at: Instant(at.as_nanos()), link: need(e, "link")?, up: need(e, "up")? });
        }
    }
    let mut routes = Vec::new();
    if let Some(rs) = get::<Bound<'_, PyList>>(d, "routes")? {
        for (i, r) in rs.iter().enumerate() {
            let r =
                r.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("routes[{i}] must be a table")))?;
            let at = secs(&format!("routes[{i}].t_s"), need(r, "t_s")?)?;
            routes.push(RouteEvent {
                at: Instant(at.as_nanos()),
                node: need(r, "node")?,
                dst: need(r, "dst")?,
                link: get(r, "link")?,
            });
        }
    }
    let leo = match get::<Bound<'_, PyDict>>(d, "leo")? {
        None => None,
        Some(l) => Some(topo::leo_path(&l)?),
    };
    let duration = secs("duration_s", need(d, "duration_s")?)?;
    let constellation = match get::<Bound<'_, PyDict>>(d, "constellation")? {
        None => None,
        Some(c) => Some(topo::constellation(&c, duration.as_secs_f64())?),
    };
    let satguard = match get::<Bound<'_, PyDict>>(d, "satguard")? {
        None => None,
        Some(g) => {
            let mut o = SatguardOptions::default();
            if let Some(b) = get(&g, "buffer_bytes")? {
                o.hop.buffer_bytes = b;
            }
            if let Some(r) = get(&g, "max_retries")? {
                o.hop.max_retries = r;
            }
            let budget = match get::<f64>(&g, "retry_budget_ms")? {
                Some(ms) => Some(secs("satguard.retry_budget_ms", ms / 1e3)?),
                None => None,
            };
            if let Some(ms) = get::<f64>(&g, "timeout_ms")? {
                o.hop.default_timeout = secs("satguard.timeout_ms", ms / 1e3)?;
            }
            if let Some(all) = get(&g, "process_all")? {
                o.process_all = all;
            }
            if let Some(v) = get(&g, "migration")? {
                o.migration = v;
            }
            if let Some(v) = get(&g, "beam_timers")? {
                o.beam_timers = v;
            }
            if let Some(ms) = get::<f64>(&g, "beam_guard_ms")? {
                o.beam_guard = secs("satguard.beam_guard_ms", ms / 1e3)?;
            }
            if let Some(ms) = get::<f64>(&g, "commit_grace_ms")? {
                o.commit_grace = secs("satguard.commit_grace_ms", ms / 1e3)?;
            }
            if let Some(w) = get(&g, "dedup_window")? {
                o.dedup_window = w;
            }
            if get::<bool>(&g, "reorder")? == Some(false) {
                o.reorder = None;
            } else if let Some(r) = o.reorder.as_mut() {
                for (field, slot) in [
                    ("reorder_initial_hold_ms", &mut r.initial_hold),
                    ("reorder_min_hold_ms", &mut r.min_hold),
                    ("reorder_max_hold_ms", &mut r.max_hold),
                ] {
                    if let Some(ms) = get::<f64>(&g, field)? {
                        *slot = secs(&format!("satguard.{field}"), ms / 1e3)?;
                    }
                }
            }
            // Default budget: as long as the exit may hold a gap (with or without its reorder buffer).
            let max_hold = match get::<f64>(&g, "reorder_max_hold_ms")? {
                Some(ms) => secs("satguard.reorder_max_hold_ms", ms / 1e3)?,
                None => leoguard_proto::satguard::reorder::ReorderConfig::default().max_hold,
            };
            o.hop.retry_budget = Some(budget.unwrap_or(max_hold));
            o.validate().map_err(|e| LeoguardError::new_err(e.to_string()))?;
            Some(o)
        }
    };
    let linkguardian = match get::<Bound<'_, PyDict>>(d, "linkguardian")? {
        None => None,
        Some(g) => {
            let mut o = LinkGuardianOptions::default();
            if let Some(v) = get(&g, "ordered")? {
                o.ordered = v;
            }
            if let Some(v) = get(&g, "process_all")? {
                o.process_all = v;
            }
            if let Some(ms) = get::<f64>(&g, "fixed_timeout_ms")? {
                o.shared_links_fixed_timeout = Some(secs("linkguardian.fixed_timeout_ms", ms / 1e3)?);
            }
            Some(o)
        }
    };
    let mpep = match get::<Bound<'_, PyDict>>(d, "mpep")? {
        None => None,
        Some(g) => {
            let mut o = leoguard_sim::schemes::mpep::MpepOptions::default();
            if let Some(b) = get(&g, "buffer_bytes")? {
                o.buffer_bytes = Some(b);
            }
            if let Some(b) = get(&g, "state_overhead_bytes")? {
                o.state_overhead_bytes = b;
            }
            if let Some(v) = get(&g, "gateway_satellites")? {
                o.gateway_satellites = v;
            }
            if let Some(b) = get(&g, "udp_buffer_bytes")? {
                o.udp_buffer_bytes = Some(b);
            }
            o.validate().map_err(|e| LeoguardError::new_err(e.to_string()))?;
            Some(o)
        }
    };
    let capture = match get::<Bound<'_, PyDict>>(d, "capture")? {
        None => None,
        Some(c) => {
            let mut spec = CaptureSpec::at(need(&c, "nodes")?);
            if let Some(n) = get(&c, "max_packets")? {
                spec.max_packets = n;
            }
            if let Some(n) = get(&c, "snaplen")? {
                spec.snaplen = n;
            }
            Some(spec)
        }
    };
    Ok(Scenario {
        startcp: startcp(d)?,
        leotp: crate::leotp::spec(d)?,
        satguard,
        linkguardian,
        mpep,
        tambur: crate::rtc::tambur(d)?,
        liquid: crate::liquid::options(d)?,
        capture,
        leo,
        constellation,
        routes,
        link_sample_every: secs("link_sample_every_s", get(d, "link_sample_every_s")?.unwrap_or(0.1))?,
        app_delay_every: get(d, "app_delay_every")?.unwrap_or(0),
        tcp_recovery: tcp_recovery(d)?,
        nodes: need(d, "nodes")?,
        links,
        flows,
        events,
        duration,
        seed: get(d, "seed")?.unwrap_or(1),
        sample_every: secs("sample_every_s", get(d, "sample_every_s")?.unwrap_or(0.1))?,
    })
}

/// The `startcp` dict the Python front builds from `[startcp]`: `config` (StartcpConfig fields in
/// seconds and counts), `base_cc`, `policy` and its parameter (`lead_s`, `leads_s` or `weights_json`).
fn startcp(d: &Bound<'_, PyDict>) -> PyResult<leoguard_sim::scenario::StartcpSpec> {
    use leoguard_sim::scenario::{StartcpPolicy, StartcpSpec};
    let mut spec = StartcpSpec::default();
    let Some(g) = get::<Bound<'_, PyDict>>(d, "startcp")? else { return Ok(spec) };
    let err = |e: &dyn ToString| LeoguardError::new_err(e.to_string());
    if let Some(c) = get::<Bound<'_, PyDict>>(&g, "config")? {
        for (k, v) in c.iter() {
            let k: String = k.extract()?;
            let v: f64 = v.extract()?;
            spec.config.set(&k, v).map_err(|e| err(&e))?;
        }
    }
    if let Some(b) = get::<String>(&g, "base_cc")? {
        spec.config.set_base_cc(&b).map_err(|e| err(&e))?;
    }
    spec.config.validate().map_err(|e| err(&e))?;
    spec.policy = match get::<String>(&g, "policy")?.as_deref() {
        None | Some("heuristic") => StartcpPolicy::Heuristic,
        Some("fixed") => StartcpPolicy::Fixed(secs("startcp.lead_ms", need::<f64>(&g, "lead_s")?)?),
        Some("scripted") => {
            let leads: Vec<f64> = need(&g, "leads_s")?;
            let leads = leads.iter().map(|&x| secs("startcp.leads_ms", x)).collect::<PyResult<Vec<_>>>()?;
            let p = leoguard_proto::startcp::ScriptedLeads::new(leads)
                .ok_or_else(|| LeoguardError::new_err("startcp.leads_ms: give at least one lead"))?;
            StartcpPolicy::Scripted(p)
        }
        Some("learnt") => {
            let text: String = need(&g, "weights_json")?;
            let name: String = get(&g, "weights_name")?.unwrap_or_else(|| "weights".into());
            let m = leoguard_proto::startcp::MlpPolicy::from_json(&text)
                .map_err(|e| LeoguardError::new_err(format!("startcp.weights ({name}): {e}")))?;
            StartcpPolicy::Learnt(Arc::new(m))
        }
        Some(other) => {
            return Err(LeoguardError::new_err(format!(
                "startcp.policy = {other:?}: must be heuristic, fixed, scripted or learnt"
            )))
        }
    };
    Ok(spec)
}

/// A scenario being simulated: advance it in slices, read the results at any point.
#[pyclass(name = "SimRun", module = "leoguard._core")]
struct PySimRun {
    /// In a mutex so that the class is `Sync` (Python objects may be shared between threads).
    run: std::sync::Mutex<Running>,
    /// Seconds spent in the native simulation so far.
    run_s: f64,
    /// The scenario's `link_sample_every_s`, for the link series' utilisation.
    link_interval_s: f64,
}

impl PySimRun {
    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        // A panic inside a run poisons the lock; the state is still readable for partial results.
        self.run.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[pymethods]
impl PySimRun {
    /// Builds the run from a resolved scenario dict (errors name the field).
    #[new]
    fn new(spec: &Bound<'_, PyDict>) -> PyResult<Self> {
        let s = scenario(spec)?;
        let run = Running::new(&s).map_err(|e| LeoguardError::new_err(e.to_string()))?;
        let link_interval_s = get(spec, "link_sample_every_s")?.unwrap_or(0.1);
        Ok(PySimRun { run: std::sync::Mutex::new(run), run_s: 0.0, link_interval_s })
    }

    /// Runs up to `until_s` simulated seconds (capped at the end); the GIL is released meanwhile.
    fn advance(&mut self, py: Python<'_>, until_s: f64) -> PyResult<()> {
        let until = secs("until_s", until_s)?;
        // Timing lives here, in the binding, not in the simulator: the engine has no clock of its own.
        let t0 = std::time::Instant::now();
        let mut guard = self.lock();
        let run: &mut Running = &mut guard;
        py.allow_threads(|| run.advance(Instant(until.as_nanos())));
        drop(guard);
        self.run_s += t0.elapsed().as_secs_f64();
        Ok(())
    }

    /// Simulated seconds so far.
    #[getter]
    fn now_s(&self) -> f64 {
        self.lock().now().as_nanos() as f64 / 1e9
    }

    /// The scenario's duration, seconds.
    #[getter]
    fn end_s(&self) -> f64 {
        self.lock().end().as_nanos() as f64 / 1e9
    }

    /// Whether the run reached its end.
    #[getter]
    fn finished(&self) -> bool {
        self.lock().finished()
    }

    /// Packet-hops so far.
    #[getter]
    fn packet_hops(&self) -> u64 {
        self.lock().packet_hops()
    }

    /// The results so far as columns.
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut guard = self.lock();
        let run: &mut Running = &mut guard;
        let r = py.allow_threads(move || run.collect());
        result_dict(py, &r, self.run_s, self.link_interval_s)
    }
}

/// Runs a resolved scenario dict to its end and returns its results as columns.
#[pyfunction]
fn simulate<'py>(py: Python<'py>, spec: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let mut run = PySimRun::new(spec)?;
    let end = run.end_s();
    run.advance(py, end)?;
    run.results(py)
}

fn result_dict<'py>(py: Python<'py>, r: &RunResult, run_s: f64, link_interval_s: f64) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let owd = derived::owd_ms(&r.packets);
    let percentiles = derived::owd_percentiles(&r.packets, &owd);
    out.set_item("run_s", run_s)?;
    out.set_item("simulated_s", r.simulated_ns as f64 / 1e9)?;
    out.set_item("topology_error", r.topology_error.clone())?;
    let flows = PyList::empty(py);
    for (i, f) in r.flows.iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("delivered_bytes", f.delivered_bytes)?;
        d.set_item("goodput_bps", f.goodput_bps)?;
        d.set_item("retransmissions", f.retransmissions)?;
        d.set_item("rtos", f.rtos)?;
        d.set_item("tlps", f.tlps)?;
        d.set_item("dsacks", f.dsacks)?;
        d.set_item("undos", f.undos)?;
        d.set_item("network_loss", f.network_loss)?;
        d.set_item("endpoint_loss", f.endpoint_loss)?;
        d.set_item("fct_s", f.fct_s)?;
        d.set_item("packets_sent", f.packets_sent)?;
        let (p50, p99) = percentiles.get(&(i as u32)).map_or((None, None), |&(a, b)| (Some(a), Some(b)));
        d.set_item("owd_ms_p50", p50)?;
        d.set_item("owd_ms_p99", p99)?;
        flows.append(d)?;
    }
    out.set_item("flows", flows)?;
    let sr = &r.series;
    set_table(
        &out,
        "series",
        vec![
            ("flow", Column::U32(sr.iter().map(|x| x.flow).collect())),
            ("t_ns", Column::U64(sr.iter().map(|x| x.t_ns).collect())),
            ("cwnd_bytes", Column::U64(sr.iter().map(|x| x.cwnd).collect())),
            ("in_flight_bytes", Column::U64(sr.iter().map(|x| x.in_flight).collect())),
            ("srtt_ns", Column::U64(sr.iter().map(|x| x.srtt_ns).collect())),
            ("acked_bytes", Column::U64(sr.iter().map(|x| x.acked).collect())),
            ("retransmissions", Column::U64(sr.iter().map(|x| x.retransmissions).collect())),
            ("goodput_bps", Column::F64(derived::goodput_bps(sr))),
        ],
    )?;
    let pr = &r.packets;
    set_table(
        &out,
        "packets",
        vec![
            ("flow", Column::U32(pr.iter().map(|x| x.flow).collect())),
            ("seq", Column::U64(pr.iter().map(|x| x.seq).collect())),
            ("sent_ns", Column::U64(pr.iter().map(|x| x.sent_ns).collect())),
            ("received_ns", Column::U64(pr.iter().map(|x| x.received_ns).collect())),
            ("retransmission", Column::Bool(pr.iter().map(|x| x.retransmission).collect())),
            ("hops", Column::U16(pr.iter().map(|x| x.hops).collect())),
            ("owd_ms", Column::F64(owd)),
        ],
    )?;
    let ar = &r.app_delay;
    set_table(
        &out,
        "app_delay",
        vec![
            ("flow", Column::U32(ar.iter().map(|x| x.flow).collect())),
            ("seq", Column::U64(ar.iter().map(|x| x.seq).collect())),
            ("sent_ns", Column::U64(ar.iter().map(|x| x.sent_ns).collect())),
            ("delivered_ns", Column::OptU64(ar.iter().map(|x| x.delivered_ns).collect())),
            ("delay_ms", Column::OptF64(derived::app_delay_ms(ar))),
        ],
    )?;
    let st = PyDict::new(py);
    let sr = &r.startcp;
    st.set_item("flow", sr.iter().map(|x| x.flow).collect::<Vec<_>>())?;
    st.set_item("predicted_ns", sr.iter().map(|x| x.predicted_ns).collect::<Vec<_>>())?;
    st.set_item("stall_start_ns", sr.iter().map(|x| x.stall_start_ns).collect::<Vec<_>>())?;
    st.set_item("stall_end_ns", sr.iter().map(|x| x.stall_end_ns).collect::<Vec<_>>())?;
    st.set_item("probes", sr.iter().map(|x| x.probes).collect::<Vec<_>>())?;
    st.set_item("reason", sr.iter().map(|x| x.reason).collect::<Vec<_>>())?;
    st.set_item("lead_ns", sr.iter().map(|x| x.lead_ns).collect::<Vec<_>>())?;
    for (k, name) in leoguard_proto::startcp::FEATURES.iter().enumerate() {
        st.set_item(format!("state_{name}"), sr.iter().map(|x| x.state[k]).collect::<Vec<_>>())?;
    }
    out.set_item("startcp", st)?;
    let it = PyDict::new(py);
    let ir = &r.interruptions;
    it.set_item("flow", ir.iter().map(|x| x.flow).collect::<Vec<_>>())?;
    it.set_item("start_ns", ir.iter().map(|x| x.start_ns).collect::<Vec<_>>())?;
    it.set_item("duration_ns", ir.iter().map(|x| x.duration_ns).collect::<Vec<_>>())?;
    it.set_item("stalled", ir.iter().map(|x| x.stalled).collect::<Vec<_>>())?;
    out.set_item("interruptions", it)?;
    let links = PyDict::new(py);
    let lr = &r.links;
    links.set_item("from_node", lr.iter().map(|x| x.from).collect::<Vec<_>>())?;
    links.set_item("to_node", lr.iter().map(|x| x.to).collect::<Vec<_>>())?;
    links.set_item("offered", lr.iter().map(|x| x.stats.offered).collect::<Vec<_>>())?;
    links.set_item("delivered", lr.iter().map(|x| x.stats.delivered).collect::<Vec<_>>())?;
    links.set_item("drops_queue", lr.iter().map(|x| x.stats.drops_queue).collect::<Vec<_>>())?;
    links.set_item("drops_loss", lr.iter().map(|x| x.stats.drops_loss).collect::<Vec<_>>())?;
    links.set_item("drops_down", lr.iter().map(|x| x.stats.drops_down).collect::<Vec<_>>())?;
    links.set_item("busy_ns", lr.iter().map(|x| x.stats.busy_ns).collect::<Vec<_>>())?;
    links.set_item("max_queue_bytes", lr.iter().map(|x| x.stats.max_queue_bytes).collect::<Vec<_>>())?;
    links.set_item("realised_loss", lr.iter().map(|x| x.realised_loss).collect::<Vec<_>>())?;
    links.set_item("loss_model", lr.iter().map(|x| x.loss_model).collect::<Vec<_>>())?;
    links.set_item("loss_params", lr.iter().map(|x| x.loss_params.clone()).collect::<Vec<_>>())?;
    links.set_item("lossy_seconds", lr.iter().map(|x| x.lossy_seconds.clone()).collect::<Vec<_>>())?;
    out.set_item("links", links)?;
    let drops = PyDict::new(py);
    let dr = &r.drops;
    drops.set_item("t_ns", dr.iter().map(|x| x.t_ns).collect::<Vec<_>>())?;
    drops.set_item("flow", dr.iter().map(|x| x.flow).collect::<Vec<_>>())?;
    drops.set_item("seq", dr.iter().map(|x| x.seq).collect::<Vec<_>>())?;
    drops.set_item("from_node", dr.iter().map(|x| x.link.map(|l| l.0)).collect::<Vec<_>>())?;
    drops.set_item("to_node", dr.iter().map(|x| x.link.map(|l| l.1)).collect::<Vec<_>>())?;
    drops.set_item("reason", dr.iter().map(|x| x.reason).collect::<Vec<_>>())?;
    drops.set_item("control", dr.iter().map(|x| x.control).collect::<Vec<_>>())?;
    out.set_item("drops", drops)?;
    let lr = &r.link_series;
    set_table(
        &out,
        "link_series",
        vec![
            ("t_ns", Column::U64(lr.iter().map(|x| x.t_ns).collect())),
            ("from_node", Column::U32(lr.iter().map(|x| x.from).collect())),
            ("to_node", Column::U32(lr.iter().map(|x| x.to).collect())),
            ("bytes", Column::U64(lr.iter().map(|x| x.bytes).collect())),
            ("rate_bps", Column::U64(lr.iter().map(|x| x.rate_bps).collect())),
            ("queue_bytes", Column::U64(lr.iter().map(|x| x.queue_bytes).collect())),
            ("drops", Column::U64(lr.iter().map(|x| x.drops).collect())),
            ("up", Column::Bool(lr.iter().map(|x| x.up).collect())),
            ("utilisation", Column::OptF64(derived::utilisation(lr, link_interval_s))),
        ],
    )?;
    out.set_item("packet_hops", r.packet_hops)?;
    if let Some(st) = &r.satguard {
        out.set_item("satguard", counters_dict(py, st.fields())?)?;
    }
    if let Some(st) = &r.linkguardian {
        out.set_item("linkguardian", counters_dict(py, st.fields())?)?;
    }
    if let Some(st) = &r.mpep {
        let m = counters_dict(py, st.fields())?;
        let delays: Vec<u64> = r.mpep_migrations.iter().map(|x| x.delay.as_nanos()).collect();
        m.set_item("migration_delays_ns", delays)?;
        m.set_item("migration_state_bytes", r.mpep_migrations.iter().map(|x| x.state_bytes).collect::<Vec<_>>())?;
        m.set_item("migration_t_ns", r.mpep_migrations.iter().map(|x| x.t.as_nanos()).collect::<Vec<_>>())?;
        out.set_item("mpep", m)?;
    }
    let hops = PyDict::new(py);
    let hr = &r.hops;
    hops.set_item("from_node", hr.iter().map(|x| x.from).collect::<Vec<_>>())?;
    hops.set_item("to_node", hr.iter().map(|x| x.to).collect::<Vec<_>>())?;
    hops.set_item("user_link", hr.iter().map(|x| x.user_link).collect::<Vec<_>>())?;
    let columns: [(&str, HopColumn); 11] = [
        ("sent", |s| s.sent),
        ("acked", |s| s.acked),
        ("retransmissions", |s| s.retransmissions),
        ("gap_losses", |s| s.gap_losses),
        ("timer_losses", |s| s.timer_losses),
        ("given_up", |s| s.given_up),
        ("evicted", |s| s.evicted),
        ("taken_at_link_down", |s| s.taken),
        ("hacks", |s| s.hacks),
        ("hacks_ignored", |s| s.hacks_out_of_window),
        ("max_buffer_bytes", |s| s.max_buffer_bytes),
    ];
    for (name, get) in columns {
        hops.set_item(name, hr.iter().map(|x| get(&x.sender)).collect::<Vec<_>>())?;
    }
    out.set_item("hops", hops)?;
    out.set_item("capture", r.capture.as_deref().map(|b| PyBytes::new(py, b)))?;
    out.set_item("capture_missed", r.capture_missed)?;
    web_table(&out, &r.web)?;
    let o = &r.web_objects;
    let objects = PyDict::new(py);
    objects.set_item("flow", o.iter().map(|x| x.flow).collect::<Vec<_>>())?;
    objects.set_item("load", o.iter().map(|x| x.load).collect::<Vec<_>>())?;
    objects.set_item("object", o.iter().map(|x| x.object).collect::<Vec<_>>())?;
    objects.set_item("origin", o.iter().map(|x| x.origin).collect::<Vec<_>>())?;
    objects.set_item("type", o.iter().map(|x| x.kind).collect::<Vec<_>>())?;
    objects.set_item("size", o.iter().map(|x| x.size).collect::<Vec<_>>())?;
    objects.set_item("parent", o.iter().map(|x| x.parent).collect::<Vec<_>>())?;
    objects.set_item("requested_ns", o.iter().map(|x| x.requested_ns).collect::<Vec<_>>())?;
    objects.set_item("done_ns", o.iter().map(|x| x.done_ns).collect::<Vec<_>>())?;
    objects.set_item("visual_weight", o.iter().map(|x| x.visual_weight).collect::<Vec<_>>())?;
    out.set_item("web_objects", objects)?;
    crate::rtc::results(py, r, &out)?;
    crate::liquid::results(py, r, &out)?;
    crate::leotp::results(r, &out)?;
    Ok(out)
}

/// The page loads of web flows, with their times in seconds and whether each finished.
fn web_table(out: &Bound<'_, PyDict>, w: &[leoguard_sim::web::WebLoadRow]) -> PyResult<()> {
    set_table(
        out,
        "web",
        vec![
            ("flow", Column::U32(w.iter().map(|x| x.flow).collect())),
            ("load", Column::U32(w.iter().map(|x| x.load).collect())),
            ("page", Column::U32(w.iter().map(|x| x.page).collect())),
            ("start_ns", Column::U64(w.iter().map(|x| x.start_ns).collect())),
            ("plt_ns", Column::OptU64(w.iter().map(|x| x.plt_ns).collect())),
            ("speed_index_ns", Column::OptU64(w.iter().map(|x| x.speed_index_ns).collect())),
            ("objects", Column::U32(w.iter().map(|x| x.objects).collect())),
            ("objects_done", Column::U32(w.iter().map(|x| x.objects_done).collect())),
            ("bytes", Column::U64(w.iter().map(|x| x.bytes).collect())),
            ("origins", Column::U32(w.iter().map(|x| x.origins).collect())),
            ("connections", Column::U32(w.iter().map(|x| x.connections).collect())),
            ("dns_ns", Column::U64(w.iter().map(|x| x.dns_ns).collect())),
            ("handshake_ns", Column::U64(w.iter().map(|x| x.handshake_ns).collect())),
            ("retransmissions", Column::U64(w.iter().map(|x| x.retransmissions).collect())),
            ("setup_retries", Column::U64(w.iter().map(|x| x.setup_retries).collect())),
            ("plt_s", Column::OptF64(derived::seconds(w.iter().map(|x| x.plt_ns)))),
            ("speed_index_s", Column::OptF64(derived::seconds(w.iter().map(|x| x.speed_index_ns)))),
            ("finished", Column::Bool(w.iter().map(|x| x.plt_ns.is_some()).collect())),
        ],
    )
}

/// Reads one counter of a hop sender (a column of the hops table).
type HopColumn = fn(&HopSenderStats) -> u64;

/// Counters as a dict, named as the fields of the Rust struct.
fn counters_dict<'py>(py: Python<'py>, fields: Vec<(&'static str, u64)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in fields {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Adds the simulator functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_class::<PySimRun>()?;
    m.add("TC_DELAY_SENSITIVE", leoguard_sim::schemes::satguard::TC_DELAY_SENSITIVE)?;
    m.add("MAX_LINK_RATE_BPS", leoguard_net::topo::MAX_LINK_RATE.0)?;
    m.add("MAX_SCHEDULE_STEPS", leoguard_net::topo::MAX_SCHEDULE_STEPS)?;
    // The `[tcp]` section's switches by name (the emulator's leoguard stack passes them on).
    m.add("TCP_SWITCHES", leoguard_proto::tcp::Recovery::NAMES.to_vec())?;
    m.add("CONGESTION_CONTROLS", leoguard_proto::cc::ALGORITHMS.to_vec())?;
    Ok(())
}

/// The `tcp` section: `recovery` ("linux" or "legacy") as the base, then each named switch.
fn tcp_recovery(d: &Bound<'_, PyDict>) -> PyResult<leoguard_proto::tcp::Recovery> {
    use leoguard_proto::tcp::Recovery;
    let Some(t) = get::<Bound<'_, PyDict>>(d, "tcp")? else { return Ok(Recovery::linux()) };
    let mut r = match get::<String>(&t, "recovery")?.as_deref() {
        None | Some("linux") => Recovery::linux(),
        Some("legacy") => Recovery::legacy(),
        Some(other) => {
            return Err(LeoguardError::new_err(format!("invalid tcp.recovery = {other}: use linux or legacy")))
        }
    };
    for name in Recovery::NAMES {
        if let Some(on) = get::<bool>(&t, name)? {
            r.set(name, on);
        }
    }
    Ok(r)
}
