"""SATGUARD's Fig 13 on both engines (`reproduce satguard --engine emu|both`, leoguard.reproduce.satguard_emu):
the variants are the ablation's transforms of the reproduction's own bulk run, and the figures are the
paper's. The emulated run itself is in test_emu.py (root, real time)."""

from __future__ import annotations

import pytest

from leoguard.errors import LeoguardError
from leoguard.reproduce import satguard as sg
from leoguard.reproduce import satguard_emu as se


def test_fig13_figures_count_seconds_above_800_and_below_500():
    f = se.figures([900.0, 850.0, 600.0, 400.0])
    assert f == {"seconds": 4, "mean_mbps": 687.5, "above_800_pct": 50.0, "below_500_pct": 25.0}
    assert se.figures([])["mean_mbps"] is None


def test_the_variants_change_only_what_they_name():
    mode = sg.MODES["quick"]
    base = sg.scenario("NYC-LON", "none", "bulk", mode)
    none = se.scenario("NYC-LON", "none", mode)
    assert none.model_dump() == base.model_dump()
    lossless = se.scenario("NYC-LON", "lossless", mode)
    assert lossless.topology.gsl_loss is None and base.topology.gsl_loss is not None
    assert lossless.flows == base.flows and lossless.seed == base.seed
    on = se.scenario("NYC-LON", "satguard", mode)
    off = se.scenario("NYC-LON", "satguard-no-reorder", mode)
    assert on.satguard.reorder and not off.satguard.reorder
    assert on.topology == off.topology == base.topology
    with pytest.raises(LeoguardError, match="variant"):
        se.scenario("NYC-LON", "quantum", mode)


def test_a_failed_run_is_a_row_in_the_table_not_the_end():
    rows = [
        {"pair": "NYC-LON", "variant": "none", "engine": "sim", "goodput_mbps": 12.0, "above_800_pct": 0.0,
         "below_500_pct": 100.0},
        {"pair": "NYC-LON", "variant": "none", "engine": "emu", "error": "the emulator's data plane failed: x"},
    ]  # fmt: skip
    t = se.table(rows)
    assert "| NYC-LON | none | 12 | 0.0 / 100.0 | failed |" in t
