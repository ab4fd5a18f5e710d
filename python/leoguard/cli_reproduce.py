"""`leoguard reproduce ...`: the one-command reproductions of published results (SATGUARD, StarTCP,
liquid data, LEOTP), side by side with the papers' numbers."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from leoguard.cli_common import JsonOpt, WriteStoreOpt, _emit, console, new_app, out_dir_cb, table
from leoguard.errors import LeoguardError

reproduce_app = new_app("Reproduce published results side by side with the papers.")
WorkersOpt = Annotated[int, typer.Option("--workers", help="Runs at a time (local process pool or Ray CPUs).")]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="Where runs go: local (process pool) or ray.")]
RayOpt = Annotated[
    str | None, typer.Option("--ray-address", help="Ray cluster address (default: a local Ray instance).")
]


def _sweep_progress(enabled: bool):
    """A rich progress bar for sweeps (on stderr) and its callback."""
    if not enabled:
        return nullcontext(), None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(), console=Console(stderr=True),
    )  # fmt: skip
    task = bar.add_task("runs", total=None)

    def cb(done: int, total: int, key: str) -> None:
        bar.update(task, completed=done, total=total, description=f"runs (last {key[:8]})")

    return bar, cb


@reproduce_app.command("satguard")
def reproduce_satguard(
    quick: Annotated[
        bool, typer.Option("--quick", help="The reduced experiment (the default; < 15 min on 2 cores).")
    ] = False,
    full: Annotated[bool, typer.Option("--full", help="The complete experiment (27-50 min on 2 cores).")] = False,
    pair: Annotated[list[str] | None, typer.Option("--pair", help="Only these city pairs (repeatable).")] = None,
    scheme: Annotated[list[str] | None, typer.Option("--scheme", help="Only these schemes (repeatable).")] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option("--workload", help="Only these workloads: delay, bulk, web, webrtc (repeatable)."),
    ] = None,
    store: WriteStoreOpt = Path("results"),
    out: Annotated[
        Path, typer.Option(help="Directory for figures, report.md and table.json.", callback=out_dir_cb)
    ] = Path("out/reproduce-satguard"),
    workers: WorkersOpt = 2,
    executor: ExecutorOpt = "local",
    ray_address: RayOpt = None,
    as_json: JsonOpt = False,
    slot_criterion: Annotated[
        str | None,
        typer.Option(
            "--slot-criterion",
            help="How the 15 s schedule picks each slot's satellites: highest-elevation (the paper's nearest "
            "satellite, the default), nearest, or path-aware (both ends jointly, no +Grid detour).",
        ),
    ] = None,
    starlink_profile: Annotated[
        str | None,
        typer.Option(
            "--starlink-profile",
            help="Every user terminal gets a measured Starlink access link (a stored profile: mmsys24-seattle; "
            "docs/realism.md) instead of the paper's 1 Gbit/s ground links and starlink loss model.",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="sim: the whole evaluation in the simulator. emu / both: Fig 13's bulk experiment on the "
            "real-time emulator with Linux's CUBIC (none, lossless, LinkGuardian, SATGUARD with and without "
            "its exit buffer; default pairs NYC-LON and SYD-NYC), both: beside the simulator's same runs (root).",
        ),
    ] = "sim",
) -> None:
    """SATGUARD's evaluation (§4): SATGUARD, SaTCP, Tambur, M-PEP, LinkGuard and no protection over
    Starlink shell 1 for 8 city pairs; a TCP stream's delay (Fig 12), bulk TCP (Fig 13), web browsing
    (Fig 14) and WebRTC (Figs 15-17). Runs go to the result store (stored runs are skipped); figures,
    report.md and table.json go to --out. With --json, prints the paper-vs-leoguard table as rows
    {metric, scheme, pair, paper, leoguard}. With --engine emu|both, Fig 13's bulk experiment on real
    kernel TCP instead (fig13-engines.md and .json in --out; --json prints its rows)."""
    from leoguard.reproduce.satguard import reproduce

    if quick and full:
        raise LeoguardError("give --quick or --full, not both")
    if engine not in ("sim", "emu", "both"):
        raise LeoguardError(f"--engine {engine!r}: choose sim, emu or both")
    if engine != "sim":
        _fig13_engines(engine, "full" if full else "quick", pair, scheme, workload, starlink_profile, out, as_json)
        return
    bar, cb = _sweep_progress(not as_json)
    with bar:
        r = reproduce(
            "full" if full else "quick", store=store, out=out, pairs=pair, schemes=scheme, workloads=workload,
            workers=workers, executor=executor, ray_address=ray_address, progress=cb, slot_criterion=slot_criterion,
            starlink_profile=starlink_profile,
        )  # fmt: skip
    if as_json:
        _emit(r.json_rows())
        return
    t = table("metric", "scheme", "paper", "leoguard", "unit", wrap=(0, 1))
    for row in r.table:
        t.add_row(row["metric"], row["scheme"], str(row["paper"]), str(row["leoguard"]), row["unit"])
    console.print(t)
    for k, v in r.sweep.failed.items():
        console.print(f"[red]failed[/] {k}: {v}")
    for line in r.sweep.memory_lines():
        console.print(line)
    console.print(f"report: {r.report}; figures and table.json in {out}; runs in {store}")
    if r.sweep.failed:
        raise typer.Exit(1)


def _fig13_engines(
    engine: str,
    mode: str,
    pairs: list[str] | None,
    schemes: list[str] | None,
    workloads: list[str] | None,
    profile: str | None,
    out: Path,
    as_json: bool,
) -> None:
    """`reproduce satguard --engine emu|both`: Fig 13 on real stacks (leoguard.reproduce.satguard_emu)."""
    import json

    from leoguard.reproduce import satguard_emu

    if schemes:
        raise LeoguardError(f"--scheme with --engine {engine}: the emulated Fig 13 runs its own variants "
                            f"({', '.join(satguard_emu.VARIANTS)})")  # fmt: skip
    if workloads and list(workloads) != ["bulk"]:
        raise LeoguardError(f"--workload with --engine {engine}: the emulator runs Fig 13's bulk workload only")
    if profile:
        raise LeoguardError(f"--starlink-profile with --engine {engine}: not built for the emulated Fig 13")
    engines = ["emu", "sim"] if engine == "both" else ["emu"]

    def progress(r: dict) -> None:
        if not as_json:
            what = r.get("error") or f"{r['goodput_mbps']} Mbit/s"
            console.print(f"{r['engine']} {r['pair']} {r['variant']}: {what}")

    rows = satguard_emu.run(pairs, mode, engines, on_run=progress)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fig13-engines.json").write_text(json.dumps(rows, indent=1))
    (out / "fig13-engines.md").write_text(satguard_emu.table(rows) + "\n")
    if as_json:
        _emit(rows)
        return
    console.print(satguard_emu.table(rows))
    console.print(f"rows in {out / 'fig13-engines.json'}")


@reproduce_app.command("startcp")
def reproduce_startcp(
    experiment: Annotated[
        list[str] | None, typer.Option("--experiment", "-e", help="two-path and/or nyc-lon (default: both).")
    ] = None,
    duration_s: Annotated[
        float, typer.Option("--duration", help="Seconds per run (62 covers 4 handovers; emulated runs take as long).")
    ] = 62.0,
    seed: Annotated[int, typer.Option(help="Run seed.")] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Also write the per-second figure of each simulated experiment here (PNG).", callback=out_dir_cb
        ),
    ] = None,
    study: Annotated[
        bool,
        typer.Option(
            "--study",
            help="Instead: the prediction study (two-path with fixed, random, missed and spurious "
            "interruptions, --seeds seeds of --duration s each; simulator).",
        ),
    ] = False,
    seeds: Annotated[int, typer.Option(help="Seeds per case of --study.")] = 5,
    engine: Annotated[
        str, typer.Option("--engine", help="sim, emu (the real-time emulator: two-path only) or both.")
    ] = "sim",
    kernel_bbr: Annotated[
        bool, typer.Option("--kernel-bbr", help="On the emulator, also Linux's BBR (iperf3) as bbr-kernel.")
    ] = False,
    starlink_profile: Annotated[
        str | None,
        typer.Option(
            "--starlink-profile",
            help="New York - London with a measured Starlink access link (a stored profile: mmsys24-seattle; "
            "docs/realism.md) instead of the paper's assumptions.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """StarTCP (papers/startcp.txt): the paper's two-path experiment (Fig 3: 40 Mbit/s, 100 ms RTT, a
    switch every 15 s with a 100 ms interruption) and Starlink New York - London, BBR (and CUBIC and
    SaTCP) against StarTCP, in the simulator; with --engine emu|both, the two-path experiment also on the
    real-time emulator (leoguard-transport between two hosts: the same sans-IO code), rows side by side.
    With --json, prints one row per handover of each run: {experiment, engine, scheme, handover, t_s,
    throughput_mbps, lost_packets, predicted_error_ms}; with --study --json, {"summary": [one row per
    case], "rows": [one row per switch or spurious stall]}."""
    from leoguard.reproduce.startcp import PAPER, reproduce

    if engine not in ("sim", "emu", "both"):
        raise LeoguardError(f"--engine {engine!r}: choose sim, emu or both")
    if not 16.0 <= duration_s <= 3600.0:
        raise LeoguardError(f"--duration {duration_s}: must be in [16, 3600] s (at least one handover)")
    if study:
        _startcp_study(seeds, duration_s, as_json)
        return
    default = ("two-path",) if engine == "emu" else ("two-path", "nyc-lon")
    exps = tuple(experiment or default)
    bad = [e for e in exps if e not in ("two-path", "nyc-lon")]
    if bad:
        raise LeoguardError(f"--experiment {bad[0]!r}: choose two-path or nyc-lon")
    if engine == "emu" and "nyc-lon" in exps:
        raise LeoguardError("--engine emu: the emulator runs the two-path experiment only (-e two-path)")
    if starlink_profile is not None:
        from leoguard.access import load_profile

        load_profile(starlink_profile)
        if "nyc-lon" not in exps:
            raise LeoguardError("--starlink-profile: it applies to the Starlink path (-e nyc-lon), not two-path")
    rows: list = []
    if engine != "emu":
        r = reproduce(exps, duration_s=duration_s, seed=seed, starlink_profile=starlink_profile)
        rows = r.rows
        if out is not None:
            from leoguard.reproduce.startcp_study import per_second_figure

            for e in exps:
                per_second_figure(r.runs, out / f"startcp-{e}-per-second.png", e)
    late: list[str] = []
    if engine != "sim" and "two-path" in exps:
        rows += _startcp_emu_rows(duration_s, seed, kernel_bbr, late, quiet=as_json)
    if as_json:
        _emit(rows)
        return
    _startcp_table(rows)
    for k, v in PAPER.items():
        console.print(f"paper, {k}: {v}")
    for name in late:
        console.print(f"[yellow]emulated {name} did not keep real time: its figures are distorted (rerun it)[/]")


def _startcp_emu_rows(duration_s: float, seed: int, kernel_bbr: bool, late: list[str], quiet: bool) -> list[dict]:
    """The two-path experiment on the emulator; the names of runs that fell behind real time go to `late`."""
    from leoguard.reproduce.startcp import reproduce_emu

    schemes = ("bbr", "startcp", "bbr-kernel") if kernel_bbr else ("bbr", "startcp")

    def on_run(name: str, r) -> None:
        if not r.emulator.get("realtime_ok", True):
            late.append(name)
        if not quiet:
            Console(stderr=True).print(f"emulated two-path {name}: {r.wall_s:.0f} s")

    return reproduce_emu(duration_s, seed, schemes, on_run=on_run).rows


def _startcp_table(rows: list[dict]) -> None:
    """Rows of both engines, each handover's sim and emu rows next to each other (Mbit/s and lost: in the
    handover's whole second)."""
    order = {"sim": 0, "emu": 1}
    rows = sorted(rows, key=lambda r: (r["experiment"], r["scheme"].removesuffix("-kernel"), r["handover"],
                                       order.get(r["engine"], 2), r["scheme"]))  # fmt: skip
    t = table("experiment", "engine", "scheme", "handover", "t (s)", "Mbit/s", "lost", "pred. err\nms", wrap=(0, 2))
    for row in rows:
        err = row["predicted_error_ms"]
        cells = [row["experiment"], row["engine"], row["scheme"], str(row["handover"]), f"{row['t_s']:.1f}"]
        mbps = row["throughput_mbps"]
        cells += [
            "-" if mbps is None else f"{mbps:.1f}",
            str(row["lost_packets"]),
            "-" if err is None else f"{err:.1f}",
        ]
        t.add_row(*cells)
    console.print(t)


def _startcp_study(seeds: int, duration_s: float, as_json: bool) -> None:
    from leoguard.reproduce.startcp_study import study

    if not 1 <= seeds <= 100:
        raise LeoguardError(f"--seeds {seeds}: must be in [1, 100]")
    s = study(seeds=tuple(range(1, seeds + 1)), duration_s=duration_s)
    summary = s.summary()
    if as_json:
        _emit({"summary": summary, "rows": s.rows})
        return
    cols = ["case", "switches", "interrupted", "predicted", "abs_error_ms_p50", "abs_error_ms_p90"]
    cols += ["abs_error_ms_max", "spurious_stalls", "lost_per_predicted_interrupted_second"]
    cols += ["bbr_lost_per_interrupted_second", "mbps_per_switch_second", "bbr_mbps_per_switch_second"]
    heads = ["case", "switches", "interrupted", "stalled for", "|err| p50 ms", "p90", "max", "false stalls"]
    heads += ["lost/s StarTCP*", "lost/s BBR", "Mbit/s StarTCP", "Mbit/s BBR"]
    t = table(*heads, wrap=(0,))
    t.caption = "lost/s: packets lost in an interrupted switch's second (*: those StarTCP stalled for)"
    for row in summary:
        t.add_row(*("-" if row[c] is None else str(row[c]) for c in cols))
    console.print(t)


@reproduce_app.command("liquid")
def reproduce_liquid(
    scenario: Annotated[Path | None, typer.Option(help="Scenario (default scenarios/liquid-oneweb.toml).")] = None,
    flow_s: Annotated[float | None, typer.Option("--flow-s", help="Shorten the flow to this many seconds.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    out: Annotated[
        Path, typer.Option(help="Directory for liquid.png, table.md and rows.json.", callback=out_dir_cb)
    ] = Path("out/reproduce-liquid"),
    as_json: JsonOpt = False,
) -> None:
    """Liquid data transport over OneWeb (papers/liquid-data-oneweb.txt): TCP at a 10 Mbit/s target with
    ~1 % added loss, CUBIC and BBR, each with and without the RaptorQ tunnel. With --json, prints rows
    {cc, tunnel, goodput_bps, retransmissions, ...}."""
    from leoguard.reproduce.liquid import SCENARIO, reproduce

    r = reproduce(scenario or SCENARIO, out=out, flow_s=flow_s, seed=seed)
    if as_json:
        _emit(r.json_rows())
        return
    t = table("cc", "tunnel", "goodput\nMbit/s", "retransmissions", "paper\nretransmissions")
    from leoguard.reproduce.liquid import PAPER

    for row in r.rows:
        p = PAPER[(row["cc"], row["tunnel"])]["retransmissions"]
        t.add_row(row["cc"], str(row["tunnel"]), f"{row['goodput_bps'] / 1e6:.2f}", str(row["retransmissions"]),
                  "-" if p is None else str(p))  # fmt: skip
    console.print(t)
    console.print(f"figure: {r.figure}; table: {r.table}")


@reproduce_app.command("leotp")
def reproduce_leotp(
    quick: Annotated[bool, typer.Option("--quick", help="The reduced experiment (the default; ~1 min).")] = True,
    full: Annotated[
        bool, typer.Option("--full", help="Every loss level and period, 120 s runs (Fig 10: the paper's 300 s).")
    ] = False,
    experiment: Annotated[
        list[str] | None,
        typer.Option(
            "--experiment", "-e", help="fig12, table2, fig13, fig11, fig10 and/or fig14 (default: all; repeatable)."
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Directory for the figures, report.md and rows.json.", callback=out_dir_cb)
    ] = Path("out/reproduce-leotp"),
    store: WriteStoreOpt = Path("results"),
    workers: WorkersOpt = 2,
    as_json: JsonOpt = False,
) -> None:
    """LEOTP (ICDCS'23): the loss sweep (Fig 12), Starlink shell 1 with the ablation A-D (Table II,
    Fig 17), link switching (Fig 13), bytes sent (Fig 11), recovered packets' OWD (Fig 10) and the
    BL_tar sweep under a square-wave bottleneck (Fig 14), paper beside leoguard. With --json, prints
    rows {experiment, engine, scheme, variant, pair, loss_pct, throughput_mbps, owd_ms,
    paper_throughput_mbps, paper_owd_ms, bl_tar_mss, retx_owd_p50_ms, retx_owd_p90_ms, ..., diff_pct,
    why}."""
    from leoguard.reproduce.leotp import reproduce

    bar, cb = _sweep_progress(not as_json)
    with bar:
        r = reproduce("full" if full else "quick", store=store, out=out, experiments=experiment, workers=workers,
                      progress=cb)  # fmt: skip
    if as_json:
        _emit(r.rows)
        return
    t = table("experiment", "case", "scheme", "Mbit/s", "paper", "diff %", "OWD ms", "paper\nOWD", wrap=(0, 1, 2))
    for row in r.rows:
        case = row.get("pair") or str(row.get("switch_every_s") or row["loss_pct"])
        if row["experiment"] == "fig14":
            case = "reference" if row["bl_tar_mss"] is None else f"BL_tar {row['bl_tar_mss']:g}"
        name = f"{row['scheme']}-{row['variant']}" if row["variant"] else row["scheme"]
        owd, paper_owd = row["owd_ms"], row["paper_owd_ms"]
        if row["experiment"] == "fig10":  # the OWD of the recovered packets (p50)
            owd, paper_owd = f"retx p50 {row['retx_owd_p50_ms']}", row["paper_retx_owd_ms"]
        t.add_row(*(("-" if x is None else str(x)) for x in (
            row["experiment"], case, name, row["throughput_mbps"], row["paper_throughput_mbps"], row["diff_pct"],
            owd, paper_owd)))  # fmt: skip
    console.print(t)
    console.print(f"report: {r.report}; figures: {', '.join(str(p) for p in r.figures)}")
    if r.sweep.failed:
        raise typer.Exit(1)
