"""Real hosts of an emulator run: one network namespace per scenario node that ends a flow, its TUN
device (opened by the data plane inside the namespace) configured with pyroute2, per-namespace TCP
settings, and the cleanup of what a run leaves, including a run that was killed.

Every run registers itself in `/run/leoguard-emu/<run>.json` (its orchestrator's pid and its
namespaces). A run whose orchestrator is gone is stale: `cleanup()` (called at every start and by
`leoguard emu cleanup`) kills the processes left in its namespaces and removes them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError
from leoguard.tunnel import alive

REGISTRY = Path("/run/leoguard-emu")
PREFIX = "lgemu-"
NETNS_DIR = Path("/run/netns")
V6_PREFIX = "fd00:6c67::"
V4_NET = "10.108.0.0/16"
TUN_QUEUE = 10_000


def v6_addr(node: int) -> str:
    """The IPv6 address of the host standing for scenario node `node`."""
    return f"{V6_PREFIX}{node + 1:x}"


def v4_addr(node: int) -> str:
    """The IPv4 address of the host standing for scenario node `node` (nodes below 65534)."""
    k = node + 1
    return f"10.108.{k >> 8}.{k & 255}"


def _pyroute2():
    try:
        import pyroute2
    except ImportError as e:  # pragma: no cover - a broken install
        raise LeoguardError("pyroute2 is missing: run `make setup` (it is a leoguard dependency)") from e
    return pyroute2


def _ns_pids(name: str) -> list[int]:
    """Processes whose network namespace is `name`."""
    try:
        target = os.stat(NETNS_DIR / name)
    except OSError:
        return []
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = os.stat(d / "ns" / "net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            pids.append(int(d.name))
    return pids


def remove_namespace(name: str) -> None:
    """Kills every process in namespace `name` and removes it (its TUN devices go with it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for p in _ns_pids(name) if p != os.getpid()]
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, sig)
        if not pids:
            break
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.02)
    netns = _pyroute2().netns
    with contextlib.suppress(OSError, FileNotFoundError):
        netns.remove(name)


def cleanup(all_runs: bool = False) -> list[str]:
    """Removes what stale runs left (namespaces, their processes, registry entries); with `all_runs`,
    also live runs' (for an operator who knows none is running). Returns the namespaces removed."""
    live: set[str] = set()
    REGISTRY.mkdir(parents=True, exist_ok=True)
    for f in REGISTRY.glob("*.json"):
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            f.unlink(missing_ok=True)
            continue
        if not all_runs and alive(int(info.get("pid", 0))):
            live.update(info.get("namespaces", []))
            continue
        for p in info.get("children", []):
            with contextlib.suppress(OSError):
                os.kill(int(p), signal.SIGKILL)
        f.unlink(missing_ok=True)
    removed = []
    names = [p.name for p in NETNS_DIR.glob(PREFIX + "*")] if NETNS_DIR.exists() else []
    for name in names:
        if name not in live:
            remove_namespace(name)
            removed.append(name)
    return removed


def _write_sysctl(key: str, value: str) -> None:
    path = Path("/proc/sys") / key.replace(".", "/")
    try:
        path.write_text(value)
    except OSError as e:
        raise LeoguardError(f"cannot set {key} = {value} in an emulator namespace: {e.strerror}") from e


def require_root() -> None:
    """The emulator makes network namespaces and TUN devices: refused, by name, without root."""
    if os.geteuid() != 0:
        raise LeoguardError("the emulator needs root (network namespaces and TUN devices)")


def _route_cc(ns: Any, index: int) -> str | None:
    """The congestion control (RTAX_CC_ALGO) on the IPv6 route of the TUN `index`, as the kernel
    holds it."""
    for r in ns.get_routes(family=socket.AF_INET6, oif=index):
        if r.get_attr("RTA_DST") == V6_PREFIX:
            m = r.get_attr("RTA_METRICS")
            if m is not None:
                return m.get_attr("RTAX_CC_ALGO")
    return None


@dataclass
class Host:
    """One real host."""

    node: int
    netns: str
    tun: str
    addrs: list[str]
    cc: str
    cc_in_effect: str | None = None
    """The TCP congestion control the host's connections are born with, as the kernel holds it on the
    host's routes (`congctl`)."""

    @property
    def netns_path(self) -> str:
        return str(NETNS_DIR / self.netns)

    def exec_prefix(self) -> list[str]:
        """Command prefix that runs a program inside this host."""
        return ["ip", "netns", "exec", self.netns]


@dataclass
class Lab:
    """The hosts of one run; a context manager that always removes them."""

    hosts: dict[int, Host] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    children: list[int] = field(default_factory=list)
    mtu: int = 1500

    def _register(self) -> None:
        REGISTRY.mkdir(parents=True, exist_ok=True)
        info = {"pid": os.getpid(), "namespaces": [h.netns for h in self.hosts.values()], "children": self.children}
        (REGISTRY / f"{self.run_id}.json").write_text(json.dumps(info))

    def add_child(self, pid: int) -> None:
        """Records a child process so a later cleanup can kill it if this run dies."""
        self.children.append(pid)
        self._register()

    def create(self, nodes: dict[int, str], mtu: int) -> None:
        """Creates a namespace per node (value: the kernel congestion control its connections are born with,
        set on its routes by `configure`)."""
        require_root()
        netns = _pyroute2().netns
        for node, cc in sorted(nodes.items()):
            name = f"{PREFIX}{self.run_id}-{node}"
            self.hosts[node] = Host(node, name, f"lg{node}", [v6_addr(node), v4_addr(node)], cc)
            self._register()  # before creating, so a crash from here on is cleaned up
            try:
                netns.create(name)
            except OSError as e:
                raise LeoguardError(f"cannot create network namespace {name}: {e.strerror}") from e
            netns.pushns(name)
            try:
                # TUN devices made later inherit `default`: addresses usable at once (no DAD on a
                # point-to-point link), buffers for high-BDP paths.
                for k, v in [
                    ("net.ipv6.conf.default.accept_dad", "0"),
                    ("net.ipv6.conf.all.accept_dad", "0"),
                    ("net.ipv6.conf.default.disable_ipv6", "0"),
                    ("net.ipv4.tcp_rmem", "4096 131072 67108864"),
                    ("net.ipv4.tcp_wmem", "4096 65536 67108864"),
                    ("net.ipv4.tcp_no_metrics_save", "1"),
                ]:
                    _write_sysctl(k, v)
            finally:
                netns.popns()
        self.mtu = mtu

    def configure(self, rps_cpus: set[int] | None = None) -> None:
        """Brings up loopback and each TUN with its addresses, MTU and routes to all other hosts. With
        `rps_cpus`, the kernel's receive processing of what the data plane writes to a TUN is steered to
        those CPUs (RPS), so the hosts' TCP stacks do not run on the data plane's core."""
        pr = _pyroute2()
        for h in self.hosts.values():
            with pr.NetNS(h.netns) as ns:
                lo = ns.link_lookup(ifname="lo")
                if lo:
                    ns.link("set", index=lo[0], state="up")
                idx = ns.link_lookup(ifname=h.tun)
                if not idx:
                    raise LeoguardError(f"TUN {h.tun} is missing in {h.netns}: the data plane did not create it")
                i = idx[0]
                # The TUN's queue towards the data plane is the host's NIC ring: 10 000 packets absorb
                # a host's bursts while the data plane, busy with every hop, drains them.
                ns.link("set", index=i, mtu=self.mtu, txqlen=TUN_QUEUE, state="up")
                ns.addr("add", index=i, address=h.addrs[0], prefixlen=128)
                ns.addr("add", index=i, address=h.addrs[1], prefixlen=32)
                # The routes name the host's congestion control (`ip route ... congctl`, Linux's
                # tcp_ca_dst_init), so every connection is born with it, whatever the namespace's
                # default: a namespace may only default to what the root namespace allows to all
                # (here "reno bbr"), and iperf3 sets TCP_CONGESTION only after connect(). A flow
                # born with BBR keeps BBR's pacing flag (sk_pacing_status, set by bbr_init) after
                # the switch to CUBIC, so "kernel CUBIC" would be paced CUBIC (tcp-trace.md).
                metrics = {"cc_algo": h.cc}
                ns.route("add", dst=V6_PREFIX + "/64", oif=i, metrics=metrics)
                ns.route("add", dst=V4_NET, oif=i, metrics=metrics)
                h.cc_in_effect = _route_cc(ns, i)
            if rps_cpus:
                mask = f"{sum(1 << c for c in rps_cpus):x}"
                # /sys shows a namespace's devices only to a process that mounted it there.
                subprocess.run(
                    [*h.exec_prefix(), "sh", "-c", f"echo {mask} > /sys/class/net/{h.tun}/queues/rx-0/rps_cpus"],
                    check=False, capture_output=True, timeout=10,
                )  # fmt: skip

    def route_cc(self, node: int, dst: str, ifname: str) -> None:
        """Gives the connected route `dst` of device `ifname` (one a program made in the host, like the
        liquid tunnel's) the host's congestion control, as `configure` does the host's own routes."""
        pr = _pyroute2()
        h = self.hosts[node]
        with pr.NetNS(h.netns) as ns:
            idx = ns.link_lookup(ifname=ifname)
            if not idx:
                raise LeoguardError(f"device {ifname} is missing in {h.netns}")
            try:
                ns.route("replace", dst=dst, oif=idx[0], scope=253, proto=2, metrics={"cc_algo": h.cc})
            except OSError as e:
                raise LeoguardError(f"cannot set congctl {h.cc} on {dst} in {h.netns}: {e}") from e

    def device_drops(self) -> dict[str, int]:
        """Packets the hosts' kernels dropped on their way to or from the emulated network:
        `host_qdisc` (the sending host's own queue in front of its TUN overflowed: its software sent
        faster than the data plane read), `host_tx_queue` (the TUN's queue to the data plane) and
        `host_rx` (the receiving host could not take what was written)."""
        pr = _pyroute2()
        tx = rx = qd = 0
        for h in self.hosts.values():
            with contextlib.suppress(Exception), pr.NetNS(h.netns) as ns:
                idx = ns.link_lookup(ifname=h.tun)
                if idx:
                    st = ns.get_links(idx[0])[0].get("IFLA_STATS64")
                    if st is not None:
                        tx += int(st.get("tx_dropped"))
                        rx += int(st.get("rx_dropped"))
                    for q in ns.get_qdiscs(index=idx[0]):
                        s1 = q.get_attr("TCA_STATS")
                        if s1 is not None:
                            qd += int(s1.get("drop", 0))
        return {"host_qdisc": qd, "host_tx_queue": tx, "host_rx": rx}

    def close(self) -> None:
        """Kills the run's children and removes its namespaces and registry entry."""
        for p in self.children:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        for h in self.hosts.values():
            remove_namespace(h.netns)
        (REGISTRY / f"{self.run_id}.json").unlink(missing_ok=True)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def softnet_drops() -> int:
    """Packets the kernel dropped because a CPU's input backlog was full (all CPUs, machine-wide)."""
    try:
        lines = Path("/proc/net/softnet_stat").read_text().split("\n")
    except OSError:
        return 0
    return sum(int(ln.split()[1], 16) for ln in lines if ln.strip())
