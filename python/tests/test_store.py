"""The result store: Parquet per run, a DuckDB catalogue, skip what is stored, lose nothing."""

import json

import pytest

from leoguard.errors import LeoguardError
from leoguard.scenario import from_dict
from leoguard.simulate import simulate
from leoguard.store import ResultStore, run_key

BASE = {
    "duration_s": 1.0,
    "topology": {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 5},
    "flows": [{"kind": "tcp", "src": "n0", "dst": "n2", "cc": "cubic", "bytes": 200000}],
}


def test_runs_are_stored_catalogued_and_skipped_when_present(tmp_path):
    sc = from_dict(BASE)
    key = run_key(sc, "none", "n0-n2")
    assert key == run_key(from_dict(BASE), "none", "n0-n2"), "same inputs, same key"
    assert key != run_key(from_dict({**BASE, "seed": 2}), "none", "n0-n2")
    assert key != run_key(sc, "satguard", "n0-n2")
    with ResultStore(tmp_path) as st:
        assert not st.has(key)
        res = simulate(sc)
        path = st.put(key, res, scheme="none", pair="n0-n2", metrics={"fct_s": res.flows["fct_s"][0]})
        assert st.has(key) and (path / "flows.parquet").exists()
        rows = st.runs()
        assert rows["run_id"].to_list() == [key] and rows["scheme"][0] == "none" and rows["seed"][0] == 1
        assert json.loads(rows["metrics"][0])["fct_s"] == pytest.approx(res.flows["fct_s"][0])
        assert st.table(key, "flows")["delivered_bytes"][0] == 200000
        q = st.query(f"SELECT delivered_bytes FROM read_parquet('{path}/flows.parquet')")
        assert q["delivered_bytes"][0] == 200000
    # Reopened: still there.
    with ResultStore(tmp_path) as st:
        assert st.has(key)


def test_a_crash_between_write_and_catalogue_loses_nothing(tmp_path):
    sc = from_dict(BASE)
    key = run_key(sc)
    with ResultStore(tmp_path) as st:
        st.put(key, simulate(sc))
        st.db.execute("DELETE FROM runs")  # as if the process died before the row was written
        (tmp_path / "runs" / ".tmp-half-written-1").mkdir()
    with ResultStore(tmp_path) as st:
        assert st.has(key), "the run directory is catalogued again"
        assert not (tmp_path / "runs" / ".tmp-half-written-1").exists(), "incomplete writes are dropped"


def test_bad_stores_and_queries_get_clear_errors(tmp_path):
    (tmp_path / "catalog.duckdb").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LeoguardError, match=r"catalogue .* cannot be read"):
        ResultStore(tmp_path)
    good = tmp_path / "good"
    with ResultStore(good) as st:
        with pytest.raises(LeoguardError, match="query failed"):
            st.query("SELECT nonsense FROM nowhere")
        with pytest.raises(LeoguardError, match="has no table"):
            st.table("missing", "flows")


def test_a_full_disk_leaves_no_partial_run_and_says_so(tmp_path, monkeypatch):
    sc = from_dict(BASE)
    res = simulate(sc)
    with ResultStore(tmp_path) as st:
        st.put("kept", res)

        def full(self, directory):
            (directory / "flows.parquet").parent.mkdir(parents=True, exist_ok=True)
            (directory / "flows.parquet").write_bytes(b"partial")
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(type(res), "write", full)
        with pytest.raises(LeoguardError, match=r"cannot store run new.*No space left"):
            st.put("new", res)
        runs = tmp_path / "runs"
        assert sorted(p.name for p in runs.iterdir()) == ["kept"], "no partial run, the finished one kept"
        assert st.has("kept") and not st.has("new")
