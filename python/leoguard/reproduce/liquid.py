"""Liquid data transport over OneWeb (papers/liquid-data-oneweb.txt, REFERENCE.md "Liquid data
transport") reproduced: a TCP flow at a 10 Mbit/s target rate over a OneWeb bent-pipe path with ~1 %
added random loss, CUBIC and BBR, each with and without the RaptorQ tunnel (`[liquid]`,
docs/liquid.md), on `scenarios/liquid-oneweb.toml`.

The study's result: CUBIC without coding never grows its window and collapses, with coding it holds
the 10 Mbit/s target; BBR reaches the target either way, but its retransmissions fall from 1767 to 81
with the tunnel. Only the congestion control and the tunnel change between the four runs (same
topology, seed and loss draws on the network).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from leoguard.errors import LeoguardError, make_dir
from leoguard.scenario import Scenario, load_scenario
from leoguard.simulate import Results, simulate

#: The scenario the runs start from.
SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "liquid-oneweb.toml"

#: The study's figures (Fig. 9 and text): retransmissions of BBR; CUBIC qualitative.
PAPER: dict[tuple[str, bool], dict[str, Any]] = {
    ("cubic", False): {"goodput": "collapses (cwnd never grows)", "retransmissions": None},
    ("cubic", True): {"goodput": "~10 Mbit/s (cwnd steady)", "retransmissions": None},
    ("bbr", False): {"goodput": "~10 Mbit/s", "retransmissions": 1767},
    ("bbr", True): {"goodput": "~10 Mbit/s", "retransmissions": 81},
}

CCS = ("cubic", "bbr")


@dataclass
class LiquidReproduction:
    """The four runs' rows, the per-run series, and where the figure and table went."""

    rows: list[dict[str, Any]]
    series: pl.DataFrame
    figure: Path | None = None
    table: Path | None = None
    results: dict[tuple[str, bool], Results] = field(default_factory=dict)

    def json_rows(self) -> list[dict[str, Any]]:
        """Rows {cc, tunnel, goodput_bps, retransmissions} (and the tunnel's counters)."""
        return self.rows


def variant(base: Scenario, cc: str, tunnel: bool, flow_s: float | None = None) -> Scenario:
    """`base` with congestion control `cc`, with or without its `[liquid]` section, and (if given) the
    flow shortened to `flow_s` seconds."""
    if base.liquid is None:
        raise LeoguardError(f"{base.name}: the scenario needs a [liquid] section to compare with")
    sc = base.model_copy(deep=True)
    for f in sc.flows:
        f.cc = cc  # type: ignore[assignment]
    if not tunnel:
        sc.liquid = None
    if flow_s is not None:
        if flow_s <= 0:
            raise LeoguardError(f"invalid flow_s = {flow_s}: must be > 0")
        start = min(f.start_s for f in sc.flows)
        sc.duration_s = min(sc.duration_s, start + flow_s)
    return sc


def _row(cc: str, tunnel: bool, r: Results) -> dict[str, Any]:
    f = r.flows.row(0, named=True)
    row: dict[str, Any] = {
        "cc": cc,
        "tunnel": tunnel,
        "goodput_bps": round(float(f["goodput_bps"]), 1),
        "retransmissions": int(f["retransmissions"]),
        # Retransmissions the receiver later reported as duplicates (DSACK): the data was only late.
        "spurious_retransmissions": int(f["dsacks"]),
        "rtos": int(f["rtos"]),
    }
    lq = r.liquid
    if lq is not None:
        src = max(lq["source_symbols"], 1)
        out = max(lq["packets_out"], 1)
        row |= {
            "overhead": round((lq["repair_symbols"] + lq["extra_repair"]) / src, 4),
            "wire_bytes_per_byte": round(lq["datagram_bytes"] / max(lq["bytes_in"], 1), 3),
            "blocks_recovered": lq["blocks_recovered"],
            "blocks_lost": lq["blocks_lost"],
            "added_delay_ms_mean": round(lq["added_delay_sum_ns"] / out / 1e6, 3),
            "added_delay_ms_max": round(lq["added_delay_max_ns"] / 1e6, 3),
        }
    return row


def _series(cc: str, tunnel: bool, r: Results) -> pl.DataFrame:
    """Per sample: time since the flow's start, throughput over the sample interval (acknowledged
    bytes), cwnd and cumulative retransmissions."""
    s = r.series.filter(pl.col("flow") == 0).sort("t_ns")
    start = min(f.start_s for f in r.scenario.flows)
    return (
        s.select(
            (pl.col("t_ns") / 1e9 - start).alias("t_s"),
            (pl.col("acked_bytes").diff().fill_null(0) * 8 / (pl.col("t_ns").diff().fill_null(1) / 1e9)).alias(
                "throughput_bps"
            ),
            pl.col("cwnd_bytes").alias("cwnd"),
            pl.col("retransmissions"),
        )
        .filter(pl.col("t_s") >= 0)
        .with_columns(pl.lit(cc).alias("cc"), pl.lit(tunnel).alias("tunnel"))
    )


def reproduce(
    scenario: Path = SCENARIO, out: Path | None = None, flow_s: float | None = None, seed: int | None = None
) -> LiquidReproduction:
    """Runs CUBIC and BBR with and without the tunnel; writes `liquid.png` and `table.md` (and
    `rows.json`) to `out` when given."""
    base = load_scenario(scenario, **({"seed": seed} if seed is not None else {}))
    rows, series, results = [], [], {}
    for cc in CCS:
        for tunnel in (False, True):
            r = simulate(variant(base, cc, tunnel, flow_s))
            results[(cc, tunnel)] = r
            rows.append(_row(cc, tunnel, r))
            series.append(_series(cc, tunnel, r))
    rep = LiquidReproduction(rows=rows, series=pl.concat(series), results=results)
    if out is not None:
        make_dir(out)
        rep.figure = figure(rep.series, out / "liquid.png")
        rep.table = out / "table.md"
        rep.table.write_text(markdown(rows))
        (out / "rows.json").write_text(json.dumps(rows, indent=2))
    return rep


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows side by side with the study's figures, as a markdown table."""
    lines = [
        "| cc | tunnel | goodput (Mbit/s) | retransmissions | paper: goodput | paper: retransmissions | "
        "repair/source | wire B per B | blocks recovered / lost | added delay mean / max (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = PAPER[(r["cc"], r["tunnel"])]
        tun = r["tunnel"]
        lines.append(
            f"| {r['cc']} | {'yes' if tun else 'no'} | {r['goodput_bps'] / 1e6:.2f} | {r['retransmissions']} | "
            f"{p['goodput']} | {p['retransmissions'] if p['retransmissions'] is not None else '-'} | "
            + (
                f"{r['overhead']:.3f} | {r['wire_bytes_per_byte']:.2f} | {r['blocks_recovered']} / "
                f"{r['blocks_lost']} | {r['added_delay_ms_mean']:.2f} / {r['added_delay_ms_max']:.1f} |"
                if tun
                else "- | - | - | - |"
            )
        )
    return "\n".join(lines) + "\n"


def figure(series: pl.DataFrame, path: Path) -> Path:
    """Throughput, cwnd and cumulative retransmissions over time, one line per (cc, tunnel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for (cc, tunnel), g in series.group_by(["cc", "tunnel"], maintain_order=True):
        label = f"{cc} {'+ liquid' if tunnel else 'no coding'}"
        style = "-" if tunnel else "--"
        t = g["t_s"].to_numpy()
        # One-second means of the 100 ms throughput samples (the study plots per-second rates).
        thr = (
            g.with_columns((pl.col("t_s").floor()).alias("sec"))
            .group_by("sec", maintain_order=True)
            .agg(pl.col("throughput_bps").mean())
        )
        axes[0].plot(thr["sec"].to_numpy(), thr["throughput_bps"].to_numpy() / 1e6, style, label=label)
        axes[1].plot(t, g["cwnd"].to_numpy() / 1e3, style, label=label)
        axes[2].plot(t, g["retransmissions"].to_numpy(), style, label=label)
    axes[0].set_ylabel("throughput (Mbit/s)")
    axes[1].set_ylabel("cwnd (kB, log)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("retransmissions (cumulative)")
    axes[2].set_xlabel("time since the flow started (s)")
    axes[0].legend(fontsize=8)
    axes[0].set_title("TCP at a 10 Mbit/s target over OneWeb with ~1 % added loss")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
