"""Figures and the markdown report of `leoguard reproduce leotp` (rows from `reproduce.leotp.compare`),
laid out as the paper's: Fig 12 throughput against per-link loss, Table II / Fig 17 throughput and
OWD per pair and variant, Fig 13 throughput against the switching period, Fig 11 bytes sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leoguard.sweep import SweepReport


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(r: dict[str, Any]) -> str:
    return f"leotp-{r['variant']}" if r["variant"] else r["scheme"]


def write_figures(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """One PNG per experiment that has rows."""
    plt = _plt()
    paths: list[Path] = []
    f12 = [r for r in rows if r["experiment"] == "fig12"]
    if f12:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in dict.fromkeys(r["scheme"] for r in f12):
            pts = sorted((r["loss_pct"], r["throughput_mbps"]) for r in f12 if r["scheme"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{s} (leoguard)")
            paper = sorted((r["loss_pct"], r["paper_throughput_mbps"]) for r in f12 if r["scheme"] == s)
            paper = [p for p in paper if p[1] is not None]
            if paper and s != "pcc-vivace":
                ax.plot([p[0] for p in paper], [p[1] for p in paper], "x:", color=ax.lines[-1].get_color(),
                        label=f"{'pcc' if s.startswith('pcc') else s} (paper)")  # fmt: skip
        ax.set_xlabel("per-link loss (%)")
        ax.set_ylabel("throughput (Mbit/s)")
        ax.set_title("Fig 12: 8-link chain, 6 lossy links, 20 Mbit/s, 20 ms per link")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        paths.append(out / "fig12_loss_sweep.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    t2 = [r for r in rows if r["experiment"] == "table2"]
    if t2:
        pairs = list(dict.fromkeys(r["pair"] for r in t2))
        labels = list(dict.fromkeys(_label(r) for r in t2))
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        width = 0.8 / max(len(labels), 1)
        for k, lab in enumerate(labels):
            for ax, key in zip(axes, ("throughput_mbps", "owd_ms"), strict=True):
                ys = [next((r[key] or 0 for r in t2 if r["pair"] == p and _label(r) == lab), 0) for p in pairs]
                ax.bar([i + k * width for i in range(len(pairs))], ys, width, label=lab)
        for ax, name in zip(axes, ("throughput (Mbit/s)", "mean OWD (ms)"), strict=True):
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(pairs))], pairs)
            ax.set_ylabel(name)
        axes[0].legend(fontsize=7, ncol=2)
        fig.suptitle("Table II / Fig 17: Starlink shell 1, variants A-D and the TCP baselines")
        fig.tight_layout()
        paths.append(out / "table2_starlink.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    f13 = [r for r in rows if r["experiment"] == "fig13"]
    if f13:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in dict.fromkeys(r["scheme"] for r in f13):
            pts = sorted((r["switch_every_s"], r["throughput_mbps"]) for r in f13 if r["scheme"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=s)
        ax.set_xlabel("switching period (s)")
        ax.set_ylabel("throughput (Mbit/s)")
        ax.set_title("Fig 13: two paths, route switching, 0.05 % loss")
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / "fig13_switching.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    f11 = [r for r in rows if r["experiment"] == "fig11"]
    if f11:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in dict.fromkeys(r["scheme"] for r in f11):
            pts = sorted((r["loss_pct"], r["sent_mb"]) for r in f11 if r["scheme"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=s)
        ax.set_xlabel("per-link loss (%)")
        ax.set_ylabel("MB sent by the sender")
        ax.set_title("Fig 11: traffic to move the transfer, 5 links x 20 ms")
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / "fig11_bytes_sent.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


def _fmt(x: Any, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def markdown(rows: list[dict[str, Any]]) -> str:
    """Every row, paper beside leoguard, with the difference and its known reasons."""
    lines = [
        "| experiment | case | scheme | variant | throughput (Mbit/s) | paper | diff % | OWD mean (ms) | paper OWD |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    whys: dict[str, str] = {}
    for r in rows:
        case = r.get("pair") or (f"every {r['switch_every_s']} s" if "switch_every_s" in r else f"{r['loss_pct']} %")
        if r["experiment"] == "fig11":
            case += f", sent/delivered {r['sent_ratio']} (paper {_fmt(r.get('paper_sent_ratio'), 3)})"
        lines.append(
            f"| {r['experiment']} | {case} | {r['scheme']} | {r['variant'] or '-'} | {_fmt(r['throughput_mbps'])} | "
            f"{_fmt(r['paper_throughput_mbps'])} | {_fmt(r['diff_pct'], 1)} | {_fmt(r['owd_ms'], 1)} | "
            f"{_fmt(r['paper_owd_ms'], 1)} |"
        )
        whys.setdefault(f"{r['experiment']} ({'leotp' if r['scheme'] == 'leotp' else 'baselines'})", r["why"])
    lines += ["", "Known reasons for the differences:", ""]
    lines += [f"- {k}: {v}" for k, v in whys.items()]
    return "\n".join(lines) + "\n"


def write_report(rows: list[dict[str, Any]], mode: str, sweep: SweepReport, out: Path) -> Path:
    """`report.md`: the table and the runs that failed."""
    failed = getattr(sweep, "failed", {}) or {}
    text = f"# LEOTP reproduced in leoguard's simulator ({mode})\n\n" + markdown(rows)
    if failed:
        text += "\nRuns that failed:\n\n" + "\n".join(f"- {k}: {v}" for k, v in failed.items()) + "\n"
    path = out / "report.md"
    path.write_text(text)
    return path
