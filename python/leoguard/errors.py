"""leoguard's error type: every input or model error is a `LeoguardError` (a `ValueError`) whose
message names the offending field and value; and `read_user_text`, through which every file a user
names (a scenario, a loss trace) is read, so a missing or non-UTF-8 file is such an error too."""

import math
import numbers
from pathlib import Path
from typing import Any

from leoguard._core import LeoguardError

__all__ = ["LeoguardError", "make_dir", "read_user_text", "shown"]


def read_user_text(path: Path, what: str) -> str:
    """The UTF-8 text of the file at `path`, which the user gave as a `what` (e.g. "scenario"). A file
    that cannot be read or is not UTF-8 raises a one-line `LeoguardError` naming the file and, for bad
    bytes, where the first one is (TOML and our CSVs must be UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LeoguardError(f"cannot read {what} {path}: {e.strerror}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start
        line = data.count(b"\n", 0, at) + 1
        col = at - (data.rfind(b"\n", 0, at) + 1) + 1
        raise LeoguardError(
            f"invalid {what} {path}: not UTF-8 text (byte 0x{data[at]:02x} at offset {at}, line {line}, column {col})"
        ) from e


def make_dir(path: str | Path, what: str = "output directory") -> Path:
    """Creates the directory `path` (and its parents) for results; a place that cannot hold one (a
    file in the way, no permission, a read-only or virtual file system) is a one-line `LeoguardError`."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LeoguardError(f"cannot create the {what} {p}: {e.strerror or e}") from e
    return p


def shown(value: Any, limit: int = 60) -> str:
    """A value as an error message shows it: a huge integer as ~10**N, other numbers as written, anything
    else by repr; longer than `limit` characters, cut with the full length said (an argument may be
    megabytes, and a message is one line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"{'-' if value < 0 else ''}~10**{int(value.bit_length() * math.log10(2))}"
    if isinstance(value, str) and len(value) > limit:
        head = repr(value[:limit])
        return f"{head[:-1]}…{head[-1]} ({len(value)} characters)"
    text = str(value) if isinstance(value, numbers.Real) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
