"""Benchmarks (run by `make bench`): they print figures and assert nothing (STYLE.md rule 14)."""

from __future__ import annotations

import time
from typing import Any

from leoguard.orbit import Constellation
from leoguard.places import top_cities


def constellation_bench(
    cities: int = 100, duration: float = 200.0, step: float = 0.1, preset: str = "starlink-shell1"
) -> dict[str, Any]:
    """Issue 2's workload: `preset` + the top-N cities as ground stations, routes between all pairs at
    every step (Hypatia's set-up: any visible satellite, no ground relays). Single-threaded."""
    c = Constellation.preset(preset)
    gs = [p.as_node() for p in top_cities(cities, role="ground-station")]
    t0 = time.perf_counter()
    stats = c._core.route_all_pairs(gs, float(duration), float(step), 25.0)
    wall = time.perf_counter() - t0
    return {
        "snapshots": stats["snapshots"],
        "ground_stations": len(gs),
        "pairs": stats["pairs"],
        "wall_s": round(wall, 3),
        "routes_per_s": round(stats["pairs"] * stats["snapshots"] / wall, 1),
        "reachable_fraction": round(stats["reachable"] / max(1, stats["pairs"] * stats["snapshots"]), 6),
        "mean_owd_ms": round(stats["mean_owd_ms"], 3),
        "mean_hops": round(stats["mean_hops"], 3),
        "constellation": preset,
    }


def sim_bench() -> dict[str, Any]:
    """Issue 3's scenario (a), shipped as scenarios/bench-chain.toml (built here so it runs anywhere)."""
    from leoguard.scenario import from_dict
    from leoguard.simulate import simulate

    sc = from_dict(
        {
            "name": "bench-chain", "duration_s": 5.0, "seed": 1,
            "topology": {"kind": "chain", "hops": 9, "rate_mbps": 100, "delay_ms": 2, "queue_bytes": 2_000_000},
            "flows": [{"kind": "tcp", "src": 0, "dst": 9, "cc": "cubic"}],
        }
    )  # fmt: skip
    r = simulate(sc)
    return {
        "scenarios": [
            {
                "name": "bench-chain",
                "packet_hops": r.packet_hops,
                "wall_s": round(r.wall_s, 4),
                "sim_s": 5.0,
                "packet_hops_per_s": round(r.packet_hops / r.wall_s),
                "slowdown": round(r.wall_s / 5.0, 5),
            }
        ]
    }
