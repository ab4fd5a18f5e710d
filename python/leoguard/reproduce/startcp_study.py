"""StarTCP beyond the paper: how well the Handover Manager predicts when the interruptions are not the
paper's clean 100 ms every 15 s (docs/startcp.md, "Prediction under noise"), and the per-second figure
of the two-path experiment.

The study runs the two-path topology (two 40 Mbit/s paths, 100 ms RTT, a route switch every 15 s) with
the interruptions written out as link events, case by case:

- `fixed`: 100 ms at every switch (the paper's experiment);
- `random`: 30-200 ms at every switch, uniformly (StarTCP's Fig 1b range);
- `missed`: as `random`, but each switch passes without an interruption with probability 0.3;
- `spurious`: as `random`, plus interruptions that are no handover, at uniformly random times (one per
  15 s on average, 30-200 ms).

The manager knows only the period T; the phase it must learn. Each seed draws the flow's start uniformly
within the first period, so the handovers fall at a different point of the flow's life in every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from leoguard.reproduce.startcp import handover_times, per_second, rows_of, two_path
from leoguard.scenario import Scenario, from_dict
from leoguard.simulate import Results, simulate

CASES = ("fixed", "random", "missed", "spurious")
MISS_PROB = 0.3
SPURIOUS_PER_PERIOD = 1.0
DURATION_RANGE_MS = (30.0, 200.0)
#: A stall belongs to a switch when it predicted it within this much; otherwise it is spurious.
MATCH_S = 1.0


def impaired_two_path(scheme: str, case: str, duration_s: float, seed: int, startcp: dict | None = None) -> Scenario:
    """The two-path scenario with `case`'s interruptions as events and the flow starting at a drawn time."""
    if case not in CASES:
        raise ValueError(f"case {case!r}: one of {', '.join(CASES)}")
    rng = np.random.default_rng([seed, CASES.index(case)])
    base = two_path(scheme, duration_s, seed, startcp).model_dump(exclude_none=True)
    period = base["topology"]["switch_every_s"]
    base["topology"]["interruption_ms"] = 0.0
    base["flows"][0]["start_s"] = round(float(rng.uniform(0.5, period - 0.5)), 3)
    lo, hi = DURATION_RANGE_MS
    downs: list[tuple[float, float]] = []
    k = 1
    while k * period < duration_s:
        d = 100.0 if case == "fixed" else float(rng.uniform(lo, hi))
        if not (case == "missed" and rng.random() < MISS_PROB):
            downs.append((k * period, d))
        k += 1
    if case == "spurious":
        n = rng.poisson(SPURIOUS_PER_PERIOD * duration_s / period)
        for t in np.sort(rng.uniform(1.0, duration_s - 1.0, n)):
            # Not on top of a switch: that would merge with the handover's own interruption.
            if min(abs(t - j * period) for j in range(1, int(duration_s // period) + 1)) > 0.5:
                downs.append((round(float(t), 3), float(rng.uniform(lo, hi))))
    events = []
    for t, d in sorted(downs):
        for link in range(4):
            events.append({"t_s": t, "link": link, "up": False})
            events.append({"t_s": round(t + d / 1e3, 6), "link": link, "up": True})
    base["events"] = events
    base["name"] = f"startcp-study-{case}-{scheme}-{seed}"
    return from_dict(base)


def interruptions_of(sc: Scenario) -> list[tuple[float, float]]:
    """(start s, length ms) of every interruption the scenario schedules (link 0's down/up pairs)."""
    ev = [e for e in sc.events if e.link == 0]
    return [(d.t_s, round((u.t_s - d.t_s) * 1e3, 3)) for d, u in zip(ev[::2], ev[1::2], strict=True)]


def stall_rows(r: Results, case: str, seed: int) -> list[dict[str, Any]]:
    """One row per switch of the run (did a stall predict it, and how well) and one per stall that
    predicted no switch (spurious)."""
    sc = r.scenario
    switches = handover_times(sc)
    interrupted = {round(t, 6) for t, _ in interruptions_of(sc)}
    stalls = r.startcp.filter(pl.col("flow") == 0) if not r.startcp.is_empty() else r.startcp
    pred = [x / 1e9 for x in stalls["predicted_ns"].to_list()] if not stalls.is_empty() else []
    by_sec = {int(x["sec"]): x for x in per_second(r).iter_rows(named=True)}
    used: set[int] = set()
    out = []
    start = sc.flows[0].start_s
    for t in switches:
        if t <= start:
            continue
        near = [i for i, p in enumerate(pred) if abs(p - t) < MATCH_S]
        used.update(near)
        sec = by_sec.get(int(t), {})
        out.append(
            {
                "case": case,
                "seed": seed,
                "kind": "switch",
                "t_s": t,
                "interrupted": t in interrupted,
                "error_ms": round((pred[near[0]] - t) * 1e3, 3) if near else None,
                "throughput_mbps": round(float(sec.get("throughput_mbps", 0.0)), 3),
                "lost_packets": int(sec.get("lost_packets", 0)),
            }
        )
    for i, p in enumerate(pred):
        if i not in used:
            out.append(
                {
                    "case": case,
                    "seed": seed,
                    "kind": "spurious-stall",
                    "t_s": round(p, 3),
                    "interrupted": None,
                    "error_ms": None,
                    "throughput_mbps": None,
                    "lost_packets": None,
                }
            )
    return out


@dataclass
class Study:
    rows: list[dict[str, Any]] = field(default_factory=list)
    bbr_rows: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> list[dict[str, Any]]:
        """Per case: switches seen after the flow started, how many StarTCP stalled for, the absolute
        prediction error's median / p90 / max, stalls that predicted no switch, the mean loss in an
        interrupted switch's second (StarTCP's over all of them and over those it stalled for, BBR's)
        and the mean goodput of a switch's second."""
        df = pl.DataFrame(self.rows, infer_schema_length=None).with_columns(pl.col("error_ms").cast(pl.Float64))
        bbr = pl.DataFrame(self.bbr_rows, infer_schema_length=None)
        out = []
        for case in CASES:
            d = df.filter(pl.col("case") == case)
            if d.is_empty():
                continue
            sw = d.filter(pl.col("kind") == "switch")
            err = sw["error_ms"].drop_nulls().abs().to_numpy()
            inter = sw.filter(pl.col("interrupted"))
            b = bbr.filter((pl.col("case") == case) & pl.col("interrupted"))
            out.append(
                {
                    "case": case,
                    "switches": sw.height,
                    "interrupted": inter.height,
                    "predicted": int(sw["error_ms"].is_not_null().sum()),
                    "abs_error_ms_p50": _q(err, 0.5),
                    "abs_error_ms_p90": _q(err, 0.9),
                    "abs_error_ms_max": _q(err, 1.0),
                    "spurious_stalls": d.filter(pl.col("kind") == "spurious-stall").height,
                    "lost_per_interrupted_second": _mean(inter["lost_packets"]),
                    "lost_per_predicted_interrupted_second": _mean(
                        inter.filter(pl.col("error_ms").is_not_null())["lost_packets"]
                    ),
                    "bbr_lost_per_interrupted_second": _mean(b["lost_packets"]) if not b.is_empty() else None,
                    "mbps_per_switch_second": _mean(sw["throughput_mbps"]),
                    "bbr_mbps_per_switch_second": _mean(
                        bbr.filter(pl.col("case") == case)["throughput_mbps"] if not bbr.is_empty() else None
                    ),
                }
            )
        return out


def _q(x: np.ndarray, q: float) -> float | None:
    return None if len(x) == 0 else round(float(np.quantile(x, q)), 2)


def _mean(s: pl.Series | None) -> float | None:
    if s is None or s.len() == 0:
        return None
    v = s.drop_nulls().cast(pl.Float64).mean()
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 2)


def study(cases: tuple[str, ...] = CASES, seeds: tuple[int, ...] = (1, 2, 3, 4, 5), duration_s: float = 122.0) -> Study:
    """StarTCP (heuristic lead) and BBR on each case and seed; rows as `stall_rows` (BBR's with the
    switch rows only, for the loss it takes)."""
    out = Study()
    for case in cases:
        for seed in seeds:
            r = simulate(impaired_two_path("startcp", case, duration_s, seed))
            out.rows.extend(stall_rows(r, case, seed))
            b = simulate(impaired_two_path("bbr", case, duration_s, seed))
            out.bbr_rows.extend(x for x in stall_rows(b, case, seed) if x["kind"] == "switch")
    return out


def per_second_figure(runs: dict[tuple[str, str], Results], path: Path, experiment: str = "two-path") -> Path:
    """Goodput and retransmitted segments per second of every scheme run on `experiment`, the handovers
    marked (the layout of the paper's Fig 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = {s: r for (e, s), r in runs.items() if e == experiment}
    if not mine:
        raise ValueError(f"no {experiment} run to draw")
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    for scheme, r in mine.items():
        ps = per_second(r)
        ax1.step(ps["sec"], ps["throughput_mbps"], where="post", label=scheme)
        ax2.step(ps["sec"], ps["lost_packets"], where="post", label=scheme)
    for t in handover_times(next(iter(mine.values())).scenario):
        for ax in (ax1, ax2):
            ax.axvline(t, color="grey", lw=0.8, ls=":")
    ax1.set_ylabel("goodput (Mbit/s)")
    ax2.set_ylabel("retransmitted segments")
    ax2.set_xlabel("time (s); dotted: handovers")
    ax1.legend(loc="lower right", fontsize=8)
    ax1.set_title(f"StarTCP {experiment}: per second")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["CASES", "Study", "impaired_two_path", "per_second_figure", "rows_of", "study"]
