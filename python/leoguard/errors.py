"""leoguard's error type: every input or model error is a `LeoguardError` (a `ValueError`) whose
message names the offending field and value; and `read_user_text`, through which every file a user
names (a scenario, a loss trace) is read, so a missing or non-UTF-8 file is such an error too."""

from pathlib import Path

from leoguard._core import LeoguardError

__all__ = ["LeoguardError", "make_dir", "read_user_text"]


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
