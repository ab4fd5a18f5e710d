"""`leoguard validate starlink`: the realism table against real Starlink measurements (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from leoguard.cli_common import JsonOpt, _emit, check_out_dir, console, table


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return f"[{len(v)} values]"
    return str(v)


def cli_starlink(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Measurement files: the shared data's ping log (time, seq, RTT ms; -1 lost), irtt CSV (timestamp, "
            "rtt, uplink, downlink; -1 lost) or iperf3 -J JSON. Default: the three files of "
            "../shared/data/starlink-mmsys24 (CC BY-SA 4.0, J. Zhao and J. Pan, MMSys 2024).",
        ),
    ] = None,
    engine: Annotated[
        str, typer.Option("--engine", help="sim, emu (root; a window of the second half) or both.")
    ] = "sim",
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help="The access model: fit (on the first half of the files given), a stored profile's name "
            "(mmsys24-seattle), or none (the constellation's propagation alone).",
        ),
    ] = "fit",
    dish: Annotated[str, typer.Option("--dish", help="The dish's place: a city or 'lat,lon'.")] = "48.43,-123.37",
    pop: Annotated[str, typer.Option("--pop", help="The point of presence (gateway) place.")] = "Seattle",
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            help="Each trace's UTC start (ISO 8601 or Unix seconds), for logs whose clock was not UTC; "
            "default: as logged (the 15 s schedule's phase comes from it).",
        ),
    ] = None,
    seeds: Annotated[
        int, typer.Option("--seeds", min=1, max=20, help="The model's seeds 1..N: medians, with their range.")
    ] = 1,
    emu_window_s: Annotated[
        float, typer.Option("--emu-window-s", min=10, max=3600, help="Seconds of the second half the emulator runs.")
    ] = 120.0,
    fit_half: Annotated[
        bool,
        typer.Option("--fit-half", help="Also model the first half (the fitted one) in the simulator: fit vs test."),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write realism.json, realism.md and a figure per trace here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Real Starlink measurements beside leoguard's model of the same path. Each trace is cut at its midpoint;
    the access profile is fitted on the first halves (or a stored one is used), the path (dish to PoP over
    Starlink shell 1, the 15 s schedule phased by the trace's own UTC clock) is rebuilt for the second
    half's window, and both are read with the same statistics: RTT min/p50/p90/p99, median RTT per half
    second of the 15 s cycle and the boundary disturbance, the share of boundaries that disturb the path,
    loss rate, loss per cycle position and burst lengths; for iperf3, per-second throughput and its dip per
    cycle position. Targets (issue 29): RTT p50 within 10 %, p99 within 20 %, the disturbance at the same
    half second and its size within 30 %, loss rate within 30 %, loss profile correlation >= 0.8, CUBIC's
    per-second median within 20 %, the share of seconds below half of it within 10 points."""
    from leoguard.errors import LeoguardError
    from leoguard.realism import stats
    from leoguard.realism.validate import DEFAULT_FILES, run

    check_out_dir(out)
    from leoguard.places import place

    for opt, v in (("--dish", dish), ("--pop", pop)):
        try:
            place(v)
        except LeoguardError as e:
            raise LeoguardError(f"{opt} '{v}': {e}") from e
    start_unix = None
    if start is not None:
        from leoguard.orbit import parse_epoch

        try:
            start_unix = parse_epoch(float(start) if start.replace(".", "", 1).isdigit() else start)
        except LeoguardError as e:
            raise LeoguardError(f"--start '{start}': {e}") from e
    engines = {"sim": ["sim"], "emu": ["emu"], "both": ["sim", "emu"]}.get(engine)
    if engines is None:
        raise LeoguardError(f"--engine '{engine}': choose sim, emu or both")
    paths = files or DEFAULT_FILES
    progress = None if as_json else (lambda m: console.print(f"[dim]{m}[/]"))
    results, record = run(paths, engines, profile, dish, pop, seeds, emu_window_s, progress, fit_half, start_unix)
    obj = {
        "profile": profile,
        "fit": record,
        "traces": [
            {"path": r.path, "kind": r.kind, "measured": r.measured, "measured_windows": r.measured_windows,
             "modelled": r.modelled, "rows": r.rows, "errors": r.errors}
            for r in results
        ],
    }  # fmt: skip
    md = []
    for r in results:
        for e, rows in r.rows.items():
            md.append(f"### {Path(r.path).name}, {e}\n\n{stats.to_markdown(rows)}\n")
        for e, err in r.errors.items():
            md.append(f"### {Path(r.path).name}, {e}\n\nno model run: {err}\n")
    if out is not None:
        from leoguard.errors import make_dir

        make_dir(out)
        (out / "realism.json").write_text(json.dumps(obj, indent=1, default=str) + "\n")
        (out / "realism.md").write_text("\n".join(md))
        for r in results:
            for e, m in r.modelled.items():
                fig = stats.plot(r.measured_windows.get(e, r.measured), m)
                fig.savefig(out / f"{Path(r.path).stem}-{e}.png", dpi=110)
    if as_json:
        _emit(obj)
        return
    for r in results:
        for e, rows in r.rows.items():
            t = table("metric", "measured", "model", "error", "target", "met")
            for row in rows:
                met = {True: "yes", False: "NO", None: "-"}[row["met"]]
                model_cell = _fmt(row["modelled"])
                if row.get("seeds", 1) > 1 and row.get("modelled_min") is not None:
                    model_cell += f" ({_fmt(row['modelled_min'])}-{_fmt(row['modelled_max'])})"
                t.add_row(
                    row["metric"], _fmt(row["measured"]), model_cell, _fmt(row["error"]), _fmt(row["target"]), met
                )
            half = "first half (fitted)" if e == "sim-fit-half" else "second half"
            console.print(f"[bold]{Path(r.path).name}[/] ({r.kind}), {half}, {e}")
            console.print(t)
        for e, err in r.errors.items():
            console.print(f"[bold]{Path(r.path).name}[/], {e}: no model run: {err}")
    if out is not None:
        console.print(f"wrote {out}/realism.json, realism.md and the figures")
