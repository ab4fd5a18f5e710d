"""Everything a run starts in the emulated hosts, as apps behind one interface (`RunApp`, base.py): each
scenario flow by its kind (flows.py: iperf3 on the kernel's TCP, leoguard-transport on leoguard's, the
UDP probe, Chromium and nginx; pings ride along tcp and cbr flows, TCP_INFO samplers along kernel tcp
ones), the liquid tunnel, and `emulate`'s own `apps` (the `App` protocol, e.g. LEOTP's endpoints,
through `External`). `RunApps` holds a run's apps and calls each phase over them in the order that
phase needs, so `emulate` reads: build the hosts, start the data plane, start the apps, wait, collect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leoguard.emu.apps.base import BASE_PORT, TC_EF, App, AppHosts, External, Proc, RunApp, RunTables
from leoguard.emu.apps.flows import FlowApp, LiquidTunnel, flow_app
from leoguard.emu.liquid import liquid_flows
from leoguard.scenario import Scenario

__all__ = [
    "BASE_PORT", "TC_EF", "App", "AppHosts", "External", "FlowApp", "LiquidTunnel", "Proc", "RunApp", "RunApps",
    "RunTables",
]  # fmt: skip


class RunApps:
    """A run's apps: the liquid tunnel (if any), the scenario's flows by index, then `emulate`'s apps.
    The data plane's flow table numbers their entries in that order (flow i is id i; the k-th external
    app follows the flows). Servers start in that order, the tunnel first; clients start with the
    external apps' (at model time 0), then the flows' by start time; everything finishes in that order
    but the tunnel, which carries the flows' packets, last."""

    def __init__(self, flows: list[FlowApp], external: Sequence[App], tunnel: LiquidTunnel | None = None) -> None:
        self.flows = flows
        self.external = [External(a) for a in external]
        self.tunnel = tunnel
        self._slots: dict[RunApp, slice] = {}

    @classmethod
    def build(cls, scenario: Scenario, spec: dict[str, Any], paths: list[Any], external: Sequence[App]) -> RunApps:
        """The apps of `scenario` (its core `spec`, each flow's path at t = 0 from `check`) and `external`."""
        tunnelled = liquid_flows(scenario)
        tunnel = LiquidTunnel(scenario, spec["flows"], tunnelled) if tunnelled else None
        flows = [
            flow_app(i, f, fc, scenario, paths[i], tunnel if i in tunnelled else None)
            for i, (f, fc) in enumerate(zip(scenario.flows, spec["flows"], strict=True))
        ]
        return cls(flows, external, tunnel)

    @property
    def _accounted(self) -> list[RunApp]:
        # The apps with flow-table entries, in id order.
        return [*self.flows, *self.external]

    @property
    def _up(self) -> list[RunApp]:
        return [*([self.tunnel] if self.tunnel else []), *self._accounted]

    @property
    def _down(self) -> list[RunApp]:
        return [*self._accounted, *([self.tunnel] if self.tunnel else [])]

    def need_tools(self) -> None:
        """A one-line error for the first missing program any app starts (in name order)."""
        from leoguard import sysdeps

        for tool in sorted({t for app in self._up for t in app.tools()}):
            if tool.startswith("leoguard-"):
                from leoguard.tunnel import binary

                binary(tool)
            else:
                sysdeps.need(tool)

    def host_cc(self) -> dict[int, str]:
        """Each needed host with the kernel congestion control its connections are born with."""
        ends: dict[int, str] = {}
        wanted = [x for app in self._up for x in app.host_cc()]
        for n, cc in wanted:
            # A host's connections are born with its algorithm (hosts.py); iperf3 switches each
            # to its flow's after connect(). A switch to BBR starts BBR whole, but one from BBR
            # leaves BBR's pacing on, so a host with any non-BBR flow is born with that one.
            if cc is not None and ends.get(n, "bbr") == "bbr":
                ends[n] = cc
        for n, cc in wanted:
            if cc is None:
                ends.setdefault(n, "cubic")
        return ends

    def flow_table(self) -> list[dict[str, Any]]:
        """The data plane's flow table: every app's entries, numbered."""
        table: list[dict[str, Any]] = []
        self._slots = {}
        for app in self._accounted:
            entries = app.flows()
            self._slots[app] = slice(len(table), len(table) + len(entries))
            table += [{"id": len(table) + j, **e} for j, e in enumerate(entries)]
        return table

    def start_servers(self, hosts: AppHosts) -> None:
        """Starts what listens before model time 0."""
        for app in self._up:
            app.start_servers(hosts)

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        """Starts the clients, each at its start time (returns once the last has started)."""
        for app in [*self.external, *sorted(self.flows, key=lambda a: a.start_s)]:
            app.start_clients(hosts, t0_ns)

    def stop(self) -> None:
        """The emulated network has stopped."""
        for app in self._up:
            app.stop()

    def finish(self, timeout_s: float) -> list[Any]:
        """Each app's raw output, waiting up to `timeout_s` for each program."""
        return [app.finish(timeout_s) for app in self._down]

    def collect(self, raw: list[Any], out: RunTables) -> None:
        """Each app's results (`raw`: `finish`'s) into `out`, with the data plane's figures of its entries
        of `flow_table` (which numbered them)."""
        for app, r in zip(self._down, raw, strict=True):
            slot = self._slots.get(app)
            app.collect(r, out.emu["flows"][slot] if slot is not None else [], out)
