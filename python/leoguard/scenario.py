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
    topology: Chain | None = None
    links: list[Link] = []
    flows: list[Flow] = Field(min_length=1)
    events: list[Event] = []

    @model_validator(mode="after")
    def _shape(self) -> Scenario:
        if self.topology is not None and self.links:
            raise ValueError("give either [topology] or [[links]], not both")
        if self.topology is None and not self.links:
            raise ValueError("needs a [topology] or at least one [[links]]")
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
        """Nodes in the resolved topology."""
        if self.topology is not None:
            return self.topology.hops + 1
        return self.nodes if self.nodes is not None else 1 + max(max(lk.a, lk.b) for lk in self.links)

    def resolved_links(self) -> list[Link]:
        """The explicit link list (a chain expanded)."""
        t = self.topology
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

        links = []
        for lk in self.resolved_links():
            d = {"a": lk.a, "b": lk.b, "rate_bps": round(lk.rate_mbps * 1e6), "delay_ms": lk.delay_ms}
            if lk.queue_bytes is not None:
                d["queue_bytes"] = lk.queue_bytes
            if lk.queue_packets is not None:
                d["queue_packets"] = lk.queue_packets
            d["loss"], d["loss_reverse"] = loss(lk.loss), loss(lk.loss_reverse)
            links.append(d)
        flows = []
        for f in self.flows:
            d = f.model_dump(exclude_none=True)
            if f.rate_mbps is not None:
                d["rate_bps"] = round(f.rate_mbps * 1e6)
            flows.append(d)
        return {
            "nodes": self.node_count(),
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sample_every_s": self.sample_every_s,
            "links": links,
            "flows": flows,
            "events": [e.model_dump() for e in self.events],
        }


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
