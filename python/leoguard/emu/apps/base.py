"""The one interface of a run's software (`RunApp`), what it starts its programs with (`AppHosts`,
`Proc`), the tables its results go into (`RunTables`), and `emulate`'s `apps` (`App`) behind it
(`External`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from leoguard.emu.hosts import Lab
from leoguard.errors import LeoguardError

BASE_PORT = 5201
"""Flow i's port (its server's, or the data plane's for its packets): BASE_PORT + i."""
TC_EF = 0xB8
"""IPv6 Traffic Class of delay-sensitive flows (DSCP EF): what SATGUARD processes (§3.5)."""


class Proc:
    """A tool running in a host, its output captured to a file, kept off the data plane's CPU."""

    cpus: set[int] | None = None

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
        """Waits up to `timeout` s for the tool (then kills it); returns (exit code or None, stdout, stderr)."""
        try:
            rc = self.p.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        return rc, self.out.read_text(errors="replace"), self.err.read_text(errors="replace")


def wait_listening(pid: int, port: int, proto: str, timeout: float = 5.0) -> None:
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


@dataclass
class AppHosts:
    """What an app gets to start its software in the run's hosts."""

    lab: Lab
    wdir: Path
    stack: contextlib.ExitStack
    """Contexts closed when the run ends, before the hosts are removed (a web flow's server)."""

    def spawn(self, node: int, args: list[str], tag: str, realtime: bool = False) -> Proc:
        """Starts `args` in node's host, off the data plane's CPU (with `realtime`, at SCHED_FIFO priority,
        as the UDP probe), output to `<tag>.out`/`.err` in the work directory; `.stop()` sends SIGTERM,
        `.finish(timeout)` returns (exit code, stdout, stderr)."""
        return Proc(self.lab, node, args, self.wdir, tag, realtime=realtime)

    def wait_bound(self, proc: Proc, port: int) -> None:
        """Waits until `proc` has bound UDP `port`."""
        wait_listening(proc.p.pid, port, "udp")

    def wait_listening(self, proc: Proc, port: int) -> None:
        """Waits until `proc` listens on TCP `port`."""
        wait_listening(proc.p.pid, port, "tcp")


class App(Protocol):
    """Software run in the emulated hosts beside (or instead of) the scenario's flows (`emulate`'s
    `apps`): the data plane accounts its packets as one more flow (the flow table's index after the
    scenario's)."""

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


@dataclass
class RunTables:
    """A run's results as the apps' `collect` fill them in: the rows of the `EmuResults` tables, the
    tools' raw reports, `emulate`'s apps' results by name, and the data plane's figures (`emu`, with
    `t0_ns` and `t0_realtime_ns`: CLOCK_MONOTONIC and CLOCK_REALTIME at model time 0)."""

    emu: dict[str, Any]
    names: list[str]
    """Node names by number (the scenario's)."""
    host_cc: dict[int, str | None]
    """The congestion control each host's connections were born with, as its kernel held it."""
    flows: list[dict[str, Any]] = field(default_factory=list)
    pings: list[dict[str, Any]] = field(default_factory=list)
    packets: list[tuple[int, int, int, int]] = field(default_factory=list)
    web: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    startcp: list[dict[str, Any]] = field(default_factory=list)
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    tcpinfo: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=dict)
    apps: dict[str, Any] = field(default_factory=dict)

    @property
    def t0(self) -> int:
        """CLOCK_MONOTONIC at model time 0, ns."""
        return self.emu["t0_ns"]

    def name(self, node: int | None) -> str | None:
        """A node's name, or None."""
        return self.names[node] if node is not None and node < len(self.names) else None


class RunApp:
    """The one interface of a run's software: a scenario flow of any kind (with its pings and TCP_INFO
    samplers), the liquid tunnel, or one of `emulate`'s apps (`External`). The run calls each phase
    over its apps (`RunApps` orders them): `tools` and `host_cc` before the hosts are made, `flows` for
    the data plane's flow table, `start_servers` before model time 0, `start_clients` just before it,
    `stop` once the emulated network has stopped, `finish` to end what runs and return its raw output,
    and, after the hosts are gone, `collect` to turn that output into `RunTables` rows. Each default
    does nothing."""

    name: str = ""
    """What it is called (an `emulate` app's key in `EmuResults.apps`)."""
    start_s: float = 0.0
    """When its clients start, model seconds (the run starts them in this order)."""

    def tools(self) -> list[str]:
        """Programs it starts that must be installed (a `leoguard-*` one: built)."""
        return []

    def host_cc(self) -> list[tuple[int, str | None]]:
        """The nodes whose hosts it needs, each with the kernel congestion control its connections should
        be born with (None: any; cubic when nothing asks)."""
        return []

    def flows(self) -> list[dict[str, Any]]:
        """Its entries of the data plane's flow table, without "id" (the run numbers every entry):
        {"src", "dst", "proto", "port"} (destination port; 0: any), optionally "mark_tc", "leotp"."""
        return []

    def start_servers(self, hosts: AppHosts) -> None:
        """Starts what must run before model time 0."""

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        """Starts the rest: model time 0 is CLOCK_MONOTONIC `t0_ns` (called just before it)."""

    def stop(self) -> None:
        """The emulated network has stopped: asks what would linger to end."""

    def finish(self, timeout_s: float) -> Any:
        """Waits up to `timeout_s` for each program (then kills it); returns the raw output."""
        return None

    def collect(self, raw: Any, dataplane: list[dict[str, Any]], out: RunTables) -> None:
        """Adds its results from `finish`'s output and the data plane's figures of its `flows` entries."""


class External(RunApp):
    """One of `emulate`'s `apps` behind the run's interface: its hosts are born with any congestion
    control, its one flow-table entry is its `account()`, and its results go to `EmuResults.apps`."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.name = app.name

    def host_cc(self) -> list[tuple[int, str | None]]:
        return [(n, None) for n in self.app.hosts()]

    def flows(self) -> list[dict[str, Any]]:
        return [self.app.account()]

    def start_servers(self, hosts: AppHosts) -> None:
        self.app.start_servers(hosts)

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        self.app.start_clients(hosts, t0_ns)

    def finish(self, timeout_s: float) -> Any:
        return self.app.finish(timeout_s)

    def collect(self, raw: Any, dataplane: list[dict[str, Any]], out: RunTables) -> None:
        out.apps[self.name] = self.app.results(raw, dataplane[0])
