"""The scenario's flows as apps: a kernel tcp flow (iperf3, with its TCP_INFO samplers), a tcp flow on
leoguard's own TCP (leoguard-transport, transport.py), a cbr flow (the UDP probe, udpprobe.py), a web
flow (nginx and real Chromium, web.py), each tcp and cbr flow with its pings (`emu.ping_interval_ms`,
between the same hosts, for as long as it sends), and the liquid tunnel (liquid.py) that carries the
tcp flows `[liquid]` names. Flow i's server listens on (and the data plane accounts it by) port
BASE_PORT + i; its programs are tagged `server<i>`, `client<i>`, `ping<i>`, `tcpinfo<i>` in the work
directory."""

from __future__ import annotations

import json
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from leoguard.emu import tcpinfo, transport
from leoguard.emu.apps.base import BASE_PORT, TC_EF, AppHosts, Proc, RunApp, RunTables
from leoguard.emu.hosts import Lab, v6_addr
from leoguard.emu.liquid import TUNNEL_PORT, start_tunnels, stop_tunnels
from leoguard.emu.transport import KERNEL_CC, flow_stack
from leoguard.errors import LeoguardError
from leoguard.scenario import Flow, Scenario

NO_OUTPUT = (None, "", "")
"""A program's (exit code, stdout, stderr) when it never ran."""


class FlowApp(RunApp, ABC):
    """Scenario flow `i` as an app: its two hosts, born with its congestion control (the kernel's name
    for it, cubic for the rest); one data-plane flow from its source to its port; its client started
    at `start_s` once it is sure to send for 0.5 s; its pings; its `flows` row (kind-specific figures
    from `_fill`) and its `pings` rows."""

    proto = 17
    """IP protocol of its packets on the emulated links (the UDP probe's, leoguard's TCP over UDP)."""
    pings = True
    """Whether `emu.ping_interval_ms` pings ride along it."""

    def __init__(self, i: int, f: Flow, fc: dict[str, Any], scenario: Scenario, path: list[Any] | None) -> None:
        self.i, self.f, self.scenario, self.path = i, f, scenario, path
        self.src: int = fc["src"]
        self.dst: int = fc["dst"]
        self.port = BASE_PORT + i
        self.name = f"flows[{i}]"
        self.start_s = f.start_s
        self.server: Any = None
        self.client: Any = None
        self.ping: Proc | None = None

    def tools(self) -> list[str]:
        return ["ping"] if self.pings and self.scenario.emu.ping_interval_ms is not None else []

    def host_cc(self) -> list[tuple[int, str | None]]:
        cc = KERNEL_CC.get(self.f.cc, "cubic")
        return [(self.src, cc), (self.dst, cc)]

    def flows(self) -> list[dict[str, Any]]:
        return [{"src": self.src, "dst": self.dst, "proto": self.proto, "port": self.port}]

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        f, sc = self.f, self.scenario
        at = t0_ns + int(f.start_s * 1e9)
        while (now := time.monotonic_ns()) < at:
            time.sleep(min(0.05, (at - now) / 1e9))
        rtt = 2 * sum(link[3] for link in self.path) / 1e9 if self.path else 0.1
        run_s = sc.duration_s - f.start_s - sc.emu.tail_s - 4 * rtt
        if run_s < 0.5:
            raise LeoguardError(
                f"invalid flows[{self.i}].start_s = {f.start_s}: the emulator needs it to leave at least 0.5 s of "
                f"sending before the end minus emu.tail_s ({sc.emu.tail_s} s) and 4 RTTs"
            )
        self._start_client(hosts, at, run_s)
        if self.pings and sc.emu.ping_interval_ms is not None:
            self.ping = _start_ping(hosts, self, run_s, sc.emu.ping_interval_ms)

    @abstractmethod
    def _start_client(self, hosts: AppHosts, at_ns: int, run_s: float) -> None:
        """Starts the sending side at CLOCK_MONOTONIC `at_ns` (now), to send for `run_s` seconds."""

    def finish(self, timeout_s: float) -> dict[str, Any]:
        # Server, client, ping: each (exit code, stdout, stderr).
        raw = {}
        for key, p in (("server", self.server), ("client", self.client), ("ping", self.ping)):
            if p is not None:
                raw[key] = p.finish(timeout_s)
        return raw

    def collect(self, raw: dict[str, Any], dataplane: list[dict[str, Any]], out: RunTables) -> None:
        f, dpf = self.f, dataplane[0]
        net_loss = 1.0 - dpf["delivered"] / dpf["sent"] if dpf["sent"] else 0.0
        row = {
            "flow": self.i, "kind": f.kind, "cc": f.cc if f.kind == "tcp" else None, "src": out.name(self.src),
            "dst": out.name(self.dst), "goodput_bps": 0.0, "delivered_bytes": 0, "retransmissions": 0, "rtos": None,
            "endpoint_loss": 0.0, "network_loss": round(net_loss, 6), "fct_s": None,
            "owd_ms_p50": dpf["owd_ms"]["p50"], "owd_ms_p99": dpf["owd_ms"]["p99"], "reordered": dpf["reordered"],
            "stack": flow_stack(f) if f.kind == "tcp" else None, "tlps": None, "dsacks": None, "undos": None,
        }  # fmt: skip
        self._fill(row, raw, dpf, out)
        out.flows.append(row)
        if "ping" in raw:
            out.pings.extend(_ping_rows(self.i, raw["ping"][1], out.emu))

    @abstractmethod
    def _fill(self, row: dict[str, Any], raw: dict[str, Any], dpf: dict[str, Any], out: RunTables) -> None:
        """The kind's figures into its `flows` row (and its other tables' rows into `out`)."""


def _start_ping(hosts: AppHosts, flow: FlowApp, run_s: float, interval_ms: float) -> Proc:
    """Pings from the flow's source to its destination (its Traffic Class) for `run_s` seconds."""
    count = max(1, int(run_s * 1000 / interval_ms))
    # -D: each reply line starts with its wall-clock time, so each probe's send time is known in
    # model time (the reply's time less its RTT), not only its order.
    opts = ["-6", "-n", "-D", "-i", f"{interval_ms / 1000:.3f}", "-c", str(count)]
    if flow.f.delay_sensitive:
        opts += ["-Q", str(TC_EF)]
    return hosts.spawn(flow.src, ["ping", *opts, v6_addr(flow.dst)], f"ping{flow.i}")


def _ping_rows(i: int, out: str, emu: dict[str, Any]) -> list[dict[str, Any]]:
    """Flow i's `pings` rows from ping's output: seq, RTT and send time in model seconds."""
    rows = []
    for ln in out.splitlines():
        if "time=" in ln and "icmp_seq=" in ln:
            seq = int(ln.split("icmp_seq=")[1].split()[0])
            rtt = float(ln.split("time=")[1].split()[0])
            sent = None
            if ln.startswith("[") and "t0_realtime_ns" in emu:
                # The reply's wall-clock time less its RTT, in model seconds.
                sent = float(ln[1 : ln.index("]")]) - emu["t0_realtime_ns"] / 1e9 - rtt / 1e3
            rows.append({"flow": i, "seq": seq, "rtt_ms": rtt, "sent_s": sent})
    return rows


class LiquidTunnel(RunApp):
    """The `[liquid]` tunnel ends (leoguard-tunnel, one pair per pair of hosts) as an app: up before any
    flow's server and down after every other app has finished (`RunApps`); each tcp flow it carries
    sends to its destination's address inside the tunnel (`inner`), and the data plane accounts that
    flow as the tunnel's datagrams. Its ends' exit counters go to `EmuResults.emulator["liquid"]`."""

    name = "liquid"

    def __init__(self, scenario: Scenario, flows: list[dict[str, Any]], tunnelled: list[int]) -> None:
        self.scenario, self.core_flows, self.tunnelled = scenario, flows, tunnelled
        self.inner: dict[int, str] = {}
        self._hosts: AppHosts | None = None

    def start_servers(self, hosts: AppHosts) -> None:
        self._hosts = hosts
        self.inner = start_tunnels(self.scenario, self.core_flows, hosts.lab, hosts.wdir, hosts.stack, self.tunnelled)

    def finish(self, timeout_s: float) -> dict[str, Any]:
        assert self._hosts is not None  # finish follows start_servers
        return stop_tunnels(self._hosts.lab, self._hosts.wdir, self.inner)

    def collect(self, raw: Any, dataplane: list[dict[str, Any]], out: RunTables) -> None:
        out.emu["liquid"] = raw


class KernelTcp(FlowApp):
    """A tcp flow on the kernel's TCP: iperf3 (`-P emu.streams` connections, `-O emu.omit_s`), through
    the liquid `tunnel` when it carries the flow; with `[emu] tcpinfo_ms` (and no tunnel), a TCP_INFO
    sampler in its source host (tcpinfo.py)."""

    def __init__(
        self, i: int, f: Flow, fc: dict[str, Any], scenario: Scenario, path: Any, tunnel: LiquidTunnel | None
    ) -> None:
        super().__init__(i, f, fc, scenario, path)
        self.tunnel = tunnel
        self.samplers: list = []

    def tools(self) -> list[str]:
        return ["iperf3", *super().tools()]

    def flows(self) -> list[dict[str, Any]]:
        if self.tunnel is None:
            return [{"src": self.src, "dst": self.dst, "proto": 6, "port": self.port}]
        # A flow inside the liquid tunnel crosses the network as the tunnel's datagrams.
        return [{"src": self.src, "dst": self.dst, "proto": 17, "port": TUNNEL_PORT}]

    def start_servers(self, hosts: AppHosts) -> None:
        self.server = hosts.spawn(self.dst, ["iperf3", "-s", "-1", "-p", str(self.port), "-J"], f"server{self.i}")
        hosts.wait_listening(self.server, self.port)
        sc = self.scenario
        if sc.emu.tcpinfo_ms is not None and self.tunnel is None:
            flows = [(self.i, self.src, self.port)]
            self.samplers = tcpinfo.start(hosts.spawn, flows, sc.emu.tcpinfo_ms, sc.duration_s + 1.0, hosts.wdir)

    def _start_client(self, hosts: AppHosts, at_ns: int, run_s: float) -> None:
        f, emu = self.f, self.scenario.emu
        to = self.tunnel.inner[self.i] if self.tunnel is not None else v6_addr(self.dst)
        args = ["iperf3", "-c", to, "-p", str(self.port), "-J", "-C", KERNEL_CC[f.cc], "-P", str(emu.streams)]
        if f.bytes is not None:
            args += ["-n", str(f.bytes)]
        else:
            # -O's seconds come on top of -t's.
            args += ["-t", f"{max(0.5, run_s - emu.omit_s):.3f}"]
        if f.rate_mbps is not None:
            args += ["-b", f"{f.rate_mbps}M"]
        if emu.omit_s > 0:
            args += ["-O", f"{emu.omit_s:g}"]
        if f.delay_sensitive:
            args += ["-S", str(TC_EF)]
        self.client = hosts.spawn(self.src, args, f"client{self.i}")

    def stop(self) -> None:
        tcpinfo.stop(self.samplers)

    def _fill(self, row: dict[str, Any], raw: dict[str, Any], dpf: dict[str, Any], out: RunTables) -> None:
        i, f = self.i, self.f
        rc, stdout, err = raw.get("client", NO_OUTPUT)
        try:
            rep = json.loads(stdout)
        except ValueError:
            rep = {"error": f"iperf3 printed no JSON (exit {rc}): {err.strip()[-500:]}"}
            if rc is None:
                # Still running when the network stopped: its final exchange of results (a few round
                # trips, plus a timeout for every lost message) did not fit in the run's last seconds.
                rep["error"] += (
                    f" it had not finished when the emulated network stopped; give it a longer tail "
                    f"(emu.tail_s, now {self.scenario.emu.tail_s:g} s)"
                )
        out.tools[f"iperf3_{i}"] = {k: rep.get(k) for k in ("error", "start", "end")}
        out.tools[f"iperf3_{i}"]["received_mbps"] = transport.iperf3_received(raw.get("server", NO_OUTPUT)[1])
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
        out.series.extend(transport.iperf3_series(i, rep, round(f.start_s * 1e9)))
        out.tcpinfo.extend(tcpinfo.rows(self.samplers, out.t0))


class LeoguardTcp(FlowApp):
    """A tcp flow on leoguard's own TCP: leoguard-transport's receiver and sender over UDP (transport.py),
    told to end once the network has stopped; a StarTCP flow adds `startcp` and `interruptions` rows."""

    def __init__(self, i: int, f: Flow, fc: dict[str, Any], scenario: Scenario, path: Any) -> None:
        super().__init__(i, f, fc, scenario, path)
        self.exe = "leoguard-transport"
        self.report: Path | None = None

    def tools(self) -> list[str]:
        return ["leoguard-transport", *super().tools()]

    def start_servers(self, hosts: AppHosts) -> None:
        from leoguard.tunnel import binary

        self.exe = str(binary("leoguard-transport"))
        self.report = hosts.wdir / f"transport{self.i}.json"
        args = transport.receiver_args(self.exe, self.scenario, self.f, v6_addr(self.dst), self.port, str(self.report))
        self.server = hosts.spawn(self.dst, args, f"server{self.i}")
        hosts.wait_bound(self.server, self.port)

    def _start_client(self, hosts: AppHosts, at_ns: int, run_s: float) -> None:
        tclass = TC_EF if self.f.delay_sensitive else 0
        args = transport.sender_args(
            self.exe, self.scenario, self.f, v6_addr(self.dst), self.port, run_s, hosts.lab.mtu, tclass
        )
        self.client = hosts.spawn(self.src, args, f"client{self.i}")

    def stop(self) -> None:
        # The emulated network has stopped: leoguard-transport ends still running (a sender that had not
        # finished, a receiver lingering for repeated FINs) report what they have and exit.
        for p in (self.server, self.client):
            if p is not None:
                p.stop()

    def finish(self, timeout_s: float) -> dict[str, Any]:
        raw = super().finish(timeout_s)
        if self.report is not None and self.report.exists():
            raw["transport"] = self.report.read_text()
        return raw

    def _fill(self, row: dict[str, Any], raw: dict[str, Any], dpf: dict[str, Any], out: RunTables) -> None:
        i, f = self.i, self.f
        sender = raw.get("client", NO_OUTPUT)
        got, series, rep = transport.flow_results(i, f, self.scenario, sender, raw.get("transport"), out.t0)
        row.update(got)
        row["endpoint_loss"] = row["network_loss"]
        out.series.extend(series)
        out.tools[f"transport_{i}"] = rep
        if f.cc == "startcp":
            stalls, gaps = transport.startcp_rows(i, rep["send"], rep["recv"], out.t0)
            out.startcp.extend(stalls)
            out.interruptions.extend(gaps)


class Probe(FlowApp):
    """A cbr flow: the UDP probe's receiver and its paced sender (udpprobe.py), both at real-time priority,
    with `emu.udp_gso_segments` datagrams a write; each received datagram is a `packets` row."""

    def __init__(self, i: int, f: Flow, fc: dict[str, Any], scenario: Scenario, path: Any) -> None:
        super().__init__(i, f, fc, scenario, path)
        self.records_file: Path | None = None

    def start_servers(self, hosts: AppHosts) -> None:
        self.records_file = hosts.wdir / f"probe{self.i}.json"
        args = [sys.executable, "-m", "leoguard.emu.udpprobe", "recv", v6_addr(self.dst), str(self.port)]
        args += [str(self.scenario.duration_s + 2.0), str(self.records_file)]
        self.server = hosts.spawn(self.dst, args, f"server{self.i}", realtime=True)
        hosts.wait_bound(self.server, self.port)

    def _start_client(self, hosts: AppHosts, at_ns: int, run_s: float) -> None:
        f = self.f
        args = [sys.executable, "-m", "leoguard.emu.udpprobe", "send", v6_addr(self.dst), str(self.port)]
        args += [str(f.rate_mbps * 1e6), str(f.size), f"{run_s:.3f}", str(TC_EF if f.delay_sensitive else 0)]
        args += [str(self.scenario.emu.udp_gso_segments)]
        self.client = hosts.spawn(self.src, args, f"client{self.i}", realtime=True)

    def finish(self, timeout_s: float) -> dict[str, Any]:
        raw = super().finish(timeout_s)
        probe = self.records_file
        got = json.loads(probe.read_text()) if probe is not None and probe.exists() else {}
        raw["records"] = got.get("records", [])
        raw["kernel_udp_errors"] = got.get("kernel_udp_errors", {})
        return raw

    def _fill(self, row: dict[str, Any], raw: dict[str, Any], dpf: dict[str, Any], out: RunTables) -> None:
        i, f, t0 = self.i, self.f, out.t0
        stdout = raw.get("client", NO_OUTPUT)[1]
        rep = json.loads(stdout) if stdout.strip() else {"sent": 0, "send_errors": 0}
        sent_n = rep["sent"]
        records = raw["records"]
        seqs = {r[0] for r in records}
        owd = [(r[2] - r[1]) / 1e6 for r in records]
        row["delivered_bytes"] = len(seqs) * f.size
        active = max(1e-9, self.scenario.duration_s - f.start_s)
        row["goodput_bps"] = len(seqs) * f.size * 8 / active
        row["endpoint_loss"] = round(1.0 - len(seqs) / sent_n, 6) if sent_n else 0.0
        row["owd_ms_p50"] = round(_percentile(owd, 0.5), 4) if owd else None
        row["owd_ms_p99"] = round(_percentile(owd, 0.99), 4) if owd else None
        out.tools[f"probe_{i}"] = {
            "sent": sent_n,
            "send_errors": rep.get("send_errors", 0),
            "entered_network": dpf["sent"],
            "received": len(records),
            "unique": len(seqs),
            "kernel_udp_errors": raw.get("kernel_udp_errors", {}),
        }
        # Datagrams the receiving host's kernel took in and lost before the probe's socket are the
        # hosts' drops, by cause (the data plane counts them delivered).
        for cause, n in raw.get("kernel_udp_errors", {}).items():
            drops = out.emu.setdefault("drops", {})
            drops[cause] = drops.get(cause, 0) + n
        out.packets.extend((i, r[0], r[1] - t0, r[2] - t0) for r in records)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Web(FlowApp):
    """A web flow: its corpus pages served by nginx in the destination's host (HTTP/2) and loaded one after
    another in real Chromium in the source's (web.py), until its sending time is over; no pings. The
    data plane accounts the server's responses (any TCP port between the two hosts) and marks them EF
    when the flow is delay-sensitive."""

    pings = False

    def flows(self) -> list[dict[str, Any]]:
        mark = TC_EF if self.f.delay_sensitive else None
        return [{"src": self.dst, "dst": self.src, "proto": 6, "port": 0, "mark_tc": mark}]

    def start_servers(self, hosts: AppHosts) -> None:
        from leoguard.emu.web import WebServer, materialise_site

        self.site = materialise_site(self.f.corpus_seed, self.f.page_list(), hosts.wdir / f"site{self.i}")
        hosts.stack.enter_context(WebServer(hosts.lab.hosts[self.dst].netns, self.site, [v6_addr(self.dst)]))

    def _start_client(self, hosts: AppHosts, at_ns: int, run_s: float) -> None:
        self.client = _WebLoads(hosts.lab, self.site, self.src, self.dst, self.f.page_list(), at_ns + int(run_s * 1e9))

    def _fill(self, row: dict[str, Any], raw: dict[str, Any], dpf: dict[str, Any], out: RunTables) -> None:
        loads = json.loads(raw.get("client", (None, "[]", ""))[1])
        for ld in loads:
            plt, si = ld.get("plt_ms"), ld.get("speed_index_ms")
            out.web.append(
                {
                    "flow": self.i, "page": ld["page"], "plt_s": plt / 1e3 if plt is not None else None,
                    "speed_index_s": si / 1e3 if si is not None else None, "requests": ld.get("requests"),
                    "bytes": ld.get("bytes"), "protocol": ld.get("protocol"), "error": ld.get("error"),
                }
            )  # fmt: skip
        row["delivered_bytes"] = sum(ld.get("bytes") or 0 for ld in loads)
        # Browser and server use the algorithm their connections are born with (their routes',
        # hosts.py): the one actually in effect is reported.
        row["cc"] = out.host_cc.get(self.dst)
        row["endpoint_loss"] = row["network_loss"]


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
        """Waits up to `timeout` s for the loads; returns (0, or None if still loading, the rows as JSON, "")."""
        self._t.join(max(0.0, timeout))
        return (0 if not self._t.is_alive() else None, json.dumps(self.rows), "")


def flow_app(
    i: int, f: Flow, fc: dict[str, Any], scenario: Scenario, path: Any, tunnel: LiquidTunnel | None
) -> FlowApp:
    """Scenario flow `i` (its model, its core spec `fc`, its path at t = 0) as the app of its kind;
    `tunnel`: the liquid tunnel when it carries the flow."""
    if f.kind == "web":
        return Web(i, f, fc, scenario, path)
    if f.kind == "tcp" and flow_stack(f) == "leoguard":
        return LeoguardTcp(i, f, fc, scenario, path)
    if f.kind == "tcp":
        return KernelTcp(i, f, fc, scenario, path, tunnel)
    return Probe(i, f, fc, scenario, path)
