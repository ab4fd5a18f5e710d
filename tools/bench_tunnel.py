"""Benchmark of the real liquid-data tunnel between network namespaces (prints figures, asserts nothing).

For each loss rate and mode (coding off / liquid) it runs iperf3 CUBIC from A to B through the tunnel
across leoguard-relay (Bernoulli loss, 10 ms each way), and reports goodput, retransmissions, and CPU
seconds per Gbit/s of goodput of the two tunnel processes together (utime + stime from
/proc/<pid>/stat). Needs root. Usage: python tools/bench_tunnel.py [--seconds 5] [--json]
"""

from __future__ import annotations

import argparse
import json

from leoguard.tunnel import tunnel_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--loss", type=float, nargs="*", default=[0.0, 0.01, 0.05])
    ap.add_argument("--json", action="store_true", help="one JSON object per line only")
    a = ap.parse_args()
    rows = tunnel_bench(a.seconds, a.loss, a.delay_ms)
    for r in rows:
        print(json.dumps({"bench": "tunnel", **r}))
    if not a.json:
        print(f"{'loss':>6} {'mode':>7} {'Mbit/s':>9} {'retx':>7} {'CPU s/Gbit':>11} {'wire/goodput':>13}")
        for r in rows:
            print(
                f"{r['loss']:>6.2%} {r['mode']:>7} {r['goodput_mbps']:>9.1f} {r['retransmits']:>7} "
                f"{r['cpu_s_per_gbit'] if r['cpu_s_per_gbit'] is not None else '-':>11} {r['wire_per_goodput']:>13}"
            )


if __name__ == "__main__":
    main()
