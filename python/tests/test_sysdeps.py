"""Every program leoguard or its tests start is in sysdeps.DEBIAN_TOOLS (what `make setup` installs),
so a missing install step cannot hide behind a machine that happens to have the program.

Two checks: a static one here, over the source (Python and Rust), and a dynamic one in conftest.py,
which records every program the test process starts and fails the session on one not listed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from leoguard import sysdeps

ROOT = Path(__file__).resolve().parents[2]
STARTERS = {"run", "Popen", "check_output", "check_call", "call", "_run", "_sh", "Proc", "exec", "spawn"}
"""Calls whose first argument (or whose arguments, for `exec`-style helpers) is a command line."""
LOOKUPS = {"need", "find", "find_binary", "which"}
"""Calls whose first argument is a program looked up on PATH."""


def _is_ns_prefix(e: ast.expr | None) -> bool:
    """`*h.exec_prefix()` or `*prefix`: a command prefix that runs what follows in a namespace."""
    if not isinstance(e, ast.Starred):
        return False
    v = e.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
        return v.func.attr == "exec_prefix"
    return isinstance(v, ast.Name) and "prefix" in v.id


def _programs_in(elts: list[ast.expr]) -> list[str]:
    """Programs in one argv literal: its first string, and the string after a namespace prefix
    (`*h.exec_prefix()`, `*prefix`, or "ip", "netns", "exec", NS)."""
    out = []
    for i, e in enumerate(elts):
        if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
            continue
        after_netns = i >= 4 and [getattr(x, "value", None) for x in elts[i - 4 : i - 1]] == ["ip", "netns", "exec"]
        if i == 0 or _is_ns_prefix(elts[i - 1]) or after_netns:
            out.append(e.value)
    return out


def static_programs(root: Path = ROOT) -> dict[str, list[str]]:
    """Program name -> where the source under `root` (python/, tools/, crates/) starts or looks it up."""
    found: dict[str, list[str]] = {}
    for p in sorted([*(root / "python").rglob("*.py"), *(root / "tools").rglob("*.py")]):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            a0 = node.args[0]
            names: list[str] = []
            if name in LOOKUPS and isinstance(a0, ast.Constant) and isinstance(a0.value, str):
                names = [a0.value]
            elif name in STARTERS:
                for a in node.args:
                    if isinstance(a, ast.List | ast.Tuple):
                        names += _programs_in(a.elts)
                # Varargs helpers: _sh("ip", ...) runs its first argument, lab.exec("A", "ip", ...) its second.
                at = {"_sh": 0, "exec": 1}.get(name)
                if at is not None and len(node.args) > at:
                    a = node.args[at]
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        names.append(a.value)
                    names += _programs_in(node.args)[1:]  # after "ip", "netns", "exec", NS
            for n in names:
                found.setdefault(n, []).append(f"{p.relative_to(root)}:{node.lineno}")
    for p in sorted((root / "crates").rglob("*.rs")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for m in re.finditer(r'Command::new\("([^"]+)"\)', line):
                found.setdefault(m.group(1), []).append(f"{p.relative_to(root)}:{i}")
    return found


def unlisted(programs: dict[str, list[str]]) -> dict[str, list[str]]:
    """The programs `make setup` does not provide (sysdeps.covered)."""
    return {n: w for n, w in programs.items() if not sysdeps.covered(n)}


def test_every_program_the_source_starts_or_looks_up_is_installed_by_make_setup():
    found = static_programs()
    # The scan sees the programs we know the code starts (a scan that finds nothing proves nothing).
    assert {"ip", "iperf3", "ping", "tshark", "nginx", "chromium", "kill"} <= set(found), sorted(found)
    assert unlisted(found) == {}, "add these to python/leoguard/sysdeps.py's DEBIAN_TOOLS"


def test_the_scan_catches_programs_that_are_not_listed(tmp_path):
    (tmp_path / "python").mkdir()
    (tmp_path / "crates").mkdir()
    (tmp_path / "python" / "m.py").write_text(
        "import subprocess\n"
        'subprocess.run(["ethtool", "-k", "eth0"])\n'
        'sysdeps.need("tcpdump")\n'
        'subprocess.Popen([*h.exec_prefix(), "socat", "-"])\n'
        'subprocess.run(["ip", "netns", "exec", "ns1", "tc", "qdisc"])\n'
        'subprocess.run(["iperf3", "-s"])\n'
    )
    (tmp_path / "crates" / "m.rs").write_text('let o = Command::new("nft").output();\n')
    found = static_programs(tmp_path)
    assert sorted(unlisted(found)) == ["ethtool", "nft", "socat", "tc", "tcpdump"]
    assert found["iperf3"] == ["python/m.py:6"]


def test_a_missing_program_names_its_package():
    assert sysdeps.missing_message("ping") == (
        "ping is missing: install the Debian package iputils-ping (`make setup` does)"
    )
