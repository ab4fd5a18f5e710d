"""Running a scenario on the real-time emulator: `emulate(scenario) -> EmuResults`.

The orchestrator validates the scenario with the simulator's rules, refuses what cannot run in real
time, makes a network namespace per flow end (hosts.py), starts the data plane
(`python -m leoguard.emu.dataplane`, pinned to one CPU), configures the hosts' TUN devices, starts
the real software of each flow at its start time (iperf3 for tcp on the kernel's TCP, leoguard-transport
for tcp on leoguard's own (transport.py), the UDP probe for cbr, ping for RTT probes), and turns what the
tools and the data plane measured into the simulator's result tables."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from leoguard import _core, sysdeps
from leoguard.emu import tcpinfo, transport, udpprobe
from leoguard.emu.hosts import Lab, cleanup, softnet_drops, v6_addr
from leoguard.emu.liquid import TUNNEL_PORT, liquid_flows, start_tunnels, stop_tunnels
from leoguard.emu.results import EmuResults
from leoguard.emu.transport import KERNEL_CC, flow_stack
from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario, load_scenario
from leoguard.simulate import interruptions_table, lossy_seconds_table, startcp_table

BASE_PORT = 5201
TC_EF = 0xB8
"""IPv6 Traffic Class of delay-sensitive flows (DSCP EF): what SATGUARD processes (§3.5)."""


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


class _Proc:
    """A tool running in a host, its output captured to a file, kept off the data plane's CPU."""

    cpus: set[int] | None = None
    transport_exe: str = "leoguard-transport"

    def __init__(self, lab: Lab, host: int, args: list[str], work: Path, tag: str, realtime: bool = False):
        self.out = work / f"{tag}.out"
        self.err = work / f"{tag}.err"
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.p = subprocess.Popen(
                [*lab.hosts[host].exec_prefix(), *args], stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=self._pin_rt if realtime else self._pin,
            )  # fmt: skip
        lab.add_child(self.p.pid)

    @classmethod
    def _pin(cls) -> None:
        if cls.cpus:
            os.sched_setaffinity(0, cls.cpus)

    @classmethod
    def _pin_rt(cls) -> None:
        # The UDP probe stamps and paces its own packets: real-time priority keeps other work on the
        # hosts' CPUs from stalling it (it sleeps between packets, so it cannot starve them).
        cls._pin()
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))

    def stop(self) -> None:
        """Asks the tool to exit (SIGTERM) if it still runs."""
        if self.p.poll() is None:
            with contextlib.suppress(OSError):
                self.p.send_signal(signal.SIGTERM)

    def finish(self, timeout: float) -> tuple[int | None, str, str]:
        try:
            rc = self.p.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        return rc, self.out.read_text(errors="replace"), self.err.read_text(errors="replace")


@dataclass
class AppHosts:
    """What an app (`emulate`'s `apps`) gets to start its software in the run's hosts."""

    lab: Lab
    wdir: Path

    def spawn(self, node: int, args: list[str], tag: str, realtime: bool = False) -> _Proc:
        """Starts `args` in node's host, off the data plane's CPU (with `realtime`, at SCHED_FIFO priority,
        as the UDP probe), output to `<tag>.out`/`.err` in the work directory; `.stop()` sends SIGTERM,
        `.finish(timeout)` returns (exit code, stdout, stderr)."""
        return _Proc(self.lab, node, args, self.wdir, tag, realtime=realtime)

    def wait_bound(self, proc: _Proc, port: int) -> None:
        """Waits until `proc` has bound UDP `port`."""
        _wait_listening(proc.p.pid, port, "udp")


class App(Protocol):
    """Software run in the emulated hosts beside (or instead of) the scenario's flows: the data plane
    accounts its packets as one more flow (the flow table's index after the scenario's)."""

    name: str

    def hosts(self) -> list[int]:
        """The scenario nodes whose hosts it needs."""
        ...

    def account(self) -> dict[str, int]:
        """Its data direction for the data plane: {"src", "dst", "proto", "port"} (destination port; 0: any),
        and "leotp": true for a LEOTP flow whose datagrams the data plane's mid nodes take in."""
        ...

    def start_servers(self, hosts: AppHosts) -> None:
        """Starts what must listen before the run begins."""
        ...

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        """Starts the rest at CLOCK_MONOTONIC `t0_ns`, model time 0 (called just before it)."""
        ...

    def finish(self, timeout_s: float) -> Any:
        """The emulated network has stopped: stops what still runs and returns its raw output."""
        ...

    def results(self, raw: Any, dataplane_flow: dict[str, Any]) -> Any:
        """Its results from `finish`'s output and the data plane's figures of its flow."""
        ...


def _wait_listening(pid: int, port: int, proto: str, timeout: float = 5.0) -> None:
    """Waits until process `pid` (in its own namespace) listens on `port` (TCP) or is bound (UDP)."""
    want = f":{port:04X} "
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for table in (f"/proc/{pid}/net/{proto}6", f"/proc/{pid}/net/{proto}"):
            with contextlib.suppress(OSError):
                for line in Path(table).read_text().splitlines()[1:]:
                    cols = line.split()
                    if want.strip() in cols[1] and (proto == "udp" or cols[3] == "0A"):
                        return
        time.sleep(0.02)
    raise LeoguardError(f"a {proto} server on port {port} did not start within {timeout} s")


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


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


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
    paths = check(scenario, spec)
    sysdeps.need("ip")
    if any(f.kind == "tcp" and flow_stack(f) == "kernel" for f in scenario.flows):
        sysdeps.need("iperf3")
    own_tcp = transport.leoguard_flows(scenario)
    if own_tcp:
        from leoguard.tunnel import binary

        _Proc.transport_exe = str(binary("leoguard-transport"))
    if scenario.emu.ping_interval_ms is not None:
        sysdeps.need("ping")
    cleanup()
    flows = spec["flows"]
    ends: dict[int, str] = {}
    for f, fc in zip(scenario.flows, flows, strict=True):
        cc = KERNEL_CC.get(f.cc, "cubic")
        for n in (fc["src"], fc["dst"]):
            # A host's connections are born with its algorithm (hosts.py); iperf3 switches each
            # to its flow's after connect(). A switch to BBR starts BBR whole, but one from BBR
            # leaves BBR's pacing on, so a host with any non-BBR flow is born with that one.
            if ends.get(n, "bbr") == "bbr":
                ends[n] = cc
    for app in apps:
        for n in app.hosts():
            ends.setdefault(n, "cubic")
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
        overhead = _core.scheme_header_bytes(scheme)
        lab.create(ends, scenario.emu.mtu - overhead)
        tunnelled = liquid_flows(scenario)
        cpu = scenario.emu.cpu if scenario.emu.cpu is not None else max(os.sched_getaffinity(0))
        _Proc.cpus = _app_cpus(cpu)
        # What this process starts itself (the browser of web flows) stays off the data plane's CPU too.
        os.sched_setaffinity(0, _Proc.cpus)
        cfg = {
            "hosts": [
                {"node": h.node, "netns": h.netns_path, "tun": h.tun, "addrs": h.addrs} for h in lab.hosts.values()
            ],
            "flows": [
                # A web flow's data are the server's responses (any TCP port between the two hosts).
                {
                    "id": i,
                    "src": fc["dst"],
                    "dst": fc["src"],
                    "proto": 6,
                    "port": 0,
                    "mark_tc": TC_EF if f.delay_sensitive else None,
                }
                if f.kind == "web"
                else {
                    # A flow inside the liquid tunnel crosses the network as the tunnel's datagrams.
                    "id": i,
                    "src": fc["src"],
                    "dst": fc["dst"],
                    "proto": 17 if f.kind != "tcp" or i in tunnelled or i in own_tcp else 6,
                    "port": TUNNEL_PORT if i in tunnelled else BASE_PORT + i,
                }
                for i, (f, fc) in enumerate(zip(scenario.flows, flows, strict=True))
            ]
            + [{"id": len(flows) + k, **app.account()} for k, app in enumerate(apps)],
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
        assert dp.stdout is not None and dp.stdin is not None
        line = dp.stdout.readline()
        msg = json.loads(line) if line.strip() else {"error": (wdir / "dataplane.err").read_text()[-2000:]}
        if "error" in msg:
            raise LeoguardError(f"the emulator's data plane did not start: {msg['error'].strip()}")
        lab.configure(_Proc.cpus if scenario.emu.rps else None)
        inner = start_tunnels(scenario, flows, lab, wdir, stack, tunnelled)
        sites: dict[int, Any] = {}
        procs = _start_servers(scenario, flows, lab, wdir, stack, sites)
        samplers = _start_tcpinfo(scenario, flows, AppHosts(lab, wdir))
        app_hosts = AppHosts(lab, wdir)
        for app in apps:
            app.start_servers(app_hosts)
        backlog0 = softnet_drops()
        t0 = time.monotonic_ns() + 200_000_000
        dp.stdin.write(f"go {t0}\n")
        dp.stdin.flush()
        for app in apps:
            app.start_clients(app_hosts, t0)
        procs += _start_clients(scenario, flows, lab, wdir, t0, paths, inner, sites)
        end = t0 + int(scenario.duration_s * 1e9)
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
        dp.stdin.write("done\n")
        dp.stdin.flush()
        tcpinfo_df = tcpinfo.collect(samplers, t0)
        remaining = max(0.0, (end - time.monotonic_ns()) / 1e9)
        # The emulated network has stopped: leoguard-transport ends still running (a sender that had not
        # finished, a receiver lingering for repeated FINs) report what they have and exit.
        for i in own_tcp:
            for tag, p in procs:
                if tag in (f"server{i}", f"client{i}") and isinstance(p, _Proc):
                    p.stop()
        outputs: dict[str, Any] = {tag: p.finish(remaining + 2.0) for tag, p in procs}
        app_raw = [app.finish(remaining + 2.0) for app in apps]
        if tunnelled:
            emu["liquid"] = stop_tunnels(lab, wdir, inner)
        for i, f in enumerate(scenario.flows):
            if f.kind == "cbr":
                probe = wdir / f"probe{i}.json"
                outputs[f"probe{i}"] = json.loads(probe.read_text())["records"] if probe.exists() else []
            if i in own_tcp:
                rep = wdir / f"transport{i}.json"
                outputs[f"transport{i}"] = rep.read_text() if rep.exists() else None
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
    res = _results(scenario, spec, emu, outputs, wall, {n: h.cc_in_effect for n, h in lab.hosts.items()})
    for k, app in enumerate(apps):
        res.apps[app.name] = app.results(app_raw[k], emu["flows"][len(flows) + k])
    res.tcpinfo = tcpinfo_df
    if spec.get("capture"):
        res.capture = (wdir / "capture.pcap").read_bytes()
    if own is not None:
        own.cleanup()
    return res


class _WebLoads:
    """A web flow's page loads in real Chromium (leoguard.emu.web), one after another on a thread, until
    the run's sending time is over; pages not started by then get an error row."""

    def __init__(self, lab: Lab, site: Any, src: int, dst: int, pages: list[int], deadline_ns: int):
        import threading

        self.rows: list[dict[str, Any]] = []
        self._t = threading.Thread(target=self._run, args=(lab, site, src, dst, pages, deadline_ns), daemon=True)
        self._t.start()

    def _run(self, lab: Lab, site: Any, src: int, dst: int, pages: list[int], deadline_ns: int) -> None:
        from leoguard.emu.web import load_pages

        for page in pages:
            left = (deadline_ns - time.monotonic_ns()) / 1e9
            if left < 2.0:
                self.rows.append({"page": page, "error": "the run ended before this page was loaded"})
                continue
            try:
                self.rows.extend(load_pages(lab.hosts[src].netns, v6_addr(dst), site, [page], timeout_s=left))
            except LeoguardError as e:
                self.rows.append({"page": page, "error": str(e)})

    def finish(self, timeout: float) -> tuple[int | None, str, str]:
        self._t.join(max(0.0, timeout))
        return (0 if not self._t.is_alive() else None, json.dumps(self.rows), "")


def _start_tcpinfo(scenario: Scenario, flows: list[dict[str, Any]], hosts: AppHosts) -> list:
    """With `[emu] tcpinfo_ms`, a TCP_INFO sampler in each kernel tcp flow's source host (emu/tcpinfo.py)."""
    if scenario.emu.tcpinfo_ms is None:
        return []
    kernel = [
        (i, fc["src"], BASE_PORT + i)
        for i, (f, fc) in enumerate(zip(scenario.flows, flows, strict=True))
        if f.kind == "tcp" and flow_stack(f) == "kernel" and i not in liquid_flows(scenario)
    ]
    return tcpinfo.start(hosts.spawn, kernel, scenario.emu.tcpinfo_ms, scenario.duration_s + 1.0, hosts.wdir)


def _start_servers(
    scenario: Scenario,
    flows: list[dict[str, Any]],
    lab: Lab,
    wdir: Path,
    stack: contextlib.ExitStack,
    sites: dict[int, Any],
) -> list[tuple[str, _Proc]]:
    """Starts each flow's receiving side (iperf3 server, probe receiver, web server); the web flows'
    materialised sites go into `sites`."""
    procs = []
    for i, (f, fc) in enumerate(zip(scenario.flows, flows, strict=True)):
        port = BASE_PORT + i
        dst = fc["dst"]
        if f.kind == "web":
            from leoguard.emu.web import WebServer, materialise_site

            site = materialise_site(f.corpus_seed, f.page_list(), wdir / f"site{i}")
            stack.enter_context(WebServer(lab.hosts[dst].netns, site, [v6_addr(dst)]))
            sites[i] = site
            continue
        if f.kind == "tcp" and flow_stack(f) == "leoguard":
            out = str(wdir / f"transport{i}.json")
            args = transport.receiver_args(_Proc.transport_exe, scenario, f, v6_addr(dst), port, out)
            p = _Proc(lab, dst, args, wdir, f"server{i}")
            _wait_listening(p.p.pid, port, "udp")
        elif f.kind == "tcp":
            p = _Proc(lab, dst, ["iperf3", "-s", "-1", "-p", str(port), "-J"], wdir, f"server{i}")
            _wait_listening(p.p.pid, port, "tcp")
        else:
            args = [sys.executable, "-m", "leoguard.emu.udpprobe", "recv", v6_addr(dst), str(port)]
            args += [str(scenario.duration_s + 2.0), str(wdir / f"probe{i}.json")]
            p = _Proc(lab, dst, args, wdir, f"server{i}", realtime=True)
            _wait_listening(p.p.pid, port, "udp")
        procs.append((f"server{i}", p))
    return procs


def _start_clients(
    scenario: Scenario,
    flows: list[dict[str, Any]],
    lab: Lab,
    wdir: Path,
    t0: int,
    paths: list[Any],
    inner: dict[int, str],
    sites: dict[int, Any],
) -> list[tuple[str, Any]]:
    starts = sorted(range(len(flows)), key=lambda i: scenario.flows[i].start_s)
    procs = []
    for i in starts:
        f, fc = scenario.flows[i], flows[i]
        at = t0 + int(f.start_s * 1e9)
        while (now := time.monotonic_ns()) < at:
            time.sleep(min(0.05, (at - now) / 1e9))
        rtt = 2 * sum(link[3] for link in paths[i]) / 1e9 if paths[i] else 0.1
        run_s = scenario.duration_s - f.start_s - scenario.emu.tail_s - 4 * rtt
        if run_s < 0.5:
            raise LeoguardError(
                f"invalid flows[{i}].start_s = {f.start_s}: the emulator needs it to leave at least 0.5 s of sending "
                f"before the end minus emu.tail_s ({scenario.emu.tail_s} s) and 4 RTTs"
            )
        port = str(BASE_PORT + i)
        src, dst = fc["src"], fc["dst"]
        if f.kind == "web":
            procs.append((f"web{i}", _WebLoads(lab, sites[i], src, dst, f.page_list(), at + int(run_s * 1e9))))
            continue
        if f.kind == "tcp" and flow_stack(f) == "leoguard":
            tclass = TC_EF if f.delay_sensitive else 0
            args = transport.sender_args(
                _Proc.transport_exe, scenario, f, v6_addr(dst), BASE_PORT + i, run_s, lab.mtu, tclass
            )
        elif f.kind == "tcp":
            args = ["iperf3", "-c", inner.get(i, v6_addr(dst)), "-p", port, "-J", "-C", KERNEL_CC[f.cc]]
            args += ["-P", str(scenario.emu.streams)]
            if f.bytes is not None:
                args += ["-n", str(f.bytes)]
            else:
                # -O's seconds come on top of -t's.
                args += ["-t", f"{max(0.5, run_s - scenario.emu.omit_s):.3f}"]
            if f.rate_mbps is not None:
                args += ["-b", f"{f.rate_mbps}M"]
            if scenario.emu.omit_s > 0:
                args += ["-O", f"{scenario.emu.omit_s:g}"]
            if f.delay_sensitive:
                args += ["-S", str(TC_EF)]
        else:
            args = [sys.executable, "-m", "leoguard.emu.udpprobe", "send", v6_addr(dst), port]
            args += [str(f.rate_mbps * 1e6), str(f.size), f"{run_s:.3f}", str(TC_EF if f.delay_sensitive else 0)]
            args += [str(scenario.emu.udp_gso_segments)]
        procs.append((f"client{i}", _Proc(lab, src, args, wdir, f"client{i}", realtime=f.kind == "cbr")))
        if scenario.emu.ping_interval_ms is not None:
            count = max(1, int(run_s * 1000 / scenario.emu.ping_interval_ms))
            # -D: each reply line starts with its wall-clock time, so each probe's send time is known in
            # model time (the reply's time less its RTT), not only its order.
            ping = ["ping", "-6", "-n", "-D", "-i", f"{scenario.emu.ping_interval_ms / 1000:.3f}", "-c", str(count)]
            if f.delay_sensitive:
                ping += ["-Q", str(TC_EF)]
            procs.append((f"ping{i}", _Proc(lab, src, [*ping, v6_addr(dst)], wdir, f"ping{i}")))
    return procs


def _results(
    scenario: Scenario,
    spec: dict[str, Any],
    emu: dict[str, Any],
    outputs: dict[str, Any],
    wall: float,
    lab_cc: dict[int, str | None],
) -> EmuResults:
    names = spec.get("node_names", [])

    def name(i: int | None) -> str | None:
        return names[i] if i is not None and i < len(names) else None

    rows, pings, tools, packets, web_rows, series = [], [], {}, [], [], []
    stalls: list[dict[str, Any]] = []
    gaps: list[dict[str, Any]] = []
    t0 = emu["t0_ns"]
    for i, (f, fc) in enumerate(zip(scenario.flows, spec["flows"], strict=True)):
        dpf = emu["flows"][i]
        net_loss = 1.0 - dpf["delivered"] / dpf["sent"] if dpf["sent"] else 0.0
        row = {
            "flow": i, "kind": f.kind, "cc": f.cc if f.kind == "tcp" else None, "src": name(fc["src"]),
            "dst": name(fc["dst"]), "goodput_bps": 0.0, "delivered_bytes": 0, "retransmissions": 0, "rtos": None,
            "endpoint_loss": 0.0, "network_loss": round(net_loss, 6), "fct_s": None,
            "owd_ms_p50": dpf["owd_ms"]["p50"], "owd_ms_p99": dpf["owd_ms"]["p99"], "reordered": dpf["reordered"],
            "stack": flow_stack(f) if f.kind == "tcp" else None, "tlps": None, "dsacks": None, "undos": None,
        }  # fmt: skip
        rc, out, err = outputs.get(f"client{i}", (None, "", ""))
        if f.kind == "web":
            loads = json.loads(outputs.get(f"web{i}", (None, "[]", ""))[1])
            for ld in loads:
                plt, si = ld.get("plt_ms"), ld.get("speed_index_ms")
                web_rows.append(
                    {
                        "flow": i, "page": ld["page"], "plt_s": plt / 1e3 if plt is not None else None,
                        "speed_index_s": si / 1e3 if si is not None else None, "requests": ld.get("requests"),
                        "bytes": ld.get("bytes"), "protocol": ld.get("protocol"), "error": ld.get("error"),
                    }
                )  # fmt: skip
            row["delivered_bytes"] = sum(ld.get("bytes") or 0 for ld in loads)
            # Browser and server use the algorithm their connections are born with (their routes',
            # hosts.py): the one actually in effect is reported.
            row["cc"] = lab_cc.get(fc["dst"])
            row["endpoint_loss"] = row["network_loss"]
        elif f.kind == "tcp" and flow_stack(f) == "leoguard":
            got, rows_i, raw = transport.flow_results(i, f, scenario, (rc, out, err), outputs.get(f"transport{i}"), t0)
            row.update(got)
            row["endpoint_loss"] = row["network_loss"]
            series.extend(rows_i)
            tools[f"transport_{i}"] = raw
            if f.cc == "startcp":
                s_i, g_i = transport.startcp_rows(i, raw["send"], raw["recv"], t0)
                stalls.extend(s_i)
                gaps.extend(g_i)
        elif f.kind == "tcp":
            try:
                rep = json.loads(out)
            except ValueError:
                rep = {"error": f"iperf3 printed no JSON (exit {rc}): {err.strip()[-500:]}"}
                if rc is None:
                    # Still running when the network stopped: its final exchange of results (a few round
                    # trips, plus a timeout for every lost message) did not fit in the run's last seconds.
                    rep["error"] += (
                        f" it had not finished when the emulated network stopped; give it a longer tail "
                        f"(emu.tail_s, now {scenario.emu.tail_s:g} s)"
                    )
            tools[f"iperf3_{i}"] = {k: rep.get(k) for k in ("error", "start", "end")}
            tools[f"iperf3_{i}"]["received_mbps"] = transport.iperf3_received(
                outputs.get(f"server{i}", (None, "", ""))[1]
            )
            if "error" in rep and rep.get("error"):
                raise LeoguardError(f"flows[{i}]: iperf3 failed: {rep['error']}")
            recv = rep["end"]["sum_received"]
            sent = rep["end"]["sum_sent"]
            row["goodput_bps"] = float(recv["bits_per_second"])
            row["delivered_bytes"] = int(recv["bytes"])
            row["retransmissions"] = int(sent.get("retransmits", 0))
            row["endpoint_loss"] = row["network_loss"]
            if f.bytes is not None:
                row["fct_s"] = float(recv["seconds"])
            series.extend(transport.iperf3_series(i, rep, round(f.start_s * 1e9)))
        else:
            rep = json.loads(out) if out.strip() else {"sent": 0, "send_errors": 0}
            sent_n = rep["sent"]
            probe = outputs.get(f"probe{i}")
            records = probe or []
            seqs = {r[0] for r in records}
            owd = [(r[2] - r[1]) / 1e6 for r in records]
            row["delivered_bytes"] = len(seqs) * f.size
            active = max(1e-9, scenario.duration_s - f.start_s)
            row["goodput_bps"] = len(seqs) * f.size * 8 / active
            row["endpoint_loss"] = round(1.0 - len(seqs) / sent_n, 6) if sent_n else 0.0
            row["owd_ms_p50"] = round(_percentile(owd, 0.5), 4) if owd else None
            row["owd_ms_p99"] = round(_percentile(owd, 0.99), 4) if owd else None
            tools[f"probe_{i}"] = {
                "sent": sent_n,
                "send_errors": rep.get("send_errors", 0),
                "entered_network": dpf["sent"],
                "received": len(records),
                "unique": len(seqs),
            }
            packets.extend((i, r[0], r[1] - t0, r[2] - t0) for r in records)
        rows.append(row)
        if f"ping{i}" in outputs:
            for ln in outputs[f"ping{i}"][1].splitlines():
                if "time=" in ln and "icmp_seq=" in ln:
                    seq = int(ln.split("icmp_seq=")[1].split()[0])
                    rtt = float(ln.split("time=")[1].split()[0])
                    sent = None
                    if ln.startswith("[") and "t0_realtime_ns" in emu:
                        # The reply's wall-clock time less its RTT, in model seconds.
                        sent = float(ln[1 : ln.index("]")]) - emu["t0_realtime_ns"] / 1e9 - rtt / 1e3
                    pings.append({"flow": i, "seq": seq, "rtt_ms": rtt, "sent_s": sent})
    flows = pl.DataFrame(
        rows,
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
            pl.Series("from_name", [name(i) for i in links["from_node"]], dtype=pl.Utf8),
            pl.Series("to_name", [name(i) for i in links["to_node"]], dtype=pl.Utf8),
            (pl.col("drops_loss") / pl.col("offered").clip(lower_bound=1)).alias("realised_loss"),
        )
    pings_df = pl.DataFrame(
        pings, schema={"flow": pl.Int64, "seq": pl.Int64, "rtt_ms": pl.Float64, "sent_s": pl.Float64}
    )
    packets_df = pl.DataFrame(
        packets,
        schema={"flow": pl.UInt32, "seq": pl.UInt64, "sent_ns": pl.Int64, "received_ns": pl.Int64},
        orient="row",
    )
    # The congestion control each host's connections are born with (iperf3 switches its flows' after
    # connect(): a flow born with BBR stays paced, docs/tcp-trace.md).
    host_cc = {str(n): cc for n, cc in sorted(lab_cc.items())}  # by node number
    meta = {"seed": scenario.seed, "node_names": names, "code_version": _core.__version__, "host_cc": host_cc}
    web_schema = {
        "flow": pl.Int64, "page": pl.Int64, "plt_s": pl.Float64, "speed_index_s": pl.Float64, "requests": pl.Int64,
        "bytes": pl.Int64, "protocol": pl.Utf8, "error": pl.Utf8,
    }  # fmt: skip
    web = pl.DataFrame(web_rows, schema=web_schema)
    series_df = pl.DataFrame(series, schema={k: getattr(pl, v) for k, v in transport.SERIES_SCHEMA.items()})
    series_df = series_df.sort("flow", "t_ns")
    res = EmuResults(scenario, flows, links, pings_df, packets_df, emu, wall, meta, tools, web=web, series=series_df)
    res.startcp = startcp_table(stalls)
    res.interruptions = interruptions_table(gaps)
    res.lossy_seconds = lossy
    return res
