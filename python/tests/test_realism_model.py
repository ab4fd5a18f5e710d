"""The modelled side of `leoguard validate starlink` (issue 29): the access profile on a leo-path (common
random numbers, the boundary at the clock's seconds 12/27/42/57, per-step capacity), the fitted stored
profile, and the command end to end on the shared measurement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leoguard.access import Access, boundary_phase_s, extra_rtt_ms, load_profile, profile_names
from leoguard.scenario import from_dict
from leoguard.simulate import simulate

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "starlink-mmsys24"
DISH, POP = "48.43,-123.37", "Seattle"


def _leo(duration_s: float, access: dict | None, flows: list[dict], epoch: str = "2023-09-12T01:26:04.75Z", **kw):
    topo = {
        "kind": "leo-path", "constellation": "starlink-shell1", "a": DISH, "b": POP, "policy": "global-schedule",
        "slot_criterion": "path-aware", "step_s": 0.1, "interruption": "none", "rate_mbps": 100, "epoch": epoch,
        **kw,
    }  # fmt: skip
    if access is not None:
        topo["access"] = access
    return from_dict({"name": "t", "duration_s": duration_s, "seed": 3, "topology": topo, "flows": flows})


CBR = [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 0.1, "size": 200}]
BULK = [{"kind": "tcp", "src": 1, "dst": 0, "cc": "cubic"}]


def test_the_access_is_a_function_of_seed_and_time_not_of_the_traffic():
    """Common random numbers: the per-step delays and rates do not depend on the flows; another seed
    draws others."""
    acc = {"profile": "mmsys24-seattle"}
    a, b = _leo(20, acc, CBR).to_core()["leo"], _leo(20, acc, BULK).to_core()["leo"]
    assert a["hop_delays_ms"] == b["hop_delays_ms"] and a["gsl_rates_a_bps"] == b["gsl_rates_a_bps"]
    bare = _leo(20, None, CBR).to_core()["leo"]
    assert a["hop_delays_ms"] != bare["hop_delays_ms"] and "gsl_rates_a_bps" not in bare
    other = _leo(20, acc, CBR).model_copy(update={"seed": 4}).to_core()["leo"]
    assert other["hop_delays_ms"] != a["hop_delays_ms"]
    # Only the dish's ground hop moves.
    assert all(x[1:] == y[1:] for x, y in zip(a["hop_delays_ms"], bare["hop_delays_ms"], strict=True))


def test_the_boundary_disturbance_falls_at_seconds_12_27_42_57_of_the_clock():
    """With a constant access delay, the extra round trip is exactly the bump in the half second after
    each boundary of the UTC clock (the run's epoch has a fractional second) and nothing elsewhere."""
    a = Access(extra_rtt_ms_quantiles=[5.0, 5.0], boundary_extra_ms=12.0, boundary_length_s=0.5, boundary_share=1.0)
    epoch = 1694481964.75  # 01:26:04.75 UTC
    t = np.arange(0.0, 60.0, 0.1)
    e = extra_rtt_ms(a, t, 7, epoch)
    pos = (epoch + t - 12.0) % 15.0
    assert boundary_phase_s(epoch) == pytest.approx(7.25)
    assert np.all(e[pos < 0.5] == 17.0) and np.all(e[pos >= 0.5] == 5.0)
    assert (pos < 0.5).sum() >= 16  # four boundaries, every step in their first half second


def test_per_step_access_rates_cap_a_bulk_flow_in_the_simulator():
    """Constant 6 Mbit/s access capacity each way: CUBIC's goodput over the leo-path is the dish's rate,
    not the links' 100 Mbit/s."""
    a = {"extra_rtt_ms_quantiles": [10.0, 10.0], "down_mbps_quantiles": [6.0, 6.0], "up_mbps_quantiles": [6.0, 6.0]}
    r = simulate(_leo(20, a, BULK, queue_bytes=200_000))
    g = r.flows.row(0, named=True)["goodput_bps"] / 1e6
    assert 5.0 < g <= 6.0, g


def test_outage_mode_loses_as_many_probes_but_far_fewer_bulk_loss_events():
    """The cycle profile's outage mode keeps a sparse probe's loss rate and turns a bulk flow's losses into
    a few bursts: CUBIC gets more than with the same loss one packet at a time."""
    loss = {"model": "cycle_profile", "probs": [0.01], "period_s": 15.0}

    def run(flows, slot):
        lo = {**loss, **({"slot_s": slot} if slot else {})}
        return simulate(_leo(60, None, flows, gsl_loss=lo, queue_bytes=500_000))

    probe = [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 0.05, "size": 125}]
    per_packet, outages = run(probe, None), run(probe, 0.05)
    lp, lo_ = (x.flows.row(0, named=True)["endpoint_loss"] for x in (per_packet, outages))
    # Two ground links at 1 % each: about 2 % either way (3000 probes: the 99 % interval is +-0.7 points).
    assert 0.012 < lp < 0.03 and 0.01 < lo_ < 0.032, (lp, lo_)
    g_pp, g_out = (run(BULK, s).flows.row(0, named=True)["goodput_bps"] for s in (None, 0.05))
    assert g_out > 2 * g_pp, (g_pp, g_out)


def test_the_stored_profile_is_the_fit_of_the_shared_data_and_carries_its_licence():
    """`mmsys24-seattle` is what tools/fit_starlink_profile.py fits on the first halves of the shared
    files (not numbers typed in), and names its source and the CC BY-SA licence."""
    assert "mmsys24-seattle" in profile_names()
    p = load_profile("mmsys24-seattle")
    assert "CC BY-SA 4.0" in p["licence"] and "Zhao" in p["source"] and "mmsys24" in p["source"]
    r = subprocess.run(
        [sys.executable, str(REPO / "tools/fit_starlink_profile.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_validate_starlink_runs_end_to_end_on_the_shared_ping_log(tmp_path):
    """The first 8000 probes of the shared ping log (about 20 minutes): fitted on the first half, modelled
    over the second half's window in the simulator; every target row is reported, the measurement's
    disturbance is in the boundary's half second and the model's rises there, and the files are written."""
    from typer.testing import CliRunner

    from leoguard.cli import app

    short = tmp_path / "ping.txt"
    short.write_text("".join((DATA / "ping-seattle-noisl-2023-09-11.txt").open().readlines()[:8000]))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["validate", "starlink", str(short), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    o = json.loads(res.stdout.strip().splitlines()[-1])
    rows = {r["metric"]: r for r in o["traces"][0]["rows"]["sim"]}
    for m in ("RTT p50 (ms)", "RTT p99 (ms)", "disturbance bin", "loss rate"):
        assert m in rows and rows[m]["met"] in (True, False), rows
    assert o["traces"][0]["measured"]["disturbance"]["bin"] == 0
    m = o["traces"][0]["modelled"]["sim"]
    assert m["median_rtt_by_position_ms"][0] > m["disturbance"]["baseline_ms"] + 4.0, m["disturbance"]
    assert (out / "realism.json").exists() and (out / "realism.md").exists() and (out / "ping-sim.png").exists()


def test_a_bad_trace_is_one_line_and_writes_nothing(tmp_path):
    """An unknown format: one line naming the file, the line and the field, exit status 2, no --out."""
    bad = tmp_path / "bad.txt"
    bad.write_text("hello world\n")
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, "-m", "leoguard.cli", "validate", "starlink", str(bad), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "bad.txt:1: field 'format'" in p.stderr, p.stderr
    assert not out.exists()


def test_a_profile_survives_the_scenario_written_out_and_read_back():
    """The emulator's data plane reads the scenario back from JSON: the access must still be the profile's
    (an explicit None or default written out once replaced every profile field: no access at all)."""
    sc = _leo(5, {"profile": "mmsys24-seattle"}, CBR)
    back = type(sc).model_validate_json(sc.model_dump_json())
    a, b = sc.to_core()["leo"], back.to_core()["leo"]
    assert a["hop_delays_ms"] == b["hop_delays_ms"] and a["gsl_rates_a_bps"] == b["gsl_rates_a_bps"]
    assert a["gsl_loss"] == b["gsl_loss"] and a["gsl_loss"]["model"] == "cycle_profile"
    bare = _leo(5, None, CBR).to_core()["leo"]
    assert a["hop_delays_ms"][0][0] > bare["hop_delays_ms"][0][0] + 4.0


def test_a_constellation_terminal_gets_its_access_link():
    """The access on a whole constellation's user terminal (New York; London is a gateway): 20 ms more
    round trip and a 5 Mbit/s dish, the gateway untouched; each terminal draws its own."""

    def sc(access, flows):
        topo = {
            "kind": "constellation", "constellation": "starlink-shell1", "ground": ["New York", "London"],
            "ground_stations": ["London"], "hosts": [{"name": "server", "ground": "London"}],
            "policy": "global-schedule", "step_s": 0.1, "interruption": "none", "gsl_rate_mbps": 100,
            "isl_rate_mbps": 1000, "queue_bytes": 300_000, "epoch": "2023-09-12T01:26:04Z",
        }  # fmt: skip
        if access:
            topo["access"] = access
        return from_dict({"name": "c", "duration_s": 15.0, "seed": 1, "topology": topo, "flows": flows})

    acc = {"extra_rtt_ms_quantiles": [20.0, 20.0], "down_mbps_quantiles": [5.0, 5.0], "up_mbps_quantiles": [5.0, 5.0]}
    probe = [{"kind": "cbr", "src": "server", "dst": "New York", "rate_mbps": 0.1, "size": 200}]
    with_access, bare = (simulate(sc(a, probe)).flows.row(0, named=True)["owd_ms_p50"] for a in (acc, None))
    assert 9.5 < with_access - bare < 10.5, (with_access, bare)
    bulk = [{"kind": "tcp", "src": "server", "dst": "New York", "cc": "cubic"}]
    g = simulate(sc(acc, bulk)).flows.row(0, named=True)["goodput_bps"] / 1e6
    assert 4.0 < g <= 5.0, g
    core = sc(acc, probe).to_core()["constellation"]
    assert [x["ground"] for x in core["access"]] == [0], "the gateway has no dish"


def test_start_moves_a_trace_on_the_utc_clock():
    """--start: a log whose clock was not UTC is placed at the given start; the 15 s cycle follows the
    clock, so moving the ping log by 7.5 s moves its disturbance by 15 half seconds."""
    from leoguard.realism import stats
    from leoguard.realism.traces import read_trace
    from leoguard.realism.validate import shifted

    tr = read_trace(DATA / "ping-seattle-noisl-2023-09-11.txt").halves()[0]
    assert stats.summarise(tr)["disturbance"]["bin"] == 0
    assert stats.summarise(shifted(tr, tr.start + 7.5))["disturbance"]["bin"] == 15
