"""`leoguard validate starlink`: real Starlink measurements beside leoguard's model of the same path.

For every trace: split it at its midpoint in time; fit the access profile on the first halves of all
traces given (or take a stored profile, or none); rebuild the measured path over the second half's
own UTC window in the chosen engines; read the measurement and the model with the same statistics
(`leoguard.realism.stats`) and compare them against the issue's targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard.access import Access, load_profile
from leoguard.errors import LeoguardError
from leoguard.realism import fit as fitting
from leoguard.realism import model, stats
from leoguard.realism.traces import RttTrace, ThroughputTrace, read_trace

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "starlink-mmsys24"
DEFAULT_FILES = [
    SHARED / "ping-seattle-noisl-2023-09-11.txt",
    SHARED / "iperf3-downlink-seattle-noisl-2023-09-21.json",
    SHARED / "iperf3-uplink-seattle-noisl-2023-09-21.json",
]


@dataclass
class TraceResult:
    """One trace's comparison: the measured second half, each engine's model of it, the rows."""

    path: str
    kind: str
    measured: dict[str, Any]
    modelled: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    measured_windows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The measurement over another run's window (the emulator's, the fit half), by run label."""


def profile_for(
    traces: list[RttTrace | ThroughputTrace], how: str, dish: str, pop: str
) -> tuple[Access | None, dict[str, Any] | None]:
    """The access to model with: `fit` (first halves of `traces`), a stored profile's name, or `none`.
    Returns the Access and its record (the fit, or the stored profile)."""
    if how == "none":
        return None, None
    if how != "fit":
        p = load_profile(how)
        return Access(profile=how), p
    rtts = [t for t in traces if isinstance(t, RttTrace)]
    if not rtts:
        raise LeoguardError("--profile fit needs an RTT trace (ping or irtt) among the files: name a stored profile")
    downs = [t for t in traces if isinstance(t, ThroughputTrace) and t.direction == "downlink"]
    ups = [t for t in traces if isinstance(t, ThroughputTrace) and t.direction == "uplink"]
    p = fitting.fit_profile(
        rtts[0].halves()[0], dish, pop, downs[0].halves()[0] if downs else None, ups[0].halves()[0] if ups else None
    )
    a = Access.model_validate(p["access"])
    return a, p


def shifted(tr: RttTrace | ThroughputTrace, start_unix: float | None) -> RttTrace | ThroughputTrace:
    """`tr` moved in time so that it starts at `start_unix` (UTC; None: as logged): for a trace whose
    clock was not UTC, since the 15 s schedule's phase comes from the UTC clock."""
    import dataclasses

    if start_unix is None:
        return tr
    d = start_unix - tr.start
    if isinstance(tr, RttTrace):
        return dataclasses.replace(tr, t=tr.t + d)
    return dataclasses.replace(tr, t_start=tr.t_start + d, t_end=tr.t_end + d)


def merge(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary from several seeds' summaries: the median of every number, element by element for
    lists, field by field for nested dicts (the disturbance's bin: the most common one)."""
    import statistics

    first = summaries[0]
    out: dict[str, Any] = {}
    for k, v in first.items():
        vals = [s.get(k) for s in summaries]
        if isinstance(v, dict):
            out[k] = merge([x for x in vals if isinstance(x, dict)])
        elif k == "bin":
            known = [x for x in vals if x is not None]
            out[k] = statistics.mode(known) if known else None
        elif isinstance(v, bool) or not isinstance(v, int | float | list):
            out[k] = v
        elif isinstance(v, list):
            rows = [x for x in vals if isinstance(x, list) and len(x) == len(v)]
            out[k] = [_median([r[i] for r in rows]) for i in range(len(v))]
        else:
            out[k] = _median(vals)
    return out


def _median(v: list[Any]) -> Any:
    import statistics

    nums = [x for x in v if isinstance(x, int | float) and not isinstance(x, bool)]
    return statistics.median(nums) if nums else None


def run(
    files: list[Path],
    engines: list[str],
    profile: str = "fit",
    dish: str = model.DISH,
    pop: str = model.POP,
    seeds: int = 1,
    emu_window_s: float = 120.0,
    progress: Callable[[str], None] | None = None,
    fit_half: bool = False,
    start_unix: float | None = None,
) -> tuple[list[TraceResult], dict[str, Any] | None]:
    """Reads, fits, models and compares; a failed model run is a named hole, not the end. `fit_half`:
    the simulator also models the first half (the one a `fit` profile was fitted on), as `sim-fit-half`.
    With `seeds` > 1 the model runs seeds 1..N (the measurement is one run): each metric's model value is
    the median over seeds, and each row carries the seeds' range (`modelled_min`, `modelled_max`)."""
    traces = [shifted(read_trace(f), start_unix) for f in files]
    access, record = profile_for(traces, profile, dish, pop)
    fitted_loss = record.get("gsl_loss") if record is not None and profile == "fit" else None
    out = []
    for f, tr in zip(files, traces, strict=True):
        first, second = tr.halves()
        res = TraceResult(str(f), "rtt" if isinstance(tr, RttTrace) else "throughput", stats.summarise(second))
        runs = [
            (e, second if e == "sim" else second.window(second.start, second.start + emu_window_s)) for e in engines
        ]
        if fit_half:
            runs.append(("sim-fit-half", first))
        for label, window in runs:
            engine = "emu" if label == "emu" else "sim"
            per_seed = []
            for seed in range(1, seeds + 1):
                if progress:
                    progress(f"{f.name}: {label}, {window.end - window.start:.0f} s, seed {seed}")
                try:
                    # A fitted profile's loss travels as the path's gsl_loss (a stored one brings its own).
                    m: RttTrace | ThroughputTrace
                    if isinstance(window, RttTrace):
                        m = model.model_rtt(window, dish, pop, seed, access, engine, gsl_loss=fitted_loss)  # type: ignore[arg-type]
                    else:
                        m = model.model_throughput(window, dish, pop, seed, access, engine, gsl_loss=fitted_loss)  # type: ignore[arg-type]
                except LeoguardError as e:
                    res.errors[label] = f"seed {seed}: {e}"
                    continue
                per_seed.append(stats.summarise(m))
            if not per_seed:
                continue
            meas = res.measured if label == "sim" else stats.summarise(window)
            if label != "sim":
                res.measured_windows[label] = meas
            res.modelled[label] = merge(per_seed)
            rows = stats.compare(meas, res.modelled[label])
            each = [stats.compare(meas, s) for s in per_seed]
            for i, row in enumerate(rows):
                vals = [e[i]["modelled"] for e in each if isinstance(e[i]["modelled"], int | float)]
                row["modelled_min"] = min(vals) if vals else None
                row["modelled_max"] = max(vals) if vals else None
                row["seeds"] = len(per_seed)
            res.rows[label] = rows
        out.append(res)
    return out, record
