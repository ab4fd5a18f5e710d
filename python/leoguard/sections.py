"""The optional sections of a scenario: the per-hop and end-to-end schemes (`[satguard]`,
`[linkguardian]`, `[mpep]`, `[tambur]`, `[liquid]`), `[capture]` and the emulator's `[emu]`; and the
base model every scenario model shares (unknown fields are errors). `leoguard.scenario` re-exports
them; the split keeps each file to one responsibility."""

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from leoguard.errors import LeoguardError, shown

INT_RANGE = (-(2**63), 2**64 - 1)
"""What an integer field may hold before its own bounds: a 64-bit value (the Rust core's widest)."""


def _allows_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    return any(_allows_bool(a) for a in get_args(annotation))


def _huge_int(v: Any) -> int | None:
    """The first integer in `v` (lists searched; tables are models that check their own) outside
    INT_RANGE, or None."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if not INT_RANGE[0] <= v <= INT_RANGE[1] else None
    if isinstance(v, list | tuple):
        return next((h for x in v if (h := _huge_int(x)) is not None), None)
    return None


class _Model(BaseModel):
    """Unknown fields, NaN and infinity are errors; so are true/false where a number belongs (TOML's
    `duration_s = true` is not 1 s) and integers too large for a 64-bit field (named, not an
    OverflowError from the core)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key, v in data.items():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if isinstance(v, bool) and field is not None and not _allows_bool(field.annotation):
                raise ValueError(f"{key} = {str(v).lower()}: expected a number or text, not a boolean")
            huge = _huge_int(v)
            if huge is not None:
                raise ValueError(f"{key}: {shown(huge)} is out of range (integers must lie in [-2^63, 2^64 - 1])")
        return data


class Satguard(_Model):
    """SATGUARD on every node of the satellite network (see docs/satguard.md). Only flows marked
    `delay_sensitive` are protected unless `process_all` (partial traffic processing off). Each
    technique can be switched off for ablation: `migration` (handover-aware buffer migration, §3.2),
    `beam_timers` (per-beam loss timers on user downlinks, §3.3; off: one fixed `timeout_ms` timer) and
    `reorder` (the ground-side FSeq reorder buffer, §3.4). A hop resends a lost packet until
    `retry_budget_ms` has passed since it first sent it (default: `reorder_max_hold_ms`, as long as the
    exit may wait for it) or it has resent it `max_retries` times; what it gives up on, the exit is
    told not to wait for."""

    buffer_bytes: int = Field(default=4_000_000, gt=0)
    max_retries: int = Field(default=255, ge=0, le=255)
    retry_budget_ms: float | None = Field(default=None, gt=0, le=60_000)
    timeout_ms: float = Field(default=20.0, gt=0)
    process_all: bool = False
    migration: bool = True
    beam_timers: bool = True
    beam_guard_ms: float = Field(default=0.5, ge=0)
    reorder: bool = True
    reorder_initial_hold_ms: float = Field(default=20.0, gt=0)
    reorder_min_hold_ms: float = Field(default=1.0, gt=0)
    reorder_max_hold_ms: float = Field(default=200.0, gt=0)
    commit_grace_ms: float = Field(default=50.0, ge=0)
    dedup_window: int = Field(default=16_384, ge=1, lt=32_768)

    @model_validator(mode="after")
    def _holds(self) -> "Satguard":
        lo, init, hi = self.reorder_min_hold_ms, self.reorder_initial_hold_ms, self.reorder_max_hold_ms
        if not lo <= init <= hi:
            raise ValueError(f"reorder holds must satisfy min <= initial <= max, got {lo} <= {init} <= {hi} (ms)")
        return self


class LinkGuardian(_Model):
    """LinkGuardian (the SATGUARD paper's "LinkGuard" baseline) on every node of the satellite network:
    link-local retransmission designed for datacenter links, with no handover awareness. Only flows
    marked `delay_sensitive` are protected unless `process_all`. On shared user links it uses one
    fixed timer: `fixed_timeout_ms`, or by default twice the longest slant range's delay + 0.5 ms."""

    ordered: bool = True
    process_all: bool = False
    fixed_timeout_ms: float | None = Field(default=None, gt=0)


class Tcp(_Model):
    """The simulator's TCP loss recovery (docs/tcp.md) for bulk and fixed-size flows: `recovery` picks
    the base, "linux" (RACK-TLP with the adaptive reordering window, DSACK, undo, F-RTO, PRR, growth only
    while cwnd-limited: kernel 5.x/6.x defaults) or "legacy" (the earlier model: DupThresh, no probes,
    no undo); each mechanism can then be switched on or off by name (`hystart`: CUBIC's early slow-start
    exit, on in both). On the emulator, flows on the
    kernel's TCP ignore this section; flows on leoguard's own (`stack = "leoguard"`) take it."""

    recovery: Literal["linux", "legacy"] = "linux"
    rack: bool | None = None
    tlp: bool | None = None
    dsack: bool | None = None
    undo: bool | None = None
    frto: bool | None = None
    prr: bool | None = None
    cwnd_limited: bool | None = None
    quickack: bool | None = None
    hystart: bool | None = None


class Mpep(_Model):
    """M-PEP (the SATGUARD paper's split-TCP baseline, see docs/mpep.md): every TCP flow is split at
    proxies on the ground nodes its hosts hang off and on the ingress satellites of its ground nodes;
    on a handover the satellite proxy's state migrates over the ISLs and both of its connections
    restart in slow start. Constellation topologies only. `buffer_bytes`: each proxy's buffer (default:
    the ground-link rate x 100 ms); `state_overhead_bytes`: connection state shipped per migration
    besides the buffered data; `gateway_satellites`: also proxy on ground stations' ingress satellites.
    Web connections are split the same way (both directions; the SYN terminates at the first proxy);
    UDP (cbr) packets are relayed, held while a satellite proxy migrates, in at most
    `udp_buffer_bytes` per flow (default: the proxy buffer; beyond it they are dropped and counted)."""

    buffer_bytes: int | None = Field(default=None, ge=2896, le=1 << 32)
    state_overhead_bytes: int = Field(default=4096, ge=0, le=1 << 32)
    gateway_satellites: bool = True
    udp_buffer_bytes: int | None = Field(default=None, ge=0, le=1 << 32)


class Tambur(_Model):
    """Tambur over fixed time slots at the two ends of TCP flows (all, or those in `flows`): the
    SATGUARD paper's Tambur baseline for TCP traffic (docs/tambur.md). Runs instead of [satguard] or
    [linkguardian]."""

    tau: int = Field(default=3, ge=1, le=30)
    u_fraction: float = Field(default=1 / 3, ge=0, le=1)
    parity_ratio: float = Field(default=0.5, ge=0, le=4)
    loss_memory_s: float = Field(default=2.0, gt=0)
    slot_ms: float = Field(default=1000 / 30, ge=1, le=1000)
    flows: list[int] | None = None


class Liquid(_Model):
    """The liquid data FEC tunnel (RaptorQ, RFC 6330) between the two end nodes of TCP flows (all, or
    those in `flows`), coding both directions (docs/liquid.md). Runs instead of any other scheme."""

    symbol_size: int = Field(default=1280, ge=16, le=8192)
    block_ms: float = Field(default=5.0, gt=0, le=1000)
    idle_ms: float = Field(default=1.0, gt=0, le=1000)
    repair_ratio: float = Field(default=0.10, ge=0, le=4)
    adaptive: bool = False
    adaptive_target: float = Field(default=1e-3, ge=1e-9, lt=0.5)
    abandon_ms: float = Field(default=1000.0, gt=0, le=60_000)
    in_order: bool = False
    max_block_packets: int = Field(default=1024, ge=1, le=8192)
    feedback_delay_ms: float = Field(default=2.0, gt=0, le=60_000)
    feedback_interval_ms: float = Field(default=20.0, gt=0, le=60_000)
    feedback_retry_ms: float = Field(default=100.0, gt=0, le=60_000)
    flows: list[int] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _times(self) -> "Liquid":
        if self.idle_ms > self.block_ms:
            raise ValueError(f"idle_ms = {self.idle_ms} must be at most block_ms = {self.block_ms}")
        if self.abandon_ms <= self.block_ms:
            raise ValueError(f"abandon_ms = {self.abandon_ms} must exceed block_ms = {self.block_ms}")
        return self


class Capture(_Model):
    """A packet capture: every packet put on a link leaving one of `nodes` or arriving at one of them
    over a link, as IPv6 packets in a pcap file (`Results.capture`, `capture.pcap`) that tshark and
    Wireshark open. Nodes are numbers or names, as flow ends; a leo-path or constellation scenario may
    also name its satellites. At most `max_packets` are recorded (the rest are counted); each keeps its
    first `snaplen` bytes."""

    nodes: list[int | str] = Field(min_length=1)
    max_packets: int = Field(default=1_000_000, gt=0)
    snaplen: int = Field(default=128, ge=1, le=65535)


class Emu(_Model):
    """Options only the real-time emulator reads (`leoguard emu run`; docs/emulator.md). The simulator
    ignores them."""

    mtu: int = Field(default=1500, ge=1280, le=2000)
    """MTU of the hosts' TUN devices (IPv6 needs at least 1280)."""
    cpu: int | None = Field(default=None, ge=0)
    """CPU the data plane is pinned to (default: the last one; the hosts' software runs on the rest)."""
    spin_us: int = Field(default=10_000, ge=0, le=10_000)
    """The data plane spins instead of sleeping when its next event is this close. Sleeping on an idle
    virtual CPU costs milliseconds of wake-up latency, so by default it spins (its core is its own)."""
    omit_s: float = Field(default=0.0, ge=0, le=60)
    """iperf3 leaves the first seconds of each tcp flow out of its goodput (-O: slow start excluded)."""
    streams: int = Field(default=1, ge=1, le=128)
    """Parallel TCP streams per tcp flow (iperf3 -P)."""
    ping_interval_ms: float | None = Field(default=None, ge=1, le=10_000)
    """Also ping from each flow's source to its destination at this interval (RTT probes)."""
    pool_packets: int = Field(default=65536, ge=1024, le=4_194_304)
    """Packets the emulated network can hold at once."""
    late_us: int = Field(default=1000, ge=10, le=1_000_000)
    """A delivery later than this against its model time counts as the emulator falling behind."""
    udp_gso_segments: int = Field(default=1, ge=1, le=64)
    """The UDP probe of cbr flows writes this many datagrams at a time as one UDP GSO write
    (UDP_SEGMENT, as QUIC stacks send): with offloads on, the data plane reads them as one super-packet
    and splits it. 1: one datagram per write."""
    rps: bool = True
    """Steer the hosts' kernel receive processing of what the data plane writes to their TUNs to the
    hosts' CPUs (RPS; each steered write costs an inter-processor interrupt). Off: it runs on the data
    plane's CPU, inside its write."""
    offload: bool = True
    """Segmentation offloads on the hosts' TUN devices: the hosts' kernels hand the data plane TCP
    super-packets of up to 64 KB, which it splits into their segments before the first link, and the
    segments of a flow leaving the last link back to back are coalesced into one write (docs/emulator.md,
    "Offloads"). Off: one packet per read and write, as before issue 30."""
    max_packet_hops_per_s: float = Field(default=2.0e6, gt=0)
    """What the data plane can carry (measure with `leoguard bench emu`): a scenario whose bulk flows
    would need more is refused before it starts."""
    tail_s: float = Field(default=1.0, ge=0.2, le=60)
    """Senders stop this long (plus 4 round trips) before the end, so their last bytes and final reports
    cross the network while it still runs."""
    tcpinfo_ms: float | None = Field(default=None, ge=5, le=10_000)
    """Also sample each kernel tcp flow's sender TCP_INFO (sock_diag, as `ss -tin`) at this interval: the
    `tcpinfo` table, `tcpinfo.csv` (emu/tcpinfo.py; `leoguard validate tcp-trace`)."""


#: The learnt StarTCP lead policy shipped with leoguard (`leoguard train startcp` reproduces it).
STARTCP_WEIGHTS = Path(__file__).resolve().parent / "data" / "startcp_policy.json"


class Startcp(_Model):
    """StarTCP (docs/startcp.md) on the TCP flows whose `cc` is "startcp": the receiver's Handover
    Manager detects interruptions (gaps > expected inter-arrival + `gap_threshold_ms`), finds the
    handover phase modulo `period_s` by kernel density (`kde_bandwidth_ms`, `min_events`), and tells
    the sender, which stops sending `lead` before each predicted handover, probes every
    `probe_interval_ms` and resumes on the receiver's recovery notice (or `resume_timeout_ms` after the
    predicted handover). `base_cc` is the controller underneath (BBR, as in the paper). The lead comes
    from `policy`: "heuristic" (drain time of the bytes in flight plus `lead_rttvar_gain` RTT deviations
    and `lead_margin_ms`), "fixed" (`lead_ms`), "scripted" (`leads_ms`, one per handover: the training
    environment's actions) or "learnt" (the actor in `weights`, default the shipped policy)."""

    base_cc: Literal["newreno", "reno", "cubic", "bbr", "satcp", "hybla", "pcc-allegro", "pcc-vivace"] = "bbr"
    period_s: float = Field(default=15.0, gt=0, le=3600)
    gap_threshold_ms: float = Field(default=11.0, gt=0)
    kde_bandwidth_ms: float = Field(default=30.0, gt=0)
    min_events: int = Field(default=2, ge=1, le=1000)
    max_events: int = Field(default=32, ge=1, le=10_000)
    probe_interval_ms: float = Field(default=1.0, gt=0)
    resume_timeout_ms: float = Field(default=300.0, gt=0)
    max_lead_ms: float = Field(default=1000.0, ge=0)
    lead_rttvar_gain: float = Field(default=1.0, ge=0)
    lead_margin_ms: float = Field(default=0.0, ge=0)
    state_interval_ms: float = Field(default=100.0, gt=0)
    state_intervals: int = Field(default=10, ge=1, le=1000)
    policy: Literal["heuristic", "fixed", "scripted", "learnt"] = "heuristic"
    lead_ms: float | None = Field(default=None, ge=0)
    leads_ms: list[float] | None = None
    weights: Path | None = None

    @model_validator(mode="after")
    def _policy(self) -> "Startcp":
        if self.policy == "fixed" and self.lead_ms is None:
            raise ValueError('startcp.policy = "fixed" needs lead_ms')
        if self.policy == "scripted" and not self.leads_ms:
            raise ValueError('startcp.policy = "scripted" needs leads_ms (one lead per handover)')
        if self.leads_ms is not None and any(not (0 <= x < 1e7) for x in self.leads_ms):
            raise ValueError(f"startcp.leads_ms = {self.leads_ms}: every lead must be >= 0 ms")
        if self.weights is not None and self.policy != "learnt":
            raise ValueError('startcp.weights is only read with policy = "learnt"')
        return self

    def core(self) -> dict:
        """The Rust core's `startcp` dict (seconds and counts)."""
        ms = 1e-3
        config = {
            "period": self.period_s,
            "gap_threshold": self.gap_threshold_ms * ms,
            "kde_bandwidth": self.kde_bandwidth_ms * ms,
            "min_events": self.min_events,
            "max_events": self.max_events,
            "probe_interval": self.probe_interval_ms * ms,
            "resume_timeout": self.resume_timeout_ms * ms,
            "max_lead": self.max_lead_ms * ms,
            "lead_rttvar_gain": self.lead_rttvar_gain,
            "lead_margin": self.lead_margin_ms * ms,
            "state_interval": self.state_interval_ms * ms,
            "state_intervals": self.state_intervals,
        }
        out: dict = {"config": config, "base_cc": self.base_cc, "policy": self.policy}
        if self.policy == "fixed":
            out["lead_s"] = (self.lead_ms or 0.0) * ms
        elif self.policy == "scripted":
            out["leads_s"] = [x * ms for x in self.leads_ms or []]
        elif self.policy == "learnt":
            path = self.weights or STARTCP_WEIGHTS
            try:
                out["weights_json"] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise LeoguardError(f"startcp.weights = {path}: cannot read it ({e})") from None
            out["weights_name"] = str(path)
        return out


#: Table II's ablation variants: (in-network retransmission, hop-by-hop congestion control).
LEOTP_VARIANTS: dict[str, tuple[bool, bool]] = {
    "A": (True, True),
    "B": (False, True),
    "C": (True, False),
    "D": (False, False),
}


class Leotp(_Model):
    """LEOTP (docs/leotp.md) for the flows whose `kind` is "leotp": the producer runs at the flow's
    `src`, the consumer at its `dst`, and mid nodes on `mid_nodes` = "all" nodes between the ends,
    "satellites" only (leo-path and constellation topologies), or a seeded random fraction of the
    satellites (the paper's 25 % option: 0.25). `variant` picks Table II's ablation (A: full, B: no
    cache/in-network retransmission, C: no hop-by-hop congestion control, D: neither); `in_network_retx`
    and `hop_cc` set the two switches explicitly (not together with `variant`). `bl_tar_mss` is the mid
    nodes' target backlog (Fig 14 sweeps 5-15); holes are confirmed after `hole_confirm_ms` ("time",
    the authors' code) or `hole_confirm_packets` more packets ("count", the paper's Algorithm 1);
    `paper` switches on every paper variant where code and paper differ."""

    variant: Literal["A", "B", "C", "D"] | None = None
    in_network_retx: bool | None = None
    hop_cc: bool | None = None
    mid_nodes: Literal["all", "satellites"] | float = "all"
    bl_tar_mss: float = Field(default=5.0, gt=0, le=10_000)
    hole_confirm: Literal["time", "count"] = "time"
    hole_confirm_ms: float = Field(default=10.0, gt=0)
    hole_confirm_packets: int = Field(default=5, ge=1, le=1_000_000)
    hole_purge_ms: float = Field(default=200.0, gt=0)
    cache_blocks: int = Field(default=20_000, ge=1, le=10_000_000)
    queue_segments: int = Field(default=128, ge=1, le=32_767)
    min_rtt_window_ms: float = Field(default=10_000.0, gt=0)
    paper: bool = False

    @model_validator(mode="after")
    def _switches(self) -> "Leotp":
        if self.variant is not None and (self.in_network_retx is not None or self.hop_cc is not None):
            raise ValueError("give variant or the switches in_network_retx / hop_cc, not both")
        if isinstance(self.mid_nodes, float) and not 0 < self.mid_nodes <= 1:
            raise ValueError(f"mid_nodes = {self.mid_nodes}: a fraction must be in (0, 1]")
        if self.hole_confirm == "time" and self.hole_confirm_ms >= self.hole_purge_ms:
            raise ValueError(f"hole_confirm_ms = {self.hole_confirm_ms} must be shorter than hole_purge_ms")
        return self

    def core(self) -> dict:
        """The Rust core's `leotp` dict."""
        retx, hop = LEOTP_VARIANTS[self.variant or "A"]
        out = self.model_dump(exclude={"variant"})
        out["in_network_retx"] = retx if self.in_network_retx is None else self.in_network_retx
        out["hop_cc"] = hop if self.hop_cc is None else self.hop_cc
        if self.hole_confirm == "count":
            out.pop("hole_confirm_ms")
        return out
