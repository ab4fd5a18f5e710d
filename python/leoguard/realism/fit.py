"""Fitting an access profile (leoguard.access) on a measurement, by mechanism: what the measured path
adds beyond the constellation engine's propagation. Every number comes from the trace given (its first
half, in `leoguard validate starlink`), so the second half tests the fit.

* Access latency: the measured round trips minus the modelled propagation round trip at the same
  instant, away from the boundary disturbance, as 101 quantiles (an empirical inverse CDF).
* Boundary disturbance: the peak of the median round trip by position in the 15 s cycle (its size
  above the baseline and its length), and the share of boundaries that show it.
* Loss: the loss rate by half second of the cycle. ICMP sees a round trip, not a direction: the
  round-trip rate is split evenly over the four ground-link traversals of a ping (dish up, gateway
  down, gateway up, dish down), `1 - (1 - p) ** (1 / 4)` each.
* Capacity: per second, the best 0.1 s interval of the iperf3 run (what the dish delivered when the
  flow was not the limit), as 101 quantiles, per direction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leoguard.access import PERIOD_S, boundary_phase_s
from leoguard.errors import LeoguardError
from leoguard.realism import stats
from leoguard.realism.traces import RttTrace, ThroughputTrace

LEVELS = 101
"""Quantile levels of the fitted inverse CDFs (0, 0.01, ..., 1)."""


def propagation_rtt_ms(dish: str, pop: str, t0_unix: float, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The modelled path's propagation round trip (run seconds, ms) over a window, as `model.path_topology`
    builds it (Starlink shell 1, global schedule, path-aware slots, 0.1 s steps)."""
    from leoguard.orbit import Constellation
    from leoguard.realism.model import _iso

    c = Constellation.preset("starlink-shell1", epoch=_iso(t0_unix))
    tl = c.path_timeline(
        dish, pop, duration=duration_s, step=0.1, policy="global-schedule", min_elevation=25.0,
        slot_criterion="path-aware", interruption="none", seed=1,
    )  # fmt: skip
    s = tl.steps
    return s["t_s"].to_numpy(), s["rtt_ms"].to_numpy()


def _quantiles(x: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in np.quantile(x, np.linspace(0.0, 1.0, LEVELS))]


def fit_rtt(tr: RttTrace, dish: str, pop: str) -> dict[str, Any]:
    """Access latency, boundary disturbance and loss fitted on an RTT trace."""
    s = stats.summarise(tr)
    dist, share = s["disturbance"], s["boundary_share"]["share"]
    if dist["bin"] is None or share is None:
        raise LeoguardError(
            f"{tr.source}: too few received probes to fit an access profile (no boundary disturbance can be read)"
        )
    t_rel = tr.t - tr.start
    pt, prtt = propagation_rtt_ms(dish, pop, tr.start, float(tr.end - tr.start) + 1.0)
    prop = np.interp(t_rel, pt, prtt)
    length = float(s["disturbance"]["length_s"])
    pos = stats.cycle_position(tr.t)
    peak_start = 0.5 * int(s["disturbance"]["bin"])
    in_disturbance = ((pos - peak_start) % PERIOD_S) < length
    ok = ~np.isnan(tr.rtt_ms) & ~in_disturbance
    extra = np.clip(tr.rtt_ms[ok] - prop[ok], 0.0, None)
    loss_rtt = np.asarray(s["loss_by_position"], dtype=float)
    per_traversal = 1.0 - (1.0 - np.clip(loss_rtt, 0.0, 1.0)) ** 0.25
    # The disturbance as the fitted model applies it: a reconfiguration at every boundary, whether or not
    # the satellite changes, adding the measured median rise for its measured length. The share of
    # boundaries that visibly disturb the path is then an outcome to compare, not an input: with the
    # access jitter, some bumped boundaries do not stand out and some others do.
    return {
        "access": {
            "extra_rtt_ms_quantiles": _quantiles(extra),
            "boundary_extra_ms": round(max(float(dist["size_ms"]), 0.0), 3),
            "boundary_length_s": max(length, 0.5),
            "boundary_share": 1.0,
        },
        "gsl_loss": {
            "model": "cycle_profile",
            "probs": [round(float(p), 6) for p in per_traversal],
            "period_s": PERIOD_S,
        },
        "propagation_rtt_ms_median": round(float(np.median(prop)), 3),
        "boundary_phase_s": boundary_phase_s(tr.start),
    }


def fit_capacity(tr: ThroughputTrace) -> list[float]:
    """Per-second capacity quantiles (Mbit/s). A receiver-side log (iperf3 -R, the downlink: bytes that
    arrived) gives each second's best 0.1 s interval, what the dish delivered when the flow was not the
    limit. A sender-side log (the uplink: bytes written into the socket, which its buffer smooths and
    bunches) says nothing at 0.1 s, so each second's mean is taken: a lower bound of the capacity."""
    dur = tr.t_end - tr.t_start
    ok = dur > 0
    mbps = tr.bits[ok] / dur[ok] / 1e6
    sec = np.floor(tr.t_start[ok]).astype(np.int64)
    if tr.direction == "downlink":
        best: dict[int, float] = {}
        for s_, v in zip(sec, mbps, strict=True):
            best[int(s_)] = max(best.get(int(s_), 0.0), float(v))
        vals = np.asarray([v for v in best.values() if v > 0])
    else:
        _, vals = stats.per_second_mbps(tr)
        vals = np.asarray(vals)
        vals = vals[vals > 0]
    return _quantiles(vals) if len(vals) else []


SLOT_CANDIDATES_S: tuple[float | None, ...] = (None, 0.01, 0.02, 0.05, 0.1, 0.2)
"""Outage lengths tried for the loss process (None: each packet on its own)."""


def fit_slot(
    p: dict[str, Any], dish: str, pop: str, throughput: list[ThroughputTrace]
) -> tuple[float | None, list[dict[str, Any]]]:
    """The loss process's outage length, fitted on bulk transfers: ICMP probes 0.15 s apart see the
    same loss rate whether loss strikes packets one by one or whole slots of time (their bursts bound a
    slot only to under ~0.15 s), but CUBIC does not. Each candidate of `SLOT_CANDIDATES_S` runs the
    traces' CUBIC transfers in the simulator with the rest of the profile `p`; the one whose per-second
    median throughput is closest (mean |log ratio| over the traces) is kept. Returns it and every
    candidate's medians."""
    from leoguard.access import Access
    from leoguard.realism.model import model_throughput

    a = Access.model_validate(p["access"])
    tried = []
    for slot in SLOT_CANDIDATES_S:
        loss = {**p["gsl_loss"], **({"slot_s": slot} if slot is not None else {})}
        meds, err = [], 0.0
        for tr in throughput:
            meas = stats.summarise(tr)["median_mbps"]
            mod = stats.summarise(model_throughput(tr, dish, pop, 1, a, "sim", gsl_loss=loss))["median_mbps"]
            meds.append(mod)
            err += abs(np.log(max(mod or 1e-6, 1e-6) / max(meas or 1e-6, 1e-6)))
        tried.append({"slot_s": slot, "model_median_mbps": meds, "mean_abs_log_ratio": err / max(len(throughput), 1)})
    best = min(tried, key=lambda r: r["mean_abs_log_ratio"])
    return best["slot_s"], tried


def fit_profile(
    rtt: RttTrace, dish: str, pop: str, down: ThroughputTrace | None = None, up: ThroughputTrace | None = None
) -> dict[str, Any]:
    """A whole profile: `fit_rtt`, the capacity of each direction given and, with a bulk transfer, the
    loss process's outage length (`fit_slot`; without one, loss strikes packets one by one)."""
    p = fit_rtt(rtt, dish, pop)
    if down is not None:
        p["access"]["down_mbps_quantiles"] = fit_capacity(down)
    if up is not None:
        p["access"]["up_mbps_quantiles"] = fit_capacity(up)
    bulk = [t for t in (down, up) if t is not None]
    if bulk:
        slot, tried = fit_slot(p, dish, pop, bulk)
        if slot is not None:
            p["gsl_loss"]["slot_s"] = slot
        p["slot_fit"] = tried
    return p
