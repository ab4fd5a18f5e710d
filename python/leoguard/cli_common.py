"""What the command line's modules share: the console, the `--json` and `--store` options and the JSON
printer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console()

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
StoreOpt = Annotated[Path, typer.Option("--store", help="The result store's directory.")]


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
