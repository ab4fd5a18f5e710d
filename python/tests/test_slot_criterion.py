"""The global schedule's `path-aware` slot criterion: both ends of a pair chosen jointly for the lowest
mean delay over each 15 s slot, held for the slot (docs/constellation.md, "Path-aware slot choice")."""

import typing

import numpy as np
import polars as pl
import pytest

from leoguard import LeoguardError
from leoguard.orbit import SLOT_CRITERIA
from leoguard.scenario import ConstellationTopology, LeoPath, from_dict
from leoguard.simulate import simulate

PERIOD, PHASE = 15.0, 12.0  # default epoch 2026-01-01T00:00:00Z: boundaries at UTC seconds 12/27/42/57


@pytest.fixture(scope="module")
def par_bjs(starlink):
    """Paris - Beijing, 90 s at 100 ms, under each criterion and best-path."""
    run = dict(duration=90, step=0.1, interruption="uniform", seed=3)
    return {
        crit: starlink.path_timeline("Paris", "Beijing", slot_criterion=crit, **run)
        for crit in ("highest-elevation", "path-aware")
    } | {"best-path": starlink.path_timeline("Paris", "Beijing", policy="best-path", **run)}


def slot_means(tl) -> pl.DataFrame:
    """Mean one-way delay per whole slot inside the run."""
    return (
        tl.steps.with_columns(((pl.col("t_s") - PHASE) / PERIOD).floor().cast(pl.Int64).alias("slot"))
        .filter((pl.col("slot") >= 0) & (pl.col("slot") < 5))  # slots 12-27 ... 72-87 s
        .group_by("slot")
        .agg(pl.col("owd_ms").mean().alias("owd_ms"), pl.col("reachable").all())
        .sort("slot")
    )


def test_path_aware_removes_the_grid_detour_of_paris_beijing(par_bjs):
    owd = {k: tl.steps.filter(pl.col("reachable"))["owd_ms"].to_numpy() for k, tl in par_bjs.items()}
    for k, tl in par_bjs.items():
        assert tl.summary()["reachable_fraction"] == 1.0, k
    he, pa, best = (np.percentile(owd[k], 50) for k in ("highest-elevation", "path-aware", "best-path"))
    # Highest elevation pairs satellites moving in opposite directions: a +Grid detour of ~3.7x.
    assert he > 2 * pa
    # Held for 15 s, the jointly chosen pair is within 1 % of Hypatia's per-step best path (never below).
    assert best <= pa < 1.01 * best
    # Slot by slot, path-aware is never slower on average than highest elevation.
    m_he, m_pa = slot_means(par_bjs["highest-elevation"]), slot_means(par_bjs["path-aware"])
    assert m_pa["reachable"].all() and m_pa.height == 5
    assert (m_pa["owd_ms"] <= m_he["owd_ms"] + 1e-9).all()


def test_path_aware_hands_over_only_at_epochs_or_on_loss_of_visibility(par_bjs):
    tl = par_bjs["path-aware"]
    h = tl.handovers
    epochs = h.filter(pl.col("reason") == "epoch")
    assert epochs.height > 0
    assert (((epochs["t_s"] - PHASE) % PERIOD).abs() < 1e-9).all()
    assert set(h["reason"]) <= {"epoch", "lost-visibility"}
    # The same interruption model as the other criteria (StarTCP's 30-200 ms).
    assert h["interruption_ms"].min() >= 30 and h["interruption_ms"].max() <= 200
    # Between two handovers of an end, its satellite does not change: one serving satellite per slot row.
    steps = tl.steps.filter(pl.col("reachable"))
    for node, col in (("Paris", "src_sat"), ("Beijing", "dst_sat")):
        for row in tl.slots.filter(pl.col("node") == node).iter_rows(named=True):
            inside = steps.filter((pl.col("t_s") >= row["slot_start_s"]) & (pl.col("t_s") < row["slot_end_s"]))
            assert set(inside[col]) <= {row["sat"]}


def test_path_aware_runs_a_leo_path_scenario_end_to_end():
    def run(crit: str):
        return simulate(
            from_dict(
                {"name": "pa", "duration_s": 20.0, "seed": 2,
                 "topology": {"kind": "leo-path", "a": "New York", "b": "London", "rate_mbps": 50,
                              "slot_criterion": crit},
                 "flows": [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 1, "size": 1000}]}
            )
        )  # fmt: skip

    he, pa = run("highest-elevation"), run("path-aware")
    for r in (he, pa):
        assert r.summary()["flows"][0]["delivered_bytes"] > 0
    # Packets follow the path-aware timeline (New York - London: 21-22 ms one-way for the whole run).
    assert pa.packets["owd_ms"].median() < 0.8 * he.packets["owd_ms"].median()
    assert pa.packets["owd_ms"].min() > 21.0 and pa.packets["owd_ms"].median() < 23.0


def test_the_scenario_accepts_the_cores_criterion_names():
    assert SLOT_CRITERIA == ("highest-elevation", "nearest", "path-aware")
    for model in (LeoPath, ConstellationTopology):
        assert typing.get_args(model.model_fields["slot_criterion"].annotation) == SLOT_CRITERIA


@pytest.mark.parametrize(
    ("topology", "pattern"),
    [
        (
            {"kind": "leo-path", "a": "Paris", "b": "Beijing", "rate_mbps": 10, "slot_criterion": "random"},
            r"topology\.leo-path\.slot_criterion: Input should be 'highest-elevation', 'nearest' or 'path-aware' "
            r"\(got 'random'\)",
        ),
        (
            {"kind": "constellation", "ground": ["Paris", "Beijing", "London"], "gsl_rate_mbps": 10,
             "isl_rate_mbps": 10, "slot_criterion": "path-aware"},
            r"topology\.constellation: slot_criterion = 'path-aware' attaches a pair of places "
            r"jointly, so it needs exactly 2 ground places",
        ),
        (
            {"kind": "constellation", "ground": ["Paris"], "top_cities": 3, "gsl_rate_mbps": 10,
             "isl_rate_mbps": 10, "policy": "best-path"},
            r"topology\.constellation: policy = 'best-path' attaches a pair of places jointly",
        ),
    ],
)  # fmt: skip
def test_bad_criteria_in_a_scenario_are_one_line_naming_the_field(topology, pattern):
    with pytest.raises(LeoguardError, match=pattern) as e:
        from_dict({"duration_s": 1.0, "topology": topology, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})
    assert "\n" not in str(e.value)


def test_bad_criteria_in_the_api_are_one_line_naming_the_field(starlink):
    with pytest.raises(LeoguardError) as e:
        starlink.path_timeline("Paris", "Beijing", duration=1, slot_criterion="random")
    assert str(e.value) == "unknown slot_criterion 'random' (known: highest-elevation, nearest, path-aware)"
    # Checked under every policy, not only where it is used.
    with pytest.raises(LeoguardError, match="unknown slot_criterion 'shortest'"):
        starlink.path_timeline("Paris", "Beijing", duration=1, policy="best-path", slot_criterion="shortest")
    with pytest.raises(LeoguardError, match=r"^invalid slot_criterion = 'path-aware' for a connectivity cache"):
        starlink.connectivity_cache(["Paris"], duration=1, slot_criterion="path-aware")
