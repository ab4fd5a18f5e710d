"""Benchmark of leoguard-transport over loopback UDP (prints figures, asserts nothing).

For each case (controller, application rate, address family) it runs `leoguard-transport recv` and
`send --seconds S` on the loopback interface and reports the receiver's goodput, the sender's
retransmissions, and each end's CPU use (its own getrusage, as a share of one core over the transfer)
and how late the sender's loop woke for its pacing and timer deadlines. No root needed.
Usage: python tools/bench_transport.py [--seconds 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from leoguard.tunnel import binary

CASES = [
    ("cubic", None, "127.0.0.1"),
    ("bbr", None, "127.0.0.1"),
    ("cubic", 100.0, "127.0.0.1"),
    ("bbr", 100.0, "::1"),
    ("cubic", 40.0, "::1"),
    ("bbr", 40.0, "127.0.0.1"),
]


def _port(host: str) -> int:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_case(exe: str, cc: str, rate: float | None, host: str, seconds: float) -> dict:
    """One loopback transfer; the two ends' summaries boiled down to the figures."""
    port = _port(host)
    addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "recv.json"
        recv = subprocess.Popen(
            [exe, "recv", "--bind", addr, "--out", str(out), "--linger-ms", "100", "--timeout", str(seconds + 30)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.2)
        args = [exe, "send", "--to", addr, "--cc", cc, "--seconds", str(seconds)]
        if rate is not None:
            args += ["--rate-mbps", str(rate)]
        sent = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 40)
        recv.wait(timeout=30)
        s = json.loads(sent.stdout.splitlines()[-1])
        r = json.loads(out.read_text())
    dur = max(1e-9, s["duration_s"])
    return {
        "cc": cc,
        "app_rate_mbps": rate,
        "family": "IPv6" if ":" in host else "IPv4",
        "goodput_mbps": round(r["goodput_bps"] / 1e6, 1),
        "bytes": r["bytes_delivered"],
        "complete": bool(s["complete"] and r["complete"]),
        "retransmissions": s["retransmissions"],
        "sender_cpu_pct": round(100 * s["cpu_s"] / dur, 1),
        "receiver_cpu_pct": round(100 * r["cpu_s"] / dur, 1),
        "wake_late_us_p50": (s.get("wake_late") or {}).get("p50_us"),
        "wake_late_us_p99": (s.get("wake_late") or {}).get("p99_us"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--json", action="store_true", help="one JSON object per line only")
    a = ap.parse_args()
    exe = str(binary("leoguard-transport"))
    rows = [run_case(exe, cc, rate, host, a.seconds) for cc, rate, host in CASES]
    for r in rows:
        print(json.dumps({"bench": "transport", **r}))
    if not a.json:
        head = ("cc", "app rate", "family", "Mbit/s", "retx", "send CPU", "recv CPU", "late p50/p99 us")
        print("{:>6} {:>9} {:>6} {:>8} {:>6} {:>9} {:>9} {:>16}".format(*head))
        for r in rows:
            rate = f"{r['app_rate_mbps']:g}" if r["app_rate_mbps"] else "bulk"
            print(
                f"{r['cc']:>6} {rate:>9} {r['family']:>6} {r['goodput_mbps']:>8.1f} {r['retransmissions']:>6} "
                f"{r['sender_cpu_pct']:>8.1f}% {r['receiver_cpu_pct']:>8.1f}% "
                f"{r['wake_late_us_p50']!s:>7}/{r['wake_late_us_p99']!s:<8}"
            )


if __name__ == "__main__":
    main()
