"""Hypatia's satellite-network state generator (satgenpy) side by side with `leoguard bench constellation`.

    .venv/bin/python tools/hypatia_bench.py --hypatia-python /tmp/hypatiavenv/bin/python [--leoguard-threads 2]

The workload is `leoguard bench constellation`'s: Starlink shell 1 (leoguard's preset "starlink-shell1":
72 planes x 22 satellites, 550 km, 53 deg, Walker phasing F = 17), +Grid ISLs, the top 100 cities as ground
stations, every ground-station pair routed at every 100 ms step, one thread each (unless
`--leoguard-threads`). leoguard runs its 2000 snapshots (200 s) in a subprocess and reports its wall
time; Hypatia runs `--snapshots` snapshots (each takes tens of seconds) and each call of its generator
is timed on its own. The ratio is Hypatia's median
seconds per snapshot over leoguard's mean.

Hypatia's side follows its paper scripts (paper/satellite_networks_state/main_helper.py and
main_starlink_550.py): ground stations extended by `satgen.extend_ground_stations`, GSL interfaces by
`satgen.generate_simple_gsl_interfaces_info` (one interface per node), `satgen.generate_description`, and
the forwarding state of algorithm "algorithm_free_one_only_over_isls" from
`satgen.dynamic_state.generate_dynamic_state.generate_dynamic_state_at`, the function that
`help_dynamic_state` -> `generate_dynamic_state` calls once per step, chained through `prev_output` as
there, with a 100 ms step. The maximum GSL and ISL lengths are main_starlink_550.py's formulas: GSL
sqrt(940.7 km^2 + 550 km^2) = 1089.7 km (Starlink's 25 deg cone), ISL 2 sqrt((R + 550 km)^2 - (R + 80 km)^2)
with R = 6378.135 km. Only the generator calls are timed: not the imports, reading the inputs or writing
them. satgenpy runs from a subprocess with `--hypatia-python`; nothing of it is part of leoguard.

Two inputs are written here, in Hypatia's formats, rather than by Hypatia's helpers, because those cannot
express leoguard's shell: `generate_tles_from_scratch_manual` only knows half-slot phasing of odd planes
and `generate_plus_grid_isls` links plane 71 to plane 0 at the same slot, a link of about 9,700 km under
Walker F = 17 that Hypatia refuses. So tles.txt holds leoguard's Walker geometry (mean anomaly
360 (s / 22 + 17 p / 1584) deg, RAAN 360 p / 72 deg, e = 1e-7 as Hypatia writes, mean motion from Kepler's
law at 550 km over leoguard's 6371 km sphere, epoch 2026-01-01 like leoguard's default) and isls.txt is
leoguard's +Grid (the seam links plane 71 slot s to plane 0 slot s + 17).

What still differs, and why the ratio is one of tools, not of identical arithmetic:

* Work per snapshot. Hypatia runs Floyd-Warshall over the 1584-satellite ISL graph (networkx/numpy), then
  a next hop from every satellite to every ground station and from every ground station to every other,
  and writes fstate_<t>.txt (the changed entries) and gsl_if_bandwidth_<t>.txt. leoguard runs one
  Dijkstra per source ground station over satellites and ground stations, stopping once its destinations
  are settled, for the 4950 unordered pairs, and writes nothing (it sums reachability, delay and hops).
* Orbits and the Earth. Hypatia propagates the TLEs with SGP4 (pyephem) and places ground stations on
  its reference ellipsoid; leoguard propagates the same elements as pure Kepler orbits (J2 off) over a
  6371 km sphere, with GMST for Earth rotation. Positions differ by kilometres.
* Ground-satellite links. Hypatia keeps a satellite if its slant range is at most 1089.7 km; leoguard
  keeps it if it stands at least 25 deg above the horizon (about 1120 km at 550 km altitude on its sphere).
  Both take any visible satellite (no ground relays), so route choices can still differ at the edges.
* Pairs. Hypatia's state covers ordered pairs (9900 GS-GS entries) and every satellite; leoguard's
  figures cover unordered pairs. The reachable fractions printed for both are a sanity check, not a match.

Hypatia's Python (`--hypatia-python`): satgenpy imports everything its package imports (including its
post-analysis plotting), so it needs all of satgenpy/README.md's list; exputilpy v1.6, which the README
installs from git, is the `exputil` package on PyPI. Created and checked with CPython 3.11:

    python3 -m venv /tmp/hypatiavenv
    nice -n 19 /tmp/hypatiavenv/bin/pip install numpy==2.4.6 astropy==8.0.2 ephem==4.2.1 networkx==3.6.1 \\
        sgp4==2.27 geopy==2.5.0 matplotlib==3.11.2 statsmodels==0.15.0 cartopy==0.26.0 exputil==1.9.2

satgenpy's source comes from `--hypatia-src DIR` (a checkout's satgenpy/ directory) or is extracted with
`git archive` from a clone of https://github.com/snkas/hypatia at `--hypatia-repo` (default: the path of
the mirror this was written against; give yours).

`--leoguard-threads 2` runs leoguard on both cores (its snapshots split between two threads; the figures
are the same). Hypatia's paper scripts can split a run's time range over processes too (main_helper's
`num_threads`); this script times its generator in one process.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parents[1]
DEFAULT_HYPATIA_REPO = Path("/work/.mirror/snkas+hypatia/repo")
DEFAULT_LEOGUARD = REPO / ".venv" / "bin" / "leoguard"

PRESET = "starlink-shell1"
STEP_S = 0.1
LEOGUARD_DURATION_S = 200.0
MIN_ELEVATION_DEG = 25.0
ALGORITHM = "algorithm_free_one_only_over_isls"

# leoguard's Earth (crates/leoguard-orbit/src/geo.rs): the sphere and mu its Kepler orbits use.
LEOGUARD_EARTH_RADIUS_M = 6_371_000.0
LEOGUARD_MU = 3.986_004_418e14
# TLE epoch "26001.00000000" is 2026-01-01 00:00, leoguard's default epoch.
TLE_EPOCH_FIELD = "26001.00000000"

# paper/satellite_networks_state/main_starlink_550.py's constants for the maximum link lengths.
HYPATIA_EARTH_RADIUS_M = 6378135.0
HYPATIA_SATELLITE_CONE_RADIUS_M = 940700.0
HYPATIA_ISL_GRAZING_ALTITUDE_M = 80000.0
HYPATIA_ECCENTRICITY = 0.0000001

# Runs under --hypatia-python: sets up the inputs satgenpy derives itself, then times each snapshot.
DRIVER = r"""
import json
import sys
import time

cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg["satgenpy"])
t_import = time.perf_counter()
import satgen
from satgen.dynamic_state.generate_dynamic_state import generate_dynamic_state_at

d = cfg["network_dir"]
t_setup = time.perf_counter()
satgen.extend_ground_stations(d + "/ground_stations.basic.txt", d + "/ground_stations.txt")
ground_stations = satgen.read_ground_stations_extended(d + "/ground_stations.txt")
tles = satgen.read_tles(d + "/tles.txt")
satellites = tles["satellites"]
satgen.generate_simple_gsl_interfaces_info(
    d + "/gsl_interfaces_info.txt", len(satellites), len(ground_stations), 1, 1, 1, 1
)
satgen.generate_description(d + "/description.txt", cfg["max_gsl_length_m"], cfg["max_isl_length_m"])
list_isls = satgen.read_isls(d + "/isls.txt", len(satellites))
list_gsl_interfaces_info = satgen.read_gsl_interfaces_info(
    d + "/gsl_interfaces_info.txt", len(satellites), len(ground_stations)
)
t_done = time.perf_counter()

step_ns = cfg["step_ms"] * 1000 * 1000
prev_output = None
per_snapshot = []
for k in range(cfg["snapshots"]):
    t0 = time.perf_counter()
    prev_output = generate_dynamic_state_at(
        cfg["state_dir"], tles["epoch"], k * step_ns, satellites, ground_stations, list_isls,
        list_gsl_interfaces_info, cfg["max_gsl_length_m"], cfg["max_isl_length_m"], cfg["algorithm"],
        prev_output, False,
    )
    per_snapshot.append(time.perf_counter() - t0)

n_sat, n_gs = len(satellites), len(ground_stations)
fstate = prev_output["fstate"]
pairs = [(n_sat + a, n_sat + b) for a in range(n_gs) for b in range(n_gs) if a != b]
reachable = sum(1 for p in pairs if fstate[p][0] != -1)
print(json.dumps({
    "per_snapshot_s": per_snapshot,
    "import_s": t_setup - t_import,
    "setup_s": t_done - t_setup,
    "satellites": n_sat,
    "ground_stations": n_gs,
    "isls": len(list_isls),
    "reachable_fraction_last": reachable / max(1, len(pairs)),
}))
"""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"hypatia_bench: error: {message}\n")


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"hypatia_bench: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(description="Time Hypatia's satgenpy state generator against `leoguard bench constellation`.")
    p.add_argument("--hypatia-python", required=True, type=Path, help="A Python with satgenpy's dependencies.")
    p.add_argument("--snapshots", type=positive_int, default=3, help="Hypatia snapshots to time (default 3).")
    p.add_argument("--workdir", type=Path, help="Where inputs and Hypatia's state go (default: a temp dir).")
    p.add_argument("--hypatia-src", type=Path, help="satgenpy directory to use instead of extracting one.")
    p.add_argument("--hypatia-repo", type=Path, default=DEFAULT_HYPATIA_REPO, help="Hypatia git repository.")
    p.add_argument("--leoguard", type=Path, default=DEFAULT_LEOGUARD, help="The leoguard command.")
    p.add_argument("--cities", type=positive_int, default=100, help="Top-N cities as ground stations.")
    p.add_argument(
        "--leoguard-threads",
        type=positive_int,
        default=1,
        help="leoguard's worker threads (default 1, as Hypatia's single process here).",
    )
    p.add_argument("--json", action="store_true", help="Print one JSON object instead of a table.")
    a = p.parse_args(argv)
    if a.cities < 2:
        p.error(f"--cities must be >= 2, got {a.cities}")
    if not (a.hypatia_python.is_file() and os.access(a.hypatia_python, os.X_OK)):
        p.error(f"--hypatia-python {a.hypatia_python}: not an executable file")
    if a.hypatia_src is not None and not (a.hypatia_src / "satgen" / "__init__.py").is_file():
        p.error(f"--hypatia-src {a.hypatia_src}: no satgen/__init__.py in it (give satgenpy's directory)")
    if a.hypatia_src is None and not a.hypatia_repo.is_dir():
        p.error(f"--hypatia-repo {a.hypatia_repo}: not a directory (or give --hypatia-src)")
    if not (a.leoguard.is_file() and os.access(a.leoguard, os.X_OK)):
        p.error(f"--leoguard {a.leoguard}: not an executable file")
    if a.workdir is not None and a.workdir.exists() and not a.workdir.is_dir():
        p.error(f"--workdir {a.workdir}: not a directory")
    return a


def shell_parameters() -> dict[str, Any]:
    """leoguard's preset, from leoguard itself, plus the TLE figures derived from it."""
    from leoguard import _core

    (shell,) = _core.Constellation.preset_shells(PRESET)
    if not isinstance(shell["phasing"], int) or shell["j2"] or shell["raan_spread_deg"] != 360.0:
        fail(f"{PRESET} is no longer a Walker delta shell without J2; update this tool", 1)
    a = LEOGUARD_EARTH_RADIUS_M + shell["altitude_km"] * 1e3
    period_s = 2.0 * math.pi * math.sqrt(a**3 / LEOGUARD_MU)
    return {**shell, "mean_motion_rev_per_day": 86400.0 / period_s}


def tle_checksum(line: str) -> int:
    return sum(int(c) if c.isdigit() else c == "-" for c in line) % 10


def write_inputs(d: Path, shell: dict[str, Any], cities: int) -> list[str]:
    """Hypatia's inputs that it cannot derive itself for this shell: ground stations (basic), TLEs, ISLs."""
    from leoguard.places import top_cities

    places = top_cities(cities, role="ground-station")
    with open(d / "ground_stations.basic.txt", "w") as f:
        for gid, pl in enumerate(places):
            f.write(f"{gid},{pl.name.replace(',', ' ')},{pl.lat_deg!r},{pl.lon_deg!r},0.0\n")

    planes, per, phasing = shell["planes"], shell["sats_per_plane"], shell["phasing"]
    with open(d / "tles.txt", "w") as f:
        f.write(f"{planes} {per}\n")
        for p in range(planes):
            for s in range(per):
                sid = p * per + s
                raan = 360.0 * p / planes
                anomaly = (360.0 * (s / per + phasing * p / (planes * per))) % 360.0
                line1 = f"1 {sid + 1:05d}U 00000ABC {TLE_EPOCH_FIELD}  .00000000  00000-0  00000+0 0    0"
                line2 = (
                    f"2 {sid + 1:05d} {shell['inclination_deg']:8.4f} {raan:8.4f} "
                    f"{f'{HYPATIA_ECCENTRICITY:0.7f}'[2:]} {0.0:8.4f} {anomaly:8.4f} "
                    f"{shell['mean_motion_rev_per_day']:11.8f}    0"
                )
                f.write(f"Starlink-550 {sid}\n{line1}{tle_checksum(line1)}\n{line2}{tle_checksum(line2)}\n")

    isls = set()
    for p in range(planes):
        for s in range(per):
            a = p * per + s
            isls.add(tuple(sorted((a, p * per + (s + 1) % per))))
            # leoguard's seam: the neighbour of (last plane, s) is (0, s + F).
            b = (p + 1) * per + s if p + 1 < planes else (s + phasing) % per
            isls.add(tuple(sorted((a, b))))
    with open(d / "isls.txt", "w") as f:
        f.writelines(f"{a} {b}\n" for a, b in sorted(isls))
    return [pl.name for pl in places]


def satgenpy_dir(args: argparse.Namespace, work: Path) -> Path:
    if args.hypatia_src is not None:
        return args.hypatia_src.resolve()
    out = work / "hypatia-src"
    out.mkdir(exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(args.hypatia_repo), "archive", "--format=tar", "HEAD", "satgenpy"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        fail(f"git archive of satgenpy from {args.hypatia_repo} failed: {archive.stderr.decode().strip()}", 1)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(out, filter="data")
    return out / "satgenpy"


def single_threaded_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[var] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


def run_hypatia(args: argparse.Namespace, work: Path, shell: dict[str, Any]) -> dict[str, Any]:
    net = work / "starlink_550_isls_plus_grid_top_cities_algorithm_free_one_only_over_isls"
    state = net / f"dynamic_state_{round(STEP_S * 1000)}ms_for_{args.snapshots}_snapshots"
    state.mkdir(parents=True, exist_ok=True)
    names = write_inputs(net, shell, args.cities)
    alt_m = shell["altitude_km"] * 1e3
    cfg = {
        "satgenpy": str(satgenpy_dir(args, work)),
        "network_dir": str(net),
        "state_dir": str(state),
        "snapshots": args.snapshots,
        "step_ms": round(STEP_S * 1000),
        "algorithm": ALGORITHM,
        "max_gsl_length_m": math.hypot(HYPATIA_SATELLITE_CONE_RADIUS_M, alt_m),
        "max_isl_length_m": 2
        * math.sqrt(
            (HYPATIA_EARTH_RADIUS_M + alt_m) ** 2 - (HYPATIA_EARTH_RADIUS_M + HYPATIA_ISL_GRAZING_ALTITUDE_M) ** 2
        ),
    }
    driver = work / "hypatia_driver.py"
    driver.write_text(DRIVER)
    proc = subprocess.run(
        [str(args.hypatia_python), str(driver), json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=work,
        env=single_threaded_env(),
        check=False,
    )
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        fail(f"Hypatia's generator failed (exit {proc.returncode}): {tail}", 1)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    per = out["per_snapshot_s"]
    return {
        "snapshots": len(per),
        "per_snapshot_s": [round(x, 3) for x in per],
        "min_s": round(min(per), 3),
        "median_s": round(statistics.median(per), 3),
        "max_s": round(max(per), 3),
        "import_s": round(out["import_s"], 3),
        "setup_s": round(out["setup_s"], 3),
        "satellites": out["satellites"],
        "ground_stations": out["ground_stations"],
        "isls": out["isls"],
        "reachable_fraction_last_snapshot": round(out["reachable_fraction_last"], 6),
        "max_gsl_length_m": round(cfg["max_gsl_length_m"], 1),
        "max_isl_length_m": round(cfg["max_isl_length_m"], 1),
        "algorithm": ALGORITHM,
        "step_ms": cfg["step_ms"],
        "state_dir": str(state),
        "first_city": names[0],
    }


def run_leoguard(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [str(args.leoguard), "bench", "constellation", "--json", "--cities", str(args.cities)]
    cmd += ["--duration", str(LEOGUARD_DURATION_S), "--step", str(STEP_S), "--threads", str(args.leoguard_threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=single_threaded_env(), check=False)
    if proc.returncode != 0:
        fail(f"`{' '.join(cmd[1:])}` failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}", 1)
    out = json.loads(proc.stdout)
    return {**out, "per_snapshot_s": out["wall_s"] / out["snapshots"], "command": " ".join(["leoguard", *cmd[1:]])}


def table(r: dict[str, Any]) -> str:
    h, lg = r["hypatia"], r["leoguard"]
    rows = [
        ("", "Hypatia (satgenpy)", "leoguard"),
        ("snapshots timed", f"{h['snapshots']}", f"{lg['snapshots']}"),
        (
            "s per snapshot",
            f"{h['min_s']:.3f} / {h['median_s']:.3f} / {h['max_s']:.3f} (min/median/max)",
            f"{lg['per_snapshot_s']:.6f} (mean; wall {lg['wall_s']:.3f} s)",
        ),
        (
            "satellites / ground stations",
            f"{h['satellites']} / {h['ground_stations']}",
            f"1584 / {lg['ground_stations']}",
        ),
        ("ISLs", f"{h['isls']} (+Grid, leoguard's seam)", "+Grid"),
        ("GSL rule", f"range <= {h['max_gsl_length_m'] / 1e3:.1f} km", f">= {MIN_ELEVATION_DEG:g} deg elevation"),
        ("ISL limit", f"{h['max_isl_length_m'] / 1e3:.1f} km (checked)", "grazing 80 km"),
        ("routing", f"{h['algorithm']}, writes fstate", "Dijkstra per source, writes nothing"),
        ("pairs", f"{h['ground_stations'] * (h['ground_stations'] - 1)} ordered", f"{lg['pairs']} unordered"),
        (
            "reachable fraction",
            f"{h['reachable_fraction_last_snapshot']:.4f} (last snapshot)",
            f"{lg['reachable_fraction']:.4f} (all)",
        ),
        ("step / threads", f"{h['step_ms']} ms / 1", f"{STEP_S * 1000:g} ms / {lg['threads']}"),
    ]
    w0 = max(len(x[0]) for x in rows)
    w1 = max(len(x[1]) for x in rows)
    lines = [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    lines.append(f"\nratio (Hypatia median / leoguard mean s per snapshot): {r['ratio']:,.0f}x")
    lines.append(f"workload: {r['workload']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shell = shell_parameters()
    made_temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="hypatia-bench-")) if made_temp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        hypatia = run_hypatia(args, work, shell)
        leoguard = run_leoguard(args)
    finally:
        if made_temp:
            shutil.rmtree(work, ignore_errors=True)
    if made_temp:
        hypatia.pop("state_dir")
    result = {
        "workload": (
            f"{PRESET}: {shell['planes']}x{shell['sats_per_plane']}, {shell['altitude_km']:g} km, "
            f"{shell['inclination_deg']:g} deg, Walker F={shell['phasing']}; +Grid ISLs; top {args.cities} cities; "
            f"all pairs every {STEP_S * 1000:g} ms; Hypatia one process, leoguard {args.leoguard_threads} thread(s)"
        ),
        "hypatia": hypatia,
        "leoguard": leoguard,
        "ratio": round(hypatia["median_s"] / leoguard["per_snapshot_s"], 1),
    }
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
