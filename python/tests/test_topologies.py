"""Dumbbell, two-path and whole-constellation topologies; several flows per node; link time series;
progress reports and interrupted runs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from leoguard import LeoguardError
from leoguard.scenario import from_dict, load_scenario
from leoguard.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]


def test_dumbbell_flows_share_the_bottleneck_and_its_series_shows_it():
    sc = load_scenario(ROOT / "scenarios" / "dumbbell.toml", duration_s=10.0)
    r = simulate(sc)
    f = r.flows
    assert f["src"].to_list() == ["s0", "s1", "s2"] and f["dst"].to_list() == ["r0", "r1", "r2"]
    assert all(g > 1e6 for g in f["goodput_bps"]), f["goodput_bps"].to_list()
    # Together they deliver no more payload than the bottleneck carries (1448 of every 1500 bytes).
    assert f["delivered_bytes"].sum() * 8 <= 50e6 * 10.0 * 1448 / 1500
    # The bottleneck (left -> right) is busy once all flows run, never above capacity (+ one packet
    # per interval, since arrivals are counted whole).
    b = r.link_series.filter((pl.col("from_node") == 0) & (pl.col("to_node") == 1) & (pl.col("t_ns") > 5e9))
    assert b.height >= 45
    # (BBR's probe_rtt drains the pipe for 200 ms every 10 s, so single intervals may dip.)
    assert b["utilisation"].mean() > 0.9
    assert b["utilisation"].max() <= 1.0 + 1500 * 8 / (50e6 * 0.1)
    # Per-pair delays differ by their access links: 1, 5 and 20 ms each way (x 2 access links). Flow 0
    # starts alone, so its fastest packet sees empty queues: 2 x 1 ms + 10 ms, plus serialisation of
    # 1500 bytes at 1 Gbit/s twice and at 50 Mbit/s once. The later flows start into a queue the
    # earlier ones keep, so their fastest packet is at least their propagation delay.
    owd = [r.packets.filter(pl.col("flow") == i)["owd_ms"].min() for i in range(3)]
    assert owd[0] == pytest.approx(12.0 + 2 * 0.012 + 0.24, abs=0.001)
    assert owd[0] < owd[1] < owd[2]
    assert owd[1] - owd[0] >= 2 * 4.0 - 0.001 and owd[2] - owd[0] >= 2 * 19.0 - 0.001


def test_two_path_switches_every_period():
    sc = from_dict(
        {"duration_s": 4.0, "topology": {"kind": "two-path", "switch_every_s": 1.0,
         "paths": [{"rate_mbps": 20, "delay_ms": 10}, {"rate_mbps": 20, "delay_ms": 50}]},
         "flows": [{"kind": "cbr", "src": "src", "dst": "dst", "rate_mbps": 1, "size": 1000}]}
    )  # fmt: skip
    r = simulate(sc)
    p = r.packets.with_columns((pl.col("sent_ns") // 1_000_000_000).alias("second"))
    by = p.group_by("second").agg(pl.col("owd_ms").min().alias("lo"), pl.col("owd_ms").max().alias("hi")).sort("second")
    # Path 0 (10 ms) in even seconds, path 1 (50 ms) in odd ones; 1000 B at 20 Mbit/s is 0.4 ms per link.
    for row in by.iter_rows(named=True):
        expect = 10.8 if row["second"] % 2 == 0 else 50.8
        assert row["lo"] == pytest.approx(expect, abs=0.01) and row["hi"] == pytest.approx(expect, abs=0.01)
    assert r.flows["endpoint_loss"][0] == 0.0


def test_a_whole_constellation_carries_many_flows_between_named_places(tmp_path):
    sc = load_scenario(ROOT / "scenarios" / "starlink-constellation.toml", duration_s=16.0)
    r = simulate(sc)
    f = r.flows
    assert f["src"].to_list() == ["New York", "Paris", "Tokyo", "Sydney"]
    assert f["dst"].to_list() == ["server-lon", "server-lon", "Sydney", "New York"]
    assert (f["goodput_bps"] > 1e6).all(), f["goodput_bps"].to_list()
    # Every delivered packet crossed at least an uplink and a downlink; flows to the server add the
    # terrestrial hop. One-way delays are at least the great-circle distance at light speed
    # (Paris - London 344 km: 1.1 ms; Sydney - New York 15,990 km: 53 ms).
    assert r.packets["hops"].min() >= 2
    by = r.packets.group_by("flow").agg(pl.col("owd_ms").min()).sort("flow")["owd_ms"].to_list()
    assert by[1] > 1.1 + 2.0 and by[3] > 53.0
    # The 12 s handover epoch interrupts ground links: drops while links are down.
    assert (r.drops["reason"] == "down").sum() > 0
    # Links carry names; the series covers ISLs and ground links.
    names = set(r.links.filter(pl.col("delivered") > 0)["from_name"].to_list())
    assert {"New York", "Paris", "Tokyo", "Sydney", "server-lon"} <= names
    assert any(n.startswith("starlink-shell1-") for n in names)
    # The loss model and the loss it realised are reported (Starlink model: mean ~0.9 %).
    (lm,) = r.summary()["loss_models"]
    assert lm["model"] == "starlink" and "mean_rate=" in lm["params"] and lm["links"] >= 10
    assert 0.001 < lm["realised_loss"] < 0.05
    files = r.write(tmp_path)
    assert json.loads(files["run"].read_text())["complete"] is True
    assert pl.read_parquet(files["link_series"]).height == r.link_series.height


def test_constellation_topology_rules():
    topo = {"kind": "constellation", "ground": ["New York", "London"], "gsl_rate_mbps": 10, "isl_rate_mbps": 10}
    base = {"duration_s": 1, "topology": topo, "flows": [{"kind": "tcp", "src": "New York", "dst": "Lima"}]}
    with pytest.raises(LeoguardError, match=r"flows\[0\].dst = 'Lima' is not a node name"):
        from_dict(base)
    base["flows"][0]["dst"] = "London"
    # A pair is attached jointly by best-path; three places cannot be.
    base["topology"]["policy"] = "best-path"
    from_dict(base)
    base["topology"]["ground"] = ["New York", "London", "Paris"]
    with pytest.raises(LeoguardError, match=r"topology\.constellation: .*policy = 'best-path' attaches a pair"):
        from_dict(base)
    base["topology"]["ground"] = ["New York", "London"]
    base["topology"]["policy"] = "nearest"
    base["topology"]["hosts"] = [{"name": "srv", "ground": "Paris"}]
    with pytest.raises(LeoguardError, match=r"hosts\[0\].ground = 'Paris' is not one of the ground places"):
        simulate(from_dict(base))


def test_progress_is_reported_and_an_interrupt_keeps_partial_results(tmp_path):
    sc = load_scenario(ROOT / "scenarios" / "bench-chain.toml")
    seen = []

    def progress(now_s, end_s, hops):
        seen.append((now_s, hops))
        if len(seen) == 2:
            raise KeyboardInterrupt

    r = simulate(sc, progress=progress, interruptible=True)
    assert not r.complete and 0 < r.simulated_s < sc.duration_s
    assert r.simulated_s == seen[-1][0] and r.packet_hops == seen[-1][1]
    assert r.packets["received_ns"].max() <= r.simulated_s * 1e9
    files = r.write(tmp_path)
    meta = json.loads(files["run"].read_text())
    assert meta["complete"] is False and meta["simulated_s"] == r.simulated_s
    seen.clear()
    with pytest.raises(KeyboardInterrupt):
        simulate(sc, progress=progress)


def test_cli_interrupt_writes_partial_results(tmp_path):
    # SIGINT the CLI while it runs a long scenario: it must say so, keep what it has and exit 130.
    sc = tmp_path / "long.toml"
    sc.write_text(
        (ROOT / "scenarios" / "bench-chain.toml").read_text().replace("duration_s = 5.0", "duration_s = 3000.0")
    )
    exe = Path(sys.executable).parent / "leoguard"
    cmd = [exe, "run", sc, "--out", tmp_path / "out", "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Interrupt once the process has used 4 s of CPU (start-up takes about 1 s), however loaded the
    # machine is.
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= 4.0:
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted" in err and "partial results" in err
    summ = json.loads(out)
    assert summ["complete"] is False and 0 < summ["simulated_s"] < 3000
    assert json.loads((tmp_path / "out" / "run.json").read_text())["complete"] is False


def test_satguard_on_a_lossy_chain_hides_loss_from_a_marked_flow():
    base = {
        "duration_s": 6.0,
        "topology": {"kind": "chain", "hops": 3, "rate_mbps": 50, "delay_ms": 5,
                     "loss": {"model": "bernoulli", "p": 0.03}, "loss_on": "all"},
        "flows": [{"kind": "cbr", "src": "n0", "dst": "n3", "rate_mbps": 2, "size": 1000, "delay_sensitive": True}],
    }  # fmt: skip
    plain = simulate(from_dict(base)).flows["endpoint_loss"][0]
    guarded = simulate(from_dict({**base, "satguard": {}})).flows["endpoint_loss"][0]
    assert plain > 0.05
    assert guarded <= plain / 100
    with pytest.raises(LeoguardError, match=r"satguard.buffer_bytes"):
        from_dict({**base, "satguard": {"buffer_bytes": 0}})


def _per_second_mbps(packets: pl.DataFrame, size: int, seconds: int, skip_ms: float = 0.0) -> list[int]:
    """Received Mbit/s in each whole second (arrival less `skip_ms` of propagation after the last bit)."""
    t = ((pl.col("received_ns") - int(skip_ms * 1e6) - 1) // 1_000_000_000).alias("s")
    by = packets.with_columns(t).group_by("s").agg((pl.len() * size * 8 / 1e6).alias("mbps"))
    got = dict(zip(by["s"].to_list(), by["mbps"].to_list(), strict=True))
    return [round(got.get(s, 0.0)) for s in range(seconds)]


def test_a_chain_with_a_square_wave_bottleneck_delivers_a_rate_that_alternates_every_second():
    # 3 hops of 20 Mbit/s; the middle one alternates 12 / 4 Mbit/s each second. 10 Mbit/s of CBR gets
    # through whole in the first second, then the link's capacity each second (the backlog drains at 12).
    sc = from_dict(
        {"duration_s": 6.0, "topology": {"kind": "chain", "hops": 3, "rate_mbps": 20, "delay_ms": 5,
         "queue_packets": 100_000, "rate_schedule": {"period_s": 2, "rates_mbps": [12, 4]}, "rate_schedule_on": [1]},
         "flows": [{"kind": "cbr", "src": 0, "dst": 3, "rate_mbps": 10, "size": 1250}]}
    )  # fmt: skip
    links = sc.to_core()["links"]
    assert [lk.get("rate_schedule") for lk in links] == [None, {"period_s": 2, "rates_bps": [12e6, 4e6]}, None]
    assert [lk["rate_bps"] for lk in links] == [20e6, 8e6, 20e6], "a scheduled link's nominal rate is its mean"
    r = simulate(sc)
    # After the middle link's last bit: one 5 ms link and 0.5 ms of serialisation at 20 Mbit/s.
    assert _per_second_mbps(r.packets, 1250, 6, skip_ms=5.5) == [10, 4, 12, 4, 12, 4]
    # On every link: an explicit [[links]] entry takes the same schedule.
    d = {"duration_s": 4.0, "links": [{"a": 0, "b": 1, "delay_ms": 1, "queue_packets": 100_000,
         "rate_schedule": {"period_s": 2, "rates_mbps": [12, 4]}}],
         "flows": [{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 10, "size": 1250}]}  # fmt: skip
    assert _per_second_mbps(simulate(from_dict(d)).packets, 1250, 4, skip_ms=1) == [10, 4, 12, 4]


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"period_s": 0, "rates_mbps": [11, 9]}, r"rate_schedule\.period_s: Input should be greater than 0"),
        ({"period_s": 2, "rates_mbps": []}, r"rate_schedule\.rates_mbps: List should have at least 1 item"),
        ({"period_s": 2, "rates_mbps": [11, 0]}, r"rate_schedule\.rates_mbps\.1: Input should be greater than 0"),
        ({"period_s": 2, "rates_mbps": [1e12]}, r"rate_schedule\.rates_mbps\.0: Input should be less than or equal"),
        ({"period_s": 1e-7, "rates_mbps": [1]}, r"rate_schedule: period_s = 1e-07 gives each of the 1"),
        ({"rates_mbps": [1]}, r"rate_schedule\.period_s: Field required"),
    ],
)
def test_a_bad_rate_schedule_is_refused_naming_the_field(schedule, field):
    link = {"a": 0, "b": 1, "delay_ms": 1, "rate_schedule": schedule}
    with pytest.raises(LeoguardError, match=rf"links\.0\.{field}"):
        from_dict({"duration_s": 1, "links": [link], "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})
    chain = {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 1, "rate_schedule": schedule}
    with pytest.raises(LeoguardError, match=rf"topology\.chain\.{field}"):
        from_dict({"duration_s": 1, "topology": chain, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})


def test_rate_schedule_on_names_links_of_the_chain_and_the_core_checks_the_schedule_again():
    chain = {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 1, "rate_schedule_on": [2],
             "rate_schedule": {"period_s": 2, "rates_mbps": [11, 9]}}  # fmt: skip
    with pytest.raises(LeoguardError, match=r"topology\.chain: rate_schedule_on = \[2\]: 2 is not a link"):
        from_dict({"duration_s": 1, "topology": chain, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})
    chain = {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 1, "rate_schedule_on": [0]}
    with pytest.raises(LeoguardError, match=r"rate_schedule_on needs a rate_schedule"):
        from_dict({"duration_s": 1, "topology": chain, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})
    # Rust validates again, naming the field: a rate pydantic passes but that rounds to 0 bit/s.
    link = {"a": 0, "b": 1, "delay_ms": 1, "rate_schedule": {"period_s": 2, "rates_mbps": [10, 1e-7]}}
    sc = from_dict({"duration_s": 1, "links": [link], "flows": [{"kind": "tcp", "src": 0, "dst": 1}]})
    with pytest.raises(LeoguardError, match=r"^invalid links\[0\]\.rate_schedule\.rates_bps\[1\] = 0: must be in"):
        simulate(sc)
