"""LEOTP in the simulator (docs/leotp.md): a reduced quick reproduction asserting the paper's
qualitative claims where leoguard reproduces them, strict xfails where it does not yet (they fail
the suite the day the gap closes, so the docs get updated), and field-named errors."""

from __future__ import annotations

import json

import pytest

from leoguard import LeoguardError
from leoguard.reproduce import leotp as rl
from leoguard.reproduce.leotp_figures import markdown
from leoguard.scenario import from_dict
from leoguard.simulate import simulate

#: The paper's 120 s: Hybla's result depends on it (it collapses in 30 s runs, recovers by 120 s).
CHAIN_S = 120.0
STARLINK_S = 20.0


def _mbps(sc) -> float:
    return simulate(sc).flows.row(0, named=True)["goodput_bps"] / 1e6


@pytest.fixture(scope="module")
def sweep() -> dict[tuple[str, float], float]:
    """Fig 12 reduced: LEOTP, CUBIC and Hybla at 0, 0.1 and 1 % per-link loss, 120 s as the paper."""
    return {(s, p): _mbps(rl.chain(s, p, CHAIN_S)) for s in ("leotp", "cubic", "hybla") for p in (0.0, 0.1, 1.0)}


def test_leotp_holds_its_lossless_throughput_at_0_1_percent_while_cubic_collapses(sweep):
    lossless = sweep[("leotp", 0.0)]
    assert lossless > 16.0, lossless  # 20 Mbit/s links, slow start included
    assert sweep[("leotp", 0.1)] >= 0.97 * lossless, sweep
    assert sweep[("cubic", 0.1)] < 0.3 * sweep[("cubic", 0.0)], sweep


def test_at_1_percent_leotp_keeps_most_of_it_and_far_outruns_cubic(sweep):
    lossless = sweep[("leotp", 0.0)]
    assert sweep[("leotp", 1.0)] >= 0.85 * lossless, sweep
    assert sweep[("leotp", 1.0)] > 5 * sweep[("cubic", 1.0)], sweep


@pytest.mark.xfail(
    strict=True,
    reason="docs/leotp.md: leoguard's Hybla (rho^2 / cwnd per ACK at rho = SRTT / 25 ms ~ 13-20 on this "
    "chain with its queue) regrows within seconds after each loss: it collapses in 30 s runs but averages "
    "13-16 Mbit/s over 120 s, where the paper has 4.9 and 1.3",
)
def test_paper_claim_hybla_collapses_over_120_s(sweep):
    assert sweep[("hybla", 0.1)] < 0.3 * sweep[("hybla", 0.0)], sweep


@pytest.mark.xfail(
    strict=True,
    reason="docs/leotp.md: at 1 % per link a hole is re-requested once; ~2 % of holes lose the re-request or "
    "its answer and wait for the consumer's RTO, so leoguard keeps ~90 % of the lossless rate, not the "
    "paper's 99 %",
)
def test_paper_claim_leotp_within_5_percent_of_lossless_at_1_percent(sweep):
    assert sweep[("leotp", 1.0)] >= 0.95 * sweep[("leotp", 0.0)]


@pytest.fixture(scope="module")
def starlink() -> dict[str, dict[str, tuple[float, float]]]:
    """Table II's three pairs over Starlink shell 1 (Hypatia-style routing, the GSL pass parabola):
    variants A-D and BBR, pair -> name -> (Mbit/s, mean OWD ms)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for pair in rl.PAIRS:
        out[pair] = {}
        for name, sc in [
            *((v, rl.starlink("leotp", pair, STARLINK_S, v)) for v in rl.VARIANTS),
            ("bbr", rl.starlink("bbr", pair, STARLINK_S)),
        ]:
            r = simulate(sc)
            out[pair][name] = (r.flows.row(0, named=True)["goodput_bps"] / 1e6, float(r.packets["owd_ms"].mean()))
    return out


@pytest.mark.parametrize("pair", list(rl.PAIRS))
def test_each_module_adds_throughput_with_or_without_the_other(starlink, pair):
    # Table II as a 2 x 2 ablation: in-network retransmission adds throughput with hop CC (A > B) and
    # without it (C > D); hop CC adds throughput with in-network retransmission (A > C) and without
    # it (B > D).
    t = {v: starlink[pair][v][0] for v in rl.VARIANTS}
    assert t["A"] > t["B"] and t["C"] > t["D"] and t["A"] > t["C"] and t["B"] > t["D"], starlink[pair]


@pytest.mark.xfail(
    strict=True,
    reason="docs/leotp.md: in leoguard in-network retransmission is worth more than hop CC (B < C in 20 s runs), "
    "the paper finds the opposite (B 7.73-7.78 > C 6.80-7.38): without it a hole waits for the consumer's "
    "timeout, about 2 RTO",
)
def test_paper_claim_ablation_orders_a_b_c_d_as_table_ii(starlink):
    # Table II: full > no in-network retransmission > no hop CC > neither, on every pair.
    for pair in rl.PAIRS:
        t = [starlink[pair][v][0] for v in rl.VARIANTS]
        assert t == sorted(t, reverse=True), starlink[pair]


@pytest.mark.parametrize("pair", list(rl.PAIRS))
def test_leotp_owd_is_below_bbrs_on_the_starlink_pairs(starlink, pair):
    # Hop-by-hop backpressure keeps queues at BL_tar per hop; BBR's standing queue sits at the
    # bottleneck (the producer's ground uplink).
    assert starlink[pair]["A"][1] < starlink[pair]["bbr"][1], starlink[pair]


#: Fig 10 and Fig 14 as the quick mode runs them.
FIG10_S = FIG14_S = 30.0


@pytest.fixture(scope="module")
def fig14() -> dict[float | None, tuple[float, float]]:
    """Fig 14: LEOTP per BL_tar and BBR (key None) on the 10-link chain with the square wave,
    (Mbit/s, mean OWD ms)."""
    out = {}
    for b in (*rl.FIG14_BL_TAR, None):
        r = simulate(rl.fig14_chain("leotp" if b else "bbr", b, FIG14_S))
        out[b] = (r.flows.row(0, named=True)["goodput_bps"] / 1e6, float(r.packets["owd_ms"].mean()))
    return out


def test_fig14_a_larger_bl_tar_queues_more_and_the_largest_gets_the_most_throughput(fig14):
    owd = [fig14[b][1] for b in rl.FIG14_BL_TAR]
    assert owd == sorted(owd) and owd[-1] > owd[0] + 5.0, fig14  # one bottleneck backlog of 10 MSS more
    assert fig14[15.0][0] > fig14[5.0][0], fig14
    # LEOTP's OWD stays far below BBR's, which keeps a standing queue before the 9-11 Mbit/s link.
    assert owd[-1] < 0.7 * fig14[None][1], fig14


@pytest.mark.xfail(
    strict=True,
    reason="docs/leotp.md: throughput does not rise step by step with BL_tar (5 and 7 MSS get more than 9 and "
    "12, 15 the most, in 30-300 s runs); the cause is not established",
)
def test_paper_claim_fig14_throughput_rises_with_bl_tar(fig14):
    thr = [fig14[b][0] for b in rl.FIG14_BL_TAR]
    assert thr == sorted(thr), fig14


def test_fig10_leotp_recovers_a_lost_packet_sooner_than_bbr():
    # 1 % loss on each of 5 links: the median OWD (from first transmission) of the data that needed a
    # retransmission. LEOTP: a mid node re-requests a hole from its upstream neighbour; BBR: the sender
    # learns of the loss a round trip later and resends end to end.
    p50 = {}
    for s in ("leotp", "bbr"):
        r = simulate(rl.fig10_chain(s, 1.0, FIG10_S))
        rec = rl.recovered_owd(r.packets, None if s == "leotp" else r.app_delay)
        assert rec.height > 500, (s, rec.height)
        p50[s] = float(rec["owd_ms"].median())  # type: ignore[arg-type]
        assert p50[s] > rec["base_owd_ms"][0] >= 100.0, (s, p50, rec["base_owd_ms"][0])  # 5 x 20 ms + queues
    assert p50["leotp"] < p50["bbr"], p50


def test_reproduce_writes_rows_figures_report_and_store(tmp_path):
    plan = [
        rl.SweepRun(rl.chain("leotp", 1.0, 5.0), "leotp", "fig12/1.0"),
        rl.SweepRun(rl.chain("cubic", 1.0, 5.0), "cubic", "fig12/1.0"),
    ]
    rep = rl.reproduce(store=tmp_path / "store", out=tmp_path / "out", planned=plan, workers=1)
    assert [r["scheme"] for r in rep.rows] == ["leotp", "cubic"]
    keys = {"experiment", "engine", "scheme", "variant", "pair", "loss_pct", "throughput_mbps", "owd_ms",
            "paper_throughput_mbps", "paper_owd_ms"}  # fmt: skip
    for r in rep.rows:
        assert keys <= r.keys()
        assert r["engine"] == "sim" and r["paper_throughput_mbps"] is not None and r["why"]
    assert json.loads((tmp_path / "out" / "rows.json").read_text()) == rep.rows
    assert (tmp_path / "out" / "fig12_loss_sweep.png").stat().st_size > 0
    assert "| fig12 |" in rep.report.read_text()
    again = rl.reproduce(store=tmp_path / "store", out=None, planned=plan, workers=1)
    assert len(again.sweep.skipped) == 2 and again.rows == rep.rows


def test_table2_rows_carry_the_mid_node_option_beside_the_paper_variants(tmp_path):
    plan = [
        rl.SweepRun(rl.starlink("leotp", "BJ-HK", 3.0, "A"), "leotp-A", "table2/BJ-HK"),
        rl.SweepRun(rl.starlink("leotp", "BJ-HK", 3.0, "A", mid_nodes=rl.MID_FRACTION), "leotp-A-mid", "table2/BJ-HK"),
    ]
    rows = rl.reproduce(store=tmp_path / "store", out=None, planned=plan, workers=1).rows
    full, some = rows
    assert (full["variant"], full["mid_nodes"], full["paper_throughput_mbps"]) == ("A", "all", 7.82)
    assert (some["variant"], some["mid_nodes"], some["paper_throughput_mbps"]) == ("A", 0.25, None)
    assert some["throughput_mbps"] > 0 and some["owd_ms"] is not None
    assert "| A, 25% mid |" in markdown(rows)


def _chain(leotp: dict, kind: str = "leotp") -> dict:
    return {
        "duration_s": 1,
        "topology": {"kind": "chain", "hops": 3, "rate_mbps": 20, "delay_ms": 5},
        "flows": [{"kind": kind, "src": 0, "dst": 3}],
        "leotp": leotp,
    }


@pytest.mark.parametrize(
    ("leotp", "field"),
    [
        ({"bl_tar_mss": -1}, "bl_tar_mss"),
        ({"cache_blocks": 0}, "cache_blocks"),
        ({"variant": "A", "hop_cc": False}, "variant"),
        ({"mid_nodes": 1.5}, "mid_nodes"),
        ({"variant": "E"}, "variant"),
        ({"hole_confirm_ms": 300}, "hole_confirm_ms"),
    ],
)
def test_bad_sections_are_refused_naming_the_field(leotp, field):
    with pytest.raises(LeoguardError, match=field):
        from_dict(_chain(leotp))


def test_satellite_placement_needs_satellites_and_zero_bytes_is_refused():
    with pytest.raises(LeoguardError, match=r"leotp\.mid_nodes"):
        simulate(from_dict(_chain({"mid_nodes": "satellites"})))
    d = _chain({})
    d["flows"][0]["bytes"] = 0
    with pytest.raises(LeoguardError, match=r"flows.0.bytes"):
        from_dict(d)


def test_a_fixed_transfer_delivers_every_byte_and_reports_mid_node_counters():
    d = _chain({"mid_nodes": 0.5})
    d["duration_s"] = 10
    d["topology"]["loss"] = {"model": "bernoulli", "p": 0.01}
    d["topology"]["loss_on"] = "all"
    d["flows"][0]["bytes"] = 500_000
    r = simulate(from_dict(d))
    f = r.flows.row(0, named=True)
    assert f["delivered_bytes"] == 500_000 and f["fct_s"] is not None
    assert r.leotp is not None and r.leotp["nodes"] == 1  # round(2 * 0.5) of the 2 nodes between the ends
    assert r.packets["seq"].n_unique() == r.packets.height
