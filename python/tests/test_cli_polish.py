"""What a user notices at once: flags read as switches, --version, JSON errors, tables that fit 80
columns without cutting a header or a value."""

import json

import pytest

from leoguard.badinputs import CHAIN, Case, run_case


def cli(tmp_path, *argv, files=None):
    return run_case(Case("polish", list(argv), "", files or {}), tmp_path)


def test_flags_are_switches_in_the_help(tmp_path):
    o = cli(tmp_path, "run", "--help")
    assert o.status == 0
    assert "--json " in o.stdout and "<bool>" not in o.stdout
    assert "<bool>" not in cli(tmp_path, "--help").stdout


def test_version(tmp_path):
    from leoguard import __version__

    o = cli(tmp_path, "--version")
    assert (o.status, o.stdout) == (0, f"leoguard {__version__}\n")


def test_with_json_an_error_is_a_json_object_on_stdout_and_one_line_on_stderr(tmp_path):
    o = cli(tmp_path, "run", "s.toml", "--json", files={"s.toml": CHAIN.replace("duration_s = 0.2", "duration_s = -1")})
    assert o.status == 2
    obj = json.loads(o.stdout)
    assert obj["field"] == "duration_s" and "duration_s" in obj["error"]
    assert o.stderr.count("\n") == 1 and o.stderr.startswith("error: ")
    usage = cli(tmp_path, "run", "s.toml", "--bogus", "--json", files={"s.toml": CHAIN})
    assert usage.status == 2 and json.loads(usage.stdout)["field"] == "--bogus"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "s.toml", "--out", "out/r"],
        ["constellation", "info", "starlink-gen1"],
        ["constellation", "list"],
        ["beams", "London", "New York", "Sao Paulo"],
        ["places", "find", "Sao Paulo"],
        ["places", "top", "5"],
    ],
)
def test_tables_fit_80_columns_without_cutting(tmp_path, argv):
    two_flows = CHAIN + '[[flows]]\nkind = "cbr"\nsrc = 0\ndst = 1\nrate_mbps = 1\ndelay_sensitive = true\n'
    o = cli(tmp_path, *argv, files={"s.toml": two_flows})
    assert o.status == 0, o.stderr
    lines = o.stdout.splitlines()
    assert lines and max(len(ln) for ln in lines) <= 80, o.stdout
    assert "…" not in o.stdout, o.stdout
    assert "shape:" not in o.stdout and "Place(" not in o.stdout  # no polars or Python repr


def test_the_result_stores_list_fits_80_columns(tmp_path):
    from leoguard.scenario import from_dict
    from leoguard.simulate import simulate
    from leoguard.store import ResultStore, run_key

    sc = from_dict({"name": "chain-loss", "duration_s": 0.2, "topology": {"kind": "chain", "hops": 1,
                    "rate_mbps": 10, "delay_ms": 1}, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})  # fmt: skip
    res = simulate(sc)
    with ResultStore(tmp_path / "store") as st:
        for scheme in ("satguard", "satguard-no-beam-timers"):
            st.put(run_key(sc, scheme, "NYC-LON"), res, scheme=scheme, pair="NYC-LON")
    o = cli(tmp_path, "results", "list", "--store", "store")
    assert o.status == 0, o.stderr
    assert max(len(ln) for ln in o.stdout.splitlines()) <= 80 and "…" not in o.stdout, o.stdout
    assert run_key(sc, "satguard", "NYC-LON") in o.stdout  # the id whole: `results query` takes it
