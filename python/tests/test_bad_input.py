"""Bad input gets a clear error naming the field and the value."""

import pytest

from leoguard import LeoguardError
from leoguard.orbit import Constellation, parse_interruption

GOOD_TLE = (
    "ISS (ZARYA)\n"
    "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927\n"
    "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537\n"
)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"altitude_km": 0}, r"altitude_km = 0"),
        ({"altitude_km": -5}, r"altitude_km = -5"),
        ({"inclination_deg": 181}, r"inclination_deg = 181"),
        ({"inclination_deg": -1}, r"inclination_deg = -1"),
        ({"planes": 0}, r"planes = 0"),
        ({"sats_per_plane": 0}, r"sats_per_plane = 0"),
        ({"phasing": 30}, r"phasing = 30"),
    ],
)
def test_impossible_shells(kwargs, pattern):
    args = {"altitude_km": 550, "inclination_deg": 53, "planes": 10, "sats_per_plane": 10} | kwargs
    with pytest.raises(LeoguardError, match=pattern):
        Constellation.walker(**args)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(LeoguardError, match=r"unknown constellation preset 'starlonk'.*starlink-shell1"):
        Constellation.preset("starlonk")


def test_tle_validation(tmp_path):
    f = tmp_path / "ok.tle"
    f.write_text(GOOD_TLE)
    assert len(Constellation.from_tle(f)) == 1
    cases = {
        "checksum": (GOOD_TLE.replace("0  2927", "0  2925"), r"line 2: bad checksum"),
        "length": (GOOD_TLE.replace("563537", "56353"), r"line 3: line 2 must be 69 characters long, found 68"),
        "count": (GOOD_TLE + "EXTRA\n", r"3 lines per satellite"),
        "number": (GOOD_TLE.replace("\n2 25544", "\n3 25544"), r"expected line number 2"),
        "empty": ("\n\n", r"no TLE"),
    }
    for name, (text, pattern) in cases.items():
        p = tmp_path / f"{name}.tle"
        p.write_text(text)
        with pytest.raises(LeoguardError, match=pattern):
            Constellation.from_tle(p)
    with pytest.raises(LeoguardError, match="cannot read TLE file"):
        Constellation.from_tle(tmp_path / "missing.tle")


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"min_elevation": 91}, r"min_elevation_deg = 91"),
        ({"min_elevation": -1}, r"min_elevation_deg = -1"),
        ({"step": 0}, r"step_s = 0"),
        ({"step": -0.1}, r"step_s = -0.1"),
        ({"duration": 0}, r"duration_s = 0"),
        ({"policy": "teleport"}, r"unknown policy 'teleport'"),
        ({"interruption": "sometimes"}, r"invalid interruption = 'sometimes'"),
        ({"interruption": "uniform:0.2:0.1"}, r"interruption_range_s"),
        ({"handover_period": 0.0}, r"handover_period_s = 0"),
        ({"slot_criterion": "random"}, r"unknown slot_criterion 'random' \(known: .*, path-aware\)"),
    ],
)
def test_timeline_options(starlink, kwargs, pattern):
    with pytest.raises(LeoguardError, match=pattern):
        starlink.path_timeline("New York", "London", **({"duration": 1.0, "step": 0.5} | kwargs))


def test_unknown_city_in_a_timeline(starlink):
    with pytest.raises(LeoguardError, match="unknown city 'Qwxzville'"):
        starlink.path_timeline("Qwxzville", "London", duration=1)


def test_interruption_specs():
    assert parse_interruption("fixed:50ms") == ("fixed", 0.05, 0.0)
    assert parse_interruption("uniform") == ("uniform", 0.03, 0.2)
    assert parse_interruption("3owd")[0] == "3owd"
    with pytest.raises(LeoguardError, match="invalid interruption duration 'abc'"):
        parse_interruption("fixed:abc")


def test_other_fields(starlink):
    with pytest.raises(LeoguardError, match="cell_resolution = 16"):
        starlink.beams(["London"], resolution=16)
    with pytest.raises(LeoguardError, match="cross_plane_max_lat_deg = 100"):
        Constellation.preset("starlink-shell1", cross_plane_max_lat_deg=100)
    with pytest.raises(LeoguardError, match="invalid epoch"):
        Constellation.preset("starlink-shell1", epoch="yesterday")
    with pytest.raises(LeoguardError, match="best-path"):
        starlink.connectivity_cache(["London"], policy="best-path")


def test_an_absurd_cbr_rate_is_refused_before_it_can_exhaust_memory():
    from leoguard.scenario import from_dict

    spec = {
        "duration_s": 1.0,
        "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1},
        "flows": [{"kind": "cbr", "src": "n0", "dst": "n1", "rate_mbps": 1e9, "size": 500}],
    }
    with pytest.raises(LeoguardError, match=r"flows\.0\.rate_mbps|rate_mbps"):
        from_dict(spec)


def test_a_scenario_that_is_not_utf8_is_one_line_naming_the_file_and_the_byte(tmp_path):
    import subprocess
    import sys

    from leoguard.scenario import load_scenario

    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'name = "ok"\nx = "\xff\xfe"\n')
    want = f"invalid scenario {bad}: not UTF-8 text (byte 0xff at offset 17, line 2, column 6)"
    with pytest.raises(LeoguardError) as e:
        load_scenario(bad)
    assert str(e.value) == want
    # Both engines' commands read scenarios through load_scenario: one line, exit status 2, no traceback.
    for cmd in (["run"], ["emu", "run"]):
        p = subprocess.run(
            [sys.executable, "-m", "leoguard.cli", *cmd, str(bad)], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 2, p.stderr
        assert " ".join(p.stderr.split()) == f"error: {want}", p.stderr


def test_a_loss_trace_that_is_not_utf8_names_the_trace(tmp_path):
    from leoguard.scenario import from_dict
    from leoguard.simulate import simulate

    (tmp_path / "trace.csv").write_bytes(b"second,loss\n0,0.1\n1,\xe90.2\n")
    loss = {"model": "trace_per_second", "trace": "trace.csv"}
    sc = from_dict(
        {
            "duration_s": 1.0,
            "topology": {"kind": "chain", "hops": 1, "rate_mbps": 10, "delay_ms": 1, "loss": loss},
            "flows": [{"kind": "tcp", "src": 0, "dst": 1}],
        }
    )
    trace = tmp_path / "trace.csv"
    with pytest.raises(LeoguardError, match=rf"^invalid loss trace {trace}: not UTF-8 text \(byte 0xe9 at offset 20,"):
        simulate(sc, base_dir=tmp_path)


LINK = {"a": 0, "b": 1, "delay_ms": 1}
CONSTELLATION = {"kind": "constellation", "ground": ["London"], "gsl_rate_mbps": 10, "isl_rate_mbps": 10}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"links": [LINK | {"rate_mbps": 1e12}]}, "links.0.rate_mbps"),
        ({"topology": {"kind": "chain", "hops": 1, "delay_ms": 1, "rate_mbps": 1e12}}, "topology.chain.rate_mbps"),
        (
            {"topology": {"kind": "dumbbell", "pairs": 1, "bottleneck_delay_ms": 1, "bottleneck_mbps": 1e12}},
            "topology.dumbbell.bottleneck_mbps",
        ),
        (
            {"topology": {"kind": "dumbbell", "pairs": 1, "bottleneck_delay_ms": 1, "bottleneck_mbps": 10,
                          "access_mbps": 1e12}},
            "topology.dumbbell.access_mbps",
        ),
        (
            {"topology": {"kind": "two-path", "switch_every_s": 1,
                          "paths": [{"rate_mbps": 10, "delay_ms": 1}, {"rate_mbps": 1e12, "delay_ms": 1}]}},
            "topology.two-path.paths.1.rate_mbps",
        ),
        (
            {"topology": {"kind": "leo-path", "a": "New York", "b": "London", "rate_mbps": 1e12}},
            "topology.leo-path.rate_mbps",
        ),
        ({"topology": CONSTELLATION | {"gsl_rate_mbps": 1e12}}, "topology.constellation.gsl_rate_mbps"),
        ({"topology": CONSTELLATION | {"isl_rate_mbps": 1e12}}, "topology.constellation.isl_rate_mbps"),
        (
            {"topology": CONSTELLATION | {"hosts": [{"name": "h", "ground": "London", "rate_mbps": 1e12}]}},
            "topology.constellation.hosts.0.rate_mbps",
        ),
        ({"links": [LINK | {"rate_mbps": float("inf")}]}, "links.0.rate_mbps"),
        ({"links": [LINK | {"rate_mbps": float("nan")}]}, "links.0.rate_mbps"),
    ],
)  # fmt: skip
def test_an_absurd_link_rate_is_refused_naming_the_field_as_written(spec, field):
    from leoguard.scenario import from_dict

    base = {"duration_s": 1.0, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]}
    words = r"(.*less than or equal to 10000000 |Input should be a finite number)"  # NaN and inf: not finite
    with pytest.raises(LeoguardError, match=rf"^invalid scenario <dict>: {field}: {words}"):
        from_dict(base | spec)


def test_the_link_rate_bound_is_the_cores_10_tbit_s(tmp_path):
    from leoguard.scenario import load_scenario
    from leoguard.simulate import simulate

    f = tmp_path / "fast.toml"
    f.write_text(
        "duration_s = 0.01\n[[links]]\na = 0\nb = 1\nrate_mbps = 1e7\ndelay_ms = 1\n"
        '[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n'
    )
    sc = load_scenario(f)
    assert sc.to_core()["links"][0]["rate_bps"] == 10**13  # accepted here and by the core
    simulate(sc)
    f.write_text(f.read_text().replace("rate_mbps = 1e7", "rate_mbps = 1e12"))
    with pytest.raises(LeoguardError, match=r"links\.0\.rate_mbps: .* \(got 1000000000000\.0\)"):
        load_scenario(f)


@pytest.mark.parametrize(
    ("gsl_pass", "words"),
    [
        ({"edge_fraction": 0}, r"topology\.constellation\.gsl_pass\.edge_fraction: .*greater than 0"),
        ({"edge_fraction": 1.5}, r"topology\.constellation\.gsl_pass\.edge_fraction: .*less than or equal to 1"),
        ({"step_s": 0}, r"topology\.constellation\.gsl_pass\.step_s: .*greater than or equal to 0\.001"),
        ({"alternate_mbps": -1}, r"topology\.constellation\.gsl_pass\.alternate_mbps: .*greater than or equal to 0"),
        ({"alternate_mbps": 5}, r"gsl_pass\.alternate_mbps = 5\.0 must be below edge_fraction x the smaller GSL rate"),
        ({"edge": 0.5}, r"topology\.constellation\.gsl_pass\.edge: .*[Ee]xtra inputs"),
    ],
)  # fmt: skip
def test_a_bad_gsl_pass_profile_is_refused_naming_the_field(gsl_pass, words):
    from leoguard.scenario import from_dict

    spec = {
        "duration_s": 1.0,
        "flows": [{"kind": "tcp", "src": 0, "dst": 0}],
        "topology": CONSTELLATION | {"gsl_pass": gsl_pass},
    }
    with pytest.raises(LeoguardError, match=words):
        from_dict(spec)
