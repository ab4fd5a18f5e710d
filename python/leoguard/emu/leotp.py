"""LEOTP on the real-time emulator (docs/leotp.md, "On real packets").

`leoguard-transport leotp-serve` (leoguard-proto's sans-IO LEOTP producer over UDP) runs in the producer's
host and `leotp-fetch` (the consumer) in the consumer's; the Data and Interests cross the emulated links
as UDP datagrams. With mid nodes (the default), the data plane runs a LEOTP mid node where the simulator
would put one (the scenario's `[leotp]` placement and variant): the simulator's own mid-node code
(leoguard-net's `LeotpMid`, payloads carried) takes the flow's datagrams in at those nodes, caches the
Data, detects holes, re-requests them upstream and paces with hop-by-hop congestion control, and what
it sends leaves as real datagrams with the flow's addresses (crates/leoguard-emu/src/leotp.rs). Without
(`mid_nodes=False`), the nodes only forward: LEOTP end to end (the consumer's controller against the
producer's token bucket; lost Data is recovered by the consumer's Interest timeouts). Both ends run at
SCHED_FIFO priority, as the emulator's UDP probe: LEOTP's pacing and token bucket tick every 1 ms and its
congestion signal is a few ms of extra delay, so a wake-up delayed by other work on the hosts' CPU reads
as congestion (the kernel's TCP runs in softirq context, ahead of any user task, anyway).

```python
from leoguard.emu.leotp import emulate_leotp, emu_loss_sweep
run = emulate_leotp(scenario, producer=0, consumer=8, seconds=20)   # run.leotp: goodput, OWD, ...
rows = emu_loss_sweep([0, 0.1, 1], duration_s=25)                    # emulator rows beside the simulator's
```
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from leoguard.emu.hosts import v4_addr
from leoguard.emu.run import AppHosts, EmuResults, emulate
from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario, from_dict

PRODUCER_PORT = 6100
CONSUMER_PORT = 6101
MAX_BYTES = 2**32 - 1
"""LEOTP's offsets are 32-bit."""

PAPER_LOSS_SWEEP = {
    # REFERENCE.md "LEOTP", Fig 12: mean throughput (Mbit/s) per per-link loss (%); the figure gives no OWD.
    "leotp": {0.0: 18.4, 0.1: 18.5, 1.0: 18.2},
    "bbr": {0.0: 18.6, 0.1: 18.1, 1.0: 16.3},
    "pcc": {0.0: 18.1, 0.1: 18.1, 1.0: 14.0},
    "hybla": {0.0: 19.0, 0.1: 4.9, 1.0: 1.3},
    "cubic": {0.0: 19.0, 0.1: 1.3, 1.0: 0.3},
}


@dataclass
class LeotpEndpoints:
    """The producer and consumer as an app of `leoguard.emu.run.emulate` (its `App` protocol)."""

    producer: int
    consumer: int
    seconds: float | None
    size: int | None
    duration_s: float
    mid_nodes: bool = True
    name: str = "leotp"

    def __post_init__(self) -> None:
        self._serve: Any = None
        self._fetch: Any = None
        self._wdir: Any = None
        self._exe = ""

    def hosts(self) -> list[int]:
        return [self.producer, self.consumer]

    def account(self) -> dict[str, int]:
        # The data direction: Data from the producer to the consumer's fixed port; with mid nodes, the
        # data plane's LEOTP mid nodes take the flow's datagrams in where the simulator would put them.
        return {"src": self.producer, "dst": self.consumer, "proto": 17, "port": CONSUMER_PORT, "leotp": self.mid_nodes}

    def start_servers(self, hosts: AppHosts) -> None:
        from leoguard.tunnel import binary

        self._exe = str(binary("leoguard-transport"))
        self._wdir = hosts.wdir
        args = [
            self._exe, "leotp-serve", "--bind", f"{v4_addr(self.producer)}:{PRODUCER_PORT}",
            "--out", str(hosts.wdir / "leotp-serve.json"), "--timeout", f"{self.duration_s + 30:.3f}",
        ]  # fmt: skip
        if self.size is not None:
            args += ["--bytes", str(self.size)]
        self._serve = hosts.spawn(self.producer, args, "leotp-serve", realtime=True)
        hosts.wait_bound(self._serve, PRODUCER_PORT)

    def start_clients(self, hosts: AppHosts, t0_ns: int) -> None:
        while (now := time.monotonic_ns()) < t0_ns:
            time.sleep(min(0.05, (t0_ns - now) / 1e9))
        args = [
            self._exe, "leotp-fetch", "--from", f"{v4_addr(self.producer)}:{PRODUCER_PORT}",
            "--bind", f"{v4_addr(self.consumer)}:{CONSUMER_PORT}", "--out", str(hosts.wdir / "leotp-fetch.json"),
        ]  # fmt: skip
        if self.seconds is not None:
            args += ["--seconds", f"{self.seconds:.3f}"]
        else:
            args += ["--bytes", str(self.size), "--timeout", f"{max(0.5, self.duration_s - 0.5):.3f}"]
        self._fetch = hosts.spawn(self.consumer, args, "leotp-fetch", realtime=True)

    def finish(self, timeout_s: float) -> dict[str, Any]:
        # The consumer ends by itself (its seconds or its timeout are within the run); the producer
        # serves until told to stop.
        fetch = self._fetch.finish(timeout_s) if self._fetch is not None else (None, "", "")
        serve = (None, "", "")
        if self._serve is not None:
            self._serve.stop()
            serve = self._serve.finish(5.0)
        return {"fetch": fetch, "serve": serve}

    def results(self, raw: dict[str, Any], dataplane_flow: dict[str, Any]) -> dict[str, Any]:
        return leotp_results(raw, dataplane_flow)


def _summary(out: str) -> dict[str, Any] | None:
    for ln in reversed(out.splitlines()):
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("event") == "summary":
            return d
    return None


def leotp_results(raw: dict[str, Any], dpf: dict[str, Any]) -> dict[str, Any]:
    """The run's LEOTP figures: the consumer's (goodput and bytes, every byte checked; timeouts), the
    producer's counters, and the data plane's view of the Data packets (one-way delay, network loss)."""
    rc, out, err = raw["fetch"]
    fetch = _summary(out)
    if fetch is None:
        raise LeoguardError(f"leotp-fetch printed no summary (exit {rc}): {err.strip()[-500:]}")
    if not fetch["content_ok"]:
        raise LeoguardError(
            f"leotp-fetch received wrong content: {fetch['bad_bytes']} bytes, the first at offset "
            f"{fetch['first_bad_offset']}"
        )
    serve = _summary(raw["serve"][1]) or {"error": raw["serve"][2].strip()[-500:], "exit": raw["serve"][0]}
    sent, delivered = dpf["sent"], dpf["delivered"]
    return {
        "goodput_bps": float(fetch["goodput_bps"]),
        "bytes_delivered": int(fetch["bytes_delivered"]),
        "complete": bool(fetch["complete"]),
        "content_ok": bool(fetch["content_ok"]),
        "duration_s": float(fetch["duration_s"]),
        "retransmissions": int(fetch["retransmissions"]),
        "timeouts": int(fetch["timeouts"]),
        "owd_ms_p50": dpf["owd_ms"]["p50"],
        "owd_ms_p99": dpf["owd_ms"]["p99"],
        "network_loss": round(1.0 - delivered / sent, 6) if sent else 0.0,
        "rtt_from_ts_ms": fetch["rtt_from_ts_ms"],
        "exit": rc,
        "fetch": fetch,
        "serve": serve,
        "dataplane": dpf,
    }


@dataclass
class LeotpRun:
    """An emulated LEOTP run: `leotp` (see `leotp_results`) and the emulator's own results."""

    leotp: dict[str, Any]
    emu: EmuResults


def emulate_leotp(
    scenario: Scenario,
    producer: int,
    consumer: int,
    *,
    seconds: float | None = None,
    size: int | None = None,
    keep_flows: bool = False,
    mid_nodes: bool = True,
    base_dir: Any = None,
    work: Any = None,
) -> LeotpRun:
    """Runs a LEOTP producer in `producer`'s host and a consumer in `consumer`'s over the scenario's
    emulated network (explicit `[[links]]`): the consumer fetches `size` bytes, or as much as `seconds`
    allow. With `mid_nodes`, the data plane runs LEOTP mid nodes where the simulator would (the
    scenario's `[leotp]`: `mid_nodes` placement, `variant` or switches, every parameter); without, its
    nodes only forward (end to end). The scenario's own flows are left out unless `keep_flows` (then they
    run alongside as cross traffic)."""
    if scenario.topology is not None:
        raise LeoguardError(
            f"invalid topology.kind = {scenario.topology.kind}: emulate_leotp runs on explicit [[links]] "
            "(the hosts of other topologies are attached by the scenario's flows)"
        )
    nodes = {n for lk in scenario.links for n in (lk.a, lk.b)}
    for field_name, n in (("producer", producer), ("consumer", consumer)):
        if n not in nodes:
            raise LeoguardError(f"invalid {field_name} = {n}: not a node of the scenario's links ({sorted(nodes)})")
    if producer == consumer:
        raise LeoguardError(f"invalid consumer = {consumer}: the same node as the producer")
    if (seconds is None) == (size is None):
        raise LeoguardError("emulate_leotp: give seconds or size, one of them")
    if size is not None and not 0 < size <= MAX_BYTES:
        raise LeoguardError(f"invalid size = {size}: must be in 1..={MAX_BYTES} bytes (LEOTP's 32-bit offsets)")
    if seconds is not None and not 0.5 <= seconds <= scenario.duration_s - 0.5:
        raise LeoguardError(
            f"invalid seconds = {seconds}: must be in [0.5, duration_s - 0.5] (duration_s = {scenario.duration_s})"
        )
    app = LeotpEndpoints(producer, consumer, seconds, size, scenario.duration_s, mid_nodes)
    run_scenario = scenario if keep_flows else scenario.model_copy(update={"flows": []})
    res = emulate(run_scenario, base_dir=base_dir, work=work, apps=[app])
    out = res.apps[app.name]
    mid = res.emulator.get("leotp")
    out["mid"] = mid
    if mid is not None:
        # The mid nodes take the producer's Data in and send their own (cache answers included): the
        # consumer's Data packets are not the producer's, so sent against delivered is no loss rate.
        out["network_loss"] = None
    return LeotpRun(out, res)


def loss_sweep_scenario(
    loss_pct: float, duration_s: float, cc: str = "cubic", seed: int = 1, leotp: dict[str, Any] | None = None
) -> Scenario:
    """The loss sweep's chain (REFERENCE.md "LEOTP", Fig 12): consumer - GS - 5 satellites - GS - producer,
    8 links of 20 Mbit/s and 20 ms, Bernoulli loss `loss_pct` % on the 6 middle ones in the data direction
    (node 0 -> 8, as the paper's netem), queues of the scenario default (1 MB); one bulk kernel TCP flow
    0 -> 8 with `cc` (the TCP rows; the LEOTP rows leave it out and run the producer in node 0 and the
    consumer in node 8; `cc="leotp"` makes it a LEOTP flow, for the simulator). `leotp` is the scenario's
    `[leotp]` section (mid-node placement, variant, parameters)."""
    links = []
    for i in range(8):
        lk: dict[str, Any] = {"a": i, "b": i + 1, "rate_mbps": 20, "delay_ms": 20}
        if 1 <= i <= 6 and loss_pct > 0:
            lk["loss"] = {"model": "bernoulli", "p": loss_pct / 100}
        links.append(lk)
    flow: dict[str, Any] = (
        {"kind": "leotp", "src": 0, "dst": 8} if cc == "leotp" else {"kind": "tcp", "src": 0, "dst": 8, "cc": cc}
    )
    return from_dict(
        {
            "name": f"leotp-loss-sweep-{loss_pct:g}",
            "duration_s": duration_s,
            "seed": seed,
            "links": links,
            "flows": [flow],
            # iperf3's closing exchange of results crosses the lossy links too (up to 5.9 % of its
            # messages lost at 1 %, each loss a timeout of about 0.9 s at this 320 ms RTT): senders stop
            # 3 s before the end, not 1, so it finishes while the network runs (the emulator only).
            "emu": {"tail_s": 3.0},
            **({"leotp": leotp} if leotp is not None else {}),
        }
    )


def _row(
    engine: str, scheme: str, variant: str, loss_pct: float, mbps: float | None, owd: float | None, **extra: Any
) -> dict[str, Any]:
    return {
        "experiment": "loss-sweep", "engine": engine, "scheme": scheme, "variant": variant, "pair": None,
        "loss_pct": loss_pct, "throughput_mbps": None if mbps is None else round(mbps, 3),
        "owd_ms": None if owd is None else round(owd, 2),
        "paper_throughput_mbps": PAPER_LOSS_SWEEP.get(scheme, {}).get(float(loss_pct)), "paper_owd_ms": None,
        **extra,
    }  # fmt: skip


#: The emulator's loss-sweep schemes: (row scheme, row variant).
SWEEP_SCHEMES: dict[str, tuple[str, str]] = {
    "leotp": ("leotp", "A"),
    "leotp-e2e": ("leotp", "e2e"),
    "cubic": ("cubic", "kernel"),
    "bbr": ("bbr", "kernel"),
}


def _other_runs() -> int:
    """Emulator runs of other processes that are alive (their data planes would share this one's CPU)."""
    from leoguard.emu.hosts import REGISTRY
    from leoguard.tunnel import alive

    n = 0
    for f in REGISTRY.glob("*.json") if REGISTRY.exists() else []:
        try:
            pid = int(json.loads(f.read_text()).get("pid", 0))
        except (OSError, ValueError):
            continue
        n += pid != os.getpid() and alive(pid)
    return n


def _wait_alone(limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while _other_runs() and time.monotonic() < deadline:
        time.sleep(1.0)


def _sweep_run(scheme: str, loss: float, duration_s: float, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    if scheme.startswith("leotp"):
        sc = loss_sweep_scenario(loss, duration_s, seed=seed)
        run = emulate_leotp(sc, producer=0, consumer=8, seconds=duration_s - 1.0, mid_nodes=scheme == "leotp")
        return run.leotp, run.emu.emulator
    res = emulate(loss_sweep_scenario(loss, duration_s, cc=scheme, seed=seed))
    return res.flows.row(0, named=True), res.emulator


def _sim_row(scheme: str, loss: float, duration_s: float, seed: int) -> dict[str, Any]:
    """The simulator on the emulator run's own chain: LEOTP (variant A, or D for end to end: its mid nodes
    then only forward) for the consumer's `duration_s - 1` s, leoguard's CUBIC and BBR models for
    `duration_s`."""
    from leoguard.simulate import simulate

    name, variant = SWEEP_SCHEMES[scheme]
    if name == "leotp":
        sc = loss_sweep_scenario(
            loss, duration_s - 1.0, cc="leotp", seed=seed, leotp={"variant": "A" if variant == "A" else "D"}
        )
    else:
        sc = loss_sweep_scenario(loss, duration_s, cc=name, seed=seed)
    f = simulate(sc).flows.row(0, named=True)
    row_variant = variant if name == "leotp" else "model"
    return _row("sim", name, row_variant, loss, f["goodput_bps"] / 1e6, f["owd_ms_p50"],
                retransmissions=f["retransmissions"])  # fmt: skip


def emu_loss_sweep(
    losses: list[float] | tuple[float, ...] = (0.0, 0.1, 1.0),
    duration_s: float = 25.0,
    schemes: tuple[str, ...] = ("leotp", "cubic", "bbr"),
    seed: int = 1,
    retries: int = 2,
    wait_alone_s: float = 600.0,
    with_sim: bool = True,
) -> list[dict[str, Any]]:
    """The loss sweep's emulator rows: per loss (%, per middle link) and scheme, one run of `duration_s`.
    `schemes`: "leotp" (mid nodes in the data plane on every node between the ends, variant A: row
    variant "A"), "leotp-e2e" (no mid nodes, the nodes only forward: variant "e2e"), both with the
    consumer fetching for `duration_s - 1` s; kernel CUBIC and BBR through iperf3 ("cubic", "bbr": variant
    "kernel"). Throughput: bytes delivered over the sending time, slow start included (the paper averages
    120 s); OWD: the data plane's median one-way delay of the data packets (LEOTP's Data, TCP's segments),
    network only. Each run first waits (up to `wait_alone_s`) for other processes' emulator runs to end,
    since two data planes on one CPU cannot both keep real time; a run that did not keep real time, or
    failed, is run again up to `retries` times. Rows carry `realtime_ok`, `attempts`, `retransmissions`
    and `timing_error_p99_us` (and `error` when every attempt failed). With `with_sim`, each emulator row
    is followed by the simulator's on the same chain, seed and duration (engine "sim": LEOTP variant A or
    D, leoguard's CUBIC and BBR models: variant "model")."""
    for scheme in schemes:
        if scheme not in SWEEP_SCHEMES:
            raise LeoguardError(f"invalid scheme {scheme!r}: the emulator's loss sweep runs {', '.join(SWEEP_SCHEMES)}")
    rows = []
    for loss in losses:
        for scheme in schemes:
            name, variant = SWEEP_SCHEMES[scheme]
            got: tuple[dict[str, Any], dict[str, Any]] | None = None
            error = None
            attempts = 0
            while attempts <= retries:
                attempts += 1
                _wait_alone(wait_alone_s)
                try:
                    got = _sweep_run(scheme, loss, duration_s, seed)
                except LeoguardError as e:
                    error = str(e)
                    continue
                if got[1]["realtime_ok"]:
                    break
            if got is None:
                rows.append(_row("emu", name, variant, loss, None, None, attempts=attempts, error=error))
            else:
                r, emu_info = got
                rows.append(
                    _row(
                        "emu", name, variant, loss, r["goodput_bps"] / 1e6, r["owd_ms_p50"],
                        retransmissions=r["retransmissions"], realtime_ok=emu_info["realtime_ok"],
                        attempts=attempts, timing_error_p99_us=emu_info["timing_error_us"]["p99"],
                    )
                )  # fmt: skip
            if with_sim:
                rows.append(_sim_row(scheme, loss, duration_s, seed))
    return rows
