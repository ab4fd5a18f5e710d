"""WebRTC flows and the Tambur baseline from a TOML scenario: tables, summary, bad input."""

from pathlib import Path

import pytest

from leoguard import LeoguardError
from leoguard.scenario import load_scenario
from leoguard.simulate import simulate

TOML = """
name = "webrtc-small"
duration_s = 4.0
seed = 5

[topology]
kind = "chain"
hops = 2
rate_mbps = 50
delay_ms = 10
queue_bytes = 500000

[[flows]]
kind = "webrtc"
src = 0
dst = 2
bitrate_mbps = 2.0
fps = 30
keyframe_interval_s = 2.0
fec = "{fec}"

[[flows]]
kind = "tcp"
src = 0
dst = 2
cc = "cubic"
bytes = 2000000
{extra}
"""


def scenario(tmp_path: Path, fec: str = "none", extra: str = ""):
    p = tmp_path / "s.toml"
    p.write_text(TOML.format(fec=fec, extra=extra))
    return load_scenario(p)


def test_webrtc_tables_and_summary(tmp_path):
    r = simulate(scenario(tmp_path))
    w = r.webrtc
    assert w.height == 1 and w["flow"][0] == 0
    # 4 s at 30 fps: captures at 0, 1/30, ..., 4 s.
    assert w["frames_sent"][0] == 121 and w["key_frames"][0] == 3  # at 0, 2 and 4 s
    # Lossless 2 x 10 ms path: every frame not too close to the end is rendered, 30 fps, no freeze.
    # Delay >= 20 ms propagation + the 20 ms playout minimum; a key frame (~46 kB) takes ~74 ms to
    # pace out at 2.5 x 2 Mbit/s, and the jitter estimate (99th percentile over 5 s) covers it, as
    # libwebrtc's frame-size term does; the TCP flow's queue adds to it.
    f = r.webrtc_frames
    cols = {"flow", "frame", "key", "size", "capture_ns", "complete_ns", "render_ns", "e2e_ms", "jb_ms"}
    assert set(f.columns) >= cols
    done = f.filter(f["capture_ns"] < 3_800_000_000)
    assert done["render_ns"].null_count() == 0
    assert 40.0 < w["e2e_p50_ms"][0] < 150.0
    assert w["jb_p50_ms"][0] >= 20.0
    assert w["freezes"][0] == 0 and w["nacks"][0] == 0
    # The playout delay may move by up to 100 ms/s, which shifts a frame across a second boundary.
    assert all(29.0 <= x <= 31.0 for x in r.webrtc_fps["fps"]) and abs(w["fps_mean"][0] - 30.0) < 0.5
    # The key frames are several times the delta frames.
    key = f.filter(f["key"])["size"].mean()
    delta = f.filter(~f["key"])["size"].mean()
    assert 4 < key / delta < 8
    s = r.summary()
    assert s["webrtc"][0]["frames_sent"] == 121
    assert s["flows"][0]["kind"] == "webrtc"
    out = r.write(tmp_path / "out")
    assert {"webrtc", "webrtc_frames", "webrtc_fps"} <= set(out)


def test_tambur_section_and_fec_option(tmp_path):
    r = simulate(scenario(tmp_path, fec="tambur", extra="[tambur]\nslot_ms = 33.3\n"))
    assert r.tambur is not None and r.tambur["data_packets"] > 0
    # No loss was reported, so the 50 % policy never turned the parity on.
    assert r.tambur["parity_packets"] == 0 and r.webrtc["parity_packets"][0] == 0
    assert r.summary()["tambur"]["slots"] > 0


def test_bad_webrtc_and_tambur_input_names_the_field(tmp_path):
    with pytest.raises(Exception, match="fec"):
        scenario(tmp_path, fec="raptor")
    with pytest.raises(Exception, match="tau"):
        scenario(tmp_path, extra="[tambur]\ntau = 0\n")
    with pytest.raises(Exception, match="tambur"):
        scenario(tmp_path, extra="[tambur]\n[linkguardian]\n")
    with pytest.raises((LeoguardError, Exception), match=r"tambur\.flows\[0\]"):
        simulate(scenario(tmp_path, extra="[tambur]\nflows = [0]\n"))
