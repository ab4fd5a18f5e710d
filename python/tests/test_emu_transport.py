"""leoguard's own TCP on the emulator (docs/transport.md): a tcp flow with `stack = "leoguard"` (or a `cc`
only leoguard has) runs `leoguard-transport` between the two hosts instead of iperf3, the simulator's
sans-IO TCP over UDP across the emulated links, and its figures land in the same `flows` columns and in
`series`. Needs root, `ip netns` and the binary (`make build`, or target/release from `cargo build
--release -p leoguard-transport`); it fails, never skips, without them. Bounds are generous: a
loaded 2-core machine keeps them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leoguard.emu import emulate
from leoguard.emu.hosts import NETNS_DIR, PREFIX, REGISTRY
from leoguard.emu.transport import check_flow, flow_stack
from leoguard.errors import LeoguardError
from leoguard.scenario import from_dict, load_scenario
from leoguard.tunnel import alive, binary

PAYLOAD = 20e6 * (1500 - 74) / 1500
"""What a 20 Mbit/s link carries as payload in 1500-byte datagrams (IPv6 40, UDP 8, transport 26)."""


def _require() -> None:
    if os.geteuid() != 0:
        pytest.fail("the emulator tests need root (network namespaces, TUN devices)")
    try:
        binary("leoguard-transport")
    except LeoguardError as e:
        pytest.fail(str(e))


def _leftovers() -> list[str]:
    """Emulator namespaces no other live run holds (another process's tests may run one meanwhile)."""
    others: set[str] = set()
    for f in REGISTRY.glob("*.json") if REGISTRY.exists() else []:
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        pid = int(info.get("pid", 0))
        if pid != os.getpid() and alive(pid):
            others.update(info.get("namespaces", []))
    names = [p.name for p in NETNS_DIR.glob(PREFIX + "*")] if NETNS_DIR.exists() else []
    return sorted(n for n in names if n not in others)


def _chain(flow: dict, duration_s: float = 8.0, loss: float = 0.0, **kw) -> dict:
    links = []
    for i in range(3):
        link: dict = {"a": i, "b": i + 1, "rate_mbps": 20, "delay_ms": 10, "queue_packets": 100}
        if loss:
            link["loss"] = {"model": "bernoulli", "p": loss}
        links.append(link)
    return {"name": "emu-transport", "duration_s": duration_s, "links": links, "flows": [flow], **kw}


def test_bbr_on_the_leoguard_stack_fills_a_three_hop_path():
    """leoguard's BBR over 3 x 20 Mbit/s (60 ms RTT) for 8 s: the receiver gets every byte the sender
    wrote, checked byte for byte; goodput is above 40 % and at most what the links carry as payload; the
    per-interval series covers the flow; the data plane carried it as UDP and accounts for every drop."""
    _require()
    sc = from_dict(_chain({"kind": "tcp", "src": 0, "dst": 3, "cc": "bbr", "stack": "leoguard"}))
    r = emulate(sc)
    f = r.flows.row(0, named=True)
    assert f["stack"] == "leoguard" and f["cc"] == "bbr"
    assert 0.4 * PAYLOAD < f["goodput_bps"] <= 1.02 * PAYLOAD, f
    send, recv = r.tools["transport_0"]["send"], r.tools["transport_0"]["recv"]
    assert send["complete"] and recv["complete"], (send, recv)
    assert recv["bytes_delivered"] == send["bytes_written"] == f["delivered_bytes"]
    assert recv["counters"]["corrupt"] == 0 and recv["counters"]["malformed"] == 0
    assert f["retransmissions"] == send["retransmissions"] and f["rtos"] is not None
    # The series: the simulator's columns, every sample_every_s (0.1 s) over the sending time.
    s = r.series.filter(r.series["flow"] == 0)
    assert set(r.series.columns) >= {"t_ns", "cwnd_bytes", "in_flight_bytes", "srtt_ns", "acked_bytes", "goodput_bps"}
    assert len(s) > 20, len(s)
    assert s["t_ns"].is_sorted() and s["acked_bytes"].is_sorted()
    assert s["acked_bytes"].max() <= f["delivered_bytes"]
    # (Per-interval goodput counts cumulative ACKs, so it spikes when a repaired hole releases SACKed
    # data; its mean over the flow is the flow's.)
    mean = s["goodput_bps"].mean()
    assert 0.5 * f["goodput_bps"] < mean < 1.5 * f["goodput_bps"], (mean, f["goodput_bps"])
    rtt_ms = s.filter(s["srtt_ns"] > 0)["srtt_ns"].median() / 1e6
    assert 55 < rtt_ms < 400, rtt_ms
    # The data plane saw the flow's datagrams (UDP) and every drop has a cause.
    assert r.emulator["flows"][0]["delivered"] > 1000
    assert r.emulator["drops_unexplained"] == 0
    assert _leftovers() == []


def test_a_fixed_transfer_across_loss_completes_with_retransmissions():
    """400 kB with leoguard's NewReno across three links with 1 % loss each: every byte arrives, the
    sender resends what the links lost, and the transfer's completion time is reported."""
    _require()
    flow = {"kind": "tcp", "src": 0, "dst": 3, "cc": "newreno", "stack": "leoguard", "bytes": 400_000}
    r = emulate(from_dict(_chain(flow, duration_s=6.0, loss=0.01)))
    f = r.flows.row(0, named=True)
    assert f["delivered_bytes"] == 400_000, f
    assert f["retransmissions"] > 0 and f["fct_s"] is not None and 0.1 < f["fct_s"] < 5.0, f
    assert r.emulator["drops"].get("loss", 0) > 0
    assert r.tools["transport_0"]["recv"]["counters"]["corrupt"] == 0
    assert _leftovers() == []


def test_the_stack_follows_the_controller_unless_named():
    def flow(**kw):
        return from_dict(_chain({"kind": "tcp", "src": 0, "dst": 3, **kw})).flows[0]

    assert flow_stack(flow(cc="cubic")) == "kernel"
    assert flow_stack(flow(cc="satcp")) == "leoguard"
    assert flow_stack(flow(cc="cubic", stack="leoguard")) == "leoguard"
    # The simulator ignores the field: the same scenario gives it the same spec either way.
    a = from_dict(_chain({"kind": "tcp", "src": 0, "dst": 3, "cc": "bbr"})).to_core()
    b = from_dict(_chain({"kind": "tcp", "src": 0, "dst": 3, "cc": "bbr", "stack": "leoguard"})).to_core()
    assert a == b


@pytest.mark.parametrize(
    ("flow", "extra", "words"),
    [
        ({"cc": "satcp", "stack": "kernel"}, {}, "flows[0].cc = satcp"),
        ({"cc": "bbr", "stack": "leoguard"}, {"emu": {"streams": 2}}, "emu.streams = 2"),
        ({"cc": "bbr", "stack": "leoguard"}, {"liquid": {}}, "flows[0]"),
    ],
)
def test_what_the_leoguard_stack_cannot_run_is_named(flow, extra, words):
    sc = from_dict(_chain({"kind": "tcp", "src": 0, "dst": 3, **flow}, **extra))
    with pytest.raises(LeoguardError, match=words.replace("[", r"\[").replace("]", r"\]")):
        emulate(sc)
    assert _leftovers() == []


def test_stack_is_for_tcp_flows_only():
    with pytest.raises(LeoguardError, match="stack"):
        from_dict(_chain({"kind": "cbr", "src": 0, "dst": 3, "rate_mbps": 1, "stack": "leoguard"}))


def test_satcp_on_a_constellation_is_refused_until_its_handover_reports_reach_the_stack():
    sc = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "starlink-constellation.toml")
    flow = sc.flows[0].model_copy(update={"cc": "satcp"})
    with pytest.raises(LeoguardError, match=r"flows\[0\]\.cc = satcp"):
        check_flow(sc, 0, flow, [])
    check_flow(sc, 0, sc.flows[0].model_copy(update={"stack": "leoguard"}), [])  # bbr is fine
