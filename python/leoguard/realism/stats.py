"""Statistics of measured (or modelled) Starlink traces for `leoguard validate starlink` (issue 29):
RTT quantiles, loss, the 15 s reconfiguration cycle (Starlink reassigns satellites at seconds 12, 27, 42
and 57 of each UTC minute) seen as median RTT, loss and throughput per half second of the cycle, loss
bursts; `summarise` gathers them in a JSON-ready dict, `compare` checks a model's summary against a
measurement's with the issue's targets, `to_markdown` and `plot` show the result.

Undefined values (no received probe, an empty bin) are NaN in the array functions and None in
`summarise`'s dict."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from leoguard.access import BOUNDARY_S, PERIOD_S  # the schedule's one definition
from leoguard.errors import LeoguardError
from leoguard.realism.traces import RttTrace, ThroughputTrace

__all__ = [
    "BIN_S",
    "BOUNDARY_S",
    "PERIOD_S",
    "boundary_share",
    "compare",
    "cycle_bin",
    "cycle_position",
    "dip_profile",
    "disturbance",
    "loss_bursts",
    "loss_by_bin",
    "median_rtt_by_bin",
    "per_second_mbps",
    "plot",
    "rtt_percentiles",
    "summarise",
    "to_markdown",
]

BIN_S = 0.5


def cycle_position(t: np.ndarray | float, period_s: float = PERIOD_S, boundary_s: float = BOUNDARY_S) -> np.ndarray:
    """Seconds since the last reconfiguration boundary: `(t - boundary_s) mod period_s`, in [0, period_s)."""
    return np.mod(np.asarray(t, dtype=np.float64) - boundary_s, period_s)


def cycle_bin(
    t: np.ndarray | float, period_s: float = PERIOD_S, boundary_s: float = BOUNDARY_S, bin_s: float = BIN_S
) -> np.ndarray:
    """The bin of the cycle (0 .. period_s/bin_s - 1) a time falls in; bin 0 starts at the boundary."""
    n = _n_bins(period_s, bin_s)
    return np.clip(np.floor(cycle_position(t, period_s, boundary_s) / bin_s).astype(np.int64), 0, n - 1)


def _n_bins(period_s: float, bin_s: float) -> int:
    return max(1, round(period_s / bin_s))


def _binned(values: np.ndarray, bins: np.ndarray, n: int, fn: Any) -> np.ndarray:
    out = np.full(n, np.nan)
    for b in range(n):
        v = values[bins == b]
        if len(v):
            out[b] = fn(v)
    return out


# ---- RTT ------------------------------------------------------------------------------------------


def rtt_percentiles(trace: RttTrace, qs: Any = (0, 50, 90, 99)) -> np.ndarray:
    """Percentiles (0..100, linear interpolation) of the RTT of received probes; NaN if none was received."""
    got = trace.rtt_ms[~np.isnan(trace.rtt_ms)]
    q = np.asarray(qs, dtype=np.float64)
    return np.percentile(got, q) if len(got) else np.full(q.shape, np.nan)


def median_rtt_by_bin(
    trace: RttTrace, period_s: float = PERIOD_S, boundary_s: float = BOUNDARY_S, bin_s: float = BIN_S
) -> np.ndarray:
    """Median RTT (ms) of the received probes sent in each bin of the cycle (NaN where none)."""
    ok = ~np.isnan(trace.rtt_ms)
    bins = cycle_bin(trace.t[ok], period_s, boundary_s, bin_s)
    return _binned(trace.rtt_ms[ok], bins, _n_bins(period_s, bin_s), np.median)


def disturbance(medians: np.ndarray, bin_s: float = BIN_S) -> dict[str, Any]:
    """The boundary disturbance in a per-bin median profile: baseline = median of the bins, the peak bin
    (argmax), size = peak - baseline, length = bin_s x the contiguous bins (wrapping around the cycle)
    around the peak whose median exceeds baseline + size/2. NaN bins never count as exceeding."""
    m = np.asarray(medians, dtype=np.float64)
    if np.isnan(m).all():
        return {"bin": None, "peak_ms": math.nan, "baseline_ms": math.nan, "size_ms": math.nan, "length_s": math.nan}
    base = float(np.nanmedian(m))
    peak = int(np.nanargmax(m))
    size = float(m[peak]) - base
    length = 0
    if size > 0:
        above = np.nan_to_num(m, nan=-math.inf) > base + size / 2
        n = len(m)
        length = 1
        for step in (1, -1):
            k = 1
            while length < n and above[(peak + step * k) % n]:
                length += 1
                k += 1
    return {"bin": peak, "peak_ms": float(m[peak]), "baseline_ms": base, "size_ms": size, "length_s": length * bin_s}


def boundary_share(
    trace: RttTrace,
    thresh_ms: float = 5.0,
    period_s: float = PERIOD_S,
    boundary_s: float = BOUNDARY_S,
    head_s: float = BIN_S,
    min_rest: int = 10,
) -> tuple[float, int]:
    """The share of reconfiguration boundaries that disturb the path, and how many cycles it is over.
    A cycle counts if it has a probe in its first `head_s` and at least `min_rest` received probes in
    the rest; it is disturbed if a head probe was lost or the head's median RTT exceeds the rest's
    median by more than `thresh_ms`. (NaN, 0 without a usable cycle.)"""
    if not len(trace):
        return math.nan, 0
    cyc = np.floor((trace.t - boundary_s) / period_s).astype(np.int64)
    head = cycle_position(trace.t, period_s, boundary_s) < head_s
    # t is non-decreasing, so each cycle is one contiguous run
    starts = np.flatnonzero(np.r_[True, cyc[1:] != cyc[:-1]])
    ends = np.r_[starts[1:], len(cyc)]
    used = disturbed = 0
    for a, b in zip(starts, ends, strict=True):
        h, r = trace.rtt_ms[a:b][head[a:b]], trace.rtt_ms[a:b][~head[a:b]]
        r = r[~np.isnan(r)]
        if len(h) == 0 or len(r) < min_rest:
            continue
        used += 1
        if np.isnan(h).any() or float(np.median(h)) - float(np.median(r)) > thresh_ms:
            disturbed += 1
    return (disturbed / used if used else math.nan), used


def loss_by_bin(
    trace: RttTrace, period_s: float = PERIOD_S, boundary_s: float = BOUNDARY_S, bin_s: float = BIN_S
) -> np.ndarray:
    """The share of probes lost among those sent in each bin of the cycle (NaN where none was sent)."""
    bins = cycle_bin(trace.t, period_s, boundary_s, bin_s)
    return _binned(np.isnan(trace.rtt_ms).astype(np.float64), bins, _n_bins(period_s, bin_s), np.mean)


def loss_bursts(trace: RttTrace) -> list[int]:
    """Counts of runs of consecutive lost probes (in send order) by length: element k = runs of k+1."""
    lost = np.isnan(trace.rtt_ms).astype(np.int8)
    edges = np.diff(np.r_[0, lost, 0])
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return np.bincount(runs)[1:].tolist() if len(runs) else []


def _mean_burst(counts: list[int]) -> float:
    n = sum(counts)
    return sum((k + 1) * c for k, c in enumerate(counts)) / n if n else math.nan


# ---- throughput -----------------------------------------------------------------------------------


def _cumulative(trace: ThroughputTrace, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The running total of `values` spread uniformly over each interval, read at times `at`."""
    x = np.maximum.accumulate(np.column_stack([trace.t_start, trace.t_end]).ravel())
    c = np.cumsum(values)
    y = np.column_stack([c - values, c]).ravel()
    return np.interp(at, x, y)


def per_second_mbps(trace: ThroughputTrace, min_cover: float = 0.99) -> tuple[np.ndarray, np.ndarray]:
    """Throughput per whole UTC second (Mbit/s): the bits of the intervals spread uniformly over each
    interval and summed per second. Seconds less than `min_cover` covered by intervals (the partial
    first and last ones, gaps) are left out. Returns (second start times, Mbit/s)."""
    if not len(trace):
        return np.zeros(0), np.zeros(0)
    secs = np.arange(math.floor(trace.start), math.ceil(trace.end) + 1, dtype=np.float64)
    bits = np.diff(_cumulative(trace, trace.bits, secs))
    cover = np.diff(_cumulative(trace, trace.t_end - trace.t_start, secs))
    keep = cover >= min_cover
    return secs[:-1][keep], bits[keep] / 1e6


def dip_profile(
    trace: ThroughputTrace, period_s: float = PERIOD_S, boundary_s: float = BOUNDARY_S, bin_s: float = BIN_S
) -> np.ndarray:
    """Throughput of the intervals whose midpoint falls in each bin of the cycle (bits over duration),
    divided by the whole trace's: 1 = average, 0.5 = half (NaN where no interval falls)."""
    dur = trace.t_end - trace.t_start
    total = float(dur.sum())
    n = _n_bins(period_s, bin_s)
    if total <= 0 or float(trace.bits.sum()) <= 0:
        return np.full(n, np.nan)
    mean = float(trace.bits.sum()) / total
    bins = cycle_bin((trace.t_start + trace.t_end) / 2, period_s, boundary_s, bin_s)
    out = np.full(n, np.nan)
    for b in range(n):
        sel = bins == b
        d = float(dur[sel].sum())
        if d > 0:
            out[b] = float(trace.bits[sel].sum()) / d / mean
    return out


# ---- summary and comparison -----------------------------------------------------------------------


def _num(x: Any) -> float | None:
    """A JSON-ready float: None for NaN/inf."""
    v = float(x)
    return v if math.isfinite(v) else None


def _nums(a: np.ndarray) -> list[float | None]:
    return [_num(x) for x in np.asarray(a, dtype=np.float64)]


def summarise(
    trace: RttTrace | ThroughputTrace,
    period_s: float = PERIOD_S,
    boundary_s: float = BOUNDARY_S,
    bin_s: float = BIN_S,
    thresh_ms: float = 5.0,
) -> dict[str, Any]:
    """All statistics of a trace as a plain JSON-ready dict (floats, ints, lists; None = undefined), with
    `kind` ("rtt"/"throughput"), `start_utc`, `duration_s` and `n` (probes or intervals)."""
    if not len(trace):
        raise LeoguardError(f"{trace.source}: field 'trace': no samples to summarise")
    common: dict[str, Any] = {
        "source": trace.source,
        "fmt": trace.fmt,
        "start_utc": datetime.fromtimestamp(trace.start, UTC).isoformat(),
        "duration_s": trace.end - trace.start,
        "n": len(trace),
        "period_s": period_s,
        "boundary_s": boundary_s,
        "bin_s": bin_s,
    }
    if isinstance(trace, RttTrace):
        pmin, p50, p90, p99 = rtt_percentiles(trace)
        med = median_rtt_by_bin(trace, period_s, boundary_s, bin_s)
        dist = disturbance(med, bin_s)
        share, cycles = boundary_share(trace, thresh_ms, period_s, boundary_s, bin_s)
        bursts = loss_bursts(trace)
        out = {
            "kind": "rtt",
            **common,
            "n_received": int((~np.isnan(trace.rtt_ms)).sum()),
            "loss_rate": trace.loss_rate,
            "rtt_min_ms": _num(pmin),
            "rtt_p50_ms": _num(p50),
            "rtt_p90_ms": _num(p90),
            "rtt_p99_ms": _num(p99),
            "rtt_quantiles_ms": _nums(rtt_percentiles(trace, np.arange(101))),
            "median_rtt_by_position_ms": _nums(med),
            "disturbance": {
                "bin": dist["bin"],
                "peak_ms": _num(dist["peak_ms"]),
                "baseline_ms": _num(dist["baseline_ms"]),
                "size_ms": _num(dist["size_ms"]),
                "length_s": _num(dist["length_s"]),
            },
            "boundary_share": {"share": _num(share), "cycles": cycles, "thresh_ms": thresh_ms},
            "loss_by_position": _nums(loss_by_bin(trace, period_s, boundary_s, bin_s)),
            "burst_counts": bursts,
            "mean_burst_len": _num(_mean_burst(bursts)),
        }
        for name in ("up_ms", "down_ms"):
            v = getattr(trace, name)
            if v is not None:
                got = v[~np.isnan(v)]
                out[f"{name[:-3]}_p50_ms"] = _num(np.median(got)) if len(got) else None
        return out
    _, mbps = per_second_mbps(trace)
    dur = float((trace.t_end - trace.t_start).sum())
    med = float(np.median(mbps)) if len(mbps) else math.nan
    prof = dip_profile(trace, period_s, boundary_s, bin_s)
    dip_bin = None if np.isnan(prof).all() else int(np.nanargmin(prof))
    return {
        "kind": "throughput",
        **common,
        "direction": trace.direction,
        "mss": trace.mss,
        "n_seconds": len(mbps),
        "mean_mbps": _num(float(trace.bits.sum()) / dur / 1e6 if dur > 0 else math.nan),
        "median_mbps": _num(med),
        "p10_mbps": _num(np.percentile(mbps, 10) if len(mbps) else math.nan),
        "p90_mbps": _num(np.percentile(mbps, 90) if len(mbps) else math.nan),
        "share_below_half_median": _num(np.mean(mbps < med / 2) if len(mbps) else math.nan),
        "mbps_quantiles": _nums(np.percentile(mbps, np.arange(101)) if len(mbps) else np.full(101, np.nan)),
        "dip": {"profile": _nums(prof), "min": None if dip_bin is None else _num(prof[dip_bin]), "bin": dip_bin},
        "retransmits": None if trace.retransmits is None else int(np.nansum(trace.retransmits)),
    }


# (metric label, summary key, kind of check, target value, target text); target None = informational
_RTT_ROWS: list[tuple[str, str, str, float | None, str]] = [
    ("RTT p50 (ms)", "rtt_p50_ms", "rel", 0.10, "within 10 %"),
    ("RTT p99 (ms)", "rtt_p99_ms", "rel", 0.20, "within 20 %"),
    ("disturbance bin", "disturbance.bin", "bin", 0, "same half second"),
    ("disturbance size (ms)", "disturbance.size_ms", "rel", 0.30, "within 30 %"),
    ("loss rate", "loss_rate", "rel", 0.30, "within 30 %"),
    ("loss per position (Pearson r)", "loss_by_position", "corr", 0.8, "r >= 0.8"),
    ("RTT min (ms)", "rtt_min_ms", "rel", None, ""),
    ("RTT p90 (ms)", "rtt_p90_ms", "rel", None, ""),
    ("disturbance length (s)", "disturbance.length_s", "rel", None, ""),
    ("boundary share (points)", "boundary_share.share", "abs", None, ""),
    ("mean burst length (probes)", "mean_burst_len", "rel", None, ""),
]
_TPUT_ROWS: list[tuple[str, str, str, float | None, str]] = [
    ("throughput median (Mbit/s)", "median_mbps", "rel", 0.20, "within 20 %"),
    ("seconds below half the median (points)", "share_below_half_median", "abs", 10.0, "within 10 points"),
    ("throughput mean (Mbit/s)", "mean_mbps", "rel", None, ""),
    ("throughput p10 (Mbit/s)", "p10_mbps", "rel", None, ""),
    ("throughput p90 (Mbit/s)", "p90_mbps", "rel", None, ""),
    ("dip minimum (x mean)", "dip.min", "rel", None, ""),
    ("dip bin", "dip.bin", "bin", None, ""),
]


def _lookup(d: dict[str, Any], dotted: str) -> Any:
    """`d["a"]["b"]` for "a.b"; None where any part is missing."""
    v: Any = d
    for k in dotted.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v


def _pearson(a: Any, b: Any) -> float | None:
    """Pearson r over the bins both profiles have; None where undefined (< 3 bins, a constant profile)."""
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return None
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    x, y = np.array(pairs, dtype=np.float64).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _error(check: str, meas: Any, mod: Any, n_bins: int) -> float | int | str:
    """The error of one metric: relative (|mod - meas| / |meas|), absolute in points (x100), or the
    circular distance in bins; "undefined" where a value is missing or the measured one is 0."""
    if check == "corr":
        r = _pearson(meas, mod)
        return "undefined" if r is None else r
    if meas is None or mod is None:
        return "undefined"
    if check == "bin":
        d = abs(int(mod) - int(meas)) % n_bins
        return min(d, n_bins - d)
    if check == "abs":
        return abs(float(mod) - float(meas)) * 100.0
    if float(meas) == 0.0:
        return 0.0 if float(mod) == 0.0 else "undefined"
    return abs(float(mod) - float(meas)) / abs(float(meas))


def compare(measured: dict[str, Any], modelled: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows `{metric, measured, modelled, error, target, met}` comparing two `summarise` dicts of the
    same kind. `met` is True/False against the issue's target (False where the error is "undefined")
    and None for informational rows. Relative errors are fractions (0.1 = 10 %), shares are compared
    in points, bins by circular distance, the loss profile by Pearson r (its row's `error`)."""
    kind = measured.get("kind")
    if kind != modelled.get("kind"):
        raise LeoguardError(f"field 'kind': cannot compare a {kind!r} summary with a {modelled.get('kind')!r} one")
    if kind not in ("rtt", "throughput"):
        raise LeoguardError(f"field 'kind': {kind!r} is not a summary kind (rtt, throughput)")
    n_bins = _n_bins(float(measured.get("period_s", PERIOD_S)), float(measured.get("bin_s", BIN_S)))
    rows = []
    for label, key, check, target, text in _RTT_ROWS if kind == "rtt" else _TPUT_ROWS:
        meas, mod = _lookup(measured, key), _lookup(modelled, key)
        err = _error(check, meas, mod, n_bins)
        met: bool | None
        if target is None:
            met = None
        elif isinstance(err, str):
            met = False
        elif check == "corr":
            met = err >= target
        else:
            met = err <= target
        if check == "abs" and meas is not None and mod is not None:
            meas, mod = float(meas) * 100.0, float(mod) * 100.0
        rows.append({"metric": label, "measured": meas, "modelled": mod, "error": err, "target": text, "met": met})
    return rows


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, list):
        return f"{len(v)} bins"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """The rows of `compare` as a Markdown table."""
    cols = ["metric", "measured", "modelled", "error", "target", "met"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        met = "" if r.get("met") is None else _cell(r["met"])
        cells = [_cell(r.get(c)) for c in cols[:-1]] + [met]
        if r.get("seeds", 1) > 1 and r.get("modelled_min") is not None:
            # Several seeds: the median, then the seeds' range.
            cells[2] += f" ({_cell(r['modelled_min'])}-{_cell(r['modelled_max'])})"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


# ---- figure ---------------------------------------------------------------------------------------


def _series(ax: Axes, x: np.ndarray, key: str, measured: dict[str, Any], modelled: dict[str, Any] | None) -> None:
    for d, label, style in ((measured, "measured", "-"), (modelled, "modelled", "--")):
        vals = None if d is None else _lookup(d, key)
        if vals is not None:
            y = np.array([math.nan if v is None else v for v in vals], dtype=np.float64)
            ax.plot(x[: len(y)], y, style, lw=1.4, marker="." if len(y) <= 30 else None, label=label)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def plot(measured: dict[str, Any], modelled: dict[str, Any] | None = None) -> Figure:
    """Measured vs modelled (if given) from `summarise` dicts: for RTT, the RTT quantiles, median RTT and
    loss per half second of the cycle and the loss-burst lengths; for throughput, the per-second
    throughput quantiles and the dip profile. Built without pyplot, so it needs no GUI backend."""
    kind = measured.get("kind")
    if modelled is not None and modelled.get("kind") != kind:
        raise LeoguardError(f"field 'kind': cannot plot a {kind!r} summary with a {modelled.get('kind')!r} one")
    pct = np.arange(101, dtype=np.float64)
    bin_s = float(measured.get("bin_s", BIN_S))
    bins_x = np.arange(_n_bins(float(measured.get("period_s", PERIOD_S)), bin_s)) * bin_s
    if kind == "rtt":
        fig = Figure(figsize=(11, 8))
        (a1, a2), (a3, a4) = fig.subplots(2, 2)
        _series(a1, pct, "rtt_quantiles_ms", measured, modelled)
        a1.set(xlabel="percentile", ylabel="RTT (ms)", title="RTT quantiles")
        _series(a2, bins_x, "median_rtt_by_position_ms", measured, modelled)
        a2.set(xlabel="time since reconfiguration (s)", ylabel="median RTT (ms)", title="median RTT per half second")
        _series(a3, bins_x, "loss_by_position", measured, modelled)
        a3.set(xlabel="time since reconfiguration (s)", ylabel="loss rate", title="loss per half second")
        for off, (d, label) in enumerate(((measured, "measured"), (modelled, "modelled"))):
            if d is not None and d.get("burst_counts"):
                c = np.array(d["burst_counts"], dtype=np.float64)
                a4.bar(np.arange(1, len(c) + 1) + (off - 0.5) * 0.4, c / c.sum(), width=0.4, label=label)
        longest = max(len((d or {}).get("burst_counts") or []) for d in (measured, modelled))
        a4.set_xticks(range(1, longest + 1))
        a4.set(xlabel="burst length (lost probes in a row)", ylabel="share of bursts", title="loss bursts")
        a4.grid(alpha=0.3)
        if a4.get_legend_handles_labels()[0]:
            a4.legend(fontsize=8)
    elif kind == "throughput":
        fig = Figure(figsize=(11, 4.5))
        a1, a2 = fig.subplots(1, 2)
        _series(a1, pct, "mbps_quantiles", measured, modelled)
        a1.set(xlabel="percentile", ylabel="throughput per second (Mbit/s)", title="throughput quantiles")
        _series(a2, bins_x, "dip.profile", measured, modelled)
        a2.axhline(1.0, color="grey", lw=0.8)
        a2.set(xlabel="time since reconfiguration (s)", ylabel="throughput / mean", title="dip profile")
    else:
        raise LeoguardError(f"field 'kind': {kind!r} is not a summary kind (rtt, throughput)")
    fig.suptitle(f"{measured.get('source', '')} ({kind}, from {measured.get('start_utc', '?')})", fontsize=9)
    fig.tight_layout()
    return fig
