"""Bad input to the orbit API gets one clear `LeoguardError` naming the field and the value (and, for
TLE files, the file and the line), never a traceback or a silently wrong result."""

import datetime as dt
import math
import re

import pytest

from leoguard import LeoguardError, _core
from leoguard.orbit import Constellation

L1 = "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927"
L2 = "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537"
# Coordinates, not city names: the first city lookup loads the place database (~1 s).
NEW_YORK, LONDON = (40.71, -74.01), (51.51, -0.13)


def _sum(line: str) -> str:
    return line[:68] + str(_core.tle_line_checksum(line))


def sat(name: str = "ISS (ZARYA)", norad: int = 25544, *, ecc: str | None = None, mm: str | None = None) -> str:
    """A 3-line TLE with valid checksums; `ecc` (7 digits, implied "0.") and `mm` (11 columns, rev/day)
    replace line 2's eccentricity and mean motion."""
    l1 = L1[:2] + f"{norad:05d}" + L1[7:]
    l2 = L2[:2] + f"{norad:05d}" + L2[7:]
    if ecc is not None:
        l2 = l2[:26] + ecc + l2[33:]
    if mm is not None:
        l2 = l2[:52] + mm + l2[63:]
    return f"{name}\n{_sum(l1)}\n{_sum(l2)}\n"


def write(tmp_path, content: str | bytes, name: str = "sats.tle"):
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return p


def at(p) -> str:
    return re.escape(f"in file {p} at line")


def test_the_helper_builds_a_tle_that_is_accepted(tmp_path):
    c = Constellation.from_tle(write(tmp_path, sat() + sat("OTHER", 25545)))
    assert len(c) == 2
    assert 300 < c.info()["shells"][0]["altitude_km"] < 450


# 1. Orbits that cannot be flown ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("elements", "why"),
    [
        ({"mm": "99.00000000"}, r"perigee radius a\(1-e\) = 1972\.5 km is below the Earth's surface \(6378\.137 km\) "
                                r"\(mean_motion = 99 rev/day, eccentricity = 0\.0006703\)"),
        ({"ecc": "9900000"}, r"perigee radius a\(1-e\) = 67\.\d km is below the Earth's surface \(6378\.137 km\) "
                             r"\(mean_motion = 15\.72125391 rev/day, eccentricity = 0\.99\)"),
        ({"mm": "00.00000000"}, r"mean_motion = 0 rev/day: must be > 0"),
        ({"mm": "-1.00000000"}, r"mean_motion = -1 rev/day: must be > 0"),
    ],
    ids=["99-rev-per-day", "eccentricity-0.99", "mean-motion-0", "mean-motion-negative"],
)  # fmt: skip
def test_an_orbit_below_the_surface_is_refused_naming_the_satellite_and_line(tmp_path, elements, why):
    # Accepted before, with an altitude of -4408 km (99 rev/day); e = 0.99 failed later, in SGP4, with
    # no file or line.
    p = write(tmp_path, sat() + "\n" + sat("DOOMED", 25545, **elements))
    with pytest.raises(
        LeoguardError, match=f"^impossible orbit {at(p)} 7: satellite 'DOOMED' \\(catalogue 25545\\): {why}$"
    ):
        Constellation.from_tle(p)


# 2. A satellite listed twice -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("second", "why"),
    [
        (sat(), r"'ISS \(ZARYA\)' repeats catalogue number 25544 of 'ISS \(ZARYA\)' at line 1"),
        (sat("ISS COPY"), r"'ISS COPY' repeats catalogue number 25544 of 'ISS \(ZARYA\)' at line 1"),
    ],
    ids=["same-line-twice", "same-catalogue"],
)  # fmt: skip
def test_a_satellite_listed_twice_is_refused_naming_both_lines(tmp_path, second, why):
    p = write(tmp_path, sat() + "\n\n" + second)
    with pytest.raises(LeoguardError, match=f"^duplicate satellite {at(p)} 6: {why}$"):
        Constellation.from_tle(p)


def test_two_satellites_sharing_a_name_are_both_kept_named_apart(tmp_path):
    # CelesTrak's debris files give many objects one name ("COSMOS 2251 DEB"): not a repeat.
    p = write(tmp_path, sat() + "\n" + sat(norad=25545))
    assert Constellation.from_tle(p).satellites()["sat"].to_list() == ["ISS (ZARYA)", "ISS (ZARYA) #25545"]


# 3. Empty, blank and binary files name the file ------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", r"no TLE in file {p}: it is empty"),
        ("\n  \n\t\n\n", r"no TLE in file {p}: it has blank lines only"),
        (bytes(range(256)), r"invalid TLE file {p}: not UTF-8 text \(byte 0x80 at offset 128, line 2, column 118\)"),
        (b"\x00\x01\x02\x03" * 64, r"malformed TLE {at} 1: control character 0x00 at column 1: not a text file\?"),
        (sat().encode() + b"\x7fELF\x02\x01\n", r"malformed TLE {at} 4: control character 0x7f at column 1: "
                                                r"not a text file\?"),
    ],
    ids=["empty", "blank-lines", "not-utf8", "nul-bytes", "elf-tail"],
)  # fmt: skip
def test_an_empty_or_binary_tle_file_is_named(tmp_path, content, why):
    p = write(tmp_path, content)
    with pytest.raises(LeoguardError, match="^" + why.format(p=re.escape(str(p)), at=at(p)) + "$"):
        Constellation.from_tle(p)


def test_a_directory_is_not_a_tle_file(tmp_path):
    with pytest.raises(LeoguardError, match=f"^cannot read TLE file {re.escape(str(tmp_path))}: Is a directory$"):
        Constellation.from_tle(tmp_path)


# 4. Beams: the time and the H3 resolution ------------------------------------------------------------
@pytest.mark.parametrize(("t", "shown"), [(math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf"),
                                          (1e300, "1e300"), (3.2e9, "3200000000")])  # fmt: skip
def test_beams_refuse_a_time_that_is_not_finite_or_beyond_100_years(starlink, t, shown):
    # Before: a table of nulls (no satellite, no distance), no error.
    why = r"must be finite and within 100 years \(3155760000 s\) of the epoch"
    with pytest.raises(LeoguardError, match=rf"^invalid t = {shown}: {why}$"):
        starlink.beams([LONDON], t=t)


def test_the_100_year_horizon_is_the_only_limit_on_t(starlink):
    assert starlink.beams([LONDON], t=3.1e9)["sat"][0] is not None
    assert starlink.beams([LONDON], t=-3.1e9)["sat"][0] is not None


@pytest.mark.parametrize("call", ["positions", "isls", "footprint"])
def test_other_queries_at_t_refuse_it_too(starlink, call):
    # isls(nan) returned 3168 ISLs of NaN length; footprint(nan) an empty list.
    args = (0, math.nan) if call == "footprint" else (math.nan,)
    with pytest.raises(LeoguardError, match=r"^invalid t = NaN: must be finite"):
        getattr(starlink, call)(*args)


@pytest.mark.parametrize("resolution", [-1, 16, 99999999999999999999, 2.5, "five"])
def test_beams_refuse_a_resolution_outside_h3s(starlink, resolution):
    # -1 and 1e20 were OverflowError tracebacks.
    shown = re.escape(repr(resolution) if isinstance(resolution, str) else str(resolution))
    with pytest.raises(
        LeoguardError, match=rf"^invalid cell_resolution = {shown}: must be an H3 resolution in \[0, 15\]$"
    ):
        starlink.beams([LONDON], resolution=resolution)
    with pytest.raises(
        LeoguardError, match=rf"^invalid cell_resolution = {shown}: must be an H3 resolution in \[0, 15\]$"
    ):
        starlink.footprint(0, resolution=resolution)


@pytest.mark.parametrize("sat_index", [-1, 1584, 2**70])
def test_footprint_refuses_a_satellite_index_out_of_range(starlink, sat_index):
    with pytest.raises(LeoguardError, match=rf"^invalid sat = {sat_index}: must be a satellite index in \[0, 1583\]$"):
        starlink.footprint(sat_index)


# 5. Timeline parameters: integers within the core's types, floats finite -----------------------------
def _timeline(c, **kw):
    return c.path_timeline(NEW_YORK, LONDON, **({"duration": 1.0, "step": 0.5} | kw))


@pytest.mark.parametrize("seed", [2**64, 2**70, -1, 1.5, "one"])
def test_a_seed_outside_u64_is_refused(starlink, seed):
    shown = re.escape(repr(seed) if isinstance(seed, str) else str(seed))
    with pytest.raises(LeoguardError, match=rf"^invalid seed = {shown}: must be an integer in \[0, 2\*\*64 - 1\]$"):
        _timeline(starlink, seed=seed)
    with pytest.raises(LeoguardError, match=rf"^invalid seed = {shown}: must be an integer"):
        starlink.connectivity_cache([LONDON], duration=1.0, step=0.5, seed=seed)


def test_the_largest_seed_is_accepted(starlink):
    assert _timeline(starlink, seed=2**64 - 1).steps.height == 2


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"duration": math.nan}, r"invalid duration_s = NaN: must be finite and > 0"),
        ({"duration": math.inf}, r"invalid duration_s = inf: must be finite and > 0"),
        ({"duration": 1e300, "step": 1e299}, r"invalid duration_s = 1e300: must be at most 10 years \(315576000 s\)"),
        ({"duration": 10**400}, r"invalid duration = ~10\*\*400: must be a number"),
        ({"duration": "long"}, r"invalid duration = 'long': must be a number"),
        ({"step": math.nan}, r"invalid step_s = NaN: must be finite and > 0"),
        ({"step": -math.inf}, r"invalid step_s = -inf: must be finite and > 0"),
        ({"min_elevation": math.nan}, r"invalid min_elevation_deg = NaN: must be in \[0, 90\] degrees"),
        ({"min_elevation": None}, r"invalid min_elevation = None: must be a number"),
        ({"handover_period": math.nan}, r"invalid handover_period_s = NaN: must be finite and > 0"),
        ({"handover_period": math.inf}, r"invalid handover_period_s = inf: must be finite and > 0"),
        ({"handover_period": 1e300}, r"invalid handover_period_s = 1e300: must be in \[0\.001, 86400\] s"),
        ({"handover_period": 1e-300}, r"invalid handover_period_s = 1e-300: must be in \[0\.001, 86400\] s"),
        ({"handover_phase": math.nan}, r"invalid handover_phase_s = NaN: must be finite and in \[0, 86400\] s"),
        ({"handover_phase": -math.inf}, r"invalid handover_phase_s = -inf: must be finite and in \[0, 86400\] s"),
        ({"handover_phase": 1e20}, r"invalid handover_phase_s = 1e20: must be finite and in "
                                   r"\[0, 86400\] s"),
        ({"slot_criterion": None}, r"invalid slot_criterion = None: use one of highest-elevation, nearest, path-aware"),
        ({"interruption": None}, r"invalid interruption = None: use one of none, fixed:SECONDS"),
    ],
)  # fmt: skip
def test_timeline_floats_must_be_finite_numbers(starlink, kwargs, pattern):
    with pytest.raises(LeoguardError, match="^" + pattern):
        _timeline(starlink, **kwargs)


@pytest.mark.parametrize(
    ("epoch", "pattern"),
    [
        (1e300, r"invalid epoch = 1e300: must be a Unix time from 1900-01-01 \(-2208988800\) to 2200-01-01"),
        (-1e10, r"invalid epoch = -10000000000: must be a Unix time from 1900-01-01"),
        (math.nan, r"invalid epoch = NaN: must be a Unix time"),
        (10**400, r"invalid epoch = ~10\*\*400: must be a number"),
        (dt.date(2026, 1, 1), r"invalid epoch = datetime\.date\(2026, 1, 1\): use a Unix time, an ISO 8601 string"),
        ("0001-01-01", r"invalid epoch = -62135596800: must be a Unix time from 1900-01-01"),
    ],
    ids=["1e300", "-1e10", "nan", "10**400", "date", "year-1"],
)  # fmt: skip
def test_an_epoch_outside_1900_to_2200_is_refused(epoch, pattern):
    # 1e300 was accepted, then info() raised OverflowError (timestamp out of range for time_t).
    with pytest.raises(LeoguardError, match="^" + pattern):
        Constellation.preset("starlink-shell1", epoch=epoch).info()


def test_walker_counts_are_bounded(tmp_path):
    for kwargs, pattern in [
        ({"planes": 2**70}, r"invalid planes = 1180591620717411303424: must be an integer in \[1, 100000\]"),
        ({"planes": 2**40}, r"invalid planes = 1099511627776: must be an integer in \[1, 100000\]"),
        ({"sats_per_plane": -3}, r"invalid sats_per_plane = -3: must be an integer in \[1, 100000\]"),
        ({"planes": 1000, "sats_per_plane": 1000, "phasing": 0},
         r"invalid planes x sats_per_plane = 1000 x 1000 = 1000000: at most 100000 satellites in a constellation"),
        ({"phasing": 2**40}, r"invalid phasing = 1099511627776: use an integer F in \[0, planes - 1\] or 'half-slot'"),
        ({"phasing": -1}, r"invalid phasing = -1: use an integer F in \[0, planes - 1\] or 'half-slot'"),
    ]:  # fmt: skip
        with pytest.raises(LeoguardError, match="^" + pattern + "$"):
            Constellation.walker(550, 53, **({"planes": 10, "sats_per_plane": 10} | kwargs))
    with pytest.raises(LeoguardError, match=r"^invalid cross_plane_max_lat_deg = 'high': must be a number$"):
        Constellation.walker(550, 53, 10, 10, cross_plane_max_lat_deg="high")


# 6. Exporting TLEs to a path that cannot be written --------------------------------------------------
def test_to_tle_names_a_path_it_cannot_write(starlink, tmp_path):
    # Both were tracebacks (IsADirectoryError, FileNotFoundError).
    with pytest.raises(LeoguardError, match=rf"^cannot write TLE file {re.escape(str(tmp_path))}: it is a directory$"):
        starlink.to_tle(tmp_path)
    out = tmp_path / "no" / "such" / "shell1.tle"
    parent = re.escape(str(out.parent))
    with pytest.raises(
        LeoguardError, match=rf"^cannot write TLE file {re.escape(str(out))}: parent directory {parent} does not exist$"
    ):
        starlink.to_tle(out)
    blocker = write(tmp_path, "", "file")
    with pytest.raises(LeoguardError, match=rf"parent directory {re.escape(str(blocker))} is not a directory$"):
        starlink.to_tle(blocker / "shell1.tle")


def test_to_tle_refuses_an_epoch_a_tle_cannot_hold(tmp_path):
    # A TLE's epoch has a two-digit year (57-99 = 1957-1999, 00-56 = 2000-2056): 2060 came back as 1960.
    c = Constellation.preset("oneweb", epoch="2060-01-01T00:00:00Z")
    with pytest.raises(LeoguardError, match=r"^invalid epoch = 2060-01-01T00:00:00\+00:00 for a TLE export: TLE epochs "
                                            r"have two-digit years, 1957 to 2056$"):  # fmt: skip
        c.to_tle(tmp_path / "x.tle")


# 7. Other odd TLE files ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("X" * 10_000_000 + "\n", r"malformed TLE {at} 1: expected 3 lines per satellite \(name, line 1, line 2\); "
                                  r"1 left over"),
        (sat(name="N" * 10_000_000), r"malformed TLE {at} 1: name line is 10000000 characters long; "
                                     r"at most 80 allowed"),
        ("ONE\nTWO\nTHREE\n", r"malformed TLE {at} 2: expected line number 1 in column 1, found 'T'"),
        (sat().replace("1 25544U 98067A   ", "1 25544U\t98067A   "),
         r"malformed TLE {at} 2: line 1 has a tab at column 9: TLE columns are fixed, use spaces"),
        (sat(name="ISS\t(ZARYA)"), r"malformed TLE {at} 1: name line has a tab at column 4"),
        ("N\n" * 3 * 100_001, r"malformed TLE {at} 300001: 100001 satellites; at most 100000 are supported"),
    ],
    ids=["10MB-line", "10MB-name", "names-only", "tab-in-line-1", "tab-in-name", "100001-satellites"],
)  # fmt: skip
def test_odd_tle_files_get_a_clear_error(tmp_path, content, why):
    p = write(tmp_path, content)
    with pytest.raises(LeoguardError, match="^" + why.format(at=at(p)) + "$"):
        Constellation.from_tle(p)


def test_a_tle_file_too_large_to_hold_100000_satellites_is_not_read(tmp_path):
    p = tmp_path / "huge.tle"
    with p.open("wb") as f:
        f.truncate(33 * 2**20)  # sparse: no disk used
    with pytest.raises(LeoguardError, match=rf"^invalid TLE file {re.escape(str(p))}: 34603008 bytes; at most "
                                            r"33554432 \(32 MiB\)"):  # fmt: skip
        Constellation.from_tle(p)


def test_a_tle_shell_given_as_text_names_its_shell():
    with pytest.raises(LeoguardError, match=r"^duplicate satellite in TLE of shell 'mine' at line 4: "):
        Constellation.from_shells([{"tle": sat() + sat(), "name": "mine"}])
