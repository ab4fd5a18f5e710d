"""The CLI as a user runs it: help everywhere, --json output, files written, clear errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = [
    [],
    ["constellation"],
    ["constellation", "list"],
    ["constellation", "info"],
    ["constellation", "export-tle"],
    ["path"],
    ["beams"],
    ["places"],
    ["places", "top"],
    ["places", "find"],
    ["bench"],
    ["bench", "constellation"],
    ["bench", "sim"],
    ["run"],
    ["ablation"],
    ["results"],
    ["results", "list"],
    ["results", "query"],
    ["demo"],
]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "leoguard.cli", *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"leoguard {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "root")
def test_every_command_has_help(cmd):
    out = run(*cmd, "--help").stdout
    assert "Usage" in out


def test_constellation_info_json():
    info = json.loads(run("constellation", "info", "starlink-shell1", "--json").stdout)
    assert info["satellites"] == 1584 and info["isls"] == 3168
    assert info["shells"][0]["planes"] == 72


def test_path_json_summary_and_files(tmp_path):
    out = tmp_path / "p"
    s = json.loads(run("path", "New York", "London", "--duration", "30", "--out", str(out), "--json").stdout)
    assert set(s["rtt_ms"]) == {"min", "median", "p99", "max"}
    assert s["steps"] == 300 and isinstance(s["handovers"], int) and s["outage_s"] == 0.0
    for name in ("steps.parquet", "handovers.parquet", "outages.parquet", "slots.parquet", "params.json", "path.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "path.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_path_from_a_tle_file(tmp_path):
    tle = tmp_path / "s1.tle"
    run("constellation", "export-tle", "starlink-shell1", str(tle))
    args = ["path", "New York", "Philadelphia", "--tle", str(tle), "--duration", "5", "--step", "1"]
    args += ["--no-plot", "--policy", "best-path", "--out", str(tmp_path / "o"), "--json"]
    s = json.loads(run(*args).stdout)
    # TLE shells have no ISLs: the path is bent pipe through one satellite both cities see.
    assert s["steps"] == 5 and s["reachable_fraction"] == 1.0 and s["hops"]["max"] == 2
    assert s["rtt_ms"]["min"] > 4 * 550 / 299792.458 * 1e3


def test_bench_json_small():
    r = json.loads(run("bench", "constellation", "--cities", "5", "--duration", "1", "--json").stdout)
    assert {"snapshots", "ground_stations", "wall_s"} <= set(r)
    assert r["snapshots"] == 10 and r["ground_stations"] == 5


def test_errors_are_one_clear_line_with_status_2(tmp_path):
    p = run("path", "Qwxzville", "London", "--out", str(tmp_path), check=False)
    assert p.returncode == 2
    assert "unknown city 'Qwxzville'" in p.stderr and "Traceback" not in p.stderr
    p = run("path", "New York", "London", "--step", "0", "--out", str(tmp_path), check=False)
    assert p.returncode == 2 and "step_s = 0" in p.stderr
    p = run("constellation", "info", "--tle", str(Path(tmp_path) / "none.tle"), check=False)
    assert p.returncode == 2 and "cannot read TLE file" in p.stderr


def test_results_list_and_query_on_a_store(tmp_path):
    from leoguard.scenario import from_dict
    from leoguard.simulate import simulate
    from leoguard.store import ResultStore, run_key

    sc = from_dict({"duration_s": 0.5, "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
                    "flows": [{"kind": "cbr", "src": "n0", "dst": "n1", "rate_mbps": 1, "size": 500}]})  # fmt: skip
    with ResultStore(tmp_path) as st:
        st.put(run_key(sc), simulate(sc), scheme="none")
    rows = json.loads(run("results", "list", "--store", str(tmp_path), "--json").stdout)
    assert [r["scheme"] for r in rows] == ["none"]
    q = json.loads(run("results", "query", "SELECT count(*) AS n FROM runs", "--store", str(tmp_path), "--json").stdout)
    assert q == [{"n": 1}]
    bad = run("results", "query", "SELECT * FROM nowhere", "--store", str(tmp_path), check=False)
    assert bad.returncode == 2 and "query failed" in bad.stderr
