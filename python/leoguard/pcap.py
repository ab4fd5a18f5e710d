"""Reading leoguard's own packet captures (`[capture]`: classic little-endian pcap, LINKTYPE_RAW, IPv6)
back into TCP segments, so a run's figures can be taken from the packets themselves, e.g. a kernel TCP
flow's delivered bytes per second from its receiver's cumulative ACKs (iperf3 reports only what its
sender wrote to the socket)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from leoguard.errors import LeoguardError

PCAP_MAGIC_US = 0xA1B2C3D4
LINKTYPE_RAW = 101
#: IPv6 extension headers that carry a next-header byte and a length in 8-byte units (RFC 8200).
_EXTENSIONS = {0, 43, 60}
_TCP = 6


@dataclass(frozen=True)
class TcpSegment:
    """One captured TCP segment: its capture time (model time, ns), ends, sequence and acknowledgment
    numbers, flags and payload length (from the IPv6 payload length, so a short snaplen does not cut it)."""

    t_ns: int
    src: bytes
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int

    @property
    def has_ack(self) -> bool:
        return bool(self.flags & 0x10)


def tcp_segments(pcap: bytes) -> Iterator[TcpSegment]:
    """The TCP segments of a capture, in capture order. Records that are not IPv6 TCP (UDP, HAcks,
    anything else) are skipped; a record cut before its TCP header ends is skipped too. A file that is
    not a leoguard capture is refused naming what is wrong."""
    if len(pcap) < 24:
        raise LeoguardError(f"capture: {len(pcap)} bytes, shorter than a pcap header (24)")
    magic, _, _, _, _, _, link = struct.unpack("<IHHiIII", pcap[:24])
    if magic != PCAP_MAGIC_US:
        raise LeoguardError(f"capture: magic {magic:#x} is not a little-endian microsecond pcap ({PCAP_MAGIC_US:#x})")
    if link != LINKTYPE_RAW:
        raise LeoguardError(f"capture: link type {link}, expected {LINKTYPE_RAW} (raw IP)")
    at = 24
    while at + 16 <= len(pcap):
        sec, usec, incl, _orig = struct.unpack("<IIII", pcap[at : at + 16])
        body = pcap[at + 16 : at + 16 + incl]
        at += 16 + incl
        if len(body) < 40 or body[0] >> 4 != 6:
            continue
        payload_len = struct.unpack(">H", body[4:6])[0]
        nh, off = body[6], 40
        while nh in _EXTENSIONS and off + 2 <= len(body):
            nh, off = body[off], off + (body[off + 1] + 1) * 8
        if nh != _TCP or off + 20 > len(body):
            continue
        sport, dport, seq, ack, hl_flags = struct.unpack(">HHIIH", body[off : off + 14])
        hdr = (hl_flags >> 12) * 4
        data = payload_len - (off - 40) - hdr
        yield TcpSegment(
            sec * 1_000_000_000 + usec * 1000, body[8:24], body[24:40], sport, dport, seq, ack, hl_flags & 0x1FF,
            max(0, data),
        )  # fmt: skip


def delivered_per_second(pcap: bytes, first_s: int, last_s: int) -> list[dict[str, int]]:
    """The bulk TCP connection of a capture taken at its sender's host (the connection that carried the
    most data), at whole seconds of model time from `first_s` to `last_s`, as the simulator's sender
    series reads: `acked_bytes`, the cumulative acknowledgment that has reached the sender (bytes
    delivered in order), and `retransmissions`, data segments the sender sent again (a sequence range
    it had already sent). At the sender's host each segment is recorded once: data as it leaves, ACKs as
    they arrive."""
    segs = list(tcp_segments(pcap))
    data: dict[tuple, int] = {}
    for s in segs:
        if s.payload:
            key = (s.src, s.sport, s.dst, s.dport)
            data[key] = data.get(key, 0) + s.payload
    if not data:
        raise LeoguardError("capture: no TCP segment with data")
    src, sport, dst, dport = max(data, key=lambda k: data[k])
    acks: list[tuple[int, int]] = []
    sent: list[tuple[int, bool]] = []
    base_seq = None
    high = 0
    for s in sorted(segs, key=lambda s: s.t_ns):
        if (s.src, s.sport, s.dst, s.dport) == (dst, dport, src, sport) and s.has_ack:
            # Relative to the first data byte (an ACK before any data, e.g. the SYN-ACK's, counts 0).
            if base_seq is not None:
                acks.append((s.t_ns, (s.ack - base_seq) % (1 << 32)))
        elif (s.src, s.sport, s.dst, s.dport) == (src, sport, dst, dport) and s.payload:
            if base_seq is None:
                base_seq = s.seq
            rel = (s.seq - base_seq) % (1 << 32)
            end = rel + s.payload
            sent.append((s.t_ns, end <= high))
            high = max(high, end)
    out = []
    ai = si = 0
    acked = retx = 0
    for sec in range(first_s, last_s + 1):
        t = sec * 1_000_000_000
        while ai < len(acks) and acks[ai][0] <= t:
            acked = max(acked, acks[ai][1])
            ai += 1
        while si < len(sent) and sent[si][0] <= t:
            retx += int(sent[si][1])
            si += 1
        out.append({"t_ns": t, "acked_bytes": acked, "retransmissions": retx})
    return out
