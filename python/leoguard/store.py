"""The result store: each run's tables as Parquet files in a directory of its own, and a DuckDB
catalogue of every run (scenario hash, seed, code version, scheme, city pair, headline metrics).

A run is keyed by what determines it (the resolved scenario, the scheme and the pair), so a sweep can
ask `has(key)` and skip what is already stored. Writing is crash-safe: a run's files go to a
temporary directory that is renamed into place only when complete, and the catalogue row follows;
a run directory whose row is missing (a crash between the two) is indexed again when the store is
opened, so no finished run is ever lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from leoguard.errors import LeoguardError
from leoguard.scenario import Scenario
from leoguard.simulate import Results

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    scenario VARCHAR,
    scenario_hash VARCHAR,
    seed BIGINT,
    code_version VARCHAR,
    scheme VARCHAR,
    pair VARCHAR,
    created TIMESTAMP,
    complete BOOLEAN,
    path VARCHAR,
    metrics JSON
)
"""


def run_key(scenario: Scenario, scheme: str = "", pair: str = "") -> str:
    """The key of a run: a hash of the resolved scenario (seed included), the scheme and the pair."""
    h = hashlib.sha256()
    h.update(scenario.model_dump_json().encode())
    h.update(f"\0{scheme}\0{pair}".encode())
    return h.hexdigest()[:20]


class ResultStore:
    """A directory with `catalog.duckdb` and `runs/<run_id>/` (Parquet tables + run.json)."""

    def __init__(self, root: str | Path, *, read_only: bool = False):
        """Opens (and, unless `read_only`, creates) the store at `root`. A read-only store must exist
        already and is never written: reading commands (`results list`, `results query`) create nothing."""
        import duckdb

        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.catalog = self.root / "catalog.duckdb"
        if read_only:
            if not self.root.is_dir():
                raise LeoguardError(f"no result store at {self.root}: the directory does not exist")
            if not self.catalog.is_file():
                raise LeoguardError(f"{self.root} is not a result store: it has no catalog.duckdb")
        else:
            try:
                self.runs_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LeoguardError(f"cannot create the result store at {self.root}: {e.strerror}") from e
        try:
            self.db = duckdb.connect(str(self.catalog), read_only=read_only)
            if not read_only:
                self.db.execute(_SCHEMA)
        except duckdb.Error as e:
            raise LeoguardError(
                f"the result store's catalogue {self.catalog} cannot be read ({e}); the runs under "
                f"{self.runs_dir} are intact: move the catalogue away and reopen the store to rebuild it"
            ) from e
        if not read_only:
            self._reindex()

    def close(self) -> None:
        """Closes the catalogue."""
        self.db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has(self, run_id: str) -> bool:
        """Whether a complete run with this key is stored."""
        row = self.db.execute("SELECT complete FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return bool(row and row[0]) and (self.runs_dir / run_id / "run.json").exists()

    def put(
        self,
        run_id: str,
        res: Results,
        *,
        scheme: str = "",
        pair: str = "",
        metrics: dict[str, Any] | None = None,
    ) -> Path:
        """Stores a run's tables under `run_id` (replacing an earlier one) and catalogues it."""
        final = self.runs_dir / run_id
        tmp = self.runs_dir / f".tmp-{run_id}-{os.getpid()}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            res.write(tmp)
            (tmp / "store.json").write_text(json.dumps({"scheme": scheme, "pair": pair, "metrics": metrics or {}}))
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise LeoguardError(f"cannot store run {run_id} under {self.runs_dir}: {e.strerror or e}") from e
        except BaseException:
            # Any other failure (an error writing a table, Ctrl-C) leaves no partial run behind either.
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._catalogue(run_id, final)
        return final

    def _catalogue(self, run_id: str, path: Path) -> None:
        info = json.loads((path / "run.json").read_text())
        extra = json.loads((path / "store.json").read_text()) if (path / "store.json").exists() else {}
        sc = info.get("scenario", {})
        self.db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run_id,
                sc.get("name"),
                hashlib.sha256(json.dumps(sc, sort_keys=True, default=str).encode()).hexdigest()[:20],
                info.get("seed"),
                info.get("code_version"),
                extra.get("scheme", ""),
                extra.get("pair", ""),
                datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None),
                bool(info.get("complete", True)),
                str(path),
                json.dumps(extra.get("metrics", {})),
            ],
        )

    def _reindex(self) -> None:
        """Catalogues run directories that have no row (a crash after the rename) and drops leftovers
        of writes that never completed."""
        known = {r[0] for r in self.db.execute("SELECT run_id FROM runs").fetchall()}
        for d in sorted(self.runs_dir.iterdir()):
            if d.name.startswith(".tmp-"):
                shutil.rmtree(d, ignore_errors=True)
            elif d.is_dir() and d.name not in known and (d / "run.json").exists():
                self._catalogue(d.name, d)

    def runs(self) -> pl.DataFrame:
        """The catalogue, newest first."""
        return self._frame("SELECT * FROM runs ORDER BY created DESC, run_id")

    def query(self, sql: str) -> pl.DataFrame:
        """Any SQL over the catalogue (`runs`); `read_parquet('<path>/flows.parquet')` reaches a run's
        tables."""
        import duckdb

        try:
            return self._frame(sql)
        except duckdb.Error as e:
            raise LeoguardError(f"query failed: {e}") from e

    def _frame(self, sql: str) -> pl.DataFrame:
        cur = self.db.execute(sql)
        cols = [d[0] for d in cur.description or []]
        return pl.DataFrame(cur.fetchall(), schema=cols, orient="row")

    def table(self, run_id: str, name: str) -> pl.DataFrame:
        """One table (flows, packets, hops, ...) of a stored run."""
        p = self.runs_dir / run_id / f"{name}.parquet"
        if not p.exists():
            raise LeoguardError(f"run {run_id} has no table '{name}' in {self.runs_dir}")
        return pl.read_parquet(p)
