"""StarTCP on real packets (docs/startcp.md, "On real packets"): on the emulator's two-path topology
(two 40 Mbit/s paths of 100 ms RTT, a switch every 15 s with both paths down for 100 ms), a StarTCP flow
runs `leoguard-transport` between the two hosts, the simulator's sans-IO code with its probes and the
receiver's predictions and recovery notices in the transport's option kind 1. The run lasts until just
after the third handover (the receiver needs two handovers' gaps at one phase, `min_events = 2`, before
it predicts), so it takes about 50 s of real time per scheme. Needs root, `ip netns` and the release
binary; it fails, never skips, without them, and fails (does not pass on distorted figures) when the
emulator could not keep real time."""

from __future__ import annotations

import os

import pytest

from leoguard.emu import emulate
from leoguard.errors import LeoguardError
from leoguard.reproduce.startcp import emu_rows_of, two_path_emu
from leoguard.scenario import from_dict
from leoguard.tunnel import binary

DURATION_S = 46.5
"""Handovers at 15, 30 and 45 s (the run lasts 2 s longer, `EMU_TAIL_S`, so the flow sends through the
third one's whole second)."""


def _require() -> None:
    if os.geteuid() != 0:
        pytest.fail("the emulator tests need root (network namespaces, TUN devices)")
    try:
        binary("leoguard-transport")
    except LeoguardError as e:
        pytest.fail(str(e))


def _realtime(r) -> None:
    e = r.emulator
    assert e["realtime_ok"], f"the emulator did not keep real time (load?): {e['timing_error_us']}"


def test_startcp_stalls_probes_resumes_and_loses_less_than_bbr_on_real_packets():
    """StarTCP's sender stalls before the third handover, sends probes across it and resumes on the
    receiver's recovery notice, having lost fewer packets in that handover's second than leoguard's BBR
    on the same emulated path (both on leoguard-transport)."""
    _require()
    star = emulate(two_path_emu("startcp", DURATION_S))
    _realtime(star)
    send, recv = star.tools["transport_0"]["send"], star.tools["transport_0"]["recv"]
    assert send["complete"] and recv["bytes_delivered"] == send["bytes_written"], (send, recv)
    assert recv["counters"]["corrupt"] == 0 and recv["counters"]["malformed"] == 0
    # The receiver's ACKs carried its predictions; the sender's probes reached the receiver.
    assert send["counters"]["startcp_signals"] > 0 and recv["counters"]["probes"] > 0
    # The handovers the receiver saw: a gap starting within 150 ms of each (model time).
    gaps = star.interruptions
    for h in (15.0, 30.0, 45.0):
        near = gaps.filter(((gaps["start_ns"].cast(float) / 1e9) - h).abs() < 0.15)
        assert len(near) >= 1, (h, gaps)
    stalls = star.startcp
    third = stalls.filter(((stalls["predicted_ns"].cast(float) / 1e9) - 45.0).abs() < 1.0)
    assert len(third) == 1, stalls
    s = third.row(0, named=True)
    assert s["stall_start_ns"] < 45e9, s  # stalled before the handover
    assert s["probes"] >= 50, s  # a probe every 1 ms across the 100 ms interruption
    assert s["reason"] == "notice", s  # resumed on the receiver's recovery notice
    assert 45.1e9 < s["stall_end_ns"] < 45.1e9 + 0.3e9, s  # after the link came back, within ~2 RTTs
    assert gaps.filter(gaps["stalled"]).height >= 1  # the receiver saw the gap begin with a probe

    bbr = emulate(two_path_emu("bbr", DURATION_S))
    _realtime(bbr)
    lost = {
        name: next(x for x in emu_rows_of(r, "two-path", name) if x["t_s"] == 45.0)
        for name, r in (("startcp", star), ("bbr", bbr))
    }
    # BBR loses what was in flight on the path that went down; StarTCP had stopped sending.
    assert lost["startcp"]["lost_packets"] < lost["bbr"]["lost_packets"], lost
    assert lost["bbr"]["lost_packets"] > 50, lost


def test_startcp_on_the_kernel_stack_is_refused_naming_the_field():
    sc = from_dict(
        {
            "name": "startcp-kernel",
            "duration_s": 5.0,
            "links": [{"a": 0, "b": 1, "rate_mbps": 10, "delay_ms": 10}],
            "flows": [{"kind": "tcp", "src": 0, "dst": 1, "cc": "startcp", "stack": "kernel"}],
        }
    )
    with pytest.raises(LeoguardError, match=r'flows\[0\]\.stack = "kernel" with cc = startcp'):
        emulate(sc)
