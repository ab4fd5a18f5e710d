"""Benchmarks (run by `make bench`): they print figures and assert nothing (STYLE.md rule 14)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from leoguard.orbit import Constellation
from leoguard.places import top_cities


def constellation_bench(
    cities: int = 100, duration: float = 200.0, step: float = 0.1, preset: str = "starlink-shell1", threads: int = 1
) -> dict[str, Any]:
    """Issue 2's workload: `preset` + the top-N cities as ground stations, routes between all pairs at
    every step (Hypatia's set-up: any visible satellite, no ground relays). `threads` workers take
    contiguous runs of snapshots; the figures do not depend on it."""
    c = Constellation.preset(preset)
    gs = [p.as_node() for p in top_cities(cities, role="ground-station")]
    t0 = time.perf_counter()
    stats = c._core.route_all_pairs(gs, float(duration), float(step), 25.0, int(threads))
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
        "threads": threads,
    }


def sim_bench(only: str | None = None) -> dict[str, Any]:
    """Issue 3's scenarios: (a) CUBIC over a 9-hop chain of 100 Mbit/s, 2 ms links for 5 s (shipped as
    scenarios/bench-chain.toml); (b) one flow New York - London over Starlink shell 1 at 1 Gbit/s for
    60 s with the Starlink loss model; (c) the whole Starlink shell 1 with 5 cities, a host and 4 flows
    for 30 s (scenarios/starlink-constellation.toml). (b) uses BBR, since CUBIC collapses to a few Mbit/s on that path
    and would measure an idle simulator. `run_s` is the native simulation (packet_hops_per_s and
    slowdown use it), `wall_s` adds turning the results into columns, `timeline_s` is the path timeline."""
    from leoguard.scenario import from_dict, load_scenario
    from leoguard.simulate import simulate

    chain = {"kind": "chain", "hops": 9, "rate_mbps": 100, "delay_ms": 2, "queue_bytes": 2_000_000}
    leo = {
        "kind": "leo-path", "constellation": "starlink-shell1", "a": "New York", "b": "London",
        "rate_mbps": 1000, "queue_bytes": 4_000_000, "gsl_loss": {"model": "starlink"},
    }  # fmt: skip
    cases = [
        ("bench-chain", 5.0, chain, "cubic"),
        ("starlink-nyc-lon-1g", 60.0, leo, "bbr"),
        ("starlink-constellation", 30.0, None, ""),
    ]
    known = [c[0] for c in cases]
    if only is not None and only not in known:
        from leoguard.errors import LeoguardError

        raise LeoguardError(f"unknown benchmark scenario '{only}' (known: {', '.join(known)})")
    out = []
    for name, dur, topo, cc in cases:
        if only is not None and name != only:
            continue
        if topo is None:
            # The whole shell 1 with 5 cities, a host and 4 flows (scenarios/starlink-constellation.toml).
            sc = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / f"{name}.toml")
        else:
            sc = from_dict(
                {"name": name, "duration_s": dur, "seed": 1, "topology": topo,
                 "flows": [{"kind": "tcp", "src": 0, "dst": 9 if topo["kind"] == "chain" else 1, "cc": cc}]}
            )  # fmt: skip
        t0 = time.perf_counter()
        r = simulate(sc)
        total = time.perf_counter() - t0
        out.append(
            {
                "name": name, "cc": cc, "packet_hops": r.packet_hops, "wall_s": round(r.wall_s, 4), "sim_s": dur,
                "run_s": round(r.run_s, 4), "packet_hops_per_s": round(r.packet_hops / r.run_s),
                "slowdown": round(r.run_s / dur, 5),
                "timeline_s": round(total - r.wall_s, 3), "flows": r.flows.height,
                "goodput_mbps": round(r.flows["goodput_bps"].sum() / 1e6, 2),
            }
        )  # fmt: skip
    return {"scenarios": out}


def fec_bench(blocks: int = 100, reps: int = 3) -> dict[str, float]:
    """Per-core throughput of the liquid tunnel's RaptorQ state machines at 1280-byte symbols, Gbit/s
    of packet data: blocks of 200 packets of 1500 bytes with 10 % repair; decoding with one source
    symbol in 20 lost, so every block is solved by RaptorQ (docs/liquid.md "Benchmark")."""
    from leoguard import _core

    enc, dec, _clean = _core.bench_fec(blocks, reps)
    return {"encode_gbps": round(enc, 3), "decode_gbps": round(dec, 3)}


def emu_bench(
    hops: int = 10,
    rate_mbps: float = 2_500.0,
    streams: int = 4,
    seconds: float = 8.0,
    scheme: str = "satguard",
    offload: bool = True,
    queue_bytes: int | None = None,
    rps: bool = True,
) -> dict[str, Any]:
    """The emulator's data plane on its one core (issues 12, 30): iperf3 with kernel CUBIC and `streams`
    parallel streams across a `hops`-hop chain of `rate_mbps` links with 1 ms each and one
    bandwidth-delay product of queue each (`queue_bytes`), `scheme`
    ("satguard", "linkguardian" or "none") on every node, the flow marked delay-sensitive. Goodput is what
    iperf3's receiver counted; pps and packet-hops are the data plane's own counts (both directions);
    the timing error is each delivery's lateness against its model time, measured inside the data
    plane. `load` is the machine's 1-minute load average before the run."""
    import os

    from leoguard.emu import emulate
    from leoguard.scenario import from_dict

    load = os.getloadavg()[0]
    # One bandwidth-delay product of queue per link (1 ms per hop each way), so kernel CUBIC can fill
    # the chain and the goodput says what the data plane carries, not what a short queue lets TCP do.
    queue = queue_bytes or int(rate_mbps * 1e6 / 8 * 2 * hops * 1e-3)
    sc = from_dict(
        {
            "name": "bench-emu",
            "duration_s": seconds,
            "topology": {"kind": "chain", "hops": hops, "rate_mbps": rate_mbps, "delay_ms": 1.0, "queue_bytes": queue},
            "flows": [{"kind": "tcp", "src": 0, "dst": hops, "cc": "cubic", "delay_sensitive": True}],
            "emu": {"streams": streams, "max_packet_hops_per_s": 1e12, "omit_s": 1.0, "offload": offload, "rps": rps},
            **({scheme: {}} if scheme != "none" else {}),
        }
    )
    r = emulate(sc)
    e = r.emulator
    el = max(1e-9, e["elapsed_s"])
    f = r.flows.row(0, named=True)
    return {
        "gbps": round(f["goodput_bps"] / 1e9, 3),
        "pps": round(e["delivered"] / el, 1),
        "packet_hops_per_s": round(e["packet_hops"] / el, 1),
        "hops": hops,
        "scheme": scheme,
        "streams": streams,
        "queue_bytes": queue,
        "rps": rps,
        "timing_error_us": {k: e["timing_error_us"][k] for k in ("p50", "p99", "max")},
        "drops_unexplained": e["drops_unexplained"],
        "drops": e["drops"],
        "retransmissions": f["retransmissions"],
        "realtime_ok": e["realtime_ok"],
        "dataplane_cpu_s": round(e["cpu_s"], 3),
        "dataplane_busy_s": round(e["busy_s"], 3),
        # The data plane spins; the time it spent on packets says what it could carry on its core.
        "capacity_gbps_est": round(f["goodput_bps"] / 1e9 * el / max(1e-9, e["busy_s"]), 3),
        "load_before": round(load, 2),
        "offload": e["offload"],
        # Each CPU's busy share over the data plane's run (/proc/stat; the data plane spins on its own).
        "cpu_busy_share": e["cpu_busy_share"],
    }


def startup_bench(runs: int = 10, scenario: Path | None = None) -> dict[str, Any]:
    """`leoguard run` of a 1 s scenario as a whole process (issue 31's target: 0.25 s):
    `scenarios/bench-chain.toml --duration 1 --json`, run `runs` times in fresh interpreters through
    the program's entry point (`leoguard.cli_run.main`), wall seconds from start to exit. Then one run
    more under `python -X importtime` says what the imports cost (milliseconds per top-level package,
    its modules' own times summed, those of 5 ms or more; importtime's bookkeeping inflates them a
    little) and whether numpy and polars were among them. `scenario` replaces the chain."""
    import json
    import statistics
    import subprocess
    import sys
    import tempfile

    from leoguard.errors import LeoguardError

    path = scenario or Path(__file__).resolve().parents[2] / "scenarios" / "bench-chain.toml"
    if not path.is_file():
        raise LeoguardError(f"bench startup: no scenario at {path} (run it from a leoguard checkout)")

    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise LeoguardError(f"bench startup: the run failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return done

    with tempfile.TemporaryDirectory(prefix="leoguard-bench-") as tmp:
        argv = ["run", str(path), "--duration", "1", "--out", str(Path(tmp) / "out"), "--json"]
        code = f"from leoguard.cli_run import main; main({argv!r})"
        walls = []
        for _ in range(runs):
            t0 = time.perf_counter()
            done = run([sys.executable, "-c", code])
            walls.append(time.perf_counter() - t0)
        hops = json.loads(done.stdout)["packet_hops"]
        # main() exits the interpreter: an exit hook reports whether numpy and polars were imported.
        hook = "print('numpy' in sys.modules, 'polars' in sys.modules, file=sys.stderr)"
        probe = f"import atexit, sys; atexit.register(lambda: {hook}); " + code
        it = run([sys.executable, "-X", "importtime", "-c", probe])
    # Each module's own time, summed by top-level package (polars.* under polars, and so on): self
    # times add up to the whole import time without counting a nested import twice.
    top: dict[str, float] = {}
    for line in it.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            # leoguard's own modules by name (the scenario's pydantic models are built in them);
            # polars' native runtime under polars.
            full = parts[2].strip()
            name = full if full.startswith("leoguard.") else full.split(".")[0].replace("_polars_runtime_32", "polars")
            top[name] = top.get(name, 0.0) + int(parts[0]) / 1e3
    heavy = sorted(((k, round(v, 1)) for k, v in top.items() if v >= 5.0), key=lambda kv: -kv[1])
    return {
        "runs": runs,
        "wall_s": {k: round(f(walls), 3) for k, f in (("min", min), ("median", statistics.median), ("max", max))},
        "target_s": 0.25,
        "packet_hops": hops,
        "imports_ms": dict(heavy),
        "numpy_imported": it.stderr.strip().splitlines()[-1].split()[0] == "True",
        "polars_imported": it.stderr.strip().splitlines()[-1].split()[1] == "True",
    }
