"""StarTCP (papers/startcp.txt, docs/startcp.md) reproduced in the simulator.

- `two-path` (the paper's Fig 3): two parallel 40 Mbit/s paths of 100 ms RTT, the route switching
  every 15 s with a 100 ms interruption; BBR against StarTCP over BBR (heuristic lead, and the learnt
  lead when its weights are present).
- `nyc-lon` (beyond the paper): Starlink shell 1 New York - London under the 15 s global schedule with
  its 30-200 ms random interruptions; StarTCP against BBR, CUBIC and SaTCP (CUBIC told of every
  handover 0.5 s ahead, +-0.1 s, by the link layer).

One row per handover of each run: `{experiment, engine, scheme, handover, t_s, throughput_mbps,
lost_packets, predicted_error_ms}`. `throughput_mbps` is the goodput of the 1 s window that holds the
handover (the whole second, as the paper's per-second trace), `lost_packets` the data segments the
sender retransmitted in that second (every lost data packet is resent; probes and ACKs are not data),
`predicted_error_ms` the predicted minus the actual handover time of the stall StarTCP made for it
(null when it predicted none, and for schemes that predict nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario, from_dict
from leoguard.sections import Capture
from leoguard.simulate import Results, simulate

#: What the paper reports for Fig 3 (§3), per handover second.
PAPER = {
    "bbr": "falls to ~6 Mbit/s with > 150 packets lost in the handover second",
    "startcp": "keeps ~30 Mbit/s with almost no loss from the second handover on",
}

SCHEMES = ("bbr", "startcp")


def two_path(scheme: str, duration_s: float = 62.0, seed: int = 1, startcp: dict | None = None) -> Scenario:
    """The paper's two-path experiment with one bulk flow of `scheme` ("bbr", "cubic", "startcp")."""
    d: dict[str, Any] = {
        "name": f"startcp-two-path-{scheme}",
        "duration_s": duration_s,
        "seed": seed,
        "topology": {
            "kind": "two-path",
            "switch_every_s": 15.0,
            "interruption_ms": 100.0,
            "paths": [{"rate_mbps": 40, "delay_ms": 50}, {"rate_mbps": 40, "delay_ms": 50}],
        },
        # As in the paper's Fig 3, the first handover comes in the flow's 13th second (the flow's
        # start-up is not in phase with the handovers, so its gaps cannot pass for one).
        "flows": [{"kind": "tcp", "src": "src", "dst": "dst", "cc": scheme, "start_s": 2.0}],
    }
    if scheme == "startcp":
        d["startcp"] = startcp or {}
    return from_dict(d)


def nyc_lon(
    scheme: str,
    duration_s: float = 62.0,
    seed: int = 1,
    startcp: dict | None = None,
    starlink_profile: str | None = None,
) -> Scenario:
    """Starlink shell 1 New York - London (global schedule, random 30-200 ms interruptions), 40 Mbit/s;
    with `starlink_profile`, New York's access link is that measured profile's (leoguard.access: access
    latency, a disturbance at every 15 s boundary, the dish's capacity, its fitted loss)."""
    topo: dict[str, Any] = {"kind": "leo-path", "a": "NYC", "b": "LON", "rate_mbps": 40, "interruption": "uniform"}
    if starlink_profile is not None:
        topo["access"] = {"profile": starlink_profile}
    d: dict[str, Any] = {
        "name": f"startcp-nyc-lon-{scheme}",
        "duration_s": duration_s,
        "seed": seed,
        "topology": topo,
        "flows": [{"kind": "tcp", "src": "NYC", "dst": "LON", "cc": scheme}],
    }
    if scheme == "startcp":
        d["startcp"] = startcp or {}
    return from_dict(d)


def handover_times(sc: Scenario) -> list[float]:
    """The handovers a flow from node 0 crosses: a two-path topology's switches, or the leo-path
    timeline's interruptions (either end)."""
    t = sc.topology
    if t is not None and t.kind == "two-path":
        k, out = 1, []
        while k * t.switch_every_s < sc.duration_s:
            out.append(k * t.switch_every_s)
            k += 1
        return out
    core = sc.to_core()
    return sorted({round(x[0], 6) for x in core["leo"]["interruptions"] if x[0] < sc.duration_s})


def per_second(r: Results, flow: int = 0) -> pl.DataFrame:
    """Goodput (Mbit/s) and retransmissions of each whole second [sec, sec + 1) of `flow`, from its
    sender's samples at whole seconds."""
    s = r.series.filter((pl.col("flow") == flow) & (pl.col("t_ns") % 1_000_000_000 == 0)).sort("t_ns")
    s = s.with_columns((pl.col("t_ns") // 1_000_000_000).alias("sec"))
    return s.select(
        "sec",
        ((pl.col("acked_bytes").shift(-1) - pl.col("acked_bytes")) * 8 / 1e6).alias("throughput_mbps"),
        (pl.col("retransmissions").shift(-1) - pl.col("retransmissions")).alias("lost_packets"),
    ).drop_nulls()


def rows_of(r: Results, experiment: str, scheme: str, engine: str = "sim") -> list[dict[str, Any]]:
    """One row per handover of a run."""
    secs = per_second(r)
    by_sec = {int(x["sec"]): x for x in secs.iter_rows(named=True)}
    stalls = r.startcp.filter(pl.col("flow") == 0) if not r.startcp.is_empty() else r.startcp
    out = []
    for i, t in enumerate(handover_times(r.scenario)):
        x = by_sec.get(int(t), {})
        err = None
        if scheme.startswith("startcp") and not stalls.is_empty():
            near = stalls.filter((pl.col("predicted_ns").cast(pl.Float64) / 1e9 - t).abs() < 2.0)
            if not near.is_empty():
                err = round((near["predicted_ns"][0] / 1e9 - t) * 1e3, 3)
        out.append(
            {
                "experiment": experiment,
                "engine": engine,
                "scheme": scheme,
                "handover": i,
                "t_s": t,
                "throughput_mbps": round(float(x.get("throughput_mbps", 0.0)), 3),
                "lost_packets": int(x.get("lost_packets", 0)),
                "predicted_error_ms": err,
            }
        )
    return out


@dataclass
class StartcpReproduction:
    rows: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[tuple[str, str], Results] = field(default_factory=dict)

    def table(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows)


def reproduce(
    experiments: tuple[str, ...] = ("two-path", "nyc-lon"),
    duration_s: float = 62.0,
    seed: int = 1,
    learnt: bool = True,
    starlink_profile: str | None = None,
) -> StartcpReproduction:
    """Runs the experiments in the simulator and collects one row per handover; `starlink_profile` gives
    the New York - London path a measured access link (the two-path experiment is not a Starlink path)."""
    from leoguard.sections import STARTCP_WEIGHTS

    out = StartcpReproduction()
    variants: list[tuple[str, str, dict | None]] = [("bbr", "bbr", None), ("startcp", "startcp", None)]
    if learnt and STARTCP_WEIGHTS.exists():
        variants.append(("startcp-learnt", "startcp", {"policy": "learnt"}))
    for exp in experiments:
        if exp not in ("two-path", "nyc-lon"):
            raise ValueError(f"unknown experiment {exp!r}: two-path or nyc-lon")
        vs = list(variants)
        if exp == "nyc-lon":
            # SaTCP is told of each handover 0.5 s ahead by the link layer (the leo-path's schedule).
            vs[1:1] = [("cubic", "cubic", None), ("satcp", "satcp", None)]
        for name, cc, st in vs:
            sc = (
                nyc_lon(cc, duration_s, seed, st, starlink_profile)
                if exp == "nyc-lon"
                else two_path(cc, duration_s, seed, st)
            )
            r = simulate(sc)
            out.runs[(exp, name)] = r
            out.rows.extend(rows_of(r, exp, name))
    return out


# --- The two-path experiment on the real-time emulator (leoguard-transport between two hosts) ---

#: Schemes the emulator runs: leoguard's BBR and StarTCP over it on leoguard-transport (the
#: simulator's sans-IO TCP over UDP), and Linux's BBR through iperf3 ("bbr-kernel").
EMU_SCHEMES = ("bbr", "startcp", "bbr-kernel")


EMU_TAIL_S = 2.0
"""Seconds an emulated run lasts beyond `duration_s`: the emulator stops a flow's sending `emu.tail_s`
(1 s) and 4 RTTs before its end, so the flow still sends through the last handover's whole second."""


def two_path_emu(scheme: str, duration_s: float = 62.0, seed: int = 1, startcp: dict | None = None) -> Scenario:
    """`two_path` for the emulator: the same topology and flow, on leoguard's own TCP (leoguard-transport)
    for "bbr" and "startcp", on the kernel's (iperf3) for "bbr-kernel"; the run lasts `EMU_TAIL_S` longer
    (its handovers are those of `duration_s`)."""
    cc, stack = ("bbr", "kernel") if scheme == "bbr-kernel" else (scheme, "leoguard")
    sc = two_path(cc, duration_s + EMU_TAIL_S, seed, startcp)
    flows = [f.model_copy(update={"stack": stack}) for f in sc.flows]
    update: dict[str, Any] = {"flows": flows, "name": f"startcp-two-path-{scheme}-emu"}
    if scheme == "bbr-kernel":
        # iperf3 reports what its sender wrote to the socket, not what was delivered: the sender's host
        # is captured (headers only) so its cumulative ACKs and resent ranges give the per-second
        # figures the simulator's sender series gives (`kernel_whole_seconds`).
        update["capture"] = Capture(nodes=["src"], max_packets=KERNEL_CAPTURE_PACKETS, snaplen=96)
    return sc.model_copy(update=update)


#: Records the kernel BBR run's capture may hold: 64 s at 40 Mbit/s is ~215,000 data segments and about
#: half as many ACKs, with room to spare.
KERNEL_CAPTURE_PACKETS = 1_000_000


def kernel_whole_seconds(r: Any, flow: int = 0) -> pl.DataFrame:
    """A kernel (iperf3) flow's whole-second series read from the run's capture at the sender's host:
    `acked_bytes` from the cumulative ACKs that reached it, `retransmissions` from the data it sent
    again (`leoguard.pcap.delivered_per_second`)."""
    from leoguard.pcap import delivered_per_second

    missed = ((r.emulator or {}).get("capture") or {}).get("missed", 0)
    if missed:
        # A capture cut short would freeze the figures where it stopped: refuse rather than under-report.
        raise LeoguardError(f"capture: {missed} packets past max_packets ({KERNEL_CAPTURE_PACKETS}); raise it")
    f = r.scenario.flows[flow]
    rows = delivered_per_second(r.capture, int(f.start_s), int(r.scenario.duration_s))
    return pl.DataFrame([{"flow": flow, **x} for x in rows],
                        schema={"flow": pl.UInt32, "t_ns": pl.Int64, "acked_bytes": pl.Int64,
                                "retransmissions": pl.Int64})  # fmt: skip


def emu_whole_seconds(r: Any, flow: int = 0) -> pl.DataFrame:
    """An emulated run's sender series at whole seconds of model time, as the simulator samples it:
    cumulative acknowledged bytes and retransmissions interpolated linearly between the transport's
    samples (every `sample_every_s`; iperf3's every 1 s), so `per_second` reads both engines alike."""
    s = r.series.filter(pl.col("flow") == flow).sort("t_ns")
    if s.is_empty():
        return s
    t = s["t_ns"].cast(pl.Float64).to_list()
    acked = s["acked_bytes"].cast(pl.Float64).to_list()
    retx = s["retransmissions"].cast(pl.Float64).to_list()
    out = []
    for sec in range(int(t[0] // 1e9) + 1, int(t[-1] // 1e9) + 1):
        x = sec * 1e9
        k = next(i for i in range(1, len(t)) if t[i] >= x)
        w = (x - t[k - 1]) / max(1.0, t[k] - t[k - 1])
        out.append(
            {
                "flow": flow,
                "t_ns": sec * 1_000_000_000,
                "acked_bytes": round(acked[k - 1] + w * (acked[k] - acked[k - 1])),
                "retransmissions": round(retx[k - 1] + w * (retx[k] - retx[k - 1])),
            }
        )
    return pl.DataFrame(out, schema={"flow": pl.UInt32, "t_ns": pl.Int64, "acked_bytes": pl.Int64,
                                     "retransmissions": pl.Int64})  # fmt: skip


@dataclass
class _WholeSeconds:
    """What `rows_of` reads of a run: its scenario, whole-second series and StarTCP stalls."""

    scenario: Scenario
    series: pl.DataFrame
    startcp: pl.DataFrame


def emu_rows_of(r: Any, experiment: str, scheme: str) -> list[dict[str, Any]]:
    """One row per handover of an emulated run (`EmuResults`), computed as the simulator's rows are."""
    captured = scheme == "bbr-kernel" and r.capture is not None
    secs = kernel_whole_seconds(r) if captured else emu_whole_seconds(r)
    view = _WholeSeconds(r.scenario, secs, r.startcp)
    rows = rows_of(view, experiment, scheme, engine="emu")  # type: ignore[arg-type]
    # A handover whose whole second the sender's series does not cover (the run ended first) has no row.
    last = int(secs["t_ns"].max() // 1_000_000_000) if len(secs) else -1
    rows = [x for x in rows if int(x["t_s"]) + 1 <= last]
    if scheme == "bbr-kernel" and not captured:
        # Without a capture only iperf3's report is there: bytes written to the socket per 1 s interval
        # from its own start, not bytes delivered, so no throughput for the handover second (its
        # retransmissions are the kernel's, over those intervals, interpolated).
        for x in rows:
            x["throughput_mbps"] = None
    return rows


def reproduce_emu(
    duration_s: float = 62.0,
    seed: int = 1,
    schemes: tuple[str, ...] = ("bbr", "startcp"),
    startcp: dict | None = None,
    on_run: Any = None,
) -> StartcpReproduction:
    """The two-path experiment on the emulator (real time: each run takes `duration_s` seconds and a few
    more to set up), one row per handover with engine "emu". `on_run(name, results)` is called after each
    run (progress)."""
    from leoguard.emu import emulate

    bad = [s for s in schemes if s not in EMU_SCHEMES]
    if bad:
        raise ValueError(f"unknown emulator scheme {bad[0]!r}: choose from {', '.join(EMU_SCHEMES)}")
    out = StartcpReproduction()
    for name in schemes:
        r = emulate(two_path_emu(name, duration_s, seed, startcp if name == "startcp" else None))
        out.runs[("two-path", f"{name}-emu")] = r  # type: ignore[assignment]
        out.rows.extend(emu_rows_of(r, "two-path", name))
        if on_run is not None:
            on_run(name, r)
    return out
