"""Why the per-hop schemes load pages more slowly than no protection on a measured Starlink access link
(issue 29, docs/realism.md): SATGUARD's quick web workload (10 pages, 60 s) on three pairs, seeds 1-3,
with the stored profile, for no protection, LinkGuardian and SATGUARD as the reproduction runs them,
and both per-hop schemes again with loss timers wider than the access link's p99 round trip (95 ms)
(SATGUARD: `beam_guard_ms = 100`, `timeout_ms = 120`; LinkGuardian: `fixed_timeout_ms = 120`). Each
seed's variants are paired (same loss and access draws). Prints one JSON row per run, then the
medians (min-max) over seeds per pair, the mean PLT over the pages every variant of a pair and seed
loaded; writes the rows to the file given (default: none). About 5 minutes on 2 cores.

    python tools/satguard_profile_web_study.py [OUT.json]
"""

import dataclasses
import json
import statistics
import sys
from typing import Any

from leoguard.reproduce import satguard as sg
from leoguard.simulate import simulate

PAIRS = ("NYC-LON", "SYD-NYC", "DEL-LON")
SEEDS = (1, 2, 3)
#: name -> (scheme, fields added to its section)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("none", {}),
    "linkguardian": ("linkguardian", {}),
    "satguard": ("satguard", {}),
    "linkguardian, 120 ms timer": ("linkguardian", {"fixed_timeout_ms": 120}),
    "satguard, timers +100 ms": ("satguard", {"beam_guard_ms": 100, "timeout_ms": 120}),
}


def scenario(pair: str, variant: str, seed: int) -> Any:
    scheme, extra = VARIANTS[variant]
    mode = dataclasses.replace(sg.MODES["quick"], starlink_profile="mmsys24-seattle", seed=seed)
    sc = sg.scenario(pair, scheme, "web", mode)
    if not extra:
        return sc
    d = sc.model_dump(exclude_none=True)
    d[scheme] = {**d.get(scheme, {}), **extra}
    return type(sc).model_validate(d)


def main() -> None:
    rows = []
    for pair in PAIRS:
        for seed in SEEDS:
            for variant in VARIANTS:
                m = sg.web_metrics(simulate(scenario(pair, variant, seed)))
                c = next(iter(m["counters"].values()), {})
                rows.append(
                    {
                        "pair": pair,
                        "seed": seed,
                        "variant": variant,
                        "pages_loaded": len(m["plt_s"]),
                        "plt_s": dict(zip(m["page"], m["plt_s"], strict=True)),
                        "tcp_retransmissions": m["retransmissions"],
                        "hop_protected": c.get("protected"),
                        "hop_retransmissions": c.get("retransmissions"),
                        "hop_duplicates": c.get("duplicates"),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    print()
    # Paired: a seed's mean PLT is over the pages every variant of that pair and seed loaded (a page
    # one variant did not finish within the run would otherwise drop out of its mean only).
    for pair in PAIRS:
        for seed in SEEDS:
            rs = [r for r in rows if r["pair"] == pair and r["seed"] == seed]
            common = set.intersection(*(set(r["plt_s"]) for r in rs))
            for r in rs:
                r["common_pages"] = len(common)
                r["mean_plt_common_s"] = round(statistics.mean(r["plt_s"][p] for p in common), 3) if common else None

    def span(xs: list[Any]) -> str:
        xs = [x for x in xs if x is not None]
        if not xs:
            return "-"
        return f"{statistics.median(xs):g} ({min(xs):g}-{max(xs):g})"

    print(
        "| pair | variant | pages loaded (of 10) | mean PLT of the pages all loaded (s) "
        "| hop retransmissions | of them duplicates |"
    )
    print("|---|---|---|---|---|---|")
    for pair in PAIRS:
        for variant in VARIANTS:
            rs = [r for r in rows if r["pair"] == pair and r["variant"] == variant]
            print(
                f"| {pair} | {variant} | {span([r['pages_loaded'] for r in rs])} "
                f"| {span([r['mean_plt_common_s'] for r in rs])} | {span([r['hop_retransmissions'] for r in rs])} "
                f"| {span([r['hop_duplicates'] for r in rs])} |"
            )
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
