"""Packet captures of simulator runs: a pcap that tshark decodes as IPv6 with SATGUARD's Hop-by-Hop
options, UDP and TCP, with no expert errors; capture nodes resolved by name, bad names refused."""

import re
import shutil
import struct
import subprocess

import pytest

from leoguard import LeoguardError
from leoguard.scenario import from_dict
from leoguard.simulate import simulate


def lossy_chain(**capture):
    return from_dict(
        {
            "name": "capture", "duration_s": 1.0, "seed": 5,
            "topology": {
                "kind": "chain", "hops": 2, "rate_mbps": 20, "delay_ms": 2, "loss_on": "all",
                "loss": {"model": "bernoulli", "p": 0.03},
            },
            "flows": [
                {"kind": "cbr", "src": "n0", "dst": "n2", "rate_mbps": 2, "size": 1200, "delay_sensitive": True},
                {"kind": "tcp", "src": "n0", "dst": "n2", "cc": "cubic", "bytes": 200_000},
            ],
            "satguard": {},
            "capture": {"nodes": ["n1"], **capture},
        }
    )  # fmt: skip


def tshark(*args: str) -> str:
    exe = shutil.which("tshark")
    if exe is None:
        pytest.fail("tshark is not installed: run `make setup` (apt package tshark)")
    out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"tshark {args} failed: {out.stderr}"
    return out.stdout


def records(pcap: bytes) -> list[tuple[int, int]]:
    """(captured length, original length) of every record of a classic little-endian pcap."""
    assert pcap[:4] == struct.pack("<I", 0xA1B2C3D4) and struct.unpack("<I", pcap[20:24])[0] == 101
    out, at = [], 24
    while at < len(pcap):
        incl, orig = struct.unpack("<II", pcap[at + 8 : at + 16])
        out.append((incl, orig))
        at += 16 + incl
    assert at == len(pcap)
    return out


def test_a_capture_at_a_middle_node_opens_in_tshark(tmp_path):
    r = simulate(lossy_chain(snaplen=65535))
    assert r.capture is not None and r.capture_missed == 0
    assert r.satguard is not None and r.satguard["retransmissions"] > 0, "the loss was repaired on the links"
    files = r.write(tmp_path)
    pcap = files["capture"]
    assert pcap == tmp_path / "capture.pcap" and pcap.read_bytes() == r.capture
    recs = records(r.capture)
    # Every packet through n1 twice (in and out) plus the HAcks n1 sends and receives.
    assert len(recs) > 2 * r.flows["packets_sent"].sum() * 0.9
    assert all(incl == orig for incl, orig in recs)

    text = tshark("-r", str(pcap), "-V", "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE")
    frames = text.split("\nFrame ")
    assert len(frames) == len(recs)
    assert "Malformed" not in text and "Checksum Status: Bad" not in text
    hbh = [f for f in frames if "IPv6 Hop-by-Hop Option" in f]
    assert hbh, "SATGUARD packets carry a Hop-by-Hop header"
    # A protected data packet: HSeq (0x3E, subtype 01) and FSeq (0x1E, subtype 02, delay-sensitive) over UDP.
    data = [f for f in hbh if "User Datagram Protocol" in f]
    assert data
    f = data[0]
    assert "Experimental (0x3E)" in f and "Experimental (0x1E)" in f
    assert re.search(r"Experimental Option: 01\d\d[0-9a-f]{4}", f) and re.search(r"Experimental Option: 0201", f)
    assert "[Length: 16 bytes]" in f and "DSCP: EF PHB" in f and "[Checksum Status: Good]" in f
    # HAcks: link-local, hop limit 255, the HAck option (0x1E, subtype 03), No Next Header.
    hacks = [f for f in hbh if re.search(r"Experimental Option: 0300[0-9a-f]{12}\n", f)]
    assert hacks and all("Hop Limit: 255" in f and "No Next Header for IPv6 (59)" in f for f in hacks)
    # TCP (not delay-sensitive, so not protected: no Hop-by-Hop header), data and ACKs, valid checksums.
    tcp = [f for f in frames if "Transmission Control Protocol" in f]
    assert tcp and all("IPv6 Hop-by-Hop Option" not in f for f in tcp)
    assert all("[Checksum Status: Good]" in f for f in tcp)
    assert any("Flags: 0x010 (ACK)" in f for f in tcp)
    # Addresses are fd00::<node id>: the flow's ends.
    assert "Src: fd00::, Dst: fd00::2" in text and "Src: fd00::2, Dst: fd00::" in text

    expert = tshark("-r", str(pcap), "-q", "-z", "expert", "-o", "tcp.check_checksum:TRUE")
    assert "Errors" not in expert, expert


def test_default_snaplen_cuts_records_and_keeps_the_original_length(tmp_path):
    r = simulate(lossy_chain())
    recs = records(r.capture)
    assert max(incl for incl, _ in recs) == 128
    assert any(orig == 1200 + 16 for _, orig in recs), "protected CBR packets: 1200 B + 16 B of options"
    path = tmp_path / "c.pcap"
    path.write_bytes(r.capture)
    assert "Errors" not in tshark("-r", str(path), "-q", "-z", "expert")
    assert "Malformed" not in tshark("-r", str(path), "-V")
    small = simulate(lossy_chain(max_packets=10))
    assert len(records(small.capture)) == 10 and small.capture_missed == len(recs) - 10


def test_no_capture_section_no_capture(tmp_path):
    sc = lossy_chain().model_copy(update={"capture": None})
    r = simulate(sc)
    assert r.capture is None
    assert "capture" not in r.write(tmp_path) and not (tmp_path / "capture.pcap").exists()


@pytest.mark.parametrize(
    ("nodes", "pattern"),
    [
        (["Atlantis"], r"capture\.nodes\[0\] = 'Atlantis' is not a node name \(known: n0, n1, n2\)"),
        (["n1", 7], r"capture\.nodes\[1\] = 7 is not a node \(0\.\.2\)"),
        ([], r"capture\.nodes: List should have at least 1 item"),
    ],
)
def test_bad_capture_nodes_are_refused_naming_the_field(nodes, pattern):
    with pytest.raises(LeoguardError, match=pattern):
        lossy_chain(nodes=nodes)


def test_satellites_are_named_on_a_leo_path():
    leo = {
        "name": "leo", "duration_s": 1.0,
        "topology": {"kind": "leo-path", "a": "New York", "b": "London", "rate_mbps": 100},
        "flows": [{"kind": "cbr", "src": "New York", "dst": "London", "rate_mbps": 1}],
    }  # fmt: skip
    names = from_dict({**leo, "capture": {"nodes": ["London"]}}).to_core()["node_names"]
    core = from_dict({**leo, "capture": {"nodes": [names[2], "London"], "snaplen": 96}}).to_core()
    assert core["capture"] == {"nodes": [2, 1], "max_packets": 1_000_000, "snaplen": 96}
    with pytest.raises(LeoguardError, match=r"capture\.nodes\[0\] = 'STARLINK-0' is not a node name"):
        from_dict({**leo, "capture": {"nodes": ["STARLINK-0"]}}).to_core()


def test_a_senders_capture_gives_the_senders_own_acked_and_resent_figures():
    """`leoguard.pcap.delivered_per_second` (how a kernel flow's per-second goodput is read on the
    emulator, where iperf3 reports only bytes written) against the simulator's own sender series on the
    same run: the two-path experiment's BBR through its first handover, captured at the sender's host."""
    import polars as pl

    from leoguard.pcap import delivered_per_second
    from leoguard.reproduce.startcp import two_path, two_path_emu

    sc = two_path("bbr", 18.0).model_copy(update={"capture": two_path_emu("bbr-kernel").capture})
    r = simulate(sc)
    got = delivered_per_second(r.capture, 2, 18)
    own = r.series.filter(pl.col("t_ns") % 1_000_000_000 == 0)
    own = {int(x["t_ns"]): x for x in own.iter_rows(named=True)}
    assert got[-1]["retransmissions"] > 100, "the handover at 15 s costs BBR hundreds of segments"
    for x in got:
        ref = own[x["t_ns"]]
        assert x["retransmissions"] == ref["retransmissions"], x
        # The capture counts from the first data byte; the sender's count is the same bytes.
        assert abs(x["acked_bytes"] - ref["acked_bytes"]) <= 1500, x


def test_a_capture_that_is_not_leoguards_is_refused_naming_what_is_wrong():
    from leoguard.pcap import delivered_per_second, tcp_segments

    with pytest.raises(LeoguardError, match="shorter than a pcap header"):
        list(tcp_segments(b"\xd4\xc3"))
    with pytest.raises(LeoguardError, match="magic"):
        list(tcp_segments(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 101)))
    with pytest.raises(LeoguardError, match="link type 1"):
        list(tcp_segments(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)))
    with pytest.raises(LeoguardError, match="no TCP segment with data"):
        delivered_per_second(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101), 0, 1)


def test_a_kernel_capture_cut_short_is_refused_not_read():
    """A capture that ran past `max_packets` would freeze the kernel flow's figures where it stopped."""
    from types import SimpleNamespace

    from leoguard.reproduce.startcp import kernel_whole_seconds, two_path_emu

    r = SimpleNamespace(emulator={"capture": {"written": 10, "missed": 5}}, scenario=two_path_emu("bbr-kernel"))
    with pytest.raises(LeoguardError, match="5 packets past max_packets"):
        kernel_whole_seconds(r)
