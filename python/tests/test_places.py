import pytest

from leoguard import LeoguardError
from leoguard.places import Place, city, load_csv, place, top_cities


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
