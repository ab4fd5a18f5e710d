"""LEOTP's baseline controllers in the simulator: TCP Hybla, PCC Allegro and PCC Vivace (docs/tcp.md,
"Congestion controllers"), by name in scenarios and the Python API, end to end on a single bottleneck."""

from __future__ import annotations

import pytest
from leoguard._core import CONGESTION_CONTROLS

from leoguard import LeoguardError
from leoguard.emu.transport import check_flow, flow_stack
from leoguard.scenario import from_dict
from leoguard.simulate import simulate

NEW = ("hybla", "pcc-allegro", "pcc-vivace")
PAYLOAD_MBPS = 20 * 1448 / 1500
"""What a 20 Mbit/s bottleneck carries as payload in 1500-byte packets."""


def bottleneck(cc: str, duration_s: float, delay_ms: float = 15.0, queue_bytes: int = 100_000) -> dict:
    """One flow over a 20 Mbit/s dumbbell bottleneck (1 Gbit/s, 1 ms access links), no random loss."""
    return {
        "name": f"baseline-{cc}", "duration_s": duration_s, "seed": 1,
        "topology": {"kind": "dumbbell", "pairs": 1, "bottleneck_mbps": 20, "bottleneck_delay_ms": delay_ms,
                     "access_mbps": 1000, "access_delay_ms": 1.0, "queue_bytes": queue_bytes},
        "flows": [{"kind": "tcp", "src": "s0", "dst": "r0", "cc": cc}],
    }  # fmt: skip


def goodput_mbps(d: dict) -> tuple[float, dict]:
    f = simulate(from_dict(d)).summary()["flows"][0]
    return f["goodput_bps"] / 1e6, f


def test_the_registry_knows_them():
    for name in NEW:
        assert name in CONGESTION_CONTROLS


@pytest.mark.parametrize("cc", NEW)
def test_each_fills_a_lossless_bottleneck(cc):
    # Measured (6 s, RTT 34 ms, 100 kB queue): hybla 19.09 (98.9 %), pcc-allegro 16.57 (85.8 %),
    # pcc-vivace 16.70 Mbit/s (86.5 %); NewReno and CUBIC 19.05. PCC starts lower (2 MSS per RTT,
    # one initial window per 100 ms) and probes below the rate it settles at.
    g, f = goodput_mbps(bottleneck(cc, 6.0))
    assert g > 0.8 * PAYLOAD_MBPS, (cc, g)
    assert g <= PAYLOAD_MBPS + 0.01
    assert f["endpoint_loss"] == 0.0


def test_vivace_keeps_the_queue_empty_where_allegro_fills_it():
    # Vivace's latency term stops it as the RTT starts to grow: no loss and the one-way delay of an
    # empty path (2 x 1 ms + 15 ms + serialisation); Allegro, loss-based, runs the queue into drops.
    _, viv = goodput_mbps(bottleneck("pcc-vivace", 6.0))
    _, alg = goodput_mbps(bottleneck("pcc-allegro", 6.0))
    assert viv["retransmissions"] < 20, viv
    assert viv["owd_ms"]["p50"] < 17.0 + 1.0, viv["owd_ms"]
    assert alg["retransmissions"] > 500, alg
    assert alg["owd_ms"]["p50"] > 17.0 + 20.0, alg["owd_ms"]


def test_hybla_grows_faster_than_newreno_on_a_long_rtt_path():
    # RTT ~ 304 ms: rho = 12. Measured over the first 2 s: Hybla 7.80, NewReno 3.81 Mbit/s (at 2.5 s,
    # with NewReno near the 760 kB BDP: 9.82 vs 6.90).
    d = {cc: goodput_mbps(bottleneck(cc, 2.0, delay_ms=150.0, queue_bytes=500_000))[0] for cc in ("hybla", "newreno")}
    assert d["hybla"] > 1.5 * d["newreno"], d
    # On a short path (rho = 1 to 2) it is no more than a little ahead.
    s = {cc: goodput_mbps(bottleneck(cc, 2.5, delay_ms=5.0))[0] for cc in ("hybla", "newreno")}
    assert s["hybla"] < 1.15 * s["newreno"], s


def test_bad_names_are_refused_naming_the_field():
    with pytest.raises(LeoguardError, match=r"flows.0.cc: .*'pcc_vivace'"):
        from_dict(bottleneck("pcc_vivace", 1.0))
    d = bottleneck("cubic", 1.0)
    d["startcp"] = {"base_cc": "hybla"}
    assert from_dict(d).startcp.base_cc == "hybla"
    d["startcp"] = {"base_cc": "pcc"}
    with pytest.raises(LeoguardError, match=r"startcp.base_cc"):
        from_dict(d)


@pytest.mark.parametrize("cc", NEW)
def test_the_emulator_runs_them_on_leoguards_stack_and_refuses_the_kernels(cc):
    sc = from_dict(bottleneck(cc, 1.0))
    f = sc.flows[0]
    assert flow_stack(f) == "leoguard"
    check_flow(sc, 0, f, [])
    with pytest.raises(LeoguardError, match=rf"flows\[0\]\.cc = {cc}: the kernel has cubic, bbr and reno"):
        check_flow(sc, 0, f.model_copy(update={"stack": "kernel"}), [])
