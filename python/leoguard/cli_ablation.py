"""`leoguard ablation`: SATGUARD's ablation on one seed, or over paired seeds with `--seeds N`
(python/leoguard/ablation.py, docs/satguard.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from leoguard.cli_common import JsonOpt, _emit, console, out_dir_cb, table
from leoguard.errors import make_dir


def ablation(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML with a delay-sensitive tcp and cbr flow.")] = Path(
        "scenarios/satguard-nyc-lon.toml"
    ),
    variant: Annotated[
        list[str] | None, typer.Option("--variant", "-v", help="Run only these variants (repeatable).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds", min=1, max=20, help="Paired seeds: the seed and the next N-1; prints median and spread."
        ),
    ] = 1,
    duration: Annotated[float | None, typer.Option(help="Override duration_s.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Directory for the table and each run (default out/<name>-ablation).", callback=out_dir_cb),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", min=1, max=64, help="Variants run at a time, on threads (the results do not depend on it)."
        ),
    ] = 2,
    as_json: JsonOpt = False,
) -> None:
    """SATGUARD's ablation: the scenario unprotected, with LinkGuardian, with SATGUARD and with each
    SATGUARD technique off in turn, plus a lossless reference; prints the table and the acceptance
    checks. The variants of one seed see the same lossy seconds (paired); with --seeds N each figure
    is also given as median and spread over N seeds, and every check must pass on every seed. Exit
    status 1 if a check fails."""
    from leoguard.ablation import VARIANTS, run_ablation

    err = Console(stderr=True)

    def progress(name: str) -> None:
        if not as_json:
            err.print(f"running [bold]{name}[/]: {VARIANTS[name][0]}")

    if seeds > 1:
        _ablation_seeds(scenario, variant, seed, seeds, duration, out, as_json, progress, workers)
        return
    ab = run_ablation(scenario, variant, seed=seed, duration_s=duration, progress=progress, workers=workers)
    d = out or Path("out") / f"{ab.scenario.dir_name}-ablation"
    make_dir(d)
    ab.table.write_parquet(d / "ablation.parquet")
    for name, res in ab.runs.items():
        res.write(d / name)
    summ = ab.summary()
    (d / "ablation.json").write_text(json.dumps(summ, indent=2, default=str))
    if as_json:
        _emit(summ)
    else:
        # Two tables, so each fits an 80-column terminal: what the endpoints see, then the scheme's work.
        for heads in (
            {"variant": "variant", "tcp_goodput_mbps": "TCP\nMbit/s", "tcp_retransmissions": "TCP\nretx",
             "tcp_rtos": "TCP\nRTOs", "probe_loss": "probe\nloss", "probe_owd_p50_ms": "OWD ms\np50",
             "probe_owd_p99_ms": "OWD ms\np99"},
            {"variant": "variant", "hop_retransmissions": "hop\nretx", "lost_at_handover": "lost at\nhandover",
             "migrated_packets": "migrated", "timer_losses": "timer\nlosses", "feedback_mbytes": "feedback\nMB",
             "processed_packets": "processed", "unprocessed_packets": "not\nprocessed"},
        ):  # fmt: skip
            t = table(*heads.values(), wrap=(0,))
            for r in ab.table.select(list(heads)).iter_rows():
                t.add_row(*["-" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x) for x in r])
            console.print(t)
        for c in ab.checks:
            mark = "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]"
            figs = ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("check", "passed"))
            console.print(f"{mark} {c['check']}: {figs}")
        console.print(f"results in {d}")
    if not all(c["passed"] for c in ab.checks):
        raise typer.Exit(1)


def _ablation_seeds(
    scenario: Path, variant: list[str] | None, seed: int | None, n: int, duration: float | None,
    out: Path | None, as_json: bool, progress: Any, workers: int,
) -> None:  # fmt: skip
    """`leoguard ablation --seeds N`: the ablation for N paired seeds, the spread table, the checks per seed."""
    from leoguard.ablation import SPREAD_METRICS, run_ablation, spread
    from leoguard.scenario import load_scenario

    base = seed if seed is not None else load_scenario(scenario).seed
    runs = []
    for s in range(base, base + n):
        if not as_json:
            Console(stderr=True).print(f"[bold]seed {s}[/]")
        runs.append(run_ablation(scenario, variant, seed=s, duration_s=duration, progress=progress, workers=workers))
    d = out or Path("out") / f"{runs[0].scenario.dir_name}-ablation"
    make_dir(d)
    sp = spread(runs)
    sp.write_parquet(d / "ablation-seeds.parquet")
    checks = [{**c, "seed": ab.scenario.seed} for ab in runs for c in ab.checks]
    summ = {"scenario": runs[0].scenario.name, "seeds": [ab.scenario.seed for ab in runs],
            "rows": sp.to_dicts(), "checks": checks}  # fmt: skip
    (d / "ablation-seeds.json").write_text(json.dumps(summ, indent=2, default=str))
    if as_json:
        _emit(summ)
    else:
        heads = {"tcp_goodput_mbps": "TCP\nMbit/s", "tcp_retransmissions": "TCP\nretx", "probe_loss": "probe\nloss %",
                 "probe_owd_p99_ms": "OWD p99\nms", "hop_retransmissions": "hop\nretx"}  # fmt: skip
        assert set(heads) == set(SPREAD_METRICS)
        scale = {"probe_loss": 100.0}

        def num(v: float) -> str:
            return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"

        t = table("variant", *heads.values(), wrap=(0,))
        for r in sp.iter_rows(named=True):
            cells = []
            for m in heads:
                k = scale.get(m, 1.0)
                lo, hi = r[m + "_min"], r[m + "_max"]
                cells.append("-" if r[m] is None else f"{num(r[m] * k)}\n{num(lo * k)}-{num(hi * k)}")
            t.add_row(r["variant"], *cells)
        console.print(f"median, and min-max below it, over seeds {summ['seeds']}")
        console.print(t)
        for c in checks:
            mark = "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]"
            console.print(f"{mark} seed {c['seed']}: {c['check']}")
        console.print(f"results in {d}")
    if not all(c["passed"] for c in checks):
        raise typer.Exit(1)
