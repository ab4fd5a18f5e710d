"""Scenarios: pydantic models loaded from TOML, with errors that name the field and the value.

A scenario is either a `[topology]` shortcut (`kind` = `chain`, `dumbbell`, `two-path`, `leo-path` or
`constellation`) or an explicit list of `[[links]]` between numbered nodes, plus `[[flows]]` and
optional `[[events]]` (links going down and up) and `[[routes]]` (scheduled route changes). Flow ends
are node numbers or node names (see each topology's `node_names`).
"""

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from leoguard import _core
from leoguard.errors import LeoguardError, read_user_text, shown
from leoguard.sections import Capture, Emu, Leotp, LinkGuardian, Liquid, Mpep, Satguard, Startcp, Tambur, Tcp, _Model
from leoguard.topologies import (
    Chain,
    ConstellationTopology,
    Dumbbell,
    LeoPath,
    Link,
    Loss,
    RateSchedule,
    TwoPath,
)

__all__ = [
    "Capture",
    "Emu",
    "Leotp",
    "LinkGuardian",
    "Liquid",
    "Mpep",
    "RateSchedule",
    "Satguard",
    "Scenario",
    "Tambur",
    "from_dict",
    "load_scenario",
]  # fmt: skip


class PageRange(_Model):
    """`count` consecutive corpus pages from `first`."""

    first: int = Field(default=0, ge=0, lt=_core.WEB_CORPUS_PAGES)
    count: int = Field(ge=1, le=_core.WEB_CORPUS_PAGES)


class Flow(_Model):
    """A TCP transfer (bulk if `bytes` is absent; with `rate_mbps`, an application-limited stream the
    application writes at that rate), a constant-bit-rate UDP stream, a browser loading
    pages of the synthetic web corpus one after another (`web`, see docs/web.md), or a WebRTC video
    call (`webrtc`, docs/webrtc.md: `bitrate_mbps`, `fps`, `keyframe_interval_s` (0: key frames only
    at the start and on PLI), `fec` = "none" or "tambur", `nack` (default: on without FEC, off with
    Tambur), and the model's finer parameters), or a LEOTP transfer (`leotp`: the producer at `src`,
    the consumer at `dst`, `bytes` or bulk; see `[leotp]`)."""

    kind: Literal["tcp", "cbr", "web", "webrtc", "leotp"]
    src: int | str
    dst: int | str
    cc: Literal["newreno", "reno", "cubic", "bbr", "satcp", "startcp", "hybla", "pcc-allegro", "pcc-vivace"] = "cubic"
    stack: Literal["kernel", "leoguard"] | None = None
    """(tcp, emulator only) Which TCP the emulated hosts run: "kernel" (Linux's, through iperf3) or
    "leoguard" (leoguard's own TCP, the simulator's code, over UDP: `leoguard-transport`, see
    docs/transport.md). Default: the kernel's when it has `cc` (cubic, bbr, reno/newreno), else
    leoguard's (satcp, hybla, pcc-allegro, pcc-vivace). The simulator always runs leoguard's TCP and
    ignores this field."""
    bytes: int | None = Field(default=None, gt=0)
    rate_mbps: float | None = Field(default=None, gt=0, le=100_000)
    size: int = Field(default=1200, ge=28, le=65535)
    start_s: float = Field(default=0.0, ge=0)
    delay_sensitive: bool = False
    http: Literal["1.1", "2"] = "2"
    """(web) HTTP version: "1.1" (six connections per host) or "2" (one, multiplexed)."""
    corpus_seed: int = Field(default=0, ge=0, lt=2**64)
    """(web) seed of the page corpus."""
    pages: list[int] | PageRange | None = None
    """(web) corpus page indices in load order, or {first, count}."""
    think_s: float = Field(default=1.0, ge=0)
    """(web) pause between one page load's end and the next one's start."""
    bitrate_mbps: float = Field(default=2.5, ge=0.01, le=100)
    fps: int = Field(default=30, ge=1, le=120)
    keyframe_interval_s: float = Field(default=3.0, ge=0)
    fec: Literal["none", "tambur"] = "none"
    nack: bool | None = None
    key_ratio: float = Field(default=6.0, ge=1, le=50)
    size_sigma: float = Field(default=0.25, ge=0, le=2)
    max_payload: int = Field(default=1200, ge=100, le=9000)
    pacing_factor: float = Field(default=2.5, ge=0, le=100)
    history_s: float = Field(default=1.0, ge=0.1)
    jitter_window_s: float = Field(default=5.0, gt=0)
    jitter_percentile: float = Field(default=99.0, ge=50, le=100)

    @model_validator(mode="after")
    def _cbr_rate(self) -> "Flow":
        if self.kind == "cbr" and self.rate_mbps is None:
            raise ValueError("a cbr flow needs rate_mbps")
        if self.kind == "tcp" and self.rate_mbps is not None and self.bytes is not None:
            raise ValueError("a tcp flow takes rate_mbps (a stream) or bytes (a transfer), not both")
        if self.stack is not None and self.kind != "tcp":
            raise ValueError(f'stack = "{self.stack}" is for tcp flows only (this one is {self.kind})')
        if self.kind == "web":
            pages = self.page_list()
            if not pages:
                raise ValueError("a web flow needs pages (a list of corpus indices or {first, count})")
            n = _core.WEB_CORPUS_PAGES
            bad = [(j, p) for j, p in enumerate(pages) if not 0 <= p < n]
            if bad:
                j, p = bad[0]
                raise ValueError(f"pages[{j}] = {p} is not a corpus page (the corpus has pages 0..{n})")
        return self

    def page_list(self) -> list[int]:
        """The pages a web flow loads, in order."""
        if isinstance(self.pages, PageRange):
            return list(range(self.pages.first, self.pages.first + self.pages.count))
        return list(self.pages or [])


class Event(_Model):
    """Link `link` goes up or down at `t_s`."""

    t_s: float = Field(ge=0)
    link: int = Field(ge=0)
    up: bool


class RouteChange(_Model):
    """From `t_s` on, node `node` sends traffic for `dst` over link `link` (index into [[links]], in the
    direction leaving `node`); leave out `link` to remove the route."""

    t_s: float = Field(ge=0)
    node: int = Field(ge=0)
    dst: int = Field(ge=0)
    link: int | None = Field(default=None, ge=0)


MAX_SAMPLES = 10_000_000
"""The most samples one time series of a run may hold (duration_s / sample_every_s)."""

MAX_NAME_CHARS = 200
"""The longest scenario name (a label in tables and file listings)."""


def safe_dir_name(label: str) -> str:
    """A directory name for a label: letters, digits, `.`, `_` and `-` kept (Unicode letters too),
    every other run of characters one `-`, no leading dot or dash, at most 80 characters. A label is
    never a path: "../../tmp/x" gives "tmp-x"."""
    import re
    import unicodedata

    s = re.sub(r"[^\w.-]+", "-", unicodedata.normalize("NFC", label)).strip("-.")
    s = re.sub(r"\.{2,}", ".", s)[:80].strip("-.")
    return s or "scenario"


class Scenario(_Model):
    """A simulation scenario."""

    name: str = Field(default="scenario", min_length=1, max_length=MAX_NAME_CHARS)
    """A label: results go to a directory named after it (`dir_name`), never to a path it spells."""
    duration_s: float = Field(gt=0, le=1e6)
    seed: int = Field(default=1, ge=0)
    sample_every_s: float = Field(default=0.1, gt=0)
    link_sample_every_s: float = Field(default=0.1, ge=0)
    app_delay_every: int = Field(default=0, ge=0)
    """TCP flows record the application-perceived delay (first send to in-order delivery) of every
    N-th segment into `Results.app_delay` (0: none)."""
    nodes: int | None = Field(default=None, ge=2)
    topology: Chain | Dumbbell | TwoPath | LeoPath | ConstellationTopology | None = Field(
        default=None, discriminator="kind"
    )
    links: list[Link] = Field(default_factory=list)
    flows: list[Flow] = Field(min_length=1)
    events: list[Event] = Field(default_factory=list)
    routes: list[RouteChange] = Field(default_factory=list)
    satguard: Satguard | None = None
    linkguardian: LinkGuardian | None = None
    mpep: Mpep | None = None
    tambur: Tambur | None = None
    liquid: Liquid | None = None
    capture: Capture | None = None
    tcp: Tcp | None = None
    startcp: Startcp | None = None
    leotp: Leotp | None = None
    emu: Emu = Emu()

    @field_validator("name")
    @classmethod
    def _printable(cls, v: str) -> str:
        bad = next((c for c in v if not c.isprintable()), None)
        if bad is not None:
            raise ValueError(f"a name is a one-line label: it holds the unprintable character {bad!r}")
        return v

    @model_validator(mode="after")
    def _bounded_output(self) -> "Scenario":
        # A run's sample series are bounded so that a typo (1e-9 for 1e-1) is an error, not a hang.
        for field in ("sample_every_s", "link_sample_every_s"):
            every = getattr(self, field)
            if every > 0 and self.duration_s / every > MAX_SAMPLES:
                raise ValueError(
                    f"{field} = {every:g} gives {self.duration_s / every:.3g} samples over duration_s = "
                    f"{self.duration_s:g}; a run records at most {MAX_SAMPLES:.0e} per series (raise {field})"
                )
        return self

    @property
    def dir_name(self) -> str:
        """The directory name results of this scenario go under (see `safe_dir_name`)."""
        return safe_dir_name(self.name)

    @model_validator(mode="after")
    def _shape(self) -> "Scenario":
        if self.satguard is not None and self.linkguardian is not None:
            raise ValueError("give [satguard] or [linkguardian], not both: each is a whole per-hop scheme")
        if self.mpep is not None and (
            self.satguard is not None or self.linkguardian is not None or self.tambur is not None
        ):
            raise ValueError("give [mpep] alone: it runs instead of [satguard], [linkguardian] and [tambur]")
        if self.mpep is not None and not isinstance(self.topology, ConstellationTopology):
            raise ValueError('[mpep] needs a constellation topology ([topology] kind = "constellation")')
        if self.tambur is not None and (self.satguard is not None or self.linkguardian is not None):
            raise ValueError("[tambur] runs instead of [satguard] or [linkguardian], not with them")
        others = [n for n in ("satguard", "linkguardian", "mpep", "tambur") if getattr(self, n) is not None]
        if self.liquid is not None and others:
            raise ValueError(f"[liquid] runs instead of [{others[0]}], not with it (one scheme at a time)")
        if self.topology is not None and self.links:
            raise ValueError("give either [topology] or [[links]], not both")
        if self.topology is None and not self.links:
            raise ValueError("needs a [topology] or at least one [[links]]")
        t = self.topology
        if isinstance(t, LeoPath | ConstellationTopology) and (self.events or self.routes):
            raise ValueError(f"events and routes are not allowed on a {t.kind} topology (the orbits drive the links)")
        if isinstance(t, TwoPath) and self.routes:
            raise ValueError("routes are not allowed on a two-path topology (it switches paths itself)")
        if isinstance(t, TwoPath) and t.interruption_ms >= t.switch_every_s * 1e3:
            raise ValueError(
                f"topology.interruption_ms = {t.interruption_ms} must be shorter than switch_every_s "
                f"({t.switch_every_s} s)"
            )
        names = self.node_names()
        flow_ends = []
        for i, f in enumerate(self.flows):
            ends = [self._node_index(getattr(f, end), names, f"flows[{i}].{end}") for end in ("src", "dst")]
            if ends[0] == ends[1]:
                raise ValueError(f"flows[{i}]: src and dst are the same node ({f.src})")
            if isinstance(t, LeoPath) and set(ends) != {0, 1}:
                raise ValueError(f"flows[{i}]: on a leo-path topology flows run between its two ends")
            flow_ends.append((ends[0], ends[1]))
        links = self.resolved_links()
        if not isinstance(t, LeoPath | ConstellationTopology):
            self._check_connected(names, flow_ends, links)
        n_links = len(links)
        for i, e in enumerate(self.events):
            if e.link >= n_links:
                raise ValueError(f"events[{i}].link = {e.link} is not a link index (0..{n_links - 1})")
        for i, r in enumerate(self.routes):
            for end in ("node", "dst"):
                if getattr(r, end) >= len(names):
                    raise ValueError(f"routes[{i}].{end} = {getattr(r, end)} is not a node (0..{len(names) - 1})")
            if r.link is not None and (r.link >= n_links or r.node not in (links[r.link].a, links[r.link].b)):
                raise ValueError(f"routes[{i}].link = {r.link} is not a link index with an end at node {r.node}")
        if self.capture is not None and not isinstance(t, LeoPath | ConstellationTopology):
            # Satellites are known only once the orbits are computed: those names are checked in to_core.
            self._capture_core(names)
        return self

    def _check_connected(self, names: list[str], flow_ends: list[tuple[int, int]], links: list[Link]) -> None:
        """Every flow's ends (node numbers) are joined by links (a flow with no path would run and report
        100 % loss)."""
        adj: dict[int, set[int]] = {}
        for lk in links:
            adj.setdefault(lk.a, set()).add(lk.b)
            adj.setdefault(lk.b, set()).add(lk.a)
        for i, (src, dst) in enumerate(flow_ends):
            seen, todo = {src}, [src]
            while todo:
                for n in adj.get(todo.pop(), ()):
                    if n not in seen:
                        seen.add(n)
                        todo.append(n)
            if dst not in seen:
                why = "it has no link at all" if dst not in adj else f"no chain of links reaches it from {names[src]}"
                raise ValueError(
                    f"flows[{i}]: no route from {names[src]} (node {src}) to {names[dst]} (node {dst}): {why}; "
                    f"add a [[links]] entry joining them"
                )

    def _capture_core(self, names: list[str]) -> dict[str, Any] | None:
        """The capture with node names resolved to numbers (ValueError naming the field if one is not)."""
        c = self.capture
        if c is None:
            return None
        nodes = [self._node_index(n, names, f"capture.nodes[{i}]") for i, n in enumerate(c.nodes)]
        return {"nodes": nodes, "max_packets": c.max_packets, "snaplen": c.snaplen}

    def _capture_for(self, names: list[str]) -> dict[str, Any] | None:
        try:
            return self._capture_core(names)
        except ValueError as e:
            raise LeoguardError(f"invalid scenario: {e}") from None

    @staticmethod
    def _node_index(end: int | str, names: list[str], field: str) -> int:
        if isinstance(end, int):
            if not 0 <= end < len(names):
                raise ValueError(f"{field} = {end} is not a node (0..{len(names) - 1})")
            return end
        if end in names:
            return names.index(end)
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise ValueError(f"{field} = '{end}' is not a node name (known: {shown})")

    def node_names(self) -> list[str]:
        """Names of the nodes flows may use, in node order (a constellation's satellites follow them)."""
        t = self.topology
        if isinstance(t, LeoPath):
            return [t.a, t.b]
        if isinstance(t, ConstellationTopology):
            return t.node_names()
        if isinstance(t, Dumbbell):
            return ["left", "right", *(f"s{i}" for i in range(t.pairs)), *(f"r{i}" for i in range(t.pairs))]
        if isinstance(t, TwoPath):
            return ["src", "dst", "via0", "via1"]
        return [f"n{i}" for i in range(self.node_count())]

    def node_count(self) -> int:
        """Nodes in the resolved topology (a leo-path's count is known only after its timeline)."""
        t = self.topology
        if isinstance(t, LeoPath | ConstellationTopology):
            raise LeoguardError(f"a {t.kind} topology's node count comes from the constellation")
        if isinstance(t, Chain):
            return t.hops + 1
        if isinstance(t, Dumbbell):
            return 2 + 2 * t.pairs
        if isinstance(t, TwoPath):
            return 4
        return self.nodes if self.nodes is not None else 1 + max(max(lk.a, lk.b) for lk in self.links)

    def resolved_links(self) -> list[Link]:
        """The explicit link list (a chain, dumbbell or two-path expanded)."""
        t = self.topology
        if isinstance(t, LeoPath | ConstellationTopology):
            return []
        if t is None:
            return list(self.links)
        if isinstance(t, Dumbbell):
            q = {"queue_bytes": t.queue_bytes, "queue_packets": t.queue_packets}
            out = [Link(a=0, b=1, rate_mbps=t.bottleneck_mbps, delay_ms=t.bottleneck_delay_ms, loss=t.loss, **q)]
            d = t.access_delay_ms
            for i in range(t.pairs):
                di = d[i] if isinstance(d, list) else d
                out.append(Link(a=2 + i, b=0, rate_mbps=t.access_mbps, delay_ms=di, **q))
                out.append(Link(a=1, b=2 + t.pairs + i, rate_mbps=t.access_mbps, delay_ms=di, **q))
            return out
        if isinstance(t, TwoPath):
            q = {"queue_bytes": t.queue_bytes, "queue_packets": t.queue_packets}
            out = []
            for k, p in enumerate(t.paths):
                half = p.delay_ms / 2
                out.append(Link(a=0, b=2 + k, rate_mbps=p.rate_mbps, delay_ms=half, loss=p.loss, **q))
                out.append(Link(a=2 + k, b=1, rate_mbps=p.rate_mbps, delay_ms=half, **q))
            return out
        return [
            Link(
                a=i,
                b=i + 1,
                rate_mbps=t.rate_schedule.mean_mbps() if t.rate_schedule and t.scheduled(i) else t.rate_mbps,
                delay_ms=t.delay_ms,
                queue_bytes=t.queue_bytes,
                queue_packets=t.queue_packets,
                loss=t.loss if (t.loss_on == "all" or i == 0) else None,
                rate_schedule=t.rate_schedule if t.scheduled(i) else None,
            )
            for i in range(t.hops)
        ]

    def resolved_events(self) -> list[Event]:
        """Scheduled link state changes (a two-path topology's interruptions at its switches added)."""
        t = self.topology
        if not isinstance(t, TwoPath) or t.interruption_ms == 0:
            return list(self.events)
        out = list(self.events)
        k = 1
        while k * t.switch_every_s < self.duration_s:
            at = k * t.switch_every_s
            for link in range(4):
                out.append(Event(t_s=at, link=link, up=False))
                out.append(Event(t_s=at + t.interruption_ms / 1e3, link=link, up=True))
            k += 1
        return sorted(out, key=lambda e: e.t_s)

    def resolved_routes(self) -> list[RouteChange]:
        """Scheduled route changes (a two-path topology's switching expanded)."""
        t = self.topology
        if not isinstance(t, TwoPath):
            return list(self.routes)
        out = []
        k = 0
        while k * t.switch_every_s < self.duration_s:
            path = k % 2
            at = k * t.switch_every_s
            out.append(RouteChange(t_s=at, node=0, dst=1, link=2 * path))
            out.append(RouteChange(t_s=at, node=1, dst=0, link=2 * path + 1))
            k += 1
        return out

    def _flows_core(self) -> list[dict[str, Any]]:
        names = self.node_names()
        out = []
        for i, f in enumerate(self.flows):
            d = f.model_dump(exclude_none=True)
            if f.kind == "web":
                d["pages"] = f.page_list()
            else:
                for k in ("http", "corpus_seed", "pages", "think_s"):
                    d.pop(k, None)
            d.pop("stack", None)  # the emulator's choice; the simulator always runs leoguard's TCP
            d["src"] = self._node_index(f.src, names, f"flows[{i}].src")
            d["dst"] = self._node_index(f.dst, names, f"flows[{i}].dst")
            if f.rate_mbps is not None:
                d["rate_bps"] = round(f.rate_mbps * 1e6)
            if f.kind == "webrtc":
                d["bitrate_bps"] = round(f.bitrate_mbps * 1e6)
            d["tc"] = _core.TC_DELAY_SENSITIVE if f.delay_sensitive else 0  # DSCP EF, as on the wire
            out.append(d)
        return out

    def _base_core(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s,
            "seed": self.seed,
            "sample_every_s": self.sample_every_s,
            "link_sample_every_s": self.link_sample_every_s,
            "app_delay_every": self.app_delay_every,
            "flows": self._flows_core(),
            "links": [],
            "events": [],
            "routes": [],
            "satguard": self.satguard.model_dump() if self.satguard is not None else None,
            "linkguardian": self.linkguardian.model_dump() if self.linkguardian is not None else None,
            "mpep": self.mpep.model_dump(exclude_none=True) if self.mpep is not None else None,
            "tambur": self.tambur.model_dump(exclude_none=True) if self.tambur is not None else None,
            "liquid": self.liquid.model_dump(exclude_none=True) if self.liquid is not None else None,
            "tcp": self.tcp.model_dump(exclude_none=True) if self.tcp is not None else None,
            "startcp": self.startcp.core() if self.startcp is not None else None,
            "leotp": self.leotp.core() if self.leotp is not None else None,
        }

    def _leo_core(self, loss: Any) -> dict[str, Any]:
        t = self.topology
        assert isinstance(t, LeoPath)
        c, tl = _leo_timeline(t, self.duration_s, self.seed)
        sat_names = c.satellites()["sat"].to_list()
        index = {name: i for i, name in enumerate(sat_names)}
        steps = tl.steps
        sats = [[index[n] for n in p[1:-1]] for p in steps["path"].to_list()]
        access, gsl, profile = _access_and_gsl_loss(t, loss(t.gsl_loss), c.epoch_unix_s)
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
        if access is not None:
            from leoguard import access as access_mod

            leo["access"] = {**access_mod.apply(access, leo, self.seed, c.epoch_unix_s), "profile": profile}
        # The simulator numbers satellites in order of first appearance on the path.
        order = list(dict.fromkeys(s for p in sats for s in p))
        names = [t.a, t.b, *(sat_names[s] for s in order)]
        return {
            **self._base_core(),
            "nodes": 2 + len(order),
            "leo": leo,
            "path_summary": tl.summary(),
            "node_names": names,
            "capture": self._capture_for(names),
        }

    def _constellation_core(self, loss: Any) -> dict[str, Any]:
        from leoguard.orbit import Constellation, parse_interruption
        from leoguard.places import place

        t = self.topology
        assert isinstance(t, ConstellationTopology)
        c = Constellation.preset(t.constellation, epoch=t.epoch)
        places = t.places()
        ground_names = [p.name for p in places]
        hosts = []
        for i, h in enumerate(t.hosts):
            g = h.ground if h.ground in ground_names else place(h.ground).name
            if g not in ground_names:
                # Listed under another spelling ("New York" for New York City): match by position.
                q = place(h.ground)
                g = next((p.name for p in places if (p.lat_deg, p.lon_deg) == (q.lat_deg, q.lon_deg)), g)
            if g not in ground_names:
                raise LeoguardError(f"topology.hosts[{i}].ground = '{h.ground}' is not one of the ground places")
            hosts.append(
                {"name": h.name, "ground": ground_names.index(g), "rate_bps": round(h.rate_mbps * 1e6),
                 "delay_ms": h.delay_ms}
            )  # fmt: skip
        access, gsl, _ = _access_and_gsl_loss(t, loss(t.gsl_loss), c.epoch_unix_s)
        terminals = []
        if access is not None:
            from leoguard.access import for_terminal

            terminals = [
                for_terminal(access, g, self.duration_s, t.step_s, self.seed, c.epoch_unix_s)
                for g, p in enumerate(places)
                if p.role == "terminal"
            ]
        topo = {
            "object": c._core,
            "grounds": [p.as_node() for p in places],
            "hosts": hosts,
            "step_s": t.step_s,
            "min_elevation_deg": t.min_elevation_deg,
            "policy": t.policy,
            "period_s": None,
            "phase_s": None,
            "criterion": t.slot_criterion,
            "interruption": parse_interruption(t.interruption),
            "seed": self.seed,
            "gsl_rate_bps": round(t.gsl_rate_mbps * 1e6),
            "isl_rate_bps": round(t.isl_rate_mbps * 1e6),
            "gsl_loss": gsl,
            "isl_loss": loss(t.isl_loss),
        }
        if t.queue_bytes is not None:
            topo["queue_bytes"] = t.queue_bytes
        if t.gsl_downlink_rate_mbps is not None:
            topo["gsl_downlink_rate_bps"] = round(t.gsl_downlink_rate_mbps * 1e6)
        if t.gsl_pass is not None:
            topo["gsl_pass"] = t.gsl_pass.core()
        if terminals:
            topo["access"] = terminals
        sat_names = c.satellites()["sat"].to_list()
        names = ground_names + [h["name"] for h in hosts] + sat_names
        return {
            **self._base_core(),
            "nodes": len(names),
            "constellation": topo,
            "node_names": names,
            "capture": self._capture_for(names),
        }

    def to_core(self, base_dir: Path | None = None) -> dict[str, Any]:
        """The dict the native simulator takes (trace files read relative to `base_dir`)."""

        def loss(x: Loss | None) -> dict[str, Any] | None:
            if x is None:
                return None
            d = x.model_dump(exclude_none=True)
            if x.trace is not None:
                d["csv_text"] = read_user_text((base_dir or Path.cwd()) / x.trace, "loss trace")
            return d

        if isinstance(self.topology, LeoPath):
            return self._leo_core(loss)
        if isinstance(self.topology, ConstellationTopology):
            return self._constellation_core(loss)
        links = []
        for lk in self.resolved_links():
            d = {"a": lk.a, "b": lk.b, "rate_bps": round(lk.rate_mbps * 1e6), "delay_ms": lk.delay_ms}
            if lk.queue_bytes is not None:
                d["queue_bytes"] = lk.queue_bytes
            if lk.queue_packets is not None:
                d["queue_packets"] = lk.queue_packets
            d["loss"], d["loss_reverse"] = loss(lk.loss), loss(lk.loss_reverse)
            if lk.rate_schedule is not None:
                d["rate_schedule"] = lk.rate_schedule.core()
            links.append(d)
        return {
            **self._base_core(),
            "nodes": self.node_count(),
            "links": links,
            "events": [e.model_dump() for e in self.resolved_events()],
            "routes": [r.model_dump() for r in self.resolved_routes()],
            "node_names": self.node_names(),
            "capture": self._capture_for(self.node_names()),
        }


def _boundary_offset(epoch_unix_s: float) -> int:
    """The measured trace's lossy boundary second is the one that holds the 15 s handover epoch."""
    from leoguard.access import boundary_phase_s

    return int(boundary_phase_s(epoch_unix_s))


def _access_and_gsl_loss(
    t: LeoPath | ConstellationTopology, gsl: dict[str, Any] | None, epoch_unix_s: float
) -> tuple[Any, dict[str, Any] | None, dict[str, Any] | None]:
    """A Starlink topology's access (its profile's fields filled in), its ground links' loss (a profile
    brings its fitted loss; giving gsl_loss too is an error) with the cycle phased by the epoch, and the
    profile's record."""
    access, profile_loss, profile = t.access.resolved() if t.access is not None else (None, None, None)
    if profile_loss is not None:
        if gsl is not None:
            raise LeoguardError(
                f"topology.gsl_loss: the access profile '{profile['name'] if profile else ''}' brings its own "
                "fitted loss; remove gsl_loss or the profile"
            )
        gsl = dict(profile_loss)
    if gsl is not None and gsl["model"] == "starlink" and "boundary_offset_s" not in gsl:
        gsl["boundary_offset_s"] = _boundary_offset(epoch_unix_s)
    if gsl is not None and gsl["model"] == "cycle_profile" and gsl.get("phase_s") is None:
        from leoguard.access import boundary_phase_s

        gsl["phase_s"] = boundary_phase_s(epoch_unix_s)
    return access, gsl, profile


def _leo_timeline(t: LeoPath, duration_s: float, seed: int) -> tuple[Any, Any]:
    from leoguard.orbit import Constellation

    c = Constellation.preset(t.constellation, epoch=t.epoch)
    tl = c.path_timeline(
        t.a, t.b, duration=duration_s, step=t.step_s, policy=t.policy, min_elevation=t.min_elevation_deg,
        slot_criterion=t.slot_criterion, interruption=t.interruption, seed=seed,
    )  # fmt: skip
    return c, tl


def _explain(e: ValidationError, source: str) -> LeoguardError:
    lines = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        # Pydantic quotes some inputs in its message (a union's tag): control characters there would
        # break the one-line error, so they are written as escapes.
        msg = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], err["msg"].removeprefix("Value error, "))
        got = f" (got {shown(err['input'])})" if "input" in err and not isinstance(err["input"], dict) else ""
        lines.append(f"{loc}: {msg}{got}" if loc else f"{msg}{got}")
    return LeoguardError(f"invalid scenario {source}: " + "; ".join(lines))


def load_scenario(path: str | Path, **overrides: Any) -> Scenario:
    """Reads and validates a TOML scenario; `overrides` replace top-level fields (e.g. seed=3)."""
    p = Path(path)
    text = read_user_text(p, "scenario")
    try:
        data = tomllib.loads(text)
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
