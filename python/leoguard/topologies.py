"""Topologies of a scenario: the `[topology]` shortcuts (chain, dumbbell, two-path, constellation,
leo-path), explicit `[[links]]`, link loss models and rate schedules. Pydantic models whose errors name
the field; `leoguard.scenario` assembles them into a `Scenario`."""

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from leoguard import _core
from leoguard.access import Access
from leoguard.errors import LeoguardError
from leoguard.sections import _Model

# The fastest link either engine takes (leoguard-net's MAX_LINK_RATE, 10 Tbit/s), checked here too so
# that a typo such as 1e12 is refused naming the field as written, not `rate_bps`.
MAX_LINK_RATE_MBPS = _core.MAX_LINK_RATE_BPS // 1_000_000
MAX_DELAY_MS = 3_600_000.0
"""The longest one-way link delay a scenario takes (one hour: beyond any orbit, a typo's guard)."""


class Loss(_Model):
    """A link loss model (see docs/loss-models.md)."""

    model: Literal["none", "bernoulli", "gilbert_elliott", "starlink", "trace_per_second", "drop_list", "cycle_profile"]
    p: float | None = Field(default=None, ge=0.0, le=1.0)
    p_gb: float | None = Field(default=None, ge=0.0, le=1.0)
    p_bg: float | None = Field(default=None, ge=0.0, le=1.0)
    loss_good: float | None = Field(default=None, ge=0.0, le=1.0)
    loss_bad: float | None = Field(default=None, ge=0.0, le=1.0)
    boundary_offset_s: int | None = Field(default=None, ge=0, le=14)
    outages: list[tuple[float, float]] | None = None
    trace: str | None = None
    loop: bool = True
    indices: list[int] | None = None
    # cycle_profile: loss probability per equal bin of a repeating cycle (issue 29's Starlink access profile).
    probs: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(default=None, min_length=1, max_length=3600)
    period_s: float | None = Field(default=None, gt=0.0, le=1e6)
    """The cycle's length; missing means 15 s (Starlink's reconfiguration schedule)."""
    phase_s: float | None = Field(default=None, ge=0.0)
    """The first cycle boundary after t = 0 of the run, in [0, period_s); missing: 0 on explicit links."""
    slot_s: float | None = Field(default=None, gt=0.0, le=1e6)
    """cycle_profile's outage mode: slots of this length lost whole (CRN, by time); missing: per packet."""

    @model_validator(mode="after")
    def _needs(self) -> "Loss":
        need = {
            "bernoulli": ["p"],
            "gilbert_elliott": ["p_gb", "p_bg", "loss_good", "loss_bad"],
            "trace_per_second": ["trace"],
            "drop_list": ["indices"],
            "cycle_profile": ["probs"],
        }.get(self.model, [])
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"model '{self.model}' needs {', '.join(missing)}")
        period = self.period_s if self.period_s is not None else 15.0
        if self.phase_s is not None and self.phase_s >= period:
            raise ValueError(f"phase_s = {self.phase_s} must be less than period_s = {period}")
        return self


class RateSchedule(_Model):
    """A link capacity that follows a periodic wave: `rates_mbps` in equal steps over `period_s`,
    repeating from t = 0 (`{period_s = 2, rates_mbps = [11, 9]}`: 1 s at 11 Mbit/s, 1 s at 9, ...;
    LEOTP's Fig 14). Unequal steps: repeat a rate (`{period_s = 3, rates_mbps = [11, 9, 9]}`). The rate
    in force when a packet starts serialising sets its whole serialisation time. Both directions of the
    link follow it; both engines run it (leoguard-net's link model)."""

    period_s: float = Field(gt=0, le=1e6)
    rates_mbps: list[Annotated[float, Field(gt=0, le=MAX_LINK_RATE_MBPS)]] = Field(
        min_length=1, max_length=_core.MAX_SCHEDULE_STEPS
    )

    @model_validator(mode="after")
    def _steps(self) -> "RateSchedule":
        if self.period_s / len(self.rates_mbps) < 1e-6:
            raise ValueError(
                f"period_s = {self.period_s} gives each of the {len(self.rates_mbps)} steps less than 1 µs"
            )
        return self

    def mean_mbps(self) -> float:
        """The time-average rate."""
        return sum(self.rates_mbps) / len(self.rates_mbps)

    def core(self) -> dict[str, Any]:
        """The Rust core's `rate_schedule` dict."""
        return {"period_s": self.period_s, "rates_bps": [round(r * 1e6) for r in self.rates_mbps]}


class Link(_Model):
    """A bidirectional link between nodes `a` and `b`. With `rate_schedule` its capacity follows the
    schedule and `rate_mbps` (default: the schedule's mean) is its nominal rate: the `links` table's
    `rate_bps`, the base of `link_series` utilisation and the per-hop schemes' estimates."""

    a: int = Field(ge=0)
    b: int = Field(ge=0)
    rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    delay_ms: float = Field(ge=0, le=MAX_DELAY_MS)
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0, le=2**32 - 1)
    loss: Loss | None = None
    loss_reverse: Loss | None = None
    rate_schedule: RateSchedule | None = None

    @model_validator(mode="before")
    @classmethod
    def _nominal_rate(cls, data: Any) -> Any:
        # A scheduled link's nominal rate defaults to the schedule's mean (when the schedule's rates are
        # numbers: otherwise the schedule's own error, and a missing rate_mbps, are reported).
        if isinstance(data, dict) and data.get("rate_mbps") is None and isinstance(data.get("rate_schedule"), dict):
            rates = data["rate_schedule"].get("rates_mbps")
            if isinstance(rates, list) and rates and all(isinstance(r, int | float) and r > 0 for r in rates):
                data = {**data, "rate_mbps": sum(rates) / len(rates)}
        return data


class Chain(_Model):
    """`hops` links in a row between node 0 and node `hops` (issue 3's test topology)."""

    kind: Literal["chain"]
    hops: int = Field(ge=1, le=10_000)
    rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    delay_ms: float = Field(ge=0, le=MAX_DELAY_MS)
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0, le=2**32 - 1)
    loss: Loss | None = None
    loss_on: Literal["first", "all"] = "first"
    rate_schedule: RateSchedule | None = None
    """A periodic capacity (see `RateSchedule`) for the links in `rate_schedule_on`, whose nominal
    rate is then the schedule's mean; the others keep `rate_mbps`."""
    rate_schedule_on: Literal["all"] | list[int] = "all"
    """The links that follow `rate_schedule`: "all", or link indices (link i joins nodes i and i+1)."""

    @model_validator(mode="after")
    def _schedule_on(self) -> "Chain":
        on = self.rate_schedule_on
        if isinstance(on, list):
            bad = [i for i in on if not 0 <= i < self.hops]
            if bad:
                raise ValueError(f"rate_schedule_on = {on}: {bad[0]} is not a link index (0..{self.hops - 1})")
            if self.rate_schedule is None:
                raise ValueError("rate_schedule_on needs a rate_schedule")
        return self

    def scheduled(self, i: int) -> bool:
        """Whether link `i` follows the rate schedule."""
        return self.rate_schedule is not None and (self.rate_schedule_on == "all" or i in self.rate_schedule_on)


class Dumbbell(_Model):
    """`pairs` senders and receivers joined by one bottleneck. Node names: `left` (0), `right` (1),
    senders `s0..` (2..pairs+1), receivers `r0..` (pairs+2..2*pairs+1). Access links may differ per pair
    (`access_delay_ms` as a list gives each pair its own RTT)."""

    kind: Literal["dumbbell"]
    pairs: int = Field(ge=1, le=10_000)
    bottleneck_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    bottleneck_delay_ms: float = Field(ge=0, le=MAX_DELAY_MS)
    access_mbps: float = Field(default=1000.0, gt=0, le=MAX_LINK_RATE_MBPS)
    access_delay_ms: float | list[float] = 1.0
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0, le=2**32 - 1)
    loss: Loss | None = None

    @model_validator(mode="after")
    def _delays(self) -> "Dumbbell":
        d = self.access_delay_ms
        if isinstance(d, list) and (len(d) != self.pairs or min(d) < 0):
            raise ValueError(f"access_delay_ms needs {self.pairs} values >= 0, one per pair")
        if isinstance(d, float | int) and d < 0:
            raise ValueError("access_delay_ms must be >= 0")
        if max(d if isinstance(d, list) else [d]) > MAX_DELAY_MS:
            raise ValueError(f"access_delay_ms must be <= {MAX_DELAY_MS:g} (one hour)")
        return self


class PathSpec(_Model):
    """One of the two paths of a `two-path` topology."""

    rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    delay_ms: float = Field(ge=0, le=MAX_DELAY_MS)
    loss: Loss | None = None


class TwoPath(_Model):
    """Two parallel paths between `src` (node 0) and `dst` (node 1), through `via0` (2) and `via1` (3);
    both directions switch from one path to the other every `switch_every_s` seconds, starting on
    path 0 (StarTCP's two-path experiment). At every switch both paths are down for `interruption_ms`
    (a handover's interruption; StarTCP's experiment has 100 ms): packets on or entering them are lost.
    Each path's delay is split over its two links; its loss applies to the link leaving the source."""

    kind: Literal["two-path"]
    paths: list[PathSpec] = Field(min_length=2, max_length=2)
    switch_every_s: float = Field(gt=0)
    interruption_ms: float = Field(default=0.0, ge=0)
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0, le=2**32 - 1)


#: How the global schedule picks a slot's satellite (the Rust core's SLOT_CRITERIA; see
#: docs/constellation.md). `path-aware` needs a peer: a leo-path topology, or a constellation of two places.
SlotCriterion = Literal["highest-elevation", "nearest", "path-aware"]


class Host(_Model):
    """A server or PoP behind a ground node, by a terrestrial link."""

    name: str
    ground: str
    rate_mbps: float = Field(default=10_000.0, gt=0, le=MAX_LINK_RATE_MBPS)
    delay_ms: float = Field(default=1.0, ge=0, le=MAX_DELAY_MS)


class GslPass(_Model):
    """A ground-satellite link's capacity over each satellite pass (LEOTP's Starlink experiment): a
    parabola from `edge_fraction` of the GSL rate at the pass's ends (the handovers) to the full rate
    mid-pass, held `step_s` at a time, plus `alternate_mbps` on even steps of the run and minus it on
    odd ones. A pass is the time one satellite serves a ground node without a handover."""

    edge_fraction: float = Field(default=0.5, gt=0, le=1)
    alternate_mbps: float = Field(default=0.0, ge=0)
    step_s: float = Field(default=1.0, ge=0.001, le=3600)

    def core(self) -> dict[str, Any]:
        """The Rust core's `gsl_pass` dict."""
        return {"edge_fraction": self.edge_fraction, "alternate_bps": round(self.alternate_mbps * 1e6),
                "step_s": self.step_s}  # fmt: skip


class ConstellationTopology(_Model):
    """A whole constellation: every satellite and ISL, ground nodes that each attach to one satellite
    by their policy, hosts behind ground nodes; the orbit engine drives delays, routes and handovers as
    the run goes. Node names: the ground places, the hosts, then the satellites. Places listed in
    `ground_stations` are gateways (one-to-one feeder links); the other places are user terminals,
    whose satellite downlinks are one-to-many user links grouped by H3 beam cell."""

    kind: Literal["constellation"]
    constellation: str = "starlink-shell1"
    ground: list[str] = Field(default_factory=list)
    ground_stations: list[str] = Field(default_factory=list)
    top_cities: int = Field(default=0, ge=0, le=1000)
    hosts: list[Host] = Field(default_factory=list)
    policy: Literal["global-schedule", "nearest", "best-path"] = "global-schedule"
    slot_criterion: SlotCriterion = "highest-elevation"
    step_s: float = Field(default=0.1, gt=0)
    min_elevation_deg: float = Field(default=25.0, ge=0, le=90)
    interruption: str = "uniform"
    gsl_rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    gsl_downlink_rate_mbps: float | None = Field(default=None, gt=0, le=MAX_LINK_RATE_MBPS)
    gsl_pass: GslPass | None = None
    isl_rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    queue_bytes: int | None = Field(default=None, gt=0)
    gsl_loss: Loss | None = None
    isl_loss: Loss | None = None
    epoch: float | str | None = None
    """The run's start as UTC (ISO 8601 or Unix seconds): the orbits' epoch and the 15 s schedule's phase."""
    access: Access | None = None
    """Every user terminal's measured access link (each its own draws; leoguard.access, docs/realism.md)."""

    @model_validator(mode="after")
    def _some_ground(self) -> "ConstellationTopology":
        if not self.ground and self.top_cities == 0:
            raise ValueError("give ground places (ground = [...]) and/or top_cities = N")
        joint = self.policy == "best-path" or (self.policy == "global-schedule" and self.slot_criterion == "path-aware")
        if joint and (self.top_cities or len(self.ground) != 2):
            # A pair is attached jointly (each end's satellite chosen for the path between them); more
            # places attach each on its own (the connectivity cache has no peer).
            what = "policy = 'best-path'" if self.policy == "best-path" else "slot_criterion = 'path-aware'"
            raise ValueError(
                f"{what} attaches a pair of places jointly, so it needs exactly 2 ground places and no "
                "top_cities: with more, use highest-elevation or nearest"
            )
        unknown = [g for g in self.ground_stations if g not in self.ground]
        if unknown:
            raise ValueError(f"ground_stations must name places listed in ground, not {unknown}")
        if self.gsl_pass is not None:
            low = min(self.gsl_rate_mbps, self.gsl_downlink_rate_mbps or self.gsl_rate_mbps)
            if self.gsl_pass.alternate_mbps >= self.gsl_pass.edge_fraction * low:
                raise ValueError(
                    f"gsl_pass.alternate_mbps = {self.gsl_pass.alternate_mbps} must be below edge_fraction x "
                    f"the smaller GSL rate ({self.gsl_pass.edge_fraction * low:g} Mbit/s), or a pass's "
                    "capacity would reach zero"
                )
        return self

    def places(self) -> list[Any]:
        """The ground places, listed ones first (named as written), then the most populous cities not
        already listed (named as in the gazetteer)."""
        from leoguard.places import Place, place, top_cities

        out = []
        for g in self.ground:
            p = place(g)
            role = "ground-station" if g in self.ground_stations else p.role
            out.append(Place(g, p.lat_deg, p.lon_deg, role))
        if len({p.name for p in out}) != len(out):
            raise LeoguardError(f"topology.ground lists a place twice: {self.ground}")
        seen = {(round(p.lat_deg, 3), round(p.lon_deg, 3)) for p in out}
        for p in top_cities(self.top_cities + len(out)) if self.top_cities else []:
            key = (round(p.lat_deg, 3), round(p.lon_deg, 3))
            if key not in seen and len(out) < len(self.ground) + self.top_cities:
                out.append(p)
                seen.add(key)
        return out

    def node_names(self) -> list[str]:
        """Ground places then hosts (satellites follow in the simulator but are not flow ends)."""
        names = [p.name for p in self.places()] + [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise LeoguardError("topology: host names must differ from each other and from the ground places")
        return names


class LeoPath(_Model):
    """Two places joined over a constellation: the path timeline of the constellation engine drives
    routes, per-hop delays and handover interruptions. Ground end `a` is node 0, `b` is node 1."""

    kind: Literal["leo-path"]
    constellation: str = "starlink-shell1"
    a: str
    b: str
    policy: Literal["global-schedule", "nearest", "best-path"] = "global-schedule"
    slot_criterion: SlotCriterion = "highest-elevation"
    """Under global-schedule: the slot's satellite by highest elevation, nearest, or path-aware (both
    ends jointly, lowest mean delay over the slot)."""
    step_s: float = Field(default=0.1, gt=0)
    min_elevation_deg: float = Field(default=25.0, ge=0, le=90)
    interruption: str = "uniform"
    rate_mbps: float = Field(gt=0, le=MAX_LINK_RATE_MBPS)
    queue_bytes: int | None = Field(default=None, gt=0)
    gsl_loss: Loss | None = None
    isl_loss: Loss | None = None
    epoch: float | str | None = None
    """The run's start as UTC (ISO 8601 or Unix seconds): the orbits' epoch, and so where the 15 s
    schedule's boundaries fall (seconds 12/27/42/57 of each minute). Default 2026-01-01T00:00:00Z."""
    access: Access | None = None
    """End `a`'s measured access link (a dish): extra latency, a disturbance at every boundary,
    per-second capacity, and with a named `profile` its fitted loss (leoguard.access, docs/realism.md)."""

    @model_validator(mode="after")
    def _two_places(self) -> "LeoPath":
        from leoguard.places import place

        pa, pb = place(self.a), place(self.b)
        if (pa.lat_deg, pa.lon_deg) == (pb.lat_deg, pb.lon_deg):
            raise ValueError(
                f"a = '{self.a}' and b = '{self.b}' are the same place ({pa.name}): a leo-path joins two places"
            )
        return self
