"""StarTCP's handover prediction on New York - London with the paper's path and with a measured Starlink
access link (issue 29, docs/realism.md): seeds 1-5, 122 s each (8 boundaries, 6 with a handover);
every stall StarTCP made is matched to the run's handovers (within 0.5 s: on a handover; else
spurious). Prints one JSON row per run and writes them to the file given (default: none).

    python tools/startcp_profile_study.py [OUT.json]
"""

import json
import sys

from leoguard.reproduce.startcp import handover_times, nyc_lon
from leoguard.simulate import simulate

out = []
for prof in (None, "mmsys24-seattle"):
    for seed in range(1, 6):
        sc = nyc_lon("startcp", 122.0, seed, None, prof)
        hs = handover_times(sc)
        r = simulate(sc)
        st = r.startcp
        preds = [p / 1e9 for p in st["predicted_ns"].to_list()] if st is not None and not st.is_empty() else []
        # A stall is on a handover if its predicted time is within 0.5 s of one.
        on = [p for p in preds if any(abs(p - h) <= 0.5 for h in hs)]
        errs = [min(abs(p - h) for h in hs) * 1e3 for p in on]
        covered = [h for h in hs if any(abs(p - h) <= 0.5 for p in preds)]
        out.append(
            {
                "profile": prof or "paper",
                "seed": seed,
                "handovers": len(hs),
                "stalls": len(preds),
                "stalls_on_a_handover": len(on),
                "spurious_stalls": len(preds) - len(on),
                "handovers_predicted": len(covered),
                "median_error_ms": sorted(errs)[len(errs) // 2] if errs else None,
                "goodput_mbps": round(r.flows.row(0, named=True)["goodput_bps"] / 1e6, 2),
            }
        )
        print(out[-1], flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
