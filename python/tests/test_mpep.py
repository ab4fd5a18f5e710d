"""M-PEP split-TCP proxies from TOML (`[mpep]`, docs/mpep.md)."""

import tomllib

import polars as pl
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


WEB_CBR = """
name = "mpep-web-cbr"
duration_s = 14.0
seed = 1
[topology]
kind = "constellation"
constellation = "starlink-shell1"
ground = ["New York", "London"]
ground_stations = ["London"]
hosts = [{ name = "server-lon", ground = "London", rate_mbps = 10000, delay_ms = 1 }]
policy = "global-schedule"
step_s = 0.1
interruption = "none"
gsl_rate_mbps = 1000
isl_rate_mbps = 1000
queue_bytes = 4000000
[[flows]]
kind = "web"
src = "New York"
dst = "server-lon"
cc = "cubic"
http = "2"
pages = [0, 0]
start_s = 10.6
think_s = 0.1
[[flows]]
kind = "cbr"
src = "server-lon"
dst = "New York"
rate_mbps = 10
size = 1250
start_s = 11.0
"""


def test_mpep_splits_web_connections_and_holds_udp_during_the_migration() -> None:
    text = WEB_CBR + "[mpep]\n"
    r = simulate(load_scenario_text(text))
    m = r.mpep
    assert m is not None
    # Both loads finish; each of their connections runs through three proxies (NY's and London's
    # ingress satellites, the London gateway), each of which answered the SYN of the hop before it.
    w = r.web
    assert w.height == 2 and w["plt_ns"].null_count() == 0
    conns = int(w["connections"].sum())
    assert m["split_connections"] == conns and m["proxies"] == 3 * conns == m["proxy_syn_acks"]
    # London's ingress satellite changes at 12 s while the second load runs: its connections'
    # proxies migrate (both directions in one transfer), the CBR flow's relay holds ~one packet per
    # ms of its migration and drops none.
    assert m["migrations"] >= 1 and m["slow_start_restarts"] >= 2
    assert m["udp_flows"] == 1 and m["udp_migrations"] == 1 and m["udp_dropped"] == 0
    assert 20 <= m["udp_held"] <= 30
    plain = simulate(load_scenario_text(WEB_CBR))
    assert plain.mpep is None
    cbr = r.flows.row(1, named=True)
    assert cbr["delivered_bytes"] == plain.flows.row(1, named=True)["delivered_bytes"]

    # The held packets wait for the migration: packets sent just after the 12 s handover arrive up
    # to ~its length (ISL propagation between the two satellites, ~27 ms) later than the path's delay.
    def spike(res) -> int:
        p = res.packets.filter(res.packets["flow"] == 1).with_columns(d=pl.col("received_ns") - pl.col("sent_ns"))
        hit = p.filter(pl.col("sent_ns").is_between(12_000_000_000, 12_100_000_000))["d"].max()
        calm = p.filter(pl.col("sent_ns").is_between(12_300_000_000, 12_600_000_000))["d"].median()
        return int(hit - calm)

    assert spike(plain) < 5_000_000 and 20_000_000 < spike(r) < 35_000_000
    small = simulate(load_scenario_text(text + "udp_buffer_bytes = 5000\n"))
    assert small.mpep["udp_held"] == 4 and small.mpep["udp_dropped"] == m["udp_held"] - 4
    with pytest.raises((ValueError, LeoguardError), match="udp_buffer_bytes"):
        load_scenario_text(text + "udp_buffer_bytes = -1\n")
