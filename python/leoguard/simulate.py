"""Running scenarios on the packet simulator: `simulate(scenario) -> Results` with polars DataFrames."""

from __future__ import annotations

import io
import json
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from leoguard import _core
from leoguard.errors import LeoguardError, make_dir
from leoguard.scenario import Scenario, load_scenario


def web_summary(web: pl.DataFrame) -> list[dict[str, Any]]:
    """Per web flow of a `web` table: loads started and finished, mean and median page load time and
    Speed Index (finished loads), and the retransmissions when the table has them (the simulator's)."""
    extra = [pl.col("retransmissions").sum()] if "retransmissions" in web.columns else []
    g = web.group_by("flow", maintain_order=True).agg(
        pl.len().alias("loads"),
        pl.col("plt_s").count().alias("finished"),
        pl.col("plt_s").mean().alias("plt_mean_s"),
        pl.col("plt_s").median().alias("plt_median_s"),
        pl.col("speed_index_s").mean().alias("speed_index_mean_s"),
        pl.col("speed_index_s").median().alias("speed_index_median_s"),
        *extra,
    )
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in g.iter_rows(named=True)]


def lossy_seconds_table(links: list[tuple[int, int, list | None]]) -> pl.DataFrame:
    """The lossy seconds of each link's per-second loss model (`starlink`), one row per link and lossy
    second: from_node, to_node, second, rate. Drawn from streams keyed by (seed, link, second), so the
    table is the same for any traffic, scheme or engine (docs/loss-models.md, "Common random numbers")."""
    rows = [(a, b, int(s), float(r)) for a, b, secs in links for s, r in (secs or [])]
    schema = {"from_node": pl.UInt32, "to_node": pl.UInt32, "second": pl.UInt64, "rate": pl.Float64}
    return pl.DataFrame(rows, schema=schema, orient="row")


def loss_process(table: pl.DataFrame) -> dict[str, Any]:
    """A run's loss process in brief: links with per-second models, lossy seconds, and a digest of the
    whole table, equal between two runs exactly when they drew the same lossy seconds and rates."""
    import hashlib

    t = table.sort("from_node", "to_node", "second")
    text = ";".join(f"{a}>{b}:{s}:{r:.17g}" for a, b, s, r in t.iter_rows())
    return {
        "links": t.select("from_node", "to_node").unique().height,
        "lossy_seconds": t.height,
        "digest": hashlib.sha256(text.encode()).hexdigest()[:16],
    }


def flow_summary(r: dict[str, Any]) -> dict[str, Any]:
    """One flow of a run's summary (`leoguard run --json` and `leoguard emu run --json` print these)."""
    return {
        "flow": r["flow"],
        "src": r["src"],
        "dst": r["dst"],
        "kind": r["kind"],
        "cc": r["cc"],
        "goodput_bps": round(r["goodput_bps"], 1),
        "delivered_bytes": r["delivered_bytes"],
        "retransmissions": r["retransmissions"],
        "rtos": r["rtos"],
        # The simulator's TCP only (the emulator's hosts run the kernel's): probes, DSACKs, undos.
        "tlps": r.get("tlps"),
        "dsacks": r.get("dsacks"),
        "undos": r.get("undos"),
        "endpoint_loss": r["endpoint_loss"],
        "network_loss": r["network_loss"],
        "fct_s": r["fct_s"],
        "owd_ms": {"p50": r["owd_ms_p50"], "p99": r["owd_ms_p99"]},
    }


@dataclass
class Results:
    """A run's results: per-flow summary and time series, per-packet records, per-link counters and
    time series, drops. `complete` is False when the run was interrupted: the tables then cover the
    first `simulated_s` seconds."""

    scenario: Scenario
    flows: pl.DataFrame
    series: pl.DataFrame
    packets: pl.DataFrame
    links: pl.DataFrame
    link_series: pl.DataFrame
    drops: pl.DataFrame
    hops: pl.DataFrame
    packet_hops: int
    wall_s: float
    run_s: float
    simulated_s: float
    complete: bool = True
    meta: dict[str, Any] = field(default_factory=dict)
    satguard: dict[str, int] | None = None
    linkguardian: dict[str, int] | None = None
    capture: bytes | None = None
    """The `[capture]` as a pcap file (IPv6, link type RAW), or None without one."""
    capture_missed: int = 0
    """Packets the capture saw past its `max_packets` (not recorded)."""
    app_delay: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Application-perceived delay of sampled TCP segments (`app_delay_every`): flow, seq, sent_ns,
    delivered_ns (null: not delivered by the end), delay_ms."""
    mpep: dict[str, Any] | None = None
    """M-PEP's counters (`[mpep]`; see docs/mpep.md) plus per-migration lists `migration_t_ns`,
    `migration_delays_ns` and `migration_state_bytes`, or None without it."""
    web: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Page loads of web flows, one row per load started (docs/web.md)."""
    web_objects: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Objects of those page loads: request and completion times after navigation start."""
    lossy_seconds: pl.DataFrame = field(default_factory=lambda: lossy_seconds_table([]))
    """Lossy seconds of each link's per-second loss model: from_node, to_node, second, rate
    (`lossy_seconds_table`)."""
    webrtc: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per WebRTC flow: delay, jitter-buffer delay, FPS, freezes, NACK/PLI/FEC counters (docs/webrtc.md)."""
    webrtc_frames: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per WebRTC frame: flow, frame, key, size, capture/complete/render times (ns; null if never)."""
    webrtc_fps: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Frames rendered in each whole second of each WebRTC flow (from its first rendered frame)."""
    startcp: pl.DataFrame = field(default_factory=pl.DataFrame)
    """StarTCP senders' stalls, one row per handover stalled for: flow, predicted_ns, stall_start_ns,
    stall_end_ns (null: still stalled), probes, reason ("notice" / "timeout"), lead_ns and the lead
    policy's input `state_*` (docs/startcp.md)."""
    interruptions: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Interruptions StarTCP receivers detected: flow, start_ns, duration_ns, stalled."""
    tambur: dict[str, int] | None = None
    """Counters of the `[tambur]` slot scheme, when it runs."""
    liquid: dict[str, int] | None = None
    """Counters of the `[liquid]` tunnel ends summed over nodes, when it runs (docs/liquid.md)."""
    leotp: dict[str, int] | None = None
    """Counters of the LEOTP mid nodes summed over nodes, when a run has LEOTP flows (docs/leotp.md)."""

    def summary(self) -> dict[str, Any]:
        """One JSON-able object: the scenario, seed, and per flow goodput, losses, retransmissions, OWD."""
        return {
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "duration_s": self.scenario.duration_s,
            "simulated_s": self.simulated_s,
            "complete": self.complete,
            "packet_hops": self.packet_hops,
            "wall_s": round(self.wall_s, 4),
            "run_s": round(self.run_s, 4),
            "flows": [flow_summary(r) for r in self.flows.iter_rows(named=True)],
            "links": {
                "realised_loss_max": float(self.links["realised_loss"].max() or 0.0),
                "drops_queue": int(self.links["drops_queue"].sum()),
                "drops_down": int(self.links["drops_down"].sum()),
            },
            "loss_models": self.loss_models(),
            **({"loss_process": loss_process(self.lossy_seconds)} if len(self.lossy_seconds) else {}),
            **({"satguard": self.satguard} if self.satguard is not None else {}),
            **({"linkguardian": self.linkguardian} if self.linkguardian is not None else {}),
            **({"mpep": self.mpep} if self.mpep is not None else {}),
            **({"web": self.web_summary()} if not self.web.is_empty() else {}),
            **({"tambur": self.tambur} if self.tambur is not None else {}),
            **({"liquid": self.liquid} if self.liquid is not None else {}),
            **({"leotp": self.leotp} if self.leotp is not None else {}),
            **({"webrtc": self.webrtc.to_dicts()} if not self.webrtc.is_empty() else {}),
        }

    def web_summary(self) -> list[dict[str, Any]]:
        """Per web flow: loads started and finished, mean and median page load time and Speed Index
        (finished loads), retransmissions."""
        return web_summary(self.web)

    def loss_models(self) -> list[dict[str, Any]]:
        """Per loss model and parameter set: how many links carry it and the loss it realised over all
        packets offered to them (drops by the model / packets offered)."""
        lk = self.links.filter(pl.col("loss_model") != "none")
        if lk.is_empty():
            return []
        g = lk.group_by(["loss_model", "loss_params"], maintain_order=True).agg(
            pl.len().alias("links"), pl.col("offered").sum(), pl.col("drops_loss").sum()
        )
        return [
            {
                "model": r["loss_model"],
                "params": r["loss_params"],
                "links": r["links"],
                "offered": r["offered"],
                "realised_loss": round(r["drops_loss"] / r["offered"], 6) if r["offered"] else None,
            }
            for r in g.iter_rows(named=True)
        ]

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Parquet per table, plus the resolved scenario, seed and code version as JSON, plus
        `capture.pcap` when the scenario has a `[capture]`."""
        d = Path(directory)
        make_dir(d)
        out = {}
        tables = [
            "flows",
            "series",
            "packets",
            "links",
            "link_series",
            "drops",
            "hops",
            "app_delay",
            "web",
            "web_objects",
            "lossy_seconds",
        ]
        if not self.webrtc.is_empty():
            tables += ["webrtc", "webrtc_frames", "webrtc_fps"]
        for name in tables:
            p = d / f"{name}.parquet"
            getattr(self, name).write_parquet(p)
            out[name] = p
        meta = d / "run.json"
        info = {
            "scenario": self.scenario.model_dump(),
            "complete": self.complete,
            "simulated_s": self.simulated_s,
            "satguard": self.satguard,
            "linkguardian": self.linkguardian,
            **({"mpep": self.mpep} if self.mpep is not None else {}),
            **({"tambur": self.tambur} if self.tambur is not None else {}),
            **({"liquid": self.liquid} if self.liquid is not None else {}),
            **({"leotp": self.leotp} if self.leotp is not None else {}),
            **({"capture_missed": self.capture_missed} if self.capture is not None else {}),
            **self.meta,
        }
        meta.write_text(json.dumps(info, indent=2, default=str))
        out["run"] = meta
        if self.capture is not None:
            pcap = d / "capture.pcap"
            pcap.write_bytes(self.capture)
            out["capture"] = pcap
        return out


def _code_version() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent,
        )  # fmt: skip
        commit = rev.stdout.strip() if rev.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        commit = "unknown"
    return f"{_core.__version__}+{commit}"


Progress = Callable[[float, float, int], None]


def simulate(
    scenario: Scenario | str | Path,
    base_dir: Path | None = None,
    progress: Progress | None = None,
    interruptible: bool = False,
) -> Results:
    """Runs a scenario (a model or a TOML path) and returns its results.

    `progress(simulated_s, duration_s, packet_hops)` is called after each slice of the run (slices
    last about a quarter of a second of wall time). With `interruptible`, Ctrl-C (KeyboardInterrupt)
    stops the run at the end of the current slice and the results so far come back with
    `complete = False`; otherwise the interrupt propagates.
    """
    if not isinstance(scenario, Scenario):
        path = Path(scenario)
        base_dir = base_dir or path.parent
        scenario = load_scenario(path)
    spec = scenario.to_core(base_dir)
    t0 = time.perf_counter()
    run = _core.SimRun(spec)
    end = run.end_s
    step = min(end, max(end / 1000.0, 0.01))
    complete = True
    try:
        while not run.finished:
            s0 = time.perf_counter()
            run.advance(min(end, run.now_s + step))
            took = time.perf_counter() - s0
            # Aim for ~0.25 s of wall time per slice, so progress stays live and Ctrl-C is prompt.
            step = min(end, max(1e-3, step * min(4.0, max(0.25, 0.25 / max(took, 1e-6)))))
            if progress is not None:
                progress(run.now_s, end, run.packet_hops)
    except KeyboardInterrupt:
        if not interruptible:
            raise
        complete = False
    raw = run.results()
    wall = time.perf_counter() - t0
    return _results(scenario, spec, raw, wall, complete)


class _StoppedError(Exception):
    """A run stopped because another of the same batch failed or was interrupted."""


def simulate_many(
    scenarios: Sequence[Scenario], workers: int = 1, on_start: Callable[[int], None] | None = None
) -> list[Results]:
    """Runs independent `scenarios`, up to `workers` at a time on threads of this process (the engine
    runs without the GIL, so N cores run N at once), and returns their results in order. Each run is
    its own engine with its own seed, so the results are those of running them one by one.
    `on_start(i)` is called as run i starts. If a run fails, or Ctrl-C interrupts the wait, the
    other runs stop at the end of their current slice and the error propagates."""
    if workers < 1:
        raise LeoguardError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(scenarios) <= 1:
        out = []
        for i, sc in enumerate(scenarios):
            if on_start:
                on_start(i)
            out.append(simulate(sc))
        return out
    stop = threading.Event()

    def check(*_: Any) -> None:
        if stop.is_set():
            raise _StoppedError

    def one(i: int) -> Results:
        check()
        if on_start:
            on_start(i)
        return simulate(scenarios[i], progress=check)

    with ThreadPoolExecutor(max_workers=min(workers, len(scenarios)), thread_name_prefix="leoguard-run") as pool:
        futures = [pool.submit(one, i) for i in range(len(scenarios))]
        try:
            return [f.result() for f in futures]
        except BaseException:
            stop.set()
            raise


DROP_TYPES = {
    "t_ns": pl.Int64, "flow": pl.Int64, "seq": pl.Int64, "from_node": pl.UInt32, "to_node": pl.UInt32,
    "reason": pl.Utf8, "control": pl.Boolean,
}  # fmt: skip
"""The drops table's columns (the types polars gives them when the run dropped anything)."""


def _table(parquet: bytes) -> pl.DataFrame:
    """A result table the engine handed over as a Parquet file's bytes (flow, times and counters as
    UInt32/UInt64, flags as Boolean; `leoguard_core::parquet`): its large tables cross without numpy."""
    return pl.read_parquet(io.BytesIO(parquet))


def _results(scenario: Scenario, spec: dict[str, Any], raw: dict[str, Any], wall: float, complete: bool) -> Results:
    names = spec.get("node_names", [])

    def name(i: int | None) -> str | None:
        return names[i] if i is not None and i < len(names) else None

    packets = _table(raw["packets"])
    packets = packets.with_columns(((pl.col("received_ns") - pl.col("sent_ns")).cast(pl.Float64) / 1e6).alias("owd_ms"))
    # One pass over the packets for every flow's OWD percentiles (linear interpolation, as numpy's).
    owd = {
        row["flow"]: (round(row["p50"], 4), round(row["p99"], 4))
        for row in packets.group_by("flow")
        .agg(
            pl.col("owd_ms").quantile(0.5, "linear").alias("p50"),
            pl.col("owd_ms").quantile(0.99, "linear").alias("p99"),
        )
        .iter_rows(named=True)
    }
    rows = []
    for i, (f, fc, r) in enumerate(zip(scenario.flows, spec["flows"], raw["flows"], strict=True)):
        p50, p99 = owd.get(i, (None, None))
        rows.append(
            {
                "flow": i,
                "kind": f.kind,
                "cc": f.cc if f.kind in ("tcp", "web") else None,
                "src": name(fc["src"]),
                "dst": name(fc["dst"]),
                **r,
                "owd_ms_p50": p50,
                "owd_ms_p99": p99,
            }
        )
    flows = pl.DataFrame(
        rows,
        schema_overrides={
            "cc": pl.Utf8, "src": pl.Utf8, "dst": pl.Utf8, "fct_s": pl.Float64, "owd_ms_p50": pl.Float64,
            "owd_ms_p99": pl.Float64,
        },
    )  # fmt: skip
    lossy = raw["links"].pop("lossy_seconds")
    lossy = lossy_seconds_table(list(zip(raw["links"]["from_node"], raw["links"]["to_node"], lossy, strict=True)))
    links = pl.DataFrame(raw["links"])
    links = links.with_columns(
        pl.Series("from_name", [name(i) for i in raw["links"]["from_node"]], dtype=pl.Utf8),
        pl.Series("to_name", [name(i) for i in raw["links"]["to_node"]], dtype=pl.Utf8),
    )
    interval = scenario.link_sample_every_s
    link_series = _table(raw["link_series"])
    # Every table has its columns, and their types, whether or not the run filled it: results of many
    # runs concatenate (a drops table with no rows used to have Null columns, which pl.concat refuses).
    utilisation = pl.col("bytes").cast(pl.Float64) * 8.0 / (pl.col("rate_bps").cast(pl.Float64) * interval)
    link_series = link_series.with_columns(
        (utilisation if interval > 0 else pl.lit(None, dtype=pl.Float64)).alias("utilisation")
    )
    meta = {
        "seed": scenario.seed,
        "code_version": _code_version(),
        "packet_hops": raw["packet_hops"],
        "node_names": names,
    }
    if raw["topology_error"]:
        meta["topology_error"] = raw["topology_error"]
    series = _table(raw["series"])
    # Goodput over each sampling interval, from the bytes acknowledged.
    dt = (pl.col("t_ns").diff().over("flow").cast(pl.Float64)) / 1e9
    series = series.with_columns(
        (pl.col("acked_bytes").diff().over("flow").cast(pl.Float64) * 8.0 / dt).fill_null(0.0).alias("goodput_bps")
    )
    hop_types = {k: pl.Int64 for k in raw["hops"]} | {
        "from_node": pl.UInt32,
        "to_node": pl.UInt32,
        "user_link": pl.Boolean,
    }
    hops = pl.DataFrame(raw["hops"], schema_overrides=hop_types)
    hops = hops.with_columns(
        pl.Series("from_name", [name(i) for i in raw["hops"]["from_node"]], dtype=pl.Utf8),
        pl.Series("to_name", [name(i) for i in raw["hops"]["to_node"]], dtype=pl.Utf8),
    )
    app_delay = _table(raw["app_delay"]).with_columns(
        ((pl.col("delivered_ns").cast(pl.Float64) - pl.col("sent_ns").cast(pl.Float64)) / 1e6).alias("delay_ms")
    )
    res = Results(
        scenario, flows, series, packets, links, link_series,
        pl.DataFrame(raw["drops"], schema_overrides=DROP_TYPES),
        hops, raw["packet_hops"], wall, raw["run_s"], raw["simulated_s"], complete, meta, raw.get("satguard"),
        raw.get("linkguardian"), raw.get("capture"), raw.get("capture_missed", 0), app_delay,
        mpep=raw.get("mpep"), web=_web(raw.get("web")), web_objects=_web_objects(raw.get("web_objects")),
        lossy_seconds=lossy,
    )  # fmt: skip
    _webrtc(res, raw)
    res.startcp = startcp_table(raw.get("startcp"))
    res.interruptions = interruptions_table(raw.get("interruptions"))
    return res


def interruptions_table(d: dict | list | None) -> pl.DataFrame:
    """`Results.interruptions` (both engines): columns, or rows, of flow, start_ns, duration_ns, stalled."""
    return pl.DataFrame(
        d or {}, schema={"flow": pl.UInt32, "start_ns": pl.UInt64, "duration_ns": pl.UInt64, "stalled": pl.Boolean}
    )


def startcp_table(d: dict | list | None) -> pl.DataFrame:
    """`Results.startcp` (both engines): columns, or rows, of the StarTCP stalls."""
    schema: dict[str, Any] = {
        "flow": pl.UInt32, "predicted_ns": pl.UInt64, "stall_start_ns": pl.UInt64, "stall_end_ns": pl.UInt64,
        "probes": pl.UInt64, "reason": pl.Utf8, "lead_ns": pl.UInt64,
    }  # fmt: skip
    for name in _core.STARTCP_FEATURES:
        schema[f"state_{name}"] = pl.Float64
    return pl.DataFrame(d or {}, schema=schema)


def _web(raw: dict[str, Any] | None) -> pl.DataFrame:
    """The page-load table, with times in seconds next to the nanosecond columns."""
    schema = {
        "flow": pl.UInt32, "load": pl.UInt32, "page": pl.UInt32, "start_ns": pl.UInt64, "plt_ns": pl.UInt64,
        "speed_index_ns": pl.UInt64, "objects": pl.UInt32, "objects_done": pl.UInt32, "bytes": pl.UInt64,
        "origins": pl.UInt32, "connections": pl.UInt32, "dns_ns": pl.UInt64, "handshake_ns": pl.UInt64,
        "retransmissions": pl.UInt64, "setup_retries": pl.UInt64,
    }  # fmt: skip
    df = pl.DataFrame(raw or {k: [] for k in schema}, schema=schema)
    return df.with_columns(
        (pl.col("plt_ns").cast(pl.Float64) / 1e9).alias("plt_s"),
        (pl.col("speed_index_ns").cast(pl.Float64) / 1e9).alias("speed_index_s"),
        pl.col("plt_ns").is_not_null().alias("finished"),
    )


def _web_objects(raw: dict[str, Any] | None) -> pl.DataFrame:
    """The per-object table of web page loads."""
    schema = {
        "flow": pl.UInt32, "load": pl.UInt32, "object": pl.UInt32, "origin": pl.UInt32, "type": pl.Utf8,
        "size": pl.UInt64, "parent": pl.UInt32, "requested_ns": pl.UInt64, "done_ns": pl.UInt64,
        "visual_weight": pl.Float64,
    }  # fmt: skip
    return pl.DataFrame(raw or {k: [] for k in schema}, schema=schema)


def _webrtc(res: Results, raw: dict[str, Any]) -> None:
    """The WebRTC tables and the Tambur counters (docs/webrtc.md, docs/tambur.md)."""
    res.tambur = raw.get("tambur")
    res.liquid = raw.get("liquid")
    res.leotp = raw.get("leotp")
    if "webrtc" not in raw:
        return
    res.webrtc = pl.DataFrame(raw["webrtc"], schema_overrides={"flow": pl.UInt32})
    frames = _table(raw["webrtc_frames"])
    res.webrtc_frames = frames.with_columns(
        ((pl.col("render_ns") - pl.col("capture_ns")).cast(pl.Float64) / 1e6).alias("e2e_ms"),
        ((pl.col("render_ns") - pl.col("complete_ns")).cast(pl.Float64) / 1e6).alias("jb_ms"),
    )
    res.webrtc_fps = _table(raw["webrtc_fps"])
