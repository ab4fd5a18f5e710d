"""Result tables without polars until they are looked at.

A run's tables come from the engine as `_core.ResultTable`s: typed columns held on the Rust side.
`TableField` turns one into a polars DataFrame the first time it is read; `write_tables` writes
those never read straight from Rust (zstd-compressed Parquet) and the others with polars. So
`leoguard run`, which writes and summarises a run but never looks at its tables, does not import
polars at all (docs/performance.md, "Results without polars on the run path").

Either way a table's file holds the same columns, types and values; its bytes differ between the
two writers, so a run whose tables were read before `write` has files written by polars.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leoguard import _core

if TYPE_CHECKING:
    import polars as pl

#: Column types a `ResultTable` takes (leoguard_core::parquet's columns), and what polars reads
#: them as: Boolean, UInt32, UInt64, Int64, Float64, String.
DTYPES = ("bool", "u32", "u64", "i64", "f64", "str")

LOSSY_TYPES = {"from_node": "u32", "to_node": "u32", "second": "u64", "rate": "f64"}
"""`lossy_seconds`: the lossy seconds of each link's per-second loss model."""

INTERRUPTION_TYPES = {"flow": "u32", "start_ns": "u64", "duration_ns": "u64", "stalled": "bool"}
"""`interruptions`: interruptions StarTCP receivers detected."""

DROP_TYPES = {
    "t_ns": "i64", "flow": "i64", "seq": "i64", "from_node": "u32", "to_node": "u32", "reason": "str",
    "control": "bool",
}  # fmt: skip
"""`drops`: packets dropped, where and why."""

WEB_OBJECT_TYPES = {
    "flow": "u32", "load": "u32", "object": "u32", "origin": "u32", "type": "str", "size": "u64",
    "parent": "u32", "requested_ns": "u64", "done_ns": "u64", "visual_weight": "f64",
}  # fmt: skip
"""`web_objects`: the objects of those page loads."""


WEBRTC_TYPES = {
    "flow": "u32", "frames_sent": "i64", "key_frames": "i64", "frames_rendered": "i64", "e2e_p50_ms": "f64",
    "e2e_p95_ms": "f64", "e2e_mean_ms": "f64", "jb_p50_ms": "f64", "jb_p95_ms": "f64", "jb_mean_ms": "f64",
    "fps_mean": "f64", "fps_std": "f64", "freezes": "i64", "freeze_s": "f64", "nacks": "i64",
    "nacked_packets": "i64", "plis": "i64", "retransmissions": "i64", "media_packets": "i64",
    "parity_packets": "i64", "fec_recovered": "i64", "bytes_sent": "i64",
}  # fmt: skip
"""`webrtc`: one row per WebRTC flow (the engine's `WebrtcSummary`; its counters as polars infers
Python ints, Int64). A run without WebRTC flows has this table with no rows and these types."""


def startcp_types() -> dict[str, str]:
    """`startcp`: StarTCP senders' stalls, with the lead policy's input features."""
    t = {
        "flow": "u32", "predicted_ns": "u64", "stall_start_ns": "u64", "stall_end_ns": "u64", "probes": "u64",
        "reason": "str", "lead_ns": "u64",
    }  # fmt: skip
    return t | {f"state_{name}": "f64" for name in _core.STARTCP_FEATURES}


def columns_of(d: dict[str, list] | Sequence[dict[str, Any]] | None, names: Iterable[str]) -> dict[str, list]:
    """Columns `names` of `d`: a dict of columns, or a list of row dicts where a missing key is a null
    (None: no rows)."""
    if not d:
        return {n: [] for n in names}
    if isinstance(d, dict):
        return {n: list(d[n]) for n in names}
    return {n: [row.get(n) for row in d] for n in names}


def result_table(columns: dict[str, list], types: dict[str, str]) -> _core.ResultTable:
    """A `ResultTable` of `columns` (in their order), each of the type `types` names."""
    return _core.ResultTable([(name, types[name], values) for name, values in columns.items()])


def infer_types(columns: dict[str, list], known: dict[str, str] | None = None) -> dict[str, str]:
    """Each column's type: from `known`, else from its first non-null value (bool, int as i64,
    float, str), as polars infers it from Python values; a column of nulls only is f64."""
    known = known or {}
    out = {}
    for name, values in columns.items():
        if name in known:
            out[name] = known[name]
            continue
        first = next((v for v in values if v is not None), None)
        kind = type(first)
        if kind is bool:
            out[name] = "bool"
        elif kind is int:
            # A column of ints and floats is a float column (polars makes it Float64).
            out[name] = "f64" if any(isinstance(v, float) for v in values) else "i64"
        elif kind is str:
            out[name] = "str"
        else:
            out[name] = "f64"
    return out


def frame(t: _core.ResultTable | ParquetBytes | None) -> pl.DataFrame:
    """A `ResultTable` (its columns are freed) or `ParquetBytes` as a DataFrame; None: an empty one."""
    import io

    import polars as pl

    if t is None:
        return pl.DataFrame()
    data = t.data if isinstance(t, ParquetBytes) else t.take_parquet()
    return pl.read_parquet(io.BytesIO(data))


class ParquetBytes:
    """A table between the engine and polars: its uncompressed Parquet bytes. `TableField` keeps a
    table in this form while polars reads it, so a read that fails (out of memory, Ctrl-C) leaves the
    table to be read again, written or pickled, not lost."""

    def __init__(self, data: bytes, rows: int) -> None:
        self.data = data
        self.rows = rows


def lossy_seconds_rows(links: Iterable[tuple[int, int, list | None]]) -> list[tuple[int, int, int, float]]:
    """One row per link and lossy second of its per-second loss model: from_node, to_node, second, rate."""
    return [(a, b, int(s), float(r)) for a, b, secs in links for s, r in (secs or [])]


def lossy_seconds_result(rows: list[tuple[int, int, int, float]]) -> _core.ResultTable:
    """The `lossy_seconds` table of `lossy_seconds_rows`."""
    cols = {name: [r[i] for r in rows] for i, name in enumerate(LOSSY_TYPES)}
    return result_table(cols, LOSSY_TYPES)


def loss_process(rows: Iterable[tuple[int, int, int, float]] | pl.DataFrame) -> dict[str, Any]:
    """A run's loss process in brief: links with per-second models, lossy seconds, and a digest of the
    whole table, equal between two runs exactly when they drew the same lossy seconds and rates.
    `rows`: (from_node, to_node, second, rate) tuples, or the `lossy_seconds` DataFrame."""
    import hashlib

    if hasattr(rows, "iter_rows"):
        rows = rows.iter_rows()
    t = sorted((int(a), int(b), int(s), float(r)) for a, b, s, r in rows)
    text = ";".join(f"{a}>{b}:{s}:{r:.17g}" for a, b, s, r in t)
    return {
        "links": len({(a, b) for a, b, _, _ in t}),
        "lossy_seconds": len(t),
        "digest": hashlib.sha256(text.encode()).hexdigest()[:16],
    }


class TableField:
    """A table attribute: the engine's `ResultTable` until first read, a DataFrame from then on. Set
    it to a DataFrame to replace the table. Reading, setting, writing and pickling hold the object's
    `_tables_lock`, so threads sharing a result never find a table half handed over."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        tables = obj._tables
        t = tables.get(self.name)
        if t is None or isinstance(t, _core.ResultTable | ParquetBytes):
            with obj._tables_lock:
                t = tables.get(self.name)
                if isinstance(t, _core.ResultTable):
                    t = tables[self.name] = ParquetBytes(t.take_parquet(), t.rows)
                if t is None or isinstance(t, ParquetBytes):
                    t = tables[self.name] = frame(t)
        return t

    def __set__(self, obj: Any, value: Any) -> None:
        with obj._tables_lock:
            obj._tables[self.name] = value


def new_tables() -> tuple[dict[str, Any], threading.RLock]:
    """The state `TableField`s keep on their object (`_tables`, `_tables_lock`)."""
    return {}, threading.RLock()


class PickledTable:
    """A `ResultTable` as pickled by `tables_state` (its columns' bytes), made one again by `unpickled`."""

    def __init__(self, state: bytes) -> None:
        self.state = state


def tables_state(tables: dict[str, Any]) -> dict[str, Any]:
    """`tables` to pickle or copy: each `ResultTable` as its columns' bytes (the caller holds the
    lock), so the copy owns its tables and a reader cannot take one mid-way."""
    return {k: PickledTable(v.__getstate__()) if isinstance(v, _core.ResultTable) else v for k, v in tables.items()}


def unpickled(tables: dict[str, Any]) -> dict[str, Any]:
    """`tables_state`'s dict with its `ResultTable`s made again."""
    out = {}
    for k, v in tables.items():
        if isinstance(v, PickledTable):
            t = _core.ResultTable([])
            t.__setstate__(v.state)
            v = t
        out[k] = v
    return out


def table_rows(t: Any) -> int:
    """A table's rows, whether a `ResultTable`, a DataFrame or absent (None)."""
    if t is None:
        return 0
    return t.rows if isinstance(t, _core.ResultTable | ParquetBytes) else t.height


def write_tables(tables: dict[str, Any], names: Iterable[str], d: Path) -> dict[str, Path]:
    """Writes each table of `names` to `d/NAME.parquet`: from Rust when it was never read, else with
    polars (an absent table as an empty DataFrame; one whose read failed as its uncompressed bytes)."""
    out = {}
    for name in names:
        p = d / f"{name}.parquet"
        t = tables.get(name)
        if isinstance(t, _core.ResultTable):
            t.write(p)
        elif isinstance(t, ParquetBytes):
            p.write_bytes(t.data)
        else:
            (t if t is not None else frame(None)).write_parquet(p)
        out[name] = p
    return out
