"""Sweeps: many independent runs (schemes x pairs x seeds x ...) into one result store.

Runs go to a local process pool (`executor="local"`) or to a Ray cluster (`executor="ray"`: the
optional `ray` extra; a local Ray instance when no address is given). Either way each finished run is
stored as soon as it comes back (this process is the store's only writer), so an interrupted sweep
keeps every run that finished, and running the same sweep again skips them (`ResultStore.has`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario
from leoguard.simulate import Results, simulate
from leoguard.store import ResultStore, run_key


@dataclass
class SweepRun:
    """One run of a sweep: a resolved scenario and the labels it is catalogued under."""

    scenario: Scenario
    scheme: str = ""
    pair: str = ""
    metrics: Callable[[Results], dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """The run's key in the store."""
        return run_key(self.scenario, self.scheme, self.pair)


@dataclass
class SweepReport:
    """What a sweep did."""

    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)
    """Per run simulated, in the order they ended: {key, worker (process id), rss_mib (the worker's
    resident memory after the run), peak_mib (its peak so far)}."""

    def memory_summary(self) -> list[dict[str, Any]]:
        """Per worker: runs, peak RSS, and its RSS after its first and its last run (MiB): a worker
        whose RSS climbs run after run shows it here."""
        out: dict[int, dict[str, Any]] = {}
        for m in self.memory:
            w = out.setdefault(m["worker"], {"worker": m["worker"], "runs": 0, "peak_mib": 0.0})
            w["runs"] += 1
            w["peak_mib"] = max(w["peak_mib"], m["peak_mib"])
            w.setdefault("rss_first_mib", m["rss_mib"])
            w["rss_last_mib"] = m["rss_mib"]
        return list(out.values())

    def memory_lines(self) -> list[str]:
        """`memory_summary` in words, a line per worker (none when nothing was simulated)."""
        return [
            f"worker {w['worker']}: {w['runs']} runs, peak RSS {w['peak_mib']:g} MiB, RSS after its first run "
            f"{w['rss_first_mib']:g} MiB, after its last {w['rss_last_mib']:g} MiB"
            for w in self.memory_summary()
        ]


EXECUTORS = ("local", "ray")


def _memory() -> dict[str, Any]:
    """This process: id, resident memory now and its peak, MiB (Linux: /proc and getrusage)."""
    import resource

    rss = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        rss = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"worker": os.getpid(), "rss_mib": round(rss, 1), "peak_mib": round(peak, 1)}


def _simulate(spec: dict[str, Any]) -> tuple[Results, dict[str, Any]]:
    res = simulate(Scenario.model_validate(spec))
    return res, _memory()


def _run_ray(
    todo: list[SweepRun],
    finish: Callable[[SweepRun, Results, dict[str, Any]], None],
    report: SweepReport,
    workers: int,
    address: str | None,
) -> None:
    try:
        import ray
    except ImportError as e:
        raise LeoguardError(
            "executor 'ray' needs Ray: install leoguard's optional extra (pip install 'leoguard[ray]')"
        ) from e
    started = not ray.is_initialized()
    if started:
        try:
            if address is None:
                ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            else:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError ...
            raise LeoguardError(f"cannot start or reach the Ray cluster {address or '(local)'}: {e}") from e
    task = ray.remote(num_cpus=1, max_retries=0)(_simulate)
    pending = {task.remote(r.scenario.model_dump()): r for r in todo}
    try:
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1)
            for ref in finished:
                r = pending.pop(ref)
                try:
                    res, mem = ray.get(ref)
                except Exception as e:  # the task's error (RayTaskError wraps it) is this run's failure
                    cause = getattr(e, "cause", None) or e
                    report.failed[r.key] = f"{type(cause).__name__}: {cause}"
                    continue
                finish(r, res, mem)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()


def run_sweep(
    runs: Sequence[SweepRun],
    store: ResultStore,
    *,
    workers: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> SweepReport:
    """Runs what the store lacks, storing each run as it ends. `executor="local"`: `workers` at a time
    in a process pool (1: in this process); `executor="ray"`: as Ray tasks on the cluster at
    `ray_address` (None: a local Ray instance with `workers` CPUs). `progress(done, total, key)` is
    called after each run. A run that fails is reported, not fatal."""
    if workers < 1:
        raise LeoguardError(f"invalid workers = {workers}: must be >= 1")
    if executor not in EXECUTORS:
        raise LeoguardError(f"unknown executor {executor!r} (known: {', '.join(EXECUTORS)})")
    if ray_address is not None and executor != "ray":
        raise LeoguardError("a Ray address needs executor = 'ray'")
    report = SweepReport()
    todo: list[SweepRun] = []
    for r in runs:
        if store.has(r.key):
            report.skipped.append(r.key)
        else:
            todo.append(r)
    total, done = len(runs), len(report.skipped)

    def finish(r: SweepRun, res: Results, mem: dict[str, Any]) -> None:
        nonlocal done
        report.memory.append({"key": r.key, **mem})
        store.put(r.key, res, scheme=r.scheme, pair=r.pair, metrics=r.metrics(res) if r.metrics else None)
        report.ran.append(r.key)
        done += 1
        if progress:
            progress(done, total, r.key)

    if executor == "ray":
        _run_ray(todo, finish, report, workers, ray_address)
        return report
    if workers == 1:
        for r in todo:
            try:
                res = simulate(r.scenario)
            except LeoguardError as e:
                report.failed[r.key] = str(e)
                continue
            finish(r, res, _memory())
        return report
    # Spawned, not forked: forking a process whose thread pools (polars, the Rust core) are running
    # can deadlock the child.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: dict[Future[tuple[Results, dict[str, Any]]], SweepRun] = {
            pool.submit(_simulate, r.scenario.model_dump()): r for r in todo
        }
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    r = pending.pop(fut)
                    try:
                        res, mem = fut.result()
                    except Exception as e:  # a worker's error is this run's failure, not the sweep's
                        report.failed[r.key] = f"{type(e).__name__}: {e}"
                        continue
                    finish(r, res, mem)
        except KeyboardInterrupt:
            for fut in pending:
                fut.cancel()
            raise
    return report
