"""A measured access link on a Starlink topology (issue 29, docs/realism.md): what a real dish's link
adds to the constellation's propagation, as fitted on a measurement. A leo-path applies it to end `a`
(the dish, the only end a dish measurement sees), a constellation to every user terminal (each with
its own draws; gateways and hosts untouched).

Three mechanisms, each a function of the run's seed and the time only (common random numbers: the
same lossy and delayed instants whatever the traffic, the scheme or the engine):

* **Access latency** beyond propagation (scheduling on the shared beam, gateway-to-PoP backhaul): at
  every routing step the round trip gets an extra delay drawn from `extra_rtt_ms_quantiles` (an
  inverse CDF through equally spaced quantile levels), half on each direction of the dish's ground
  hop. Links stay FIFO, so a fall in delay never reorders packets.
* **Reconfiguration at every 15 s boundary**, whether or not the satellite changes: on a share
  `boundary_share` of boundaries (drawn per boundary) the round trip gets `boundary_extra_ms` more for
  `boundary_length_s` after it. The boundaries are Starlink's (seconds 12/27/42/57 of each UTC minute),
  so their position in the run comes from the path's `epoch`, as on the real network.
* **Capacity** of the dish's link: each second draws its uplink and downlink rates from
  `up_mbps_quantiles` / `down_mbps_quantiles` (per-step rates of the dish's ground link in both
  engines).

Loss is the path's `gsl_loss`; the fitted profiles use the `cycle_profile` model (loss probability by
position in the 15 s cycle). A named `profile` loads a stored fit (`python/leoguard/data/
starlink_profiles/`), each naming the measurement it was fitted on and that measurement's licence.
"""

import itertools
import json
import zlib
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from leoguard.errors import LeoguardError
from leoguard.sections import _Model

if TYPE_CHECKING:  # numpy is imported where it is used: loading a scenario needs none of it
    import numpy as np

PERIOD_S = 15.0
"""Starlink's reconfiguration period."""
BOUNDARY_S = 12.0
"""Seconds past the UTC minute of the first boundary (12, 27, 42, 57)."""

_PROFILES = "starlink_profiles"


def profile_names() -> list[str]:
    """The stored fits, by name."""
    d = resources.files("leoguard").joinpath("data", _PROFILES)
    return sorted(p.name.removesuffix(".json") for p in d.iterdir() if p.name.endswith(".json"))


def load_profile(name: str) -> dict[str, Any]:
    """A stored fit: its `access` fields, `gsl_loss`, `source` and `licence`."""
    names = profile_names()
    if name not in names:
        raise LeoguardError(f"unknown starlink profile '{name}': known are {', '.join(names) or 'none'}")
    text = resources.files("leoguard").joinpath("data", _PROFILES, f"{name}.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def _quantiles(v: list[float] | None, field: str) -> None:
    if v is None:
        return
    if len(v) < 2:
        raise ValueError(f"{field} needs at least 2 quantiles (levels 0 and 1)")
    if any(b < a for a, b in itertools.pairwise(v)):
        raise ValueError(f"{field} must be non-decreasing (an inverse CDF)")


class Access(_Model):
    """The measured access link of end `a` (the dish): see the module docs. Give `profile` (a stored
    fit) or the fields; fields given beside a profile replace the profile's."""

    profile: str | None = None
    extra_rtt_ms_quantiles: list[Annotated[float, Field(ge=0.0, le=10_000.0)]] | None = None
    # Missing (None) fields take the profile's value, else: no bump, 0.5 s, every boundary. None, not the
    # default, marks "not given", so a scenario written out and read back (the emulator's data plane
    # does) still lets the profile fill what the user left out.
    boundary_extra_ms: float | None = Field(default=None, ge=0.0, le=10_000.0)
    boundary_length_s: float | None = Field(default=None, gt=0.0, le=PERIOD_S)
    boundary_share: float | None = Field(default=None, ge=0.0, le=1.0)
    up_mbps_quantiles: list[Annotated[float, Field(gt=0.0, le=1e6)]] | None = None
    down_mbps_quantiles: list[Annotated[float, Field(gt=0.0, le=1e6)]] | None = None

    @model_validator(mode="after")
    def _check(self) -> "Access":
        _quantiles(self.extra_rtt_ms_quantiles, "extra_rtt_ms_quantiles")
        for f in ("up_mbps_quantiles", "down_mbps_quantiles"):
            _quantiles(getattr(self, f), f)
        return self

    def resolved(self) -> tuple["Access", dict[str, Any] | None, dict[str, Any] | None]:
        """This access with a named profile's fields filled in (fields given, not None, win) and the
        defaults of what neither gives; the profile's `gsl_loss` (None without a profile) and its record
        (name, source, licence)."""
        given = {k: v for k, v in self.model_dump(exclude={"profile"}).items() if v is not None}
        p = load_profile(self.profile) if self.profile is not None else None
        merged = {**(p["access"] if p else {}), **given}
        a = Access.model_validate({**_BOUNDARY_DEFAULTS, **{k: v for k, v in merged.items() if v is not None}})
        if p is None:
            return a, None, None
        return a, p.get("gsl_loss"), {k: p.get(k) for k in ("name", "source", "licence", "fitted_on")}


# What neither the scenario nor a profile gives: no bump, 0.5 s long, at every boundary.
_BOUNDARY_DEFAULTS = {"boundary_extra_ms": 0.0, "boundary_length_s": 0.5, "boundary_share": 1.0}


def _uniforms(seed: int, label: str, n: int) -> "np.ndarray":
    """`n` uniforms keyed by (seed, label): the same for every run of a seed, whatever its traffic."""
    import numpy as np

    key = [seed & 0xFFFF_FFFF_FFFF_FFFF, zlib.crc32(label.encode())]
    return np.random.Generator(np.random.Philox(key=key)).random(n)


def _inverse_cdf(q: list[float], u: "np.ndarray") -> "np.ndarray":
    """Piecewise-linear inverse CDF through `q` at equally spaced levels 0..1."""
    import numpy as np

    levels = np.linspace(0.0, 1.0, len(q))
    return np.interp(u, levels, np.asarray(q, dtype=float))


def boundary_phase_s(epoch_unix_s: float) -> float:
    """Seconds from the run's start to its first reconfiguration boundary (modulo the period)."""
    return float((BOUNDARY_S - epoch_unix_s) % PERIOD_S)


def extra_rtt_ms(a: Access, t_s: "np.ndarray", seed: int, epoch_unix_s: float, who: str = "") -> "np.ndarray":
    """The round-trip delay a resolved access (`Access.resolved`) adds at each step time `t_s` (run
    seconds); `who` tells several terminals' draws apart."""
    import numpy as np

    out = np.zeros(len(t_s))
    if a.extra_rtt_ms_quantiles is not None and len(t_s):
        # One draw per step: the steps are the routing steps (a fixed grid from t = 0).
        out += _inverse_cdf(a.extra_rtt_ms_quantiles, _uniforms(seed, "access.extra_rtt" + who, len(t_s)))
    if a.boundary_extra_ms and len(t_s):
        since = (t_s - boundary_phase_s(epoch_unix_s)) % PERIOD_S
        cycle = np.floor((t_s - boundary_phase_s(epoch_unix_s)) / PERIOD_S).astype(np.int64)
        cycle -= cycle.min()
        assert a.boundary_share is not None and a.boundary_length_s is not None, "an unresolved access"
        disturbed = _uniforms(seed, "access.boundary" + who, int(cycle.max()) + 1) < a.boundary_share
        out += np.where((since < a.boundary_length_s) & disturbed[cycle], a.boundary_extra_ms, 0.0)
    return out


def rates_bps(a: Access, t_s: "np.ndarray", seed: int, who: str = "") -> list[list[int] | None] | None:
    """Per step, the dish's [uplink, downlink] capacity in bit/s (None without rate quantiles)."""
    import numpy as np

    if a.up_mbps_quantiles is None and a.down_mbps_quantiles is None:
        return None
    sec = np.floor(t_s).astype(np.int64)
    n = int(sec.max()) + 1 if len(sec) else 0
    out = []
    ups = _inverse_cdf(a.up_mbps_quantiles, _uniforms(seed, "access.up" + who, n)) if a.up_mbps_quantiles else None
    downs = (
        _inverse_cdf(a.down_mbps_quantiles, _uniforms(seed, "access.down" + who, n)) if a.down_mbps_quantiles else None
    )
    for s in sec:
        up = ups[s] if ups is not None else None
        down = downs[s] if downs is not None else None
        out.append([round((up if up is not None else down) * 1e6), round((down if down is not None else up) * 1e6)])
    return out  # type: ignore[return-value]


def apply(a: Access, leo: dict[str, Any], seed: int, epoch_unix_s: float) -> dict[str, Any]:
    """Adds the access to a leo-path's core dict (its `t_s`, `hop_delays_ms`): the extra delay on the
    dish's ground hop, the per-step rates. Returns what was applied, for the run's record."""
    import numpy as np

    t = np.asarray(leo["t_s"], dtype=float)
    extra = extra_rtt_ms(a, t, seed, epoch_unix_s)
    hops = leo["hop_delays_ms"]
    for k, e in enumerate(extra):
        if hops[k]:
            hops[k] = [hops[k][0] + e / 2, *hops[k][1:]]
    rates = rates_bps(a, t, seed)
    if rates is not None:
        leo["gsl_rates_a_bps"] = rates
    return {
        "extra_rtt_ms_mean": float(extra.mean()) if len(extra) else 0.0,
        "boundary_phase_s": boundary_phase_s(epoch_unix_s),
        "rates": rates is not None,
    }


def for_terminal(a: Access, g: int, duration_s: float, step_s: float, seed: int, epoch_unix_s: float) -> dict[str, Any]:
    """A constellation terminal's access (ground node `g`): the one-way extra delay of its ground link
    at every routing step and its capacity per second, as leoguard-net's `GroundAccess` takes them."""
    import numpy as np

    n = int(np.ceil(duration_s / step_s)) + 1
    t = np.arange(n) * step_s
    who = f".ground{g}"
    rates = rates_bps(a, np.arange(int(np.ceil(duration_s)) + 1, dtype=float), seed, who)
    return {"ground": g, "extra_ms": list(extra_rtt_ms(a, t, seed, epoch_unix_s, who) / 2), "rates_bps": rates}


__all__ = [
    "Access",
    "apply",
    "boundary_phase_s",
    "extra_rtt_ms",
    "for_terminal",
    "load_profile",
    "profile_names",
    "rates_bps",
]
