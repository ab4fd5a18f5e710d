"""Cross-validation of the two engines: `sim_vs_emu()` runs a fixed set of scenarios on the simulator and
on the real-time emulator (kernel TCP) and tabulates goodput, retransmissions and one-way delay side by
side (`leoguard validate sim-vs-emu`, docs/cross-validation.md). A row is flagged when the engines differ
by more than issue 13's bounds (goodput 10 %, retransmissions 25 %) or 15 % on one-way delay; the
reasons are for a person to establish and write down, not for this code to guess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from leoguard.scenario import Scenario, from_dict, load_scenario

REPO = Path(__file__).resolve().parents[2]
METRICS = ("goodput_mbps", "retransmissions", "owd_ms_p50", "owd_ms_p99")
# Largest relative difference (emulator vs simulator) a row may show unflagged.
THRESHOLDS = {"goodput_mbps": 0.10, "retransmissions": 0.25, "owd_ms_p50": 0.15, "owd_ms_p99": 0.15}


def _chain(cc: str, loss_pct: float, duration_s: float) -> Scenario:
    links = []
    for i in range(3):
        link: dict[str, Any] = {"a": i, "b": i + 1, "rate_mbps": 20, "delay_ms": 10, "queue_packets": 100}
        if loss_pct > 0:
            link["loss"] = {"model": "bernoulli", "p": loss_pct / 100}
        links.append(link)
    return from_dict(
        {
            "name": f"chain-3x20-{loss_pct:g}pct",
            "duration_s": duration_s,
            "links": links,
            "flows": [{"kind": "tcp", "src": 0, "dst": 3, "cc": cc}],
        }
    )


def _reordering(cc: str, duration_s: float) -> Scenario:
    """Two 50 Mbit/s paths, 60 and 20 ms one way, the route switching every 4 s: at every switch to the
    short path the delay drops by 40 ms and the first packets on it overtake the last ones on the long
    one (reordering by a full window), the case Linux's RACK, DSACK and undo are for."""
    return from_dict(
        {
            "name": "two-path-delay-drop", "duration_s": duration_s,
            "topology": {"kind": "two-path", "switch_every_s": 4.0, "queue_bytes": 500_000,
                         "paths": [{"rate_mbps": 50, "delay_ms": 60}, {"rate_mbps": 50, "delay_ms": 20}]},
            "flows": [{"kind": "tcp", "src": "src", "dst": "dst", "cc": cc}],
        }
    )  # fmt: skip


def _nyc_lon(variant: str, duration_s: float) -> Scenario:
    """The demo's path (New York - London over Starlink shell 1, 100 Mbit/s ground links with the
    Starlink loss model, CUBIC bulk and a UDP probe) under `variant` (a key of `ablation.VARIANTS`)."""
    from leoguard.ablation import VARIANTS
    from leoguard.demo import demo_scenario

    return VARIANTS[variant][1](demo_scenario(duration_s))


def cases(quick: bool = False) -> list[tuple[str, str, Callable[[], Scenario]]]:
    """(scenario label, cc, builder) of every case: the 3 x 20 Mbit/s chain with 60 ms RTT at 0, 0.1 and
    1 % Bernoulli loss on each link for cubic, bbr and reno; the two-path switching scenario; New
    York - London over Starlink shell 1 with the Starlink loss model; reordering: the delay dropping by
    40 ms at every other route switch (cubic, bbr, reno); the demo's New York - London path unprotected,
    with LinkGuardian and with SATGUARD (CUBIC; the emulator's ranking of the three). `quick`: the 0 %
    CUBIC chain."""
    d = 20.0
    out: list[tuple[str, str, Callable[[], Scenario]]] = []
    for loss in (0.0, 0.1, 1.0):
        for cc in ("cubic", "bbr", "reno"):
            out.append((f"chain 3x20 Mbit/s, {loss:g} % loss", cc, lambda cc=cc, loss=loss: _chain(cc, loss, d)))
    if quick:
        return [(label, cc, lambda: _chain("cubic", 0.0, 6.0)) for label, cc, _ in out[:1]]
    out.append(
        ("two-path switching", "cubic", lambda: load_scenario(REPO / "scenarios/two-path.toml", duration_s=45.0))
    )
    out.append(
        (
            "NYC-LON Starlink shell 1",
            "cubic",
            lambda: load_scenario(REPO / "scenarios/starlink-nyc-lon.toml", duration_s=30.0),
        )
    )
    for cc in ("cubic", "bbr", "reno"):
        out.append(("reordering: delay -40 ms every 8 s", cc, lambda cc=cc: _reordering(cc, d)))
    for variant, name in (("none", "unprotected"), ("linkguardian", "LinkGuardian"), ("satguard", "SATGUARD")):
        out.append((f"NYC-LON 100 Mbit/s, {name}", "cubic", lambda v=variant: _nyc_lon(v, 30.0)))
    return out


def _metrics(flow: dict[str, Any]) -> dict[str, float | None]:
    return {
        "goodput_mbps": round(flow["goodput_bps"] / 1e6, 3),
        "retransmissions": flow["retransmissions"],
        "owd_ms_p50": flow["owd_ms_p50"],
        "owd_ms_p99": flow["owd_ms_p99"],
    }


def sim_vs_emu(quick: bool = False, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Runs every case on both engines; one row per (scenario, cc, metric): sim, emu, relative difference
    (emu vs sim), flagged when above the metric's bound (`THRESHOLDS`)."""
    from leoguard.emu import emulate
    from leoguard.simulate import simulate

    rows = []
    for label, cc, build in cases(quick):
        sc = build()
        if progress:
            progress(f"{label} {cc}: simulator")
        sim = _metrics(simulate(sc).flows.row(0, named=True))
        if progress:
            progress(f"{label} {cc}: emulator")
        er = emulate(sc)
        emu = _metrics(er.flows.row(0, named=True))
        for m in METRICS:
            s, e = sim[m], emu[m]
            diff = None if s in (None, 0) or e is None else round((e - s) / s, 4)
            rows.append(
                {
                    "scenario": label, "cc": cc, "metric": m, "sim": s, "emu": e, "diff": diff,
                    "flag": diff is None or abs(diff) > THRESHOLDS[m],
                    "emu_realtime_ok": er.emulator["realtime_ok"],
                }
            )  # fmt: skip
    return rows


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """The table of docs/cross-validation.md."""
    lines = [
        "| scenario | cc | metric | simulator | emulator (kernel) | emu vs sim |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        diff = "n/a" if r["diff"] is None else f"{r['diff'] * 100:+.1f} %"
        mark = f" **>{THRESHOLDS[r['metric']] * 100:.0f} %**" if r["flag"] else ""
        lines.append(f"| {r['scenario']} | {r['cc']} | {r['metric']} | {r['sim']} | {r['emu']} | {diff}{mark} |")
    return "\n".join(lines) + "\n"
