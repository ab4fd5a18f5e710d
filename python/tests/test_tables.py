"""Result tables built by the engine (`leoguard.tables`, `_core.ResultTable`): the columns it derives
agree with the polars expressions they replaced, files are the same whichever writer wrote them,
results pickle, and `leoguard run` needs no polars."""

import copy
import io
import pickle
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from leoguard import LeoguardError, _core
from leoguard.scenario import from_dict
from leoguard.simulate import TABLES, WEBRTC_TABLES, Results, simulate
from leoguard.tables import loss_process

ROOT = Path(__file__).resolve().parents[2]


def lossy_run(**kw):
    """A lossy chain with TCP (app delay sampled), a WebRTC call, a web flow and link sampling."""
    return simulate(
        from_dict(
            {
                "name": "tables", "duration_s": 4.0, "seed": 11, "app_delay_every": 3, "link_sample_every_s": 0.05,
                "sample_every_s": 0.05,
                "topology": {
                    "kind": "chain", "hops": 2, "rate_mbps": 30, "delay_ms": 7, "queue_bytes": 200_000,
                    "loss": {"model": "bernoulli", "p": 0.01},
                },
                "flows": [
                    {"kind": "tcp", "src": 0, "dst": 2, "cc": "cubic"},
                    {"kind": "tcp", "src": 0, "dst": 1, "cc": "reno", "start_s": 0.3},
                    {"kind": "webrtc", "src": 0, "dst": 2, "bitrate_mbps": 2.0},
                    {"kind": "cbr", "src": 0, "dst": 2, "rate_mbps": 1, "size": 1000},
                ],
                **kw,
            }
        )
    )  # fmt: skip


@pytest.fixture(scope="module")
def run():
    return lossy_run()


def test_derived_columns_equal_the_polars_expressions_they_replaced(run):
    # The expressions simulate.py used before the engine derived these columns, to the last bit.
    p = run.packets
    assert p.height > 1000
    owd = ((pl.col("received_ns") - pl.col("sent_ns")).cast(pl.Float64) / 1e6).alias("owd_ms")
    assert p.select(owd).equals(p.select("owd_ms"))
    s = run.series
    dt = (pl.col("t_ns").diff().over("flow").cast(pl.Float64)) / 1e9
    goodput = (pl.col("acked_bytes").diff().over("flow").cast(pl.Float64) * 8.0 / dt).fill_null(0.0)
    assert s.height > 100 and s.select(goodput.alias("goodput_bps")).equals(s.select("goodput_bps"))
    ls = run.link_series
    util = pl.col("bytes").cast(pl.Float64) * 8.0 / (pl.col("rate_bps").cast(pl.Float64) * 0.05)
    assert ls.height > 100 and ls.select(util.alias("utilisation")).equals(ls.select("utilisation"))
    a = run.app_delay
    delay = (pl.col("delivered_ns").cast(pl.Float64) - pl.col("sent_ns").cast(pl.Float64)) / 1e6
    assert a.height > 100 and a.select(delay.alias("delay_ms")).equals(a.select("delay_ms"))
    f = run.webrtc_frames
    e2e = ((pl.col("render_ns") - pl.col("capture_ns")).cast(pl.Float64) / 1e6).alias("e2e_ms")
    jb = ((pl.col("render_ns") - pl.col("complete_ns")).cast(pl.Float64) / 1e6).alias("jb_ms")
    assert f.height > 100 and f.select(e2e, jb).equals(f.select("e2e_ms", "jb_ms"))
    # Per-flow OWD percentiles, linear between ranks, as polars' quantile (rounded as ever by Python).
    q = p.group_by("flow").agg(
        pl.col("owd_ms").quantile(0.5, "linear").alias("p50"), pl.col("owd_ms").quantile(0.99, "linear").alias("p99")
    )
    want = {r["flow"]: (round(r["p50"], 4), round(r["p99"], 4)) for r in q.iter_rows(named=True)}
    got = {r["flow"]: (r["owd_ms_p50"], r["owd_ms_p99"]) for r in run.flows.iter_rows(named=True)}
    assert len(want) == 3 and got == {**want, 2: (None, None)}  # the WebRTC flow's packets are its frames'


def test_a_one_row_table_is_divided_as_polars_divides_it():
    # polars divides a column of one value by a constant exactly, and the longer columns it reads from
    # Parquet by the reciprocal (derived.rs's unit tests: 19.439999999999998): one packet of 19.44 ms
    # (18.64 ms of propagation, 0.8 ms to send 1000 bytes at 10 Mbit/s).
    one = simulate(
        from_dict(
            {
                "name": "one", "duration_s": 0.12,
                "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 18.64},
                "flows": [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 0.1, "size": 1000}],
            }
        )
    )  # fmt: skip
    p = one.packets
    owd = ((pl.col("received_ns") - pl.col("sent_ns")).cast(pl.Float64) / 1e6).alias("owd_ms")
    assert p.height == 1 and p.with_columns(owd).equals(p) and p["owd_ms"][0] == 19.44


@pytest.mark.parametrize("pages", [[3], [0, 1, 2]])
def test_page_load_times_in_seconds_are_divided_as_polars_divides_them(pages):
    # One load (a column of one value, divided exactly) and several (times the reciprocal).
    r = simulate(
        from_dict(
            {
                "name": "web", "duration_s": 12.0, "seed": 5,
                "topology": {"kind": "chain", "hops": 2, "rate_mbps": 50, "delay_ms": 10, "queue_bytes": 500_000},
                "flows": [{"kind": "web", "src": 0, "dst": 2, "cc": "cubic", "corpus_seed": 42, "pages": pages}],
            }
        )
    )  # fmt: skip
    w = r.web
    secs = [(pl.col(f"{c}_ns").cast(pl.Float64) / 1e9).alias(f"{c}_s") for c in ("plt", "speed_index")]
    assert w.height == len(pages) and w["plt_s"].null_count() == 0
    assert w.select(secs).equals(w.select("plt_s", "speed_index_s"))
    assert w["finished"].to_list() == w["plt_ns"].is_not_null().to_list()


def test_the_summary_without_polars_agrees_with_the_tables(run):
    s = run.summary()
    links = run.links
    assert s["links"]["drops_queue"] == links["drops_queue"].sum()
    assert s["links"]["realised_loss_max"] == links["realised_loss"].max()
    (m,) = s["loss_models"]
    lossy = links.filter(pl.col("loss_model") != "none")
    assert m["links"] == lossy.height and m["offered"] == lossy["offered"].sum() > 0
    assert m["realised_loss"] == round(lossy["drops_loss"].sum() / lossy["offered"].sum(), 6)
    assert s["webrtc"] == run.webrtc.to_dicts()
    assert [f["flow"] for f in s["flows"]] == run.flows["flow"].to_list()
    rows = [(0, 1, 3, 0.25), (0, 1, 1, 0.5), (2, 1, 1, 1e-9)]
    df = pl.DataFrame(rows, schema=["from_node", "to_node", "second", "rate"], orient="row")
    assert loss_process(rows) == loss_process(df) == {**loss_process(rows[::-1]), "links": 2, "lossy_seconds": 3}


def test_files_hold_the_same_tables_whichever_writer_wrote_them(tmp_path):
    # Written from the engine's columns (zstd), or by polars after the tables were read: same data.
    untouched, read = lossy_run(), lossy_run()
    for name in (*TABLES, *WEBRTC_TABLES):
        getattr(read, name)
    untouched.write(tmp_path / "rust")
    read.write(tmp_path / "polars")
    for name in (*TABLES, *WEBRTC_TABLES):
        a = pl.read_parquet(tmp_path / "rust" / f"{name}.parquet")
        b = pl.read_parquet(tmp_path / "polars" / f"{name}.parquet")
        assert a.schema == b.schema and a.equals(b), name
    # The engine's file is zstd-compressed Parquet that polars reads without help.
    assert (tmp_path / "rust" / "packets.parquet").read_bytes()[:4] == b"PAR1"
    assert untouched.summary()["flows"] == read.summary()["flows"]


def test_results_pickle_with_their_tables(run):
    fresh = lossy_run(seed=12)
    back = pickle.loads(pickle.dumps(fresh))
    again = lossy_run(seed=12)
    for name in (*TABLES, *WEBRTC_TABLES):
        assert getattr(back, name).equals(getattr(again, name)), name
    assert back.summary()["flows"] == again.summary()["flows"]
    # A table already read pickles as its DataFrame.
    assert pickle.loads(pickle.dumps(run)).packets.equals(run.packets)


def test_a_copy_owns_its_tables_and_a_bad_path_is_an_os_error(tmp_path):
    r = lossy_run(seed=13)
    c = copy.copy(r)
    c.packets = pl.DataFrame({"x": [1]})
    assert r.packets.columns[0] == "flow" and c.packets.columns == ["x"]
    assert copy.deepcopy(r).series.equals(r.series)
    (tmp_path / "out" / "flows.parquet").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=r"flows\.parquet"):
        lossy_run(seed=13).write(tmp_path / "out")
    # A run without WebRTC flows has an empty webrtc table of the real types, not Null columns.
    plain = simulate(
        from_dict(
            {
                "name": "p", "duration_s": 0.2,
                "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
                "flows": [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 1}],
            }
        )
    )  # fmt: skip
    assert plain.webrtc.is_empty() and plain.webrtc.schema == r.webrtc.schema


def test_a_read_that_fails_leaves_the_table_to_read_again(tmp_path, monkeypatch):
    r = lossy_run(seed=14)
    real = pl.read_parquet

    def once(*a, **kw):
        monkeypatch.setattr(pl, "read_parquet", real)
        raise MemoryError("polars could not allocate")

    monkeypatch.setattr(pl, "read_parquet", once)
    with pytest.raises(MemoryError):
        r.packets  # noqa: B018
    back = pickle.loads(pickle.dumps(r))
    r.write(tmp_path / "w")
    assert r.packets.equals(lossy_run(seed=14).packets) and back.packets.equals(r.packets)
    assert pl.read_parquet(tmp_path / "w" / "packets.parquet").equals(r.packets)
    # An older leoguard's pickled results (a dataclass's fields) are refused by name.
    stale = Results.__new__(Results)
    with pytest.raises(LeoguardError, match="older leoguard"):
        stale.__setstate__({"packets": None})
    with pytest.raises(IsADirectoryError) as e:
        _core.ResultTable([("a", "i64", [1])]).write(tmp_path)
    assert e.value.strerror == "Is a directory"


def test_a_result_table_refuses_bad_columns_by_name():
    t = _core.ResultTable([("a", "u32", [1, None, 3]), ("b", "str", ["x", None, "z"])])
    assert t.rows == 3 and t.names == ["a", "b"]
    df = pl.read_parquet(io.BytesIO(t.take_parquet()))
    assert df.schema == pl.Schema({"a": pl.UInt32, "b": pl.String}) and df["a"].to_list() == [1, None, 3]
    with pytest.raises(LeoguardError, match="handed over"):
        t.take_parquet()
    with pytest.raises(LeoguardError, match="column b has 1 values where the table has 2"):
        _core.ResultTable([("a", "i64", [1, 2]), ("b", "i64", [1])])
    with pytest.raises(LeoguardError, match="two columns are named a"):
        _core.ResultTable([("a", "i64", [1]), ("a", "f64", [1.0])])
    with pytest.raises(LeoguardError, match="result column a \\(u32\\)"):
        _core.ResultTable([("a", "u32", [-1])])
    with pytest.raises(LeoguardError, match="unknown type u8"):
        _core.ResultTable([("a", "u8", [1])])
    with pytest.raises(FileNotFoundError, match=r"t\.parquet"):
        _core.ResultTable([("a", "i64", [1])]).write(Path("/nonexistent/dir/t.parquet"))


def test_leoguard_run_imports_no_polars(tmp_path):
    # polars costs a run ~100 ms of imports; `leoguard run` writes and summarises without it.
    argv = ["run", str(ROOT / "scenarios" / "bench-chain.toml"), "--duration", "0.5", "--out", str(tmp_path), "--json"]
    code = (
        "import atexit, sys; atexit.register(lambda: print('polars' in sys.modules, file=sys.stderr)); "
        f"from leoguard.cli_run import main; main({argv!r})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "False"
    assert pl.read_parquet(tmp_path / "packets.parquet").height > 0
