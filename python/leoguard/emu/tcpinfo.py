"""TCP_INFO samples of the emulator's kernel TCP senders (`[emu] tcpinfo_ms`): a sampler runs in each
kernel tcp flow's source host and reads its sockets' TCP_INFO every `tcpinfo_ms` with one sock_diag
netlink request (NETLINK_INET_DIAG, what `ss -tin` reads; asked directly, a reading costs tens of
microseconds instead of the milliseconds of CPU an `ss` process takes from the hosts' one core, which
would perturb the flow it measures), stamping each reading with CLOCK_MONOTONIC before and after (the
clock every namespace of the machine shares, so the run turns the stamps into model time). The run's
`tcpinfo` table (and `tcpinfo.csv` beside `capture.pcap`) holds one row per socket and reading.

    python -m leoguard.emu.tcpinfo DST_PORT INTERVAL_MS DURATION_S OUT_FILE

The sampler writes one JSON object per socket and reading ({"t_lo", "t_hi", "sport", "dport", fields})
to OUT_FILE as it goes, and exits after DURATION_S or on SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

COLUMNS = [
    "flow", "t_ns", "t_lo_ns", "t_hi_ns", "sport", "ca_state", "cwnd", "ssthresh", "rtt_ms", "rttvar_ms", "mss",
    "unacked", "sacked", "lost", "retrans_out", "retrans_total", "reordering", "pacing_rate_bps", "bytes_acked",
    "delivered", "notsent", "busy_ms", "rwnd_limited_ms", "sndbuf_limited_ms", "in_recovery",
]  # fmt: skip
"""The `tcpinfo` table's columns (times in model time, ns; ca_state: Linux's 0 Open, 1 Disorder, 2 CWR,
3 Recovery, 4 Loss)."""

_NETLINK_INET_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_INET_DIAG_INFO = 2
_TCP_ESTABLISHED = 1
_DIAG_MSG = 72  # struct inet_diag_msg
# struct tcp_info (linux/tcp.h) up to tcpi_delivered: the fields kept, by byte offset.
_U32 = {
    "ca_state": (1, "B"), "mss": (16, "I"), "unacked": (24, "I"), "sacked": (28, "I"), "lost": (32, "I"),
    "retrans_out": (36, "I"), "rtt_us": (68, "I"), "rttvar_us": (72, "I"), "ssthresh": (76, "I"),
    "cwnd": (80, "I"), "reordering": (88, "I"), "retrans_total": (100, "I"), "pacing_rate": (104, "Q"),
    "bytes_acked": (120, "Q"), "notsent": (144, "I"), "busy_us": (168, "Q"), "rwnd_limited_us": (176, "Q"),
    "sndbuf_limited_us": (184, "Q"), "delivered": (192, "I"),
}  # fmt: skip


def _request(family: int) -> bytes:
    # struct inet_diag_req_v2: family, protocol, ext (1 << (INET_DIAG_INFO - 1)), pad, states, sockid (48).
    req = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 1 << (_INET_DIAG_INFO - 1), 1 << _TCP_ESTABLISHED)
    req += bytes(48)
    return struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + req


def parse_tcp_info(info: bytes) -> dict[str, Any]:
    """The kept fields of a `struct tcp_info` (a shorter one, from an older kernel, gives fewer)."""
    out: dict[str, Any] = {}
    for k, (off, fmt) in _U32.items():
        if off + struct.calcsize(fmt) <= len(info):
            out[k] = struct.unpack_from("=" + fmt, info, off)[0]
    if out.get("ssthresh", 0) >= 0x7FFFFFFF:
        out["ssthresh"] = None  # TCP_INFINITE_SSTHRESH: not set yet
    return out


def parse_diag(data: bytes, dport: int) -> list[dict[str, Any]]:
    """The sockets towards `dport` in a sock_diag dump reply: {"sport", "dport", tcp_info fields}."""
    out = []
    at = 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, at)
        if length < 16:
            break
        msg = data[at + 16 : at + length]
        at += (length + 3) & ~3
        if kind != _SOCK_DIAG_BY_FAMILY or len(msg) < _DIAG_MSG:
            continue
        sport, dp = struct.unpack_from(">HH", msg, 4)
        if dp != dport:
            continue
        off = _DIAG_MSG
        while off + 4 <= len(msg):
            alen, atype = struct.unpack_from("=HH", msg, off)
            if alen < 4:
                break
            if atype == _INET_DIAG_INFO:
                out.append({"sport": sport, "dport": dp, **parse_tcp_info(msg[off + 4 : off + alen])})
            off += (alen + 3) & ~3
    return out


def read_info(sock: socket.socket, dport: int) -> list[dict[str, Any]]:
    """One reading: every established TCP socket (IPv6 and IPv4) towards `dport`."""
    out = []
    for family in (socket.AF_INET6, socket.AF_INET):
        sock.send(_request(family))
        done = False
        while not done:
            data = sock.recv(1 << 16)
            if not data:
                break
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < 16:
                    done = True
                    break
                at += (length + 3) & ~3
            out += parse_diag(data, dport)
    return out


def sample(dport: int, interval_ms: float, duration_s: float, out: Path) -> int:
    """Reads the TCP_INFO of every established socket towards `dport` every `interval_ms` until
    `duration_s` has passed or SIGTERM; returns the readings taken."""
    stop = False

    def _term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    end = time.monotonic_ns() + int(duration_s * 1e9)
    step = int(interval_ms * 1e6)
    n = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_INET_DIAG) as sock, open(out, "w") as f:
        nxt = time.monotonic_ns()
        while not stop and (now := time.monotonic_ns()) < end:
            if now < nxt:
                time.sleep((nxt - now) / 1e9)
                continue
            t_lo = time.monotonic_ns()
            socks = read_info(sock, dport)
            t_hi = time.monotonic_ns()
            for s in socks:
                f.write(json.dumps({"t_lo": t_lo, "t_hi": t_hi, **s}) + "\n")
            f.flush()
            n += 1
            nxt = max(nxt + step, time.monotonic_ns())  # a slow reading delays the next one, never piles up
    return n


def read_samples(path: Path, flow: int, t0_ns: int) -> list[dict[str, Any]]:
    """A sampler's file as `tcpinfo` rows of `flow`, stamps in model time (CLOCK_MONOTONIC - `t0_ns`). A
    reading counts as in recovery in Linux's Recovery, Loss or CWR state (or with segments marked lost
    or retransmissions out)."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            s = json.loads(line)
        except ValueError:
            continue  # a line cut short when the sampler was stopped
        lo, hi = s["t_lo"] - t0_ns, s["t_hi"] - t0_ns
        row = {c: s.get(c) for c in COLUMNS}
        ms = {"rtt_ms": "rtt_us", "rttvar_ms": "rttvar_us", "busy_ms": "busy_us"}
        ms.update(rwnd_limited_ms="rwnd_limited_us", sndbuf_limited_ms="sndbuf_limited_us")
        for k, src in ms.items():
            row[k] = s[src] / 1e3 if s.get(src) is not None else None
        row.update(flow=flow, t_ns=(lo + hi) // 2, t_lo_ns=lo, t_hi_ns=hi, pacing_rate_bps=_bps(s.get("pacing_rate")))
        row["in_recovery"] = bool(
            (s.get("ca_state") or 0) >= 2 or (s.get("lost") or 0) > 0 or (s.get("retrans_out") or 0) > 0
        )
        rows.append(row)
    return rows


def _bps(bytes_per_s: int | None) -> int | None:
    # ~0 (unlimited) when the kernel has no pacing rate.
    return None if bytes_per_s is None or bytes_per_s >= 1 << 63 else bytes_per_s * 8


def table(rows: list[dict[str, Any]]) -> Any:
    """The `tcpinfo` DataFrame (empty with the columns when there are no rows)."""
    import polars as pl

    schema: dict[str, Any] = {c: pl.Int64 for c in COLUMNS}
    for c in ("rtt_ms", "rttvar_ms", "busy_ms", "rwnd_limited_ms", "sndbuf_limited_ms"):
        schema[c] = pl.Float64
    schema["in_recovery"] = pl.Boolean
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def start(spawn: Any, flows: list[tuple[int, int, int]], interval_ms: float, duration_s: float, wdir: Path) -> list:
    """Starts a sampler per (flow, source node, destination port) with `spawn(node, args, tag)` (the run's
    way to start software in a host); returns [(flow, proc, file)]."""
    procs = []
    for flow, node, port in flows:
        out = wdir / f"tcpinfo{flow}.jsonl"
        args = [sys.executable, "-m", "leoguard.emu.tcpinfo", str(port), f"{interval_ms:g}", f"{duration_s:.3f}"]
        procs.append((flow, spawn(node, [*args, str(out)], f"tcpinfo{flow}"), out))
    return procs


def stop(procs: list) -> None:
    """Stops the samplers `start` returned (SIGTERM, then up to 5 s each)."""
    for _flow, p, _out in procs:
        p.stop()
        p.finish(5.0)


def rows(procs: list, t0_ns: int) -> list[dict[str, Any]]:
    """The stopped samplers' `tcpinfo` rows (`table` makes the DataFrame)."""
    out: list[dict[str, Any]] = []
    for flow, _p, path in procs:
        out += read_samples(path, flow, t0_ns)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[1])
    sample(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]))
