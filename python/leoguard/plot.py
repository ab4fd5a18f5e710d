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

    world_axes(ax2)
    reach = s.filter(pl.col("reachable"))
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
        ax2.scatter(pos["lon_deg"].to_numpy(), pos["lat_deg"].to_numpy(), s=1, color="tab:blue", alpha=0.25)
        for lo, la in _split_dateline(lons, lats):
            ax2.plot(lo, la, "-o", color="tab:red", ms=3, lw=1.5)
        ax2.set_title(f"path at t = {row['t_s']:.1f} s: {row['hops']} hops, RTT {row['rtt_ms']:.1f} ms")
    for name, (lo, la) in {tl.a.name: (tl.a.lon_deg, tl.a.lat_deg), tl.b.name: (tl.b.lon_deg, tl.b.lat_deg)}.items():
        ax2.plot(lo, la, "*", color="black", ms=12)
        ax2.annotate(name, (lo, la), textcoords="offset points", xytext=(5, 5), fontsize=9)
    fig.tight_layout()
    return fig
