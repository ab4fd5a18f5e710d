"""The `leoguard` command line: a thin shell over functions that notebooks can call too."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from leoguard.cli_ablation import ablation
from leoguard.cli_common import (
    JsonOpt,
    StoreOpt,
    _emit,
    check_out_file,
    console,
    new_app,
    out_dir_cb,
    run_app,
    store_dir_cb,
    table,
)
from leoguard.cli_realism import cli_starlink
from leoguard.cli_reproduce import reproduce_app
from leoguard.cli_run import print_run
from leoguard.cli_run import run_scenario as run_scenario_file
from leoguard.cli_tcpscript import tcp_script
from leoguard.cli_train import train_app
from leoguard.errors import LeoguardError, make_dir
from leoguard.validate_tcptrace import cli_tcp_trace

app = new_app("leoguard: concealing packet loss in LEO satellite networks.")
constellation_app = new_app("Constellations: presets, parameters, TLE export.")
places_app = new_app("Ground places from the GeoNames gazetteer.")
bench_app = new_app("Benchmarks: print figures, assert nothing.")
results_app = new_app("The result store: runs as Parquet files, a DuckDB catalogue.")
app.add_typer(constellation_app, name="constellation")
app.add_typer(places_app, name="places")
app.add_typer(bench_app, name="bench")
app.add_typer(results_app, name="results")
tunnel_app = new_app("The real liquid-data tunnel (leoguard-tunnel): start and stop an end.")
app.add_typer(tunnel_app, name="tunnel")
emu_app = new_app("The real-time emulator: real Linux hosts (network namespaces) across the emulated network (root).")
app.add_typer(emu_app, name="emu")
validate_app = new_app("Cross-validation of the engines.")
app.add_typer(validate_app, name="validate")
validate_app.command("tcp-trace")(cli_tcp_trace)
validate_app.command("starlink")(cli_starlink)
app.command("ablation")(ablation)
app.add_typer(reproduce_app, name="reproduce")
app.add_typer(train_app, name="train")
app.command("tcp-script")(tcp_script)
TleOpt = Annotated[Path | None, typer.Option("--tle", help="Use satellites from this 3-line TLE file instead.")]


def _show(obj: Any, as_json: bool) -> None:
    """One JSON object for scripts, or rich's rendering for people."""
    if as_json:
        _emit(obj)
    else:
        console.print(obj)


def _constellation(name: str, tle: Path | None, epoch: str | None = None, lat_cut: float | None = None):
    from leoguard.orbit import Constellation

    if tle is not None:
        return Constellation.from_tle(tle, epoch=epoch)
    return Constellation.preset(name, epoch=epoch, cross_plane_max_lat_deg=lat_cut)


@constellation_app.command("list")
def constellation_list(as_json: JsonOpt = False) -> None:
    """List the constellation presets."""
    from leoguard.orbit import PRESETS, Constellation

    rows = [{"name": p, "satellites": len(Constellation.preset(p))} for p in PRESETS]
    if as_json:
        _emit(rows)
        return
    t = table("preset", "satellites")
    for r in rows:
        t.add_row(r["name"], str(r["satellites"]))
    console.print(t)


@constellation_app.command("info")
def constellation_info(
    name: Annotated[
        str | None, typer.Argument(help="Preset name (see `leoguard constellation list`; default starlink-shell1).")
    ] = None,
    tle: TleOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Shells, satellites, ISLs and orbital periods of a constellation."""
    if name is not None and tle is not None:
        raise LeoguardError(f"give a preset name ({name}) or --tle {tle}, not both: --tle replaces the preset")
    info = _constellation(name or "starlink-shell1", tle).info()
    if as_json:
        _emit(info)
        return
    console.print(
        f"[bold]{info['name']}[/]: {info['satellites']} satellites, {info['isls']} ISLs, epoch {info['epoch']}"
    )
    t = table(
        "shell", "kind", "altitude\nkm", "incl.\ndeg", "planes\nx sats", "phasing", "period\ns", "ISLs", wrap=(0,)
    )
    for s in info["shells"]:
        grid = f"{s.get('planes', '-')} x {s.get('sats_per_plane', '-')}" if "planes" in s else str(s["satellites"])
        t.add_row(
            s["name"], s["kind"], f"{s['altitude_km']:.1f}", f"{s['inclination_deg']:.2f}", grid,
            s.get("phasing", "-"), f"{s['period_s']:.1f}", "yes" if s["isls"] else "no",
        )  # fmt: skip
    console.print(t)


@constellation_app.command("export-tle")
def constellation_export_tle(
    name: Annotated[str, typer.Argument(help="Preset name.")], out: Annotated[Path, typer.Argument(help="Output file.")]
) -> None:
    """Write a preset's satellites as a 3-line TLE file (circular orbits), e.g. for other tools."""
    p = _constellation(name, None).to_tle(out)
    console.print(f"wrote {p}")


@app.command("path")
def path(
    a: Annotated[str, typer.Argument(help='Source: a city name ("New York", "London, CA") or "lat,lon".')],
    b: Annotated[str, typer.Argument(help="Destination, same forms.")],
    duration: Annotated[float, typer.Option(help="Seconds to cover.")] = 200.0,
    step: Annotated[float, typer.Option(help="Routing step, seconds.")] = 0.1,
    constellation: Annotated[
        str | None, typer.Option("--constellation", "-c", help="Preset name (default starlink-shell1).")
    ] = None,
    tle: TleOpt = None,
    policy: Annotated[str, typer.Option(help="global-schedule, nearest or best-path.")] = "global-schedule",
    slot_criterion: Annotated[
        str, typer.Option(help="Global schedule's pick per slot: highest-elevation, nearest or path-aware.")
    ] = "highest-elevation",
    min_elevation: Annotated[float, typer.Option(help="Minimum elevation of ground links, degrees.")] = 25.0,
    interruption: Annotated[
        str, typer.Option(help="Handover interruption: none, fixed:SECONDS, uniform[:LO:HI], 3owd.")
    ] = "uniform",
    handover_period: Annotated[float | None, typer.Option(help="Global-schedule slot, seconds (default 15).")] = None,
    handover_phase: Annotated[
        float | None, typer.Option(help="First epoch, seconds after t=0 (default: UTC seconds 12/27/42/57).")
    ] = None,
    isl_max_lat: Annotated[float | None, typer.Option(help="Cut cross-plane ISLs above this |latitude|.")] = None,
    epoch: Annotated[str | None, typer.Option(help="UTC time of t=0, ISO 8601 (default 2026-01-01T00:00:00Z).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for interruption draws.")] = 1,
    out: Annotated[Path, typer.Option(help="Directory for Parquet files and the PNG.", callback=out_dir_cb)] = Path(
        "out/path"
    ),
    plot: Annotated[bool, typer.Option(help="Write path.png (RTT with handovers + world map).")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Path timeline between two places: RTT over time, handovers and outages; writes Parquet and a PNG."""
    if constellation is not None and tle is not None:
        raise LeoguardError(f"give --constellation {constellation} or --tle {tle}, not both: --tle replaces the preset")
    c = _constellation(constellation or "starlink-shell1", tle, epoch, isl_max_lat)
    tl = c.path_timeline(
        a, b, duration=duration, step=step, policy=policy, min_elevation=min_elevation, interruption=interruption,
        handover_period=handover_period, handover_phase=handover_phase, slot_criterion=slot_criterion, seed=seed,
    )  # fmt: skip
    files = tl.write_parquet(out)
    if plot:
        from leoguard.plot import plot_path

        fig = plot_path(tl, c)
        png = out / "path.png"
        fig.savefig(png, dpi=110)
        files["png"] = png
    summ = tl.summary()
    summ["files"] = {k: str(v) for k, v in files.items()}
    if as_json:
        _emit(summ)
        return
    r = summ["rtt_ms"]
    console.print(
        f"[bold]{summ['a']} -> {summ['b']}[/] over {summ['constellation']} ({summ['policy']}"
        f"{', ' + summ['slot_criterion'] if summ['policy'] == 'global-schedule' else ''}), {summ['steps']} steps"
    )
    t = table("metric", "value", wrap=(1,))
    t.add_row(
        "great-circle distance",
        f"{summ['great_circle_km']:.0f} km (RTT bound {2 * summ['great_circle_km'] / 299792.458 * 1e3:.1f} ms)",
    )
    t.add_row("RTT min / median / p99 / max", f"{r['min']} / {r['median']} / {r['p99']} / {r['max']} ms")
    t.add_row("hops min / median / max", f"{summ['hops']['min']} / {summ['hops']['median']} / {summ['hops']['max']}")
    t.add_row("handovers", f"{summ['handovers']} (interruptions {summ['interruption_s']:.3f} s in total)")
    t.add_row("outages (no path)", f"{summ['outages']} totalling {summ['outage_s']:.1f} s")
    console.print(t)
    for k, v in files.items():
        console.print(f"  {k}: {v}")


@app.command("beams")
def beams(
    places: Annotated[list[str], typer.Argument(help="Places (city names or lat,lon).")],
    t: Annotated[float, typer.Option(help="Seconds after the epoch.")] = 0.0,
    resolution: Annotated[int, typer.Option(help="H3 resolution of the cell grid.")] = 5,
    min_elevation: Annotated[float, typer.Option(help="Minimum elevation, degrees.")] = 25.0,
    constellation: Annotated[str, typer.Option("--constellation", "-c")] = "starlink-shell1",
    as_json: JsonOpt = False,
) -> None:
    """Each place's H3 cell, serving beam, cell-to-satellite distance and beam timeout 2d/c."""
    df = _constellation(constellation, None).beams(places, t, resolution=resolution, min_elevation=min_elevation)
    if as_json:
        _emit(df.to_dicts())
        return
    t = table("place", "H3 cell", "serving satellite", "distance\nkm", "timeout\nms", wrap=(0, 2))
    for r in df.iter_rows(named=True):
        dist, tmo = r["distance_km"], r["timeout_ms"]
        t.add_row(
            r["node"], r["cell"], r["sat"] or "- (none in view)", "-" if dist is None else f"{dist:.1f}",
            "-" if tmo is None else f"{tmo:.3f}",
        )  # fmt: skip
    console.print(t)


@places_app.command("top")
def places_top(n: Annotated[int, typer.Argument(help="How many.")] = 10, as_json: JsonOpt = False) -> None:
    """The N most populous cities of the gazetteer."""
    from leoguard.places import top_cities

    rows = [p.__dict__ for p in top_cities(n)]
    if as_json:
        _emit(rows)
        return
    t = table("#", "city", "country", "population", "lat", "lon", wrap=(1,))
    for i, r in enumerate(rows, 1):
        t.add_row(str(i), r["name"], r["country"], f"{r['population']:,}", f"{r['lat_deg']:.3f}", f"{r['lon_deg']:.3f}")
    console.print(t)


@places_app.command("find")
def places_find(
    name: Annotated[str, typer.Argument(help='City name, "City, CC" or "lat,lon".')], as_json: JsonOpt = False
) -> None:
    """Resolve a place the way every command does."""
    from leoguard.places import place

    p = place(name)
    if as_json:
        _emit(p.__dict__)
        return
    t = table("place", "country", "population", "lat", "lon", "role", wrap=(0,))
    pop = f"{p.population:,}" if p.population is not None else "-"
    t.add_row(p.name, p.country or "-", pop, f"{p.lat_deg:.4f}", f"{p.lon_deg:.4f}", p.role)
    console.print(t)


@bench_app.command("constellation")
def bench_constellation(
    cities: Annotated[int, typer.Option(help="Top-N cities as ground stations.")] = 100,
    duration: Annotated[float, typer.Option(help="Simulated seconds.")] = 200.0,
    step: Annotated[float, typer.Option(help="Snapshot step, seconds.")] = 0.1,
    threads: Annotated[int, typer.Option(help="Worker threads, each taking a run of snapshots.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Routes between all ground-station pairs at every snapshot (Starlink shell 1; one thread unless
    --threads)."""
    from leoguard.bench import constellation_bench

    if threads <= 0:
        raise LeoguardError(f"invalid --threads = {threads}: must be > 0")
    r = constellation_bench(cities, duration, step, threads=threads)
    _show(r, as_json)


@bench_app.command("fec")
def bench_fec(
    blocks: Annotated[int, typer.Option(help="Source blocks per pass (200 packets of 1500 B each).")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Per-core encode and decode throughput of the liquid tunnel's RaptorQ state machines at
    1280-byte symbols (Gbit/s of packet data; decoding with 1 source symbol in 20 lost)."""
    from leoguard.bench import fec_bench

    if blocks <= 0:
        raise LeoguardError(f"invalid --blocks = {blocks}: must be > 0")
    _show(fec_bench(blocks), as_json)


@bench_app.command("startup")
def bench_startup(
    runs: Annotated[int, typer.Option(help="Fresh processes to time.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """`leoguard run` of the 1 s chain (scenarios/bench-chain.toml --duration 1 --json) as a whole
    process: wall seconds over fresh interpreters, and what its imports cost (target 0.25 s)."""
    from leoguard.bench import startup_bench

    if runs <= 0:
        raise LeoguardError(f"invalid --runs = {runs}: must be > 0")
    _show(startup_bench(runs), as_json)


@app.command("run")
def run_scenario(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file (see scenarios/).")],
    out: Annotated[
        Path | None, typer.Option(help="Directory for Parquet results (default out/<name>).", callback=out_dir_cb)
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    duration: Annotated[float | None, typer.Option(help="Override duration_s.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a scenario on the packet simulator; writes Parquet results and prints a per-flow summary."""
    rc = run_scenario_file(scenario, out, seed, duration, as_json)
    if rc:
        raise typer.Exit(rc)


@results_app.command("list")
def results_list(store: StoreOpt = Path("results"), as_json: JsonOpt = False) -> None:
    """The stored runs, newest first."""
    from leoguard.store import ResultStore

    with ResultStore(store, read_only=True) as st:
        df = st.runs()
    if as_json:
        _emit(df.with_columns(df["created"].cast(str)).to_dicts() if not df.is_empty() else [])
        return
    t = table("run_id", "scenario", "seed", "scheme", "pair", "done", "created", wrap=(1, 3, 4))
    for r in df.iter_rows(named=True):
        created = str(r["created"])[5:16]  # MM-DD HH:MM; --json gives the full time and the code version
        t.add_row(r["run_id"], str(r["scenario"]), str(r["seed"]), r["scheme"] or "-", r["pair"] or "-",
                  "yes" if r["complete"] else "no", created)  # fmt: skip
    console.print(t)


@results_app.command("query")
def results_query(
    sql: Annotated[str, typer.Argument(help="SQL over the catalogue table `runs` (and read_parquet on run files).")],
    store: StoreOpt = Path("results"),
    as_json: JsonOpt = False,
) -> None:
    """Runs SQL over the catalogue and prints the rows."""
    from leoguard.store import ResultStore

    with ResultStore(store, read_only=True) as st:
        df = st.query(sql)
    if as_json:
        _emit(df.to_dicts())
    else:
        console.print(df)


@bench_app.command("sim")
def bench_sim(
    only: Annotated[
        str | None, typer.Option(help="Run one scenario: bench-chain, starlink-nyc-lon-1g or starlink-constellation.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Simulator speed: (a) CUBIC over a 9-hop 100 Mbit/s chain for 5 s, (b) BBR New York - London over
    Starlink shell 1 at 1 Gbit/s for 60 s with the Starlink loss model, (c) the whole Starlink shell 1
    with 5 cities and 4 flows for 30 s."""
    from leoguard.bench import sim_bench

    r = sim_bench(only)
    _show(r, as_json)


RunDirOpt = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Pid, log and stats files (default $LEOGUARD_RUN_DIR or /run/leoguard)."),
]


@tunnel_app.command("up")
def tunnel_up(
    config: Annotated[Path, typer.Argument(help="Tunnel TOML file (see docs/tunnel.md).")],
    run_dir: RunDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate CONFIG and start leoguard-tunnel in the background (needs root for the TUN device)."""
    from leoguard.tunnel import up

    h = up(config, run_dir)
    _show(
        {"name": h.name, "pid": h.pid, "pid_file": str(h.pid_file), "log": str(h.log), "stats": str(h.stats_file)},
        as_json,
    )


@tunnel_app.command("down")
def tunnel_down(
    name: Annotated[str, typer.Argument(help="Tunnel (TUN device) name from its config.")],
    run_dir: RunDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop tunnel NAME, remove its device and pid file; print its final counters."""
    from leoguard.tunnel import down

    _show(down(name, run_dir) or {"name": name, "stopped": True}, as_json)


@bench_app.command("tunnel")
def bench_tunnel(
    seconds: Annotated[float, typer.Option(help="iperf3 seconds per run.")] = 5.0,
    delay_ms: Annotated[float, typer.Option(help="Relay delay each way, ms.")] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """The real tunnel between network namespaces (root): goodput and CPU per Gbit/s at 0, 1 and 5 % loss,
    coding off and on (same as tools/bench_tunnel.py)."""
    from leoguard.tunnel import tunnel_bench

    _show(tunnel_bench(seconds, None, delay_ms), as_json)


@emu_app.command("run")
def emu_run(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file: the same files `leoguard run` takes.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Directory for Parquet results (default out/<name>-emu).", callback=out_dir_cb),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(help="Also put the run into this result store.", callback=store_dir_cb),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    duration: Annotated[float | None, typer.Option(help="Override duration_s.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a scenario on the real-time emulator: kernel TCP in network namespaces (iperf3 for tcp flows,
    a UDP probe for cbr flows, ping with [emu] ping_interval_ms) across the emulated links. Prints the
    object `leoguard run --json` prints plus `emulator` (timing error, real-time check, drops by cause)."""
    from leoguard.emu import emulate
    from leoguard.scenario import load_scenario

    sc = load_scenario(scenario, seed=seed, duration_s=duration)
    res = emulate(sc, base_dir=scenario.parent)
    files = res.write(out or Path("out") / f"{sc.dir_name}-emu")
    if store is not None:
        from leoguard.store import ResultStore, run_key

        with ResultStore(store) as st:
            st.put(run_key(sc, "emu"), res, scheme="emu")  # type: ignore[arg-type]
    summ = res.summary()
    summ["files"] = {k: str(v) for k, v in files.items()}
    if not res.emulator["realtime_ok"]:
        Console(stderr=True).print(
            f"[yellow]warning:[/] the emulator fell behind real time (delivery lateness p99 "
            f"{res.emulator['timing_error_us']['p99']} us > {res.emulator['late_threshold_us']} us): "
            "figures are distorted"
        )
    if as_json:
        _emit(summ)
    else:
        print_run(sc, _EmuView(res), summ, files)
        e = summ["emulator"]
        console.print(
            f"emulator: timing error p50/p99/max {e['timing_error_us']['p50']} / {e['timing_error_us']['p99']} / "
            f"{e['timing_error_us']['max']} us, real time {'ok' if e['realtime_ok'] else 'NOT kept'}, drops "
            f"{e['drops']}, unexplained {e['drops_unexplained']}"
        )


class _EmuView:
    """What `print_run` reads, from an emulator run."""

    def __init__(self, res: Any):
        self.simulated_s = res.emulator["elapsed_s"]
        self.wall_s = res.wall_s
        self.packet_hops = res.emulator["packet_hops"]


@validate_app.command("sim-vs-emu")
def validate_sim_vs_emu(
    quick: Annotated[bool, typer.Option("--quick", help="Only the clean CUBIC chain, 6 s (a smoke run).")] = False,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=20, help="Paired seeds per case (1, 2, ... N).")] = 3,
    case: Annotated[
        list[str] | None,
        typer.Option("--case", help="Only the cases whose label contains this (repeatable)."),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Also write the markdown tables to this file.",
            callback=lambda v: check_out_file(v, "--write"),
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the fixed cross-validation set three ways (root): leoguard's TCP model in the simulator, the
    same model on the emulator (stack = "leoguard") and Linux's TCP on the emulator, each case with
    paired seeds. Cases: a 3 x 20 Mbit/s chain with 60 ms RTT at 0, 0.1 and 1 % loss (cubic, bbr,
    reno), a 2 x 50 Mbit/s chain with 80 ms RTT and bursty loss on its first link (Gilbert-Elliott and
    the starlink model; cubic, bbr), the two-path switching scenario, New York - London on a leo-path
    with starlink loss, interruptions, and both, a reordering case (cubic, bbr, reno) and the demo's
    path unprotected, with LinkGuardian, with SATGUARD and with SATGUARD without its exit buffer.
    Prints per metric the median over seeds (spread in brackets) of each engine and whether the
    engines saw the same lossy seconds, then how each engine ranks the schemes (--json: {rows,
    rankings}); flagged: simulator and kernel goodput more than 10 % apart, retransmissions 25 %,
    OWD 15 %."""
    from leoguard.validate import cases as all_cases
    from leoguard.validate import rankings, select, sim_vs_emu, to_markdown

    select(all_cases(quick), case)  # an unknown --case fails before any run
    err = Console(stderr=True)
    rows = sim_vs_emu(
        quick,
        progress=None if as_json else (lambda m: err.print(f"[dim]{m}[/]")),
        seeds=tuple(range(1, seeds + 1)),
        only=case,
    )
    md = to_markdown(rows)
    if write is not None:
        make_dir(write.parent)
        write.write_text(md)
    if as_json:
        _emit({"rows": rows, "rankings": rankings(rows)})
    else:
        console.print(md)


@emu_app.command("leotp-sweep")
def emu_leotp_sweep(
    loss: Annotated[
        list[float] | None, typer.Option("--loss", help="Loss per middle link, % (repeatable; default 0, 0.1, 1).")
    ] = None,
    scheme: Annotated[
        list[str] | None,
        typer.Option(
            "--scheme",
            help="leotp (mid nodes in the data plane, variant A), leotp-e2e (no mid nodes), cubic, bbr "
            "(kernel TCP); repeatable; default leotp, cubic, bbr.",
        ),
    ] = None,
    duration: Annotated[float, typer.Option(help="Seconds per run (LEOTP fetches for one second less).")] = 25.0,
    seed: Annotated[int, typer.Option(help="Seed of the loss draws.")] = 1,
    no_sim: Annotated[bool, typer.Option("--no-sim", help="Leave out the simulator's rows.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """LEOTP's loss sweep (Fig 12's chain: 8 links of 20 Mbit/s and 20 ms, the 6 middle ones lossy) on the
    emulator (root), each row beside the simulator's on the same chain, seed and duration: leotp-serve and
    leotp-fetch in the end hosts, the mid nodes inside the data plane (the simulator's code on the real
    datagrams), kernel CUBIC and BBR through iperf3. A run that does not keep real time is run again (2
    more tries). --json prints the rows {experiment, engine, scheme, variant, loss_pct, throughput_mbps,
    owd_ms, paper_throughput_mbps, retransmissions, realtime_ok, ...}."""
    from leoguard.emu.leotp import emu_loss_sweep

    # Options left out take the function's defaults.
    given: dict[str, Any] = {"losses": tuple(loss or ()), "schemes": tuple(scheme or ())}
    rows = emu_loss_sweep(**{k: v for k, v in given.items() if v}, duration_s=duration, seed=seed, with_sim=not no_sim)
    if as_json:
        _emit(rows)
        return
    t = table("loss %", "engine", "scheme", "variant", "Mbit/s", "paper", "OWD ms\np50", "retx", "real\ntime")
    for r in rows:
        mbps = r["throughput_mbps"]
        t.add_row(
            f"{r['loss_pct']:g}", r["engine"], r["scheme"], r["variant"], "-" if mbps is None else f"{mbps:.2f}",
            "-" if r["paper_throughput_mbps"] is None else f"{r['paper_throughput_mbps']:g}",
            "-" if r["owd_ms"] is None else f"{r['owd_ms']:.1f}", str(r.get("retransmissions", "-")),
            {True: "yes", False: "NO", None: "-"}[r.get("realtime_ok")],
        )  # fmt: skip
    console.print(t)


@emu_app.command("cleanup")
def emu_cleanup(
    all_runs: Annotated[bool, typer.Option("--all", help="Also remove runs whose orchestrator is alive.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove what killed emulator runs left: their network namespaces (TUN devices go with them), the
    processes in them, and their registry entries under /run/leoguard-emu."""
    from leoguard.emu import cleanup

    removed = cleanup(all_runs)
    _show({"removed_namespaces": removed}, as_json)


@bench_app.command("emu")
def bench_emu(
    hops: Annotated[int, typer.Option(help="Hops of the chain.")] = 10,
    rate_mbps: Annotated[float, typer.Option(help="Rate of every link.")] = 2_500.0,
    streams: Annotated[int, typer.Option(help="iperf3 parallel streams (kernel CUBIC).")] = 4,
    seconds: Annotated[float, typer.Option(help="Run length.")] = 8.0,
    scheme: Annotated[str, typer.Option(help="Per-hop scheme on every node: satguard, linkguardian or none.")] = (
        "satguard"
    ),
    offload: Annotated[
        bool, typer.Option("--offload/--no-offload", help="Segmentation offloads on the hosts' TUN devices.")
    ] = True,
    queue_bytes: Annotated[
        int | None, typer.Option(min=1, help="Queue of every link (default: one bandwidth-delay product).")
    ] = None,
    rps: Annotated[
        bool, typer.Option("--rps/--no-rps", help="Steer the hosts' receive processing off the data plane's CPU.")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """The emulator's data plane on its one core: iperf3 (kernel CUBIC, several streams, marked
    delay-sensitive) across a chain with SATGUARD on every node (--scheme); prints gbps, pps, hops,
    timing_error_us, drops_unexplained, packets per TUN read and write, and each CPU's busy share (root)."""
    from leoguard.bench import emu_bench

    if scheme not in ("satguard", "linkguardian", "none"):
        raise LeoguardError(f"invalid --scheme = {scheme}: use satguard, linkguardian or none")
    _show(emu_bench(hops, rate_mbps, streams, seconds, scheme, offload, queue_bytes, rps), as_json)


@app.command("demo")
def demo(
    out: Annotated[Path, typer.Option(help="Output directory.", callback=out_dir_cb)] = Path("out/demo"),
    duration: Annotated[float | None, typer.Option(help="Seconds to simulate (default 90).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the loss draws and handover interruptions.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """The main demo: New York - London over Starlink shell 1 with the starlink loss model, unprotected,
    with LinkGuardian and with SATGUARD; writes demo.png (path map, loss, one-way delay and goodput over
    time) and each run's tables, and prints a summary per scheme."""
    from rich.progress import BarColumn, Progress, TextColumn

    from leoguard.demo import DURATION_S, SCHEMES, run_demo

    err = Console(stderr=True)
    show = not as_json and err.is_terminal
    bar = (
        Progress(
            TextColumn("[bold]{task.description:<13}"), BarColumn(),
            TextColumn("{task.completed:.1f}/{task.total:.1f} s simulated"), console=err, transient=True,
        )
        if show
        else nullcontext()
    )  # fmt: skip
    with bar:
        tasks = {}
        if isinstance(bar, Progress):
            tasks = {k: bar.add_task(v, total=duration or DURATION_S) for k, v in SCHEMES.items()}

        def progress(scheme: str, now_s: float, end_s: float) -> None:
            if isinstance(bar, Progress):
                bar.update(tasks[scheme], completed=now_s)

        d = run_demo(duration or DURATION_S, seed, progress=progress)
        files = d.write(out)
    rep = d.report()
    rep["files"] = {k: str(v) for k, v in files.items()}
    if as_json:
        _emit(rep)
        return
    console.print(
        f"[bold]New York - London over Starlink shell 1[/], starlink loss model, {rep['duration_s']:g} s, "
        f"seed {rep['seed']}: a CUBIC bulk flow and a 1000 packet/s UDP probe from a server behind the "
        "London gateway to a terminal in New York"
    )
    hos = ", ".join(f"{h['t_s']:g} s ({h['node']})" for h in rep["handovers"])
    console.print(f"handovers: {hos or 'none'}")
    from rich import box

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    t.add_column("scheme", min_width=12, no_wrap=True)
    for head in ("endpoint\nloss %", "of it\ncongest.", "network\nloss %", "probe OWD\np50/p99 ms", "TCP\nMbit/s",
                 "TCP\nretx", "TCP\nRTOs", "hop\nretx"):  # fmt: skip
        t.add_column(head)
    for r in rep["rows"]:
        t.add_row(
            r["scheme"], f"{r['endpoint_loss_pct']:.3f}", f"{r['congestion_loss_pct']:.3f}",
            f"{r['network_loss_pct']:.3f}",
            f"{r['owd_p50_ms']:.0f}/{r['owd_p99_ms']:.0f}", f"{r['goodput_mbps']:.1f}",
            str(r["tcp_retransmissions"]), str(r["tcp_rtos"]), str(r["hop_retransmissions"]),
        )  # fmt: skip
    console.print(t)
    console.print(
        "endpoint loss: probe packets that never arrived (of which congestion: their last drop was a queue "
        "overflow, congestion, not link loss); network loss: probe packets the links "
        "dropped (before any recovery); hop retx: the scheme's link-local retransmissions"
    )
    console.print(f"figure: {files['png']}\nresults: {out}")


def _print_version(value: bool) -> None:
    if value:
        from leoguard._core import __version__

        sys.stdout.write(f"leoguard {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print leoguard's version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """leoguard: concealing packet loss in LEO satellite networks."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors print one clear line (and, with --json, an {"error", "field"} object on
    stdout) and exit with status 2."""
    run_app(app, argv)


if __name__ == "__main__":
    main()
