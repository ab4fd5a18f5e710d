"""`leoguard run`, and the `leoguard` program's entry point.

A run of a short scenario is mostly Python's imports, and the command front (Typer, click, rich and
every subcommand's module) was a quarter of them. So `main` reads a plain `leoguard run SCENARIO
[--out P] [--seed N] [--duration S] [--json]` itself and runs it without importing the front; any
other command line (another command, `--help`, an option it does not know, a value that does not
parse) goes to the Typer app in `cli.py`, which gives the same errors and help as ever. Both paths
run the same `run_scenario` below; `python/tests/test_cli_run.py` checks that the two read every
command line alike and that the Typer command has no option this reader lacks.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from leoguard.cli_out import _emit, check_out_dir, fail
from leoguard.errors import LeoguardError

#: The options of `leoguard run` (the Typer command's parameter names), read by `parse_run`.
RUN_PARAMS = ("scenario", "out", "seed", "duration", "as_json")


def run_scenario(scenario: Path, out: Path | None, seed: int | None, duration: float | None, as_json: bool) -> int:
    """Runs a scenario file, writes its Parquet results and prints the per-flow summary (one JSON object
    with `as_json`); returns the exit status: 0, or 130 when Ctrl-C stopped the run (the partial
    results are written)."""
    from leoguard.scenario import load_scenario
    from leoguard.simulate import simulate

    sc = load_scenario(scenario, seed=seed, duration_s=duration)
    # A progress bar on the terminal (stderr), none for --json or when output is not a terminal.
    err = None
    if not as_json:
        from rich.console import Console

        err = Console(stderr=True)
    bar: Any = nullcontext()
    if err is not None and err.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:.1f} s"),
            TextColumn("{task.fields[hops]}"), TimeRemainingColumn(), console=err, transient=True,
        )  # fmt: skip
    with bar:
        task = bar.add_task(sc.name, total=sc.duration_s, hops="") if not isinstance(bar, nullcontext) else None

        def progress(now_s: float, end_s: float, hops: int) -> None:
            if task is not None:
                bar.update(task, completed=now_s, hops=f"{hops:,} packet-hops")

        res = simulate(sc, base_dir=scenario.parent, progress=progress, interruptible=True)
    files = res.write(out or Path("out") / sc.dir_name)
    summ = res.summary()
    summ["files"] = {k: str(v) for k, v in files.items()}
    if not res.complete:
        from rich.console import Console

        (err or Console(stderr=True)).print(
            f"[yellow]interrupted[/] at {res.simulated_s:.3f} s of {sc.duration_s} s: the partial results "
            f"are written to {files['run'].parent} (run.json says complete = false)"
        )
    if as_json:
        _emit(summ)
    else:
        print_run(sc, res, summ, files)
    return 0 if res.complete else 130


def print_run(sc: Any, res: Any, summ: dict[str, Any], files: dict[str, Path]) -> None:
    """The run's summary as a table for people."""
    from rich.console import Console

    from leoguard.cli_out import table

    console = Console()
    console.print(
        f"[bold]{sc.name}[/]: {res.simulated_s:g} s simulated in {res.wall_s:.2f} s, "
        f"{res.packet_hops:,} packet-hops, seed {sc.seed}"
    )
    t = table(
        "flow", "src -> dst", "kind/cc", "Mbit/s", "retx", "RTOs", "loss %\nend", "loss %\nnet", "OWD ms\np50/p99",
        "FCT s", wrap=(1,),
    )  # fmt: skip

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}" if v >= 10 else f"{v:.1f}"

    for f in summ["flows"]:
        fct = f"{f['fct_s']:.3f}" if f["fct_s"] is not None else "-"
        kind = f"{f['kind']}/{f['cc']}" if f["cc"] else f["kind"]
        t.add_row(
            str(f["flow"]), f"{f['src']} -> {f['dst']}", kind, f"{f['goodput_bps'] / 1e6:.2f}",
            str(f["retransmissions"]), str(f["rtos"]), f"{100 * f['endpoint_loss']:.2f}",
            f"{100 * f['network_loss']:.2f}", f"{ms(f['owd_ms']['p50'])}/{ms(f['owd_ms']['p99'])}", fct,
        )  # fmt: skip
    console.print(t)
    console.print(f"results in {files['run'].parent}")


def parse_run(args: list[str]) -> dict[str, Any] | None:
    """The parameters of a `leoguard run` command line (`args` after `run`) as the Typer command would
    read them, or None for anything this reader leaves to Typer: `--help`, an unknown option, a
    missing or option-like value, a number that does not parse, no or several scenarios, `--`."""
    conv = {"--out": Path, "--seed": int, "--duration": float}
    params: dict[str, Any] = {"out": None, "seed": None, "duration": None, "as_json": False}
    scenarios = []
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, value = a.partition("=")
        if a == "--json":
            params["as_json"] = True
        elif name in conv:
            if not eq:
                i += 1
                if i == len(args):
                    return None
                value = args[i]
            if value.startswith("-") and name != "--duration":
                return None
            try:
                params[name[2:]] = conv[name](value)
            except ValueError:
                return None
        elif a.startswith("-"):
            return None
        else:
            scenarios.append(a)
        i += 1
    if len(scenarios) != 1:
        return None
    return {"scenario": Path(scenarios[0]), **params}


def main(argv: list[str] | None = None) -> None:
    """The `leoguard` program: a plain `leoguard run` here, everything else through the Typer app."""
    args = sys.argv[1:] if argv is None else argv
    p = parse_run(args[1:]) if args[:1] == ["run"] else None
    if p is None:
        from leoguard.cli import main as typer_main

        typer_main(args)
        return
    try:
        check_out_dir(p["out"], "--out")
        rc = run_scenario(**p)
    except LeoguardError as e:
        fail(str(e), p["as_json"], getattr(e, "field", None))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    sys.exit(rc)
