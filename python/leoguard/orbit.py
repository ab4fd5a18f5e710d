"""The constellation engine's Python face: constellations, path timelines, connectivity caches and beams.

Everything heavy runs in the Rust core (`leoguard._core`); this module turns its columns into polars
DataFrames and adds parsing of user-friendly arguments.

>>> from leoguard.orbit import Constellation
>>> c = Constellation.preset("starlink-shell1")
>>> tl = c.path_timeline("New York", "London", duration=60, step=0.1)
>>> tl.summary()["rtt_ms"]["median"]  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
import operator
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from leoguard import _core
from leoguard.errors import LeoguardError, read_user_text, shown
from leoguard.places import Place, place

PRESETS: tuple[str, ...] = tuple(_core.PRESETS)
POLICIES = ("global-schedule", "nearest", "best-path")
#: How the global schedule picks a slot's satellite; `path-aware` needs a peer (a path timeline, or a
#: constellation topology of exactly two places).
SLOT_CRITERIA: tuple[str, ...] = tuple(_core.SLOT_CRITERIA)
INTERRUPTIONS = ("none", "fixed:SECONDS", "uniform[:LO:HI]", "3owd")
MAX_INTERRUPTION_S = 60.0
"""The longest handover interruption a spec may give (a minute: longer is a typo, not a handover)."""

PlaceLike = str | Place | tuple[float, float]

#: TLE files larger than this are not read: 100,000 satellites (the most a constellation may hold)
#: take about 17 MB in the 3-line format.
MAX_TLE_FILE_BYTES = 32 * 2**20


def _number(name: str, value: Any) -> float:
    """`value` as a float, or a `LeoguardError` naming `name`. Ranges (finite, > 0, ...) are the core's
    to check, so that one message serves Python and Rust callers."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise LeoguardError(f"invalid {name} = {shown(value)}: must be a number") from None


def _integer(name: str, value: Any, lo: int, hi: int, what: str) -> int:
    """`value` as an int in [lo, hi] (an integral float is fine), else a `LeoguardError` saying it must
    be `what`. Checked here because the core's fixed-width integers would raise OverflowError."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        v = operator.index(value)
    except TypeError:
        v = None
    if v is None or not lo <= v <= hi:
        raise LeoguardError(f"invalid {name} = {shown(value)}: must be {what}")
    return v


def parse_epoch(epoch: float | str | _dt.datetime | None) -> float | None:
    """A Unix time from a number, an ISO-8601 string (UTC if no offset) or a datetime. The core
    refuses epochs outside 1900-2200."""
    if epoch is None:
        return None
    if isinstance(epoch, numbers.Real):
        return _number("epoch", epoch)
    if isinstance(epoch, str):
        try:
            epoch = _dt.datetime.fromisoformat(epoch.replace("Z", "+00:00"))
        except ValueError as e:
            raise LeoguardError(f"invalid epoch = '{epoch}': use ISO 8601, e.g. 2026-01-01T00:00:00Z") from e
    if not isinstance(epoch, _dt.datetime):
        raise LeoguardError(f"invalid epoch = {shown(epoch)}: use a Unix time, an ISO 8601 string or a datetime")
    if epoch.tzinfo is None:
        epoch = epoch.replace(tzinfo=_dt.UTC)
    return epoch.timestamp()


def parse_interruption(spec: str) -> tuple[str, float, float]:
    """`none`, `fixed:0.05` (seconds; `50ms` also works), `uniform` (30-200 ms, StarTCP's measurement),
    `uniform:0.03:0.2`, or `3owd` (3 x (one-way delay to old + new satellite))."""

    def secs(x: str) -> float:
        x = x.strip()
        try:
            v = float(x[:-2]) / 1e3 if x.endswith("ms") else float(x[:-1] if x.endswith("s") else x)
        except ValueError as e:
            raise LeoguardError(f"invalid interruption duration '{x}' in '{spec}'") from e
        if not 0.0 <= v <= MAX_INTERRUPTION_S:  # NaN fails this too
            raise LeoguardError(
                f"invalid interruption = '{spec}': the duration {x} must be in [0, {MAX_INTERRUPTION_S:g}] s"
            )
        return v

    if not isinstance(spec, str):
        raise LeoguardError(f"invalid interruption = {shown(spec)}: use one of {', '.join(INTERRUPTIONS)}")
    kind, *args = spec.strip().lower().split(":")
    if kind == "none" and not args:
        return ("none", 0.0, 0.0)
    if kind == "3owd" and not args:
        return ("3owd", 0.0, 0.0)
    if kind == "fixed" and len(args) == 1:
        return ("fixed", secs(args[0]), 0.0)
    if kind == "uniform" and not args:
        return ("uniform", 0.030, 0.200)
    if kind == "uniform" and len(args) == 2:
        return ("uniform", secs(args[0]), secs(args[1]))
    raise LeoguardError(f"invalid interruption = '{spec}': use one of {', '.join(INTERRUPTIONS)}")


@dataclass
class PathTimeline:
    """A pair's path over time: `steps` (one row per routing step), `handovers`, `outages` (no path)
    and `slots` (the connectivity cache of both ends)."""

    a: Place
    b: Place
    steps: pl.DataFrame
    handovers: pl.DataFrame
    outages: pl.DataFrame
    slots: pl.DataFrame
    params: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Figures for a terminal or `--json`: RTT percentiles, handovers, outage time, steps."""
        rtt = self.steps.filter(pl.col("reachable"))["rtt_ms"].to_numpy()
        hops = self.steps.filter(pl.col("reachable"))["hops"].to_numpy()

        def pct(a: np.ndarray, q: float) -> float | None:
            return None if a.size == 0 else round(float(np.percentile(a, q)), 3)

        outage_s = float(self.outages["duration_s"].sum()) if self.outages.height else 0.0
        return {
            "a": self.a.name,
            "b": self.b.name,
            "rtt_ms": {"min": pct(rtt, 0), "median": pct(rtt, 50), "p99": pct(rtt, 99), "max": pct(rtt, 100)},
            "handovers": int(self.handovers.height),
            "interruption_s": round(float(self.handovers["interruption_ms"].sum()) / 1e3, 6),
            "outage_s": round(outage_s, 6),
            "outages": int(self.outages.height),
            "steps": int(self.steps.height),
            "reachable_fraction": round(float(self.steps["reachable"].mean() or 0.0), 6),
            "hops": {"min": pct(hops, 0), "median": pct(hops, 50), "max": pct(hops, 100)},
            "great_circle_km": round(great_circle_km(self.a, self.b), 3),
            **{k: v for k, v in self.params.items() if k in ("constellation", "policy", "duration_s", "step_s")},
            # The slot criterion means something under the global schedule only.
            **(
                {"slot_criterion": self.params["slot_criterion"]}
                if self.params.get("policy") == "global-schedule"
                else {}
            ),
        }

    def write_parquet(self, directory: str | Path) -> dict[str, Path]:
        """Writes steps/handovers/outages/slots as Parquet plus the parameters as JSON."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        out = {}
        for name in ("steps", "handovers", "outages", "slots"):
            p = d / f"{name}.parquet"
            getattr(self, name).write_parquet(p)
            out[name] = p
        meta = d / "params.json"
        meta.write_text(json.dumps({**self.params, "a": self.a.__dict__, "b": self.b.__dict__}, indent=2, default=str))
        out["params"] = meta
        return out


def great_circle_km(a: Place, b: Place) -> float:
    """Great-circle distance on the 6371 km sphere."""
    p1, p2 = math.radians(a.lat_deg), math.radians(b.lat_deg)
    dl = math.radians(b.lon_deg - a.lon_deg)
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


class Constellation:
    """A constellation of Walker and/or TLE shells. Time t = 0 is `epoch_unix_s`."""

    def __init__(self, core: _core.Constellation):
        self._core = core

    # construction -------------------------------------------------------------------------------
    @classmethod
    def preset(
        cls,
        name: str,
        *,
        epoch: float | str | _dt.datetime | None = None,
        cross_plane_max_lat_deg: float | None = None,
        j2: bool = False,
    ) -> Constellation:
        """A named preset: starlink-shell1, starlink-gen1, kuiper, oneweb, telesat."""
        shells = _core.Constellation.preset_shells(name)
        for s in shells:
            s["j2"] = j2
        return cls(_core.Constellation(name, shells, parse_epoch(epoch), _lat_cut(cross_plane_max_lat_deg)))

    @classmethod
    def walker(
        cls,
        altitude_km: float,
        inclination_deg: float,
        planes: int,
        sats_per_plane: int,
        *,
        phasing: int | str = 1,
        raan_spread_deg: float = 360.0,
        isls: bool = True,
        j2: bool = False,
        name: str = "walker",
        epoch: float | str | _dt.datetime | None = None,
        cross_plane_max_lat_deg: float | None = None,
    ) -> Constellation:
        """One Walker shell (delta with raan_spread_deg=360, star with 180); phasing is Walker's F or
        "half-slot" (Hypatia's alternate-plane offset)."""
        shell = dict(
            name=name, altitude_km=altitude_km, inclination_deg=inclination_deg, planes=planes,
            sats_per_plane=sats_per_plane, phasing=phasing, raan_spread_deg=raan_spread_deg, isls=isls, j2=j2,
        )  # fmt: skip
        return cls(_core.Constellation(name, [shell], parse_epoch(epoch), _lat_cut(cross_plane_max_lat_deg)))

    @classmethod
    def from_shells(
        cls,
        shells: Sequence[dict[str, Any]],
        *,
        name: str = "custom",
        epoch: float | str | _dt.datetime | None = None,
        cross_plane_max_lat_deg: float | None = None,
    ) -> Constellation:
        """Several shells (multi-shell constellations); each a Walker dict or {"tle": text, "name": ...}."""
        shells = [dict(s) for s in shells]
        return cls(_core.Constellation(name, shells, parse_epoch(epoch), _lat_cut(cross_plane_max_lat_deg)))

    @classmethod
    def from_tle(
        cls, path: str | Path, *, name: str | None = None, epoch: float | str | _dt.datetime | None = None
    ) -> Constellation:
        """Satellites from a CelesTrak-style 3-line TLE file, propagated with SGP4. t = 0 is the latest
        TLE epoch unless `epoch` is given.

        Refused, naming the file (and the line): an unreadable, non-UTF-8, empty or binary file, one
        over `MAX_TLE_FILE_BYTES`, malformed lines, an orbit whose perigee is below the Earth's
        surface, a satellite listed twice (the same catalogue number; satellites that share a name are named
        apart by their catalogue numbers), more than 100,000 satellites."""
        p = Path(path)
        try:
            st = p.stat()
        except OSError:
            st = None  # read_user_text says why
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > MAX_TLE_FILE_BYTES:
            raise LeoguardError(
                f"invalid TLE file {p}: {st.st_size} bytes; at most {MAX_TLE_FILE_BYTES} (32 MiB) are read, "
                "room for the 100000 satellites a constellation may hold"
            )
        text = read_user_text(p, "TLE file")
        nm = name or p.stem
        shell = {"tle": text, "name": nm, "tle_file": str(p)}
        return cls(_core.Constellation(nm, [shell], parse_epoch(epoch), None))

    # queries ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._core)

    @property
    def name(self) -> str:
        """The constellation's name."""
        return self._core.name

    @property
    def epoch_unix_s(self) -> float:
        """Unix time of t = 0."""
        return self._core.epoch_unix_s

    def info(self) -> dict[str, Any]:
        """Shells, satellite and ISL counts, orbital periods, epoch."""
        d = dict(self._core.info())
        d["epoch"] = _dt.datetime.fromtimestamp(d["epoch_unix_s"], _dt.UTC).isoformat()
        return d

    def satellites(self) -> pl.DataFrame:
        """One row per satellite: name, shell, plane, slot."""
        return pl.DataFrame(self._core.satellites())

    def positions(self, t: float = 0.0) -> pl.DataFrame:
        """ECEF (m) and geodetic positions of every satellite at t seconds after the epoch."""
        return pl.DataFrame(self._core.positions(_number("t", t)))

    def isls(self, t: float = 0.0) -> pl.DataFrame:
        """Every +Grid ISL at t: endpoints, cross-plane flag, whether it is up, and its length."""
        return pl.DataFrame(self._core.isls(_number("t", t)))

    def _timeline_args(
        self, duration: float, step: float, min_elevation: float, policy: str, handover_period: float | None,
        handover_phase: float | None, slot_criterion: str, interruption: str, seed: int,
    ) -> tuple[Any, ...]:  # fmt: skip
        if policy not in POLICIES:
            raise LeoguardError(f"unknown policy '{policy}' (known: {', '.join(POLICIES)})")
        if not isinstance(slot_criterion, str):
            raise LeoguardError(
                f"invalid slot_criterion = {shown(slot_criterion)}: use one of {', '.join(SLOT_CRITERIA)}"
            )
        # The core takes a u64 seed and f64 times; its own checks name duration_s, step_s, ...
        seed = _integer("seed", seed, 0, 2**64 - 1, "an integer in [0, 2**64 - 1]")
        period = None if handover_period is None else _number("handover_period", handover_period)
        phase = None if handover_phase is None else _number("handover_phase", handover_phase)
        return (
            _number("duration", duration), _number("step", step), _number("min_elevation", min_elevation), policy,
            period, phase, slot_criterion, parse_interruption(interruption), seed,
        )  # fmt: skip

    def path_timeline(
        self,
        a: PlaceLike,
        b: PlaceLike,
        *,
        duration: float = 200.0,
        step: float = 0.1,
        min_elevation: float = 25.0,
        policy: str = "global-schedule",
        handover_period: float | None = None,
        handover_phase: float | None = None,
        slot_criterion: str = "highest-elevation",
        interruption: str = "uniform",
        seed: int = 1,
    ) -> PathTimeline:
        """The path between two places over `duration` seconds at `step` resolution.

        policy: global-schedule (Starlink's 15 s slots; boundaries at seconds 12/27/42/57 of the UTC
        minute unless `handover_phase` is given), nearest, or best-path. A step with no path is an
        outage, never an error.

        slot_criterion (global-schedule): highest-elevation, nearest, or path-aware (both ends chosen
        jointly for the lowest mean one-way delay over the slot, held for the whole slot).
        """
        pa, pb = place(a), place(b)
        if (pa.lat_deg, pa.lon_deg) == (pb.lat_deg, pb.lon_deg):
            raise LeoguardError(f"'{a}' and '{b}' are the same place ({pa.name}): a path joins two places")
        args = self._timeline_args(
            duration, step, min_elevation, policy, handover_period, handover_phase, slot_criterion, interruption, seed
        )
        raw = self._core.path_timeline(pa.as_node(), pb.as_node(), *args)
        s = raw["steps"]
        steps = pl.DataFrame(
            {
                "t_s": s["t_s"],
                "reachable": s["reachable"],
                "owd_ms": s["owd_ms"],
                "rtt_ms": s["owd_ms"] * 2.0,
                "hops": pl.Series(s["hops"], dtype=pl.UInt32),
                "src_sat": pl.Series(s["src_sat"], dtype=pl.Utf8),
                "dst_sat": pl.Series(s["dst_sat"], dtype=pl.Utf8),
                "path": pl.Series(s["path"], dtype=pl.List(pl.Utf8)),
                "hop_delays_ms": pl.Series(s["hop_delays_ms"], dtype=pl.List(pl.Float64)),
            }
        ).with_columns(pl.when(pl.col("reachable")).then(pl.col("owd_ms")).otherwise(None).fill_nan(None))
        steps = steps.with_columns(pl.when(pl.col("reachable")).then(pl.col("rtt_ms")).otherwise(None).fill_nan(None))
        names = [pa.name, pb.name]
        handovers = _handovers_frame(raw["handovers"], names)
        outages = pl.DataFrame(
            {"start_s": [o[0] for o in raw["outages"]], "end_s": [o[1] for o in raw["outages"]]},
            schema={"start_s": pl.Float64, "end_s": pl.Float64},
        ).with_columns((pl.col("end_s") - pl.col("start_s")).alias("duration_s"))
        slots = _slots_frame(raw["slots"], names)
        params = dict(
            constellation=self.name, policy=policy, duration_s=duration, step_s=step, min_elevation_deg=min_elevation,
            interruption=interruption, seed=seed, handover_period_s=handover_period, handover_phase_s=handover_phase,
            slot_criterion=slot_criterion, epoch_unix_s=self.epoch_unix_s,
        )  # fmt: skip
        return PathTimeline(pa, pb, steps, handovers, outages, slots, params)

    def connectivity_cache(
        self,
        places: Sequence[PlaceLike],
        *,
        duration: float = 200.0,
        step: float = 0.1,
        min_elevation: float = 25.0,
        policy: str = "global-schedule",
        handover_period: float | None = None,
        handover_phase: float | None = None,
        slot_criterion: str = "highest-elevation",
        interruption: str = "uniform",
        seed: int = 1,
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(slots, handovers): which satellite serves each ground node during which interval — the
        schedule SATGUARD's buffer migration consults — and every handover with its interruption."""
        ps = [place(p) for p in places]
        if not ps:
            raise LeoguardError("invalid places: need at least one")
        if policy == "best-path":
            raise LeoguardError("invalid policy = 'best-path' for a connectivity cache: it depends on a peer")
        if policy == "global-schedule" and slot_criterion == "path-aware":
            raise LeoguardError(
                "invalid slot_criterion = 'path-aware' for a connectivity cache: it depends on the peer's path "
                "(use path_timeline, or highest-elevation or nearest)"
            )
        args = self._timeline_args(
            duration, step, min_elevation, policy, handover_period, handover_phase, slot_criterion, interruption, seed
        )
        raw = self._core.attachment_schedule([p.as_node() for p in ps], *args)
        names = [p.name for p in ps]
        return _slots_frame(raw["slots"], names), _handovers_frame(raw["handovers"], names)

    def beams(self, places: Sequence[PlaceLike], t: float = 0.0, *, resolution: int = 5, min_elevation: float = 25.0):
        """Per place at time t: its H3 cell, the serving satellite's beam (highest elevation), the
        distance from the cell centre to that satellite and SATGUARD's beam timeout thd = 2d/c.
        `t` must lie within 100 years of the epoch; `resolution` is H3's, 0 to 15."""
        ps = [place(p) for p in places]
        t, res, min_el = _number("t", t), _h3_resolution(resolution), _number("min_elevation", min_elevation)
        return pl.DataFrame(self._core.beams([p.as_node() for p in ps], t, res, min_el))

    def footprint(
        self, sat: int | str, t: float = 0.0, *, resolution: int = 5, min_elevation: float = 25.0
    ) -> list[str]:
        """H3 cells (hex) whose centres see satellite `sat` (index or name) at t."""
        if isinstance(sat, str):
            names = self._core.satellites()["sat"]
            if sat not in names:
                raise LeoguardError(f"unknown satellite '{sat}'")
            sat = names.index(sat)
        n = len(self) - 1
        sat = _integer("sat", sat, 0, n, f"a satellite index in [0, {n}]")
        t, res, min_el = _number("t", t), _h3_resolution(resolution), _number("min_elevation", min_elevation)
        return self._core.footprint(sat, t, res, min_el)

    def to_tle(self, path: str | Path) -> Path:
        """Exports the Walker shells as a 3-line TLE file (circular orbits, Kepler mean motion). A path
        that cannot be written, or an epoch a TLE cannot hold (1957-2056), is a `LeoguardError`."""
        info = self.info()
        epoch = _dt.datetime.fromtimestamp(self.epoch_unix_s, _dt.UTC)
        if not 1957 <= epoch.year <= 2056:
            raise LeoguardError(
                f"invalid epoch = {epoch.isoformat()} for a TLE export: TLE epochs have two-digit years, 1957 to 2056"
            )
        day = (epoch - _dt.datetime(epoch.year, 1, 1, tzinfo=_dt.UTC)).total_seconds() / 86400 + 1
        shells = _core.Constellation.preset_shells(self.name) if self.name in PRESETS else None
        if shells is None:
            raise LeoguardError(
                "to_tle exports presets only; build other shells' TLEs with leoguard._core.circular_tle"
            )
        lines, norad = [], 1
        for shell, sh_info in zip(shells, info["shells"], strict=True):
            mm = 86400.0 / sh_info["period_s"]
            for k, (raan, u) in enumerate(_core.walker_elements(shell)):
                l1, l2 = _core.circular_tle(norad, epoch.year, day, shell["inclination_deg"], raan, u, mm)
                lines += [f"{shell['name']}-{k}", l1, l2]
                norad += 1
        p = Path(path)
        try:
            p.write_text("\n".join(lines) + "\n", encoding="ascii")
        except OSError as e:
            raise LeoguardError(f"cannot write TLE file {p}: {_why_unwritable(p, e)}") from e
        return p


def _why_unwritable(p: Path, e: OSError) -> str:
    """The reason a file cannot be written, in words a user can act on."""
    if p.is_dir():
        return "it is a directory"
    if not p.parent.exists():
        return f"parent directory {p.parent} does not exist"
    if not p.parent.is_dir():
        return f"parent directory {p.parent} is not a directory"
    return e.strerror or str(e)


def _lat_cut(value: Any) -> float | None:
    return None if value is None else _number("cross_plane_max_lat_deg", value)


def _h3_resolution(value: Any) -> int:
    return _integer("cell_resolution", value, 0, 15, "an H3 resolution in [0, 15]")


def _handovers_frame(h: dict[str, list[Any]], names: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "t_s": pl.Series(h["t_s"], dtype=pl.Float64),
            "node": pl.Series([names[i] for i in h["node"]], dtype=pl.Utf8),
            "from_sat": pl.Series(h["from_sat"], dtype=pl.Utf8),
            "to_sat": pl.Series(h["to_sat"], dtype=pl.Utf8),
            "reason": pl.Series(h["reason"], dtype=pl.Utf8),
            "interruption_ms": pl.Series(h["interruption_ms"], dtype=pl.Float64),
        }
    )


def _slots_frame(s: dict[str, list[Any]], names: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node": pl.Series([names[i] for i in s["node"]], dtype=pl.Utf8),
            "sat": pl.Series(s["sat"], dtype=pl.Utf8),
            "slot_start_s": pl.Series(s["slot_start_s"], dtype=pl.Float64),
            "slot_end_s": pl.Series(s["slot_end_s"], dtype=pl.Float64),
        }
    )
