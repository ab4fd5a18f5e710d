"""Running a scenario on the real-time emulator: `emulate(scenario) -> EmuResults`.

The orchestrator validates the scenario with the simulator's rules, refuses what cannot run in real
time, makes a network namespace per flow end (hosts.py), starts the data plane
(`python -m leoguard.emu.dataplane`, pinned to one CPU), configures the hosts' TUN devices, starts the
run's apps (emu/apps: the real software of each flow at its start time, iperf3 for tcp on the kernel's
TCP, leoguard-transport for tcp on leoguard's own (transport.py), the UDP probe for cbr, Chromium for
web, ping for RTT probes; the liquid tunnel; `emulate`'s own `apps`), and turns what the apps and the
data plane measured into the simulator's result tables."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from leoguard import _core, sysdeps
from leoguard.emu import tcpinfo, transport, udpprobe
from leoguard.emu.apps import BASE_PORT, TC_EF, App, AppHosts, Proc, RunApps, RunTables
from leoguard.emu.hosts import Lab, cleanup, softnet_drops
from leoguard.emu.liquid import liquid_flows
from leoguard.emu.results import EmuResults
from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario, load_scenario
from leoguard.simulate import interruptions_table, lossy_seconds_table, startcp_table

__all__ = ["BASE_PORT", "TC_EF", "App", "AppHosts", "EmuResults", "check", "emulate"]


def check(scenario: Scenario, spec: dict[str, Any]) -> list[list[tuple[int, int, int, int]]]:
    """Everything the simulator rejects, and what the emulator cannot do, as field-named errors;
    returns each flow's path at t = 0 as (from, to, rate_bps, delay_ns) links."""
    tunnelled = liquid_flows(scenario)
    for i, f in enumerate(scenario.flows):
        if f.kind in ("webrtc", "leotp"):
            raise LeoguardError(
                f"invalid flows[{i}].kind = {f.kind}: the emulator runs tcp, cbr and web flows (WebRTC on real "
                "packets is not built; LEOTP runs through leoguard.emu.leotp.emulate_leotp or `leoguard emu "
                "leotp-sweep`)"
            )
        if f.kind == "web" and f.http != "2":
            raise LeoguardError(f"invalid flows[{i}].http = {f.http}: the emulator's web server speaks HTTP/2 only")
        if f.kind == "tcp":
            transport.check_flow(scenario, i, f, tunnelled)
        gso = scenario.emu.udp_gso_segments
        if f.kind == "cbr" and gso > 1 and udpprobe.payload_bytes(f.size) * gso > udpprobe.MAX_WRITE:
            raise LeoguardError(
                f"invalid emu.udp_gso_segments = {gso}: flows[{i}] sends {f.size}-byte packets, and {gso} of them "
                f"exceed a UDP write's {udpprobe.MAX_WRITE:,} bytes in one GSO write"
            )
    for name in ("mpep", "tambur"):
        if getattr(scenario, name) is not None:
            raise LeoguardError(f"invalid [{name}]: not available on the emulator yet (docs/emulator.md, status)")
    try:
        paths = _core.emu_check(spec)
    except _core.LeoguardError as e:
        raise LeoguardError(str(e)) from None
    # Real-time feasibility: each bulk TCP flow can fill its bottleneck; every packet then costs one
    # data-plane event per hop, and its ACKs (one per two segments) as many on the way back.
    need = 0.0
    mss_bits = scenario.emu.mtu * 8
    for i, (f, p) in enumerate(zip(scenario.flows, paths, strict=True)):
        if p is None:
            if not any(s in (scenario.topology.kind if scenario.topology else "") for s in ("leo", "constellation")):
                raise LeoguardError(f"invalid flows[{i}]: no route from its src to its dst at t = 0")
            continue
        bottleneck = min(link[2] for link in p)
        if f.kind == "web":
            rate = bottleneck
        elif f.kind == "tcp":
            rate = f.rate_mbps * 1e6 if f.rate_mbps is not None else bottleneck
        else:
            rate = f.rate_mbps * 1e6
        pps = min(rate, bottleneck) / mss_bits
        need += pps * len(p) * (1.5 if f.kind in ("tcp", "web") else 1.0)  # ACKs: one per two segments
    # A per-hop scheme adds a control packet (HAck, ACK) and a hook's work per packet and hop.
    if scenario.satguard is not None or scenario.linkguardian is not None:
        need *= 3.0
    if need > scenario.emu.max_packet_hops_per_s:
        raise LeoguardError(
            f"the scenario cannot run in real time: its flows need about {need:,.0f} packet-hops/s and the data "
            f"plane carries {scenario.emu.max_packet_hops_per_s:,.0f} (emu.max_packet_hops_per_s; measure with "
            "`leoguard bench emu`); lower the link rates or the number of hops"
        )
    return paths


def _app_cpus(dataplane_cpu: int) -> set[int]:
    """The CPUs the hosts' software may use: all but the data plane's, when there is another."""
    cpus = set(os.sched_getaffinity(0))
    return cpus - {dataplane_cpu} if len(cpus) > 1 else cpus


@contextlib.contextmanager
def _no_deep_idle():
    """Holds the kernel's PM QoS CPU latency at 0 while the run lasts: an idle virtual CPU otherwise
    takes about half a millisecond to wake for the hosts' receive processing (the way cyclictest and
    other latency tools run). Without /dev/cpu_dma_latency the run goes on and says so."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except OSError:
        yield False
        return
    try:
        os.write(fd, (0).to_bytes(4, sys.byteorder))
        yield True
    finally:
        os.close(fd)


def emulate(
    scenario: Scenario | str | Path, base_dir: Path | None = None, work: Path | None = None, apps: Sequence[App] = ()
) -> EmuResults:
    """Runs a scenario (a model or a TOML path) on the real-time emulator and returns its results.
    A Ctrl-C stops it: the hosts and the data plane are removed and the interrupt propagates.
    `apps` run their own software in the hosts too (their results in `EmuResults.apps`); with apps, the
    scenario may have no flows of its own (a model made with `model_copy`, on explicit links)."""
    if not isinstance(scenario, Scenario):
        path = Path(scenario)
        base_dir = base_dir or path.parent
        scenario = load_scenario(path)
    spec = scenario.to_core(base_dir)
    run_apps = RunApps.build(scenario, spec, check(scenario, spec), apps)
    sysdeps.need("ip")
    run_apps.need_tools()
    cleanup()
    t_wall = time.perf_counter()
    own = tempfile.TemporaryDirectory(prefix="leoguard-emu-") if work is None else None
    wdir = Path(own.name) if own is not None else Path(work)  # type: ignore[arg-type]
    wdir.mkdir(parents=True, exist_ok=True)
    lab = Lab()
    dp: subprocess.Popen[str] | None = None
    idle_guard = _no_deep_idle()
    low_latency = idle_guard.__enter__()
    stack = contextlib.ExitStack()
    old_affinity = os.sched_getaffinity(0)
    try:
        # The per-hop scheme's options grow every packet on the emulated links: the hosts send that
        # much less, so no emulated link carries more than emu.mtu bytes.
        scheme = (
            "satguard" if scenario.satguard is not None else "linkguardian" if scenario.linkguardian is not None else ""
        )
        lab.create(run_apps.host_cc(), scenario.emu.mtu - _core.scheme_header_bytes(scheme))
        cpu = scenario.emu.cpu if scenario.emu.cpu is not None else max(os.sched_getaffinity(0))
        Proc.cpus = _app_cpus(cpu)
        # What this process starts itself (the browser of web flows) stays off the data plane's CPU too.
        os.sched_setaffinity(0, Proc.cpus)
        dp = _start_dataplane(scenario, spec, base_dir, wdir, lab, run_apps.flow_table(), cpu)
        _wait_ready(dp, wdir)
        lab.configure(Proc.cpus if scenario.emu.rps else None)
        hosts = AppHosts(lab, wdir, stack)
        run_apps.start_servers(hosts)
        backlog0 = softnet_drops()
        t0 = time.monotonic_ns() + 200_000_000
        _send(dp, f"go {t0}")
        run_apps.start_clients(hosts, t0)
        end = t0 + int(scenario.duration_s * 1e9)
        emu = _dataplane_results(dp, wdir, lab, t0, backlog0, low_latency)
        _send(dp, "done")
        run_apps.stop()
        remaining = max(0.0, (end - time.monotonic_ns()) / 1e9)
        raw = run_apps.finish(remaining + 2.0)
        dp.wait(timeout=10)
    finally:
        if dp is not None and dp.poll() is None:
            dp.kill()
            dp.wait()
        stack.close()
        lab.close()
        idle_guard.__exit__(None, None, None)
        os.sched_setaffinity(0, old_affinity)
    wall = time.perf_counter() - t_wall
    tables = RunTables(emu, spec.get("node_names", []), {n: h.cc_in_effect for n, h in lab.hosts.items()})
    run_apps.collect(raw, tables)
    res = _results(scenario, tables, wall)
    if spec.get("capture"):
        res.capture = (wdir / "capture.pcap").read_bytes()
    if own is not None:
        own.cleanup()
    return res


def _start_dataplane(
    scenario: Scenario,
    spec: dict[str, Any],
    base_dir: Path | None,
    wdir: Path,
    lab: Lab,
    flows: list[dict[str, Any]],
    cpu: int,
) -> subprocess.Popen[str]:
    """Starts the data plane on `cpu` with the hosts' TUN devices and the flow table `flows`."""
    cfg = {
        "hosts": [{"node": h.node, "netns": h.netns_path, "tun": h.tun, "addrs": h.addrs} for h in lab.hosts.values()],
        "flows": flows,
        "cpu": cpu,
        "spin_us": scenario.emu.spin_us,
        "pool_packets": scenario.emu.pool_packets,
        "late_us": scenario.emu.late_us,
        "offload": scenario.emu.offload,
    }
    if spec.get("capture"):
        cfg["capture"] = {**spec["capture"], "path": str(wdir / "capture.pcap")}
    # The data plane resolves the scenario itself (a constellation is an object, not JSON). One without
    # flows (only apps) would not pass validation again: it goes as the validated model itself.
    scenario_file = wdir / ("scenario.json" if scenario.flows else "scenario.pickle")
    if scenario.flows:
        scenario_file.write_text(scenario.model_dump_json())
    else:
        import pickle

        scenario_file.write_bytes(pickle.dumps(scenario))
    (wdir / "emu.json").write_text(json.dumps(cfg))
    with open(wdir / "dataplane.err", "wb") as err:
        dp = subprocess.Popen(
            [
                sys.executable, "-m", "leoguard.emu.dataplane", str(scenario_file),
                str(base_dir or Path.cwd()), str(wdir / "emu.json"),
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
        )  # fmt: skip
    lab.add_child(dp.pid)
    return dp


def _wait_ready(dp: subprocess.Popen[str], wdir: Path) -> None:
    """Waits for the data plane's first line: its TUN devices are up (or why it did not start)."""
    assert dp.stdout is not None
    line = dp.stdout.readline()
    msg = json.loads(line) if line.strip() else {"error": (wdir / "dataplane.err").read_text()[-2000:]}
    if "error" in msg:
        raise LeoguardError(f"the emulator's data plane did not start: {msg['error'].strip()}")


def _send(dp: subprocess.Popen[str], command: str) -> None:
    assert dp.stdin is not None
    dp.stdin.write(command + "\n")
    dp.stdin.flush()


def _dataplane_results(
    dp: subprocess.Popen[str], wdir: Path, lab: Lab, t0: int, backlog0: int, low_latency: bool
) -> dict[str, Any]:
    """Waits for the data plane's figures (it prints them when the run's time is over), with the run's
    clocks at model time 0, whether the CPU latency was held, and the hosts' kernels' drops."""
    assert dp.stdout is not None
    line = dp.stdout.readline()
    if not line.strip():
        raise LeoguardError(
            "the emulator's data plane stopped without results: " + (wdir / "dataplane.err").read_text()[-2000:]
        )
    emu = json.loads(line)
    if "error" in emu:
        raise LeoguardError(f"the emulator's data plane failed: {emu['error']}")
    emu["t0_ns"] = t0
    # CLOCK_REALTIME at model time 0 (ping -D stamps its replies with the wall clock).
    emu["t0_realtime_ns"] = time.time_ns() - (time.monotonic_ns() - t0)
    emu["cpu_latency_held"] = low_latency
    # What the hosts' kernels dropped outside the data plane is counted too, by cause.
    for cause, n in {**lab.device_drops(), "host_backlog": softnet_drops() - backlog0}.items():
        if n:
            emu["drops"][cause] = n
    return emu


def _results(scenario: Scenario, t: RunTables, wall: float) -> EmuResults:
    """The run's `EmuResults` from the apps' rows in `t` and the data plane's figures (`t.emu`)."""
    emu, names = t.emu, t.names
    flows = pl.DataFrame(
        t.flows,
        schema_overrides={
            "cc": pl.Utf8, "src": pl.Utf8, "dst": pl.Utf8, "fct_s": pl.Float64, "owd_ms_p50": pl.Float64,
            "owd_ms_p99": pl.Float64, "rtos": pl.Int64, "stack": pl.Utf8, "tlps": pl.Int64, "dsacks": pl.Int64,
            "undos": pl.Int64,
        },
    )  # fmt: skip
    lossy = lossy_seconds_table([(x["from_node"], x["to_node"], x.pop("lossy_seconds", None)) for x in emu["links"]])
    links = pl.DataFrame(emu["links"]) if emu["links"] else pl.DataFrame()
    if len(links):
        links = links.with_columns(
            pl.Series("from_name", [t.name(i) for i in links["from_node"]], dtype=pl.Utf8),
            pl.Series("to_name", [t.name(i) for i in links["to_node"]], dtype=pl.Utf8),
            (pl.col("drops_loss") / pl.col("offered").clip(lower_bound=1)).alias("realised_loss"),
        )
    pings_df = pl.DataFrame(
        t.pings, schema={"flow": pl.Int64, "seq": pl.Int64, "rtt_ms": pl.Float64, "sent_s": pl.Float64}
    )
    packets_df = pl.DataFrame(
        t.packets,
        schema={"flow": pl.UInt32, "seq": pl.UInt64, "sent_ns": pl.Int64, "received_ns": pl.Int64},
        orient="row",
    )
    # The congestion control each host's connections are born with (iperf3 switches its flows' after
    # connect(): a flow born with BBR stays paced, docs/tcp-trace.md).
    host_cc = {str(n): cc for n, cc in sorted(t.host_cc.items())}  # by node number
    meta = {"seed": scenario.seed, "node_names": names, "code_version": _core.__version__, "host_cc": host_cc}
    web_schema = {
        "flow": pl.Int64, "page": pl.Int64, "plt_s": pl.Float64, "speed_index_s": pl.Float64, "requests": pl.Int64,
        "bytes": pl.Int64, "protocol": pl.Utf8, "error": pl.Utf8,
    }  # fmt: skip
    web = pl.DataFrame(t.web, schema=web_schema)
    series_df = pl.DataFrame(t.series, schema={k: getattr(pl, v) for k, v in transport.SERIES_SCHEMA.items()})
    series_df = series_df.sort("flow", "t_ns")
    res = EmuResults(scenario, flows, links, pings_df, packets_df, emu, wall, meta, t.tools, web=web, series=series_df)
    res.startcp = startcp_table(t.startcp)
    res.interruptions = interruptions_table(t.interruptions)
    res.lossy_seconds = lossy
    res.apps.update(t.apps)
    res.tcpinfo = tcpinfo.table(t.tcpinfo)
    return res
