"""SATGUARD's ablation (issue 4) on the New York - London scenario, shortened to cross one handover."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from leoguard.ablation import VARIANTS, run_ablation
from leoguard.errors import LeoguardError
from leoguard.scenario import from_dict, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "satguard-nyc-lon.toml"


@pytest.fixture(scope="module")
def ablation():
    # 14 s: London's gateway hands over at 12 s (New York keeps its satellite until 42 s). Two at a
    # time, as the command runs them (test_simulate checks threads give the bytes of one by one).
    return run_ablation(SCENARIO, ["lossless", "none", "linkguardian", "satguard", "satguard-no-reorder",
                                   "satguard-process-all"], duration_s=14.0, workers=2)  # fmt: skip


def test_acceptance_checks_pass_and_compare_real_figures(ablation):
    checks = {c["check"]: c for c in ablation.checks}
    assert len(checks) == 3
    loss = checks["probe link loss with SATGUARD <= 1/100 of unprotected"]
    assert loss["unprotected"] > 0.005, "the Starlink model and the interruptions lose packets"
    assert loss["unprotected_link"] > 0.005 and loss["satguard_link"] <= loss["satguard"], loss
    assert loss["passed"], loss
    owd = checks["probe p99 OWD with SATGUARD <= lossless p99 + user-link RTT + max reorder hold"]
    assert 7.0 < owd["user_link_rtt_ms"] < 7.6 and owd["passed"], owd
    assert checks["LinkGuardian recovers ordinary losses but loses its buffer at handovers"]["passed"]


def test_the_table_shows_what_each_variant_does(ablation):
    rows = {r["variant"]: r for r in ablation.table.to_dicts()}
    assert rows["none"]["hop_retransmissions"] == 0 and rows["none"]["processed_packets"] == 0
    assert rows["satguard"]["hop_retransmissions"] > 0 and rows["satguard"]["feedback_mbytes"] > 0
    # Partial processing: the unmarked 20 Mbit/s stream is processed only with process_all.
    assert rows["satguard"]["unprocessed_packets"] > 20_000
    assert rows["satguard-process-all"]["unprocessed_packets"] == 0
    # The exit's reorder buffer holds packets behind a gap; without it nothing is held. (What that does
    # to TCP is a comparison of paired seeds, not of one run: docs/cross-validation.md, issue 28.)
    assert rows["satguard"]["max_reorder_hold_ms"] > 0
    assert rows["satguard-no-reorder"]["max_reorder_hold_ms"] == 0


def test_unknown_variants_and_scenarios_without_probes_are_refused():
    with pytest.raises(LeoguardError, match="unknown variant"):
        run_ablation(SCENARIO, ["satguard", "magic"])
    sc = from_dict({"duration_s": 1.0, "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
                    "flows": [{"kind": "tcp", "src": "n0", "dst": "n1", "delay_sensitive": True}]})  # fmt: skip
    with pytest.raises(LeoguardError, match="delay_sensitive cbr flow"):
        run_ablation(sc)
    assert set(VARIANTS) >= {"none", "linkguardian", "satguard", "satguard-no-migration"}


def test_cli_prints_json_and_writes_the_runs(tmp_path):
    cmd = [sys.executable, "-m", "leoguard.cli", "ablation", str(SCENARIO), "-v", "none", "-v", "satguard",
           "--duration", "3", "--out", str(tmp_path), "--json"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r["variant"] for r in out["rows"]] == ["none", "satguard"]
    assert (tmp_path / "ablation.parquet").exists() and (tmp_path / "satguard" / "hops.parquet").exists()
    assert load_scenario(SCENARIO).satguard is not None


def test_seeds_give_the_median_and_spread_of_paired_runs(tmp_path):
    """`--seeds 3`: each variant's figures as the median and spread of three seeds, the variants of one
    seed sharing its lossy seconds, and every check reported per seed."""
    cmd = [sys.executable, "-m", "leoguard.cli", "ablation", str(SCENARIO), "-v", "none", "-v", "satguard",
           "--duration", "3", "--seeds", "3", "--seed", "4", "--out", str(tmp_path), "--json"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr  # 1: a check failed on some seed (reported, not hidden)
    out = json.loads(p.stdout)
    assert out["seeds"] == [4, 5, 6]
    for r in out["rows"]:
        assert r["seeds"] == 3
        assert r["tcp_goodput_mbps_min"] <= r["tcp_goodput_mbps"] <= r["tcp_goodput_mbps_max"]
    assert {c["seed"] for c in out["checks"]} == {4, 5, 6}
    assert (p.returncode == 0) == all(c["passed"] for c in out["checks"])
    assert (tmp_path / "ablation-seeds.parquet").exists()
