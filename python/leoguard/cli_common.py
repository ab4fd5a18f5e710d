"""What the command line's modules share: the console, the `--json`, `--store` and `--out` options,
the JSON printer, the output-place checks, and `main`'s error handling (one line, exit status 2)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from leoguard.cli_out import (  # noqa: F401  (re-exported for the commands)
    _emit,
    check_out_dir,
    check_out_file,
    error_field,
    fail,
    table,
)
from leoguard.errors import LeoguardError

console = Console()


def new_app(help: str) -> typer.Typer:
    """A Typer app (or sub-app) of leoguard's: plain help text (no rich panels: rendering them imports
    rich's markdown stack, half of `leoguard --help`'s time), no pretty tracebacks (a user error is one
    line; anything else is a bug and prints Python's plain traceback)."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False)


def out_dir_cb(value: Path | None) -> Path | None:
    """Typer callback for an `--out` directory (Typer passes the value to a one-parameter callback)."""
    return check_out_dir(value, "--out")


def store_dir_cb(value: Path | None) -> Path | None:
    """Typer callback for a `--store` the command writes."""
    return check_out_dir(value, "--store")


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
StoreOpt = Annotated[Path, typer.Option("--store", help="The result store's directory.")]
WriteStoreOpt = Annotated[Path, typer.Option("--store", help="The result store's directory.", callback=store_dir_cb)]
"""A store this command writes: checked before any run."""


def run_app(app: typer.Typer, argv: list[str] | None = None) -> None:
    """Runs the Typer app: user errors (LeoguardError, bad options and arguments) are one line and exit
    status 2; --help and a command's own exit status pass through."""
    try:  # Typer >= 0.2x vendors click as typer._click; older Typer uses click itself.
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover - depends on the installed Typer
        from click import exceptions as click_exc  # type: ignore[no-redef]

    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    try:
        rc = app(args=args, prog_name="leoguard", standalone_mode=False)
    except LeoguardError as e:
        fail(str(e), as_json, getattr(e, "field", None))
    except click_exc.NoArgsIsHelpError as e:
        sys.stdout.write((e.ctx.get_help() if e.ctx else "") + "\n")  # a group named alone: its help
        sys.exit(2)
    except click_exc.UsageError as e:
        param = getattr(e, "param", None)
        field = getattr(e, "option_name", None) or (param.opts[0] if param is not None and param.opts else None)
        cmd = e.ctx.command_path.partition(" ")[2] if e.ctx else ""
        fail(e.format_message() + (f" (in `leoguard {cmd}`)" if cmd else ""), as_json, field)
    except click_exc.ClickException as e:
        fail(e.format_message(), as_json)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
