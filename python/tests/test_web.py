"""The web browsing workload from Python: the corpus tables, a TOML scenario with a web flow, errors."""

from __future__ import annotations

import polars as pl
import pytest

from leoguard import web
from leoguard.errors import LeoguardError
from leoguard.scenario import load_scenario
from leoguard.simulate import simulate

TOML = """
name = "web-chain"
duration_s = 12.0
seed = 5

[topology]
kind = "chain"
hops = 2
rate_mbps = 50
delay_ms = 10
queue_bytes = 500000

[[flows]]
kind = "web"
src = 0
dst = 2
cc = "cubic"
http = "{http}"
corpus_seed = 42
pages = {pages}
think_s = 0.5
"""


def scenario(tmp_path, http="2", pages="{first = 0, count = 4}"):
    p = tmp_path / "web.toml"
    p.write_text(TOML.format(http=http, pages=pages))
    return load_scenario(p)


def test_corpus_table_matches_the_objects_and_is_reproducible():
    c = web.corpus(seed=42, n=200)
    assert c.height == 200 and c["page"].to_list() == list(range(200))
    assert web.corpus(seed=42, n=5).equals(c.head(5))
    # Medians near the Web Almanac's (70 requests, ~16 hosts, 2.0 MB): see corpus.rs for the tolerance.
    assert 56 <= c["objects"].median() <= 84 and 12 <= c["origins"].median() <= 20
    assert 1.4e6 <= c["bytes"].median() <= 2.6e6
    o = web.page_objects(42, 3)
    row = c.filter(pl.col("page") == 3).row(0, named=True)
    assert o.height == row["objects"] and o["size"].sum() == row["bytes"]
    assert o["origin"].n_unique() == row["origins"]
    assert o["parent"][0] is None and o["type"][0] == "html"
    assert set(o["type"]) <= {"html", "css", "js", "image", "font", "other"}


def test_a_web_flow_from_toml_reports_page_loads(tmp_path):
    r = simulate(scenario(tmp_path))
    w = r.web
    assert {"flow", "page", "start_ns", "plt_s", "speed_index_s", "objects", "bytes", "connections"} <= set(w.columns)
    assert w["page"].to_list() == list(range(w.height)) and w.height >= 2
    done = w.filter(pl.col("finished"))
    assert done.height >= 1
    assert (done["speed_index_s"] <= done["plt_s"]).all()
    # Path RTT 40 ms: DNS, TCP and TLS each take at least one round trip before the HTML.
    assert (done["plt_s"] > 0.12).all() and (done["objects_done"] == done["objects"]).all()
    s = r.summary()
    assert s["web"][0]["loads"] == w.height and s["web"][0]["finished"] == done.height
    f = s["flows"][0]
    assert f["kind"] == "web" and f["delivered_bytes"] >= done["bytes"].sum()


def test_http1_opens_more_connections_than_http2(tmp_path):
    h1 = simulate(scenario(tmp_path, http="1.1", pages="[3]")).web.row(0, named=True)
    h2 = simulate(scenario(tmp_path, http="2", pages="[3]")).web.row(0, named=True)
    assert h2["connections"] == h2["origins"] < h1["connections"]


@pytest.mark.parametrize(
    ("http", "pages", "field"),
    [("3", "[0]", "http"), ("2", "[]", "pages"), ("2", "[0, 5000]", "pages[1]"), ("2", "{count = 0}", "count")],
)
def test_bad_web_flows_name_the_field(tmp_path, http, pages, field):
    with pytest.raises(LeoguardError, match=field.replace("[", r"\[")):
        scenario(tmp_path, http=http, pages=pages)


def test_object_rows_explain_the_page_load_time(tmp_path):
    r = simulate(scenario(tmp_path, pages="[0, 1]"))
    done = r.web.filter(pl.col("finished"))
    objs = r.web_objects
    for row in done.iter_rows(named=True):
        o = objs.filter(pl.col("load") == row["load"])
        assert o.height == row["objects"]
        # onload is the last object's completion; every object is requested before it completes.
        assert o["done_ns"].max() == row["plt_ns"]
        assert (o["requested_ns"] < o["done_ns"]).all()
        # A child is requested only after its parent is complete (discovery on completion).
        parents = o.join(
            o.select(pl.col("object").alias("parent"), pl.col("done_ns").alias("parent_done")), on="parent"
        )
        assert (parents["requested_ns"] >= parents["parent_done"]).all()
