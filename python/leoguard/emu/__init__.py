"""The real-time emulator's Python side: `emulate(scenario)` runs a scenario with real Linux hosts
(network namespaces, kernel TCP, iperf3, ping) across the emulated network; `cleanup()` removes what
a killed run left. See docs/emulator.md."""

from leoguard.emu.hosts import cleanup
from leoguard.emu.run import EmuResults, emulate

__all__ = ["EmuResults", "cleanup", "emulate"]
