"""The kernel's own traces against the model, open loop (`leoguard validate tcp-trace`, docs/tcp-trace.md).

From an emulator run of a kernel TCP flow (iperf3) with a capture at the flow's source node and the
sender's TCP_INFO samples (`[emu] tcpinfo_ms`), leoguard-proto's TCP sender is driven with exactly the
ACKs the kernel received, at the times it received them, and the first point where the model would send
something else than the kernel sent is reported with the packets around it (`_core.tcp_trace_replay`).
Beside it, the closed loop: the kernel run's goodput, retransmissions and mean window against the
simulator's run of the same scenario."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from leoguard.cli_common import JsonOpt, _emit, check_out_dir, console
from leoguard.errors import LeoguardError

BASE_PORT = 5201  # the emulator's iperf3 port of flow 0 (leoguard.emu.run.BASE_PORT)
MODEL_CC = {"cubic": "cubic", "reno": "newreno", "newreno": "newreno", "bbr": "bbr"}
"""The kernel's controllers and the model's of the same name."""


def _scenario_of_run(d: Path) -> Any:
    import json

    from leoguard.scenario import from_dict

    run = d / "run.json"
    if not run.is_file():
        raise LeoguardError(f"missing file {run}: not an emulator results directory (`leoguard emu run --out`)")
    try:
        info = json.loads(run.read_text())
    except ValueError as e:
        raise LeoguardError(f"invalid {run}: not JSON ({e})") from None
    if info.get("engine") != "emu" or not isinstance(info.get("scenario"), dict):
        raise LeoguardError(f"invalid {run}: not the results of an emulator run (engine {info.get('engine')!r})")
    return from_dict(info["scenario"], str(run))


def _check_pacing(pacing: str) -> None:
    if pacing not in ("auto", "on", "off"):
        raise LeoguardError(f"invalid --pacing {pacing}: use auto, on or off")


def kernel_paced(results: Path, f: Any, flow: int) -> bool:
    """Whether Linux paced the kernel flow `f` (flows[`flow`]) of an emulator run. Linux paces a socket whose
    `sk_pacing_status` is SK_PACING_NEEDED (`tcp_needs_internal_pacing`; no fq here): BBR sets it in
    `bbr_init` and nothing clears it, so a flow is paced when it runs BBR or was born with BBR, i.e. its
    source host's connections were (iperf3 sets TCP_CONGESTION only after connect()). Runs before
    the emulator recorded `host_cc` (run.json) were all born with BBR, the namespaces' default."""
    import json

    info = json.loads((results / "run.json").read_text())
    host_cc = info.get("host_cc")
    if f.cc == "bbr" or not isinstance(host_cc, dict):
        return True
    names = info.get("node_names") or []
    src = f.src if isinstance(f.src, int) else names.index(f.src) if f.src in names else None
    if src is None:
        raise LeoguardError(f"invalid {results / 'run.json'}: flows[{flow}].src {f.src!r} is not among its node_names")
    return host_cc.get(str(src)) == "bbr"


def _check_flow(scenario: Any, flow: int, where: str) -> Any:
    from leoguard.emu.transport import flow_stack

    if not 0 <= flow < len(scenario.flows):
        raise LeoguardError(f"invalid --flow {flow}: {where} has flows 0..{len(scenario.flows) - 1}")
    f = scenario.flows[flow]
    if f.kind != "tcp" or flow_stack(f) != "kernel":
        raise LeoguardError(f"invalid --flow {flow}: flows[{flow}] of {where} is not a kernel tcp flow (iperf3)")
    return f


def record(scenario_path: Path, out: Path, flow: int = 0, tcpinfo_ms: float = 10.0, seed: int | None = None) -> Path:
    """Runs a scenario on the emulator with a capture at `flow`'s source node and TCP_INFO samples every
    `tcpinfo_ms`; writes the results to `out` and returns it."""
    from leoguard.emu.run import emulate
    from leoguard.scenario import load_scenario
    from leoguard.sections import Capture

    sc = load_scenario(scenario_path, seed=seed)
    _check_flow(sc, flow, str(scenario_path))
    src = sc.flows[flow].src
    emu = sc.emu.model_copy(update={"tcpinfo_ms": tcpinfo_ms})
    nodes = list(sc.capture.nodes) if sc.capture is not None else []
    capture = Capture(nodes=[*nodes, src] if src not in nodes else nodes)
    sc = sc.model_copy(update={"emu": emu, "capture": capture})
    res = emulate(sc, base_dir=scenario_path.parent)
    res.write(out)
    return out


def _connection(pcap_bytes: bytes, pcap_path: Path, flow: int, port: int, src: Any) -> int:
    """The data connection of `flow` in the capture (to `port`, the most data): its source port."""
    from leoguard.pcap import tcp_segments

    data: dict[int, int] = {}
    for s in tcp_segments(pcap_bytes):
        if s.dport == port and s.payload:
            data[s.sport] = data.get(s.sport, 0) + s.payload
    if not data:
        raise LeoguardError(
            f"capture {pcap_path} does not hold flows[{flow}] (no TCP data towards port {port}): capture the "
            f"flow's source node ([capture] nodes = [{src!r}])"
        )
    return max(data, key=lambda k: data[k])


def analyse(
    results: Path,
    flow: int = 0,
    slack_ms: float = 10.0,
    tol_segments: float = 2.0,
    tol_frac: float = 0.1,
    context: int = 4,
    with_sim: bool = True,
    pacing: str = "auto",
    switches: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """The report of an emulator results directory (capture.pcap, tcpinfo.csv, run.json, flows.parquet).
    `pacing`: "on" (model sends due when Linux's pacing lets them out), "off", or "auto" (on when the
    kernel flow was paced: see `kernel_paced`)."""
    import polars as pl

    from leoguard import _core

    results = Path(results)
    if not results.is_dir():
        raise LeoguardError(f"missing directory {results}: give a scenario file or an emulator results directory")
    sc = _scenario_of_run(results)
    f = _check_flow(sc, flow, str(results / "run.json"))
    _check_pacing(pacing)
    paced = kernel_paced(results, f, flow) if pacing == "auto" else pacing == "on"
    pcap_path, info_path = results / "capture.pcap", results / "tcpinfo.csv"
    for p, how in ((pcap_path, "[capture] at the flow's source node"), (info_path, "[emu] tcpinfo_ms")):
        if not p.is_file():
            raise LeoguardError(f"missing file {p}: the run needs {how} (or give the scenario: the command adds both)")
    pcap = pcap_path.read_bytes()
    port = BASE_PORT + flow
    try:
        sport = _connection(pcap, pcap_path, flow, port, f.src)
    except LeoguardError as e:
        if str(e).startswith("capture:"):
            raise LeoguardError(f"invalid capture {pcap_path}: {str(e).removeprefix('capture: ')}") from None
        raise
    try:
        info = pl.read_csv(info_path)
    except Exception as e:  # polars raises several kinds for a file that is not CSV
        raise LeoguardError(f"invalid {info_path}: not a tcpinfo CSV ({str(e).splitlines()[0][:200]})") from None
    need = {"flow", "sport", "t_lo_ns", "t_hi_ns", "cwnd", "in_recovery"}
    if not need <= set(info.columns):
        raise LeoguardError(f"invalid {info_path}: columns {sorted(need - set(info.columns))} missing")
    info = info.filter((pl.col("flow") == flow) & (pl.col("sport") == sport) & pl.col("cwnd").is_not_null())
    if not len(info):
        raise LeoguardError(
            f"{info_path} holds no TCP_INFO reading of flows[{flow}]'s connection (port {sport} -> {port})"
        )
    samples = {
        "t_lo_ns": [max(0, x) for x in info["t_lo_ns"].to_list()],
        "t_hi_ns": [max(0, x) for x in info["t_hi_ns"].to_list()],
        "cwnd": info["cwnd"].to_list(),
        "in_recovery": [bool(x) for x in info["in_recovery"].to_list()],
    }
    cc = MODEL_CC[f.cc]
    try:
        rep = _core.tcp_trace_replay(
            pcap,
            sport,
            port,
            samples,
            cc,
            slack_ms,
            tol_segments,
            tol_frac,
            pacing=paced,
            switches=sorted((switches or {}).items()),
        )
    except _core.LeoguardError as e:
        raise LeoguardError(str(e).replace("capture:", f"invalid capture {pcap_path}:", 1)) from None
    pk = rep.pop("packets")
    n_pk = len(pk["t_ns"])
    divs = rep["divergences"]
    first = divs[0] if divs else None
    if first is not None and first.get("row") is not None:
        r = first["row"]
        first["packets"] = [_packet(pk, i, i == r) for i in range(max(0, r - context), min(n_pk, r + context + 1))]
    if first is not None:
        first["kernel_tcpinfo"] = _around(info, first["t_ns"])
    series = pl.DataFrame(rep.pop("series"))
    compared = series.filter(pl.col("compared")) if len(series) else series
    mss = rep["connection"]["mss"]
    cwnd = {
        "samples": len(series),
        "compared": len(compared),
        "within_tolerance": int(compared["within"].sum()) if len(compared) else 0,
        "kernel_mean": round(float(info["cwnd"].mean() or 0.0), 2),
        "model_mean": round(float(((series["model_cwnd_lo"] + series["model_cwnd_hi"]) / 2).mean() or 0.0), 2)
        if len(series)
        else None,
        "tolerance": f"max({tol_segments:g} segments, {tol_frac * 100:g} %) of the kernel's cwnd, outside recovery",
    }
    kind_counts: dict[str, int] = {}
    for d in divs:
        kind_counts[d["kind"]] = kind_counts.get(d["kind"], 0) + 1
    out: dict[str, Any] = {
        "results": str(results),
        "flow": flow,
        "cc": f.cc,
        "model_cc": cc,
        "connection": {**rep["connection"], "sport": sport, "dport": port},
        "packets": n_pk,
        "kernel_sends": rep["kernel_sends"],
        "matched_before_first": rep["matched_before_first"],
        "lag_ms": {
            "p50": _r3(rep["lag_ms_p50"]),
            "p99": _r3(rep["lag_ms_p99"]),
            "max": _r3(rep["max_lag_ms"]),
            "max_at_s": round(rep["max_lag_at_ns"] / 1e9, 6),
        },
        "slack_ms": slack_ms,
        "pacing": paced,
        "model_switches": switches or {},
        "first_divergence": first,
        "verdict": _verdict(first, rep, n_pk),
        "divergence_count": rep["divergence_count"],
        "divergences_by_kind": kind_counts,
        "later_divergences": divs[1:6],
        "cwnd": cwnd,
        "closed_loop": _closed_loop(results, sc, flow, info, rep, mss, with_sim),
    }
    return out


def _around(info: Any, t_ns: int) -> list[dict[str, Any]]:
    """The kernel's TCP_INFO readings just before and after `t_ns`."""
    import polars as pl

    keep = ["t_ns", "ca_state", "cwnd", "ssthresh", "unacked", "sacked", "lost", "retrans_out", "rtt_ms"]
    keep += ["pacing_rate_bps", "notsent", "rwnd_limited_ms", "sndbuf_limited_ms"]
    cols = [c for c in keep if c in info.columns]
    before = info.filter(pl.col("t_ns") <= t_ns).tail(1).select(cols).to_dicts()
    after = info.filter(pl.col("t_ns") > t_ns).head(1).select(cols).to_dicts()
    return before + after


def _r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _verdict(first: dict[str, Any] | None, rep: dict[str, Any], n_pk: int) -> str:
    if first is None:
        return f"none up to {n_pk} packets ({rep['kernel_sends']} kernel sends matched)"
    return f"{first['kind']} at {first['t_ns'] / 1e9:.6f} s after {rep['matched_before_first']} matched sends"


def _packet(pk: dict[str, list], i: int, here: bool) -> dict[str, Any]:
    data = pk["dir"][i] == "data"
    row: dict[str, Any] = {"row": i, "t_ms": round(pk["t_ns"][i] / 1e6, 3), "dir": pk["dir"][i], "here": here}
    if data:
        row.update(seq=pk["seq"][i], end=pk["end"][i], retransmission=pk["retransmission"][i])
    else:
        row.update(ack=pk["ack"][i], sack=[list(b) for b in pk["sack"][i]], rwnd=pk["rwnd"][i])
    return row


def _closed_loop(
    results: Path, sc: Any, flow: int, info: Any, rep: dict[str, Any], mss: int, with_sim: bool
) -> dict[str, Any]:
    """The kernel run beside the simulator's run of the same scenario: goodput, retransmissions, mean cwnd."""
    import polars as pl

    flows_p = results / "flows.parquet"
    kernel: dict[str, Any] = {"mean_cwnd_segments": round(float(info["cwnd"].mean() or 0.0), 2)}
    if flows_p.is_file():
        row = pl.read_parquet(flows_p).filter(pl.col("flow") == flow).to_dicts()
        if row:
            kernel["goodput_mbps"] = round(row[0]["goodput_bps"] / 1e6, 3)
            kernel["retransmissions"] = row[0]["retransmissions"]
    kernel["retransmissions_in_capture"] = rep["kernel_retransmissions"]
    out: dict[str, Any] = {"kernel": kernel, "model": None}
    if with_sim:
        from leoguard.simulate import simulate

        res = simulate(sc.model_copy(update={"capture": None}), base_dir=results)
        r = res.flows.filter(pl.col("flow") == flow).to_dicts()[0]
        ser = res.series.filter(pl.col("flow") == flow) if len(res.series) else res.series
        # The kernel's mean over its sending time (samples exist while the connection is established).
        t_end = int(info["t_ns"].max()) if "t_ns" in info.columns else None
        if len(ser) and t_end is not None:
            ser = ser.filter(pl.col("t_ns") <= t_end)
        mean_cwnd = float(ser["cwnd_bytes"].mean() or 0.0) / mss if len(ser) else None
        out["model"] = {
            "goodput_mbps": round(r["goodput_bps"] / 1e6, 3),
            "retransmissions": r["retransmissions"],
            "mean_cwnd_segments": round(mean_cwnd, 2) if mean_cwnd is not None else None,
        }
    return out


def tcp_trace(
    source: Path,
    flow: int = 0,
    out: Path | None = None,
    tcpinfo_ms: float = 10.0,
    seed: int | None = None,
    progress: Callable[[str], None] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """`leoguard validate tcp-trace`: a scenario file (run on the emulator first, results in `out`) or an
    emulator results directory, analysed (`analyse`'s keywords in `kw`)."""
    source = Path(source)
    _check_pacing(kw.get("pacing", "auto"))  # before an emulator run, not after it
    if source.is_dir():
        return analyse(source, flow, **kw)
    if not source.exists():
        raise LeoguardError(f"missing file {source}: give a scenario file or an emulator results directory")
    from leoguard.scenario import load_scenario

    name = load_scenario(source).name
    out = out or Path("out") / f"{name}-tcptrace"
    if progress is not None:
        progress(f"running {source} on the emulator (capture + TCP_INFO every {tcpinfo_ms:g} ms) -> {out}")
    record(source, out, flow, tcpinfo_ms, seed)
    return analyse(out, flow, **kw)


def render(rep: dict[str, Any]) -> str:
    """The report as text for a terminal (80 columns)."""
    c = rep["connection"]
    lines = [
        f"flow {rep['flow']} ({rep['cc']} in the kernel, model {rep['model_cc']}): port {c['sport']} -> "
        f"{c['dport']}, MSS {c['mss']}, {c['data_bytes']} bytes, {rep['packets']} packets",
        f"first divergence: {rep['verdict']}",
    ]
    d = rep["first_divergence"]
    if d is not None:
        k, m = d["kernel"], d["model"]
        kern = "-" if k is None else f"{'retx' if k[2] else 'new'} [{k[0]}, {k[1]})"
        mod = "-" if m is None else f"{'retx' if m[2] else 'new'} [{m[0]}, {m[1]}) due {m[4] / 1e6:.3f} ms"
        lines.append(f"  kernel: {kern}   model: {mod}")
        kc = f"kernel cwnd {d['kernel_cwnd']}, " if d["kernel_cwnd"] is not None else ""
        lines.append(
            f"  {kc}model cwnd {d['model_cwnd_segments']:.1f} seg, in flight "
            f"{d['model_in_flight_segments']:.1f} seg, state {d['model_state']}"
        )
        for k in d.get("kernel_tcpinfo", []):
            st = {0: "Open", 1: "Disorder", 2: "CWR", 3: "Recovery", 4: "Loss"}.get(k.get("ca_state"), "state ?")
            lines.append(
                f"  TCP_INFO at {k['t_ns'] / 1e6:.3f} ms: cwnd {k['cwnd']}, ssthresh {k.get('ssthresh')}, "
                f"unacked {k.get('unacked')}, {st}, notsent {k.get('notsent')}, sndbuf-limited "
                f"{k.get('sndbuf_limited_ms')} ms, rwnd-limited {k.get('rwnd_limited_ms')} ms"
            )
        for p in d.get("packets", []):
            mark = ">" if p["here"] else " "
            if p["dir"] == "data":
                what = f"-> data [{p['seq']}, {p['end']})" + (" retx" if p["retransmission"] else "")
            else:
                sack = " sack " + " ".join(f"[{a},{b})" for a, b in p["sack"]) if p["sack"] else ""
                what = f"<- ack {p['ack']}{sack}"
            lines.append(f" {mark} {p['t_ms']:>11.3f} ms {what}")
    if d is not None:
        later = ", ".join(f"{x['kind']} at {x['t_ns'] / 1e9:.3f} s" for x in rep["later_divergences"][:3])
        lines.append(f"next (indicative only: the model's state has departed): {later or '-'}")
    lag = rep["lag_ms"]
    lines.append(
        f"timing of the {rep['matched_before_first']} matched sends (kernel - model's "
        f"{'paced ' if rep['pacing'] else ''}due time): p50 "
        f"{lag['p50']} ms, p99 {lag['p99']} ms, max {lag['max']} ms at {lag['max_at_s']} s"
    )
    w = rep["cwnd"]
    lines.append(
        f"cwnd: {w['within_tolerance']}/{w['compared']} compared samples within {w['tolerance']}; mean kernel "
        f"{w['kernel_mean']}, model (open loop) {w['model_mean']} segments"
    )
    cl = rep["closed_loop"]
    kk, mm = cl["kernel"], cl["model"] or {}
    lines.append("closed loop      kernel (emulator)   model (simulator)")
    for key, label in (("goodput_mbps", "goodput Mbit/s"), ("retransmissions", "retransmissions"),
                       ("mean_cwnd_segments", "mean cwnd seg")):  # fmt: skip
        lines.append(f"  {label:<16} {kk.get(key, '-')!s:>16}   {mm.get(key, '-')!s:>16}")
    return "\n".join(lines)


def cli_tcp_trace(
    source: Annotated[
        Path,
        typer.Argument(
            help="A scenario TOML file (run on the emulator with a capture and TCP_INFO samples first) or an "
            "emulator results directory holding capture.pcap and tcpinfo.csv.",
        ),
    ],
    flow: Annotated[int, typer.Option("--flow", help="The kernel tcp flow (its index in the scenario).")] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where a scenario's emulator run goes (default out/<name>-tcptrace)."),
    ] = None,
    tcpinfo_ms: Annotated[
        float, typer.Option("--tcpinfo-ms", min=5, max=1000, help="TCP_INFO sampling interval of a scenario's run.")
    ] = 10.0,
    seed: Annotated[int | None, typer.Option("--seed", help="Override the scenario's seed.")] = None,
    slack_ms: Annotated[
        float,
        typer.Option(
            "--slack-ms",
            min=0,
            help="How long a model send may wait for the kernel's before it counts as one the kernel did not make.",
        ),
    ] = 10.0,
    tol_segments: Annotated[
        float, typer.Option("--tol-segments", min=0, help="cwnd tolerance: at least this many segments.")
    ] = 2.0,
    tol_frac: Annotated[
        float, typer.Option("--tol-frac", min=0, help="cwnd tolerance: at least this share of the kernel's cwnd.")
    ] = 0.1,
    context: Annotated[int, typer.Option("--context", min=0, max=200, help="Packets shown either side.")] = 4,
    no_sim: Annotated[bool, typer.Option("--no-sim", help="Leave out the simulator's closed-loop run.")] = False,
    pacing: Annotated[
        str,
        typer.Option(
            "--pacing",
            metavar="auto|on|off",
            help="on: a model send is due when Linux's pacing would let it out; off: when decided; auto: on "
            "when the kernel flow was paced (BBR, or a socket born with BBR).",
        ),
    ] = "auto",
    switch: Annotated[
        list[str] | None,
        typer.Option(
            "--model-switch",
            metavar="NAME=on|off",
            help="Set one of the model's loss-recovery switches (rack, tlp, dsack, undo, frto, prr, cwnd_limited, "
            "quickack, hystart), to test what moves the divergence; repeatable.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay a kernel TCP flow's own trace against leoguard's TCP model, open loop: the model gets exactly
    the ACKs the kernel sender received, at the times it received them, and the first point where it would
    send something else (another segment, a retransmission the kernel did not make or the reverse, a cwnd
    beyond max(2 segments, 10 %) of TCP_INFO's) is printed with the packets around it; beside it, the
    kernel run's goodput, retransmissions and mean cwnd against the simulator's run of the same scenario
    (docs/tcp-trace.md). A scenario runs on the emulator first (root)."""
    from rich.console import Console

    check_out_dir(out)
    switches = {}
    for x in switch or []:
        name, sep, val = x.partition("=")
        if not sep or val not in ("on", "off"):
            raise LeoguardError(f"invalid --model-switch {x}: use NAME=on or NAME=off")
        switches[name] = val == "on"
    err = Console(stderr=True)
    rep = tcp_trace(
        source, flow, out, tcpinfo_ms, seed, progress=None if as_json else (lambda m: err.print(f"[dim]{m}[/]")),
        slack_ms=slack_ms, tol_segments=tol_segments, tol_frac=tol_frac, context=context, with_sim=not no_sim,
        pacing=pacing, switches=switches,
    )  # fmt: skip
    if as_json:
        _emit(rep)
    else:
        console.print(render(rep), highlight=False, markup=False)
