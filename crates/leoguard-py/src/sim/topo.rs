//! Topology bindings of the simulator's scenario dict: the leo-path (its steps, interruptions and
//! per-step access rates) and the whole constellation (its ground nodes, hosts, passes and terminals'
//! access links). Both engines build their networks from these.

use super::{loss, secs};
use crate::{get, ground, need, options, LeoguardError, Node, PyConstellation};
use leoguard_core::{Bps, Instant};
use leoguard_net::topo::access::GroundAccess;
use leoguard_sim::constellation::{ConstellationTopo, GslPass, HostSpec};
use leoguard_sim::engine::QueueLimit;
use leoguard_sim::leo::{LeoInterruption, LeoPath, LeoStep};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;

/// The leo path's optional `gsl_rates_a_bps`: one entry per step, each `None` (rates unchanged) or
/// `[up_bps, down_bps]` for end A's ground link from that step on.
fn gsl_rates_a(d: &Bound<'_, PyDict>, steps: usize) -> PyResult<Vec<Option<(Bps, Bps)>>> {
    let Some(list) = get::<Bound<'_, PyList>>(d, "gsl_rates_a_bps")? else {
        return Ok(vec![None; steps]);
    };
    if list.len() != steps {
        return Err(LeoguardError::new_err(format!(
            "invalid leo.gsl_rates_a_bps: {} entries, must have one per step ({steps})",
            list.len()
        )));
    }
    let max = leoguard_net::topo::MAX_LINK_RATE.0;
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            if v.is_none() {
                return Ok(None);
            }
            let bad = || {
                LeoguardError::new_err(format!(
                    "invalid leo.gsl_rates_a_bps[{i}] = {v}: must be null or [up_bps, down_bps], each in (0, 10 Tbit/s]"
                ))
            };
            let pair: Vec<u64> = v.extract().map_err(|_| bad())?;
            match pair[..] {
                [up, down] if (1..=max).contains(&up) && (1..=max).contains(&down) => Ok(Some((Bps(up), Bps(down)))),
                _ => Err(bad()),
            }
        })
        .collect()
}

pub(super) fn leo_path(d: &Bound<'_, PyDict>) -> PyResult<LeoPath> {
    let t: Vec<f64> = need(d, "t_s")?;
    let sats: Vec<Vec<u32>> = need(d, "sats")?;
    let delays: Vec<Vec<f64>> = need(d, "hop_delays_ms")?;
    if t.len() != sats.len() || t.len() != delays.len() {
        return Err(LeoguardError::new_err("leo: t_s, sats and hop_delays_ms must have one entry per step"));
    }
    let gsl_rates = gsl_rates_a(d, t.len())?;
    let mut steps = Vec::with_capacity(t.len());
    for (((t, sats), delays), gsl_rate_a) in t.into_iter().zip(sats).zip(delays).zip(gsl_rates) {
        let hop_delays = delays.into_iter().map(|ms| secs("leo.hop_delays_ms", ms / 1e3)).collect::<PyResult<_>>()?;
        steps.push(LeoStep { t: Instant(secs("leo.t_s", t)?.as_nanos()), sats, hop_delays, gsl_rate_a });
    }
    let raw: Vec<(f64, u8, f64)> = get(d, "interruptions")?.unwrap_or_default();
    let interruptions = raw
        .into_iter()
        .map(|(t, end, dur)| {
            Ok(LeoInterruption {
                t: Instant(secs("leo.interruptions", t)?.as_nanos()),
                end,
                duration: secs("leo.interruptions", dur)?,
            })
        })
        .collect::<PyResult<_>>()?;
    let queue = match get::<u64>(d, "queue_bytes")? {
        Some(b) => QueueLimit::Bytes(b),
        None => QueueLimit::Bytes(1_000_000),
    };
    Ok(LeoPath {
        steps,
        interruptions,
        rate: Bps(need(d, "rate_bps")?),
        queue,
        gsl_loss: loss(get(d, "gsl_loss")?, "leo.gsl_loss")?,
        isl_loss: loss(get(d, "isl_loss")?, "leo.isl_loss")?,
    })
}

/// Measured access links of ground terminals (issue 29): `access` = [{"ground": i, "extra_ms": [...]
/// (one-way, per routing step), "rates_bps": [[up, down], ...] (per second) or null}, ...].
fn ground_access(d: &Bound<'_, PyDict>) -> PyResult<Vec<Option<GroundAccess>>> {
    let mut out: Vec<Option<GroundAccess>> = Vec::new();
    for (i, item) in get::<Bound<'_, PyList>>(d, "access")?.into_iter().flatten().enumerate() {
        let e: Bound<'_, PyDict> = item
            .downcast_into()
            .map_err(|_| LeoguardError::new_err(format!("topology.access[{i}] must be a table")))?;
        let g: usize = need(&e, "ground")?;
        let extra_ms: Vec<f64> = get(&e, "extra_ms")?.unwrap_or_default();
        let extra = extra_ms
            .into_iter()
            .map(|ms| secs(&format!("topology.access[{i}].extra_ms"), ms / 1e3))
            .collect::<PyResult<Vec<_>>>()?;
        let rates: Vec<Vec<u64>> = get(&e, "rates_bps")?.unwrap_or_default();
        let rates = rates
            .into_iter()
            .enumerate()
            .map(|(s, r)| match r[..] {
                [u, d] => Ok((u, d)),
                _ => Err(LeoguardError::new_err(format!("topology.access[{i}].rates_bps[{s}] must be [up, down]"))),
            })
            .collect::<PyResult<Vec<_>>>()?;
        if out.len() <= g {
            out.resize(g + 1, None);
        }
        out[g] = Some(GroundAccess { extra, rates: rates.into_iter().map(|(u, d)| (Bps(u), Bps(d))).collect() });
    }
    Ok(out)
}

pub(super) fn constellation(d: &Bound<'_, PyDict>, duration_s: f64) -> PyResult<ConstellationTopo> {
    let obj = d.get_item("object")?.ok_or_else(|| LeoguardError::new_err("missing field constellation.object"))?;
    let c: PyRef<'_, PyConstellation> = obj
        .extract()
        .map_err(|_| LeoguardError::new_err("constellation.object must be a leoguard._core.Constellation"))?;
    let grounds: Vec<Node> = need(d, "grounds")?;
    let grounds = grounds.iter().map(ground).collect::<PyResult<Vec<_>>>()?;
    let mut hosts = Vec::new();
    for (i, h) in get::<Bound<'_, PyList>>(d, "hosts")?
        .map(|l| l.iter().collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let h = h.downcast::<PyDict>().map_err(|_| LeoguardError::new_err(format!("hosts[{i}] must be a table")))?;
        hosts.push(HostSpec {
            name: need(h, "name")?,
            ground: need(h, "ground")?,
            rate: Bps(need(h, "rate_bps")?),
            delay: secs(&format!("hosts[{i}].delay_ms"), need::<f64>(h, "delay_ms")? / 1e3)?,
        });
    }
    let o = options(
        &c.inner,
        duration_s,
        need(d, "step_s")?,
        need(d, "min_elevation_deg")?,
        &need::<String>(d, "policy")?,
        get(d, "period_s")?,
        get(d, "phase_s")?,
        &get::<String>(d, "criterion")?.unwrap_or_else(|| "highest-elevation".into()),
        need(d, "interruption")?,
        need(d, "seed")?,
    )?;
    let queue = match get::<u64>(d, "queue_bytes")? {
        Some(b) => QueueLimit::Bytes(b),
        None => QueueLimit::Bytes(1_000_000),
    };
    Ok(ConstellationTopo {
        constellation: Arc::new(c.inner.clone()),
        grounds,
        hosts,
        options: o,
        gsl_rate: Bps(need(d, "gsl_rate_bps")?),
        gsl_down_rate: get::<u64>(d, "gsl_downlink_rate_bps")?.map(Bps),
        gsl_pass: match get::<Bound<'_, PyDict>>(d, "gsl_pass")? {
            None => None,
            Some(p) => Some(GslPass {
                edge_fraction: need(&p, "edge_fraction")?,
                alternate: Bps(need(&p, "alternate_bps")?),
                step: secs("topology.gsl_pass.step_s", need(&p, "step_s")?)?,
            }),
        },
        isl_rate: Bps(need(d, "isl_rate_bps")?),
        queue,
        gsl_loss: loss(get(d, "gsl_loss")?, "topology.gsl_loss")?,
        isl_loss: loss(get(d, "isl_loss")?, "topology.isl_loss")?,
        access: ground_access(d)?,
    })
}
