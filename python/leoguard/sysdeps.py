"""The programs leoguard and its tests start, each with the Debian package that provides it: the one
list `make setup` installs from (tools/install_sysdeps.py) and that every "missing tool" error quotes
(`need`). A test (test_sysdeps.py) fails when the code names or starts a program that is not here, so
a missing install step cannot hide behind a machine that happens to have the program.

This module imports nothing of leoguard's, so the installer can load it before leoguard is built."""

from __future__ import annotations

import os
import shutil

DEBIAN_TOOLS: dict[str, str] = {
    "ip": "iproute2",  # network namespaces, veth, TUN (emulator, tunnel)
    "ss": "iproute2",  # the sockets of a host (tests: which congestion control a connection runs)
    "ping": "iputils-ping",  # the emulator's ping flows
    "iperf3": "iperf3",  # kernel TCP flows in the emulator and the tunnel benchmark
    "tshark": "tshark",  # reads leoguard's pcap captures (tests)
    "chromium": "chromium",  # the emulator's web workload
    "chromedriver": "chromium-driver",
    "nginx": "nginx",  # serves the web corpus in the emulator
    "openssl": "openssl",  # the web workload's certificates
    "sysctl": "procps",  # forwarding switches in the tunnel's namespaces
    "pgrep": "procps",  # tests: no tool left running after an emulator run
    "kill": "procps",  # leoguard-transport's tests signal a running transfer
    "git": "git",  # the code version recorded with every run (optional: "unknown" without it)
}
"""Executable name -> Debian package."""

BASE_TOOLS: frozenset[str] = frozenset({"sh", "true", "sleep", "cat", "echo", "apt-get", "ldconfig"})
"""Programs of Debian's essential and required packages (dash, coreutils, apt; libc-bin's ldconfig, which
ctypes runs to find libraries): on every Debian system,
never installed by `make setup`."""

RUST_TOOLS: frozenset[str] = frozenset({"cargo", "rustc", "rustup"})
"""The Rust toolchain (rustup's), which the build needs before anything else (the Makefile stops with
"install Rust (rustup) first" without cargo); tools/pgo_build.py runs them. Not a Debian package."""

EXTRA_DIRS: tuple[str, ...] = ("/usr/lib/chromium", "/usr/sbin", "/sbin")
"""Searched before PATH: Debian's real chromium binary (not the /usr/bin shell wrapper), nginx, ip."""


def covered(program: str) -> bool:
    """Whether `make setup` and `make build` provide `program`: listed here, essential, the Rust
    toolchain the build starts from, or leoguard's own."""
    return program in DEBIAN_TOOLS or program in BASE_TOOLS or program in RUST_TOOLS or program.startswith("leoguard-")


def find(tool: str) -> str | None:
    """Path of `tool` on this machine (EXTRA_DIRS, then PATH), or None."""
    return shutil.which(tool, path=os.pathsep.join([*EXTRA_DIRS, os.environ.get("PATH", "")]))


def package(tool: str) -> str:
    """The Debian package providing `tool` (KeyError for a tool not in DEBIAN_TOOLS: add it there)."""
    return DEBIAN_TOOLS[tool]


def missing_message(tool: str) -> str:
    """The one-line error for a missing `tool`."""
    return f"{tool} is missing: install the Debian package {package(tool)} (`make setup` does)"


def need(tool: str) -> str:
    """Path of `tool`, or a one-line `LeoguardError` naming the Debian package that provides it."""
    path = find(tool)
    if path is None:
        from leoguard.errors import LeoguardError  # here, so the installer can load this module alone

        raise LeoguardError(missing_message(tool))
    return path
