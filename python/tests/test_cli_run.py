"""`leoguard run` without the command front (`cli_run.py`): it must read a command line as the Typer
command does, leave everything else to Typer, and give the same output and errors."""

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import typer

from leoguard.cli import app
from leoguard.cli_run import RUN_PARAMS, parse_run

ROOT = Path(__file__).resolve().parents[2]
CHAIN = str(ROOT / "scenarios" / "bench-chain.toml")

# The entry point, reporting on stderr whether the command front (Typer) was imported.
ENTRY = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write(f'\\nfront={\"typer\" in sys.modules}\\n')); "
    "from leoguard.cli_run import main; main()"
)


def typer_run_command():
    return typer.main.get_command(app).commands["run"]


def test_the_typer_command_has_no_option_the_reader_lacks():
    assert tuple(p.name for p in typer_run_command().params) == RUN_PARAMS


def test_the_program_enters_through_the_reader():
    eps = [e for e in entry_points(group="console_scripts") if e.name == "leoguard"]
    assert [e.value for e in eps] == ["leoguard.cli_run:main"]


@pytest.mark.parametrize(
    "args",
    [
        ["s.toml"],
        ["s.toml", "--json"],
        ["--json", "s.toml", "--seed", "7"],
        ["s.toml", "--seed=7", "--duration", "0.5", "--out", "o"],
        ["s.toml", "--out=o/p", "--duration=1e-1", "--json", "--json"],
        ["s.toml", "--seed", "3", "--seed", "4"],
        ["s.toml", "--duration", "-1"],
        ["s.toml", "--seed", " 1_0"],
        ["s.toml", "--duration", "nan"],
    ],
)
def test_a_command_line_reads_as_typer_reads_it(args):
    mine = parse_run(args)
    assert mine is not None, args
    ctx = typer_run_command().make_context("run", list(args))
    theirs = dict(ctx.params)
    if theirs["duration"] != theirs["duration"]:  # nan
        assert mine["duration"] != mine["duration"]
        mine["duration"] = theirs["duration"] = None
    assert mine == theirs


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["s.toml", "--help"],
        ["a.toml", "b.toml"],
        ["s.toml", "--seed", "x"],
        ["s.toml", "--seed", "1.5"],
        ["s.toml", "--seed"],
        ["s.toml", "--out", "--json"],
        ["s.toml", "--verbose"],
        ["s.toml", "--json=1"],
        ["--", "s.toml"],
        ["-x.toml"],
    ],
)
def test_anything_else_is_left_to_typer(args):
    assert parse_run(args) is None


def _leoguard(args, front=False):
    cmd = [sys.executable, "-m", "leoguard.cli", *args] if front else [sys.executable, "-c", ENTRY, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_run_gives_what_the_typer_command_gives_without_importing_the_front(tmp_path):
    outs = {}
    for front in (False, True):
        out = tmp_path / ("front" if front else "plain")
        p = _leoguard(["run", CHAIN, "--duration", "0.3", "--json", "--out", str(out)], front=front)
        assert p.returncode == 0, p.stderr
        summ = json.loads(p.stdout)
        for k in ("wall_s", "run_s", "files"):
            summ.pop(k)
        outs[front] = summ
        if not front:
            assert "front=False" in p.stderr
            assert (out / "flows.parquet").exists()
    assert outs[False] == outs[True]
    # The table for people goes through the same printer.
    p = _leoguard(["run", CHAIN, "--duration", "0.2", "--out", str(tmp_path / "t")])
    assert p.returncode == 0 and "results in" in p.stdout and "front=False" in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["run", "no-such-file.toml", "--json"],
        ["run", CHAIN, "--out", CHAIN],
        ["run", CHAIN, "--duration", "-1"],
        ["run", CHAIN, "--seed", "x"],
        ["run", "--help"],
    ],
)
def test_errors_and_help_are_the_typer_commands(args, tmp_path):
    a, b = _leoguard(args), _leoguard(args, front=True)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout)
    assert a.stderr.split("\nfront=")[0].strip() == b.stderr.strip()


def test_the_startup_bench_times_whole_runs_and_names_what_the_imports_cost():
    from leoguard.bench import startup_bench

    r = startup_bench(runs=1)
    assert r["runs"] == 1 and 0 < r["wall_s"]["min"] == r["wall_s"]["median"] == r["wall_s"]["max"]
    # The chain's 1 s: about 93 k packet-hops, so the run did simulate and print its summary.
    assert r["packet_hops"] > 50_000
    # pydantic (the scenario's models) is what the process loads; numpy and polars no longer.
    assert "pydantic" in r["imports_ms"] and "polars" not in r["imports_ms"]
    assert r["numpy_imported"] is False and r["polars_imported"] is False
