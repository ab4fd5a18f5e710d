"""Sweeps: many independent runs (schemes x pairs x seeds x ...) into one result store.

Runs go to a local process pool; each finished run is stored as soon as it comes back (the parent is
the store's only writer), so an interrupted sweep keeps every run that finished, and running the same
sweep again skips them (`ResultStore.has`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
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


def _simulate(spec: dict[str, Any]) -> Results:
    return simulate(Scenario.model_validate(spec))


def run_sweep(
    runs: Sequence[SweepRun],
    store: ResultStore,
    *,
    workers: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepReport:
    """Runs what the store lacks, `workers` at a time (1: in this process), storing each as it ends.
    `progress(done, total, key)` is called after each run. A run that fails is reported, not fatal."""
    if workers < 1:
        raise LeoguardError(f"invalid workers = {workers}: must be >= 1")
    report = SweepReport()
    todo: list[SweepRun] = []
    for r in runs:
        if store.has(r.key):
            report.skipped.append(r.key)
        else:
            todo.append(r)
    total, done = len(runs), len(report.skipped)

    def finish(r: SweepRun, res: Results) -> None:
        nonlocal done
        store.put(r.key, res, scheme=r.scheme, pair=r.pair, metrics=r.metrics(res) if r.metrics else None)
        report.ran.append(r.key)
        done += 1
        if progress:
            progress(done, total, r.key)

    if workers == 1:
        for r in todo:
            try:
                res = simulate(r.scenario)
            except LeoguardError as e:
                report.failed[r.key] = str(e)
                continue
            finish(r, res)
        return report
    # Spawned, not forked: forking a process whose thread pools (polars, the Rust core) are running
    # can deadlock the child.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: dict[Future[Results], SweepRun] = {pool.submit(_simulate, r.scenario.model_dump()): r for r in todo}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    r = pending.pop(fut)
                    try:
                        res = fut.result()
                    except Exception as e:  # a worker's error is this run's failure, not the sweep's
                        report.failed[r.key] = f"{type(e).__name__}: {e}"
                        continue
                    finish(r, res)
        except KeyboardInterrupt:
            for fut in pending:
                fut.cancel()
            raise
    return report
