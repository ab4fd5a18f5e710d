"""A UDP probe for emulator hosts: `send` paces datagrams carrying a sequence number and the
CLOCK_MONOTONIC send time (the clock is shared by every namespace of the machine), `recv` records
(seq, sent_ns, received_ns) per datagram, so endpoint loss and one-way delay are measured per packet.

    python -m leoguard.emu.udpprobe send DST_ADDR PORT RATE_BPS SIZE DURATION_S [TRAFFIC_CLASS [GSO]]
    python -m leoguard.emu.udpprobe recv BIND_ADDR PORT DURATION_S OUT_FILE

The receiver writes a JSON object {"sent_by_seq_max", "records": [[seq, sent_ns, recv_ns], ...]}; the
sender prints {"sent": N} when done. With GSO > 1 the sender hands the kernel GSO datagrams at a time
in one write (UDP_SEGMENT, as QUIC stacks do), each with its own sequence number: the host's kernel
passes such a write on as one super-packet where its device takes UDP segmentation offload."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path

HEADER = struct.Struct("!QQ")


#: Linux's UDP_SEGMENT socket option (SOL_UDP): the segment size of a GSO write.
UDP_SEGMENT = 103

#: The most payload one UDP write may carry (a GSO write included), bytes.
MAX_WRITE = 65_507


def payload_bytes(size: int, v6: bool = True) -> int:
    """A datagram's payload so its IP packet is `size` bytes (IPv6 + UDP headers: 48, IPv4: 28)."""
    return max(HEADER.size, size - (48 if v6 else 28))


def send(dst: str, port: int, rate_bps: float, size: int, duration_s: float, tclass: int = 0, gso: int = 1) -> int:
    fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if tclass:
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tclass)
        else:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tclass)
        # A marked packet also gets the interactive priority EF conventionally maps to (6), so the
        # host's own queue (pfifo_fast bands) does not hold it behind its bulk traffic.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 6)
    seg = payload_bytes(size, fam == socket.AF_INET6)
    if gso > 1:
        s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, seg)
    payload = bytearray(seg * gso)
    interval_ns = int(size * 8 / rate_bps * 1e9)
    start = time.monotonic_ns()
    end = start + int(duration_s * 1e9)
    seq = errors = 0
    while True:
        due = start + seq * interval_ns
        if due >= end:
            break
        now = time.monotonic_ns()
        if now < due:
            gap = due - now
            if gap > 200_000:
                time.sleep((gap - 100_000) / 1e9)
            continue
        stamp = time.monotonic_ns()
        for k in range(gso):
            HEADER.pack_into(payload, k * seg, seq + k, stamp)
        # A full queue at the sender is loss at the sender: counted here and in the receiver's gaps.
        try:
            s.sendto(payload, (dst, port))
        except OSError:
            errors += gso
        seq += gso
    _drop_realtime()
    print(json.dumps({"sent": seq, "send_errors": errors}), flush=True)
    return 0


def _drop_realtime() -> None:
    """Leaves the real-time priority the emulator gave this probe for pacing (and stamping) once the
    paced part is over: the interpreter's exit (tens of ms of teardown) must not hold the hosts' CPU
    from the receiving probe, which would stamp the packets that wait behind it late, in a burst."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


#: The receiving kernel's UDP counters of datagrams it took in but never handed to a socket.
UDP_ERRORS = {"RcvbufErrors": "host_udp_rcvbuf", "InCsumErrors": "host_udp_checksum", "InErrors": "host_udp_in"}


def udp_errors() -> dict[str, int]:
    """This namespace's kernel UDP error counters (IPv4 and IPv6 summed), by `UDP_ERRORS` name."""
    got = dict.fromkeys(UDP_ERRORS.values(), 0)
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/snmp").read_text().splitlines()
        udp = [ln.split()[1:] for ln in lines if ln.startswith("Udp:")]
        if len(udp) == 2:
            for k, v in zip(*udp, strict=False):
                if k in UDP_ERRORS:
                    got[UDP_ERRORS[k]] += int(v)
    with contextlib.suppress(OSError):
        for ln in Path("/proc/net/snmp6").read_text().splitlines():
            k, _, v = ln.partition(" ")
            if k.startswith("Udp6") and k[4:] in UDP_ERRORS:
                got[UDP_ERRORS[k[4:]]] += int(v.strip() or 0)
    return got


def recv(bind: str, port: int, duration_s: float, out: str) -> int:
    before = udp_errors()
    fam = socket.AF_INET6 if ":" in bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((bind, port))
    s.settimeout(0.2)
    end = time.monotonic_ns() + int(duration_s * 1e9)
    recs = []
    while time.monotonic_ns() < end:
        try:
            data = s.recv(65535)
        except TimeoutError:
            continue
        now = time.monotonic_ns()
        if len(data) >= HEADER.size:
            seq, sent = HEADER.unpack_from(data)
            recs.append((seq, sent, now))
    _drop_realtime()
    # What the kernel took in for this host and lost before the socket (the probe's host runs nothing
    # else that receives UDP): counted as the hosts' drops, so no loss on the way goes unexplained.
    lost = {k: v - before[k] for k, v in udp_errors().items() if v > before[k]}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"records": recs, "kernel_udp_errors": lost}, f)
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "send" and len(argv) in (6, 7, 8):
        tclass = int(argv[6]) if len(argv) >= 7 else 0
        gso = int(argv[7]) if len(argv) == 8 else 1
        return send(argv[1], int(argv[2]), float(argv[3]), int(argv[4]), float(argv[5]), tclass, gso)
    if argv and argv[0] == "recv" and len(argv) == 5:
        return recv(argv[1], int(argv[2]), float(argv[3]), argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
