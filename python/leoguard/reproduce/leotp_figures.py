"""Figures and the markdown report of `leoguard reproduce leotp` (rows from `reproduce.leotp.compare`),
laid out as the paper's: Fig 12 throughput against per-link loss, Table II / Fig 17 throughput and
OWD per pair and variant, Fig 13 throughput against the switching period, Fig 11 bytes sent, Fig 10
the distribution of recovered packets' OWD per loss level, Fig 14 throughput against OWD per BL_tar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leoguard.sweep import SweepReport


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _variant(r: dict[str, Any]) -> str:
    """Table II's variant, with the mid-node fraction when it is not every node."""
    mid = r.get("mid_nodes")
    return f"{r['variant']}, {mid:.0%} mid" if isinstance(mid, float) else r["variant"]


def _label(r: dict[str, Any]) -> str:
    return f"leotp-{_variant(r)}" if r["variant"] else r["scheme"]


def write_figures(
    rows: list[dict[str, Any]], out: Path, fig10_owd: dict[tuple[str, float], list[float]] | None = None
) -> list[Path]:
    """One PNG per experiment that has rows; Fig 10's needs the recovered packets' OWDs, `fig10_owd`
    ((scheme, loss %) -> ms), from `reproduce.leotp.fig10_distributions`."""
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
    f10 = [r for r in rows if r["experiment"] == "fig10"]
    if f10 and fig10_owd:
        paths.append(_fig10(plt, f10, fig10_owd, out))
    f14 = [r for r in rows if r["experiment"] == "fig14"]
    if f14:
        paths.append(_fig14(plt, f14, out))
    return paths


def _fig10(plt: Any, rows: list[dict[str, Any]], owd: dict[tuple[str, float], list[float]], out: Path) -> Path:
    """The CDF of the recovered packets' OWD, one panel per loss level, the paper's values as lines."""
    losses = sorted({r["loss_pct"] for r in rows})
    fig, axes = plt.subplots(1, len(losses), figsize=(4 * len(losses), 4), sharey=True, squeeze=False)
    for ax, loss in zip(axes[0], losses, strict=True):
        for s in dict.fromkeys(r["scheme"] for r in rows):
            xs = sorted(owd.get((s, loss), []))
            if xs:
                ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{s} (leoguard, {len(xs)} pkts)")
            paper = next((r["paper_retx_owd_ms"] for r in rows if r["scheme"] == s), None)
            if paper is not None:
                ax.axvline(paper, ls=":", color=ax.lines[-1].get_color() if xs else "grey", label=f"{s} (paper, ~)")
        ax.set_xlabel("OWD of recovered packets (ms)")
        ax.set_title(f"{loss:g} % per link")
        ax.set_xlim(0, min(2000.0, max([v for k, v2 in owd.items() if k[1] == loss for v in v2] or [1.0])))
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("CDF")
    fig.suptitle("Fig 10: OWD of retransmitted data (first transmission to delivery), 5 links x 20 ms")
    fig.tight_layout()
    path = out / "fig10_retx_owd.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _fig14(plt: Any, rows: list[dict[str, Any]], out: Path) -> Path:
    """Throughput against mean OWD, LEOTP's points labelled by BL_tar, BBR as a reference point."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    leotp = sorted((r for r in rows if r["bl_tar_mss"] is not None), key=lambda r: r["bl_tar_mss"])
    if leotp:
        ax.plot([r["owd_ms"] for r in leotp], [r["throughput_mbps"] for r in leotp], "o-", label="leotp (leoguard)")
        for r in leotp:
            ax.annotate(f"BL_tar={r['bl_tar_mss']:g}", (r["owd_ms"], r["throughput_mbps"]), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))  # fmt: skip
    for r in rows:
        if r["bl_tar_mss"] is None:
            ax.plot([r["owd_ms"]], [r["throughput_mbps"]], "s", label=f"{r['scheme']} (leoguard)")
    ax.set_xlabel("mean OWD (ms)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title("Fig 14: 10 x 20 Mbit/s links, the second a 10 +/- 1 Mbit/s square wave\n"
                 "paper: larger BL_tar, more throughput and more delay", fontsize=9)  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "fig14_bandwidth_fluctuation.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
        if r["experiment"] == "fig14":
            case = "reference" if r["bl_tar_mss"] is None else f"BL_tar {r['bl_tar_mss']:g} MSS"
        if r["experiment"] == "fig10":
            case += f", recovered OWD p50 {_fmt(r['retx_owd_p50_ms'], 1)} ms (paper ~{_fmt(r['paper_retx_owd_ms'], 0)})"
        if r["experiment"] == "fig11":
            case += f", sent/delivered {r['sent_ratio']} (paper {_fmt(r.get('paper_sent_ratio'), 3)})"
        lines.append(
            f"| {r['experiment']} | {case} | {r['scheme']} | {_variant(r) if r['variant'] else '-'} | "
            f"{_fmt(r['throughput_mbps'])} | "
            f"{_fmt(r['paper_throughput_mbps'])} | {_fmt(r['diff_pct'], 1)} | {_fmt(r['owd_ms'], 1)} | "
            f"{_fmt(r['paper_owd_ms'], 1)} |"
        )
        if r["why"] not in whys.values():  # one entry per reason (Fig 10 and 14 give one for all schemes)
            whys.setdefault(f"{r['experiment']} ({'leotp' if r['scheme'] == 'leotp' else 'baselines'})", r["why"])
    lines += ["", "Known reasons for the differences:", ""]
    lines += [f"- {k}: {v}" for k, v in whys.items()]
    return "\n".join(lines + _fig10_section(rows) + _fig14_section(rows)) + "\n"


def _fig10_section(rows: list[dict[str, Any]]) -> list[str]:
    f10 = [r for r in rows if r["experiment"] == "fig10"]
    if not f10:
        return []
    out = [
        "", "## Fig 10: OWD of recovered packets", "",
        "From the data's first transmission to the arrival of the copy that delivered it (LEOTP: data a mid "
        "node or the consumer had to ask for again; BBR: TCP retransmissions whose original was lost). "
        "Recovery = p50 minus the median OWD of the packets that needed none. Paper: ~90 ms (LEOTP) vs "
        "~160 ms (BBR), recovery time 59-64 % shorter.", "",
        "| loss per link | scheme | Mbit/s | recovered packets | OWD p50 ms | OWD p90 ms | recovery p50 ms "
        "| paper OWD ms |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in f10:
        out.append(
            f"| {r['loss_pct']:g} % | {r['scheme']} | {_fmt(r['throughput_mbps'])} | {r['retx_packets']} | "
            f"{_fmt(r['retx_owd_p50_ms'], 1)} | {_fmt(r['retx_owd_p90_ms'], 1)} | {_fmt(r['recovery_ms_p50'], 1)} | "
            f"~{_fmt(r['paper_retx_owd_ms'], 0)} |"
        )
    out.append("")
    for loss in dict.fromkeys(r["loss_pct"] for r in f10):
        rec = {r["scheme"]: r["recovery_ms_p50"] for r in f10 if r["loss_pct"] == loss}
        if rec.get("leotp") is not None and rec.get("bbr"):
            short = 100 * (1 - rec["leotp"] / rec["bbr"])
            out.append(f"- {loss:g} %: LEOTP's median recovery is {short:.0f} % shorter than BBR's (paper: 59-64 %).")
    return out


def _fig14_section(rows: list[dict[str, Any]]) -> list[str]:
    f14 = [r for r in rows if r["experiment"] == "fig14"]
    if not f14:
        return []
    out = [
        "", "## Fig 14: throughput-delay trade-off under bandwidth fluctuation", "",
        "Paper: a larger BL_tar gives more throughput and more delay (no numbers in REFERENCE.md).", "",
        "| scheme | BL_tar (MSS) | Mbit/s | mean OWD ms | p99 OWD ms |", "|---|---|---|---|---|",
    ]  # fmt: skip
    for r in f14:
        out.append(
            f"| {r['scheme']} | {_fmt(r['bl_tar_mss'], 0)} | {_fmt(r['throughput_mbps'])} | {_fmt(r['owd_ms'], 1)} | "
            f"{_fmt(r.get('owd_p99_ms'), 1)} |"
        )
    leotp = sorted((r for r in f14 if r["bl_tar_mss"] is not None), key=lambda r: r["bl_tar_mss"])
    if len(leotp) > 1:
        thr = [r["throughput_mbps"] for r in leotp]
        owd = [r["owd_ms"] or 0.0 for r in leotp]
        out += [
            "",
            f"- Delay rises with BL_tar: {'yes' if owd == sorted(owd) else 'no'} "
            f"({owd[0]:.1f} -> {owd[-1]:.1f} ms from BL_tar {leotp[0]['bl_tar_mss']:g} "
            f"to {leotp[-1]['bl_tar_mss']:g}).",
            f"- Throughput rises with BL_tar: {'yes' if thr == sorted(thr) else 'no, not step by step'} "
            f"({', '.join(f'{t:.2f}' for t in thr)} Mbit/s).",
        ]  # fmt: skip
    return out


def write_report(rows: list[dict[str, Any]], mode: str, sweep: SweepReport, out: Path) -> Path:
    """`report.md`: the table and the runs that failed."""
    failed = getattr(sweep, "failed", {}) or {}
    text = f"# LEOTP reproduced in leoguard's simulator ({mode})\n\n" + markdown(rows)
    if failed:
        text += "\nRuns that failed:\n\n" + "\n".join(f"- {k}: {v}" for k, v in failed.items()) + "\n"
    path = out / "report.md"
    path.write_text(text)
    return path
