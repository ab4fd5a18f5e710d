"""Regenerate python/tests/data/skyfield_tle_reference.json, the skyfield positions that
python/tests/test_orbit_validation.py checks leoguard's SGP4 (and its TEME-to-ECEF rotation) against.

The case is issue 13's: a TLE file whose second satellite's epoch is the file's latest (2026-01-01) and
whose first satellite's TLE is two months older (2025-11-01), so leoguard's t = 0 lies 61 days after
that TLE's epoch. The elements are synthetic Starlink-like ones (550 km, 53 deg, with drag), written
here so the case does not depend on a download. skyfield is not a leoguard dependency, hence the
committed reference. Run: `python tools/make_skyfield_reference.py` (needs skyfield, no network: the
timescale uses skyfield's built-in UT1 and leap-second tables).
"""

import datetime as dt_
import json
from pathlib import Path

import sgp4
import skyfield
from skyfield.api import EarthSatellite, load
from skyfield.framelib import itrs
from skyfield.sgp4lib import TEME

OUT = Path(__file__).resolve().parents[1] / "python" / "tests" / "data" / "skyfield_tle_reference.json"

# 2026-01-01T00:00:00Z, the epoch of LATEST-TLE and so leoguard's t = 0 for this file.
LATEST_EPOCH_UNIX_S = 1_767_225_600.0
# Seconds after the latest epoch at which positions are compared.
OFFSETS_S = (-3600.0, 0.0, 600.0, 3600.0)


def _checksum(body: str) -> str:
    return str(sum(int(c) if c.isdigit() else c == "-" for c in body) % 10)


def _tle(name: str, line1: str, line2: str) -> str:
    assert len(line1) == len(line2) == 68, "bodies without their checksum digit"
    return f"{name}\n{line1}{_checksum(line1)}\n{line2}{_checksum(line2)}\n"


TLE_TEXT = _tle(
    "OLD-TLE",
    "1 44713U 19074A   25305.41666667  .00002182  00000-0  16538-3 0  999",
    "2 44713  53.0536 210.3275 0001427  87.1034 273.0120 15.06406234 3345",
) + _tle(
    "LATEST-TLE",
    "1 44714U 19074B   26001.00000000  .00001864  00000-0  14264-3 0  999",
    "2 44714  53.0541  93.7763 0001533  91.4455 268.6711 15.06392810 4551",
)


def main() -> None:
    ts = load.timescale(builtin=True)
    lines = TLE_TEXT.splitlines()
    sats = [EarthSatellite(lines[i + 1], lines[i + 2], lines[i], ts) for i in range(0, len(lines), 3)]
    latest = max(s.epoch.utc_datetime().timestamp() for s in sats)
    assert abs(latest - LATEST_EPOCH_UNIX_S) < 1e-3, latest
    rows = []
    for sat in sats:
        for dt in OFFSETS_S:
            # Via a datetime: ts.utc(1970, ..., seconds) would count the 27 leap seconds since 1972.
            t = ts.from_datetime(dt_.datetime.fromtimestamp(LATEST_EPOCH_UNIX_S + dt, dt_.UTC))
            at = sat.at(t)
            rows.append(
                {
                    "sat": sat.name,
                    "t_s": dt,
                    "teme_km": [round(v, 7) for v in at.frame_xyz(TEME).km],
                    "itrs_km": [round(v, 7) for v in at.frame_xyz(itrs).km],
                }
            )
    ref = {
        "generator": "tools/make_skyfield_reference.py",
        "skyfield": skyfield.__version__,
        "sgp4": sgp4.__version__,
        "epoch_unix_s": LATEST_EPOCH_UNIX_S,
        "tle": TLE_TEXT,
        "positions": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(ref, indent=1) + "\n")
    print(f"wrote {OUT} ({len(rows)} positions)")


if __name__ == "__main__":
    main()
