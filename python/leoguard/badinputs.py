# ruff: noqa: E501 - the corpus is a table: one case a line reads better than wrapped
"""A corpus of bad and odd inputs, tried on the command line as a user would, and the judge of what each
gets: `leoguard` run in-process in a scratch directory, its exit status, stdout and stderr read.

A case is *clear* when the command exits with status 2 and prints exactly one line on stderr, starting
`error:`, that names what is wrong (the case says which word must appear), and writes nothing outside
the scratch directory's `out/`. Anything else (a traceback, several lines, exit 0 or 1, a message that
does not name the field, a hang past the case's time limit) is *not clear*. `tools/bad_inputs.py`
runs the corpus and writes docs/errors.md; python/tests/test_bad_inputs_corpus.py holds it to >= 98 %.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CHAIN = (
    'duration_s = 0.2\n[topology]\nkind = "chain"\nhops = 1\nrate_mbps = 10\ndelay_ms = 1\n'
    '[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n'
)
TLE = (
    "ISS (ZARYA)\n"
    "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927\n"
    "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537\n"
)


def _tle(text: str) -> str:
    """`text` with each TLE line's checksum (column 69) recomputed, so a case tests what it changed."""

    def fix(line: str) -> str:
        if len(line) != 69 or line[0] not in "12":
            return line
        total = sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line[:68])
        return line[:68] + str(total % 10)

    return "\n".join(fix(ln) for ln in text.split("\n"))


def _chain(**top: object) -> str:
    """The small chain scenario with top-level fields replaced (TOML values as written)."""
    lines = [f"{k} = {v}" for k, v in top.items()]
    return "\n".join(lines) + "\n" + CHAIN if lines else CHAIN


def _topo(extra: str) -> str:
    return CHAIN.replace("delay_ms = 1\n", f"delay_ms = 1\n{extra}\n")


@dataclass
class Case:
    """One bad input: the arguments after `leoguard`, files to lay in the scratch directory first, and a
    word (a field or option name) the one-line error must contain."""

    what: str
    argv: list[str]
    names: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    issue: bool = False
    """One of the cases issue 27 found (the rest are the fresh round)."""
    ok: bool = False
    """An odd input that should run (exit 0) and write only under out/."""


def _scn(what: str, text: str, names: str, issue: bool = False, cmd: str = "run") -> Case:
    return Case(what, [cmd, "s.toml", "--out", "out/r"], names, {"s.toml": text}, issue)


CASES: list[Case] = [
    # --- issue 27's cases -------------------------------------------------------------------------
    Case("scenario name ../../../../tmp/x/escape (runs; results only under out/)", ["run", "s.toml"], "",
         {"s.toml": _chain(name='"../../../../tmp/x/escape"')}, True, ok=True),
    Case("scenario name with /../ and unicode (runs; results only under out/)", ["run", "s.toml"], "",
         {"s.toml": _chain(name='"a/../../ünï/../b"')}, True, ok=True),
    _scn("5000-character scenario name", _chain(name='"' + "x" * 5000 + '"'), "name", True),
    Case("--out is an existing file", ["run", "s.toml", "--out", "afile"], "--out", {"s.toml": CHAIN, "afile": "x"}, True),
    Case("results list on a missing store", ["results", "list", "--store", "nostore"], "nostore", {}, True),
    Case("results list on an unrelated directory", ["results", "list", "--store", "adir"], "catalog", {"adir/x": "1"}, True),
    _scn("flow between nodes with no route",
         'duration_s = 1\nnodes = 4\n[[links]]\na = 0\nb = 1\nrate_mbps = 10\ndelay_ms = 1\n'
         '[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 3\n', "flows[0]", True),
    _scn("leo-path from New York to New York",
         'duration_s = 1\n[topology]\nkind = "leo-path"\na = "New York"\nb = "New York"\nrate_mbps = 10\n'
         '[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n', "same place", True),
    Case('path "" London', ["path", "", "London", "--duration", "1", "--out", "out/p"], "empty", {}, True),
    Case('places find ""', ["places", "find", ""], "empty", {}, True),
    Case("TLE with 99 revolutions/day", ["constellation", "info", "--tle", "f.tle"], "perigee",
         {"f.tle": _tle(TLE.replace("15.72125391563537", "99.00000000563537"))}, True),
    Case("TLE with eccentricity 0.99", ["constellation", "info", "--tle", "f.tle"], "perigee",
         {"f.tle": _tle(TLE.replace(" 0006703 ", " 9900000 "))}, True),
    Case("TLE listing one satellite twice", ["constellation", "info", "--tle", "f.tle"], "duplicate",
         {"f.tle": TLE + TLE}, True),
    _scn("duration_s = true", _chain(duration_s="true").replace("duration_s = 0.2\n", "", 1), "duration_s", True),
    _scn("delay_ms = 1e12", CHAIN.replace("delay_ms = 1", "delay_ms = 1e12"), "delay_ms", True),
    Case("beams --t nan", ["beams", "London", "--t", "nan"], "t", {}, True),
    Case("beams --t inf", ["beams", "London", "--t", "inf"], "t", {}, True),
    Case("beams --t 1e300", ["beams", "London", "--t", "1e300"], "t", {}, True),
    _scn("sample_every_s = 1e-9", _chain(sample_every_s="1e-9"), "sample_every_s", True),
    Case("places top 10000000", ["places", "top", "10000000"], "10000000", {}, True),
    Case("path --seed huge", ["path", "New York", "London", "--duration", "1", "--seed", "9" * 30, "--out", "out/p"],
         "seed", {}, True),
    Case("beams --resolution -1", ["beams", "London", "--resolution", "-1"], "resolution", {}, True),
    Case("beams --resolution 99999999999999999999", ["beams", "London", "--resolution", "99999999999999999999"],
         "resolution", {}, True),
    Case("export-tle into a directory", ["constellation", "export-tle", "kuiper", "adir"], "adir", {"adir/x": "1"}, True),
    Case("export-tle into a missing parent", ["constellation", "export-tle", "kuiper", "no/such/dir/f.tle"], "no/such",
         {}, True),
    Case("tunnel up on a binary file", ["tunnel", "up", "bin.toml", "--run-dir", "out/rd"], "bin.toml",
         {"bin.toml": bytes(range(256)) * 4}, True),
    _scn("oversized integer in a scenario field", _chain(seed="99999999999999999999999"), "seed", True),
    _scn("oversized queue_packets", _topo("queue_packets = 9223372036854775807"), "queue_packets", True),
    Case("interruption fixed:-50ms", ["path", "New York", "London", "--duration", "1", "--interruption", "fixed:-50ms",
                                      "--out", "out/p"], "interruption", {}, True),
    Case("empty TLE file", ["constellation", "info", "--tle", "empty.tle"], "empty.tle", {"empty.tle": ""}, True),
    Case("constellation info kuiper --tle F", ["constellation", "info", "kuiper", "--tle", "f.tle"], "--tle",
         {"f.tle": TLE}, True),
    Case("a 100 KB argument", ["places", "find", "x" * 100_000], "place", {}, True),
    Case("--json true (a flag given a value)", ["constellation", "list", "--json", "true"], "true", {}, True),
    # --- a fresh round --------------------------------------------------------------------------
    Case("no such scenario file", ["run", "missing.toml"], "missing.toml"),
    Case("scenario is a directory", ["run", "adir"], "adir", {"adir/x": "1"}),
    _scn("scenario not TOML", "this is = = not toml\n", "TOML"),
    _scn("scenario not UTF-8", b"name = '\xff'\n", "UTF-8"),
    _scn("empty scenario", "", "duration_s"),
    _scn("unknown top-level field", _chain(colour='"blue"'), "colour"),
    _scn("duration_s negative", CHAIN.replace("duration_s = 0.2", "duration_s = -1"), "duration_s"),
    _scn("duration_s zero", CHAIN.replace("duration_s = 0.2", "duration_s = 0"), "duration_s"),
    _scn("duration_s as text", CHAIN.replace("duration_s = 0.2", 'duration_s = "ten"'), "duration_s"),
    _scn("duration_s nan", CHAIN.replace("duration_s = 0.2", "duration_s = nan"), "duration_s"),
    _scn("duration_s inf", CHAIN.replace("duration_s = 0.2", "duration_s = inf"), "duration_s"),
    _scn("duration_s 1e7", CHAIN.replace("duration_s = 0.2", "duration_s = 1e7"), "duration_s"),
    _scn("seed negative", _chain(seed="-1"), "seed"),
    _scn("seed as float", _chain(seed="1.5"), "seed"),
    _scn("seed as boolean", _chain(seed="false"), "seed"),
    _scn("name as a number", _chain(name="42"), "name"),
    _scn("name empty", _chain(name='""'), "name"),
    _scn("name with a newline", _chain(name='"a\\nb"'), "name"),
    _scn("no flows", CHAIN.split("[[flows]]")[0], "flows"),
    _scn("flow kind unknown", CHAIN.replace('kind = "tcp"', 'kind = "quic"'), "kind"),
    _scn("flow src == dst", CHAIN.replace("dst = 1", "dst = 0"), "src"),
    _scn("flow dst out of range", CHAIN.replace("dst = 1", "dst = 9"), "dst"),
    _scn("flow dst unknown name", CHAIN.replace("dst = 1", 'dst = "mars"'), "dst"),
    _scn("flow cc unknown", CHAIN.replace('kind = "tcp"', 'kind = "tcp"\ncc = "vegas"'), "cc"),
    _scn("cbr without rate", CHAIN.replace('kind = "tcp"', 'kind = "cbr"'), "rate_mbps"),
    _scn("cbr absurd rate", CHAIN.replace('kind = "tcp"', 'kind = "cbr"\nrate_mbps = 1e9'), "rate_mbps"),
    _scn("flow size too small", CHAIN.replace('kind = "tcp"', 'kind = "tcp"\nsize = 10'), "size"),
    _scn("flow bytes zero", CHAIN.replace('kind = "tcp"', 'kind = "tcp"\nbytes = 0'), "bytes"),
    _scn("flow bytes and rate", CHAIN.replace('kind = "tcp"', 'kind = "tcp"\nbytes = 10\nrate_mbps = 1'), "rate_mbps"),
    _scn("flow start negative", CHAIN.replace('kind = "tcp"', 'kind = "tcp"\nstart_s = -1'), "start_s"),
    _scn("web flow without pages", CHAIN.replace('kind = "tcp"', 'kind = "web"'), "pages"),
    _scn("web page out of corpus", CHAIN.replace('kind = "tcp"', 'kind = "web"\npages = [99999]'), "pages"),
    _scn("web page range huge", CHAIN.replace('kind = "tcp"', 'kind = "web"\npages = {count = 1000000000000}'),
         "count"),
    _scn("stack on a cbr flow", CHAIN.replace('kind = "tcp"', 'kind = "cbr"\nrate_mbps = 1\nstack = "kernel"'), "stack"),
    _scn("chain hops zero", CHAIN.replace("hops = 1", "hops = 0"), "hops"),
    _scn("chain hops huge", CHAIN.replace("hops = 1", "hops = 100000000"), "hops"),
    _scn("chain rate zero", CHAIN.replace("rate_mbps = 10", "rate_mbps = 0"), "rate_mbps"),
    _scn("chain rate 1e12", CHAIN.replace("rate_mbps = 10", "rate_mbps = 1e12"), "rate_mbps"),
    _scn("chain delay negative", CHAIN.replace("delay_ms = 1", "delay_ms = -1"), "delay_ms"),
    _scn("chain delay as boolean", CHAIN.replace("delay_ms = 1", "delay_ms = true"), "delay_ms"),
    _scn("topology kind unknown", CHAIN.replace('kind = "chain"', 'kind = "ring"'), "kind"),
    _scn("topology and links both", CHAIN + "[[links]]\na = 0\nb = 1\nrate_mbps = 1\ndelay_ms = 1\n", "links"),
    _scn("queue_bytes zero", _topo("queue_bytes = 0"), "queue_bytes"),
    _scn("loss model unknown", _topo('loss = { model = "sometimes" }'), "model"),
    _scn("bernoulli without p", _topo('loss = { model = "bernoulli" }'), "p"),
    _scn("bernoulli p above 1", _topo('loss = { model = "bernoulli", p = 1.5 }'), "p"),
    _scn("gilbert_elliott missing rates", _topo('loss = { model = "gilbert_elliott", p_gb = 0.1 }'), "p_bg"),
    _scn("loss trace missing", _topo('loss = { model = "trace_per_second", trace = "nope.csv" }'), "nope.csv"),
    _scn("rate schedule empty", _topo("rate_schedule = { period_s = 1, rates_mbps = [] }"), "rates_mbps"),
    _scn("rate schedule on a missing link", _topo("rate_schedule = { period_s = 1, rates_mbps = [5] }\n"
                                                  "rate_schedule_on = [4]"), "rate_schedule_on"),
    _scn("event on a missing link", CHAIN + "[[events]]\nt_s = 0.1\nlink = 7\nup = false\n", "events[0].link"),
    _scn("event time negative", CHAIN + "[[events]]\nt_s = -1\nlink = 0\nup = false\n", "t_s"),
    _scn("route to a missing node", CHAIN + "[[routes]]\nt_s = 0\nnode = 0\ndst = 9\n", "routes[0].dst"),
    _scn("satguard and linkguardian both", CHAIN + "[satguard]\n[linkguardian]\n", "satguard"),
    _scn("satguard holds out of order", CHAIN + "[satguard]\nreorder_min_hold_ms = 50\n", "reorder"),
    _scn("satguard max_retries 300", CHAIN + "[satguard]\nmax_retries = 300\n", "max_retries"),
    _scn("mpep on a chain", CHAIN + "[mpep]\n", "mpep"),
    _scn("capture of an unknown node", CHAIN + '[capture]\nnodes = ["mars"]\n', "capture"),
    _scn("capture snaplen zero", CHAIN + "[capture]\nnodes = [0]\nsnaplen = 0\n", "snaplen"),
    _scn("two-path interruption longer than a switch", 'duration_s = 1\n[topology]\nkind = "two-path"\n'
         "switch_every_s = 1\ninterruption_ms = 5000\npaths = [{rate_mbps = 10, delay_ms = 10}, "
         '{rate_mbps = 10, delay_ms = 20}]\n[[flows]]\nkind = "tcp"\nsrc = "src"\ndst = "dst"\n', "interruption_ms"),
    _scn("leo-path unknown city", 'duration_s = 1\n[topology]\nkind = "leo-path"\na = "Qwxzville"\nb = "London"\n'
         'rate_mbps = 10\n[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n', "Qwxzville"),
    _scn("leo-path min elevation 95", 'duration_s = 1\n[topology]\nkind = "leo-path"\na = "Paris"\nb = "London"\n'
         'rate_mbps = 10\nmin_elevation_deg = 95\n[[flows]]\nkind = "tcp"\nsrc = 0\ndst = 1\n', "min_elevation_deg"),
    _scn("emu section unknown field", CHAIN + "[emu]\nturbo = true\n", "turbo", cmd="run"),
    Case("run --seed -1", ["run", "s.toml", "--seed", "-1", "--out", "out/r"], "seed", {"s.toml": CHAIN}),
    Case("run --duration 0", ["run", "s.toml", "--duration", "0", "--out", "out/r"], "duration_s", {"s.toml": CHAIN}),
    Case("run --duration abc", ["run", "s.toml", "--duration", "abc"], "--duration", {"s.toml": CHAIN}),
    Case("run --out under a file", ["run", "s.toml", "--out", "afile/sub"], "--out", {"s.toml": CHAIN, "afile": "x"}),
    Case("run with an unknown option", ["run", "s.toml", "--turbo"], "--turbo", {"s.toml": CHAIN}),
    Case("an unknown command", ["teleport"], "teleport"),
    Case("run without a scenario", ["run"], "scenario"),
    Case("path with an unknown city", ["path", "Qwxzville", "London", "--duration", "1", "--out", "out/p"], "Qwxzville"),
    Case("path with lat,lon out of range", ["path", "95,10", "London", "--duration", "1", "--out", "out/p"], "latitude"),
    Case("path --duration 0", ["path", "Paris", "London", "--duration", "0", "--out", "out/p"], "duration"),
    Case("path --step 0", ["path", "Paris", "London", "--duration", "1", "--step", "0", "--out", "out/p"], "step"),
    Case("path --step 1e-9", ["path", "Paris", "London", "--duration", "10", "--step", "1e-9", "--out", "out/p"], "step"),
    Case("path --duration nan", ["path", "Paris", "London", "--duration", "nan", "--out", "out/p"], "duration"),
    Case("path --policy unknown", ["path", "Paris", "London", "--duration", "1", "--policy", "teleport",
                                   "--out", "out/p"], "policy"),
    Case("path --min-elevation 91", ["path", "Paris", "London", "--duration", "1", "--min-elevation", "91",
                                     "--out", "out/p"], "min_elevation"),
    Case("path --epoch yesterday", ["path", "Paris", "London", "--duration", "1", "--epoch", "yesterday",
                                    "--out", "out/p"], "epoch"),
    Case("path -c unknown preset", ["path", "Paris", "London", "-c", "starlonk", "--out", "out/p"], "starlonk"),
    Case("path --out is a file", ["path", "Paris", "London", "--duration", "1", "--out", "afile"], "--out",
         {"afile": "x"}),
    Case("path with the same place twice", ["path", "Paris", "paris", "--duration", "1", "--out", "out/p"], "same"),
    Case("beams with no place", ["beams"], "places"),
    Case("beams --resolution 16", ["beams", "London", "--resolution", "16"], "resolution"),
    Case("beams --min-elevation -5", ["beams", "London", "--min-elevation", "-5"], "min_elevation"),
    Case("places top 0", ["places", "top", "0"], "n"),
    Case("places top -3", ["places", "top", "-3"], "n"),
    Case("places find a comma", ["places", "find", ","], "empty"),
    Case("constellation info unknown", ["constellation", "info", "starlonk"], "starlonk"),
    Case("constellation info --tle missing", ["constellation", "info", "--tle", "none.tle"], "none.tle"),
    Case("TLE with a bad checksum", ["constellation", "info", "--tle", "f.tle"], "checksum",
         {"f.tle": TLE.replace("0  2927", "0  2925")}),
    Case("TLE with a short line", ["constellation", "info", "--tle", "f.tle"], "69 characters",
         {"f.tle": TLE.replace("563537", "56353")}),
    Case("TLE that is binary", ["constellation", "info", "--tle", "f.tle"], "f.tle", {"f.tle": b"\x00\xff" * 100}),
    Case("export-tle unknown preset", ["constellation", "export-tle", "starlonk", "out/x.tle"], "starlonk"),
    Case("bench fec --blocks 0", ["bench", "fec", "--blocks", "0"], "--blocks"),
    Case("bench constellation --threads 0", ["bench", "constellation", "--threads", "0"], "--threads"),
    Case("bench startup --runs 0", ["bench", "startup", "--runs", "0"], "--runs"),
    Case("bench emu --scheme unknown", ["bench", "emu", "--scheme", "quantum"], "--scheme"),
    Case("results query on a directory that is not a store", ["results", "query", "SELECT 1", "--store", "store"],
         "catalog", {"store/.keep": ""}),
    Case("tunnel up on a missing file", ["tunnel", "up", "none.toml", "--run-dir", "out/rd"], "none.toml"),
    Case("tunnel up on TOML without a name", ["tunnel", "up", "t.toml", "--run-dir", "out/rd"], "name",
         {"t.toml": "mtu = 1400\n"}),
    Case("reproduce startcp --engine unknown", ["reproduce", "startcp", "--engine", "quantum"], "--engine"),
    Case("reproduce startcp --duration 5", ["reproduce", "startcp", "--duration", "5"], "--duration"),
    Case("reproduce satguard --quick --full", ["reproduce", "satguard", "--quick", "--full"], "--full"),
    Case("reproduce satguard --out is a file", ["reproduce", "satguard", "--out", "afile"], "--out", {"afile": "x"}),
    Case("validate sim-vs-emu --write into a directory", ["validate", "sim-vs-emu", "--write", "adir"], "--write",
         {"adir/x": "1"}),
    Case("validate sim-vs-emu --write under a file", ["validate", "sim-vs-emu", "--write", "afile/x.md"], "--write",
         {"afile": "x"}),
    Case("demo --out is a file", ["demo", "--out", "afile"], "--out", {"afile": "x"}),
    Case("demo --duration -1", ["demo", "--duration", "-1", "--out", "out/d"], "duration"),
    Case("ablation --variant unknown", ["ablation", "s.toml", "-v", "quantum", "--out", "out/a"], "quantum",
         {"s.toml": CHAIN}),
    Case("emu run with a bad scenario", ["emu", "run", "s.toml"], "duration_s",
         {"s.toml": CHAIN.replace("duration_s = 0.2", "duration_s = -1")}),
    Case("emu udp_gso_segments past a datagram", ["emu", "run", "s.toml"], "udp_gso_segments",
         {"s.toml": CHAIN.replace('kind = "tcp"', 'kind = "cbr"\nrate_mbps = 1\nsize = 1500')
          + "[emu]\nudp_gso_segments = 64\n"}),
    Case("reproduce satguard --engine gpu", ["reproduce", "satguard", "--engine", "gpu"], "--engine"),
    Case("reproduce satguard --engine emu with --scheme", ["reproduce", "satguard", "--engine", "emu", "--scheme",
         "tambur"], "--scheme"),
    Case("reproduce satguard --engine emu with an unknown pair", ["reproduce", "satguard", "--engine", "emu",
         "--pair", "MARS-LON"], "MARS-LON"),
    Case("validate tcp-trace on a missing results directory", ["validate", "tcp-trace", "run-x"], "run-x"),
    Case("validate tcp-trace --pacing maybe", ["validate", "tcp-trace", "run-x", "--pacing", "maybe"], "--pacing"),
    Case("validate tcp-trace on a capture without the flow", ["validate", "tcp-trace", "r"], "flows[0]",
         {"r/run.json": '{"engine": "emu", "scenario": {"duration_s": 0.2, "topology": {"kind": "chain", "hops": 1, '
                        '"rate_mbps": 10, "delay_ms": 1}, "flows": [{"kind": "tcp", "src": 0, "dst": 1}]}}',
          "r/capture.pcap": struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101),
          "r/tcpinfo.csv": "flow,sport,t_lo_ns,t_hi_ns,cwnd,in_recovery\n"}),
    Case("tcp-script on a missing script", ["tcp-script", "nope.pkt"], "nope.pkt"),
    Case("tcp-script on a directory", ["tcp-script", "scripts"], "scripts", {"scripts/x.pkt": "0 socket(..., SOCK_STREAM, 6) = 3\n"}),
    Case("validate starlink on a trace of unknown format", ["validate", "starlink", "t.txt", "--out", "out/r"], "format", {"t.txt": "hello world\n"}),
    Case("validate starlink on a ping log whose time goes backwards", ["validate", "starlink", "p.txt"], "p.txt:2", {"p.txt": "1694477135.68\t1\t40.1\n1694477135.50\t2\t41.0\n"}),
    Case("validate starlink on a ping log with a bad RTT", ["validate", "starlink", "p.txt"], "p.txt:2", {"p.txt": "1694477135.68\t1\t40.1\n1694477135.83\t2\tabc\n"}),
    Case("validate starlink on an irtt CSV with no rows", ["validate", "starlink", "i.csv"], "rows", {"i.csv": "timestamp,rtt,uplink,downlink\n"}),
    Case("validate starlink on an iperf3 error report", ["validate", "starlink", "i.json"], "i.json", {"i.json": '{"start": {}, "intervals": [], "error": "unable to connect to server"}\n'}),
    Case("validate starlink with a dish that is no place", ["validate", "starlink", "p.txt", "--dish", "Nowhereville Xq"], "--dish", {"p.txt": "".join(f"{1694477135.68 + 0.15 * i:.2f}\t{i + 1}\t40.0\n" for i in range(400))}),
    Case("validate starlink with an unknown profile", ["validate", "starlink", "p.txt", "--profile", "mars-1"], "mars-1", {"p.txt": "1694477135.68\t1\t40.1\n1694477135.83\t2\t41.0\n"}),
    Case("validate starlink with an unknown engine", ["validate", "starlink", "--engine", "gpu"], "--engine"),
    Case("validate starlink with a start that is no time", ["validate", "starlink", "--start", "yesterday"], "--start"),
]  # fmt: skip


@dataclass
class Outcome:
    """What one case got."""

    case: Case
    status: int | None
    stdout: str
    stderr: str
    wall_s: float
    wrote_outside: list[str]

    @property
    def clear(self) -> bool:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if self.case.ok:
            return self.status == 0 and not self.wrote_outside and "Traceback" not in self.stderr
        return (
            self.status == 2
            and len(lines) == 1
            and lines[0].startswith("error: ")
            and "Traceback" not in self.stderr
            and self.case.names.lower() in lines[0].lower()
            and len(lines[0]) <= 500
            and not self.wrote_outside
        )

    @property
    def message(self) -> str:
        if self.case.ok:
            return "(ran; wrote outside out/: " + (", ".join(self.wrote_outside) or "nothing") + ")"
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[0] if len(lines) == 1 else f"[{len(lines)} lines] " + " / ".join(lines[:3])


@contextlib.contextmanager
def _scratch(root: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(old)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


class _TimeoutError(Exception):
    pass


def run_case(case: Case, root: Path, limit_s: float = 60.0) -> Outcome:
    """Runs one case in the empty directory `root` (made if missing)."""
    from leoguard.cli import main

    root.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _tree(root)
    out, err = io.StringIO(), io.StringIO()
    status: int | None = None

    def alarm(*_: object) -> None:
        raise _TimeoutError

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    t0 = time.perf_counter()
    try:
        with _scratch(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(case.argv))
                status = 0
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except _TimeoutError:
                err.write(f"\n(hung: no answer within {limit_s:g} s)\n")
            except BaseException as e:  # a crash is what the corpus looks for
                import traceback

                err.write("Traceback (most recent call last):\n" + traceback.format_exc())
                status = 1 if not isinstance(e, KeyboardInterrupt) else 130
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    wall = time.perf_counter() - t0
    new = sorted(p for p in _tree(root) - before if not (p == "out" or p.startswith("out/")))
    return Outcome(case, status, out.getvalue(), err.getvalue(), wall, new)


def run_all(root: Path, cases: list[Case] | None = None) -> list[Outcome]:
    """Runs every case, each in its own scratch directory under `root`."""
    return [run_case(c, root / f"case{i:03d}") for i, c in enumerate(cases or CASES)]


def to_markdown(outcomes: list[Outcome]) -> str:
    """docs/errors.md: every case, the message it gets, and the tally."""
    ok = sum(o.clear for o in outcomes)
    issue = [o for o in outcomes if o.case.issue]
    fresh = [o for o in outcomes if not o.case.issue]
    lines = [
        "# What bad input gets",
        "",
        "Every case below is a bad or odd input tried on the command line as a user would; the message is",
        "what `leoguard` printed. A case is *clear* when the command exits with status 2 and prints one line",
        "on stderr, starting `error:`, that names the field or option at fault (the word in the third column",
        "must appear), and writes nothing outside its `--out`. The corpus lives in",
        "`python/leoguard/badinputs.py`; `.venv/bin/python tools/bad_inputs.py --write docs/errors.md`",
        "re-makes this page, and `python/tests/test_bad_inputs_corpus.py` holds the corpus to >= 98 % clear",
        "and every case issue 27 listed to clear.",
        "",
        f"**{ok} of {len(outcomes)} clear** ({100 * ok / max(1, len(outcomes)):.1f} %): issue 27's cases "
        f"{sum(o.clear for o in issue)} of {len(issue)}, the fresh round {sum(o.clear for o in fresh)} of "
        f"{len(fresh)}.",
        "",
        "| # | input | must name | exit | clear | message |",
        "|---|---|---|---|---|---|",
    ]
    for i, o in enumerate(outcomes, 1):
        msg = o.message.replace("|", "\\|")
        if len(msg) > 300:
            msg = msg[:300] + "…"
        tag = " (issue 27)" if o.case.issue else ""
        lines.append(
            f"| {i} | {o.case.what}{tag} | `{o.case.names}` | {o.status} | {'yes' if o.clear else '**no**'} | {msg} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`tools/bad_inputs.py [--write FILE]`: run the corpus, print the tally (and the table)."""
    import tempfile

    args = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="leoguard-badinputs-") as d:
        outcomes = run_all(Path(d))
    md = to_markdown(outcomes)
    if "--write" in args:
        Path(args[args.index("--write") + 1]).write_text(md)
    sys.stdout.write(md)
    return 0 if sum(o.clear for o in outcomes) >= 0.98 * len(outcomes) else 1
