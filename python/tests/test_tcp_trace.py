"""`leoguard validate tcp-trace` (docs/tcp-trace.md): a real emulator run of kernel CUBIC with a capture
and TCP_INFO samples, replayed open loop against leoguard's TCP model; the report's structure and sanity
(not exact timings: the machine may be loaded), and bad inputs refused by name. Needs root (the
emulator fails, never skips, without it)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

KINDS = {
    "different_segment", "kernel_retransmits", "model_retransmits", "model_would_not_send", "kernel_did_not_send",
    "cwnd",
}  # fmt: skip

SCENARIO = """
name = "tcp-trace-test"
duration_s = 6.0
seed = 4

[[links]]
a = 0
b = 1
rate_mbps = 20
delay_ms = 10
loss = { model = "bernoulli", p = 0.01 }

[[links]]
a = 1
b = 2
rate_mbps = 20
delay_ms = 10

[[flows]]
kind = "tcp"
src = 0
dst = 2
cc = "cubic"
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "leoguard.cli", *args], capture_output=True, text=True, timeout=120)


def test_a_kernel_cubic_run_is_replayed_against_the_model(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the emulator needs root (network namespaces, TUN devices)")
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "run"
    p = run("validate", "tcp-trace", str(sc), "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    # The run has what the replay needs: the capture at the source and the sender's TCP_INFO readings.
    info = pl.read_csv(out / "tcpinfo.csv")
    assert len(info) > 50 and info["cwnd"].max() >= 10 and (info["rtt_ms"].median() or 0) >= 35
    c = rep["connection"]
    assert c["dport"] == 5201 and 1200 <= c["mss"] <= 1440 and c["timestamps"] and c["data_bytes"] > 500_000
    assert rep["kernel_sends"] >= c["data_bytes"] // c["mss"]
    # The flow was born CUBIC (its host's routes), so Linux did not pace it and neither does the replay.
    assert json.loads((out / "run.json").read_text())["host_cc"]["0"] == "cubic" and rep["pacing"] is False
    # The model follows the kernel for a while (the cookie, the initial window) before any departure.
    assert rep["matched_before_first"] >= 11
    d = rep["first_divergence"]
    if d is None:
        assert rep["verdict"].startswith(f"none up to {rep['packets']} packets")
    else:
        assert d["kind"] in KINDS and rep["verdict"].startswith(d["kind"])
        assert 0 < d["t_ns"] < 6e9
        if d["kind"] != "cwnd":
            here = [x for x in d["packets"] if x["here"]]
            # Found at the kernel's send, or (the kernel did not send) at the ACK that came first.
            want = "ack" if d["kind"] == "kernel_did_not_send" and d["kernel"] is None else "data"
            assert len(here) == 1 and here[0]["dir"] == want and len(d["packets"]) >= 5
    # TCP_INFO's cwnd beside the model's, most of it compared (outside recovery) and a fair share agreeing.
    w = rep["cwnd"]
    assert w["samples"] > 50 and w["compared"] > w["samples"] // 2 and w["within_tolerance"] > 0
    cl = rep["closed_loop"]
    assert cl["kernel"]["goodput_mbps"] > 1 and cl["model"]["goodput_mbps"] > 1
    assert cl["kernel"]["retransmissions_in_capture"] > 0 and cl["model"]["retransmissions"] > 0
    # The same report again from the results directory, as text.
    p = run("validate", "tcp-trace", str(out), "--no-sim")
    assert p.returncode == 0, p.stderr
    assert "first divergence:" in p.stdout and "closed loop" in p.stdout


def test_bad_inputs_are_refused_by_name(tmp_path):
    p = run("validate", "tcp-trace", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "nowhere" in p.stderr and "Traceback" not in p.stderr
    r = tmp_path / "r"
    r.mkdir()
    scenario = {
        "duration_s": 1.0, "flows": [{"kind": "tcp", "src": 0, "dst": 1}],
        "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
    }  # fmt: skip
    (r / "run.json").write_text(json.dumps({"engine": "emu", "scenario": scenario}))
    p = run("validate", "tcp-trace", str(r))
    assert p.returncode == 2 and "capture.pcap" in p.stderr, p.stderr
    # A capture that does not hold the flow: named, with the file.
    (r / "capture.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
    (r / "tcpinfo.csv").write_text("flow,sport,t_lo_ns,t_hi_ns,cwnd,in_recovery\n")
    p = run("validate", "tcp-trace", str(r), "--json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    err = json.loads(p.stdout)["error"]
    assert "flows[0]" in err and "capture.pcap" in err
    # Not a pcap at all.
    (r / "capture.pcap").write_bytes(b"hello, this is not a capture file")
    p = run("validate", "tcp-trace", str(r))
    assert p.returncode == 2 and "capture.pcap" in p.stderr and "Traceback" not in p.stderr
    # A flow that is not kernel TCP.
    p = run("validate", "tcp-trace", str(r), "--flow", "3")
    assert p.returncode == 2 and "--flow" in p.stderr
    assert Path(r / "run.json").exists()
