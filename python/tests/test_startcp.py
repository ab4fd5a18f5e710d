"""StarTCP in the simulator (issue 14): the two-path experiment's qualitative claims on a short run, the
per-handover telemetry, and bad input."""

import json
import subprocess
import sys

import polars as pl
import pytest

from leoguard.errors import LeoguardError
from leoguard.reproduce.startcp import reproduce, two_path
from leoguard.scenario import from_dict
from leoguard.simulate import simulate


@pytest.fixture(scope="module")
def two_path_runs():
    # 62 s: handovers at 15, 30, 45 and 60 s (the flow starts at 2 s). With min_events = 2 StarTCP
    # has a phase after two handovers and acts from the third (the paper: from the second).
    return reproduce(("two-path",), duration_s=62.0, learnt=False)


def test_startcp_stalls_ahead_of_predicted_handovers_and_loses_nothing_there(two_path_runs):
    rows = [r for r in two_path_runs.rows if r["experiment"] == "two-path"]
    bbr = [r for r in rows if r["scheme"] == "bbr"]
    star = [r for r in rows if r["scheme"] == "startcp"]
    assert [r["t_s"] for r in bbr] == [15.0, 30.0, 45.0, 60.0] == [r["t_s"] for r in star]
    # BBR loses the interruption's packets at every handover (the paper: > 150 in that second).
    assert all(r["lost_packets"] > 150 for r in bbr), bbr
    # StarTCP predicts nothing before it has seen two handovers: it loses as BBR does there...
    for r in star[:2]:
        assert r["predicted_error_ms"] is None and r["lost_packets"] > 150, r
    # ...and from then on it predicts the handover within tens of ms and loses nothing.
    for r in star[2:]:
        assert r["predicted_error_ms"] is not None and abs(r["predicted_error_ms"]) < 50, r
        assert r["lost_packets"] == 0, r
        assert r["throughput_mbps"] > 15.0, r
    run = two_path_runs.runs[("two-path", "startcp")]
    st = run.startcp
    assert st.height == 2 and set(st["reason"].to_list()) == {"notice"}
    # Probes every 1 ms through the stall (lead + 100 ms interruption + the notice's way back).
    stall_ms = (st["stall_end_ns"] - st["stall_start_ns"]).cast(pl.Float64) / 1e6
    assert ((st["probes"].cast(pl.Float64) - stall_ms).abs() <= 2).all(), st
    assert (st["lead_ns"] > 0).all()
    assert set(run.interruptions.columns) == {"flow", "start_ns", "duration_ns", "stalled"}
    assert run.interruptions["stalled"].sum() == 2


def test_across_a_stall_no_data_is_lost_resent_or_duplicated():
    r = simulate(two_path("startcp", duration_s=49.0))
    f = r.flows.row(0, named=True)
    assert f["rtos"] == 0
    assert r.startcp.height == 1
    stall = r.startcp.row(0, named=True)
    # From the stall's start to a second after it ended the receiver gets no retransmission and no
    # segment twice: nothing was lost in the handover, nothing resent for it.
    lo, hi = stall["stall_start_ns"] - 200_000_000, stall["stall_end_ns"] + 1_000_000_000
    w = r.packets.filter((pl.col("flow") == 0) & (pl.col("received_ns") >= lo) & (pl.col("received_ns") < hi))
    assert w.height > 1000
    assert not w["retransmission"].any()
    assert w["seq"].n_unique() == w.height
    # The receiver holds in order every byte the sender saw acknowledged.
    acked = r.series.filter(pl.col("flow") == 0)["acked_bytes"].max()
    assert f["delivered_bytes"] >= acked


def test_a_fixed_and_a_scripted_lead_are_used_as_given():
    for policy, extra, want_ms in [("fixed", {"lead_ms": 150.0}, 150.0), ("scripted", {"leads_ms": [120.0]}, 120.0)]:
        r = simulate(two_path("startcp", duration_s=47.0, startcp={"policy": policy, **extra}))
        assert r.startcp.height == 1
        assert r.startcp["lead_ns"][0] == pytest.approx(want_ms * 1e6, abs=1e3)


@pytest.mark.parametrize(
    "section, match",
    [
        ({"period_s": 0}, "period_s"),
        ({"max_lead_ms": -5}, "max_lead_ms"),
        ({"policy": "fixed"}, "lead_ms"),
        ({"policy": "scripted", "leads_ms": [-1.0]}, "leads_ms"),
        ({"probe_interval_ms": 20.0}, "probe_interval"),
        ({"base_cc": "startcp"}, "base_cc"),
    ],
)
def test_impossible_startcp_settings_are_refused_with_the_field_named(section, match):
    with pytest.raises(LeoguardError, match=match):
        simulate(two_path("startcp", duration_s=5.0, startcp=section))


def test_a_corrupt_or_mismatched_weights_file_is_refused_with_the_field_named(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(LeoguardError, match=r"startcp\.weights"):
        simulate(two_path("startcp", duration_s=5.0, startcp={"policy": "learnt", "weights": str(bad)}))
    doc = {
        "format": "leoguard-startcp-policy", "version": 1,
        "inputs": ["mean_rtt_ms", "rtt_var_ms2", "ack_rate_mbps", "owd_ms", "time_to_handover_ms"],
        "input_mean": [0, 0, 0, 0, 0], "input_scale": [1, 1, 1, 1, 1],
        "layers": [{"w": [[0.1, 0.1, 0.1, 0.1]], "b": [0.0], "activation": "linear"}],
        "output": {"scale_ms": 100.0, "max_lead_ms": 1000.0},
    }  # fmt: skip
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(LeoguardError, match=r"layers\[0\]\.w"):
        simulate(two_path("startcp", duration_s=5.0, startcp={"policy": "learnt", "weights": str(bad)}))
    with pytest.raises(LeoguardError, match="cannot read"):
        simulate(two_path("startcp", duration_s=5.0, startcp={"policy": "learnt", "weights": str(tmp_path / "no")}))


def test_the_emulator_runs_startcp_on_its_own_tcp_and_refuses_the_kernel_s():
    from leoguard.emu.transport import check_flow, flow_stack

    sc = from_dict({"duration_s": 5.0, "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
                    "flows": [{"kind": "tcp", "src": "n0", "dst": "n1", "cc": "startcp"}]})  # fmt: skip
    assert flow_stack(sc.flows[0]) == "leoguard"
    check_flow(sc, 0, sc.flows[0], [])  # leoguard-transport carries StarTCP (tests/test_emu_startcp.py)
    with pytest.raises(LeoguardError, match=r'flows\[0\]\.stack = "kernel" with cc = startcp'):
        check_flow(sc, 0, sc.flows[0].model_copy(update={"stack": "kernel"}), [])


def test_cli_prints_one_row_per_handover():
    cmd = [sys.executable, "-m", "leoguard.cli", "reproduce", "startcp", "-e", "two-path", "--duration", "32",
           "--json"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    rows = json.loads(out.stdout)
    assert {r["scheme"] for r in rows} >= {"bbr", "startcp"}
    assert set(rows[0]) == {"experiment", "engine", "scheme", "handover", "t_s", "throughput_mbps",
                            "lost_packets", "predicted_error_ms"}  # fmt: skip
    bad = subprocess.run([*cmd[:-3], "--duration", "5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--duration" in bad.stderr
