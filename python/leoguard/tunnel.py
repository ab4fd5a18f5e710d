"""The real liquid-data tunnel (`leoguard-tunnel`) and the lossy relay (`leoguard-relay`): locating the
binaries, starting a tunnel end in the background and stopping it, and a three-namespace test bed
(host A - relay - host B) used by the tests and `tools/bench_tunnel.py`. See docs/tunnel.md."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard.errors import LeoguardError, make_dir, read_user_text

REPO = Path(__file__).resolve().parents[2]


def binary(name: str) -> Path:
    """Path of `leoguard-tunnel` / `leoguard-relay` / `leoguard-transport`: the venv's bin, then
    target/dist (`make build`), then target/release, then PATH."""
    target = REPO / "target"
    for cand in (Path(sys.prefix) / "bin" / name, target / "dist" / name, target / "release" / name):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    found = shutil.which(name)
    if found:
        return Path(found)
    package = "leoguard-transport" if name == "leoguard-transport" else "leoguard-tunnel"
    raise LeoguardError(f"binary {name!r} not found: run `make build` (cargo build --profile dist -p {package})")


def _default_run_dir() -> Path:
    return Path(os.environ.get("LEOGUARD_RUN_DIR", "/run/leoguard"))


@dataclass
class TunnelHandle:
    """A tunnel end started in the background."""

    name: str
    pid: int
    pid_file: Path
    log: Path
    stats_file: Path


def _tunnel_name(config: Path) -> str:
    text = read_user_text(config, "tunnel config")  # a missing or binary file: one line naming it
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LeoguardError(f"invalid tunnel config {config}: not valid TOML ({e})") from e
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise LeoguardError(f"config {config}: `name` is missing or not a string")
    return name


def up(config: Path, run_dir: Path | None = None, netns: str | None = None) -> TunnelHandle:
    """Validate `config`, start `leoguard-tunnel` in the background (pid file, log and stats file in
    `run_dir`), and wait until it is up. Raises LeoguardError (naming the field) on a bad config."""
    exe = binary("leoguard-tunnel")
    name = _tunnel_name(config)
    rd = run_dir or _default_run_dir()
    make_dir(rd, "run directory")
    prefix = ["ip", "netns", "exec", netns] if netns else []
    chk = subprocess.run([*prefix, str(exe), "--check", str(config)], capture_output=True, text=True)
    if chk.returncode != 0:
        raise LeoguardError(chk.stderr.strip() or f"leoguard-tunnel --check failed ({chk.returncode})")
    pid_file, log, stats = rd / f"{name}.pid", rd / f"{name}.log", rd / f"{name}.json"
    if pid_file.exists():
        old = int(pid_file.read_text().strip() or 0)
        if old and alive(old):
            raise LeoguardError(f"tunnel {name!r} is already running (pid {old}, {pid_file})")
    stats.unlink(missing_ok=True)
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as lf:
        proc = subprocess.Popen(
            [*prefix, str(exe), str(config), "--stats-file", str(stats)],
            stdout=lf,
            stderr=lf,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pid_file.unlink(missing_ok=True)
            tail = _read_from(log, start).strip().splitlines()[-3:]
            raise LeoguardError(f"leoguard-tunnel exited ({proc.returncode}): " + " | ".join(tail))
        if f"{name} up" in _read_from(log, start):
            return TunnelHandle(name, proc.pid, pid_file, log, stats)
        time.sleep(0.05)
    return TunnelHandle(name, proc.pid, pid_file, log, stats)


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
        return st.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def down(name: str, run_dir: Path | None = None, netns: str | None = None) -> dict[str, Any] | None:
    """Stop tunnel `name` (SIGTERM, then SIGKILL after 3 s), remove its pid file and its device.
    Returns the final counters (the exit JSON line) when available."""
    rd = run_dir or _default_run_dir()
    pid_file = rd / f"{name}.pid"
    if not pid_file.exists():
        raise LeoguardError(f"tunnel {name!r} is not running (no {pid_file})")
    pid = int(pid_file.read_text().strip() or 0)
    if pid and alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.02)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    prefix = ["ip", "netns", "exec", netns] if netns else []
    # The TUN device is not persistent and vanishes with the process; delete it in case it lingers.
    subprocess.run([*prefix, "ip", "link", "del", name], capture_output=True)
    return last_json(rd / f"{name}.log", "exit")


def last_json(path: Path, event: str | None = None) -> dict[str, Any] | None:
    """The last JSON object line of a log (optionally with this `event`)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event is None or obj.get("event") == event:
                return obj
    return None


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc/<pid>/stat, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- three-namespace test bed ---------------------------------------------------------------------


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


@dataclass
class Lab:
    """Namespaces A (10.201.1.1) - S "sat" (10.201.1.2 | 10.201.2.2) - B (10.201.2.1), joined by veth
    pairs; S does not forward IP, so the only way from A to B is through `leoguard-relay` in S. The
    tunnel ends use TUN devices `lgt` with 10.202.0.1/30 (A) and 10.202.0.2/30 (B)."""

    work: Path
    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000}")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    tunnels: list[tuple[str, TunnelHandle]] = field(default_factory=list)

    @property
    def ns(self) -> dict[str, str]:
        return {k: f"lg{k}{self.tag}" for k in ("A", "S", "B", "X")}

    def create(self) -> None:
        """Create the namespaces and links; raises RuntimeError naming the failing command."""
        self.work.mkdir(parents=True, exist_ok=True)
        self.destroy()
        n = self.ns
        for k in ("A", "S", "B"):
            _sh("ip", "netns", "add", n[k])
            _sh("ip", "-n", n[k], "link", "set", "lo", "up")
        t = self.tag
        _sh("ip", "link", "add", f"va{t}", "netns", n["A"], "type", "veth", "peer", "name", f"vsa{t}", "netns", n["S"])
        _sh("ip", "link", "add", f"vb{t}", "netns", n["B"], "type", "veth", "peer", "name", f"vsb{t}", "netns", n["S"])
        for ns_, dev, addr in (
            (n["A"], f"va{t}", "10.201.1.1/24"),
            (n["S"], f"vsa{t}", "10.201.1.2/24"),
            (n["S"], f"vsb{t}", "10.201.2.2/24"),
            (n["B"], f"vb{t}", "10.201.2.1/24"),
        ):
            _sh("ip", "-n", ns_, "addr", "add", addr, "dev", dev)
            _sh("ip", "-n", ns_, "link", "set", dev, "up")
        _sh("ip", "netns", "exec", n["S"], "sysctl", "-q", "-w", "net.ipv4.ip_forward=0")
        key = self.work / "key"
        key.write_text(os.urandom(32).hex() + "\n")
        key.chmod(0o600)

    def destroy(self) -> None:
        """Stop everything started here and delete the namespaces (idempotent)."""
        self.stop_tunnels()
        self.stop_relay()
        for k in ("A", "S", "B", "X"):
            _sh("ip", "netns", "del", self.ns[k], check=False)

    def exec(self, k: str, *args: str) -> list[str]:
        """The command line that runs `args` in namespace `k`."""
        return ["ip", "netns", "exec", self.ns[k], *args]

    def start_relay(self, loss: str = "none", delay_ms: float = 10.0, seed: int = 1) -> subprocess.Popen[bytes]:
        """`leoguard-relay` in S: A side 10.201.1.2:7000, B side 10.201.2.2:7000."""
        self.stop_relay()
        log = open(self.work / "relay.log", "wb")  # noqa: SIM115 (owned by the process)
        p = subprocess.Popen(
            self.exec(
                "S",
                str(binary("leoguard-relay")),
                "--a-listen", "10.201.1.2:7000", "--a-peer", "10.201.1.1:7000",
                "--b-listen", "10.201.2.2:7000", "--b-peer", "10.201.2.1:7000",
                "--loss", loss, "--delay-ms", str(delay_ms), "--seed", str(seed),
            ),
            stdout=log,
            stderr=log,
        )  # fmt: skip
        self.procs.append(p)
        time.sleep(0.1)
        if p.poll() is not None:
            raise RuntimeError(f"relay exited: {(self.work / 'relay.log').read_text()}")
        return p

    def stop_relay(self) -> dict[str, Any] | None:
        """Stop the relay; returns its exit counters."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        had = bool(self.procs)
        self.procs.clear()
        return last_json(self.work / "relay.log", "exit") if had else None

    def config(self, side: str, fec: dict[str, Any], key: Path | None = None) -> Path:
        """Write the tunnel configuration of end `side` ("A" or "B")."""
        me, relay, tun = {
            "A": ("10.201.1.1", "10.201.1.2", "10.202.0.1"),
            "B": ("10.201.2.1", "10.201.2.2", "10.202.0.2"),
        }[side]
        lines = [
            'name = "lgt"',
            f'address = "{tun}/30"',
            "mtu = 1400",
            f'local = "{me}:7000"',
            f'peer = "{relay}:7000"',
            f'key_file = "{key or self.work / "key"}"',
            "stats_interval_ms = 500",
            "[fec]",
        ]
        for k, v in fec.items():
            lines.append(f"{k} = {json.dumps(v)}")
        p = self.work / f"tunnel-{side}.toml"
        p.write_text("\n".join(lines) + "\n")
        return p

    def start_tunnels(self, fec: dict[str, Any]) -> tuple[TunnelHandle, TunnelHandle]:
        """Start both tunnel ends with the same `[fec]` table."""
        self.stop_tunnels()
        hs = []
        for side in ("A", "B"):
            h = up(self.config(side, fec), run_dir=self.work / f"run-{side}", netns=self.ns[side])
            self.tunnels.append((side, h))
            hs.append(h)
        return hs[0], hs[1]

    def stop_tunnels(self) -> dict[str, dict[str, Any] | None]:
        """Stop both ends; returns their exit counters by side."""
        out = {}
        for side, h in self.tunnels:
            out[side] = down(h.name, run_dir=self.work / f"run-{side}", netns=self.ns[side])
        self.tunnels.clear()
        return out

    def probe(self, count: int = 3, wait: float = 1.0) -> int:
        """Send `count` UDP probes from A to an echo server at B's tunnel address (10.202.0.2:9000) and
        return how many echoes came back (each waited for up to `wait` seconds)."""
        echo = (
            "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.202.0.2',9000));"
            "print('ready',flush=True)\nwhile True:\n d,a=s.recvfrom(2048);s.sendto(d,a)"
        )
        client = (
            "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(float(sys.argv[2]));n=0\n"
            "for i in range(int(sys.argv[1])):\n"
            " s.sendto(b'probe%d'%i,('10.202.0.2',9000))\n"
            " try:\n  n+=s.recv(2048)==b'probe%d'%i\n except OSError: pass\n"
            "print(n)"
        )
        srv = subprocess.Popen(
            self.exec("B", sys.executable, "-c", echo), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            line = srv.stdout.readline() if srv.stdout else b""
            if b"ready" not in line:
                raise RuntimeError(f"echo server in B failed: {srv.stderr.read() if srv.stderr else b''!r}")
            r = subprocess.run(
                self.exec("A", sys.executable, "-c", client, str(count), str(wait)), capture_output=True, text=True
            )
            if r.returncode != 0:
                raise RuntimeError(f"probe client failed: {r.stderr.strip()}")
            return int(r.stdout.strip())
        finally:
            srv.kill()
            srv.wait()

    def iperf(self, seconds: float = 3.0, cc: str = "cubic") -> dict[str, Any]:
        """iperf3 TCP from A to B through the tunnel; returns goodput and retransmissions."""
        srv = subprocess.Popen(
            self.exec("B", "iperf3", "-s", "-1", "-B", "10.202.0.2", "-p", "5201", "--forceflush"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            # Wait for "Server listening on 5201" so the client never races the server's bind.
            assert srv.stdout is not None
            seen = b""
            while b"listening" not in seen:
                line = srv.stdout.readline()
                if not line:
                    raise RuntimeError(f"iperf3 server in B did not start: {seen.decode(errors='replace')}")
                seen += line
            r = subprocess.run(
                self.exec("A", "iperf3", "-c", "10.202.0.2", "-p", "5201", "-t", str(seconds), "-C", cc, "-J"),
                capture_output=True,
                text=True,
                timeout=seconds + 20,
            )
        finally:
            if srv.poll() is None:
                srv.kill()
            srv.wait()
        data = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        if r.returncode != 0 or "error" in data:
            raise RuntimeError(f"iperf3 failed ({r.returncode}): {data.get('error', r.stderr.strip())}")
        end = data["end"]
        return {
            "goodput_mbps": end["sum_received"]["bits_per_second"] / 1e6,
            "bytes": end["sum_received"]["bytes"],
            "retransmits": end["sum_sent"].get("retransmits", 0),
            "seconds": end["sum_received"]["seconds"],
        }


def tunnel_bench(seconds: float = 5.0, losses: list[float] | None = None, delay_ms: float = 10.0) -> list[dict]:
    """iperf3 CUBIC A->B through the tunnel across the relay for each loss rate, coding off and on:
    goodput, TCP retransmissions, CPU seconds per Gbit/s of both tunnel processes (/proc/<pid>/stat),
    and wire bytes per goodput byte. Needs root."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as d:
        lab = Lab(Path(d))
        lab.create()
        try:
            for loss in losses if losses is not None else [0.0, 0.01, 0.05]:
                for mode in ("off", "liquid"):
                    lab.start_relay(loss=f"bernoulli:{loss}", delay_ms=delay_ms, seed=11)
                    ha, hb = lab.start_tunnels({"mode": mode})
                    cpu0 = proc_cpu_seconds(ha.pid) + proc_cpu_seconds(hb.pid)
                    r = lab.iperf(seconds)
                    cpu = proc_cpu_seconds(ha.pid) + proc_cpu_seconds(hb.pid) - cpu0
                    ends = lab.stop_tunnels()
                    lab.stop_relay()
                    gbit = r["goodput_mbps"] * r["seconds"] / 1000.0
                    rows.append(
                        {
                            "loss": loss,
                            "mode": mode,
                            "delay_ms_each_way": delay_ms,
                            "goodput_mbps": round(r["goodput_mbps"], 2),
                            "retransmits": r["retransmits"],
                            "tunnel_cpu_s": round(cpu, 3),
                            "cpu_s_per_gbit": round(cpu / gbit, 3) if gbit > 0 else None,
                            "udp_out_bytes_A": (ends.get("A") or {}).get("udp_out_bytes"),
                            # Bytes A put on the wire per byte of goodput (coding, crypto and headers).
                            "wire_per_goodput": round(
                                ((ends.get("A") or {}).get("udp_out_bytes") or 0) / max(1, r["bytes"]), 3
                            ),
                        }
                    )
        finally:
            lab.destroy()
    return rows
