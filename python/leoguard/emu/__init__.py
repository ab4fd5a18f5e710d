"""The real-time emulator's Python side: `emulate(scenario)` runs a scenario with real Linux hosts
(network namespaces, kernel TCP and iperf3 or leoguard's own TCP over UDP, ping) across the emulated
network; `cleanup()` removes what a killed run left. See docs/emulator.md."""

from leoguard.emu.hosts import cleanup
from leoguard.emu.run import EmuResults, emulate

__all__ = ["EmuResults", "cleanup", "emulate"]
