"""Derive leoguard's coarse world land mask (used only to draw map backgrounds).

Source: the `global-land-mask` package (NOAA GLOBE 1 km data, public domain). The full mask is a
933 MB boolean array that takes seconds to load, so leoguard ships a 0.5-degree majority-vote
down-sample (bit-packed, ~5 KB compressed). Run: `python tools/make_landmask.py` (needs global-land-mask).
"""

from pathlib import Path

import numpy as np
from global_land_mask import globe

OUT = Path(__file__).resolve().parents[1] / "python" / "leoguard" / "data" / "landmask_0p5deg.npz"


def main() -> None:
    ocean = globe._mask  # (21600, 43200), True = ocean; rows from +90 to -90, columns from -180 to 180
    f = ocean.shape[0] // 360  # 60 source pixels per 0.5 degree
    coarse = ocean.reshape(360, f, 720, f).mean(axis=(1, 3)) < 0.5
    if globe._lat[0] < 0:  # store north-up (row 0 = +90 deg) for imshow
        coarse = coarse[::-1]
    np.savez_compressed(OUT, mask=np.packbits(coarse, axis=1), shape=np.array(coarse.shape))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes), land fraction {coarse.mean():.3f}")


if __name__ == "__main__":
    main()
