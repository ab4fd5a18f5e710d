"""Measured traces: `RttTrace` (probe send times and RTTs) and `ThroughputTrace` (bits per interval),
and `read_trace`, which reads one from a file whose format it recognises by content: an iperf3 `-J`
report, the MMSys'24 Starlink ping text (time, seq, RTT ms) or an irtt CSV with a header. The model side
builds the same types directly (`fmt="model"`), so every statistic applies to both.

Every bad input is a one-line `LeoguardError` naming the file, the 1-based line and the field
(`ping.txt:17: field 'rtt': 'abc' is not a number`). Readers write nothing."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from leoguard.errors import LeoguardError, read_user_text, shown

__all__ = ["KNOWN_FORMATS", "RttTrace", "ThroughputTrace", "read_trace"]

KNOWN_FORMATS = (
    "iperf3 JSON (an object with 'intervals')",
    "mmsys24 ping text (3 columns: send time, seq, rtt_ms)",
    "irtt CSV (a header with 'timestamp' and 'rtt')",
)


def _f64(a: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class RttTrace:
    """RTT probes: `t` send times (UTC Unix s, non-decreasing), `rtt_ms` (NaN = lost), optional one-way
    delays `up_ms`/`down_ms` (NaN = unknown or lost). `fmt` is "mmsys24-ping", "irtt-csv" or "model"."""

    source: str
    fmt: str
    t: np.ndarray
    rtt_ms: np.ndarray
    up_ms: np.ndarray | None = None
    down_ms: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "t", _f64(self.t))
        object.__setattr__(self, "rtt_ms", _f64(self.rtt_ms))
        for name in ("up_ms", "down_ms"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, _f64(v))
        n = len(self.t)
        if self.t.ndim != 1 or self.rtt_ms.shape != (n,):
            raise LeoguardError(f"{self.source}: field 'rtt_ms': {len(self.rtt_ms)} values for {n} send times")
        for name in ("up_ms", "down_ms"):
            v = getattr(self, name)
            if v is not None and v.shape != (n,):
                raise LeoguardError(f"{self.source}: field '{name}': {len(v)} values for {n} send times")
        if not np.isfinite(self.t).all():
            raise LeoguardError(f"{self.source}: field 't': send times must be finite")
        if n > 1 and (np.diff(self.t) < 0).any():
            i = int(np.argmax(np.diff(self.t) < 0)) + 1
            raise LeoguardError(
                f"{self.source}: field 't': send time {i} goes backwards ({self.t[i]} < {self.t[i - 1]})"
            )

    def __len__(self) -> int:
        return len(self.t)

    @property
    def start(self) -> float:
        """The first send time (UTC Unix s); NaN for an empty trace."""
        return float(self.t[0]) if len(self.t) else math.nan

    @property
    def end(self) -> float:
        """The last send time (UTC Unix s); NaN for an empty trace."""
        return float(self.t[-1]) if len(self.t) else math.nan

    @property
    def loss_rate(self) -> float:
        """The share of probes without a reply; NaN for an empty trace."""
        return float(np.isnan(self.rtt_ms).mean()) if len(self.t) else math.nan

    def window(self, t0: float, t1: float) -> RttTrace:
        """The probes sent in [t0, t1)."""
        keep = (self.t >= t0) & (self.t < t1)

        def cut(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[keep]

        return RttTrace(self.source, self.fmt, self.t[keep], self.rtt_ms[keep], cut(self.up_ms), cut(self.down_ms))

    def halves(self) -> tuple[RttTrace, RttTrace]:
        """The trace split at the midpoint in time between its first and last probe."""
        mid = (self.start + self.end) / 2
        return self.window(-math.inf, mid), self.window(mid, math.inf)


@dataclass(frozen=True, eq=False)
class ThroughputTrace:
    """Goodput intervals: `t_start`/`t_end` (UTC Unix s), `bits` moved in each, optional sender
    `retransmits` per interval and the TCP `mss`. `direction` is "downlink", "uplink" or "unknown"."""

    source: str
    fmt: str
    direction: str
    t_start: np.ndarray
    t_end: np.ndarray
    bits: np.ndarray
    retransmits: np.ndarray | None = None
    mss: int | None = None

    def __post_init__(self) -> None:
        for name in ("t_start", "t_end", "bits"):
            object.__setattr__(self, name, _f64(getattr(self, name)))
        if self.retransmits is not None:
            object.__setattr__(self, "retransmits", _f64(self.retransmits))
        n = len(self.t_start)
        for name in ("t_end", "bits", "retransmits"):
            v = getattr(self, name)
            if v is not None and v.shape != (n,):
                raise LeoguardError(f"{self.source}: field '{name}': {len(v)} values for {n} intervals")
        if not (np.isfinite(self.t_start).all() and np.isfinite(self.t_end).all()):
            raise LeoguardError(f"{self.source}: field 't_start': interval times must be finite")
        if (self.t_end < self.t_start).any():
            raise LeoguardError(f"{self.source}: field 't_end': an interval ends before it starts")
        if n > 1 and (np.diff(self.t_start) < 0).any():
            raise LeoguardError(f"{self.source}: field 't_start': interval starts go backwards")

    def __len__(self) -> int:
        return len(self.t_start)

    @property
    def start(self) -> float:
        """The start of the first interval (UTC Unix s); NaN for an empty trace."""
        return float(self.t_start[0]) if len(self.t_start) else math.nan

    @property
    def end(self) -> float:
        """The end of the last interval (UTC Unix s); NaN for an empty trace."""
        return float(self.t_end.max()) if len(self.t_end) else math.nan

    def window(self, t0: float, t1: float) -> ThroughputTrace:
        """The intervals whose midpoint lies in [t0, t1) (so halves share no interval)."""
        mid = (self.t_start + self.t_end) / 2
        keep = (mid >= t0) & (mid < t1)
        rt = None if self.retransmits is None else self.retransmits[keep]
        return ThroughputTrace(
            self.source, self.fmt, self.direction, self.t_start[keep], self.t_end[keep], self.bits[keep], rt, self.mss
        )

    def halves(self) -> tuple[ThroughputTrace, ThroughputTrace]:
        """The trace split at the midpoint in time between its start and end."""
        mid = (self.start + self.end) / 2
        return self.window(-math.inf, mid), self.window(mid, math.inf)


# ---- reading --------------------------------------------------------------------------------------


def read_trace(path: str | Path) -> RttTrace | ThroughputTrace:
    """Reads a measured trace, recognising the format by content: a JSON object with "intervals" (iperf3
    `-J`), three numeric whitespace-separated columns (MMSys'24 ping) or a CSV header naming `timestamp`
    and `rtt` (irtt). Any problem is a one-line `LeoguardError` naming file, line and field."""
    p = Path(path)
    text = read_user_text(p, "trace")
    lines = text.splitlines()
    first = next(((i + 1, ln.strip()) for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        raise LeoguardError(f"{p}:1: field 'rows': no data rows (the file is empty)")
    lineno, head = first
    if head.startswith(("{", "[")):
        return _read_iperf3(p, text)
    cells = [c.strip().lower() for c in head.split(",")]
    if "timestamp" in cells and "rtt" in cells:
        return _read_irtt(p, lines)
    toks = head.split()
    if len(toks) == 3 and all(_is_number(x) for x in toks):
        return _read_ping(p, lines)
    raise LeoguardError(
        f"{p}:{lineno}: field 'format': unknown trace format {shown(head, 40)} (known: {'; '.join(KNOWN_FORMATS)})"
    )


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _number(p: Path, line: int, field: str, s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise LeoguardError(f"{p}:{line}: field '{field}': {shown(s)} is not a number") from None


def _time(p: Path, line: int, field: str, s: str) -> float:
    """A send time: Unix seconds, or (irtt) ISO 8601 with a timezone; finite."""
    s = s.strip()
    if _is_number(s):
        v = float(s)
    else:
        try:
            d = datetime.fromisoformat(s)
        except ValueError:
            raise LeoguardError(
                f"{p}:{line}: field '{field}': {shown(s)} is neither Unix seconds nor an ISO 8601 time"
            ) from None
        if d.tzinfo is None:
            raise LeoguardError(f"{p}:{line}: field '{field}': {shown(s)} has no timezone (add Z or +00:00)")
        v = d.timestamp()
    if not math.isfinite(v):
        raise LeoguardError(f"{p}:{line}: field '{field}': {shown(s)} is not a finite time")
    return v


def _delay(p: Path, line: int, field: str, s: str) -> float:
    """A delay in ms: -1 means lost (NaN); any other negative or non-finite value is an error."""
    v = _number(p, line, field, s)
    if v == -1.0:
        return math.nan
    if not math.isfinite(v) or v < 0:
        raise LeoguardError(f"{p}:{line}: field '{field}': {shown(s)} is not a delay in ms (>= 0, or -1 = lost)")
    return v


def _check_order(p: Path, line: int, field: str, t: float, prev: tuple[float, int] | None) -> None:
    if prev is not None and t < prev[0]:
        raise LeoguardError(
            f"{p}:{line}: field '{field}': {t!r} goes backwards (line {prev[1]} has {prev[0]!r}); "
            "times must not decrease"
        )


def _read_ping(p: Path, lines: list[str]) -> RttTrace:
    """MMSys'24 ping text: send time (Unix s), seq, RTT ms (-1 = lost); blank and # lines skipped."""
    t: list[float] = []
    rtt: list[float] = []
    prev: tuple[float, int] | None = None
    for i, raw in enumerate(lines, start=1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        toks = s.split()
        if len(toks) != 3:
            raise LeoguardError(f"{p}:{i}: field 'columns': expected 3 (time, seq, rtt), got {len(toks)}")
        ti = _time(p, i, "time", toks[0])
        seq = _number(p, i, "seq", toks[1])
        if not (math.isfinite(seq) and seq == int(seq)):
            raise LeoguardError(f"{p}:{i}: field 'seq': {shown(toks[1])} is not a whole number")
        _check_order(p, i, "time", ti, prev)
        prev = (ti, i)
        t.append(ti)
        rtt.append(_delay(p, i, "rtt", toks[2]))
    if not t:
        raise LeoguardError(f"{p}:{len(lines) + 1}: field 'rows': no data rows")
    return RttTrace(str(p), "mmsys24-ping", np.array(t), np.array(rtt))


_IRTT_ALIASES = {"timestamp": "timestamp", "rtt": "rtt", "uplink": "up", "up": "up", "downlink": "down", "down": "down"}


def _read_irtt(p: Path, lines: list[str]) -> RttTrace:
    """irtt CSV: a header naming timestamp, rtt and optionally uplink/up, downlink/down (ms, -1 = lost)."""
    rows = csv.reader(lines)
    header: list[str] | None = None
    col: dict[str, int] = {}
    t: list[float] = []
    vals: dict[str, list[float]] = {"rtt": [], "up": [], "down": []}
    prev: tuple[float, int] | None = None
    for row in rows:
        i = rows.line_num
        if not any(c.strip() for c in row):
            continue
        if header is None:
            header = [c.strip().lower() for c in row]
            for j, name in enumerate(header):
                key = _IRTT_ALIASES.get(name)
                if key is not None:
                    if key in col:
                        raise LeoguardError(f"{p}:{i}: field '{name}': the column appears twice")
                    col[key] = j
            continue
        if len(row) != len(header):
            raise LeoguardError(f"{p}:{i}: field 'columns': expected {len(header)} like the header, got {len(row)}")
        ti = _time(p, i, "timestamp", row[col["timestamp"]])
        _check_order(p, i, "timestamp", ti, prev)
        prev = (ti, i)
        t.append(ti)
        for key in vals:
            if key in col:
                vals[key].append(_delay(p, i, key, row[col[key]]))
    if not t:
        raise LeoguardError(f"{p}:{len(lines) + 1}: field 'rows': no data rows after the header")

    def opt(key: str) -> np.ndarray | None:
        return np.array(vals[key]) if key in col else None

    return RttTrace(str(p), "irtt-csv", np.array(t), np.array(vals["rtt"]), opt("up"), opt("down"))


def _line_of(text: str, key: str, occurrence: int = 0) -> int:
    """The 1-based line of the `occurrence`-th JSON key `key` (quoted) in `text` (1 if absent): JSON has
    no line numbers after parsing, and iperf3 writes one key per line."""
    needle = f'"{key}"'
    at = -1
    for _ in range(occurrence + 1):
        at = text.find(needle, at + 1)
        if at < 0:
            return 1
    return text.count("\n", 0, at) + 1


def _get(obj: Any, dotted: str) -> Any:
    for k in dotted.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def _read_iperf3(p: Path, text: str) -> ThroughputTrace:
    """iperf3 `-J` output: `intervals[i].sum` (start/end s from the test start, bytes, retransmits),
    `start.timestamp.timesecs` (UTC), `start.test_start.reverse` (1 = downlink). Omitted (-O) intervals
    are skipped."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise LeoguardError(f"{p}:{e.lineno}: field 'json': not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(doc, dict):
        raise LeoguardError(f"{p}:1: field 'json': an iperf3 report is a JSON object, not {type(doc).__name__}")
    if "error" in doc:
        raise LeoguardError(f"{p}:{_line_of(text, 'error')}: field 'error': iperf3 reported {shown(doc['error'])}")
    intervals = doc.get("intervals")
    if not isinstance(intervals, list) or not intervals:
        raise LeoguardError(
            f"{p}:{_line_of(text, 'intervals')}: field 'intervals': missing or empty (no iperf3 interval reports)"
        )
    ts = _get(doc, "start.timestamp.timesecs")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise LeoguardError(
            f"{p}:{_line_of(text, 'timesecs')}: field 'start.timestamp.timesecs': {shown(ts)} is not a Unix time"
        )
    reverse = _get(doc, "start.test_start.reverse")
    direction = {1: "downlink", 0: "uplink"}.get(reverse, "unknown") if isinstance(reverse, int) else "unknown"
    mss = _get(doc, "start.tcp_mss_default")
    mss = mss if isinstance(mss, int) and not isinstance(mss, bool) and mss > 0 else None

    t0: list[float] = []
    t1: list[float] = []
    bits: list[float] = []
    rtx: list[float] = []
    prev_end = -math.inf

    def fail(k: int, field: str, msg: str) -> NoReturn:
        # the line is only looked up on error: searching per interval would be quadratic
        raise LeoguardError(f"{p}:{_line_of(text, 'sum', k)}: field 'intervals[{k}].{field}': {msg}")

    for k, iv in enumerate(intervals):
        s = iv.get("sum") if isinstance(iv, dict) else None
        if not isinstance(s, dict):
            fail(k, "sum", "missing")
        if s.get("omitted") is True:
            continue
        got = {}
        for name in ("start", "end", "bytes"):
            v = s.get(name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                fail(k, f"sum.{name}", f"{shown(v)} is not a number >= 0")
            got[name] = float(v)
        if got["end"] < got["start"]:
            fail(k, "sum.end", f"{got['end']} is before its start {got['start']}")
        if got["start"] < prev_end - 1e-6:
            fail(k, "sum.start", f"{got['start']} goes backwards (the previous interval ends at {prev_end})")
        prev_end = got["end"]
        t0.append(ts + got["start"])
        t1.append(ts + got["end"])
        bits.append(8.0 * got["bytes"])
        r = s.get("retransmits")
        rtx.append(float(r) if isinstance(r, int | float) and not isinstance(r, bool) else math.nan)
    if not t0:
        raise LeoguardError(f"{p}:{_line_of(text, 'intervals')}: field 'intervals': all omitted")
    r_arr = np.array(rtx)
    retransmits = None if np.isnan(r_arr).all() else r_arr
    return ThroughputTrace(
        str(p), "iperf3-json", direction, np.array(t0), np.array(t1), np.array(bits), retransmits, mss
    )
