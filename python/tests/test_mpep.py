"""M-PEP split-TCP proxies from TOML (`[mpep]`, docs/mpep.md)."""

import tomllib

import pytest

from leoguard.errors import LeoguardError
from leoguard.scenario import from_dict
from leoguard.simulate import simulate

BASE = """
name = "mpep-small"
duration_s = {dur}
[topology]
kind = "constellation"
constellation = "starlink-shell1"
ground = ["New York", "London"]
ground_stations = ["London"]
hosts = [{{ name = "server-lon", ground = "London", rate_mbps = 10000, delay_ms = 1 }}]
policy = "global-schedule"
step_s = 0.1
interruption = "uniform"
gsl_rate_mbps = 1000
isl_rate_mbps = 1000
queue_bytes = 4000000
[[flows]]
kind = "tcp"
src = "server-lon"
dst = "New York"
cc = "cubic"
bytes = 20000000
start_s = 11.0
"""


def load_scenario_text(text: str):
    return from_dict(tomllib.loads(text))


def test_mpep_migrates_at_the_gateway_handover_and_delivers_everything() -> None:
    r = simulate(load_scenario_text(BASE.format(dur=14.0) + "[mpep]\nbuffer_bytes = 2000000\n"))
    m = r.mpep
    assert m is not None
    # London's ingress satellite changes at 12 s: one migration, both connections rebuilt.
    assert m["migrations"] == 1 and m["slow_start_restarts"] == 2 and m["proxies"] == 3
    assert len(m["migration_delays_ns"]) == 1
    # State (at most the 2 MB buffer + 4 KiB) at 1 Gbit/s plus ISL propagation: under 100 ms.
    assert m["migration_state_bytes"][0] * 8 < m["migration_delays_ns"][0] < 100_000_000
    f = r.flows.row(0, named=True)
    assert f["delivered_bytes"] == 20_000_000
    assert f["fct_s"] is not None and f["fct_s"] > 1.0
    plain = simulate(load_scenario_text(BASE.format(dur=14.0)))
    assert plain.mpep is None


def test_mpep_with_satguard_or_without_a_constellation_is_refused() -> None:
    with pytest.raises((ValueError, LeoguardError), match="mpep"):
        load_scenario_text(BASE.format(dur=5.0) + "[mpep]\n[satguard]\n")
    with pytest.raises((ValueError, LeoguardError), match="buffer_bytes"):
        load_scenario_text(BASE.format(dur=5.0) + "[mpep]\nbuffer_bytes = 10\n")
