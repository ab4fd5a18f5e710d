"""tcp flows on leoguard's own TCP in the emulator: `leoguard-transport` (docs/transport.md) runs the
simulator's sans-IO TCP, with any controller of its registry, over UDP between the two hosts, in place of
iperf3 and the kernel's TCP. A flow runs there when its `stack` is "leoguard", or when it names no stack
and its `cc` is one the emulator's kernel stack does not offer (satcp, startcp, hybla, pcc-allegro,
pcc-vivace: it runs cubic, bbr and reno). Its figures land in the same columns as an iperf3 flow's: goodput
and delivered bytes from the receiver, retransmissions (and RTOs, probes, DSACKs, undos, which iperf3 cannot
give) from the sender, and a per-interval `series` like the simulator's. A StarTCP flow (`cc = "startcp"`,
the scenario's `[startcp]` passed as `--startcp` to both ends) adds the simulator's `startcp` rows (the
sender's stalls) and `interruptions` rows (what the receiver detected)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leoguard import _core
from leoguard.errors import LeoguardError
from leoguard.scenario import Flow, Scenario
from leoguard.sections import STARTCP_WEIGHTS, Startcp

KERNEL_CC = {"cubic": "cubic", "bbr": "bbr", "reno": "reno", "newreno": "reno"}
"""Scenario congestion controls the kernel has (Linux's reno is NewReno with SACK)."""

HEADER_BYTES = 40 + 8 + 26
"""IPv6, UDP and the transport's data header (leoguard-wire `transport::DATA_HEADER_LEN`)."""

SERIES_SCHEMA = {
    "flow": "UInt32", "t_ns": "Int64", "cwnd_bytes": "UInt64", "in_flight_bytes": "UInt64", "srtt_ns": "UInt64",
    "acked_bytes": "UInt64", "retransmissions": "UInt64", "goodput_bps": "Float64",
}  # fmt: skip
"""Columns of `EmuResults.series`: the simulator's `series` (one row per flow and interval; `t_ns` in
model time, from the run's start)."""


def flow_stack(f: Flow) -> str:
    """The TCP a tcp flow runs on the emulator: "leoguard" or "kernel"."""
    if f.stack is not None:
        return f.stack
    return "kernel" if f.cc in KERNEL_CC else "leoguard"


def leoguard_flows(scenario: Scenario) -> list[int]:
    """The tcp flows that run leoguard's own TCP."""
    return [i for i, f in enumerate(scenario.flows) if f.kind == "tcp" and flow_stack(f) == "leoguard"]


def check_flow(scenario: Scenario, i: int, f: Flow, tunnelled: list[int]) -> None:
    """Field-named errors for a tcp flow the emulator cannot run on the stack it asks for."""
    if flow_stack(f) == "kernel":
        if f.cc == "startcp":
            raise LeoguardError(
                f'invalid flows[{i}].stack = "kernel" with cc = startcp: StarTCP\'s probes and handover '
                "predictions travel in leoguard's own TCP (leoguard-transport's option kind 1), which Linux's "
                'TCP does not have; use stack = "leoguard" (the default for startcp)'
            )
        if f.cc not in KERNEL_CC:
            raise LeoguardError(
                f"invalid flows[{i}].cc = {f.cc}: the kernel has cubic, bbr and reno (newreno maps to reno); "
                f'stack = "leoguard" runs leoguard\'s own TCP instead'
            )
        return
    if f.cc == "satcp" and scenario.topology is not None and scenario.topology.kind == "constellation":
        raise LeoguardError(
            f"invalid flows[{i}].cc = satcp: on a constellation the simulator tells SaTCP of every handover, and "
            "the emulator's user-space stack does not get those reports yet (it would run plain CUBIC)"
        )
    if scenario.emu.streams != 1:
        raise LeoguardError(
            f"invalid emu.streams = {scenario.emu.streams}: flows[{i}] runs leoguard's TCP (stack = "
            '"leoguard"), one connection per flow; parallel streams are iperf3\'s'
        )
    if i in tunnelled:
        raise LeoguardError(
            f"invalid flows[{i}]: [liquid] carries kernel TCP flows only; this one runs leoguard's TCP (stack = "
            '"leoguard")'
        )


def recovery_spec(scenario: Scenario) -> str:
    """The scenario's `[tcp]` loss-recovery switches as `--recovery` (the simulator's defaults without it)."""
    t = scenario.tcp
    if t is None:
        return "linux"
    switches = [(k, getattr(t, k)) for k in _core.TCP_SWITCHES]
    return ",".join([t.recovery] + [f"{k}={'on' if v else 'off'}" for k, v in switches if v is not None])


def startcp_spec(st: Startcp | None) -> str:
    """The scenario's `[startcp]` as `--startcp` (the same field names; `on`: every default). A learnt
    policy's weights file is passed by absolute path (the shipped policy without `weights`)."""
    if st is None:
        return "on"
    parts = []
    for k, v in st.model_dump(exclude_none=True).items():
        if k == "leads_ms":
            v = ":".join(f"{x:g}" for x in v)
        elif k == "weights":
            continue
        elif isinstance(v, float):
            v = f"{v:g}"
        parts.append(f"{k}={v}")
    if st.policy == "learnt":
        parts.append(f"weights={Path(st.weights or STARTCP_WEIGHTS).resolve()}")
    return ",".join(parts)


def receiver_args(exe: str, scenario: Scenario, f: Flow, addr: str, port: int, out: str) -> list[str]:
    """`leoguard-transport recv` for flow `f`, whose receiver listens on [addr]:port."""
    ms = max(1, round(scenario.sample_every_s * 1000))
    args = [
        exe, "recv", "--bind", f"[{addr}]:{port}", "--out", out, "--json-interval", str(ms),
        "--recovery", recovery_spec(scenario), "--timeout", f"{scenario.duration_s + 30:.3f}",
    ]  # fmt: skip
    if f.cc == "startcp":
        args += ["--startcp", startcp_spec(scenario.startcp)]
    return args


def sender_args(
    exe: str, scenario: Scenario, f: Flow, addr: str, port: int, run_s: float, mtu: int, tclass: int
) -> list[str]:
    """`leoguard-transport send` for flow `f`: `run_s` seconds of writing (or its bytes), segments that fill
    the hosts' `mtu`, giving up before the emulated network stops."""
    ms = max(1, round(scenario.sample_every_s * 1000))
    args = [
        exe, "send", "--to", f"[{addr}]:{port}", "--cc", f.cc, "--mss", str(mtu - HEADER_BYTES),
        "--json-interval", str(ms), "--recovery", recovery_spec(scenario),
        "--timeout", f"{max(0.5, scenario.duration_s - f.start_s - 0.3):.3f}",
    ]  # fmt: skip
    args += ["--bytes", str(f.bytes)] if f.bytes is not None else ["--seconds", f"{run_s:.3f}"]
    if f.rate_mbps is not None:
        args += ["--rate-mbps", f"{f.rate_mbps:g}"]
    if tclass:
        args += ["--tclass", str(tclass)]
    if f.cc == "startcp":
        args += ["--startcp", startcp_spec(scenario.startcp)]
    return args


def _lines(out: str) -> list[dict[str, Any]]:
    rows = []
    for ln in out.splitlines():
        try:
            rows.append(json.loads(ln))
        except ValueError:
            continue
    return rows


def _series_row(i: int, d: dict[str, Any], t0: int) -> dict[str, Any]:
    srtt = d.get("srtt_ms")
    return {
        "flow": i, "t_ns": d["t_mono_ns"] - t0, "cwnd_bytes": d["cwnd_bytes"], "in_flight_bytes": d["in_flight_bytes"],
        "srtt_ns": round(srtt * 1e6) if srtt is not None else 0, "acked_bytes": d["acked_bytes"],
        "retransmissions": d["retransmissions"], "goodput_bps": d["goodput_bps"],
    }  # fmt: skip


def flow_results(
    i: int, f: Flow, scenario: Scenario, sender: tuple[int | None, str, str], receiver_report: str | None, t0: int
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """A leoguard-stack flow's figures: the `flows` row fields, its `series` rows, and its raw reports."""
    rc, out, err = sender
    lines = _lines(out)
    summary = next((d for d in reversed(lines) if d.get("event") == "summary"), None)
    if summary is None:
        raise LeoguardError(f"flows[{i}]: leoguard-transport printed no summary (exit {rc}): {err.strip()[-500:]}")
    recv = json.loads(receiver_report) if receiver_report else None
    if recv is None:
        raise LeoguardError(f"flows[{i}]: leoguard-transport's receiver wrote no report")
    goodput = float(recv["goodput_bps"])
    omit = scenario.emu.omit_s
    first = recv.get("first_data_s")
    if omit > 0 and first is not None:
        # As iperf3 -O: the first omit_s seconds of the flow (slow start) are left out.
        end_s = first + recv["duration_s"]
        later = [p for p in recv["intervals"] if p["t_s"] - first >= omit and p["t_s"] < end_s]
        if later:
            p0 = later[0]
            goodput = (recv["bytes_delivered"] - p0["delivered_bytes"]) * 8 / max(1e-9, end_s - p0["t_s"])
    row = {
        "goodput_bps": goodput,
        "delivered_bytes": int(recv["bytes_delivered"]),
        "retransmissions": int(summary["retransmissions"]),
        "rtos": int(summary["rtos"]),
        "tlps": int(summary["tlps"]),
        "dsacks": int(summary["dsacks"]),
        "undos": int(summary["undos"]),
        "fct_s": float(summary["duration_s"]) if f.bytes is not None and summary["complete"] else None,
    }
    series = [_series_row(i, d, t0) for d in lines if d.get("event") == "interval"]
    tools = {"send": summary, "recv": {k: v for k, v in recv.items() if k != "intervals"}, "exit": rc}
    return row, series, tools


def startcp_rows(
    i: int, send: dict[str, Any], recv: dict[str, Any], t0: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A StarTCP flow's stalls (the simulator's `startcp` columns) and detected interruptions (its
    `interruptions` columns), in model time (ns since the data plane's origin `t0`, CLOCK_MONOTONIC)."""
    from leoguard import _core

    st_s, st_r = send.get("startcp") or {}, recv.get("startcp") or {}
    o_s, o_r = int(send["origin_mono_ns"]) - t0, int(recv["origin_mono_ns"]) - t0

    def at(o: int, x: int | None) -> int | None:
        return None if x is None else max(0, o + int(x))

    stalls = []
    for x in st_s.get("stalls") or []:
        row = {
            "flow": i, "predicted_ns": at(o_s, x["predicted_ns"]), "stall_start_ns": at(o_s, x["stall_start_ns"]),
            "stall_end_ns": at(o_s, x["stall_end_ns"]), "probes": x["probes"], "reason": x["reason"],
            "lead_ns": x["lead_ns"],
        }  # fmt: skip
        for name, v in zip(_core.STARTCP_FEATURES, x["state"], strict=True):
            row[f"state_{name}"] = v
        stalls.append(row)
    gaps = [
        {"flow": i, "start_ns": at(o_r, x["start_ns"]), "duration_ns": x["duration_ns"], "stalled": x["stalled"]}
        for x in st_r.get("interruptions") or []
    ]
    return stalls, gaps


def iperf3_received(server_out: str) -> list[float] | None:
    """What an iperf3 server (`-J`) received per reporting interval, Mbit/s, omitted and partial (< 0.5 s)
    intervals left out:
    the flow's delivered goodput second by second (the client's intervals count bytes written to the
    socket). None if the server printed no report."""
    try:
        rep = json.loads(server_out)
    except ValueError:
        return None
    out = []
    for iv in rep.get("intervals") or []:
        s = iv.get("sum") or {}
        # A last, partial interval (the test's end) is no second of goodput.
        if s.get("omitted") or float(s.get("seconds") or 0.0) < 0.5:
            continue
        out.append(round(float(s.get("bits_per_second", 0.0)) / 1e6, 3))
    return out


def iperf3_series(i: int, rep: dict[str, Any], start_ns: int) -> list[dict[str, Any]]:
    """An iperf3 flow's intervals as `series` rows (sender side: bytes written to the socket stand for
    `acked_bytes`, the kernel's cwnd and RTT of the first stream; in flight is not reported). `start_ns`:
    when the client started, in model time."""
    rows = []
    acked = retx = 0
    # iperf3 restarts its interval clock when the omitted seconds (-O) are over.
    omit_ns = round(float(((rep.get("start") or {}).get("test_start") or {}).get("omit", 0) or 0) * 1e9)
    for iv in rep.get("intervals") or []:
        s = iv.get("sum") or {}
        if s.get("omitted"):
            continue
        streams = iv.get("streams") or [{}]
        acked += int(s.get("bytes", 0))
        retx += int(s.get("retransmits", 0) or 0)
        rows.append(
            {
                "flow": i, "t_ns": start_ns + omit_ns + round(float(s.get("end", 0.0)) * 1e9),
                "cwnd_bytes": int(streams[0].get("snd_cwnd", 0) or 0), "in_flight_bytes": None,
                "srtt_ns": int(streams[0].get("rtt", 0) or 0) * 1000, "acked_bytes": acked, "retransmissions": retx,
                "goodput_bps": float(s.get("bits_per_second", 0.0)),
            }
        )  # fmt: skip
    return rows
