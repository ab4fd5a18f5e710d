"""The modelled side of `leoguard validate starlink`: the measured path rebuilt in the constellation
engine (a leo-path from the dish to the PoP over the trace's own UTC window, so the 15 s schedule's
phase comes from the clock), run in the simulator or the emulator with the measurement's own probe
(pings at the trace's spacing) or bulk flow (CUBIC in the trace's direction), and returned as a trace
of the same type as the measurement, so one set of statistics reads both."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal

import numpy as np

from leoguard.access import Access
from leoguard.errors import LeoguardError
from leoguard.realism.traces import RttTrace, ThroughputTrace
from leoguard.scenario import Scenario, from_dict

DISH = "48.43,-123.37"
"""The dish of the shared measurement: the Victoria BC / Seattle area (its README); Victoria's centre."""
POP = "Seattle"
"""Its point of presence (the Seattle PoP; the gateway is taken at the PoP)."""
PROBE_BYTES = 104
"""An ICMPv6 echo of ping's default 56 data bytes: 56 + 8 + 40."""

Engine = Literal["sim", "emu"]


def _iso(t_unix: float) -> str:
    return _dt.datetime.fromtimestamp(t_unix, tz=_dt.UTC).isoformat().replace("+00:00", "Z")


def path_topology(
    dish: str,
    pop: str,
    start_unix: float,
    rate_mbps: float,
    access: Access | None,
    queue_bytes: int | None = None,
    gsl_loss: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The leo-path of the measurement: dish (end a) to PoP (end b), Starlink shell 1 on the global 15 s
    schedule with the path-aware slot choice (the dish's and the gateway's satellites chosen jointly,
    so a short path stays a bent pipe through one satellite), its orbits at the trace's UTC start. No
    handover interruptions: the measured boundaries show a delay rise but no loss of their own (the
    access profile models what they do)."""
    topo: dict[str, Any] = {
        "kind": "leo-path", "constellation": "starlink-shell1", "a": dish, "b": pop,
        "policy": "global-schedule", "slot_criterion": "path-aware", "step_s": 0.1,
        "interruption": "none", "rate_mbps": rate_mbps, "epoch": _iso(start_unix),
    }  # fmt: skip
    if queue_bytes is not None:
        topo["queue_bytes"] = queue_bytes
    if access is not None:
        topo["access"] = access.model_dump(exclude_none=True, exclude_defaults=False)
    if gsl_loss is not None:
        topo["gsl_loss"] = gsl_loss
    return topo


def rtt_scenario(
    tr: RttTrace,
    dish: str,
    pop: str,
    seed: int,
    access: Access | None,
    engine: Engine,
    rate_mbps: float = 100.0,
    gsl_loss: dict[str, Any] | None = None,
) -> Scenario:
    """Probes at the trace's median spacing over the trace's window: in the simulator a probe each way
    at every send time (the round trip is their sum, lost if either is); in the emulator real ping."""
    spacing = float(np.median(np.diff(tr.t))) if len(tr.t) > 1 else 0.15
    rate = PROBE_BYTES * 8 / spacing / 1e6
    d: dict[str, Any] = {
        "name": "validate-starlink-rtt",
        "duration_s": float(tr.end - tr.start) + spacing,
        "seed": seed,
        "sample_every_s": 1.0,
        "topology": path_topology(dish, pop, tr.start, rate_mbps, access, gsl_loss=gsl_loss),
        "flows": [
            {"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": rate, "size": PROBE_BYTES},
            {"kind": "cbr", "src": 1, "dst": 0, "rate_mbps": rate, "size": PROBE_BYTES},
        ],
    }
    if engine == "emu":
        d["flows"] = d["flows"][:1]
        d["emu"] = {"ping_interval_ms": spacing * 1e3}
    return from_dict(d, source="leoguard validate starlink")


def throughput_scenario(
    tr: ThroughputTrace,
    dish: str,
    pop: str,
    seed: int,
    access: Access | None,
    rate_mbps: float,
    gsl_loss: dict[str, Any] | None = None,
) -> Scenario:
    """One CUBIC bulk flow in the trace's direction (downlink: PoP to dish) over the trace's window,
    sampled every 0.1 s like iperf3's intervals."""
    down = tr.direction != "uplink"
    return from_dict(
        {
            "name": "validate-starlink-throughput",
            "duration_s": float(tr.end - tr.start),
            "seed": seed,
            "sample_every_s": 0.1,
            "topology": path_topology(dish, pop, tr.start, rate_mbps, access, 1_000_000, gsl_loss),
            "flows": [{"kind": "tcp", "src": 1 if down else 0, "dst": 0 if down else 1, "cc": "cubic"}],
        },
        source="leoguard validate starlink",
    )  # fmt: skip


def _kept_real_time(r: Any, what: str) -> Any:
    """The emulator's results `r`, refused if the run did not keep real time (then its `what` are not the
    model's)."""
    if not r.emulator.get("realtime_ok", True):
        raise LeoguardError(f"the emulated validation run did not keep real time: its {what} are not the model's")
    return r


def model_rtt(
    tr: RttTrace,
    dish: str = DISH,
    pop: str = POP,
    seed: int = 1,
    access: Access | None = None,
    engine: Engine = "sim",
    gsl_loss: dict[str, Any] | None = None,
) -> RttTrace:
    """The model's round trips for the trace's window, as an RttTrace (send times in UTC)."""
    sc = rtt_scenario(tr, dish, pop, seed, access, engine, gsl_loss=gsl_loss)
    if engine == "sim":
        from leoguard.simulate import simulate

        r = simulate(sc)
        pk = r.packets
        n = int(sc.duration_s / (PROBE_BYTES * 8 / (sc.flows[0].rate_mbps * 1e6))) + 2
        owd = []
        seqs, sent = [], []
        for f in (0, 1):
            p = pk.filter(pk["flow"] == f)
            o = np.full(n, np.nan)
            seq = p["seq"].to_numpy().astype(np.int64)
            keep = seq < n
            o[seq[keep]] = p["owd_ms"].to_numpy()[keep]
            owd.append(o)
            seqs.append(seq[keep])
            sent.append(p["sent_ns"].to_numpy()[keep].astype(float) / 1e9)
        # Send times as the engine sent them (a probe lost both ways has none: the line through the
        # others, whose spacing is the engine's, not the rounded rate's, which drifts over an hour).
        slope, icpt = np.polyfit(np.concatenate(seqs), np.concatenate(sent), 1)
        t = tr.start + icpt + slope * np.arange(n)
        last = int(max(int(s_.max()) if len(s_) else 0 for s_ in seqs)) + 1
        owd = [o[:last] for o in owd]
        t = t[:last]
        rtt = owd[0] + owd[1]  # NaN if either direction lost it
        return RttTrace(
            source=f"model: simulator, seed {seed}", fmt="model", t=t, rtt_ms=rtt, up_ms=owd[0], down_ms=owd[1]
        )
    from leoguard.emu import emulate

    r = _kept_real_time(emulate(sc), "delays")
    pings = r.pings.filter(r.pings["sent_s"].is_not_null())
    if len(pings) < 2:
        raise LeoguardError("the emulated validation run got too few ping replies with send times")
    # ping numbers its probes from 1.
    n = int(r.pings["seq"].max())
    rtt = np.full(n, np.nan)
    seq = pings["seq"].to_numpy().astype(np.int64) - 1
    rtt[seq] = pings["rtt_ms"].to_numpy()
    # Send times in model time from ping -D; a lost probe's between its neighbours' (ping paces itself
    # on its own clock, so seq x interval drifts from the model's t = 0 and from the model's cycle).
    order = np.argsort(seq)
    t = tr.start + np.interp(np.arange(n), seq[order].astype(float), pings["sent_s"].to_numpy()[order])
    return RttTrace(
        source=f"model: emulator (ping), seed {seed}", fmt="model", t=t, rtt_ms=rtt, up_ms=None, down_ms=None
    )


def model_throughput(
    tr: ThroughputTrace,
    dish: str = DISH,
    pop: str = POP,
    seed: int = 1,
    access: Access | None = None,
    engine: Engine = "sim",
    gsl_loss: dict[str, Any] | None = None,
    rate_mbps: float = 1000.0,
) -> ThroughputTrace:
    """The model's CUBIC goodput per 0.1 s for the trace's window (kernel CUBIC with iperf3 in the
    emulator), as a ThroughputTrace."""
    sc = throughput_scenario(tr, dish, pop, seed, access, rate_mbps, gsl_loss)
    if engine == "sim":
        from leoguard.simulate import simulate

        r: Any = simulate(sc)
    else:
        from leoguard.emu import emulate

        r = _kept_real_time(emulate(sc), "throughput")
    s = r.series.filter(r.series["flow"] == 0).sort("t_ns")
    t = s["t_ns"].to_numpy().astype(float) / 1e9
    acked = s["acked_bytes"].to_numpy().astype(float)
    bits = np.diff(acked, prepend=0.0) * 8
    t_start = tr.start + np.concatenate([[0.0], t[:-1]])
    t_end = tr.start + t
    keep = t_end > t_start
    src = f"model: {'simulator' if engine == 'sim' else 'emulator (kernel CUBIC, iperf3)'}, seed {seed}"
    return ThroughputTrace(
        source=src, fmt="model", direction=tr.direction, t_start=t_start[keep], t_end=t_end[keep], bits=bits[keep],
        retransmits=None, mss=None,
    )  # fmt: skip
