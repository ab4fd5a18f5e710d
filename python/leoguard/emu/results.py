"""What a real (emulated) run returns: the simulator's tables plus what only a real run has
(`leoguard.emu.run.emulate` fills it)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from leoguard.errors import make_dir
from leoguard.scenario import Scenario
from leoguard.simulate import flow_summary, loss_process, lossy_seconds_table, web_summary


@dataclass
class EmuResults:
    """A real run's results: the simulator's flow and link tables plus what only a real run has."""

    scenario: Scenario
    flows: pl.DataFrame
    links: pl.DataFrame
    pings: pl.DataFrame
    packets: pl.DataFrame
    """Per received probe datagram (cbr flows): flow, seq, sent_ns, received_ns (model time, from the
    probe's own CLOCK_MONOTONIC stamps), as the simulator's `packets` table."""
    emulator: dict[str, Any]
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    capture: bytes | None = None
    """The `[capture]` as a pcap file (the real packets at the tapped nodes, LINKTYPE_RAW), or None."""
    web: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Page loads of web flows in real Chromium: flow, page, plt_s, speed_index_s, requests, bytes,
    protocol, error (docs/emu-web.md)."""
    apps: dict[str, Any] = field(default_factory=dict)
    """What each of `emulate`'s `apps` returned, by its name (e.g. leoguard.emu.leotp's endpoints)."""
    series: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per tcp flow and interval, the simulator's `series` columns (flow, t_ns in model time, cwnd_bytes,
    in_flight_bytes, srtt_ns, acked_bytes, retransmissions, goodput_bps): from leoguard-transport's
    telemetry on the leoguard stack (every `sample_every_s`), from iperf3's 1 s intervals on the kernel's
    (bytes written stand for acked_bytes; in flight unknown)."""
    startcp: pl.DataFrame = field(default_factory=pl.DataFrame)
    """StarTCP senders' stalls on leoguard-transport, the simulator's `startcp` columns (flow,
    predicted_ns, stall_start_ns, stall_end_ns, probes, reason, lead_ns, state_*), in model time."""
    interruptions: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Interruptions StarTCP receivers detected on real arrivals: flow, start_ns (model time),
    duration_ns, stalled (the simulator's columns)."""
    lossy_seconds: pl.DataFrame = field(default_factory=lambda: lossy_seconds_table([]))
    """Lossy seconds of each link's per-second loss model, the simulator's table: the same as the
    simulator's for the same scenario and seed (common random numbers)."""

    tcpinfo: pl.DataFrame = field(default_factory=pl.DataFrame)
    """With `[emu] tcpinfo_ms`: the kernel senders' TCP_INFO readings (emu/tcpinfo.py's columns: flow,
    t_ns in model time, cwnd, ssthresh, rtt_ms, unacked, retrans_out, lost, ...), also `tcpinfo.csv`."""

    def summary(self) -> dict[str, Any]:
        """The object `leoguard run --json` prints, plus `emulator`."""
        return {
            "scenario": self.scenario.name,
            "engine": "emu",
            "seed": self.scenario.seed,
            "duration_s": self.scenario.duration_s,
            "simulated_s": self.emulator.get("elapsed_s"),
            "complete": self.complete,
            "packet_hops": self.emulator.get("packet_hops"),
            "wall_s": round(self.wall_s, 4),
            "flows": [flow_summary(r) for r in self.flows.iter_rows(named=True)],
            "links": {
                "realised_loss_max": float(self.links["realised_loss"].max() or 0.0) if len(self.links) else 0.0,
                "drops_queue": int(self.links["drops_queue"].sum()) if len(self.links) else 0,
                "drops_down": int(self.links["drops_down"].sum()) if len(self.links) else 0,
            },
            **({"loss_process": loss_process(self.lossy_seconds)} if len(self.lossy_seconds) else {}),
            **({"web": self.web_summary()} if len(self.web) else {}),
            "emulator": {
                "timing_error_us": self.emulator["timing_error_us"],
                "realtime_ok": self.emulator["realtime_ok"],
                "drops": self.emulator["drops"],
                "drops_unexplained": self.emulator["drops_unexplained"],
                "cpu_s": round(self.emulator["cpu_s"], 3),
            },
        }

    def web_summary(self) -> list[dict[str, Any]]:
        """Per web flow: loads, finished loads, mean and median PLT and Speed Index (finished loads)."""
        return web_summary(self.web)

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Parquet per table and run.json (scenario, engine, emulator figures, the tools' raw reports)."""
        d = Path(directory)
        make_dir(d)
        out = {}
        for name in (
            "flows", "links", "pings", "packets", "web", "series", "startcp", "interruptions", "lossy_seconds",
        ):  # fmt: skip
            p = d / f"{name}.parquet"
            getattr(self, name).write_parquet(p)
            out[name] = p
        info = {
            "scenario": self.scenario.model_dump(),
            "engine": "emu",
            "complete": self.complete,
            "emulator": self.emulator,
            "tools": self.tools,
            **self.meta,
        }
        (d / "run.json").write_text(json.dumps(info, indent=2, default=str))
        out["run"] = d / "run.json"
        if len(self.tcpinfo.columns):
            self.tcpinfo.write_csv(d / "tcpinfo.csv")
            out["tcpinfo"] = d / "tcpinfo.csv"
        if self.capture is not None:
            (d / "capture.pcap").write_bytes(self.capture)
            out["capture"] = d / "capture.pcap"
        return out
