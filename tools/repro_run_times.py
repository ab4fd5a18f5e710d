"""Times the runs of `reproduce satguard` one by one: where a reproduction's time goes.

    .venv/bin/python tools/repro_run_times.py --pair NYC-LON            # all schemes and workloads, full mode
    .venv/bin/python tools/repro_run_times.py --pair SYD-NYC --scheme tambur --workload web --mode quick

For each run it prints the time to build it (the orbit pre-pass and the topology), the engine's time
(`SimRun.advance` to the end) and the packet-hops; nothing is written. Run it on an idle machine: the
figures are wall times of one process. `docs/performance.md` ("The full reproduction, run by run")
has a table made with it.
"""

from __future__ import annotations

import argparse
import time

from leoguard import _core
from leoguard.reproduce import satguard as sg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default="NYC-LON", choices=list(sg.PAIRS))
    ap.add_argument("--scheme", action="append", choices=list(sg.SCHEMES), help="repeatable (default: all)")
    ap.add_argument("--workload", action="append", choices=list(sg.WORKLOADS), help="repeatable (default: all)")
    ap.add_argument("--mode", default="full", choices=list(sg.MODES))
    a = ap.parse_args()
    mode = sg.MODES[a.mode]
    print(f"{'scheme':<13} {'workload':<8} {'build s':>8} {'engine s':>9} {'packet-hops':>13}")
    for scheme in a.scheme or list(sg.SCHEMES):
        for workload in a.workload or list(sg.WORKLOADS):
            t0 = time.perf_counter()
            run = _core.SimRun(sg.scenario(a.pair, scheme, workload, mode).to_core(None))
            t1 = time.perf_counter()
            run.advance(run.end_s)
            t2 = time.perf_counter()
            print(f"{scheme:<13} {workload:<8} {t1 - t0:>8.2f} {t2 - t1:>9.2f} {run.packet_hops:>13,}", flush=True)


if __name__ == "__main__":
    main()
