"""ns-3 and leoguard side by side on the same chain (issue 31's yardstick): one CUBIC bulk flow over 9 hops
of 100 Mbit/s, 2 ms each, for --seconds simulated seconds, each engine's wall time for the simulation
alone and as a whole process, and the ratio.

ns-3 is an optional benchmark dependency, run from its own interpreter so nothing of it enters leoguard's
environment: `python -m venv /tmp/ns3venv && /tmp/ns3venv/bin/pip install ns3==3.44.post0` (the PyPI
wheel, cppyy bindings), then

    python tools/ns3_chain_bench.py --ns3-python /tmp/ns3venv/bin/python [--seconds 30] [--runs 3]

It prints one JSON object: per engine the median simulation time, whole-process time, packets carried
and goodput; `speedup` is ns-3's simulation time over leoguard's. The two models are not the same
model (ns-3's TCP and queues are its own: point-to-point devices with their default 100-packet queue
behind a traffic-control layer), so goodput is printed beside the times to show both carried a
saturated flow; the comparison is of engine speed on the same topology and load, as the issue asks."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NS3_PROGRAM = r"""
import json, sys, time
t_start = time.perf_counter()
from ns import ns
seconds, hops = float(sys.argv[1]), int(sys.argv[2])
ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpCubic"))
ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 24))
ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 24))
nodes = ns.NodeContainer()
nodes.Create(hops + 1)
stack = ns.InternetStackHelper()
stack.Install(nodes)
p2p = ns.PointToPointHelper()
p2p.SetDeviceAttribute("DataRate", ns.StringValue("100Mbps"))
p2p.SetChannelAttribute("Delay", ns.StringValue("2ms"))
addr = ns.Ipv4AddressHelper()
last = None
for i in range(hops):
    devs = p2p.Install(nodes.Get(i), nodes.Get(i + 1))
    addr.SetBase(ns.Ipv4Address(f"10.{i // 250}.{i % 250}.0"), ns.Ipv4Mask("255.255.255.0"))
    last = addr.Assign(devs)
ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
port = 5000
sink_helper = ns.PacketSinkHelper(
    "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
)
sinks = sink_helper.Install(nodes.Get(hops))
sinks.Start(ns.Seconds(0.0))
bulk = ns.BulkSendHelper(
    "ns3::TcpSocketFactory", ns.InetSocketAddress(last.GetAddress(1), port).ConvertTo()
)
bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
bulk.SetAttribute("SendSize", ns.UintegerValue(1448))
apps = bulk.Install(nodes.Get(0))
apps.Start(ns.Seconds(0.0))
ns.Simulator.Stop(ns.Seconds(seconds))
t_run = time.perf_counter()
ns.Simulator.Run()
run_s = time.perf_counter() - t_run
sink = ns.DynamicCast[ns.PacketSink](sinks.Get(0))
rx = int(sink.GetTotalRx())
ns.Simulator.Destroy()
print(json.dumps({"run_s": run_s, "setup_s": t_run - t_start, "rx_bytes": rx}))
"""


def _ns3(python: str, seconds: float, hops: int) -> dict:
    t = time.perf_counter()
    out = subprocess.run(
        [python, "-c", NS3_PROGRAM, str(seconds), str(hops)], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"ns-3 failed (exit {out.returncode}): {out.stderr.strip()[-800:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"sim_s": r["run_s"], "process_s": wall, "goodput_mbps": r["rx_bytes"] * 8 / seconds / 1e6}


def _leoguard(seconds: float) -> dict:
    exe = str(Path(sys.executable).parent / "leoguard")
    args = [exe, "run", str(ROOT / "scenarios/bench-chain.toml"), "--duration", str(seconds), "--json"]
    args += ["--out", "/tmp/leoguard-ns3-bench"]
    t = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"leoguard failed (exit {out.returncode}): {out.stderr.strip()[-800:]}")
    s = json.loads(out.stdout)
    return {
        "sim_s": s["run_s"] if "run_s" in s else s["wall_s"],
        "process_s": wall,
        "goodput_mbps": s["flows"][0]["goodput_bps"] / 1e6,
        "packet_hops": s.get("packet_hops"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns3-python", required=True, help="an interpreter with the ns3 wheel installed")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.seconds <= 0 or a.runs <= 0:
        sys.exit("invalid --seconds/--runs: must be > 0")
    ns3, lg = [], []
    for _ in range(a.runs):  # alternated, so drift in the machine's speed hits both alike
        ns3.append(_ns3(a.ns3_python, a.seconds, 9))
        lg.append(_leoguard(a.seconds))

    def med(rows: list[dict], k: str) -> float:
        return statistics.median(r[k] for r in rows)

    res = {
        "seconds": a.seconds,
        "runs": a.runs,
        "ns3": {k: [round(r[k], 4) for r in ns3] for k in ("sim_s", "process_s", "goodput_mbps")},
        "leoguard": {k: [round(r[k], 4) for r in lg] for k in ("sim_s", "process_s", "goodput_mbps")},
        "speedup": round(med(ns3, "sim_s") / med(lg, "sim_s"), 1),
        "speedup_process": round(med(ns3, "process_s") / med(lg, "process_s"), 1),
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
