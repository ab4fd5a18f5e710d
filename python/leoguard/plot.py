"""Plots: matplotlib functions that take leoguard results and return a Figure (STYLE.md rule 11)."""

from __future__ import annotations

import functools
from importlib import resources

import matplotlib

matplotlib.use("Agg")  # files, not windows: leoguard runs headless
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from leoguard.orbit import Constellation, PathTimeline


@functools.lru_cache(maxsize=1)
def land_mask() -> np.ndarray:
    """A 0.5-degree land mask (360 x 720, north up, from -180 deg longitude); see tools/make_landmask.py."""
    with resources.files("leoguard").joinpath("data/landmask_0p5deg.npz").open("rb") as f:
        z = np.load(f)
        shape = tuple(int(x) for x in z["shape"])
        return np.unpackbits(z["mask"], axis=1)[:, : shape[1]].astype(bool)


def world_axes(ax: plt.Axes) -> None:
    """Draws the land mask as a plate carrée background."""
    ax.imshow(land_mask(), extent=(-180, 180, -90, 90), cmap="Greys", vmin=0, vmax=4, origin="upper", zorder=0)
    ax.set_xlim(-180, 180)
    ax.set_ylim(-90, 90)
    ax.set_xlabel("longitude (deg)")
    ax.set_ylabel("latitude (deg)")
    ax.set_aspect("equal")


def _split_dateline(lons: list[float], lats: list[float]) -> list[tuple[list[float], list[float]]]:
    """Segments of a polyline cut where it crosses the date line, so lines do not streak across the map."""
    segs, cur_lo, cur_la = [], [lons[0]], [lats[0]]
    for lo, la in zip(lons[1:], lats[1:], strict=True):
        if abs(lo - cur_lo[-1]) > 180:
            segs.append((cur_lo, cur_la))
            cur_lo, cur_la = [], []
        cur_lo.append(lo)
        cur_la.append(la)
    segs.append((cur_lo, cur_la))
    return segs


def plot_path(tl: PathTimeline, constellation: Constellation, *, at: float | None = None) -> Figure:
    """RTT over time with handover marks and outages (top), and a world map of the path (bottom) at
    time `at` (default: the step with the median RTT)."""
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 10), gridspec_kw={"height_ratios": [1, 1.4]})
    s = tl.steps
    ax1.plot(s["t_s"].to_numpy(), s["rtt_ms"].to_numpy(), lw=1.2, color="tab:blue", label="RTT (propagation)")
    colors = {tl.a.name: "tab:orange", tl.b.name: "tab:green"}
    labelled: set[str] = set()
    for h in tl.handovers.iter_rows(named=True):
        lab = f"handover at {h['node']}" if h["node"] not in labelled else None
        labelled.add(h["node"])
        ax1.axvline(h["t_s"], color=colors.get(h["node"], "grey"), ls="--", lw=0.8, label=lab)
    for o in tl.outages.iter_rows(named=True):
        ax1.axvspan(
            o["start_s"], o["end_s"], color="red", alpha=0.2, label="outage" if "outage" not in labelled else None
        )
        labelled.add("outage")
    summ = tl.summary()
    ax1.set_title(
        f"{tl.a.name} - {tl.b.name} over {tl.params.get('constellation')} ({tl.params.get('policy')}): "
        f"RTT median {summ['rtt_ms']['median']} ms, {summ['handovers']} handovers"
    )
    ax1.set_xlabel("time (s)")
    ax1.set_ylabel("RTT (ms)")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper right", fontsize=8)

    draw_path_map(ax2, tl, constellation, at=at)
    fig.tight_layout()
    return fig


def draw_path_map(
    ax: plt.Axes, tl: PathTimeline, constellation: Constellation, *, at: float | None = None
) -> list[tuple[float, float]]:
    """A world map on `ax` with the satellites and the path at time `at` (default: the step with the
    median RTT), titled with its hops and RTT; returns the path's (lon, lat) points, ends included
    (empty when no step has a path)."""
    world_axes(ax)
    s = tl.steps
    reach = s.filter(pl.col("reachable"))
    pts: list[tuple[float, float]] = []
    if reach.height:
        if at is None:
            med = reach["rtt_ms"].median()
            row = reach.with_columns((pl.col("rtt_ms") - med).abs().alias("d")).sort("d").row(0, named=True)
        else:
            row = reach.with_columns((pl.col("t_s") - at).abs().alias("d")).sort("d").row(0, named=True)
        pos = constellation.positions(row["t_s"])
        where = dict(
            zip(pos["sat"].to_list(), zip(pos["lon_deg"].to_list(), pos["lat_deg"].to_list(), strict=True), strict=True)
        )
        ends = {tl.a.name: (tl.a.lon_deg, tl.a.lat_deg), tl.b.name: (tl.b.lon_deg, tl.b.lat_deg)}
        pts = [ends.get(n) or where[n] for n in row["path"]]
        lons, lats = [p[0] for p in pts], [p[1] for p in pts]
        ax.scatter(pos["lon_deg"].to_numpy(), pos["lat_deg"].to_numpy(), s=1, color="tab:blue", alpha=0.25)
        for lo, la in _split_dateline(lons, lats):
            ax.plot(lo, la, "-o", color="tab:red", ms=3, lw=1.5)
        ax.set_title(f"path at t = {row['t_s']:.1f} s: {row['hops']} hops, RTT {row['rtt_ms']:.1f} ms")
    for name, (lo, la) in {tl.a.name: (tl.a.lon_deg, tl.a.lat_deg), tl.b.name: (tl.b.lon_deg, tl.b.lat_deg)}.items():
        ax.plot(lo, la, "*", color="black", ms=12)
        ax.annotate(name, (lo, la), textcoords="offset points", xytext=(5, 5), fontsize=9)
    return pts


#: One colour per scheme, the same in every panel (Okabe-Ito: distinguishable with colour-blindness).
SCHEME_COLORS: dict[str, str] = {"unprotected": "#D55E00", "LinkGuardian": "#0072B2", "SATGUARD": "#009E73"}


def _handover_lines(ax: plt.Axes, tl: PathTimeline, *, label: bool = False) -> None:
    """Vertical lines at the path's handovers: dashed at the first place (the user terminal), dotted at
    the second (the gateway)."""
    styles = {tl.a.name: "--", tl.b.name: ":"}
    seen: set[str] = set()
    for h in tl.handovers.iter_rows(named=True):
        lab = f"handover at {h['node']}" if label and h["node"] not in seen else None
        seen.add(h["node"])
        ax.axvline(h["t_s"], color="black", ls=styles.get(h["node"], "-."), lw=1.0, alpha=0.7, label=lab, zorder=0)


@plt.rc_context({"font.size": 12, "axes.titlesize": 13})
def plot_demo(
    lost: pl.DataFrame,
    owd: pl.DataFrame,
    goodput: pl.DataFrame,
    summary: pl.DataFrame,
    tl: PathTimeline,
    constellation: Constellation,
    *,
    title: str = "",
    goodput_max_mbps: float | None = None,
) -> Figure:
    """The demo's figure (`leoguard demo`): the path on a map and the schemes' summary table (top), then
    over time with the handovers marked: probe packets lost at the endpoint (cumulative), the probe's
    one-way delay per packet, and TCP goodput. Tables have a `scheme` column (a key of
    `SCHEME_COLORS`): `lost` (t_s, lost, optionally cause), `owd` (t_s, owd_ms), `goodput` (t_s,
    goodput_mbps, one row per bin starting at t_s); `summary` is `Demo.summary()`. Goodput bins above
    `goodput_max_mbps` (a burst of acknowledgements when a long-standing hole fills) are cut at the
    top, marked with a triangle and the largest value named in the title, so they do not flatten the
    rest of the panel."""
    fig = plt.figure(figsize=(13, 14), layout="constrained")
    gs = fig.add_gridspec(4, 2, height_ratios=[1.15, 1, 1, 1], width_ratios=[1.1, 1])
    ax_map = fig.add_subplot(gs[0, 0])
    ax_tab = fig.add_subplot(gs[0, 1])
    ax_loss = fig.add_subplot(gs[1, :])
    ax_owd = fig.add_subplot(gs[2, :], sharex=ax_loss)
    ax_gp = fig.add_subplot(gs[3, :], sharex=ax_loss)
    schemes = summary["scheme"].to_list()
    end = float(tl.steps["t_s"].max() or 0.0) + float(tl.params.get("step_s", 0.0))

    pts = draw_path_map(ax_map, tl, constellation)
    if pts:
        # Zoom on the path, no flatter than 2.5:1 so the map stays legible.
        lons, lats = [p[0] for p in pts], [p[1] for p in pts]
        x0, x1 = max(-180.0, min(lons) - 10), min(180.0, max(lons) + 10)
        half = max((max(lats) - min(lats)) / 2 + 8, (x1 - x0) / 5)
        mid = (max(lats) + min(lats)) / 2
        ax_map.set_xlim(x0, x1)
        ax_map.set_ylim(max(-90.0, mid - half), min(90.0, mid + half))

    ax_tab.axis("off")
    # Schemes as columns, measures as rows: the labels are read whole, none overlaps or is clipped.
    rows = summary.to_dicts()
    measures = [
        ("endpoint loss %", lambda r: f"{r['endpoint_loss_pct']:.3f}"),
        ("  of which congestion %", lambda r: f"{r['congestion_loss_pct']:.3f}"),
        ("network loss %", lambda r: f"{r['network_loss_pct']:.2f}"),
        ("probe OWD p50/p99 ms", lambda r: f"{r['owd_p50_ms']:.0f} / {r['owd_p99_ms']:.0f}"),
        ("TCP goodput Mbit/s", lambda r: f"{r['goodput_mbps']:.1f}"),
        ("TCP retransmissions", lambda r: str(r["tcp_retransmissions"])),
    ]
    cells = [[label, *(fmt(r) for r in rows)] for label, fmt in measures]
    side = 0.36
    table = ax_tab.table(
        cellText=cells, colLabels=["", *schemes], cellLoc="center", bbox=(0.0, 0.3, 1.0, 0.7),
        colWidths=[side, *([(1 - side) / max(1, len(schemes))] * len(schemes))],
    )  # fmt: skip
    table.auto_set_font_size(False)
    table.set_fontsize(9.5)
    for i in range(1, len(measures) + 1):
        table[i, 0].get_text().set_horizontalalignment("left")
        table[i, 0].PAD = 0.02
    for j, s in enumerate(schemes, start=1):
        table[0, j].get_text().set_color(SCHEME_COLORS.get(s, "black"))
        table[0, j].get_text().set_fontweight("bold")
    ax_tab.text(
        0.5, 0.02,
        "endpoint loss: probe packets never delivered; of which congestion:\ntheir last drop was a queue "
        "overflow (congestion, not link loss)\nnetwork loss: probe packets the links dropped "
        "(before any recovery)\nTCP retx: retransmissions by the TCP sender",
        transform=ax_tab.transAxes, ha="center", va="bottom", fontsize=10, color="dimgrey",
    )  # fmt: skip

    for s in schemes:
        c = SCHEME_COLORS.get(s, "grey")
        d = lost.filter(pl.col("scheme") == s)
        t = np.concatenate([[0.0], d["t_s"].to_numpy(), [end]])
        n = np.concatenate([[0], d["lost"].to_numpy(), [d["lost"].max() or 0]])
        ax_loss.step(t, n, where="post", color=c, lw=2, label=s)
        congested = int((d["cause"] == "congestion").sum()) if "cause" in d.columns else 0
        ax_loss.annotate(
            f"{n[-1]:,}" + (f" ({congested:,} congestion)" if congested else ""), (end, n[-1]),
            textcoords="offset points", xytext=(4, 0), va="center", color=c, fontsize=11, fontweight="bold",
        )  # fmt: skip
        o = owd.filter(pl.col("scheme") == s)
        ax_owd.plot(
            o["t_s"].to_numpy(), o["owd_ms"].to_numpy(), ".", ms=1.5, color=c, alpha=0.6, rasterized=True, label=s
        )
        g = goodput.filter(pl.col("scheme") == s)
        ax_gp.step(g["t_s"].to_numpy(), g["goodput_mbps"].to_numpy(), where="post", color=c, lw=1.5, label=s)
    ax_loss.set_title("loss seen by the application: packets of a 1000 packet/s UDP probe that never arrived")
    ax_loss.set_ylabel("packets lost (cumulative)")
    ax_owd.set_title("one-way delay of every probe packet that arrived (queueing, recovery, path changes)")
    ax_owd.set_ylabel("one-way delay (ms)")
    ts = np.unique(goodput["t_s"].to_numpy())
    bin_s = float(np.min(np.diff(ts))) if len(ts) > 1 else 0.0
    ax_gp.set_title(f"TCP CUBIC goodput (bytes acknowledged per {bin_s:g} s)")
    top = goodput_max_mbps
    if top is not None and goodput.height and float(goodput["goodput_mbps"].max() or 0.0) > top:
        ax_gp.set_ylim(0, top)
        over = goodput.filter(pl.col("goodput_mbps") > top)
        for r in over.iter_rows(named=True):
            ax_gp.plot(r["t_s"] + bin_s / 2, 0.95 * top, "^", color=SCHEME_COLORS.get(r["scheme"], "grey"), ms=10)
        ax_gp.set_title(
            f"TCP CUBIC goodput (bytes acknowledged per {bin_s:g} s; ▲ = bin above {top:g} Mbit/s, cut: up to "
            f"{float(over['goodput_mbps'].max() or 0.0):.0f})"
        )
    ax_gp.set_ylabel("goodput (Mbit/s)")
    ax_gp.set_xlabel("time (s)")
    for i, ax in enumerate((ax_loss, ax_owd, ax_gp)):
        _handover_lines(ax, tl, label=i == 0)
        ax.grid(alpha=0.3)
        ax.set_xlim(0, end)
    ax_loss.legend(loc="upper left", fontsize=11, ncol=2)
    if title:
        fig.suptitle(title, fontsize=15)
    return fig
