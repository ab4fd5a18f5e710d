"""SATGUARD's Fig 13 on real stacks (issue 30): the reproduction's bulk experiment (`reproduce satguard`,
its topology, links and loss) on the real-time emulator with Linux's CUBIC (iperf3), beside the
simulator's same runs with leoguard's TCP model. Per pair, five variants: no protection, lossless (no
loss models), LinkGuardian, SATGUARD as the paper designs it (exit reorder buffer on) and SATGUARD
without the buffer; per run the goodput, its per-second series and the paper's Fig 13 figures (the
share of seconds above 800 and below 500 Mbit/s). An emulated run that could not keep real time says
so (`realtime_ok`, its timing error): its figures are then not the paper's claim measured on Linux.

    leoguard reproduce satguard --engine emu|both [--pair P]... [--quick|--full] [--json]

The kernel's per-second goodput is what the iperf3 server received in each 1 s interval; the model's
is its acknowledged bytes per second (`reproduce satguard`'s own series). Runs are sequential (the
emulator needs both cores for itself) and need root.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from leoguard.ablation import VARIANTS as ABLATION
from leoguard.errors import LeoguardError
from leoguard.reproduce import satguard as sg
from leoguard.scenario import Scenario

#: The variants of the comparison, in the order they are reported.
VARIANTS = ("none", "lossless", "linkguardian", "satguard", "satguard-no-reorder")

#: Pairs run unless others are asked for: New York - London and one more.
DEFAULT_PAIRS = ("NYC-LON", "SYD-NYC")

ENGINES = ("sim", "emu")


def scenario(pair: str, variant: str, mode: sg.Mode) -> Scenario:
    """The bulk run of `pair` under `variant` (the ablation's transforms of the reproduction's bulk run
    without a scheme: the same topology, flow, seed and loss process)."""
    if variant not in VARIANTS:
        raise LeoguardError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    return ABLATION[variant][1](sg.scenario(pair, "none", "bulk", mode))


def figures(per_s: Sequence[float]) -> dict[str, Any]:
    """Fig 13's figures of a per-second goodput series (Mbit/s)."""
    n = len(per_s)
    return {
        "seconds": n,
        "mean_mbps": round(statistics.mean(per_s), 2) if n else None,
        "above_800_pct": round(100 * sum(x > 800 for x in per_s) / n, 1) if n else None,
        "below_500_pct": round(100 * sum(x < 500 for x in per_s) / n, 1) if n else None,
    }


def run_one(pair: str, variant: str, mode: sg.Mode, engine: str) -> dict[str, Any]:
    """One run: its goodput, per-second series and Fig 13 figures; on the emulator also whether it kept
    real time. A run that fails is a row with its error, not the end of the experiment."""
    row: dict[str, Any] = {"pair": pair, "variant": variant, "engine": engine}
    sc = scenario(pair, variant, mode)
    try:
        if engine == "sim":
            from leoguard.simulate import simulate

            res = simulate(sc)
            per_s = sg.throughput_samples(res)
            row["goodput_mbps"] = round(res.flows.row(0, named=True)["goodput_bps"] / 1e6, 2)
        else:
            from leoguard.emu import emulate

            res = emulate(sc)
            per_s = (res.tools.get("iperf3_0") or {}).get("received_mbps") or []
            row["goodput_mbps"] = round(res.flows.row(0, named=True)["goodput_bps"] / 1e6, 2)
            e = res.emulator
            row["realtime_ok"] = e["realtime_ok"]
            row["timing_error_us"] = {k: e["timing_error_us"][k] for k in ("p50", "p99")}
            row["dataplane_busy_s"] = round(e["busy_s"], 2)
            row["drops_unexplained"] = e["drops_unexplained"]
    except LeoguardError as err:
        row["error"] = str(err)
        return row
    row["per_second_mbps"] = [round(x, 2) for x in per_s]
    row.update(figures(per_s))
    return row


def run(
    pairs: Sequence[str] | None,
    mode_name: str,
    engines: Sequence[str],
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every pair x variant x engine, sequentially (emulated runs first, so no simulation shares the
    cores with them)."""
    pairs = list(pairs or DEFAULT_PAIRS)
    for p in pairs:
        if p not in sg.PAIRS:
            raise LeoguardError(f"unknown pair {p!r} (known: {', '.join(sg.PAIRS)})")
    if "emu" in engines:
        # Checked once here, not as an error row of every emulated run.
        from leoguard.emu.hosts import require_root

        require_root()
    mode = dataclasses.replace(sg.MODES[mode_name])
    rows = []
    for engine in sorted(engines, key=lambda e: e != "emu"):
        for p in pairs:
            for v in VARIANTS:
                rows.append(run_one(p, v, mode, engine))
                if on_run is not None:
                    on_run(rows[-1])
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table (per pair and variant, the engines side by side)."""
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    head = ["pair", "variant"]
    for e in engines:
        head += [f"{e} goodput Mbit/s", f"{e} > 800 / < 500 Mbit/s (% of s)"]
        if e == "emu":
            head += ["emu real time (timing p99 us)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["pair"], r["variant"]) for r in rows))
    for p, v in keys:
        cells = [p, v]
        for e in engines:
            r = next((x for x in rows if (x["pair"], x["variant"], x["engine"]) == (p, v, e)), None)
            if r is None or "error" in r:
                cells += ["failed" if r else "-", (r or {}).get("error", "-")[:80]]
                if e == "emu":
                    cells += ["-"]
                continue
            cells += [f"{r['goodput_mbps']:g}", f"{r['above_800_pct']} / {r['below_500_pct']}"]
            if e == "emu":
                ok = "yes" if r["realtime_ok"] else "**no**"
                cells += [f"{ok} ({r['timing_error_us']['p99']})"]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out)
