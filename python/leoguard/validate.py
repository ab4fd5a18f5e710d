"""Three-way cross-validation of the engines: `sim_vs_emu()` runs a fixed set of scenarios, each with
several paired seeds, three ways: leoguard's TCP model in the simulator (`sim`), the same model on the
real-time emulator (`stack = "leoguard"`, leoguard-transport: `emu_model`) and Linux's TCP on the emulator
(`stack = "kernel"`, iperf3: `emu_kernel`). sim vs emu_model isolates the network model (the same TCP
code on both), emu_model vs emu_kernel isolates the TCP model (the same real network), and sim vs
emu_kernel is the end-to-end agreement (`leoguard validate sim-vs-emu`, docs/cross-validation.md).

Seeds are paired: the three runs of one seed share the seed, hence (with common random numbers) the same
lossy seconds and the same handover interruptions; each row says whether they did. A row shows the median
over seeds and the spread (min..max) per engine, and is flagged when the medians of sim and emu_kernel
differ by more than issue 13's bounds (goodput 10 %, retransmissions 25 %) or 15 % on one-way delay.
Cases of one `group` (the schemes on one path) are also ranked by median goodput in each engine, and
`rankings()` says whether the simulator ranks every pair as the kernel does. The reasons for a
disagreement are for a person to measure and write down, not for this code to guess."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario, from_dict, load_scenario

REPO = Path(__file__).resolve().parents[2]
METRICS = ("goodput_mbps", "retransmissions", "owd_ms_p50", "owd_ms_p99")
# Largest relative difference (emulator vs simulator) a row may show unflagged.
THRESHOLDS = {"goodput_mbps": 0.10, "retransmissions": 0.25, "owd_ms_p50": 0.15, "owd_ms_p99": 0.15}


SEEDS = (1, 2, 3)
ENGINES = ("sim", "emu_model", "emu_kernel")


@dataclass(frozen=True)
class Case:
    """One cross-validation case: a label, the congestion controller, a builder from seed to scenario,
    and the ranking group it belongs to (None: ranked with nothing)."""

    label: str
    cc: str
    build: Callable[[int], Scenario]
    group: str | None = None


def _seeded(sc: Scenario, seed: int) -> Scenario:
    return sc.model_copy(update={"seed": seed})


def _chain(cc: str, loss_pct: float, duration_s: float, seed: int = 1) -> Scenario:
    links = []
    for i in range(3):
        link: dict[str, Any] = {"a": i, "b": i + 1, "rate_mbps": 20, "delay_ms": 10, "queue_packets": 100}
        if loss_pct > 0:
            link["loss"] = {"model": "bernoulli", "p": loss_pct / 100}
        links.append(link)
    return from_dict(
        {
            "name": f"chain-3x20-{loss_pct:g}pct",
            "duration_s": duration_s,
            "seed": seed,
            "links": links,
            "flows": [{"kind": "tcp", "src": 0, "dst": 3, "cc": cc}],
        }
    )


# Bursty loss on the first link of the 2 x 50 Mbit/s chain: Gilbert-Elliott with every packet lost in the
# bad state, pi_B = 0.002 / 0.202 = 0.99 % of packets, bursts of 5 packets on average.
GE_BURSTS = {"model": "gilbert_elliott", "p_gb": 0.002, "p_bg": 0.2, "loss_good": 0.0, "loss_bad": 1.0}


def _chain2(cc: str, loss: dict[str, Any], duration_s: float, seed: int) -> Scenario:
    """Two 50 Mbit/s links of 20 ms (80 ms RTT), `loss` on the first one (forward direction)."""
    return from_dict(
        {
            "name": f"chain-2x50-{loss['model']}", "duration_s": duration_s, "seed": seed,
            "links": [
                {"a": 0, "b": 1, "rate_mbps": 50, "delay_ms": 20, "queue_bytes": 1_000_000, "loss": loss},
                {"a": 1, "b": 2, "rate_mbps": 50, "delay_ms": 20, "queue_bytes": 1_000_000},
            ],
            "flows": [{"kind": "tcp", "src": 0, "dst": 2, "cc": cc}],
        }
    )  # fmt: skip


def _leo_path(loss: bool, interruptions: bool, duration_s: float, seed: int) -> Scenario:
    """New York - London on a leo-path, 100 Mbit/s, CUBIC: the `starlink` model on the ground links
    and/or the 15 s schedule's handover interruptions (uniform 30-200 ms)."""
    topo: dict[str, Any] = {
        "kind": "leo-path", "constellation": "starlink-shell1", "a": "New York", "b": "London",
        "policy": "global-schedule", "step_s": 0.1, "rate_mbps": 100, "queue_bytes": 2_000_000,
        "interruption": "uniform" if interruptions else "none",
    }  # fmt: skip
    if loss:
        topo["gsl_loss"] = {"model": "starlink"}
    name = f"leo-path-{'loss' if loss else 'noloss'}-{'int' if interruptions else 'noint'}"
    return from_dict(
        {
            "name": name, "duration_s": duration_s, "seed": seed, "topology": topo,
            "flows": [{"kind": "tcp", "src": 0, "dst": 1, "cc": "cubic"}],
        }
    )  # fmt: skip


def _reordering(cc: str, duration_s: float, seed: int = 1) -> Scenario:
    """Two 50 Mbit/s paths, 60 and 20 ms one way, the route switching every 4 s: at every switch to the
    short path the delay drops by 40 ms and the first packets on it overtake the last ones on the long
    one (reordering by a full window), the case Linux's RACK, DSACK and undo are for."""
    return from_dict(
        {
            "name": "two-path-delay-drop", "duration_s": duration_s, "seed": seed,
            "topology": {"kind": "two-path", "switch_every_s": 4.0, "queue_bytes": 500_000,
                         "paths": [{"rate_mbps": 50, "delay_ms": 60}, {"rate_mbps": 50, "delay_ms": 20}]},
            "flows": [{"kind": "tcp", "src": "src", "dst": "dst", "cc": cc}],
        }
    )  # fmt: skip


def _nyc_lon(variant: str, duration_s: float, seed: int = 1) -> Scenario:
    """The demo's path (New York - London over Starlink shell 1, 100 Mbit/s ground links with the
    Starlink loss model, CUBIC bulk and a UDP probe) under `variant` (a key of `ablation.VARIANTS`)."""
    from leoguard.ablation import VARIANTS
    from leoguard.demo import demo_scenario

    return VARIANTS[variant][1](demo_scenario(duration_s, seed))


def cases(quick: bool = False) -> list[Case]:
    """Every case: the 3 x 20 Mbit/s chain with 60 ms RTT at 0, 0.1 and 1 % Bernoulli loss on each link
    for cubic, bbr and reno; the 2 x 50 Mbit/s chain with 80 ms RTT and bursty loss on its first link
    (Gilbert-Elliott ~1 % in bursts, and the `starlink` model) for cubic and bbr; the two-path switching
    scenario; New York - London on a leo-path with the `starlink` loss only, interruptions only, and
    both; reordering: the delay dropping by 40 ms at every other route switch (cubic, bbr, reno); the
    demo's New York - London path unprotected, with LinkGuardian, with SATGUARD and with SATGUARD
    without its exit reorder buffer (CUBIC; ranked as one group). `quick`: the clean CUBIC chain, 6 s."""
    if quick:
        return [Case("chain 3x20 Mbit/s, 0 % loss", "cubic", lambda seed: _chain("cubic", 0.0, 6.0, seed))]
    d = 20.0
    out: list[Case] = []
    for loss in (0.0, 0.1, 1.0):
        for cc in ("cubic", "bbr", "reno"):
            out.append(
                Case(
                    f"chain 3x20 Mbit/s, {loss:g} % loss", cc, lambda seed, cc=cc, loss=loss: _chain(cc, loss, d, seed)
                )
            )
    for name, loss in (("Gilbert-Elliott 1 % bursts", GE_BURSTS), ("starlink", {"model": "starlink"})):
        for cc in ("cubic", "bbr"):
            out.append(
                Case(
                    f"chain 2x50 Mbit/s, {name} on link 1", cc,
                    lambda seed, cc=cc, loss=loss: _chain2(cc, loss, 30.0, seed),
                )
            )  # fmt: skip
    two_path = REPO / "scenarios/two-path.toml"
    out.append(
        Case("two-path switching", "cubic", lambda seed: _seeded(load_scenario(two_path, duration_s=45.0), seed))
    )
    for label, loss, ints in (
        ("starlink loss, no interruptions", True, False),
        ("interruptions, no loss", False, True),
        ("starlink loss and interruptions", True, True),
    ):
        out.append(
            Case(
                f"NYC-LON leo-path 100 Mbit/s, {label}",
                "cubic",
                lambda seed, lo=loss, i=ints: _leo_path(lo, i, 30.0, seed),
            )
        )
    for cc in ("cubic", "bbr", "reno"):
        out.append(Case("reordering: delay -40 ms every 8 s", cc, lambda seed, cc=cc: _reordering(cc, d, seed)))
    for variant, name in (
        ("none", "unprotected"),
        ("linkguardian", "LinkGuardian"),
        ("satguard", "SATGUARD"),
        ("satguard-no-reorder", "SATGUARD without the exit buffer"),
    ):
        out.append(
            Case(
                f"NYC-LON 100 Mbit/s, {name}",
                "cubic",
                lambda seed, v=variant: _nyc_lon(v, 30.0, seed),
                "NYC-LON schemes",
            )
        )
    return out


def select(all_cases: list[Case], only: list[str] | None) -> list[Case]:
    """The cases whose label contains one of `only` (case-insensitive); all of them without `only`. An
    `only` that matches nothing is an error naming it and the labels."""
    if not only:
        return all_cases
    out = [c for c in all_cases if any(o.lower() in c.label.lower() for o in only)]
    missing = [o for o in only if not any(o.lower() in c.label.lower() for c in all_cases)]
    if missing:
        labels = sorted({c.label for c in all_cases})
        raise LeoguardError(f"--case {missing[0]!r} matches no case; the cases are: {'; '.join(labels)}")
    return out


def _metrics(flow: dict[str, Any]) -> dict[str, float | None]:
    return {
        "goodput_mbps": round(flow["goodput_bps"] / 1e6, 3),
        "retransmissions": flow["retransmissions"],
        "owd_ms_p50": flow["owd_ms_p50"],
        "owd_ms_p99": flow["owd_ms_p99"],
    }


def _on_stack(sc: Scenario, stack: str) -> Scenario:
    """`sc` with every tcp flow on `stack` ("leoguard" or "kernel") in the emulator."""
    flows = [f.model_copy(update={"stack": stack}) if f.kind == "tcp" else f for f in sc.flows]
    return sc.model_copy(update={"flows": flows})


def run_case(case: Case, seed: int, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One case and seed on the three engines: per engine the first flow's metrics, the loss process
    digest (None without a per-second model) and, for the emulator, whether it kept real time."""
    from leoguard.emu import emulate
    from leoguard.simulate import simulate

    sc = case.build(seed)
    out: dict[str, Any] = {"seed": seed}
    for engine in ENGINES:
        if progress:
            progress(f"{case.label} {case.cc} seed {seed}: {engine}")
        try:
            if engine == "sim":
                r: Any = simulate(sc)
            else:
                r = emulate(_on_stack(sc, "leoguard" if engine == "emu_model" else "kernel"))
        except LeoguardError as e:
            # One failed run is a hole in the table, named, not the end of a long validation.
            out[engine] = {**dict.fromkeys(METRICS), "loss_process": None, "realtime_ok": None, "error": str(e)}
            continue
        s = r.summary()
        out[engine] = {
            **_metrics(r.flows.row(0, named=True)),
            "loss_process": (s.get("loss_process") or {}).get("digest"),
            "realtime_ok": None if engine == "sim" else r.emulator["realtime_ok"],
        }
    return out


def _median(v: list[float]) -> float | None:
    return None if not v else round(statistics.median(v), 4)


def _diff(a: float | None, b: float | None) -> float | None:
    """(b - a) / a, or None where it is undefined."""
    return None if a in (None, 0) or b is None else round((b - a) / a, 4)


def summarise(case: Case, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one case from its seeded runs: per metric the median and spread of each engine, and
    the relative differences sim -> kernel (flagged), model-on-emu -> kernel and sim -> model-on-emu."""
    digests = [{run[e]["loss_process"] for e in ENGINES if not run[e].get("error")} for run in runs]
    same_loss = None if all(d == {None} for d in digests) else all(len(d) == 1 for d in digests)
    rows = []
    for m in METRICS:
        vals = {e: [run[e][m] for run in runs if run[e][m] is not None] for e in ENGINES}
        med = {e: _median(vals[e]) for e in ENGINES}
        spread = {e: [min(vals[e]), max(vals[e])] if vals[e] else None for e in ENGINES}
        d = _diff(med["sim"], med["emu_kernel"])
        rows.append(
            {
                "scenario": case.label, "cc": case.cc, "group": case.group, "metric": m,
                "seeds": [run["seed"] for run in runs], **med,
                **{f"{e}_spread": spread[e] for e in ENGINES},
                "diff": d, "model_vs_kernel": _diff(med["emu_model"], med["emu_kernel"]),
                "sim_vs_model_emu": _diff(med["sim"], med["emu_model"]),
                "flag": d is None or abs(d) > THRESHOLDS[m],
                "same_loss_process": same_loss,
                "emu_realtime_ok": all(run[e]["realtime_ok"] for run in runs for e in ENGINES[1:]),
                "errors": [
                    f"seed {run['seed']} {e}: {run[e]['error']}" for run in runs for e in ENGINES if run[e].get("error")
                ],
            }
        )  # fmt: skip
    return rows


def sim_vs_emu(
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    *,
    seeds: tuple[int, ...] = SEEDS,
    only: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Runs every case (or those `only` names) for every seed on the three engines; one row per
    (scenario, cc, metric) (`summarise`)."""
    rows = []
    for case in select(cases(quick), only):
        runs = [run_case(case, seed, progress) for seed in seeds]
        rows.extend(summarise(case, runs))
    return rows


def rankings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per ranking group and pair of its cases: which is ahead on median goodput in each engine, and
    whether the simulator and the kernel agree (and the model on the emulator and the kernel)."""
    good = [r for r in rows if r["metric"] == "goodput_mbps" and r["group"]]
    out = []
    for group in dict.fromkeys(r["group"] for r in good):
        members = [r for r in good if r["group"] == group]
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                ahead = {e: None if a[e] is None or b[e] is None else a[e] >= b[e] for e in ENGINES}
                out.append(
                    {
                        "group": group, "a": a["scenario"], "b": b["scenario"],
                        **{e: [a[e], b[e]] for e in ENGINES},
                        "sim_agrees": ahead["sim"] == ahead["emu_kernel"],
                        "model_emu_agrees": ahead["emu_model"] == ahead["emu_kernel"],
                    }
                )  # fmt: skip
    return out


def _cell(r: dict[str, Any], e: str) -> str:
    sp = r[f"{e}_spread"]
    if r[e] is None:
        return "n/a"
    return f"{r[e]:.4g}" if not sp or sp[0] == sp[1] else f"{r[e]:.4g} ({sp[0]:.4g}-{sp[1]:.4g})"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:+.1f} %"


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """The tables of docs/cross-validation.md: every row (median over seeds, spread in brackets), then
    the rankings."""
    lines = [
        "| scenario | cc | metric | sim (model) | emu, model | emu, kernel | sim vs kernel | model vs kernel on emu "
        "| same loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = f" **>{THRESHOLDS[r['metric']] * 100:.0f} %**" if r["flag"] else ""
        same = {None: "-", True: "yes", False: "**no**"}[r["same_loss_process"]]
        lines.append(
            f"| {r['scenario']} | {r['cc']} | {r['metric']} | {_cell(r, 'sim')} | {_cell(r, 'emu_model')} | "
            f"{_cell(r, 'emu_kernel')} | {_pct(r['diff'])}{mark} | {_pct(r['model_vs_kernel'])} | {same} |"
        )
    ranks = rankings(rows)
    if ranks:
        lines += ["", "| group | a | b | sim a / b | emu model a / b | kernel a / b | sim ranks as kernel |"]
        lines.append("|---|---|---|---|---|---|---|")
        for k in ranks:
            cells = " | ".join(f"{k[e][0]:.4g} / {k[e][1]:.4g}" if None not in k[e] else "n/a" for e in ENGINES)
            lines.append(f"| {k['group']} | {k['a']} | {k['b']} | {cells} | {'yes' if k['sim_agrees'] else '**no**'} |")
    return "\n".join(lines) + "\n"
