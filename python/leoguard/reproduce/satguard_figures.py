"""Figures of `leoguard reproduce satguard`, in the layout of the SATGUARD paper's Figs 12-17."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

if TYPE_CHECKING:
    from leoguard.reproduce.satguard import Reproduction

LABELS = {"satguard": "SATGUARD", "satcp": "SaTCP", "tambur": "Tambur", "mpep": "M-PEP",
          "linkguardian": "LinkGuard", "none": "none"}  # fmt: skip


def _values(r: Reproduction, scheme: str, workload: str, key: str, pair: str | None = None) -> list[float]:
    out: list[float] = []
    for (p, s, w), v in r.metrics.items():
        if s == scheme and w == workload and (pair is None or p == pair):
            x = v.get(key)
            if isinstance(x, list):
                out.extend(float(y) for y in x if y is not None)
            elif x is not None:
                out.append(float(x))
    return out


def _grouped_bars(r: Reproduction, workload: str, key: str, ylabel: str, title: str, path: Path, mean: bool) -> Path:
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(r.pairs)), 3.2))
    width = 0.8 / max(1, len(r.schemes))
    x = np.arange(len(r.pairs))
    for i, s in enumerate(r.schemes):
        ys = []
        for p in r.pairs:
            v = _values(r, s, workload, key, p)
            ys.append(float(np.mean(v)) if v and mean else (v[0] if v else np.nan))
        ax.bar(x + (i - (len(r.schemes) - 1) / 2) * width, ys, width, label=LABELS.get(s, s))
    ax.set_xticks(x, r.pairs, rotation=20)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=min(6, len(r.schemes)))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _cdfs(r: Reproduction, panels: list[tuple[str, str, str]], title: str, path: Path) -> Path:
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
    for ax, (workload, key, xlabel) in zip(axes[0], panels, strict=True):
        for s in r.schemes:
            v = np.sort(np.array(_values(r, s, workload, key)))
            if len(v):
                ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=LABELS.get(s, s))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _violins(r: Reproduction, path: Path) -> Path:
    n = len(r.pairs)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for k, p in enumerate(r.pairs):
        ax = axes[k // cols][k % cols]
        data, names = [], []
        for s in r.schemes:
            v = _values(r, s, "bulk", "throughput_mbps", p)
            if v:
                data.append(v)
                names.append(LABELS.get(s, s))
        if data:
            ax.violinplot(data, showmedians=True)
            ax.set_xticks(range(1, len(names) + 1), names, rotation=45, fontsize=7)
        ax.set_title(p, fontsize=8)
        ax.set_ylabel("Mbit/s", fontsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("Fig 13: end-to-end throughput per second (CUBIC bulk flow)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_all(r: Reproduction, outdir: Path) -> dict[str, Path]:
    """Writes every figure whose workload ran; returns name -> PNG path."""
    out: dict[str, Path] = {}
    have: dict[str, Any] = {w for (_, _, w) in r.metrics}  # type: ignore[assignment]
    if "delay" in have:
        out["fig12"] = _grouped_bars(
            r, "delay", "p99_delay_ms", "p99 delay (ms)",
            "Fig 12: 99th-percentile one-way delay of a 2 Mbit/s TCP stream per pair", outdir / "fig12_p99_delay.png",
            mean=False,
        )  # fmt: skip
    if "bulk" in have:
        out["fig13"] = _violins(r, outdir / "fig13_throughput.png")
    if "web" in have:
        out["fig14"] = _cdfs(
            r, [("web", "plt_s", "page load time (s)"), ("web", "speed_index_s", "Speed Index (s)")],
            "Fig 14: page load time and Speed Index, all pairs", outdir / "fig14_plt_si.png",
        )  # fmt: skip
    if "webrtc" in have:
        out["fig15"] = _grouped_bars(
            r, "webrtc", "delay_ms", "mean delay (ms)", "Fig 15: user-perceived one-way WebRTC delay per pair",
            outdir / "fig15_webrtc_delay.png", mean=True,
        )  # fmt: skip
        out["fig16"] = _cdfs(r, [("webrtc", "jbd_ms", "jitter-buffer delay (ms)")], "Fig 16: jitter-buffer delay",
                             outdir / "fig16_jbd.png")  # fmt: skip
        out["fig17"] = _cdfs(r, [("webrtc", "fps", "frames per second")], "Fig 17: FPS per second of call",
                             outdir / "fig17_fps.png")  # fmt: skip
    return out
