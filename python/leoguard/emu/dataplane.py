"""The data-plane process: `python -m leoguard.emu.dataplane SPEC.json CONFIG.json`.

It builds the scenario's network with the simulator's own validation and leoguard-net's topology code,
opens a TUN device in every host's namespace, and then speaks the protocol of
`crates/leoguard-emu/src/report.rs` on stdin/stdout (ready, `go T0`, results). A problem before the
run prints one JSON line `{"error": ...}` and exits with status 2."""

from __future__ import annotations

import json
import sys

from leoguard import _core


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(json.dumps({"error": "usage: python -m leoguard.emu.dataplane SPEC.json CONFIG.json"}), flush=True)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            spec = json.load(f)
        with open(argv[1], encoding="utf-8") as f:
            cfg = f.read()
        _core.emu_dataplane(spec, cfg)
    except (OSError, ValueError, _core.LeoguardError) as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
