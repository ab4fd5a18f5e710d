"""The liquid tunnel on the emulated path (`[liquid]`, docs/emulator.md): which tcp flows it carries,
its settings as leoguard-tunnel's `[fec]` table, and the real tunnel ends (leoguard-tunnel) started and
stopped in the flows' hosts."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from leoguard.emu.hosts import Lab, v6_addr
from leoguard.scenario import Scenario

TUNNEL_PORT = 7000


def liquid_flows(scenario: Scenario) -> list[int]:
    """The tcp flows `[liquid]` carries (all, or those it lists), as the simulator picks them."""
    if scenario.liquid is None:
        return []
    listed = scenario.liquid.flows
    return [i for i, f in enumerate(scenario.flows) if f.kind == "tcp" and (listed is None or i in listed)]


def tunnel_fec(scenario: Scenario) -> dict[str, Any]:
    """The scenario's `[liquid]` as leoguard-tunnel's `[fec]` table (docs/tunnel.md)."""
    q = scenario.liquid
    assert q is not None
    return {
        "mode": "liquid", "symbol_size": q.symbol_size, "block_time_ms": q.block_ms, "idle_time_ms": q.idle_ms,
        "repair_ratio": q.repair_ratio, "adaptive": q.adaptive, "adaptive_target": q.adaptive_target,
        "abandon_after_ms": q.abandon_ms, "in_order": q.in_order, "max_block_packets": q.max_block_packets,
        "feedback_delay_ms": q.feedback_delay_ms, "feedback_interval_ms": q.feedback_interval_ms,
        "feedback_retry_ms": q.feedback_retry_ms,
    }  # fmt: skip


def start_tunnels(
    scenario: Scenario,
    flows: list[dict[str, Any]],
    lab: Lab,
    wdir: Path,
    stack: contextlib.ExitStack,
    tunnelled: list[int],
) -> dict[int, str]:
    """The real liquid tunnel (leoguard-tunnel) between the ends of each tunnelled flow: one pair per
    pair of hosts, its RaptorQ-coded, encrypted datagrams crossing the emulated links. Returns each
    tunnelled flow's destination address inside the tunnel."""
    from leoguard.tunnel import up

    if not tunnelled:
        return {}
    fec = tunnel_fec(scenario)
    key = wdir / "tunnel.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    pairs: dict[tuple[int, int], int] = {}
    inner: dict[int, str] = {}
    for i in tunnelled:
        a, b = flows[i]["src"], flows[i]["dst"]
        k = pairs.setdefault((min(a, b), max(a, b)), len(pairs))
        inner[i] = f"10.203.{k}.{2 if b > a else 1}"
    for (a, b), k in pairs.items():
        for me, peer, host in ((a, b, 1), (b, a, 2)):
            cfg = wdir / f"tunnel{k}-{me}.toml"
            lines = [
                'name = "lgq"', f'address = "10.203.{k}.{host}/30"', "mtu = 1400",
                f'local = "[{v6_addr(me)}]:{TUNNEL_PORT}"', f'peer = "[{v6_addr(peer)}]:{TUNNEL_PORT}"',
                f'key_file = "{key}"', "stats_interval_ms = 500", "[fec]",
            ] + [f"{x} = {json.dumps(v)}" for x, v in fec.items()]  # fmt: skip
            cfg.write_text("\n".join(lines) + "\n")
            h = up(cfg, run_dir=wdir / f"tunnel{k}-{me}", netns=lab.hosts[me].netns)
            lab.add_child(h.pid)
            # Connections into the tunnel are born with the host's algorithm too (hosts.py).
            lab.route_cc(me, f"10.203.{k}.0/30", "lgq")
    return inner


def stop_tunnels(lab: Lab, wdir: Path, inner: dict[int, str]) -> dict[str, Any]:
    """Stops every tunnel end; returns each end's exit counters (leoguard-tunnel's exit line) by
    `tunnel<pair>-<node>`."""
    from leoguard.tunnel import down

    out: dict[str, Any] = {}
    for d in sorted(wdir.glob("tunnel*-*")):
        if d.is_dir():
            out[d.name] = down("lgq", run_dir=d, netns=lab.hosts[int(d.name.split("-")[1])].netns) or {}
    return out
