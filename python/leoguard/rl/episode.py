"""One training episode of StarTCP's lead policy as a simulator scenario, and its reward (StarTCP §2.2
(ii), (iii)). Plain leoguard: no NN library, no Gymnasium (`leoguard.rl.env` wraps this).

An episode is one bulk StarTCP flow (over BBR, as the paper's §3) from `src` (node 0) to `dst` (node
1) across a path that changes every `period_s` (Starlink's 15 s), with an interruption of
`interruption_ms` at each change, as the paper's two-path experiment; unlike it, every slot between
two handovers has a path of its own, so the path's RTT can step at each handover (jitter), and a
constant-bit-rate cross flow switches on and off at random inside the slots (bandwidth variance).
What an episode draws (`EpisodeParams.draw`), and why:

- base RTT `rtt_ms` ~ U[40, 160] ms: the paper's 100 ms; Starlink's RTT median 95 ms (REFERENCE.md).
- `jitter_ms` ~ U[0, 20] ms: each slot's RTT is the base plus N(0, jitter), at least 20 ms (Starlink's
  RTT steps at handovers, mean jitter ~6.7 ms).
- bandwidth `rate_mbps` ~ U[10, 60] Mbit/s: the paper's 40 Mbit/s (the simulator's cost grows with
  the rate).
- bandwidth variance `cross` ~ U[0, 0.5]: a cross flow of `cross` x the rate, on and off for
  exponential times of mean 1 s, so the flow's share alternates between the rate and 1 - `cross` of it.

Node 2 is the cross flow's source, attached to `src` by a fast link; it is switched off by removing
its route (its packets are dropped at node 2) and on by restoring it, so it shares whichever path the
slot uses. Nodes 3.. are the slots' middle nodes.

Reward of a handover (`reward`): `alpha * u - beta * l` over the 1 s window centred on the handover,
[h - 0.5 s, h + 0.5 s) (the paper: "a 1-second window that contains the handover"; centred so that a
stall's whole cost falls inside it for leads up to 500 ms), with u the flow's goodput over the link
rate (0..1) and l the packet loss rate: data segments retransmitted over segments delivered plus
retransmitted. alpha = 1, beta = 2: a lost segment costs twice a segment not sent, since it took its
slot on the link and must be sent again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from leoguard import _core
from leoguard.scenario import Scenario, from_dict
from leoguard.simulate import Results

#: The lead policy's inputs, in order (the Rust `FEATURES`; a weights file lists exactly these).
FEATURES: tuple[str, ...] = tuple(_core.STARTCP_FEATURES)
#: The flow starts here (as the paper's Fig 3: the first handover falls in the flow's 13th second).
FLOW_START_S = 2.0
#: TCP segment payload (leoguard's TCP, 1500-byte MTU).
MSS = 1448
ALPHA = 1.0
BETA = 2.0
#: Half the reward window.
WINDOW_S = 0.5
#: Handovers StarTCP needs before it predicts (its `min_events` = 2): no decision for them.
WARMUP_HANDOVERS = 2
#: Cross flow packet size (bytes).
CROSS_SIZE = 1200


@dataclass(frozen=True)
class EpisodeParams:
    """One episode's network (see the module docs for the ranges)."""

    rtt_ms: float
    jitter_ms: float
    rate_mbps: float
    cross: float
    seed: int
    period_s: float = 15.0
    interruption_ms: float = 100.0
    #: Each slot's RTT (ms), slot k from handover k on (slot 0 before the first).
    slot_rtt_ms: tuple[float, ...] = ()
    #: The cross flow's (on, off) times (s), switched on at each `on` and off at each `off`.
    cross_on: tuple[tuple[float, float], ...] = ()

    @staticmethod
    def draw(rng: np.random.Generator, handovers: int, period_s: float = 15.0) -> EpisodeParams:
        """An episode with `handovers` handovers, drawn from `rng`."""
        rtt = float(rng.uniform(40.0, 160.0))
        jitter = float(rng.uniform(0.0, 20.0))
        rate = float(rng.uniform(10.0, 60.0))
        cross = float(rng.uniform(0.0, 0.5))
        slots = tuple(round(max(20.0, rtt + jitter * float(rng.standard_normal())), 3) for _ in range(handovers + 1))
        end = (handovers + 1) * period_s
        on: list[tuple[float, float]] = []
        t = FLOW_START_S + float(rng.exponential(1.0))
        while t < end:
            d = float(rng.exponential(1.0))
            on.append((round(t, 3), round(t + d, 3)))
            t += d + float(rng.exponential(1.0))
        return EpisodeParams(
            rtt_ms=round(rtt, 3), jitter_ms=round(jitter, 3), rate_mbps=round(rate, 3), cross=round(cross, 4),
            seed=int(rng.integers(1, 2**31)), period_s=period_s, slot_rtt_ms=slots, cross_on=tuple(on),
        )  # fmt: skip

    def handover_s(self, k: int) -> float:
        """Time of handover k (1-based)."""
        return k * self.period_s

    def summary(self) -> dict[str, Any]:
        """The drawn figures without the per-slot lists."""
        d = asdict(self)
        d.pop("slot_rtt_ms")
        d.pop("cross_on")
        return d


def scenario(p: EpisodeParams, duration_s: float, leads_ms: list[float], startcp: dict | None = None) -> Scenario:
    """The episode's scenario run for `duration_s`, StarTCP with the scripted `leads_ms` (one per
    stall, in order), or with the `[startcp]` section `startcp` when given."""
    slots = len(p.slot_rtt_ms)
    links: list[dict[str, Any]] = [{"a": 2, "b": 0, "rate_mbps": 10_000.0, "delay_ms": 0.0}]
    for s, rtt in enumerate(p.slot_rtt_ms):
        for a, b in ((0, 3 + s), (3 + s, 1)):
            links.append({"a": a, "b": b, "rate_mbps": p.rate_mbps, "delay_ms": rtt / 4})
    routes: list[dict[str, Any]] = [{"t_s": 0.0, "node": 2, "dst": 1}]
    events: list[dict[str, Any]] = []
    for s in range(slots):
        at = p.handover_s(s)
        if at >= duration_s:
            break
        routes += [{"t_s": at, "node": 0, "dst": 1, "link": 1 + 2 * s},
                   {"t_s": at, "node": 1, "dst": 0, "link": 2 + 2 * s}]  # fmt: skip
        if s > 0 and p.interruption_ms > 0:
            for link in (2 * s - 1, 2 * s, 2 * s + 1, 2 * s + 2):
                events += [{"t_s": at, "link": link, "up": False},
                           {"t_s": at + p.interruption_ms / 1e3, "link": link, "up": True}]  # fmt: skip
    for on, off in p.cross_on:
        if on < duration_s:
            routes += [{"t_s": on, "node": 2, "dst": 1, "link": 0}, {"t_s": off, "node": 2, "dst": 1}]
    routes.sort(key=lambda r: r["t_s"])
    events.sort(key=lambda e: e["t_s"])
    flows: list[dict[str, Any]] = [{"kind": "tcp", "src": 0, "dst": 1, "cc": "startcp", "start_s": FLOW_START_S}]
    if p.cross > 0 and p.cross_on:
        flows.append({"kind": "cbr", "src": 2, "dst": 1, "rate_mbps": p.cross * p.rate_mbps, "size": CROSS_SIZE})
    return from_dict(
        {
            "name": "startcp-rl-episode",
            "duration_s": duration_s,
            "seed": p.seed,
            "nodes": 3 + slots,
            "links": links,
            "routes": routes,
            "events": events,
            "flows": flows,
            "startcp": startcp if startcp is not None else {"policy": "scripted", "leads_ms": leads_ms or [0.0]},
        }
    )


def stalls(r: Results) -> pl.DataFrame:
    """The StarTCP flow's stalls, in order."""
    st = r.startcp
    return st.filter(pl.col("flow") == 0).sort("stall_start_ns") if not st.is_empty() else st


def observation(row: dict[str, Any]) -> np.ndarray:
    """The policy's input recorded with a stall (the Rust `LeadState::features`, raw units)."""
    return np.array([row[f"state_{f}"] for f in FEATURES], dtype=np.float64)


def nearest_handover(p: EpisodeParams, predicted_ns: int) -> float:
    """The scheduled handover a stall was for (the one nearest its prediction), seconds."""
    k = max(1, round(predicted_ns / 1e9 / p.period_s))
    return p.handover_s(k)


def window(r: Results, h_s: float, rate_mbps: float, half_s: float = WINDOW_S) -> dict[str, float]:
    """Goodput (Mbit/s), its share of `rate_mbps`, data segments retransmitted and the loss rate of
    the flow in [h - half, h + half), from its sender's 0.1 s samples, and the reward of that window."""
    s = r.series.filter(pl.col("flow") == 0).sort("t_ns")
    t = s["t_ns"].to_numpy().astype(np.int64)
    want = np.array([round((h_s - half_s) * 1e9), round((h_s + half_s) * 1e9)], dtype=np.int64)
    if len(t) == 0 or want[1] > t[-1]:
        raise ValueError(f"no sender sample at {want[1]} ns: the run ends before the window does")
    # The samples nearest the window's ends (exact on the 0.1 s grid the training handovers fall on).
    i = np.clip(np.searchsorted(t, want), 1, len(t) - 1)
    i = np.where(np.abs(t[i - 1] - want) <= np.abs(t[i] - want), i - 1, i)
    lo, hi = int(i[0]), int(i[1])
    acked_all, lost_all = s["acked_bytes"].to_numpy(), s["retransmissions"].to_numpy()
    acked = int(acked_all[hi]) - int(acked_all[lo])
    lost = int(lost_all[hi]) - int(lost_all[lo])
    span = int(t[hi] - t[lo])
    goodput = acked * 8 / (span / 1e9) / 1e6
    segs = acked / MSS
    plr = lost / (lost + segs) if lost + segs > 0 else 0.0
    u = goodput / rate_mbps
    return {
        "throughput_mbps": goodput,
        "utilisation": u,
        "lost_packets": float(lost),
        "loss_rate": plr,
        "reward": ALPHA * u - BETA * plr,
    }
