"""The real-browser web workload for the emulator (docs/emu-web.md): pages of leoguard's synthetic corpus
(`leoguard.web`) written out as real files, served by nginx (HTTP/2 over TLS 1.3) inside a network
namespace, and loaded by headless Chromium inside another one, which reports page load time, a
frame-based Speed Index, requests, bytes and the protocol of every page.

    site = materialise_site(42, [0, 1, 2], Path("out/site"))
    with WebServer("srv", site, ["fd00::2"]):
        rows = load_pages("cli", "fd00::2", site, [0, 1, 2])
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pwd
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from leoguard import sysdeps
from leoguard.emu.site import HOST_SUFFIX, VIEWPORT, Site, SitePage, hostname, materialise_site
from leoguard.errors import LeoguardError

__all__ = [
    "Site", "SitePage", "WebServer", "find_binary", "hostname", "load_pages", "materialise_site", "speed_index",
    "visual_progress",
]  # fmt: skip


def find_binary(name: str) -> Path:
    """Path of `chromium`, `chromedriver`, `nginx` or `openssl`, or a one-line error naming the package."""
    return Path(sysdeps.need(name))


def _run(cmd: list[str], text: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=text)
    if r.returncode != 0:
        lines = (r.stderr if text else r.stderr.decode(errors="replace")).strip().splitlines()
        raise LeoguardError(f"`{' '.join(cmd[:3])}` failed: {lines[-1] if lines else f'exit status {r.returncode}'}")
    return r


def _wait_dad(ns: str, addrs: list[str], limit_s: float = 10.0) -> None:
    """Wait until none of `addrs` (or, if empty, no address) in `ns` is IPv6-tentative: a tentative
    address cannot be bound or used as a source."""
    deadline = time.monotonic() + limit_s
    while True:
        out = _run(["ip", "-n", ns, "-6", "-o", "addr", "show", "tentative"]).stdout
        busy = [line for line in out.splitlines() if not addrs or any(f" {a}/" in line for a in addrs)]
        if not busy:
            return
        if time.monotonic() > deadline or "dadfailed" in out:
            raise LeoguardError(f"namespace {ns}: IPv6 address still tentative: {busy[0].split()[3]}")
        time.sleep(0.1)


def _tls(d: Path, hosts: list[str]) -> str:
    """A throw-away CA, one leaf key, and one certificate per hostname signed by the CA; returns the
    base64 SHA-256 of the leaf key's SPKI (what Chromium pins). One certificate per origin, not one for
    all: Chromium pools HTTP/2 connections across hosts that share an address when a certificate
    covers both, which would fold every origin of a page into one connection."""
    ssl = str(find_binary("openssl"))
    ec = ["-pkeyopt", "ec_paramgen_curve:P-256"]
    ca = ["-subj", "/CN=leoguard test CA", "-addext", "basicConstraints=critical,CA:TRUE"]
    ca += ["-addext", "keyUsage=critical,keyCertSign", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt"]
    _run([ssl, "req", "-x509", "-newkey", "ec", *ec, "-nodes", "-days", "30", *ca])
    _run([ssl, "genpkey", "-algorithm", "EC", *ec, "-out", f"{d}/leaf.key"])
    _run([ssl, "req", "-new", "-key", f"{d}/leaf.key", "-subj", "/CN=leoguard", "-out", f"{d}/leaf.csr"])
    (d / "certs").mkdir()
    signer = ["x509", "-req", "-in", f"{d}/leaf.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key", "-days", "30"]

    def sign(k_host: tuple[int, str]) -> None:
        k, host = k_host
        ext = d / "certs" / f"{host}.ext"
        ext.write_text(f"subjectAltName=DNS:{host}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
        _run([ssl, *signer, "-set_serial", str(k + 1), "-extfile", str(ext), "-out", f"{d}/certs/{host}.crt"])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(sign, enumerate(hosts)))
    der = _run([ssl, "pkey", "-in", f"{d}/leaf.key", "-pubout", "-outform", "DER"], text=False).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def _nginx_conf(d: Path, site: Site, addrs: list[str], workers: int, version: tuple[int, ...]) -> str:
    new_h2 = version >= (1, 25, 1)  # `listen ... http2` became the `http2 on;` directive in 1.25.1
    listen = "".join(
        f"listen {'[' + a + ']' if ':' in a else a}:443 ssl{'' if new_h2 else ' http2'};" for a in addrs
    ) + ("http2 on;" if new_h2 else "")
    servers = "\n".join(
        f"  server {{ {listen} server_name {h}; ssl_certificate {d}/certs/{h}.crt; root {site.root.resolve()}/{h}; }}"
        for h in site.hostnames
    )
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    temps = "".join(f"{k}_temp_path {d}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""{user}
worker_processes {workers};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  types {{ text/html html; text/css css; application/javascript js; image/png png; font/woff2 woff2;
          application/json json; }}
  default_type application/octet-stream;
  log_format lg '$host $request_uri $status $body_bytes_sent $server_protocol $ssl_protocol $connection';
  access_log {d}/access.log lg;
  {temps}
  sendfile on; tcp_nodelay on; server_tokens off; etag off; gzip off; keepalive_timeout 120s;
  ssl_protocols TLSv1.3; ssl_session_tickets off; ssl_certificate_key {d}/leaf.key;
  index index.html;
  add_header Cache-Control no-store always;
  add_header Access-Control-Allow-Origin * always;
  add_header Timing-Allow-Origin * always;
{servers}
}}
"""


class WebServer:
    """nginx in namespace `ns` serving every origin of `site` over HTTP/2 + TLS 1.3 on port 443 of
    `addrs` (IPv6 and/or IPv4, already configured). Config, certificates, pid and logs live in a
    temporary directory removed on exit; /etc/nginx is never read. Sets `site.spki` while it runs."""

    def __init__(self, ns: str, site: Site, addrs: list[str], workers: int = 1) -> None:
        if not addrs:
            raise LeoguardError("WebServer: addrs is empty: give at least one address to listen on")
        self.ns, self.site, self.addrs, self.workers = ns, site, [a.split("/")[0] for a in addrs], workers
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._old_spki: str | None = None

    def __enter__(self) -> WebServer:
        nginx = find_binary("nginx")
        find_binary("openssl")
        self.dir = Path(tempfile.mkdtemp(prefix="leoguard-nginx-"))
        try:
            self._start(nginx)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, nginx: Path) -> None:
        d = self.dir
        assert d is not None  # set by __enter__
        spki = _tls(d, self.site.hostnames)
        m = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", _run([str(nginx), "-v"]).stderr)
        version = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
        (d / "nginx.conf").write_text(_nginx_conf(d, self.site, self.addrs, self.workers, version))
        _wait_dad(self.ns, [a for a in self.addrs if ":" in a])
        cmd = ["ip", "netns", "exec", self.ns, str(nginx), "-p", f"{d}/", "-c", f"{d}/nginx.conf"]
        with open(d / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                [*cmd, "-e", f"{d}/error.log", "-g", "daemon off;"],
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
            )
        deadline = time.monotonic() + 15
        while not (d / "nginx.pid").is_file() or not (d / "nginx.pid").read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = [(d / f).read_text(errors="replace") for f in ("stderr.log", "error.log") if (d / f).exists()]
                lines = "\n".join(log).strip().splitlines()
                raise LeoguardError(f"nginx in namespace {self.ns} did not start: {lines[-1] if lines else '?'}")
            time.sleep(0.05)
        self._old_spki, self.site.spki = self.site.spki, spki

    def access_log(self) -> list[dict[str, Any]]:
        """The requests served so far: host, uri, status, bytes (body), protocol, tls, connection."""
        assert self.dir is not None, "access_log() is for a running WebServer"
        keys = ("host", "uri", "status", "bytes", "protocol", "tls", "connection")
        rows = []
        for line in (self.dir / "access.log").read_text().splitlines():
            row: dict[str, Any] = dict(zip(keys, line.split(), strict=False))
            for k in ("status", "bytes", "connection"):
                row[k] = int(row[k])
            rows.append(row)
        return rows

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()  # nginx's fast shutdown; workers follow the master
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None
            self.site.spki = self._old_spki
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


# --- the browser ----------------------------------------------------------------------------------------


_ROW = "leoguard-web-row "
"""Marks the driver's result lines on its stdout."""


_KEYS = ("page", "plt_ms", "speed_index_ms", "requests", "bytes", "protocol", "error")


def _error_row(page: int, error: str | None) -> dict[str, Any]:
    return {**dict.fromkeys(_KEYS), "page": page, "error": error}


def load_pages(
    client_ns: str,
    server_addr: str,
    site: Site,
    pages: list[int],
    timeout_s: float = 60,
    spki: str | None = None,
    filmstrip: Path | None = None,
) -> list[dict[str, Any]]:
    """Load each page once in a fresh headless Chromium (new profile, cache off) inside `client_ns`,
    with every origin resolved to `server_addr` and the serving WebServer's key pinned. One row per
    page, in order: page, plt_ms, speed_index_ms, requests, bytes, protocol, error (None unless the
    load failed or timed out; then the metrics it could not measure are None), and the extras tls,
    requests_failed, frames, visually_complete_ms, first_paint_ms, viewport (docs/emu-web.md). With
    `filmstrip`, every screencast frame is kept as `<filmstrip>/<index>-p<page>/<ms after start>.jpg`."""
    spec = {
        "chromium": str(find_binary("chromium")),
        "chromedriver": str(find_binary("chromedriver")),
        "server_addr": server_addr.split("/")[0],
        "spki": spki or site.spki,
        "timeout_s": float(timeout_s),
        "filmstrip": str(Path(filmstrip).resolve()) if filmstrip else None,
    }
    if spec["spki"] is None:
        raise LeoguardError("load_pages: no key to pin: serve the site with a WebServer first (or pass spki=)")
    missing = [p for p in pages if p not in site.pages]
    if missing:
        raise LeoguardError(f"load_pages: page {missing[0]} is not in the site (materialised: {sorted(site.pages)})")
    _run(["ip", "-n", client_ns, "link", "set", "lo", "up"])  # chromedriver talks to Chromium over loopback
    _wait_dad(client_ns, [])
    todo = [(k, p, site.url(p)) for k, p in enumerate(pages)]
    rows: dict[int, dict[str, Any]] = {}
    while todo:  # every batch gives at least one row: a driver that dies costs one page, not the rest
        rows.update(_drive_batch(client_ns, spec, todo))
        todo = [t for t in todo if t[0] not in rows]
    return [rows[k] for k in range(len(pages))]


def _drive_batch(ns: str, spec: dict[str, Any], todo: list[tuple[int, int, str]]) -> dict[int, dict[str, Any]]:
    """Runs the driver (this module's __main__) in `ns` over `todo`; returns the rows it printed before it
    finished, died, or spent longer than the load timeout plus a margin on one page."""
    rows: dict[int, dict[str, Any]] = {}
    arg = json.dumps({**spec, "pages": todo})
    with tempfile.TemporaryFile() as err:
        cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "leoguard.emu.web", "drive", arg]
        proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}  # chromedriver is on localhost
        env = {k: v for k, v in os.environ.items() if k.lower() not in proxies}
        pipes = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": err}
        proc = subprocess.Popen(cmd, **pipes, text=True, start_new_session=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None  # stdout=PIPE
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            while len(rows) < len(todo):
                try:
                    line = lines.get(timeout=spec["timeout_s"] + 45)
                except queue.Empty:
                    break
                if line is None:
                    break
                if line.startswith(_ROW):
                    row = json.loads(line[len(_ROW) :])
                    rows[row.pop("index")] = row
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the driver's session: chromedriver and Chromium too
            proc.wait()
        if len(rows) < len(todo):  # the first page without a row is the one it died or hung on
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()
            k, page, _ = next(t for t in todo if t[0] not in rows)
            rows[k] = _error_row(page, f"browser driver died or hung: {tail[-1][:300] if tail else 'no output'}")
    return rows


def visual_progress(hists: list[Any], initial: Any | None = None) -> list[float]:
    """Visual completeness of each frame, as speedline (Lighthouse) and WebPageTest compute it: per
    colour channel and intensity, how much of the histogram's change from the initial to the final frame
    the frame has made, summed over channels and bins (`hists`: 3x256 arrays, white pixels left out)."""
    import numpy as np

    init = np.zeros((3, 256)) if initial is None else initial
    target = np.abs(hists[-1] - init)
    total = float(target.sum())
    if total == 0:
        return [1.0 for _ in hists]
    return [float(np.minimum(np.abs(h - init), target).sum()) / total for h in hists]


def speed_index(times_ms: list[float], progress: list[float]) -> float:
    """Speed Index = integral from navigation start of (1 - visual completeness) dt, completeness being
    constant between frames and 0 until the first frame after navigation start (earlier frames show
    the blank page the load starts from)."""
    si, last_t, last_vc = 0.0, 0.0, 0.0
    for t, vc in zip(times_ms, progress, strict=True):
        if t <= 0:
            continue
        si += (1.0 - last_vc) * (t - last_t)
        last_t, last_vc = t, vc
    return si


def _histogram(jpeg: bytes) -> Any:
    """3x256 colour histogram of a frame, leaving out white pixels (all channels >= 249, as speedline)."""
    import io

    import numpy as np
    from PIL import Image

    px = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")).reshape(-1, 3)
    px = px[(px < 249).any(axis=1)]
    return np.stack([np.bincount(px[:, c], minlength=256) for c in range(3)]).astype(float)


# Headless (new mode: the real browser), no sandbox (it runs as root in a namespace), software
# rendering, nothing the browser would fetch on its own (updates, sync, safe browsing, translation),
# no throttling of a page it might consider hidden, no QUIC (the server speaks HTTP/2 only).
_CHROME_FLAGS = """--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars
--force-color-profile=srgb --no-proxy-server --disable-quic --no-first-run --no-default-browser-check
--disable-background-networking --disable-sync --disable-component-update --disable-extensions
--disable-default-apps --mute-audio --disable-client-side-phishing-detection --metrics-recording-only
--disable-renderer-backgrounding --disable-background-timer-throttling --disable-backgrounding-occluded-windows
--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,HttpsUpgrades""".split()  # noqa: SIM905 (one flag a line otherwise)


def _chrome_options(spec: dict[str, Any], profile: str) -> Any:
    from selenium import webdriver

    addr = spec["server_addr"]
    o = webdriver.ChromeOptions()
    o.binary_location = spec["chromium"]
    o.page_load_strategy = "normal"  # driver.get returns after the load event
    for a in _CHROME_FLAGS:
        o.add_argument(a)
    for a in (f"--user-data-dir={profile}", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}"):
        o.add_argument(a)
    o.add_argument(f"--host-resolver-rules=MAP *.{HOST_SUFFIX} {'[' + addr + ']' if ':' in addr else addr}")
    o.add_argument(f"--ignore-certificate-errors-spki-list={spec['spki']}")
    o.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    o.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
    return o


class _Net:
    """Requests, bytes and protocols from the DevTools Network events of chromedriver's performance log."""

    def __init__(self) -> None:
        self.sent: set[str] = set()
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}
        self.bytes = 0
        self.protocols: set[str] = set()
        self.tls: set[str] = set()
        self.bad_status = 0

    def feed(self, entries: list[dict[str, Any]]) -> None:
        for e in entries:
            m = json.loads(e["message"])["message"]
            p, kind = m.get("params", {}), m.get("method", "")
            if kind == "Network.requestWillBeSent" and p["request"]["url"].startswith("http"):
                self.sent.add(p["requestId"])
            elif kind == "Network.responseReceived" and p["requestId"] in self.sent:
                r = p["response"]
                self.protocols.add(r.get("protocol", "?"))
                self.tls.add((r.get("securityDetails") or {}).get("protocol", "none"))
                self.bad_status += not 200 <= r.get("status", 0) < 300
            elif kind == "Network.loadingFinished" and p["requestId"] in self.sent:
                self.done.add(p["requestId"])
                self.bytes += int(p.get("encodedDataLength", 0))
            elif kind == "Network.loadingFailed" and p["requestId"] in self.sent:
                self.failed[p["requestId"]] = p.get("errorText", "?")

    def busy(self) -> int:
        return len(self.sent - self.done - set(self.failed))


class _Screencast:
    """Page.startScreencast on a DevTools socket of the page's own (websocket-client, as Selenium uses):
    each frame is kept with its compositor swap time and acknowledged at once, which paces the next."""

    def __init__(self, debugger: str, size: tuple[int, int]) -> None:
        import urllib.request

        import websocket

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        with opener.open(f"http://{debugger}/json/list", timeout=10) as r:
            target = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = websocket.create_connection(
            target["webSocketDebuggerUrl"], suppress_origin=True, enable_multithread=True
        )
        self.frames: list[tuple[float, str]] = []
        self.lock, self.ids = threading.Lock(), iter(range(1, 1 << 62))
        threading.Thread(target=self._read, daemon=True).start()
        self._send("Page.startScreencast", format="jpeg", quality=80, maxWidth=size[0] // 2, maxHeight=size[1] // 2)

    def _send(self, method: str, **params: Any) -> None:
        self.ws.send(json.dumps({"id": next(self.ids), "method": method, "params": params}))

    def _read(self) -> None:
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except Exception:  # closed: the load is over
                return
            if msg.get("method") == "Page.screencastFrame":
                p = msg["params"]
                with self.lock:
                    self.frames.append((float(p["metadata"].get("timestamp") or time.time()), p["data"]))
                self._send("Page.screencastFrameAck", sessionId=p["sessionId"])

    def count(self) -> int:
        with self.lock:
            return len(self.frames)

    def stop(self) -> list[tuple[float, str]]:
        """Stops, closes the socket, and returns the frames (epoch seconds, base64 JPEG) in time order."""
        with contextlib.suppress(Exception):
            self._send("Page.stopScreencast")
            self.ws.abort()
            self.ws.shutdown()
        with self.lock:
            return sorted(self.frames)


def _load_one(spec: dict[str, Any], page: int, url: str, film: Path | None) -> dict[str, Any]:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service

    row = _error_row(page, None)
    profile = tempfile.mkdtemp(prefix="leoguard-chromium-")
    driver, cast = None, None
    try:
        driver = webdriver.Chrome(options=_chrome_options(spec, profile), service=Service(spec["chromedriver"]))
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        w, h = VIEWPORT
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride", {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False}
        )
        driver.get("about:blank")  # the blank page every load starts from (not Chromium's new-tab page)
        cast = _Screencast(driver.capabilities["goog:chromeOptions"]["debuggerAddress"], VIEWPORT)
        net = _Net()
        driver.get_log("performance")  # drop about:blank's events
        driver.set_page_load_timeout(spec["timeout_s"])
        t_end = time.monotonic() + spec["timeout_s"]
        try:
            driver.get(url)
        except TimeoutException:
            row["error"] = f"timeout: no load event within {spec['timeout_s']:g} s"
        # After onload: wait for fetches that do not delay it and for the last paints to settle.
        quiet_until, give_up = time.monotonic() + 0.6, min(t_end + 5, time.monotonic() + 10)
        while time.monotonic() < give_up:
            n = cast.count()
            net.feed(driver.get_log("performance"))
            time.sleep(0.1)
            if cast.count() != n or net.busy():
                quiet_until = time.monotonic() + 0.6
            if time.monotonic() >= quiet_until:
                break
        net.feed(driver.get_log("performance"))
        shots = cast.stop()
        nav = driver.execute_script(
            "const n = performance.getEntriesByType('navigation')[0] || {};"
            "const fp = performance.getEntriesByName('first-contentful-paint')[0];"
            "return {origin: performance.timeOrigin, start: n.startTime || 0, load: n.loadEventEnd || 0,"
            " proto: n.nextHopProtocol || '', fcp: fp ? fp.startTime : null, w: innerWidth, h: innerHeight};"
        )
        protocols = net.protocols | ({nav["proto"]} if nav["proto"] else set())
        row.update(
            requests=len(net.sent),
            bytes=net.bytes,
            protocol=",".join(sorted(protocols)) or None,
            tls=",".join(sorted(net.tls)) or None,
            requests_failed=len(net.failed),
            frames=len(shots),
            first_paint_ms=nav["fcp"],
            viewport=[nav["w"], nav["h"]],
        )
        if nav["load"] > 0:
            row["plt_ms"] = round(nav["load"] - nav["start"], 1)
        elif row["error"] is None:
            row["error"] = "no load event"
        t0 = nav["origin"] + nav["start"]
        if shots:
            times = [ts * 1000.0 - t0 for ts, _ in shots]
            if film is not None:
                film.mkdir(parents=True, exist_ok=True)
                for t, (_, data) in zip(times, shots, strict=True):
                    (film / f"{t:08.1f}.jpg").write_bytes(base64.b64decode(data))
            vc = visual_progress([_histogram(base64.b64decode(data)) for _, data in shots])
            row["speed_index_ms"] = round(speed_index(times, vc), 1)
            row["visually_complete_ms"] = round(next(t for t, v in zip(times, vc, strict=True) if v >= 0.999), 1)
        elif row["error"] is None:
            row["error"] = "no screencast frames"
        if net.failed and row["error"] is None:
            row["error"] = f"{len(net.failed)} requests failed, e.g. {next(iter(net.failed.values()))}"
        elif net.bad_status and row["error"] is None:
            row["error"] = f"{net.bad_status} responses with a non-2xx status"
        if row["error"] and row["error"].startswith("timeout"):  # the driver stopped the load: no PLT, no SI
            row.update(plt_ms=None, speed_index_ms=None, visually_complete_ms=None)
    except Exception as e:  # a failed load is a row, never an exception that loses the other pages
        msg = str(e).strip().splitlines()
        row["error"] = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
    finally:
        if cast is not None:
            cast.stop()
        if driver is not None:
            with contextlib.suppress(Exception):
                driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return row


def _drive(spec: dict[str, Any]) -> None:
    for k, page, url in spec["pages"]:
        film = Path(spec["filmstrip"]) / f"{k}-p{page}" if spec.get("filmstrip") else None
        print(_ROW + json.dumps({"index": k, **_load_one(spec, page, url, film)}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "drive":
        sys.exit("usage: python -m leoguard.emu.web drive SPEC_JSON (run by leoguard.emu.web.load_pages)")
    _drive(json.loads(sys.argv[2]))
