"""The data-plane process: `python -m leoguard.emu.dataplane SCENARIO.json BASE_DIR CONFIG.json`.

It resolves the scenario (a validated model, as JSON; trace files relative to BASE_DIR) the way the
simulator does, builds its network with the simulator's own validation and leoguard-net's topology code,
opens a TUN device in every host's namespace, and then speaks the protocol of
`crates/leoguard-emu/src/report.rs` on stdin/stdout (ready, `go T0`, results). A problem before the
run prints one JSON line `{"error": ...}` and exits with status 2."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

from leoguard import _core
from leoguard.errors import LeoguardError
from leoguard.scenario import from_dict


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        usage = "usage: python -m leoguard.emu.dataplane SCENARIO.json BASE_DIR CONFIG.json"
        print(json.dumps({"error": usage}), flush=True)
        return 2
    try:
        if argv[0].endswith(".pickle"):
            # A validated model the orchestrator wrote into its own work directory (a run of apps
            # only: a scenario without flows, which validating again would refuse).
            with open(argv[0], "rb") as fb:
                scenario = pickle.load(fb)
        else:
            with open(argv[0], encoding="utf-8") as f:
                scenario = from_dict(json.load(f), argv[0])
        spec = scenario.to_core(Path(argv[1]))
        with open(argv[2], encoding="utf-8") as f:
            cfg = f.read()
        _core.emu_dataplane(spec, cfg)
    except (OSError, ValueError, LeoguardError) as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
