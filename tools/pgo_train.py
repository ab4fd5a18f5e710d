"""The training workload of the profile-guided build (tools/pgo_build.py, docs/performance.md).

Run with an instrumented `leoguard._core` first on `PYTHONPATH`: every code path it runs leaves its
counts in the profile that the optimised build then uses. It runs short versions of what users run:
every shipped scenario, each scheme of the SATGUARD reproduction on each of its workloads, the
ablation's variants, the FEC codec and the constellation's all-pairs routing. Results are thrown
away; only which branches run, and how often, matters. The profile changes no result: the optimised
build computes the same bytes (checked before the build was adopted: every Parquet table equal).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    from leoguard.ablation import run_ablation
    from leoguard.bench import constellation_bench, fec_bench
    from leoguard.reproduce import satguard as repro
    from leoguard.scenario import load_scenario
    from leoguard.simulate import simulate

    t0 = time.perf_counter()
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        simulate(load_scenario(path, duration_s=2.0))
    mode = repro.Mode("pgo", bulk_s=2.0, web_pages=2, web_s=8.0, webrtc_s=3.0)
    for scheme in repro.SCHEMES:
        for workload in repro.WORKLOADS:
            simulate(repro.scenario("NYC-LON", scheme, workload, mode))
    run_ablation(ROOT / "scenarios" / "satguard-nyc-lon.toml", duration_s=1.0)
    fec_bench(blocks=20, reps=1)
    constellation_bench(cities=20, duration=2.0)
    print(f"pgo_train: done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
