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


def run(
    files: list[Path],
    engines: list[str],
    profile: str = "fit",
    dish: str = model.DISH,
    pop: str = model.POP,
    seed: int = 1,
    emu_window_s: float = 120.0,
    progress: Callable[[str], None] | None = None,
    fit_half: bool = False,
) -> tuple[list[TraceResult], dict[str, Any] | None]:
    """Reads, fits, models and compares; a failed model run is a named hole, not the end. `fit_half`:
    the simulator also models the first half (the one a `fit` profile was fitted on), as `sim-fit-half`."""
    traces = [read_trace(f) for f in files]
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
            if progress:
                progress(f"{f.name}: {label}, {window.end - window.start:.0f} s")
            try:
                # A fitted profile's loss travels as the path's gsl_loss (a stored one brings its own).
                m: RttTrace | ThroughputTrace
                if isinstance(window, RttTrace):
                    m = model.model_rtt(window, dish, pop, seed, access, engine, gsl_loss=fitted_loss)  # type: ignore[arg-type]
                else:
                    m = model.model_throughput(window, dish, pop, seed, access, engine, gsl_loss=fitted_loss)  # type: ignore[arg-type]
            except LeoguardError as e:
                res.errors[label] = str(e)
                continue
            meas = res.measured if label == "sim" else stats.summarise(window)
            if label != "sim":
                res.measured_windows[label] = meas
            res.modelled[label] = stats.summarise(m)
            res.rows[label] = stats.compare(meas, res.modelled[label])
        out.append(res)
    return out, record
