"""Fits the stored Starlink access profile `mmsys24-seattle` (python/leoguard/data/starlink_profiles/) on the
first halves of the shared measurement (../shared/data/starlink-mmsys24), as `leoguard validate starlink
--profile fit` does, and writes it with the measurement's attribution and licence (CC BY-SA 4.0: the
profile is derived from that data and carries the same licence).

    python tools/fit_starlink_profile.py [--check]

--check: refit and fail if the stored file differs (the stored numbers are the fit of the data)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from leoguard.realism import fit
from leoguard.realism.model import DISH, POP
from leoguard.realism.traces import read_trace
from leoguard.realism.validate import DEFAULT_FILES

OUT = Path(__file__).resolve().parents[1] / "python/leoguard/data/starlink_profiles/mmsys24-seattle.json"

ATTRIBUTION = (
    "Fitted by leoguard (tools/fit_starlink_profile.py) on the first half of each file of the data repository of "
    "'Low-Latency Live Video Streaming over a Low-Earth-Orbit Satellite Network with DASH' (J. Zhao and J. Pan, "
    "ACM MMSys 2024), github.com/clarkzjw/mmsys24-starlink-livestreaming-data: "
    "src/latency/no-isl-ping-gw-seattle-230911-170535-0.1s-60min.txt, "
    "src/throughput/downlink/no-isl-iperf3-2m-2023-09-21-06-10-00.json, "
    "src/throughput/uplink/no-isl-iperf3-5m-2023-09-21-08-00-00.json (copied in ../shared/data/starlink-mmsys24)."
)


def build() -> dict:
    ping, down, up = (read_trace(f) for f in DEFAULT_FILES)
    p = fit.fit_profile(ping.halves()[0], DISH, POP, down.halves()[0], up.halves()[0])
    return {
        "name": "mmsys24-seattle",
        "source": ATTRIBUTION,
        "licence": "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/), as the data it is fitted on",
        "fitted_on": {
            "dish": DISH,
            "pop": POP,
            "ping_first_half_utc": [ping.halves()[0].start, ping.halves()[0].end],
            "downlink_first_half_utc": [down.halves()[0].start, down.halves()[0].end],
            "uplink_first_half_utc": [up.halves()[0].start, up.halves()[0].end],
        },
        "access": p["access"],
        "gsl_loss": {k: v for k, v in p["gsl_loss"].items() if k != "phase_s"},
        "propagation_rtt_ms_median": p["propagation_rtt_ms_median"],
        "slot_fit": p.get("slot_fit"),
    }


def main() -> None:
    prof = build()
    text = json.dumps(prof, indent=1) + "\n"
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            sys.exit(f"{OUT} is not the fit of the shared data: rerun tools/fit_starlink_profile.py")
        print("stored profile = fit of the data")
        return
    OUT.write_text(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
