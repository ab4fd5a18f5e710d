"""What the command line's commands share that needs neither Typer nor rich at import time: output
checks, the JSON line, user errors. `leoguard run` uses it alone (`cli_run.py`), so a run does not
pay for the command front's imports; `cli_common` re-exports it for the other commands."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError


def check_out_dir(path: Path | None, option: str = "--out") -> Path | None:
    """Refuses, before any work, an output directory that cannot be made: an existing file, a parent
    that is a file or not writable, a name too long for the file system. Creates nothing."""
    if path is None:
        return None
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise LeoguardError(f"invalid {option} {p}: it is a file, not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise LeoguardError(f"invalid {option} {p}: the directory is not writable")
        return p
    _check_creatable(p, option)
    return p


def check_out_file(path: Path | None, option: str) -> Path | None:
    """Refuses, before any work, an output file that cannot be written: a directory, a parent that is a
    file or cannot be created, a file that is not writable. Creates nothing (the writer makes the
    parent directories)."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise LeoguardError(f"invalid {option} {p}: it is a directory, not a file")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise LeoguardError(f"invalid {option} {p}: the file is not writable")
        return p
    _check_creatable(p, option)
    return p


def _check_name_lengths(p: Path, option: str) -> None:
    long = next((part for part in p.parts if len(os.fsencode(part)) > 255), None)
    if long is not None:
        raise LeoguardError(f"invalid {option}: the name {long[:40]}… is longer than 255 bytes")


def _check_creatable(p: Path, option: str) -> None:
    _check_name_lengths(p, option)
    anc = p.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise LeoguardError(f"invalid {option} {p}: {anc} is a file, not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise LeoguardError(f"invalid {option} {p}: cannot create it, {anc} is not writable")


def table(*headers: str, wrap: tuple[int, ...] = ()) -> Any:
    """A compact rich table for an 80-column terminal: no outer border, one space between columns,
    headers and numbers never cut (columns in `wrap`, such as names, fold onto more lines instead)."""
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, padding=(0, 1))
    for i, h in enumerate(headers):
        t.add_column(h, no_wrap=i not in wrap, overflow="fold")
    return t


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")


_FIELDS = (
    re.compile(r"^invalid scenario \S+: ([\w.\[\]-]+): "),  # a scenario field, as pydantic names it
    re.compile(r"^invalid (--?[\w-]+|[A-Za-z_][\w.\[\]]*) (?:= |\S)"),  # invalid seed = -1 / invalid --out x
    re.compile(r"^(--?[\w-]+|[A-Za-z_][\w.\[\]]*) = "),  # flows[0].src = 7 is not a node
    re.compile(r"^(--[\w-]+)\b"),  # --engine 'x': choose ...
)


def error_field(message: str) -> str | None:
    """The field or option an error message names first (`seed` in "invalid seed = -1: ..."), or None."""
    for pat in _FIELDS:
        m = pat.match(message)
        if m:
            return m.group(1)
    return None


def fail(message: str, as_json: bool, field: str | None = None) -> None:
    """Prints a user error as one line on stderr (and, with --json, as {"error", "field"} on stdout);
    exits with status 2."""
    from rich.console import Console
    from rich.markup import escape

    line = " ".join(message.split())
    if len(line) > 400:
        line = line[:400] + f"… ({len(line)} characters)"
    if as_json:
        _emit({"error": line, "field": field if field is not None else error_field(line)})
    Console(stderr=True, soft_wrap=True, highlight=False).print(f"[red]error:[/] {escape(line)}")
    sys.exit(2)
