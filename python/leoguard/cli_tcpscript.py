"""`leoguard tcp-script FILE.pkt...`: runs packetdrill scripts against leoguard's own TCP model
(docs/packetdrill.md). Each file gets one line, `pass`, `fail: line N: expected ..., got ...` or
`unsupported: <feature>`; the exit status is 1 if any file did not pass."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from leoguard.cli_common import JsonOpt, _emit, console
from leoguard.errors import LeoguardError


def run_tcp_script(path: Path) -> dict[str, Any]:
    """Runs one script file; returns {"file", "outcome", "message", ...} as the Rust runner reports it
    (`line`, `expected`, `got`, `syntax` for a failure, `line`, `feature` for an unsupported feature).
    Raises LeoguardError, naming the file, when it cannot be read."""
    from leoguard import _core

    p = Path(path)
    if p.is_dir():
        raise LeoguardError(f"invalid script {p}: it is a directory, not a .pkt file")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LeoguardError(f"invalid script {p}: no such file") from None
    except PermissionError:
        raise LeoguardError(f"invalid script {p}: the file is not readable") from None
    except UnicodeDecodeError:
        raise LeoguardError(f"invalid script {p}: not a UTF-8 text file") from None
    except OSError as e:
        raise LeoguardError(f"invalid script {p}: {e.strerror or e}") from None
    return {"file": str(p), **_core.tcp_script_run(text)}


def tcp_script(
    files: Annotated[list[Path], typer.Argument(help="packetdrill scripts (.pkt) to run.", show_default=False)],
    as_json: JsonOpt = False,
) -> None:
    """Run packetdrill scripts against the TCP model (the script's local TCP is the model's sender).
    Prints, per file, `pass`, `fail: line N: expected ..., got ...` or `unsupported: <feature>`; with
    --json, one JSON object per file. Exits with status 1 if any file did not pass."""
    # Read every file first, so that a missing one is reported before any script runs.
    for f in files:
        if not Path(f).is_file():
            run_tcp_script(f)  # raises the one-line error naming the file
    results = [run_tcp_script(f) for f in files]
    for r in results:
        if as_json:
            _emit(r)
        else:
            console.print(f"{r['file']}: {r['message']}", markup=False, highlight=False, soft_wrap=True)
    if any(r["outcome"] != "pass" for r in results):
        raise typer.Exit(1)
