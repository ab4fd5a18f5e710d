"""Scenarios: pydantic models loaded from TOML, with errors that name the field and the value.

A scenario is either a `[topology]` shortcut (`kind = "chain"`) or an explicit list of `[[links]]`
between numbered nodes, plus `[[flows]]` and optional `[[events]]` (links going down and up).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from leoguard.errors import LeoguardError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Loss(_Model):
    """A link loss model (see docs/loss-models.md)."""

    model: Literal["none", "bernoulli", "gilbert_elliott", "starlink", "trace_per_second", "drop_list"]
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

    @model_validator(mode="after")
    def _needs(self) -> Loss:
        need = {
            "bernoulli": ["p"],
            "gilbert_elliott": ["p_gb", "p_bg", "loss_good", "loss_bad"],
            "trace_per_second": ["trace"],
            "drop_list": ["indices"],
        }.get(self.model, [])
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"model '{self.model}' needs {', '.join(missing)}")
        return self


class Link(_Model):
    """A bidirectional link between nodes `a` and `b`."""

    a: int = Field(ge=0)
    b: int = Field(ge=0)
    rate_mbps: float = Field(gt=0)
    delay_ms: float = Field(ge=0)
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0)
    loss: Loss | None = None
    loss_reverse: Loss | None = None


class Chain(_Model):
    """`hops` links in a row between node 0 and node `hops` (issue 3's test topology)."""

    kind: Literal["chain"]
    hops: int = Field(ge=1, le=10_000)
    rate_mbps: float = Field(gt=0)
    delay_ms: float = Field(ge=0)
    queue_bytes: int | None = Field(default=None, gt=0)
    queue_packets: int | None = Field(default=None, gt=0)
    loss: Loss | None = None
    loss_on: Literal["first", "all"] = "first"


class LeoPath(_Model):
    """Two places joined over a constellation: the path timeline of the constellation engine drives
    routes, per-hop delays and handover interruptions. Ground end `a` is node 0, `b` is node 1."""

    kind: Literal["leo-path"]
    constellation: str = "starlink-shell1"
    a: str
    b: str
    policy: Literal["global-schedule", "nearest", "best-path"] = "global-schedule"
    step_s: float = Field(default=0.1, gt=0)
    min_elevation_deg: float = Field(default=25.0, ge=0, le=90)
    interruption: str = "uniform"
    rate_mbps: float = Field(gt=0)
    queue_bytes: int | None = Field(default=None, gt=0)
    gsl_loss: Loss | None = None
    isl_loss: Loss | None = None


class Flow(_Model):
    """A TCP transfer (bulk if `bytes` is absent) or a constant-bit-rate UDP stream."""

    kind: Literal["tcp", "cbr"]
    src: int = Field(ge=0)
    dst: int = Field(ge=0)
    cc: Literal["newreno", "reno", "cubic", "bbr"] = "cubic"
    bytes: int | None = Field(default=None, gt=0)
    rate_mbps: float | None = Field(default=None, gt=0)
    size: int = Field(default=1200, ge=28, le=65535)
    start_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _cbr_rate(self) -> Flow:
        if self.kind == "cbr" and self.rate_mbps is None:
            raise ValueError("a cbr flow needs rate_mbps")
        return self


class Event(_Model):
    """Link `link` goes up or down at `t_s`."""

    t_s: float = Field(ge=0)
    link: int = Field(ge=0)
    up: bool


class Scenario(_Model):
    """A simulation scenario."""

    name: str = "scenario"
    duration_s: float = Field(gt=0, le=1e6)
    seed: int = Field(default=1, ge=0)
    sample_every_s: float = Field(default=0.1, gt=0)
    nodes: int | None = Field(default=None, ge=2)
    topology: Chain | LeoPath | None = Field(default=None, discriminator="kind")
    links: list[Link] = []
    flows: list[Flow] = Field(min_length=1)
    events: list[Event] = []

    @model_validator(mode="after")
    def _shape(self) -> Scenario:
        if self.topology is not None and self.links:
            raise ValueError("give either [topology] or [[links]], not both")
        if self.topology is None and not self.links:
            raise ValueError("needs a [topology] or at least one [[links]]")
        if isinstance(self.topology, LeoPath):
            for i, f in enumerate(self.flows):
                if {f.src, f.dst} != {0, 1}:
                    raise ValueError(f"flows[{i}]: on a leo-path topology flows run between node 0 (a) and node 1 (b)")
            if self.events:
                raise ValueError("events are not allowed on a leo-path topology (its timeline drives the links)")
            return self
        n = self.node_count()
        for i, f in enumerate(self.flows):
            for end in ("src", "dst"):
                if getattr(f, end) >= n:
                    raise ValueError(f"flows[{i}].{end} = {getattr(f, end)} is not a node (0..{n - 1})")
        for i, e in enumerate(self.events):
            if e.link >= len(self.resolved_links()):
                raise ValueError(f"events[{i}].link = {e.link} is not a link index")
        return self

    def node_count(self) -> int:
        """Nodes in the resolved topology (a leo-path's count is known only after its timeline)."""
        if isinstance(self.topology, LeoPath):
            raise LeoguardError("a leo-path topology's node count comes from its path timeline")
        if self.topology is not None:
            return self.topology.hops + 1
        return self.nodes if self.nodes is not None else 1 + max(max(lk.a, lk.b) for lk in self.links)

    def resolved_links(self) -> list[Link]:
        """The explicit link list (a chain expanded)."""
        t = self.topology
        if isinstance(t, LeoPath):
            return []
        if t is None:
            return list(self.links)
        return [
            Link(
                a=i,
                b=i + 1,
                rate_mbps=t.rate_mbps,
                delay_ms=t.delay_ms,
                queue_bytes=t.queue_bytes,
                queue_packets=t.queue_packets,
                loss=t.loss if (t.loss_on == "all" or i == 0) else None,
            )
            for i in range(t.hops)
        ]

    def _flows_core(self) -> list[dict[str, Any]]:
        out = []
        for f in self.flows:
            d = f.model_dump(exclude_none=True)
            if f.rate_mbps is not None:
                d["rate_bps"] = round(f.rate_mbps * 1e6)
            out.append(d)
        return out

    def _leo_core(self, loss: Any) -> dict[str, Any]:
        t = self.topology
        assert isinstance(t, LeoPath)
        c, tl = _leo_timeline(t, self.duration_s, self.seed)
        index = {name: i for i, name in enumerate(c.satellites()["sat"].to_list())}
        steps = tl.steps
        sats = [[index[n] for n in p[1:-1]] for p in steps["path"].to_list()]
        gsl = loss(t.gsl_loss)
        if gsl is not None and gsl["model"] == "starlink" and "boundary_offset_s" not in gsl:
            # The measured trace's lossy boundary second is the one that holds the 15 s handover epoch.
            gsl["boundary_offset_s"] = int((12.0 - c.epoch_unix_s) % 15.0)
        leo = {
            "t_s": steps["t_s"].to_list(),
            "sats": sats,
            "hop_delays_ms": steps["hop_delays_ms"].to_list(),
            "interruptions": [
                (h["t_s"], 0 if h["node"] == tl.a.name else 1, h["interruption_ms"] / 1e3)
                for h in tl.handovers.iter_rows(named=True)
            ],
            "rate_bps": round(t.rate_mbps * 1e6),
            "gsl_loss": gsl,
            "isl_loss": loss(t.isl_loss),
        }
        if t.queue_bytes is not None:
            leo["queue_bytes"] = t.queue_bytes
        flows = self._flows_core()
        return {
            "nodes": 2 + len({s for p in sats for s in p}),
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sample_every_s": self.sample_every_s,
            "links": [],
            "flows": flows,
            "events": [],
            "leo": leo,
            "path_summary": tl.summary(),
        }

    def to_core(self, base_dir: Path | None = None) -> dict[str, Any]:
        """The dict the native simulator takes (trace files read relative to `base_dir`)."""

        def loss(x: Loss | None) -> dict[str, Any] | None:
            if x is None:
                return None
            d = x.model_dump(exclude_none=True)
            if x.trace is not None:
                p = (base_dir or Path.cwd()) / x.trace
                try:
                    d["csv_text"] = p.read_text(encoding="utf-8")
                except OSError as e:
                    raise LeoguardError(f"cannot read loss trace {p}: {e.strerror}") from e
            return d

        if isinstance(self.topology, LeoPath):
            return self._leo_core(loss)
        links = []
        for lk in self.resolved_links():
            d = {"a": lk.a, "b": lk.b, "rate_bps": round(lk.rate_mbps * 1e6), "delay_ms": lk.delay_ms}
            if lk.queue_bytes is not None:
                d["queue_bytes"] = lk.queue_bytes
            if lk.queue_packets is not None:
                d["queue_packets"] = lk.queue_packets
            d["loss"], d["loss_reverse"] = loss(lk.loss), loss(lk.loss_reverse)
            links.append(d)
        flows = self._flows_core()
        return {
            "nodes": self.node_count(),
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sample_every_s": self.sample_every_s,
            "links": links,
            "flows": flows,
            "events": [e.model_dump() for e in self.events],
        }


def _leo_timeline(t: LeoPath, duration_s: float, seed: int) -> tuple[Any, Any]:
    from leoguard.orbit import Constellation

    c = Constellation.preset(t.constellation)
    tl = c.path_timeline(
        t.a, t.b, duration=duration_s, step=t.step_s, policy=t.policy, min_elevation=t.min_elevation_deg,
        interruption=t.interruption, seed=seed,
    )  # fmt: skip
    return c, tl


def _explain(e: ValidationError, source: str) -> LeoguardError:
    lines = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "scenario"
        got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
        lines.append(f"{loc}: {err['msg']}{got}")
    return LeoguardError(f"invalid scenario {source}: " + "; ".join(lines))


def load_scenario(path: str | Path, **overrides: Any) -> Scenario:
    """Reads and validates a TOML scenario; `overrides` replace top-level fields (e.g. seed=3)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise LeoguardError(f"cannot read scenario {p}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise LeoguardError(f"invalid scenario {p}: not valid TOML ({e})") from e
    data.update({k: v for k, v in overrides.items() if v is not None})
    return from_dict(data, str(p))


def from_dict(data: dict[str, Any], source: str = "<dict>") -> Scenario:
    """Validates a scenario given as a dict."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise _explain(e, source) from None
