"""The liquid data tunnel (docs/liquid.md): `leoguard reproduce liquid` shortened to 20 s flows holds
the study's qualitative result, the `[liquid]` section is validated with field-named errors, and the
codec benchmark reports positive throughputs."""

import json
import subprocess
import sys

import pytest

from leoguard import LeoguardError
from leoguard.reproduce import liquid as rl
from leoguard.scenario import from_dict, load_scenario


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    out = tmp_path_factory.mktemp("liquid")
    return rl.reproduce(out=out, flow_s=20.0), out


def rows(r):
    return {(x["cc"], x["tunnel"]): x for x in r.rows}


def test_cubic_collapses_without_coding_and_holds_the_target_with_it(repro):
    r, _ = repro
    x = rows(r)
    plain, coded = x[("cubic", False)], x[("cubic", True)]
    # The target is 10 Mbit/s; ~1 % loss at a ~42 ms RTT holds CUBIC to a few Mbit/s (Mathis).
    assert plain["goodput_bps"] < 6e6, plain
    assert coded["goodput_bps"] > 9e6, coded

    # Linux's RACK resends packets the tunnel releases late (its reordering window is min_rtt/4);
    # those are DSACKed. Resends of data that was really missing fall by far more than 4x.
    def real(x):
        return x["retransmissions"] - x["spurious_retransmissions"]

    assert real(coded) * 4 < real(plain), (plain, coded)
    # The tunnel recovered blocks and lost none; its overhead is reported.
    assert coded["blocks_recovered"] > 0 and coded["blocks_lost"] == 0
    assert coded["overhead"] >= 0.1
    # CUBIC's window: small without coding, far larger with it (the study's cwnd plot).
    s = r.series
    cw = {t: s.filter((s["cc"] == "cubic") & (s["tunnel"] == t))["cwnd"].median() for t in (False, True)}
    assert cw[True] > 2 * cw[False], cw


def test_bbr_retransmissions_fall_by_an_order_of_magnitude(repro):
    r, _ = repro
    x = rows(r)
    plain, coded = x[("bbr", False)], x[("bbr", True)]
    assert plain["goodput_bps"] > 9e6 and coded["goodput_bps"] > 9e6
    assert coded["retransmissions"] * 8 < plain["retransmissions"], (plain, coded)


def test_outputs_are_written(repro):
    r, out = repro
    assert (out / "liquid.png").stat().st_size > 10_000
    table = (out / "table.md").read_text()
    assert "| bbr | no |" in table and "1767" in table and "81" in table
    assert json.loads((out / "rows.json").read_text()) == r.rows
    assert set(r.rows[0]) >= {"cc", "tunnel", "goodput_bps", "retransmissions"}


def test_cli_json_rows(tmp_path):
    cmd = [sys.executable, "-m", "leoguard.cli", "reproduce", "liquid", "--flow-s", "3", "--json"]
    p = subprocess.run([*cmd, "--out", str(tmp_path)], capture_output=True, text=True, check=True)
    got = json.loads(p.stdout)
    assert [(x["cc"], x["tunnel"]) for x in got] == [("cubic", False), ("cubic", True), ("bbr", False), ("bbr", True)]


def base():
    return load_scenario(rl.SCENARIO).model_dump(exclude_none=True)


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        ({"repair_ratio": -0.1}, r"repair_ratio"),
        ({"symbol_size": 8}, r"symbol_size"),
        ({"idle_ms": 6.0}, r"idle_ms"),
        ({"abandon_ms": 2.0}, r"abandon_ms"),
        ({"flows": []}, r"flows"),
        ({"unknown_key": 1}, r"unknown_key"),
    ],
)
def test_bad_liquid_fields_are_named(edit, pattern):
    d = base()
    d["liquid"] |= edit
    with pytest.raises(LeoguardError, match=pattern):
        from_dict(d)


def test_liquid_runs_alone_and_only_on_tcp_flows():
    d = base()
    d["tambur"] = {}
    with pytest.raises(LeoguardError, match=r"\[liquid\] runs instead of \[tambur\]"):
        from_dict(d)
    d = base()
    d["liquid"]["flows"] = [3]
    sc = from_dict(d)
    from leoguard.simulate import simulate

    with pytest.raises(LeoguardError, match=r"liquid.flows\[0\]"):
        simulate(sc)


def test_bench_fec_reports_both_directions():
    from leoguard.bench import fec_bench

    r = fec_bench(blocks=2, reps=1)
    assert set(r) == {"encode_gbps", "decode_gbps"}
    assert r["encode_gbps"] > 0 and r["decode_gbps"] > 0
