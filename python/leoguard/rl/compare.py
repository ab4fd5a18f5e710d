"""Lead policies compared on the training environment's networks (held-out draws): each policy runs
every episode once, as a `[startcp]` section (heuristic, fixed, learnt weights file), and each stall
is scored with the training reward's window (`leoguard.rl.episode.window`). Plain leoguard: no NN
library needed (the learnt policy runs in the Rust core)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from leoguard.rl.episode import WARMUP_HANDOVERS, EpisodeParams, nearest_handover, scenario, stalls, window
from leoguard.simulate import simulate

#: Held-out episodes are drawn from this stream of the seed (training uses the seed itself).
HELD_OUT = 7


def policies(weights: Path | None) -> dict[str, dict[str, Any]]:
    """The heuristic, and the learnt policy from `weights` when given."""
    out: dict[str, dict[str, Any]] = {"heuristic": {"policy": "heuristic"}}
    if weights is not None:
        out["learnt"] = {"policy": "learnt", "weights": str(weights)}
    return out


def draws(episodes: int, seed: int, decisions: int = 4) -> list[EpisodeParams]:
    """`episodes` networks from the environment's distribution, from a stream apart from training's."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, HELD_OUT]))
    return [EpisodeParams.draw(rng, WARMUP_HANDOVERS + decisions + 2) for _ in range(episodes)]


def evaluate(sections: dict[str, dict[str, Any]], params: list[EpisodeParams], decisions: int = 4) -> pl.DataFrame:
    """One row per (policy, episode, stall) for the first `decisions` stalls of each episode: the
    handover, the lead, and the reward window's throughput, loss and reward."""
    rows = []
    for name, section in sections.items():
        for e, p in enumerate(params):
            end = p.handover_s(WARMUP_HANDOVERS + decisions) + 0.6
            r = simulate(scenario(p, end, [], startcp=section))
            for j, row in enumerate(stalls(r).head(decisions).iter_rows(named=True)):
                h = nearest_handover(p, row["predicted_ns"])
                if h + 0.5 > end:
                    continue
                w = window(r, h, p.rate_mbps)
                rows.append({"policy": name, "episode": e, "stall": j, "handover_s": h,
                             "lead_ms": row["lead_ns"] / 1e6, **w})  # fmt: skip
    return pl.DataFrame(rows)


def summary(df: pl.DataFrame, paired: bool = True) -> pl.DataFrame:
    """Per policy: mean reward, throughput (Mbit/s), utilisation, lost packets and loss rate per
    handover window, mean lead, and the number of handovers. `paired`: only the handovers every
    policy stalled for (a lead changes the gaps the receiver sees, so one policy's run may find the
    phase a handover later than another's)."""
    if paired and not df.is_empty():
        n = df["policy"].n_unique()
        both = df.group_by("episode", "handover_s").agg(pl.len().alias("n")).filter(pl.col("n") == n)
        df = df.join(both.drop("n"), on=["episode", "handover_s"])
    return (
        df.group_by("policy", maintain_order=True)
        .agg(
            pl.col("reward").mean(),
            pl.col("throughput_mbps").mean(),
            pl.col("utilisation").mean(),
            pl.col("lost_packets").mean(),
            pl.col("loss_rate").mean(),
            pl.col("lead_ms").mean(),
            pl.len().alias("handovers"),
        )
        .with_columns(pl.col(pl.Float64).round(4))
    )


def experiments(duration_s: float = 62.0, seed: int = 1) -> pl.DataFrame:
    """The two-path and NYC-LON reproductions (`leoguard reproduce startcp`, which runs the learnt
    policy when the shipped weights exist), each handover also scored on the training reward's
    centred window: one row per (experiment, scheme, handover) with the reproduction's whole-second
    figures and `window_*` ones."""
    from leoguard.reproduce.startcp import handover_times, reproduce

    rep = reproduce(duration_s=duration_s, seed=seed)
    rows = []
    for (exp, scheme), r in rep.runs.items():
        rate = 40.0  # both experiments run at 40 Mbit/s
        by_h = {x["t_s"]: x for x in rep.rows if x["experiment"] == exp and x["scheme"] == scheme}
        for h in handover_times(r.scenario):
            if h + 0.5 > duration_s:
                continue
            w = window(r, h, rate)
            row = by_h[h]
            rows.append({
                "experiment": exp, "scheme": scheme, "t_s": h, "throughput_mbps": row["throughput_mbps"],
                "lost_packets": row["lost_packets"], "window_throughput_mbps": round(w["throughput_mbps"], 3),
                "window_lost_packets": int(w["lost_packets"]), "window_reward": round(w["reward"], 4),
            })  # fmt: skip
    return pl.DataFrame(rows)
