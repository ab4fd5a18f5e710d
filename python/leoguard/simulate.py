"""Running scenarios on the packet simulator: `simulate(scenario) -> Results` with polars DataFrames
(made when first read: `leoguard.tables`)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leoguard import _core, tables
from leoguard.errors import LeoguardError, make_dir
from leoguard.scenario import Scenario, load_scenario
from leoguard.tables import TableField

if TYPE_CHECKING:
    import polars as pl


def web_summary(web: pl.DataFrame) -> list[dict[str, Any]]:
    """Per web flow of a `web` table: loads started and finished, mean and median page load time and
    Speed Index (finished loads), and the retransmissions when the table has them (the simulator's)."""
    import polars as pl

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
    return tables.frame(tables.lossy_seconds_result(tables.lossy_seconds_rows(links)))


loss_process = tables.loss_process


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


#: The result tables of a simulator run, in the order `Results.write` writes them (the WebRTC ones
#: only when the run has WebRTC flows).
TABLES = (
    "flows", "series", "packets", "links", "link_series", "drops", "hops", "app_delay", "web", "web_objects",
    "lossy_seconds",
)  # fmt: skip
WEBRTC_TABLES = ("webrtc", "webrtc_frames", "webrtc_fps")


class Results:
    """A run's results: per-flow summary and time series, per-packet records, per-link counters and
    time series, drops. `complete` is False when the run was interrupted: the tables then cover the
    first `simulated_s` seconds.

    Each table is a polars DataFrame, made from the engine's columns the first time it is read
    (`leoguard.tables`). `write` needs none of them read, nor does `summary` but for the page loads of
    web flows, so a run without web flows is summarised and written without polars."""

    flows = TableField()
    """One row per flow: goodput, losses, retransmissions, OWD percentiles."""
    series = TableField()
    """Per-flow time series (cwnd, in flight, RTT, acknowledged bytes, goodput)."""
    packets = TableField()
    """One row per delivered data packet: sent and received times, OWD, retransmission, hops."""
    links = TableField()
    """Per-link counters and loss model."""
    link_series = TableField()
    """Per-link time series (bytes, queue, drops, up, utilisation)."""
    drops = TableField()
    """Dropped packets: when, where, why."""
    hops = TableField()
    """Hop-by-hop senders' counters (SATGUARD, LinkGuardian)."""
    app_delay = TableField()
    """Application-perceived delay of sampled TCP segments (`app_delay_every`): flow, seq, sent_ns,
    delivered_ns (null: not delivered by the end), delay_ms."""
    web = TableField()
    """Page loads of web flows, one row per load started (docs/web.md)."""
    web_objects = TableField()
    """Objects of those page loads: request and completion times after navigation start."""
    lossy_seconds = TableField()
    """Lossy seconds of each link's per-second loss model: from_node, to_node, second, rate
    (`lossy_seconds_table`)."""
    webrtc = TableField()
    """Per WebRTC flow: delay, jitter-buffer delay, FPS, freezes, NACK/PLI/FEC counters (docs/webrtc.md)."""
    webrtc_frames = TableField()
    """Per WebRTC frame: flow, frame, key, size, capture/complete/render times (ns; null if never)."""
    webrtc_fps = TableField()
    """Frames rendered in each whole second of each WebRTC flow (from its first rendered frame)."""
    startcp = TableField()
    """StarTCP senders' stalls, one row per handover stalled for: flow, predicted_ns, stall_start_ns,
    stall_end_ns (null: still stalled), probes, reason ("notice" / "timeout"), lead_ns and the lead
    policy's input `state_*` (docs/startcp.md)."""
    interruptions = TableField()
    """Interruptions StarTCP receivers detected: flow, start_ns, duration_ns, stalled."""

    def __init__(
        self,
        scenario: Scenario,
        result_tables: dict[str, Any],
        summary_rows: dict[str, Any],
        packet_hops: int,
        wall_s: float,
        run_s: float,
        simulated_s: float,
        complete: bool = True,
        meta: dict[str, Any] | None = None,
        *,
        satguard: dict[str, int] | None = None,
        linkguardian: dict[str, int] | None = None,
        capture: bytes | None = None,
        capture_missed: int = 0,
        mpep: dict[str, Any] | None = None,
        tambur: dict[str, int] | None = None,
        liquid: dict[str, int] | None = None,
        leotp: dict[str, int] | None = None,
    ) -> None:
        self._tables, self._tables_lock = tables.new_tables()
        self._tables.update(result_tables)
        # What `summary` reads: the engine's flow rows, link columns, lossy seconds and WebRTC rows.
        self._summary = summary_rows
        self.scenario = scenario
        self.packet_hops = packet_hops
        self.wall_s = wall_s
        self.run_s = run_s
        self.simulated_s = simulated_s
        self.complete = complete
        self.meta = meta or {}
        self.satguard = satguard
        self.linkguardian = linkguardian
        self.capture = capture
        """The `[capture]` as a pcap file (IPv6, link type RAW), or None without one."""
        self.capture_missed = capture_missed
        """Packets the capture saw past its `max_packets` (not recorded)."""
        self.mpep = mpep
        """M-PEP's counters (`[mpep]`; see docs/mpep.md) plus per-migration lists `migration_t_ns`,
        `migration_delays_ns` and `migration_state_bytes`, or None without it."""
        self.tambur = tambur
        """Counters of the `[tambur]` slot scheme, when it runs."""
        self.liquid = liquid
        """Counters of the `[liquid]` tunnel ends summed over nodes, when it runs (docs/liquid.md)."""
        self.leotp = leotp
        """Counters of the LEOTP mid nodes summed over nodes, when a run has LEOTP flows (docs/leotp.md)."""

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (a Ray worker's results) or copied: the engine's tables as their columns' bytes, so
        # a copy owns its tables.
        with self._tables_lock:
            state = self.__dict__.copy()
            state["_tables"] = tables.tables_state(self._tables)
        del state["_tables_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_tables" not in state:
            raise LeoguardError(
                "these results were pickled by an older leoguard (before 0.1's tables in Rust): run again"
            )
        self.__dict__.update(state)
        self._tables = tables.unpickled(self._tables)
        self._tables_lock = tables.new_tables()[1]

    def summary(self) -> dict[str, Any]:
        """One JSON-able object: the scenario, seed, and per flow goodput, losses, retransmissions, OWD.
        It is the run as the engine returned it: replacing a table's DataFrame does not change it, but
        for `web`, whose page loads it reads (`web_summary`)."""
        s = self._summary
        links = s["links"]
        lossy = s["lossy_seconds"]
        has_web = tables.table_rows(self._tables.get("web")) > 0
        return {
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "duration_s": self.scenario.duration_s,
            "simulated_s": self.simulated_s,
            "complete": self.complete,
            "packet_hops": self.packet_hops,
            "wall_s": round(self.wall_s, 4),
            "run_s": round(self.run_s, 4),
            "flows": [flow_summary(r) for r in s["flows"]],
            "links": {
                "realised_loss_max": float(max(links["realised_loss"], default=0.0) or 0.0),
                "drops_queue": int(sum(links["drops_queue"])),
                "drops_down": int(sum(links["drops_down"])),
            },
            "loss_models": self.loss_models(),
            **({"loss_process": loss_process(lossy)} if lossy else {}),
            **({"satguard": self.satguard} if self.satguard is not None else {}),
            **({"linkguardian": self.linkguardian} if self.linkguardian is not None else {}),
            **({"mpep": self.mpep} if self.mpep is not None else {}),
            **({"web": self.web_summary()} if has_web else {}),
            **({"tambur": self.tambur} if self.tambur is not None else {}),
            **({"liquid": self.liquid} if self.liquid is not None else {}),
            **({"leotp": self.leotp} if self.leotp is not None else {}),
            **({"webrtc": [dict(r) for r in s["webrtc"]]} if s.get("webrtc") else {}),
        }

    def web_summary(self) -> list[dict[str, Any]]:
        """Per web flow: loads started and finished, mean and median page load time and Speed Index
        (finished loads), retransmissions."""
        return web_summary(self.web)

    def loss_models(self) -> list[dict[str, Any]]:
        """Per loss model and parameter set: how many links carry it and the loss it realised over all
        packets offered to them (drops by the model / packets offered)."""
        links = self._summary["links"]
        groups: dict[tuple[str, Any], list[int]] = {}
        for model, params, offered, dropped in zip(
            links["loss_model"], links["loss_params"], links["offered"], links["drops_loss"], strict=True
        ):
            if model != "none":
                g = groups.setdefault((model, params), [0, 0, 0])
                g[0] += 1
                g[1] += offered
                g[2] += dropped
        return [
            {
                "model": model,
                "params": params,
                "links": n,
                "offered": offered,
                "realised_loss": round(dropped / offered, 6) if offered else None,
            }
            for (model, params), (n, offered, dropped) in groups.items()
        ]

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Parquet per table, plus the resolved scenario, seed and code version as JSON, plus
        `capture.pcap` when the scenario has a `[capture]`."""
        d = Path(directory)
        make_dir(d)
        with self._tables_lock:
            names = TABLES + (WEBRTC_TABLES if tables.table_rows(self._tables.get("webrtc")) else ())
            out = tables.write_tables(self._tables, names, d)
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
    # Imported here: `leoguard run` never needs a pool (concurrent.futures costs it ~5 ms).
    from concurrent.futures import ThreadPoolExecutor

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


def _results(scenario: Scenario, spec: dict[str, Any], raw: dict[str, Any], wall: float, complete: bool) -> Results:
    names = spec.get("node_names", [])

    def name(i: int | None) -> str | None:
        return names[i] if i is not None and i < len(names) else None

    def named(cols: dict[str, list]) -> dict[str, list]:
        return cols | {
            "from_name": [name(i) for i in cols["from_node"]],
            "to_name": [name(i) for i in cols["to_node"]],
        }

    rows = []
    for i, (f, fc, r) in enumerate(zip(scenario.flows, spec["flows"], raw["flows"], strict=True)):
        p50, p99 = r["owd_ms_p50"], r["owd_ms_p99"]
        rows.append(
            {
                "flow": i,
                "kind": f.kind,
                "cc": f.cc if f.kind in ("tcp", "web") else None,
                "src": name(fc["src"]),
                "dst": name(fc["dst"]),
                **r,
                "owd_ms_p50": None if p50 is None else round(p50, 4),
                "owd_ms_p99": None if p99 is None else round(p99, 4),
            }
        )
    flow_cols = {k: [r[k] for r in rows] for k in rows[0]} if rows else {}
    flow_types = {"cc": "str", "src": "str", "dst": "str", "fct_s": "f64", "owd_ms_p50": "f64", "owd_ms_p99": "f64"}
    link_cols = raw["links"]
    lossy = tables.lossy_seconds_rows(
        zip(link_cols["from_node"], link_cols["to_node"], link_cols.pop("lossy_seconds"), strict=True)
    )
    links = named(link_cols)
    hops = named(raw["hops"])
    hop_types = {k: "i64" for k in hops} | {
        "from_node": "u32", "to_node": "u32", "user_link": "bool", "from_name": "str", "to_name": "str",
    }  # fmt: skip
    webrtc_rows: list[dict[str, Any]] = []
    found: dict[str, Any] = {
        "flows": tables.result_table(flow_cols, tables.infer_types(flow_cols, flow_types)),
        "links": tables.result_table(links, tables.infer_types(links, {"from_name": "str", "to_name": "str"})),
        "drops": tables.result_table(tables.columns_of(raw["drops"], tables.DROP_TYPES), tables.DROP_TYPES),
        "hops": tables.result_table(hops, tables.infer_types(hops, hop_types)),
        "lossy_seconds": tables.lossy_seconds_result(lossy),
        "web_objects": tables.result_table(
            tables.columns_of(raw.get("web_objects"), tables.WEB_OBJECT_TYPES), tables.WEB_OBJECT_TYPES
        ),
        "startcp": startcp_result(raw.get("startcp")),
        "interruptions": interruptions_result(raw.get("interruptions")),
        # Tables the engine built itself, derived columns included.
        **{k: raw[k] for k in ("series", "packets", "link_series", "app_delay", "web")},
    }
    if "webrtc" in raw:
        w = raw["webrtc"]
        found["webrtc"] = tables.result_table(w, tables.WEBRTC_TYPES)
        found["webrtc_frames"] = raw["webrtc_frames"]
        found["webrtc_fps"] = raw["webrtc_fps"]
        webrtc_rows = [dict(zip(w, vals, strict=True)) for vals in zip(*w.values(), strict=True)]
    meta = {
        "seed": scenario.seed,
        "code_version": _code_version(),
        "packet_hops": raw["packet_hops"],
        "node_names": names,
    }
    if raw["topology_error"]:
        meta["topology_error"] = raw["topology_error"]
    summary_rows = {"flows": rows, "links": link_cols, "lossy_seconds": lossy, "webrtc": webrtc_rows}
    return Results(
        scenario, found, summary_rows, raw["packet_hops"], wall, raw["run_s"], raw["simulated_s"], complete, meta,
        satguard=raw.get("satguard"), linkguardian=raw.get("linkguardian"), capture=raw.get("capture"),
        capture_missed=raw.get("capture_missed", 0), mpep=raw.get("mpep"), tambur=raw.get("tambur"),
        liquid=raw.get("liquid"), leotp=raw.get("leotp"),
    )  # fmt: skip


def startcp_result(d: dict | list | None) -> _core.ResultTable:
    """The StarTCP stalls (both engines): columns, or rows, of flow, predicted_ns, stall_start_ns,
    stall_end_ns, probes, reason, lead_ns and the lead policy's `state_*` features."""
    types = tables.startcp_types()
    return tables.result_table(tables.columns_of(d, types), types)


def interruptions_result(d: dict | list | None) -> _core.ResultTable:
    """The interruptions StarTCP receivers detected (both engines): columns, or rows, of flow,
    start_ns, duration_ns, stalled."""
    return tables.result_table(tables.columns_of(d, tables.INTERRUPTION_TYPES), tables.INTERRUPTION_TYPES)


def interruptions_table(d: dict | list | None) -> pl.DataFrame:
    """`Results.interruptions` (both engines) as a DataFrame."""
    return tables.frame(interruptions_result(d))


def startcp_table(d: dict | list | None) -> pl.DataFrame:
    """`Results.startcp` (both engines) as a DataFrame."""
    return tables.frame(startcp_result(d))
