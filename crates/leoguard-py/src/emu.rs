//! Bindings of the real-time emulator's data plane: the scenario dict is converted and validated by
//! the simulator's own code (so both engines reject the same inputs with the same field-named
//! errors), and its topology is built into the emulator by leoguard-net.

use crate::sim::scenario;
use crate::LeoguardError;
use leoguard_emu::leotp::LeotpHost;
use leoguard_emu::{DataPlane, EmuConfig, EmuNet};
use leoguard_net::schemes::wire::WireScheme;
use leoguard_net::schemes::{build_hooks, hooked_nodes, HopScheme, NodeHooks};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The emulated network of a scenario, with its per-hop scheme's hooks (the simulator's own, built by
/// leoguard-net for the same nodes) and the options their fields travel in.
struct Built {
    /// Per flow: (src, dst) nodes.
    ends: Vec<(u32, u32)>,
    net: EmuNet,
    duration: leoguard_core::Duration,
    hooks: NodeHooks,
    wire: WireScheme,
    leotp: LeotpHost,
}

/// Builds the emulated network; `leotp_ends` are the (producer, consumer) nodes of the LEOTP flows the
/// data plane intercepts (a scenario's LEOTP mid nodes run where the simulator would put them).
fn build(spec: &Bound<'_, PyDict>, leotp_ends: &[u32]) -> PyResult<Built> {
    let s = scenario(spec)?;
    s.validate().map_err(|e| LeoguardError::new_err(e.to_string()))?;
    let mut net = EmuNet::new(s.nodes as usize, s.seed);
    let ends: Vec<u32> = s.flows.iter().flat_map(|f| [f.src, f.dst]).collect();
    let built = s.topology().build(&mut net, &ends, &[]).map_err(|e| LeoguardError::new_err(e.to_string()))?;
    let (scheme, wire) = match (&s.satguard, &s.linkguardian) {
        (Some(o), _) => (Some(HopScheme::Satguard(*o)), WireScheme::Satguard),
        (None, Some(o)) => (Some(HopScheme::LinkGuardian(*o)), WireScheme::LinkGuardian),
        (None, None) => (None, WireScheme::None),
    };
    let hooks = match scheme {
        Some(sc) => {
            let hooked = hooked_nodes(s.nodes, s.constellation.as_ref());
            build_hooks(sc, &net.links, net.nodes, built.info.as_ref(), &hooked)
                .map_err(|(f, e)| LeoguardError::new_err(format!("invalid {f}: {e}")))?
        }
        None => Vec::new(),
    };
    let leotp = if leotp_ends.is_empty() {
        LeotpHost::none()
    } else {
        let err = |e: &dyn std::fmt::Display| LeoguardError::new_err(e.to_string());
        leoguard_sim::scenario::refuse_other_schemes(&s).map_err(|e| err(&e))?;
        let mids = leoguard_sim::scenario::placed_mid_nodes(&s, leotp_ends).map_err(|e| err(&e))?;
        LeotpHost::new(s.leotp.cfg, &mids, net.nodes).map_err(|e| err(&e))?
    };
    let ends = s.flows.iter().map(|f| (f.src, f.dst)).collect();
    Ok(Built { ends, net, duration: s.duration, hooks, wire, leotp })
}

/// A path's links as (from, to, rate_bps, delay_ns); a scheduled link's rate is its peak.
type PathLinks = Vec<(u32, u32, u64, u64)>;

/// Validates a resolved scenario dict for the emulator and returns, per flow, the links of its path
/// at t = 0 as (from, to, rate_bps, delay_ns) (the orchestrator checks real-time feasibility with it;
/// a link with a rate schedule gives its peak rate).
#[pyfunction]
fn emu_check(spec: &Bound<'_, PyDict>) -> PyResult<Vec<Option<PathLinks>>> {
    let Built { ends, net, .. } = build(spec, &[])?;
    Ok(ends
        .iter()
        .map(|&(src, dst)| {
            net.path(src, dst).map(|p| {
                p.iter()
                    .map(|l| {
                        let l = &net.links[l.0 as usize];
                        (l.from.0, l.to.0, l.peak_rate().0, l.delay.as_nanos())
                    })
                    .collect()
            })
        })
        .collect())
}

/// Runs the data plane of a resolved scenario dict with the emulator configuration `cfg_json`,
/// speaking the protocol of leoguard-emu's report module on this process's stdin and stdout; returns
/// the results as JSON text. The GIL is released while it runs. SIGTERM/SIGINT end the run early
/// with the results so far.
#[pyfunction]
fn emu_dataplane(py: Python<'_>, spec: &Bound<'_, PyDict>, cfg_json: &str) -> PyResult<String> {
    let cfg: EmuConfig =
        serde_json::from_str(cfg_json).map_err(|e| LeoguardError::new_err(format!("invalid emulator config: {e}")))?;
    let mut ends: Vec<u32> = cfg.flows.iter().filter(|f| f.leotp).flat_map(|f| [f.src, f.dst]).collect();
    ends.sort_unstable();
    ends.dedup();
    let b = build(spec, &ends)?;
    let duration = b.duration;
    let dp =
        DataPlane::open(b.net, cfg, b.hooks, b.wire, b.leotp).map_err(|e| LeoguardError::new_err(e.to_string()))?;
    leoguard_os::install_signal_handlers().map_err(|e| LeoguardError::new_err(format!("signal handlers: {e}")))?;
    py.allow_threads(|| {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut output = std::io::stdout();
        leoguard_emu::serve::serve(dp, duration, &mut input, &mut output, &leoguard_os::TERM)
    })
    .map(|v| v.to_string())
    .map_err(LeoguardError::new_err)
}

/// Bytes a per-hop scheme's Hop-by-Hop header adds to a protected data packet (`satguard`,
/// `linkguardian`; anything else: 0): what the emulator takes off the hosts' MTU.
#[pyfunction]
fn scheme_header_bytes(scheme: &str) -> u32 {
    leoguard_net::schemes::wire::data_header_bytes(match scheme {
        "satguard" => WireScheme::Satguard,
        "linkguardian" => WireScheme::LinkGuardian,
        _ => WireScheme::None,
    })
}

/// Adds the emulator functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(emu_check, m)?)?;
    m.add_function(wrap_pyfunction!(emu_dataplane, m)?)?;
    m.add_function(wrap_pyfunction!(scheme_header_bytes, m)?)?;
    Ok(())
}
