"""Scenarios and the packet simulator from Python: results, determinism, Parquet, bad input, CLI."""

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from leoguard import LeoguardError
from leoguard.scenario import from_dict, load_scenario
from leoguard.simulate import simulate, simulate_many

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared" / "data" / "satguard-fig5" / "plr_per_second.csv"


def chain(**kw):
    base = {
        "name": "t", "duration_s": 5.0, "seed": 3,
        "topology": {"kind": "chain", "hops": 3, "rate_mbps": 50, "delay_ms": 5, "queue_bytes": 500_000},
        "flows": [{"kind": "tcp", "src": 0, "dst": 3, "cc": "cubic"}],
    }  # fmt: skip
    base.update(kw)
    return from_dict(base)


def test_bench_chain_scenario_runs_and_fills_the_chain():
    r = simulate(ROOT / "scenarios" / "bench-chain.toml")
    s = r.summary()
    f = s["flows"][0]
    assert s["scenario"] == "bench-chain" and s["packet_hops"] > 500_000
    # 100 Mbit/s of 1500-byte packets carries 96.5 Mbit/s of payload; slow start costs a little.
    assert 85e6 < f["goodput_bps"] <= 96.6e6
    assert f["endpoint_loss"] == 0.0
    # One-way delay >= 9 hops x (2 ms + 0.12 ms serialisation).
    assert f["owd_ms"]["p50"] >= 9 * 2.12
    assert set(r.series.columns) >= {"t_ns", "cwnd_bytes", "srtt_ns", "acked_bytes", "retransmissions"}


def test_udp_probe_sees_the_configured_loss_and_tcp_hides_it():
    lossy = {"kind": "chain", "hops": 2, "rate_mbps": 100, "delay_ms": 5, "loss": {"model": "bernoulli", "p": 0.03}}
    udp = chain(
        topology=lossy, flows=[{"kind": "cbr", "src": 0, "dst": 2, "rate_mbps": 20, "size": 1250}], duration_s=10.0
    )
    f = simulate(udp).summary()["flows"][0]
    assert abs(f["endpoint_loss"] - 0.03) < 0.005
    tcp = chain(topology=lossy, flows=[{"kind": "tcp", "src": 0, "dst": 2, "cc": "cubic"}])
    t = simulate(tcp).summary()["flows"][0]
    assert t["endpoint_loss"] == 0.0 and t["retransmissions"] > 0 and t["network_loss"] > 0.02


def test_trace_replay_from_the_measurement(tmp_path):
    if not TRACE.exists():
        pytest.fail(f"measurement missing: {TRACE}")
    replay = {"model": "trace_per_second", "trace": str(TRACE), "loop": False}
    sc = chain(
        topology={"kind": "chain", "hops": 1, "rate_mbps": 100, "delay_ms": 5, "loss": replay},
        flows=[{"kind": "cbr", "src": 0, "dst": 1, "rate_mbps": 8, "size": 1000}],
        duration_s=103.0,
    )  # fmt: skip
    f = simulate(sc).summary()["flows"][0]
    assert abs(f["endpoint_loss"] - 0.0090) < 0.0015  # the trace's mean per-second loss is 0.0090


def test_same_seed_same_parquet_bytes_other_seed_differs(tmp_path):
    lossy = {"kind": "chain", "hops": 3, "rate_mbps": 50, "delay_ms": 5, "loss": {"model": "bernoulli", "p": 0.01}}
    a, b, c = simulate(chain(topology=lossy)), simulate(chain(topology=lossy)), simulate(chain(topology=lossy, seed=4))
    a.write(tmp_path / "a")
    b.write(tmp_path / "b")
    c.write(tmp_path / "c")
    for name in ("flows", "series", "packets", "links", "drops"):
        assert (tmp_path / "a" / f"{name}.parquet").read_bytes() == (tmp_path / "b" / f"{name}.parquet").read_bytes()
    assert (tmp_path / "a" / "drops.parquet").read_bytes() != (tmp_path / "c" / "drops.parquet").read_bytes()
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["seed"] == 3 and run["scenario"]["name"] == "t" and "+" in run["code_version"]


def test_runs_on_threads_give_the_bytes_of_runs_one_by_one_and_a_failure_propagates(tmp_path):
    lossy = {"kind": "chain", "hops": 3, "rate_mbps": 50, "delay_ms": 5, "loss": {"model": "bernoulli", "p": 0.01}}
    scs = [chain(topology=lossy, seed=s, duration_s=3.0) for s in (3, 4, 5)]
    started = []
    one = simulate_many(scs, workers=1)
    two = simulate_many(scs, workers=2, on_start=started.append)
    assert sorted(started) == [0, 1, 2]
    for i, (a, b) in enumerate(zip(one, two, strict=True)):
        assert b.scenario.seed == scs[i].seed
        a.write(tmp_path / f"a{i}")
        b.write(tmp_path / f"b{i}")
        for name in ("flows", "series", "packets", "links", "drops"):
            assert (tmp_path / f"a{i}" / f"{name}.parquet").read_bytes() == (
                tmp_path / f"b{i}" / f"{name}.parquet"
            ).read_bytes(), (i, name)
    missing = chain(
        topology={"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1,
                  "loss": {"model": "trace_per_second", "trace": str(tmp_path / "missing.csv")}},
        flows=[{"kind": "tcp", "src": 0, "dst": 1}],
    )  # fmt: skip
    with pytest.raises(LeoguardError, match="cannot read loss trace"):
        simulate_many([scs[0], missing, scs[1]], workers=2)
    with pytest.raises(LeoguardError, match="workers must be at least 1, got 0"):
        simulate_many(scs, workers=0)


@pytest.mark.parametrize(
    ("patch", "pattern"),
    [
        (
            {"topology": {"kind": "chain", "hops": 3, "rate_mbps": -5, "delay_ms": 5}},
            r"topology.chain.rate_mbps: .*greater than 0",
        ),
        ({"flows": [{"kind": "tcp", "src": 0, "dst": 3, "cc": "vegas"}]}, r"flows.0.cc: .*'vegas'"),
        (
            {
                "topology": {
                    "kind": "chain",
                    "hops": 3,
                    "rate_mbps": 5,
                    "delay_ms": 5,
                    "loss": {"model": "bernoulli", "p": 1.5},
                }
            },
            r"topology.chain.loss.p: .*less than or equal to 1",
        ),
        ({"flows": [{"kind": "tcp", "src": 0, "dst": 9}]}, r"flows\[0\].dst = 9 is not a node"),
        ({"flows": [{"kind": "cbr", "src": 0, "dst": 3}]}, r"cbr flow needs rate_mbps"),
        ({"colour": "blue"}, r"colour: Extra inputs are not permitted"),
        ({"duration_s": 0}, r"duration_s: .*greater than 0"),
    ],
)
def test_bad_scenarios_name_the_field(patch, pattern):
    with pytest.raises(LeoguardError, match=pattern):
        chain(**patch)


def test_unreadable_files(tmp_path):
    with pytest.raises(LeoguardError, match="cannot read scenario"):
        load_scenario(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(LeoguardError, match="not valid TOML"):
        load_scenario(bad)
    missing = {"model": "trace_per_second", "trace": "missing.csv"}
    sc = chain(
        topology={"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1, "loss": missing},
        flows=[{"kind": "tcp", "src": 0, "dst": 1}],
    )
    with pytest.raises(LeoguardError, match="cannot read loss trace"):
        simulate(sc, base_dir=tmp_path)


def test_cli_run_json_and_bench(tmp_path):
    def cli(*a):
        return subprocess.run([sys.executable, "-m", "leoguard.cli", *a], capture_output=True, text=True, timeout=300)

    p = cli("run", str(ROOT / "scenarios" / "chain-loss.toml"), "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert len(s["flows"]) == 2 and {"goodput_bps", "retransmissions", "endpoint_loss", "owd_ms"} <= set(s["flows"][0])
    assert set(s["flows"][0]["owd_ms"]) == {"p50", "p99"}
    assert (tmp_path / "packets.parquet").exists()
    b = json.loads(cli("bench", "sim", "--only", "bench-chain", "--json").stdout)
    assert {"name", "packet_hops", "wall_s", "sim_s"} <= set(b["scenarios"][0])
    bad = tmp_path / "bad.toml"
    bad.write_text('duration_s = 1\n[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n')
    p = cli("run", str(bad))
    assert p.returncode == 2 and "needs a [topology]" in p.stderr


def leo(**kw):
    topo = {"kind": "leo-path", "a": "New York", "b": "London", "rate_mbps": 50, "gsl_loss": {"model": "starlink"}}
    topo.update(kw)
    return from_dict(
        {"name": "leo", "duration_s": 20.0, "seed": 2, "topology": topo, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]}
    )


def test_a_leo_path_scenario_follows_the_constellation():
    r = simulate(leo())
    f = r.summary()["flows"][0]
    assert f["delivered_bytes"] > 0 and f["endpoint_loss"] == 0.0
    # Every packet crossed at least the up- and downlink; its one-way delay is at least the path's
    # propagation delay, whose minimum over the run is 23.5 ms (New York - London, global schedule).
    assert r.packets["hops"].min() >= 2
    assert r.packets["owd_ms"].min() >= 23.4
    # The Starlink model lost packets on the ground links, and handover interruptions took links down.
    assert r.links["drops_loss"].sum() > 0 and r.links["drops_down"].sum() + r.links["drops_loss"].sum() > 0


def test_leo_path_rules():
    with pytest.raises(LeoguardError, match=r"flows\[0\].dst = 2 is not a node \(0..1\)"):
        from_dict(
            {"duration_s": 1, "topology": {"kind": "leo-path", "a": "New York", "b": "London", "rate_mbps": 10},
             "flows": [{"kind": "tcp", "src": 0, "dst": 2}]}
        )  # fmt: skip
    with pytest.raises(LeoguardError, match="unknown city"):
        simulate(leo(a="Qwxzville"))


def test_the_tcp_sections_switches_are_the_cores_and_hystart_is_one():
    from leoguard import _core
    from leoguard.emu.transport import recovery_spec
    from leoguard.sections import Tcp

    assert set(Tcp.model_fields) - {"recovery"} == set(_core.TCP_SWITCHES)
    d = {"duration_s": 5, "topology": {"kind": "chain", "hops": 2, "rate_mbps": 100, "delay_ms": 25,
         "queue_packets": 2000}, "flows": [{"kind": "tcp", "src": 0, "dst": 2, "cc": "cubic"}]}  # fmt: skip
    retx = {}
    for on in (True, False):
        sc = from_dict(d | {"tcp": {"hystart": on}})
        retx[on] = simulate(sc).flows.row(0, named=True)["retransmissions"]
        assert recovery_spec(sc) == f"linux,hystart={'on' if on else 'off'}"
    # HyStart's ACK-train test ends slow start before the 2000-packet queue overflows; without it slow
    # start runs into the queue and loses a window's worth.
    assert retx[True] == 0 and retx[False] > 1000, retx


def _leo_path(seed: int = 1, **flow) -> dict:
    """New York - London on a leo-path with the `starlink` model on the ground links (12 s)."""
    return {
        "name": "crn",
        "duration_s": 12.0,
        "seed": seed,
        "topology": {
            "kind": "leo-path", "constellation": "starlink-shell1", "a": "New York", "b": "London",
            "policy": "global-schedule", "step_s": 0.1, "rate_mbps": 50, "gsl_loss": {"model": "starlink"},
        },
        "flows": [{"kind": "tcp", "src": 0, "dst": 1, "cc": "cubic", **flow}],
    }  # fmt: skip


def test_the_lossy_seconds_are_the_same_whatever_the_traffic_or_scheme():
    """Common random numbers (docs/loss-models.md): the `starlink` model's lossy seconds are drawn from
    streams keyed by (seed, link, second), so a bulk CUBIC flow, a slow BBR flow and a protected flow
    see the same lossy seconds, while the packets they lose differ; another seed is another process."""
    bulk = simulate(from_dict(_leo_path()))
    slow = from_dict(_leo_path(cc="bbr", bytes=200_000))
    slow = simulate(slow)
    guarded = simulate(from_dict({**_leo_path(), "satguard": {}}))
    assert len(bulk.lossy_seconds) > 0
    for other in (slow, guarded):
        assert other.lossy_seconds.equals(bulk.lossy_seconds)
        assert other.summary()["loss_process"] == bulk.summary()["loss_process"]
    assert bulk.links["drops_loss"].to_list() != slow.links["drops_loss"].to_list()
    reseeded = simulate(from_dict(_leo_path(seed=2)))
    assert reseeded.summary()["loss_process"]["digest"] != bulk.summary()["loss_process"]["digest"]


def test_a_leo_path_flow_starting_at_zero_finds_its_route():
    """The routes of a leo-path's first step are the network's initial state (as on the emulator): a
    flow starting at t = 0 loses nothing to "no route" and gets its first ACK within one RTT, instead
    of losing its initial window and waiting for a 1 s RTO."""
    d = _leo_path()
    d["topology"].pop("gsl_loss")
    r = simulate(from_dict({**d, "duration_s": 2.0}))
    reasons = r.drops["reason"].to_list() if "reason" in r.drops.columns else []
    assert "no-route" not in reasons, r.drops
    first_ack = r.series.filter(r.series["acked_bytes"] > 0)["t_ns"].min()
    assert first_ack is not None and first_ack <= 200_000_000, first_ack
    assert r.flows.row(0, named=True)["rtos"] == 0


def test_the_engines_tables_keep_their_types_and_nulls():
    # The large tables come over from the engine as Parquet (leoguard_core::parquet): unsigned
    # columns stay unsigned, flags Boolean, and a segment never delivered is a null, not a 0.
    r = simulate(chain(duration_s=3.0, app_delay_every=5))
    assert dict(r.packets.schema) == {
        "flow": pl.UInt32, "seq": pl.UInt64, "sent_ns": pl.UInt64, "received_ns": pl.UInt64,
        "retransmission": pl.Boolean, "hops": pl.UInt16, "owd_ms": pl.Float64,
    }  # fmt: skip
    assert r.packets.height > 1000 and r.packets["hops"].unique().to_list() == [3]
    assert dict(r.series.schema) == {
        "flow": pl.UInt32, "t_ns": pl.UInt64, "cwnd_bytes": pl.UInt64, "in_flight_bytes": pl.UInt64,
        "srtt_ns": pl.UInt64, "acked_bytes": pl.UInt64, "retransmissions": pl.UInt64, "goodput_bps": pl.Float64,
    }  # fmt: skip
    assert dict(r.link_series.schema) == {
        "t_ns": pl.UInt64, "from_node": pl.UInt32, "to_node": pl.UInt32, "bytes": pl.UInt64, "rate_bps": pl.UInt64,
        "queue_bytes": pl.UInt64, "drops": pl.UInt64, "up": pl.Boolean, "utilisation": pl.Float64,
    }  # fmt: skip
    assert r.link_series["up"].all() and r.link_series["rate_bps"].unique().to_list() == [50_000_000]
    a = r.app_delay
    assert dict(a.schema) == {
        "flow": pl.UInt32,
        "seq": pl.UInt64,
        "sent_ns": pl.UInt64,
        "delivered_ns": pl.UInt64,
        "delay_ms": pl.Float64,
    }
    # The segments still in flight when the run ends were sampled but never delivered.
    assert a.height > 100 and 0 < a["delivered_ns"].null_count() < a.height
    assert (a["delivered_ns"].drop_nulls() > 0).all()


def test_a_run_and_its_results_need_no_numpy(tmp_path):
    # numpy costs `leoguard run` about 70 ms of imports; the results no longer cross through it.
    code = (
        "import sys; from leoguard.simulate import simulate; "
        f"r = simulate({str(ROOT / 'scenarios' / 'bench-chain.toml')!r}); "
        f"r.write({str(tmp_path / 'out')!r}); r.summary(); "
        "assert r.packets.height > 0; print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_tables_of_runs_with_and_without_drops_or_hops_concatenate():
    # A run that dropped nothing and ran no per-hop scheme has empty drops and hops tables; they keep
    # the columns and types of a run that filled them, so a sweep's tables concatenate.
    loss = {"model": "bernoulli", "p": 0.02}
    clean = simulate(chain(duration_s=1.0))
    lossy = simulate(chain(duration_s=1.0, topology={**chain().topology.model_dump(exclude_none=True), "loss": loss}))
    hop = simulate(chain(duration_s=1.0, satguard={"process_all": True}))
    assert clean.drops.is_empty() and not lossy.drops.is_empty() and clean.hops.is_empty() and not hop.hops.is_empty()
    for name in ("drops", "hops", "series", "link_series"):
        frames = [getattr(r, name) for r in (clean, lossy, hop)]
        assert len({tuple(f.schema.items()) for f in frames}) == 1, name
        assert pl.concat(frames).height == sum(f.height for f in frames)
