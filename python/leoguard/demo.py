"""The main demo (issue 13): New York - London over Starlink shell 1, unprotected, with LinkGuardian and
with SATGUARD, side by side.

One scenario, three runs that differ only in the scheme (the ablation's variants `none`,
`linkguardian` and `satguard`): a server behind the London gateway sends a CUBIC bulk transfer and a
UDP probe (1000 packets/s, for one-way delay and loss) to a user terminal in New York. The terminal and
the gateway follow Starlink's 15 s global schedule with 30-200 ms handover interruptions and the
`starlink` loss model (fitted to SATGUARD's Fig 5 trace) runs on every ground link. Ground links are
100 Mbit/s (a Starlink terminal's downlink; SATGUARD's §4.1 uses 1 Gbit/s, ten times the packets to
simulate) with 400 kB queues (32 ms: the bulk flow's own queue does not bury the path's delay), and the
ISLs 1 Gbit/s.

What each panel of the figure shows comes straight from the simulator's tables, unsmoothed: probe
packets that never reached the terminal (the loss an application sees, after any in-network
recovery), the probe's one-way delay per packet, and the TCP flow's goodput from the bytes it had
acknowledged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from leoguard.ablation import VARIANTS, probe_losses
from leoguard.errors import make_dir
from leoguard.orbit import Constellation, PathTimeline
from leoguard.plot import plot_demo
from leoguard.scenario import ConstellationTopology, Scenario, from_dict
from leoguard.simulate import Results, simulate

#: Scheme (the ablation's variant name) -> the label the figure and the table use, in display order.
SCHEMES: dict[str, str] = {"none": "unprotected", "linkguardian": "LinkGuardian", "satguard": "SATGUARD"}

#: 90 s: the gateway hands over at 12, 27, 42 and 72 s, the terminal at 42 s; from 42 s the path
#: runs over 31-38 satellites (220-275 ms RTT), before it over 5-13 (47-77 ms). About 15 s of wall time
#: on two cores.
DURATION_S = 90.0

#: Index of the TCP flow and of the probe in the demo scenario's flows.
TCP, PROBE = 0, 1

#: Goodput is averaged over bins of this width (the simulator samples every 0.1 s).
GOODPUT_BIN_S = 0.5


def demo_scenario(duration_s: float = DURATION_S, seed: int = 1) -> Scenario:
    """The demo's scenario, with no scheme (apply one with `leoguard.ablation.VARIANTS`)."""
    user, gateway = "New York", "London"
    return from_dict(
        {
            "name": "demo-nyc-lon",
            "duration_s": duration_s,
            "seed": seed,
            "sample_every_s": 0.1,
            "link_sample_every_s": 0.0,
            "topology": {
                "kind": "constellation", "constellation": "starlink-shell1", "ground": [user, gateway],
                "ground_stations": [gateway], "hosts": [{"name": "server", "ground": gateway}],
                "policy": "global-schedule", "step_s": 0.1, "interruption": "uniform", "gsl_rate_mbps": 100,
                "isl_rate_mbps": 1000, "queue_bytes": 400_000, "gsl_loss": {"model": "starlink"},
            },
            "flows": [
                {"kind": "tcp", "src": "server", "dst": user, "cc": "cubic", "delay_sensitive": True},
                {"kind": "cbr", "src": "server", "dst": user, "rate_mbps": 2, "size": 250, "delay_sensitive": True},
            ],
        },
        source="leoguard demo",
    )  # fmt: skip


@dataclass
class Demo:
    """The three runs, the path they share, and the tables the figure and the terminal show."""

    scenario: Scenario
    runs: dict[str, Results]
    timeline: PathTimeline
    constellation: Constellation

    def summary(self) -> pl.DataFrame:
        """One row per scheme: probe loss at the endpoint (and the part of it lost to queue overflow,
        congestion, rather than to the links: the TCP flow's, and the burst a scheme releases when a
        link comes back after a handover), probe loss in the network, probe OWD,
        TCP goodput and retransmissions, the scheme's own (hop-by-hop) retransmissions."""
        rows = []
        lost = self.lost()
        for name, res in self.runs.items():
            tcp, probe = res.flows.row(TCP, named=True), res.flows.row(PROBE, named=True)
            hop = (res.satguard or res.linkguardian or {}).get("retransmissions", 0)
            causes = lost.filter(pl.col("scheme") == SCHEMES[name])["cause"]
            congested = (causes == "congestion").sum() / len(causes) if len(causes) else 0.0
            rows.append(
                {
                    "scheme": SCHEMES[name],
                    "endpoint_loss_pct": round(100 * probe["endpoint_loss"], 3),
                    "congestion_loss_pct": round(100 * probe["endpoint_loss"] * congested, 3),
                    "network_loss_pct": round(100 * probe["network_loss"], 3),
                    "owd_p50_ms": round(probe["owd_ms_p50"], 1),
                    "owd_p99_ms": round(probe["owd_ms_p99"], 1),
                    "goodput_mbps": round(tcp["goodput_bps"] / 1e6, 2),
                    "tcp_retransmissions": tcp["retransmissions"],
                    "tcp_rtos": tcp["rtos"],
                    "hop_retransmissions": hop,
                }
            )
        return pl.DataFrame(rows)

    def report(self) -> dict[str, Any]:
        """One JSON-able object: the scenario's name, duration and seed, the handovers and the summary rows."""
        return {
            "scenario": self.scenario.name,
            "duration_s": self.scenario.duration_s,
            "seed": self.scenario.seed,
            "handovers": [
                {"t_s": h["t_s"], "node": h["node"], "interruption_ms": round(h["interruption_ms"], 1)}
                for h in self.timeline.handovers.iter_rows(named=True)
            ],
            "rows": self.summary().to_dicts(),
        }

    def _per_scheme(self, table: Callable[[Results], pl.DataFrame], columns: list[str]) -> pl.DataFrame:
        """`table` of every run with a `scheme` column, then `columns`."""
        return pl.concat(
            [table(res).with_columns(pl.lit(SCHEMES[name]).alias("scheme")) for name, res in self.runs.items()]
        ).select("scheme", *columns)

    def lost(self) -> pl.DataFrame:
        """Probe packets that never reached the terminal: scheme, seq, t_s (when sent), lost (cumulative
        count), cause ("congestion" when its last drop was a queue overflow, else "link": loss model,
        link down, a scheme giving up; drops of a scheme's control packets, e.g. SATGUARD's void for it,
        are not its own). As the endpoint-loss figure, only packets sent at least a grace time (1 s, or
        half the run if shorter) before the end count, so packets still in flight are not losses."""
        return self._lost_table

    @cached_property
    def _lost_table(self) -> pl.DataFrame:
        # Computed once: the summary and the figure both need it.
        return self._per_scheme(lambda res: probe_losses(res, PROBE), ["seq", "t_s", "lost", "cause"])

    def owd(self) -> pl.DataFrame:
        """One-way delay of every probe packet that arrived: scheme, t_s (when sent), owd_ms."""

        def one(res: Results) -> pl.DataFrame:
            p = res.packets.filter(pl.col("flow") == PROBE).sort("sent_ns")
            return p.select((pl.col("sent_ns").cast(pl.Float64) / 1e9).alias("t_s"), "owd_ms")

        return self._per_scheme(one, ["t_s", "owd_ms"])

    def goodput(self, bin_s: float = GOODPUT_BIN_S) -> pl.DataFrame:
        """TCP goodput per `bin_s` (from the bytes acknowledged at the bin's edges): scheme, t_s (the
        bin's start), goodput_mbps."""
        edge = round(bin_s * 1e9)

        def one(res: Results) -> pl.DataFrame:
            s = res.series.filter((pl.col("flow") == TCP) & (pl.col("t_ns") % edge == 0)).sort("t_ns")
            return s.select(
                (pl.col("t_ns").cast(pl.Float64) / 1e9 - bin_s).alias("t_s"),
                (pl.col("acked_bytes").diff().cast(pl.Float64) * 8 / bin_s / 1e6).alias("goodput_mbps"),
            ).drop_nulls()

        return self._per_scheme(one, ["t_s", "goodput_mbps"])

    def figure(self) -> Figure:
        """The demo's figure (see `leoguard.plot.plot_demo`)."""
        title = (
            f"New York - London over Starlink shell 1: a server behind the London gateway sends to a terminal in "
            f"New York\n(starlink loss model on the ground links, {self.scenario.duration_s:g} s, seed "
            f"{self.scenario.seed})"
        )
        topo = self.scenario.topology
        assert isinstance(topo, ConstellationTopology)  # demo_scenario builds one
        return plot_demo(
            self.lost(), self.owd(), self.goodput(), self.summary(), self.timeline, self.constellation, title=title,
            goodput_max_mbps=1.5 * topo.gsl_rate_mbps,
        )  # fmt: skip

    def write(self, directory: str | Path) -> dict[str, Path]:
        """`demo.png`, `summary.json`, each run's tables under `<scheme>/` and the path timeline under
        `path/`."""
        d = Path(directory)
        make_dir(d)
        files: dict[str, Path] = {}
        fig = self.figure()
        files["png"] = d / "demo.png"
        fig.savefig(files["png"], dpi=100)
        plt.close(fig)
        files["summary"] = d / "summary.json"
        files["summary"].write_text(json.dumps(self.report(), indent=2))
        for name, res in self.runs.items():
            files[name] = res.write(d / name)["run"].parent
        self.timeline.write_parquet(d / "path")
        files["path"] = d / "path"
        return files


ProgressFn = Callable[[str, float, float], None]


class _StoppedError(Exception):
    """Raised inside a run's progress callback to end it early (Ctrl-C in the main thread)."""


def run_demo(
    duration_s: float = DURATION_S, seed: int = 1, *, workers: int = 3, progress: ProgressFn | None = None
) -> Demo:
    """Runs the three schemes (in threads: the simulator releases the GIL while it runs) and the path
    timeline. `progress(scheme, simulated_s, duration_s)` is called as each run advances. Ctrl-C stops
    every run at the end of its current slice and raises KeyboardInterrupt."""
    sc = demo_scenario(duration_s, seed)
    topo = sc.topology
    assert isinstance(topo, ConstellationTopology)  # demo_scenario builds one
    c = Constellation.preset(topo.constellation)
    stop = threading.Event()

    def one(name: str) -> Results:
        def cb(now_s: float, end_s: float, _hops: int) -> None:
            if stop.is_set():
                raise _StoppedError
            if progress is not None:
                progress(name, now_s, end_s)

        return simulate(VARIANTS[name][1](sc), progress=cb)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        futures = {name: ex.submit(one, name) for name in SCHEMES}
        try:
            # The path the runs share (the simulator's attachment schedule for the same places, policy,
            # interruption draws and seed): handover times for the figure, and the map.
            tl = c.path_timeline(
                topo.ground[0], topo.ground[1], duration=duration_s, step=topo.step_s, policy=topo.policy,
                min_elevation=topo.min_elevation_deg, interruption=topo.interruption, seed=seed,
            )  # fmt: skip
            runs = {name: f.result() for name, f in futures.items()}
        except KeyboardInterrupt:
            stop.set()
            raise
    return Demo(sc, runs, tl, c)
