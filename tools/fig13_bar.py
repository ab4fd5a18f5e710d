"""Issue 13's bar for SATGUARD's Fig 13 over paired seeds: per pair, the reproduction's bulk scenario
(`reproduce satguard`'s quick or full mode) lossless, with LinkGuardian, with SATGUARD (the paper's
design, exit reorder buffer on) and with SATGUARD's buffer off, each for every seed; the median and
spread of goodput, and whether SATGUARD reaches >= 90 % of lossless and >= LinkGuardian (medians).

    python tools/fig13_bar.py [--mode quick|full] [--seeds 3] [--slot-criterion path-aware]
                              [--pair NYC-LON ...] [--workers 2] [--json FILE]

The runs of one seed share its lossy seconds (common random numbers, docs/loss-models.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

VARIANTS = ("lossless", "linkguardian", "satguard", "satguard-no-reorder")


def _one(job: tuple[str, str, int, str, str]) -> tuple[str, str, int, float]:
    from leoguard.ablation import VARIANTS as ABL
    from leoguard.reproduce.satguard import MODES, scenario
    from leoguard.simulate import simulate

    pair, variant, seed, mode_name, criterion = job
    mode = dataclasses.replace(MODES[mode_name], seed=seed, slot_criterion=criterion)
    base = scenario(pair, "none", "bulk", mode)
    res = simulate(ABL[variant][1](base))
    return pair, variant, seed, res.flows.row(0, named=True)["goodput_bps"] / 1e6


def main(argv: list[str]) -> int:
    from leoguard.reproduce.satguard import MODES, PAIRS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=sorted(MODES), default="quick")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--slot-criterion", default="path-aware")
    ap.add_argument("--pair", action="append", choices=sorted(PAIRS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error("--seeds must be >= 1")
    pairs = a.pair or list(PAIRS)
    jobs = [(p, v, s, a.mode, a.slot_criterion) for p in pairs for s in range(1, a.seeds + 1) for v in VARIANTS]
    got: dict[tuple[str, str], list[float]] = {}
    with ProcessPoolExecutor(max_workers=a.workers) as ex:
        for pair, variant, _seed, mbps in ex.map(_one, jobs):
            got.setdefault((pair, variant), []).append(mbps)
    rows: list[dict[str, Any]] = []
    print(f"mode {a.mode}, {a.slot_criterion} slots, seeds 1-{a.seeds}: goodput Mbit/s, median (min-max)")
    head = (
        "pair",
        "lossless",
        "LinkGuardian",
        "SATGUARD",
        "SATGUARD / lossless",
        "bar",
        "buffer off",
        "off / lossless",
    )
    print("| " + " | ".join((*head, "off bar")) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in pairs:
        med = {v: statistics.median(got[(p, v)]) for v in VARIANTS}

        def cell(v: str, p: str = p, med: dict[str, float] = med) -> str:
            xs = got[(p, v)]
            return f"{med[v]:.1f} ({min(xs):.1f}-{max(xs):.1f})"

        def bar(v: str, med: dict[str, float] = med) -> bool:
            return med[v] >= 0.9 * med["lossless"] and med[v] >= med["linkguardian"]

        rows.append({"pair": p, "goodput": {v: got[(p, v)] for v in VARIANTS}, "median": med,
                     "bar_satguard": bar("satguard"), "bar_no_reorder": bar("satguard-no-reorder")})  # fmt: skip
        print(
            f"| {p} | {cell('lossless')} | {cell('linkguardian')} | {cell('satguard')} | "
            f"{med['satguard'] / med['lossless']:.0%} | {'yes' if bar('satguard') else 'no'} | "
            f"{cell('satguard-no-reorder')} | {med['satguard-no-reorder'] / med['lossless']:.0%} | "
            f"{'yes' if bar('satguard-no-reorder') else 'no'} |"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mode": a.mode, "slot_criterion": a.slot_criterion, "seeds": a.seeds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
