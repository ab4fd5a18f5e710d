"""LEOTP's evaluation (ICDCS'23, papers/leotp-slides.txt; REFERENCE.md "LEOTP") reproduced in the
simulator, side by side with the paper's numbers:

- `fig12`: the loss sweep. An 8-link chain consumer - GS - 5 satellites - GS - producer (here the
  producer is node 0, the consumer node 8: data flows 0 -> 8 as for the TCP baselines), 20 Mbit/s and
  20 ms per link, the 6 middle links lossy in the data direction; throughput of LEOTP, BBR, PCC
  (Allegro and Vivace: the paper does not say which; both are shown), Hybla and CUBIC.
- `table2`: Starlink shell 1 (72 x 22, 53 deg) from leoguard's constellation engine, Beijing - Hong
  Kong, Beijing - Paris, Beijing - New York: each city a gateway with a host behind it (20 ms,
  20 Mbit/s, lossless), ground uplinks 10 Mbit/s and downlinks 20 Mbit/s, each following the
  paper's capacity over a satellite pass (half at the handovers, full mid-pass, +/- 0.5 Mbit/s
  alternating each second), with 1 % loss, ISLs 20 Mbit/s with 0.1 % loss; routes as Hypatia's (each
  1 s the shortest path over every satellite in view of either end, no handover outage); LEOTP's ablation
  variants A-D (Table II) and the TCP baselines; throughput and one-way delay (Fig 17).
- `fig13`: link switching. Two paths (each a relay node, 20 Mbit/s, ISL loss 0.05 %), the route
  switching every 1-20 s; LEOTP vs BBR and PCC.
- `fig11`: bytes the sender puts on the wire to move 100 MB (quick: 10 MB), 5 links x 20 ms, loss
  0-2 %; LEOTP vs BBR.
- `fig10`: the one-way delay of recovered packets. 5 links x 20 ms (20 Mbit/s), every link losing
  0.2, 1 or 2 % in the data direction; LEOTP (a mid node re-requests a hole from its upstream) vs BBR
  (end-to-end TCP retransmission): p50 / p90 of the OWD of the data that needed a retransmission, from
  its first transmission to the arrival of the copy that delivered it.
- `fig14`: bandwidth fluctuation. 10 links of 20 Mbit/s / 20 ms, the second link from the producer a
  10 +/- 1 Mbit/s square wave (1 s at 11, 1 s at 9: a link `rate_schedule`); LEOTP with the mid nodes'
  target backlog BL_tar in {5, 7, 9, 12, 15} MSS, BBR as a reference: throughput against mean OWD.

Every run goes to the result store (skipped when already there); the rows, figures and report are
computed from the stored tables. Nothing is tuned to the paper: each row gives the difference and
what leoguard knows of its cause (docs/leotp.md, "In the simulator").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from leoguard.errors import LeoguardError, make_dir
from leoguard.scenario import Scenario, from_dict
from leoguard.store import ResultStore
from leoguard.sweep import SweepReport, SweepRun, run_sweep

#: The TCP baselines (leoguard's TCP with these controllers); "PCC" in the paper is one of the two.
BASELINES = ("bbr", "pcc-allegro", "pcc-vivace", "hybla", "cubic")

#: Fig 12 (Mbit/s): loss % -> scheme -> throughput. PCC's figure is given for both PCC variants.
PAPER_FIG12: dict[float, dict[str, float]] = {
    0.0: {"leotp": 18.4, "bbr": 18.6, "pcc": 18.1, "hybla": 19.0, "cubic": 19.0},
    0.1: {"leotp": 18.5, "bbr": 18.1, "pcc": 18.1, "hybla": 4.9, "cubic": 1.3},
    1.0: {"leotp": 18.2, "bbr": 16.3, "pcc": 14.0, "hybla": 1.3, "cubic": 0.3},
}

#: Table II: variant -> pair -> (Mbit/s, OWD ms).
PAPER_TABLE2: dict[str, dict[str, tuple[float, float]]] = {
    "A": {"BJ-HK": (7.82, 49.17), "BJ-PR": (7.70, 76.57), "BJ-NY": (7.91, 118.64)},
    "B": {"BJ-HK": (7.78, 51.39), "BJ-PR": (7.67, 80.74), "BJ-NY": (7.73, 126.10)},
    "C": {"BJ-HK": (7.38, 40.15), "BJ-PR": (7.23, 66.40), "BJ-NY": (6.80, 103.63)},
    "D": {"BJ-HK": (7.24, 42.05), "BJ-PR": (7.03, 70.38), "BJ-NY": (6.52, 112.20)},
}

#: Table II's pairs: code -> (consumer city, producer city). Data flows from the producer.
PAIRS: dict[str, tuple[str, str]] = {
    "BJ-HK": ("Beijing", "Hong Kong"),
    "BJ-PR": ("Beijing", "Paris"),
    "BJ-NY": ("Beijing", "New York"),
}

#: Table II's option of mid nodes on a random fraction of the satellites (and the ground stations).
MID_FRACTION = 0.25

#: Table II's GSL capacity (REFERENCE.md): over each pass a parabola from half the rate at the
#: handovers to the full rate mid-pass, +/- 0.5 Mbit/s alternating each second.
GSL_PASS = {"edge_fraction": 0.5, "alternate_mbps": 0.5, "step_s": 1.0}

#: Fig 11 at 2 % loss: MB sent to move 100 MB.
PAPER_FIG11 = {"bbr": 115.5, "leotp": 106.7}

#: Fig 10 (REFERENCE.md): retransmitted packets' OWD, about 90 ms (LEOTP) and 160 ms (BBR), "recovery
#: time 59-64 % shorter". Read off a figure: approximate, and the same at every loss level.
PAPER_FIG10_RETX_OWD_MS = {"leotp": 90.0, "bbr": 160.0}

#: Fig 14's BL_tar sweep (MSS) and square wave (Mbit/s, 1 s each) on the second link from the producer.
FIG14_BL_TAR = (5.0, 7.0, 9.0, 12.0, 15.0)
FIG14_WAVE = {"period_s": 2.0, "rates_mbps": [11.0, 9.0]}

#: Fig 14 has no numbers in REFERENCE.md, only the claim beside each row.
PAPER_FIG14_CLAIM = "larger BL_tar: more throughput and more delay (a throughput-delay trade-off)"

VARIANTS = ("A", "B", "C", "D")
EXPERIMENTS = ("fig12", "table2", "fig13", "fig11", "fig10", "fig14")


@dataclass(frozen=True)
class Mode:
    """How much of each experiment to run."""

    name: str
    losses_pct: tuple[float, ...]
    fig12_s: float
    table2_s: float
    table2_pairs: tuple[str, ...]
    fig13_every_s: tuple[float, ...]
    fig13_s: float
    fig11_losses_pct: tuple[float, ...]
    fig11_mb: float
    fig10_losses_pct: tuple[float, ...] = (0.2, 1.0, 2.0)
    fig10_s: float = 300.0
    fig14_bl_tar: tuple[float, ...] = FIG14_BL_TAR
    fig14_s: float = 120.0


MODES = {
    "quick": Mode(
        "quick", (0.0, 0.1, 1.0), 30.0, 30.0, tuple(PAIRS), (1.0, 5.0), 30.0, (0.0, 2.0), 10.0,
        fig10_s=30.0, fig14_s=30.0,
    ),
    # Fig 10: the paper's 300 s. Fig 14: REFERENCE.md gives no duration; 120 s as Fig 12 and 13.
    "full": Mode(
        "full", (0.0, 0.01, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0), 120.0, 120.0, tuple(PAIRS),
        (1.0, 2.0, 5.0, 10.0, 15.0, 20.0), 120.0, (0.0, 0.5, 1.0, 2.0), 100.0,
        fig10_s=300.0, fig14_s=120.0,
    ),
}  # fmt: skip


def _flow(scheme: str, src: Any, dst: Any, mb: float | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {"src": src, "dst": dst}
    f |= {"kind": "leotp"} if scheme == "leotp" else {"kind": "tcp", "cc": scheme}
    if mb is not None:
        f["bytes"] = int(mb * 1e6)
    return f


def chain(
    scheme: str,
    loss_pct: float,
    duration_s: float,
    *,
    links: int = 8,
    lossy: range | None = None,
    mb: float | None = None,
    seed: int = 1,
    leotp: dict[str, Any] | None = None,
    schedule: dict[str, Any] | None = None,
    scheduled: Sequence[int] = (),
    first_sent: bool = False,
) -> Scenario:
    """A chain of `links` links (20 Mbit/s, 20 ms, a 1000-packet queue as netem's default), `lossy`
    links (default: all but the two end links) losing `loss_pct` % in the data direction; the links
    in `scheduled` follow the rate `schedule` instead (a link `rate_schedule`). `first_sent` records
    every TCP segment's first transmission (`app_delay`, for Fig 10's recovered-packet OWD)."""  # fmt: skip
    lossy = lossy if lossy is not None else range(1, links - 1)
    loss = {"model": "bernoulli", "p": loss_pct / 100}
    ls = [
        {"a": i, "b": i + 1, "rate_mbps": 20, "delay_ms": 20, "queue_packets": 1000,
         **({"loss": loss} if loss_pct > 0 and i in lossy else {}),
         **({"rate_mbps": None, "rate_schedule": schedule} if schedule is not None and i in scheduled else {})}
        for i in range(links)
    ]  # fmt: skip
    d: dict[str, Any] = {
        "name": f"leotp-chain{links}-{scheme}-{loss_pct}" + ("-wave" if schedule is not None and scheduled else ""),
        "duration_s": duration_s,
        "seed": seed,
        "links": ls,
        "flows": [_flow(scheme, 0, links, mb)],
    }
    if first_sent and scheme != "leotp":
        d["app_delay_every"] = 1
    if scheme == "leotp":
        d["leotp"] = leotp or {}
    return from_dict(d)


def fig10_chain(scheme: str, loss_pct: float, duration_s: float, seed: int = 1) -> Scenario:
    """Fig 10's network: 5 links x 20 ms (20 Mbit/s), all lossy in the data direction."""
    return chain(scheme, loss_pct, duration_s, links=5, lossy=range(5), seed=seed, first_sent=True)


def fig14_chain(scheme: str, bl_tar_mss: float | None, duration_s: float, seed: int = 1) -> Scenario:
    """Fig 14's network: 10 links of 20 Mbit/s / 20 ms, lossless; the second link from the producer
    (node 0) a 10 +/- 1 Mbit/s square wave, 1 s each; LEOTP with BL_tar = `bl_tar_mss` MSS."""
    leotp = {"bl_tar_mss": bl_tar_mss} if scheme == "leotp" and bl_tar_mss is not None else None
    return chain(
        scheme, 0.0, duration_s, links=10, lossy=range(0), seed=seed, leotp=leotp, schedule=FIG14_WAVE, scheduled=(1,)
    )


def starlink(
    scheme: str, pair: str, duration_s: float, variant: str = "A", seed: int = 1, mid_nodes: float | None = None
) -> Scenario:
    """Table II's network for `pair`: both cities gateways of Starlink shell 1, a host behind each.
    `mid_nodes`: LEOTP's mid nodes on both ground stations and that seeded random fraction of the
    satellites (the paper's 25 % option; default: every node between the ends)."""
    consumer, producer = PAIRS[pair]
    tag = f"{variant}{'' if mid_nodes is None else f'-mid{mid_nodes:g}'}" if scheme == "leotp" else ""
    d: dict[str, Any] = {
        "name": f"leotp-starlink-{pair}-{scheme}{tag}",
        "duration_s": duration_s,
        "seed": seed,
        "topology": {
            "kind": "constellation",
            "constellation": "starlink-shell1",
            "ground": [consumer, producer],
            "ground_stations": [consumer, producer],
            # Hypatia's routing (REFERENCE.md): each step the shortest path over every satellite in
            # view of either end, recomputed every 1 s; a path change is a route update, no outage.
            "policy": "best-path",
            "step_s": 1.0,
            "interruption": "none",
            "hosts": [
                {"name": "consumer", "ground": consumer, "rate_mbps": 20, "delay_ms": 20},
                {"name": "producer", "ground": producer, "rate_mbps": 20, "delay_ms": 20},
            ],
            "gsl_rate_mbps": 10,
            "gsl_downlink_rate_mbps": 20,
            "gsl_pass": GSL_PASS,
            "isl_rate_mbps": 20,
            "gsl_loss": {"model": "bernoulli", "p": 0.01},
            "isl_loss": {"model": "bernoulli", "p": 0.001},
            "queue_bytes": 1_500_000,
        },
        "flows": [_flow(scheme, "producer", "consumer")],
    }
    if scheme == "leotp":
        d["leotp"] = {"variant": variant} | ({} if mid_nodes is None else {"mid_nodes": mid_nodes})
    return from_dict(d)


def two_path(scheme: str, every_s: float, duration_s: float, seed: int = 1) -> Scenario:
    """Fig 13's switching: two paths of 20 Mbit/s (40 ms each way), 0.05 % loss, switching every
    `every_s` seconds."""
    path = {"rate_mbps": 20, "delay_ms": 40, "loss": {"model": "bernoulli", "p": 0.0005}}
    d: dict[str, Any] = {
        "name": f"leotp-switch-{scheme}-{every_s}",
        "duration_s": duration_s,
        "seed": seed,
        "topology": {"kind": "two-path", "paths": [path, path], "switch_every_s": every_s, "queue_packets": 1000},
        "flows": [_flow(scheme, "src", "dst")],
    }
    if scheme == "leotp":
        d["leotp"] = {}
    return from_dict(d)


def runs(mode: Mode, experiments: Sequence[str]) -> list[SweepRun]:
    """Every run of the chosen experiments (pair = "<experiment>/<case>")."""
    out: list[SweepRun] = []
    if "fig12" in experiments:
        for loss in mode.losses_pct:
            for s in ("leotp", *BASELINES):
                out.append(SweepRun(chain(s, loss, mode.fig12_s), s, f"fig12/{loss}"))
    if "table2" in experiments:
        for pair in mode.table2_pairs:
            for v in VARIANTS:
                out.append(SweepRun(starlink("leotp", pair, mode.table2_s, v), f"leotp-{v}", f"table2/{pair}"))
            # The paper's option: mid nodes on a random 25 % of the satellites (the paper gives no figure).
            sc = starlink("leotp", pair, mode.table2_s, "A", mid_nodes=MID_FRACTION)
            out.append(SweepRun(sc, "leotp-A-mid", f"table2/{pair}"))
            for s in BASELINES:
                out.append(SweepRun(starlink(s, pair, mode.table2_s), s, f"table2/{pair}"))
    if "fig13" in experiments:
        for every in mode.fig13_every_s:
            for s in ("leotp", "bbr", "pcc-allegro", "pcc-vivace"):
                out.append(SweepRun(two_path(s, every, mode.fig13_s), s, f"fig13/{every}"))
    if "fig11" in experiments:
        for loss in mode.fig11_losses_pct:
            for s in ("leotp", "bbr"):
                sc = chain(s, loss, 600.0, links=5, lossy=range(5), mb=mode.fig11_mb)
                out.append(SweepRun(sc, s, f"fig11/{loss}"))
    if "fig10" in experiments:
        for loss in mode.fig10_losses_pct:
            for s in ("leotp", "bbr"):
                out.append(SweepRun(fig10_chain(s, loss, mode.fig10_s), s, f"fig10/{loss}"))
    if "fig14" in experiments:
        for b in mode.fig14_bl_tar:
            out.append(SweepRun(fig14_chain("leotp", b, mode.fig14_s), "leotp", f"fig14/{b}"))
        out.append(SweepRun(fig14_chain("bbr", None, mode.fig14_s), "bbr", "fig14/-"))
    return out


def recovered_owd(packets: pl.DataFrame, first_sent: pl.DataFrame | None = None) -> pl.DataFrame:
    """The data of flow 0 that needed a retransmission, one row per range (`seq`), with `owd_ms` from
    its first transmission to the arrival of the copy that delivered it, and `base_owd_ms`, the median
    OWD of the packets that needed none.

    LEOTP's `packets` has one row per Data packet that delivered new bytes, `sent_ns` already the
    producer's first send of the range and `retransmission` set when the copy was sent again (a mid
    node's cache answer or late fill, or a producer resend). TCP's has one row per copy received, with
    the copy's own send time: the recovered segments are the retransmitted copies of a `seq` whose
    original never arrived (the first such copy), and `first_sent` (the `app_delay` table, every
    segment's first transmission) gives the original's send time; a segment not found there (none
    should be: TCP resends whole segments) keeps its copy's own send time."""
    p = packets.filter(pl.col("flow") == 0)
    clean = p.filter(~pl.col("retransmission"))
    base = float(clean["owd_ms"].median() or 0.0) if clean.height else None  # type: ignore[arg-type]
    retx = p.filter(pl.col("retransmission"))
    if first_sent is not None:
        retx = (
            retx.join(clean.select("seq").unique(), on="seq", how="anti")
            .sort("received_ns")
            .unique("seq", keep="first", maintain_order=True)
        )
        first = first_sent.filter(pl.col("flow") == 0).select("seq", pl.col("sent_ns").alias("first_ns"))
        retx = retx.join(first.unique("seq", keep="first"), on="seq", how="left").with_columns(
            pl.coalesce("first_ns", "sent_ns").alias("sent_ns")
        )
    out = retx.select(
        "seq",
        "sent_ns",
        "received_ns",
        ((pl.col("received_ns").cast(pl.Float64) - pl.col("sent_ns").cast(pl.Float64)) / 1e6).alias("owd_ms"),
    )
    return out.with_columns(pl.lit(base, dtype=pl.Float64).alias("base_owd_ms"))


def _recovery(store: ResultStore, key: str, scheme: str, p: pl.DataFrame) -> dict[str, Any]:
    """Fig 10's figures of one run: p50/p90 OWD of the recovered data and the median recovery time
    (their OWD above the median of the packets that needed no recovery)."""
    r = recovered_owd(p, None if scheme == "leotp" else store.table(key, "app_delay"))
    if r.is_empty():
        return {"retx_packets": 0, "retx_owd_p50_ms": None, "retx_owd_p90_ms": None, "recovery_ms_p50": None}
    p50 = float(r["owd_ms"].quantile(0.5, "linear") or 0.0)
    base = r["base_owd_ms"][0]
    return {
        "retx_packets": r.height,
        "retx_owd_p50_ms": round(p50, 2),
        "retx_owd_p90_ms": round(float(r["owd_ms"].quantile(0.9, "linear") or 0.0), 2),
        "recovery_ms_p50": None if base is None else round(p50 - base, 2),
    }


def _metrics(store: ResultStore, key: str) -> dict[str, Any]:
    f = store.table(key, "flows").row(0, named=True)
    p = store.table(key, "packets")
    owd = p.filter(pl.col("flow") == 0)["owd_ms"] if not p.is_empty() else pl.Series([], dtype=pl.Float64)
    return {
        "packets": p,
        "throughput_mbps": f["goodput_bps"] / 1e6,
        "owd_ms": float(owd.mean()) if len(owd) else None,  # type: ignore[arg-type]
        "owd_p99_ms": float(owd.quantile(0.99) or 0.0) if len(owd) else None,
        "packets_sent": f["packets_sent"],
        "delivered_bytes": f["delivered_bytes"],
        "fct_s": f["fct_s"],
        "retransmissions": f["retransmissions"],
    }


def _paper_key(scheme: str) -> str:
    return "pcc" if scheme.startswith("pcc") else scheme


#: Known reasons a row differs from the paper (docs/leotp.md discusses each).
WHY = {
    "fig12-leotp": "slow start counted in the mean; a hole is re-requested once, and a lost re-request or "
    "answer (about 2 % of holes at 1 % per link) waits for the consumer's RTO (~2 x 0.5 s), stalling in-order "
    "delivery; a lost first packet is never a hole (mid nodes resynchronise on it) and waits for the "
    "consumer's timeout (about 2 RTO once the first RTT sample re-armed it)",
    "fig12-tcp": "leoguard's TCP (RACK-TLP, Linux defaults) and controllers, not the kernel's; netem's "
    "1000-packet queue assumed; slow start counted in the mean",
    "table2": "routes as Hypatia's (each 1 s the shortest path over every satellite in view of either end) on "
    "leoguard's orbits and +Grid, a GSL pass being the time the path keeps its first or last satellite; no "
    "handover outage; gateways on both ends; loss in both directions of every link; OWD counts from the "
    "producer's first send of a range (recovery included)",
    "table2-C": "without hop CC the consumer's end-to-end controller alone sets the rate over the whole "
    "constellation path",
    "table2-B": "without in-network retransmission a hole waits for the consumer's timeout (about 2 RTO): "
    "leoguard's B falls further below A than the paper's (in-network retransmission is worth more than hop CC "
    "here, the paper finds the opposite)",
    "table2-mid": "the paper gives no figure for its 25 % option; here both ground stations and a seeded random "
    "quarter of the satellites are mid nodes, so hop CC and hole detection span several links between them",
    "hybla": "leoguard's Hybla regrows fast at its ~0.5 s SRTT (rho^2 / cwnd per ACK): it collapses in 30 s "
    "runs but not over 120 s",
    "fig13": "one relay per path (the paper: two satellites), routes switch instantly without interruption",
    "fig11": "bytes counted at the sender (producer Data or TCP segments) x MSS",
    "fig10": "OWD from the data's first transmission (LEOTP: the producer's first send of the range; TCP: the "
    "segment's first transmission) to the arrival of the copy that delivered it, so it contains the 100 ms "
    "one-way propagation of the chain, which the paper's ~90 ms for LEOTP does not: the paper's reference "
    "point is not stated (REFERENCE.md); the paper's two values are read off its figure; every link is lossy, "
    "and a loss on the consumer's link has no mid node downstream and waits for the consumer's timeout "
    "(LEOTP's p90); a producer resend waits behind its send queue; leoguard's TCP (RACK-TLP) and BBR v1, not "
    "the kernel's",
    "fig14": "throughput and OWD over the whole run (slow start included); REFERENCE.md gives no duration (120 s "
    "in full mode) and no numbers, only the trade-off; a packet's serialisation time is set by the rate in "
    "force when it starts; LEOTP's OWD counts from the producer's first send of a range, TCP's per copy; "
    "why throughput falls from BL_tar 7 to 9-12 before rising at 15 is not established",
}


def compare(store: ResultStore, planned: Sequence[SweepRun]) -> list[dict[str, Any]]:
    """The rows of `--json`: one per stored run, the paper's figure beside it."""
    rows: list[dict[str, Any]] = []
    for r in planned:
        if not store.has(r.key):
            continue
        m = _metrics(store, r.key)
        exp, case = r.pair.split("/")
        row: dict[str, Any] = {
            "experiment": exp, "engine": "sim", "scheme": r.scheme.split("-")[0] if r.scheme.startswith("leotp")
            else r.scheme, "variant": None, "pair": None, "loss_pct": None,
            "throughput_mbps": round(m["throughput_mbps"], 3),
            "owd_ms": None if m["owd_ms"] is None else round(m["owd_ms"], 2),
            "paper_throughput_mbps": None, "paper_owd_ms": None,
            # Fig 14's swept BL_tar and Fig 10's recovered-packet OWD: null in the other experiments.
            "bl_tar_mss": None, "retx_packets": None, "retx_owd_p50_ms": None, "retx_owd_p90_ms": None,
            "recovery_ms_p50": None, "paper_retx_owd_ms": None,
        }  # fmt: skip
        if exp == "fig12":
            row["loss_pct"] = float(case)
            row["paper_throughput_mbps"] = PAPER_FIG12.get(float(case), {}).get(_paper_key(r.scheme))
            row["why"] = WHY["fig12-leotp" if r.scheme == "leotp" else "fig12-tcp"]
            if r.scheme == "hybla":
                row["why"] += "; " + WHY["hybla"]
        elif exp == "table2":
            row["pair"] = case
            row["loss_pct"] = None
            if r.scheme.startswith("leotp-"):
                v = r.scheme.split("-")[1]
                row["variant"] = v
                row["mid_nodes"] = MID_FRACTION if r.scheme.endswith("-mid") else "all"
                if not r.scheme.endswith("-mid"):
                    row["paper_throughput_mbps"], row["paper_owd_ms"] = PAPER_TABLE2[v][case]
            extra = "table2-mid" if r.scheme.endswith("-mid") else f"table2-{row['variant']}"
            row["why"] = WHY["table2"] + (f"; {WHY[extra]}" if extra in WHY else "")
        elif exp == "fig13":
            row["switch_every_s"] = float(case)
            row["why"] = WHY["fig13"]
        elif exp == "fig11":
            row["loss_pct"] = float(case)
            sent = m["packets_sent"] * (1453 if r.scheme == "leotp" else 1448)
            row["sent_mb"] = round(sent / 1e6, 2)
            # Bytes sent per byte delivered (the paper moves 100 MB; the quick mode fewer).
            row["sent_ratio"] = round(sent / max(m["delivered_bytes"], 1), 4)
            paper = PAPER_FIG11.get(r.scheme) if float(case) == 2.0 else None
            row["paper_sent_ratio"] = None if paper is None else paper / 100
            row["why"] = WHY["fig11"]
        elif exp == "fig10":
            row["loss_pct"] = float(case)
            row |= _recovery(store, r.key, r.scheme, m["packets"])
            row["paper_retx_owd_ms"] = PAPER_FIG10_RETX_OWD_MS.get(r.scheme)
            row["why"] = WHY["fig10"]
        elif exp == "fig14":
            row["loss_pct"] = 0.0
            row["bl_tar_mss"] = None if case == "-" else float(case)
            row["why"] = f"paper: {PAPER_FIG14_CLAIM}; " + WHY["fig14"]
        paper = row["paper_throughput_mbps"]
        row["diff_pct"] = None if not paper else round(100 * (row["throughput_mbps"] - paper) / paper, 1)
        row["owd_p99_ms"] = None if m["owd_p99_ms"] is None else round(m["owd_p99_ms"], 2)
        rows.append(row)
    return rows


def fig10_distributions(store: ResultStore, planned: Sequence[SweepRun]) -> dict[tuple[str, float], list[float]]:
    """Fig 10's recovered-packet OWDs (ms) per (scheme, loss %), for its CDF."""
    out: dict[tuple[str, float], list[float]] = {}
    for r in planned:
        if r.pair.startswith("fig10/") and store.has(r.key):
            first = None if r.scheme == "leotp" else store.table(r.key, "app_delay")
            out[(r.scheme, float(r.pair.split("/")[1]))] = recovered_owd(store.table(r.key, "packets"), first)[
                "owd_ms"
            ].to_list()
    return out


@dataclass
class Reproduction:
    """What `leoguard reproduce leotp` produced."""

    mode: Mode
    sweep: SweepReport
    rows: list[dict[str, Any]]
    figures: list[Path]
    report: Path | None


def reproduce(
    mode: str = "quick",
    *,
    store: str | Path = "results",
    out: str | Path | None = "out/reproduce-leotp",
    experiments: Sequence[str] | None = None,
    workers: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
    planned: Sequence[SweepRun] | None = None,
) -> Reproduction:
    """Runs what the store lacks (or the given `planned` runs), then writes figures and report.md
    under `out` (none when `out` is None)."""
    if mode not in MODES:
        raise LeoguardError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    exps = list(experiments or EXPERIMENTS)
    for e in exps:
        if e not in EXPERIMENTS:
            raise LeoguardError(f"unknown experiment {e!r} (known: {', '.join(EXPERIMENTS)})")
    m = MODES[mode]
    plan = list(planned) if planned is not None else runs(m, exps)
    with ResultStore(store) as st:
        rep = run_sweep(plan, st, workers=workers, progress=progress)
        rows = compare(st, plan)
        dists = fig10_distributions(st, plan) if out is not None else {}
    figures: list[Path] = []
    report = None
    if out is not None:
        from leoguard.reproduce.leotp_figures import write_figures, write_report

        o = Path(out)
        make_dir(o)
        figures = write_figures(rows, o, dists)
        report = write_report(rows, m.name, rep, o)
        (o / "rows.json").write_text(json.dumps(rows, indent=2))
    return Reproduction(m, rep, rows, figures, report)
