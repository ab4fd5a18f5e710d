"""Measured-trace readers and statistics for `leoguard validate starlink` (issue 29): the real MMSys'24
Starlink files give the published numbers, synthetic traces with a known boundary disturbance, loss
pattern or throughput dip are found where they were put, `compare` meets and misses its targets, and
every bad input is a one-line error naming file, line and field."""

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from leoguard.errors import LeoguardError
from leoguard.realism import (
    RttTrace,
    ThroughputTrace,
    boundary_share,
    compare,
    cycle_bin,
    disturbance,
    loss_bursts,
    loss_by_bin,
    median_rtt_by_bin,
    per_second_mbps,
    plot,
    read_trace,
    summarise,
    to_markdown,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "starlink-mmsys24"
PING = DATA / "ping-seattle-noisl-2023-09-11.txt"
DOWN = DATA / "iperf3-downlink-seattle-noisl-2023-09-21.json"
UP = DATA / "iperf3-uplink-seattle-noisl-2023-09-21.json"
MINUTE = 1_694_476_800.0  # a whole UTC minute (2023-09-12 00:00:00), so cycle boundaries are at +12, +27, ...


def _real(path: Path):
    if not path.exists():
        pytest.fail(f"measurement missing: {path}")
    return read_trace(path)


@pytest.fixture(scope="module")
def ping() -> RttTrace:
    tr = _real(PING)
    assert isinstance(tr, RttTrace)
    return tr


@pytest.fixture(scope="module")
def ping_summary(ping) -> dict:
    return summarise(ping)


# ---- the real measurements ------------------------------------------------------------------------


def test_ping_file_gives_the_published_numbers(ping, ping_summary):
    s = ping_summary
    assert (ping.fmt, len(ping), s["n"], s["kind"]) == ("mmsys24-ping", 36_000, 36_000, "rtt")
    assert int(np.isnan(ping.rtt_ms).sum()) == 913
    assert round(s["loss_rate"] * 100, 2) == 2.54
    assert (s["rtt_min_ms"], s["rtt_p50_ms"], s["rtt_p99_ms"]) == pytest.approx((16.7, 42.8, 118.0), abs=0.05)
    assert s["start_utc"].startswith("2023-09-12T00:05:35")
    assert 9600 < s["duration_s"] < 9700  # 2 h 41 min
    assert len(s["rtt_quantiles_ms"]) == 101 and s["rtt_quantiles_ms"][50] == s["rtt_p50_ms"]
    json.dumps(s, allow_nan=False)  # plain JSON, no NaN


def test_ping_file_shows_the_boundary_disturbance_in_the_first_half_second(ping_summary):
    s = ping_summary
    med = s["median_rtt_by_position_ms"]
    assert len(med) == 30 and s["disturbance"]["bin"] == 0
    assert med[0] == pytest.approx(54.3, abs=0.05)
    assert all(41.0 <= m <= 44.5 for m in med[1:])  # README: 41-43 ms elsewhere (44.0 right after)
    assert 10.0 < s["disturbance"]["size_ms"] < 13.0 and s["disturbance"]["length_s"] == 0.5
    assert 300 < s["boundary_share"]["cycles"] < 650 and 0.5 < s["boundary_share"]["share"] < 0.9
    assert len(s["loss_by_position"]) == 30 and all(0 < x < 0.1 for x in s["loss_by_position"])
    assert sum((k + 1) * c for k, c in enumerate(s["burst_counts"])) == 913
    assert 1.0 < s["mean_burst_len"] < 1.2


def test_ping_halves_split_the_trace_in_time(ping):
    a, b = ping.halves()
    assert len(a) + len(b) == len(ping) and a.end < b.start
    mid = (ping.start + ping.end) / 2
    assert a.end < mid <= b.start
    w = ping.window(ping.start, ping.start + 60.0)
    assert 0 < len(w) < 60 / 0.1 + 1 and (w.t < ping.start + 60.0).all()


@pytest.mark.parametrize(
    ("path", "direction", "n", "secs", "mean"),
    [(DOWN, "downlink", 1200, 120, 33.3), (UP, "uplink", 3000, 300, 6.8)],
)
def test_iperf3_files_give_the_published_means(path, direction, n, secs, mean):
    tr = _real(path)
    assert isinstance(tr, ThroughputTrace)
    s = summarise(tr)
    assert (tr.fmt, tr.direction, tr.mss, s["kind"], s["n"]) == ("iperf3-json", direction, 1388, "throughput", n)
    assert s["duration_s"] == pytest.approx(secs, abs=0.01) and s["n_seconds"] == secs
    assert round(s["mean_mbps"], 1) == mean
    assert s["p10_mbps"] < s["median_mbps"] < s["p90_mbps"]
    assert len(s["dip"]["profile"]) == 30 and s["dip"]["min"] == min(s["dip"]["profile"])
    assert np.mean(s["dip"]["profile"]) == pytest.approx(1.0, abs=0.05)
    # iperf3's client reports retransmits only as the sender (uplink)
    assert (s["retransmits"] is None) == (direction == "downlink")
    a, b = tr.halves()
    assert len(a) + len(b) == n and a.bits.sum() + b.bits.sum() == tr.bits.sum()
    json.dumps(s, allow_nan=False)


# ---- synthetic RTT traces -------------------------------------------------------------------------


def _rtt(seconds: float = 600.0, step: float = 0.1, extra: dict[int, float] | None = None, every: int = 1):
    """Probes every `step` s from a UTC minute; 40 ms plus a small deterministic wobble, plus
    `extra[bin]` ms in those half-second bins of every `every`-th cycle."""
    t = MINUTE + np.arange(0.0, seconds, step) + step / 4
    rtt = 40.0 + 0.5 * np.sin(np.arange(len(t)) * 0.7)
    bins = cycle_bin(t)
    cyc = np.floor((t - 12.0) / 15.0).astype(int)
    for b, ms in (extra or {}).items():
        rtt[(bins == b) & (cyc % every == 0)] += ms
    return RttTrace("model: synthetic", "model", t, rtt)


def test_cycle_positions_start_at_seconds_12_27_42_57():
    t = MINUTE + np.array([12.0, 12.49, 12.5, 26.99, 27.0, 42.2, 57.0, 59.9, 71.9])
    assert cycle_bin(t).tolist() == [0, 0, 1, 29, 0, 0, 0, 5, 29]


@pytest.mark.parametrize(
    ("extra", "peak", "length"),
    [({3: 20.0}, 3, 0.5), ({3: 20.0, 4: 15.0}, 3, 1.0), ({29: 20.0, 0: 18.0, 1: 12.0}, 29, 1.5)],
)
def test_a_known_disturbance_is_found_at_its_bin_with_its_size_and_length(extra, peak, length):
    s = summarise(_rtt(extra=extra))
    assert s["disturbance"]["bin"] == peak
    assert s["disturbance"]["size_ms"] == pytest.approx(20.0, abs=0.6)
    assert s["disturbance"]["length_s"] == length
    assert s["loss_rate"] == 0.0 and s["burst_counts"] == [] and s["mean_burst_len"] is None


def test_a_flat_profile_has_no_disturbance_length():
    d = disturbance(np.full(30, 40.0))
    assert (d["size_ms"], d["length_s"]) == (0.0, 0.0)
    m = np.full(30, np.nan)
    m[4] = 50.0
    assert disturbance(m)["bin"] == 4


def test_boundary_share_counts_disturbed_cycles():
    tr = _rtt(seconds=600.0, extra={0: 20.0}, every=2)  # 40 cycles, half of them disturbed
    share, n = boundary_share(tr)
    assert (share, n) == (0.5, 40)
    assert boundary_share(_rtt(seconds=600.0, extra={0: 4.0}))[0] == 0.0  # under the 5 ms threshold
    # a lost probe in the head disturbs the cycle; too few probes in the rest and it is not used
    t = MINUTE + 12.0 + np.arange(0.0, 15.0, 0.5) + 0.1
    rtt = np.full(len(t), 40.0)
    rtt[0] = np.nan
    assert boundary_share(RttTrace("x", "model", t, rtt)) == (1.0, 1)
    assert boundary_share(RttTrace("x", "model", t[:10], rtt[:10])) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_loss_bursts_and_loss_per_position_from_a_known_pattern():
    lost = [1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1]
    t = MINUTE + np.arange(len(lost)) * 0.1
    tr = RttTrace("x", "model", t, np.where(np.array(lost) == 1, np.nan, 40.0))
    assert loss_bursts(tr) == [2, 1, 1]  # runs of 1, 2, 3 and 1 probes
    assert summarise(tr)["mean_burst_len"] == pytest.approx(7 / 4)
    base = _rtt(seconds=300.0)
    rtt = base.rtt_ms.copy()
    rtt[cycle_bin(base.t) == 5] = np.nan
    prof = loss_by_bin(RttTrace("x", "model", base.t, rtt))
    assert prof[5] == 1.0 and np.nansum(prof) == 1.0
    assert np.isnan(median_rtt_by_bin(RttTrace("x", "model", base.t, rtt))[5])


def test_up_and_down_delays_are_summarised_when_present():
    t = MINUTE + np.arange(100) * 0.1
    tr = RttTrace("x", "model", t, np.full(100, 40.0), np.full(100, 15.0), np.full(100, 25.0))
    s = summarise(tr)
    assert (s["up_p50_ms"], s["down_p50_ms"]) == (15.0, 25.0)
    assert summarise(tr.window(t[10], t[20]))["n"] == 10


# ---- synthetic throughput traces ------------------------------------------------------------------


def _tput(seconds: float = 300.0, dip_bin: int | None = 7, rate_mbps: float = 10.0):
    t0 = MINUTE + np.arange(0.0, seconds, 0.1)
    t1 = t0 + 0.1
    rate = np.full(len(t0), rate_mbps * 1e6)
    if dip_bin is not None:
        rate[cycle_bin((t0 + t1) / 2) == dip_bin] /= 2
    return ThroughputTrace("model: synthetic", "model", "downlink", t0, t1, rate * 0.1)


def test_a_known_throughput_dip_is_found_at_its_bin():
    s = summarise(_tput())
    assert s["dip"]["bin"] == 7
    assert s["dip"]["min"] == pytest.approx(0.5 / (29.5 / 30), rel=1e-6)
    assert s["median_mbps"] == pytest.approx(10.0)  # the dip sits inside one second of 15
    assert s["share_below_half_median"] == 0.0
    assert s["mean_mbps"] == pytest.approx(10.0 * 29.5 / 30)


def test_per_second_throughput_conserves_bits_and_drops_partial_seconds():
    t0, t1 = MINUTE + np.array([0.5, 1.0, 2.25]), MINUTE + np.array([1.0, 2.25, 3.0])
    tr = ThroughputTrace("x", "model", "uplink", t0, t1, np.array([1e6, 5e6, 3e6]))
    secs, mbps = per_second_mbps(tr)
    # second 0 is only half covered; 1.0-2.25 carries 4 Mbit/s, 2.25-3.0 carries 4 Mbit/s
    assert (secs - MINUTE).tolist() == [1.0, 2.0]
    assert mbps == pytest.approx([4.0, 1.0 + 3.0])
    gappy = _tput(seconds=20.0, dip_bin=None).window(-math.inf, MINUTE + 9.95)
    assert len(per_second_mbps(gappy)[1]) == 9  # the half-covered 10th second is left out


def test_share_below_half_the_median():
    tr = _tput(seconds=100.0, dip_bin=None)
    bits = tr.bits.copy()
    bits[(tr.t_start - MINUTE) < 20.0] = 0.0  # 20 of 100 seconds stalled
    s = summarise(ThroughputTrace("x", "model", "downlink", tr.t_start, tr.t_end, bits))
    assert s["share_below_half_median"] == pytest.approx(0.2)
    assert s["median_mbps"] == pytest.approx(10.0)


# ---- compare, table, figure -----------------------------------------------------------------------


def _rows(meas: dict, mod: dict) -> dict:
    return {r["metric"]: r for r in compare(meas, mod)}


def test_compare_meets_its_targets_against_itself_and_misses_them_when_off():
    meas = summarise(_rtt(extra={3: 20.0}))
    meas["loss_by_position"] = [0.01 * (1 + (i % 5)) for i in range(30)]
    meas["loss_rate"] = 0.03
    rows = _rows(meas, meas)
    assert [r["met"] for r in rows.values() if r["target"]] == [True] * 6
    assert all(r["met"] is None for r in rows.values() if not r["target"])
    assert rows["loss per position (Pearson r)"]["error"] == pytest.approx(1.0)

    mod = dict(meas, rtt_p50_ms=meas["rtt_p50_ms"] * 1.15, rtt_p99_ms=meas["rtt_p99_ms"] * 1.15)
    mod["disturbance"] = dict(meas["disturbance"], bin=4, size_ms=meas["disturbance"]["size_ms"] * 0.6)
    mod["loss_rate"] = 0.02
    mod["loss_by_position"] = list(reversed(meas["loss_by_position"]))
    rows = _rows(meas, mod)
    assert rows["RTT p50 (ms)"]["met"] is False and rows["RTT p50 (ms)"]["error"] == pytest.approx(0.15)
    assert rows["RTT p99 (ms)"]["met"] is True  # 15 % is within 20 %
    assert rows["disturbance bin"]["error"] == 1 and rows["disturbance bin"]["met"] is False
    assert rows["disturbance size (ms)"]["met"] is False
    assert rows["loss rate"]["met"] is False and rows["loss rate"]["error"] == pytest.approx(1 / 3)
    assert rows["loss per position (Pearson r)"]["met"] is False
    # the cycle wraps: bin 29 is next to bin 0
    at0, at29 = dict(meas, disturbance={"bin": 0}), dict(meas, disturbance={"bin": 29})
    assert _rows(at0, at29)["disturbance bin"]["error"] == 1


def test_compare_handles_undefined_values_without_crashing():
    meas = summarise(_rtt(extra={3: 20.0}))  # no loss at all: a constant loss profile
    rows = _rows(meas, dict(meas, rtt_p99_ms=None))
    corr = rows["loss per position (Pearson r)"]
    assert (corr["error"], corr["met"]) == ("undefined", False)
    assert (rows["RTT p99 (ms)"]["error"], rows["RTT p99 (ms)"]["met"]) == ("undefined", False)
    assert rows["loss rate"]["met"] is True  # 0 vs 0
    assert _rows(meas, dict(meas, loss_rate=0.01))["loss rate"]["met"] is False
    with pytest.raises(LeoguardError, match="field 'kind'"):
        compare(meas, summarise(_tput()))


def test_compare_throughput_targets():
    meas = summarise(_tput())
    meas["share_below_half_median"] = 0.10
    ok = dict(meas, median_mbps=meas["median_mbps"] * 1.19, share_below_half_median=0.19)
    bad = dict(meas, median_mbps=meas["median_mbps"] * 0.75, share_below_half_median=0.21)
    assert [r["met"] for r in compare(meas, ok) if r["target"]] == [True, True]
    rows = _rows(meas, bad)
    assert rows["throughput median (Mbit/s)"]["met"] is False
    share = rows["seconds below half the median (points)"]
    assert share["met"] is False and share["error"] == pytest.approx(11.0) and share["measured"] == pytest.approx(10.0)


def test_markdown_table_and_figures():
    meas = summarise(_rtt(extra={3: 20.0}))
    md = to_markdown(compare(meas, dict(meas, rtt_p50_ms=100.0)))
    lines = md.strip().splitlines()
    assert lines[0] == "| metric | measured | modelled | error | target | met |" and len(lines) == 2 + 11
    assert "| RTT p50 (ms) | 40" in md and "**no**" in md and "30 bins" in md
    for m, mod, axes in ((meas, meas, 4), (meas, None, 4), (summarise(_tput()), summarise(_tput(dip_bin=2)), 2)):
        fig = plot(m, mod)
        assert len(fig.axes) == axes
        fig.savefig(io.BytesIO(), format="png")


# ---- irtt CSV and bad input -----------------------------------------------------------------------


def test_irtt_csv_with_iso_and_unix_times_and_one_way_delays(tmp_path):
    f = tmp_path / "irtt.csv"
    f.write_text(
        "Timestamp,RTT,Uplink,Downlink\n"
        "2023-09-12T00:05:35.68Z,40.5,15.0,25.5\n"
        "2023-09-12T00:05:35.78+00:00,-1,-1,-1\n"
        "1694477135.88,41,16,25\n"
    )
    tr = read_trace(f)
    assert isinstance(tr, RttTrace) and tr.fmt == "irtt-csv" and len(tr) == 3
    assert tr.t == pytest.approx([1694477135.68, 1694477135.78, 1694477135.88])
    assert np.isnan(tr.rtt_ms[1]) and tr.up_ms is not None and tr.down_ms is not None
    assert tr.up_ms[2] == 16.0 and np.isnan(tr.down_ms[1]) and tr.loss_rate == pytest.approx(1 / 3)
    g = tmp_path / "rtt-only.csv"
    g.write_text("seq,timestamp,rtt\n1,1694477135.5,30\n")
    tr2 = read_trace(g)
    assert tr2.up_ms is None and tr2.rtt_ms.tolist() == [30.0]


IPERF_START = {"timestamp": {"timesecs": 1695276600}, "test_start": {"reverse": 1}, "tcp_mss_default": 1388}


def _iperf(**kw) -> str:
    doc = {"start": IPERF_START, "intervals": [{"sum": {"start": 0, "end": 0.1, "bytes": 1000}},
                                               {"sum": {"start": 0.1, "end": 0.2, "bytes": 1000}}]}  # fmt: skip
    doc |= kw
    return json.dumps(doc, indent=1)


BAD = [
    ("p.txt", "1.0\t1\t40\n2.0\t2\tabc\n", 2, "rtt", "'abc' is not a number"),
    ("p.txt", "1.0\t1\t40\n2.0\t2\t-2\n", 2, "rtt", "-1 = lost"),
    ("p.txt", "1.0\t1\t40\n2.0\t2\tinf\n", 2, "rtt", "-1 = lost"),
    ("p.txt", "1.0\t1\t40\n3.0\t2\t40\n\n2.0\t3\t40\n", 4, "time", "goes backwards (line 2"),
    ("p.txt", "1.0\t1\t40\nnan\t2\t40\n", 2, "time", "not a finite time"),
    ("p.txt", "1.0\t1\t40\ninf\t2\t40\n", 2, "time", "not a finite time"),
    ("p.txt", "1.0\t1\t40\n2.0\t2\t40\t7\n", 2, "columns", "expected 3"),
    ("p.txt", "1.0\t1\t40\n2.0\t40\n", 2, "columns", "got 2"),
    ("p.txt", "1.0\t1.5\t40\n", 1, "seq", "whole number"),
    ("i.csv", "timestamp,rtt\n1.0,40\n2.0,40,3\n", 3, "columns", "expected 2"),
    ("i.csv", "timestamp,rtt\n2023-09-12T00:05:35\n", 2, "columns", "got 1"),
    ("i.csv", "timestamp,rtt\n2023-09-12T00:05:35,40\n", 2, "timestamp", "no timezone"),
    ("i.csv", "timestamp,rtt\nyesterday,40\n", 2, "timestamp", "neither Unix seconds nor an ISO 8601"),
    ("i.csv", "timestamp,rtt\n1.0,40\n2.0,-3\n", 3, "rtt", "-1 = lost"),
    ("i.csv", "timestamp,rtt,up\n1.0,40,x\n", 2, "up", "'x' is not a number"),
    ("i.csv", "timestamp,rtt\n2.0,40\n1.0,40\n", 3, "timestamp", "goes backwards (line 2"),
    ("i.csv", "timestamp,rtt\n", 2, "rows", "no data rows"),
    ("e.txt", "\n\n", 1, "rows", "no data rows"),
    ("u.txt", "hello world\n", 1, "format", "known: iperf3 JSON"),
    ("u.txt", "1.0,1,40\n", 1, "format", "unknown trace format"),
    ("j.json", '{"start": {},\n "intervals": [\n', 3, "json", "not valid JSON"),
    ("j.json", _iperf(intervals=[]), 0, "intervals", "missing or empty"),
    ("j.json", json.dumps({"start": IPERF_START}), 1, "intervals", "missing or empty"),
    ("j.json", _iperf(error="unable to connect to server"), 0, "error", "'unable to connect to server'"),
    ("j.json", _iperf(start={"timestamp": {}}), 1, "start.timestamp.timesecs", "None is not a Unix time"),
    ("j.json", _iperf(intervals=[{"sum": {"start": 0, "end": 0.1, "bytes": 1}}, {"sum": {"start": 0.1, "end": 0.2}}]),
     ("sum", 1), "intervals[1].sum.bytes", "None is not a number >= 0"),
    ("j.json", _iperf(intervals=[{"sum": {"start": 0, "end": 0.1, "bytes": 1}}, {"sum": {"start": 0.05, "end": 0.2,
     "bytes": 1}}]), ("sum", 1), "intervals[1].sum.start", "goes backwards"),
    ("j.json", _iperf(intervals=[{"sum": {"start": 0.2, "end": 0.1, "bytes": 1}}]), ("sum", 0),
     "intervals[0].sum.end", "before its start"),
    ("j.json", _iperf(intervals=[{"streams": []}]), 1, "intervals[0].sum", "missing"),
    ("j.json", "[1, 2]", 1, "json", "JSON object"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "line", "field", "msg"), BAD, ids=[f"{b[0]}-{b[4]}" for b in BAD])
def test_bad_input_is_a_one_line_error_naming_file_line_and_field(tmp_path, name, text, line, field, msg):
    f = tmp_path / name
    f.write_text(text)
    if line == 0:  # the line of the offending key
        key = f'"{field}"'
        line = text[: text.index(key)].count("\n") + 1
    elif isinstance(line, tuple):  # the line of the k-th interval's "sum"
        key, k = line
        at = -1
        for _ in range(k + 1):
            at = text.index(f'"{key}"', at + 1)
        line = text[:at].count("\n") + 1
    with pytest.raises(LeoguardError) as e:
        read_trace(f)
    text_of = str(e.value)
    assert "\n" not in text_of
    assert text_of.startswith(f"{f}:{line}: "), text_of
    assert f"field '{field}'" in text_of, text_of
    assert msg in text_of, text_of


def test_unreadable_files_and_bad_traces_are_errors(tmp_path):
    with pytest.raises(LeoguardError, match=r"cannot read trace .*missing\.txt"):
        read_trace(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"1.0\t1\t4\xff\n")
    with pytest.raises(LeoguardError, match=r"bin\.txt: not UTF-8"):
        read_trace(tmp_path / "bin.txt")
    with pytest.raises(LeoguardError, match="field 't': send time 2 goes backwards"):
        RttTrace("m", "model", [1.0, 2.0, 1.5], [1.0, 2.0, 3.0])
    with pytest.raises(LeoguardError, match="field 'rtt_ms'"):
        RttTrace("m", "model", [1.0, 2.0], [1.0])
    with pytest.raises(LeoguardError, match="field 'trace': no samples"):
        summarise(RttTrace("m", "model", [], []))
