"""`leoguard train ...`: offline training of learnt policies (StarTCP's lead, docs/startcp.md
"Training the lead policy"). Needs the `rl` extra (`pip install 'leoguard[rl]'`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from leoguard.cli_common import JsonOpt, _emit, check_out_file, console, new_app
from leoguard.errors import LeoguardError

train_app = new_app("Train learnt policies offline (the rl extra).")


@train_app.command("startcp")
def train_startcp(
    episodes: Annotated[int, typer.Option("--episodes", help="Training episodes (4 handovers each).")] = 1500,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the networks, the exploration and the weights.")] = 1,
    out: Annotated[
        Path, typer.Option("--out", help="Where the weights file goes.", callback=lambda v: check_out_file(v, "--out"))
    ] = Path("out/startcp_policy.json"),
    compare: Annotated[
        int, typer.Option("--compare", help="Then score it against the heuristic on this many held-out networks.")
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """StarTCP's lead policy (§2.2): advantage actor-critic on the simulator-backed Gymnasium environment,
    written as the weights file the Rust controller evaluates (`policy = "learnt"` in a startcp section). The
    defaults reproduce the shipped python/leoguard/data/startcp_policy.json (same bytes on the same
    library versions). With --json, prints {out, episodes, seed, wall_s, sim_seconds, history,
    comparison}."""
    if not 1 <= episodes <= 1_000_000:
        raise LeoguardError(f"--episodes {episodes}: must be in [1, 1000000]")
    if seed < 0:
        raise LeoguardError(f"--seed {seed}: must be >= 0")
    if not 0 <= compare <= 10_000:
        raise LeoguardError(f"--compare {compare}: must be in [0, 10000]")
    from leoguard.rl import require

    require()
    from leoguard.rl.train import TrainConfig, train

    if as_json:
        res = train(TrainConfig(episodes=episodes, seed=seed))
    else:
        bar = Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeRemainingColumn(), console=Console(stderr=True),
        )  # fmt: skip
        task = bar.add_task("episodes", total=episodes)

        def cb(row: dict[str, float]) -> None:
            desc = f"reward {row['reward']:.3f} lead {row['lead_ms']:.0f} ms"
            bar.update(task, completed=int(row["episode"]) + 1, description=desc)

        with bar:
            res = train(TrainConfig(episodes=episodes, seed=seed), progress=cb)
    res.save(out)
    table = None
    if compare:
        from leoguard.rl.compare import draws, evaluate, policies, summary

        table = summary(evaluate(policies(out), draws(compare, seed))).to_dicts()
    if as_json:
        _emit({"out": str(out), "episodes": episodes, "seed": seed, "wall_s": round(res.wall_s, 3),
               "sim_seconds": round(res.sim_seconds, 3), "history": res.history, "comparison": table})  # fmt: skip
        return
    last = res.history[-min(20, len(res.history)) :]
    mean = sum(r["reward"] for r in last) / len(last)
    console.print(f"weights: {out} ({episodes} episodes, seed {seed}, {res.wall_s:.0f} s)")
    console.print(f"mean reward of the last {len(last)} episodes: {mean:.3f}")
    for row in table or []:
        console.print(
            f"{row['policy']:>9}: reward {row['reward']:.3f}, {row['throughput_mbps']:.1f} Mbit/s, "
            f"{row['lost_packets']:.1f} lost per handover window, lead {row['lead_ms']:.0f} ms"
        )
