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
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard import web as corpus
from leoguard.errors import LeoguardError

HOST_SUFFIX = "leoguard.test"
"""Every origin is `o<origin>.p<page>.leoguard.test` (RFC 6761 reserves `.test`)."""
VIEWPORT = (1280, 720)
"""CSS pixels of the browser's viewport; the fold is its bottom edge."""
EXTRA_DIRS: tuple[str, ...] = ("/usr/lib/chromium", "/usr/sbin", "/sbin")
"""Searched before PATH: Debian's real chromium binary (not the /usr/bin shell wrapper) and nginx."""
PACKAGES = {"chromium": "chromium", "chromedriver": "chromium-driver", "nginx": "nginx", "openssl": "openssl"}
"""The Debian package that provides each binary (`make setup` installs them)."""

_EXT = {"html": "html", "css": "css", "js": "js", "image": "png", "font": "woff2", "other": "json"}
_TEXT = bytes.maketrans(bytes(range(256)), (b"etaoinshrdlucmfwypvbgkjqxz    " * 9)[:256])
"""Random bytes to lower-case words: filler without `<`, `&`, `*` or `-`, safe in HTML, CSS, JS, JSON."""
_BASE_CSS = (
    "body{margin:0}.a{position:absolute;border:0;margin:0}.t{background:#dde4ee;color:#223;"
    "font:13px/1.4 sans-serif;overflow:hidden}.f{position:absolute;left:0;width:100%}"
    ".b{display:inline-block;width:40px;height:40px;border:0;vertical-align:top}"
    ".c{display:inline-block;width:300px;height:150px;border:0}"
)
# L(origin, id, kind): what a script does for a child it reveals: inserts a script ("j"), an image into
# the child's slot ("i", slots are laid out by the HTML), or fetches the body of an XHR-like object ("x").
_HELPER = (
    '<script>function L(o,i,t){{var u="//o"+o+".p{page}.{suffix}/"+i+"."+{{j:"js",i:"png",x:"json"}}[t],e;'
    'if(t=="x")return fetch(u).then(function(r){{return r.arrayBuffer()}}).catch(function(){{}});'
    'e=document.createElement(t=="j"?"script":"img");e.src=u;if(t=="j")document.head.appendChild(e);'
    'else{{e.style.cssText="display:block;width:100%;height:100%";'
    '(document.getElementById("s"+i)||document.body).appendChild(e)}}}}</script>'
)


def find_binary(name: str) -> Path:
    """Path of `chromium`, `chromedriver`, `nginx` or `openssl`, or a one-line error naming the package."""
    found = shutil.which(name, path=os.pathsep.join([*EXTRA_DIRS, os.environ.get("PATH", "")]))
    if found is None:
        pkg = PACKAGES.get(name, name)
        raise LeoguardError(f"{name} not found: install the Debian package {pkg} (`make setup` does)")
    return Path(found)


def hostname(page: int, origin: int) -> str:
    """The hostname of origin `origin` of corpus page `page`."""
    return f"o{origin}.p{page}.{HOST_SUFFIX}"


@dataclass
class SitePage:
    """One materialised page: its URL, the hostname of each origin and the file of each object."""

    page: int
    url: str
    hosts: list[str]
    objects: int
    corpus_bytes: int
    bytes: int
    """Bytes written: `corpus_bytes` plus what objects too small for their markup had to grow by."""
    oversize: int
    """Objects written larger than their corpus size (markup that does not fit; see docs/emu-web.md)."""
    files: dict[int, Path]
    connections: int
    """Connections a browser opens for the page: one per origin and credentials mode (Chromium keeps
    anonymous CORS requests, i.e. cross-origin fonts and fetches, on sockets of their own)."""


@dataclass
class Site:
    """Pages of corpus `seed` written under `root/<hostname>/`; `spki` is set by the WebServer serving it."""

    seed: int
    root: Path
    pages: dict[int, SitePage]
    spki: str | None = field(default=None, repr=False)

    @property
    def hostnames(self) -> list[str]:
        return [h for p in self.pages.values() for h in p.hosts]

    def url(self, page: int) -> str:
        return self.pages[page].url


# --- page content -----------------------------------------------------------------------------------


def _filler(rng: random.Random, n: int) -> str:
    return rng.randbytes(max(n, 0)).translate(_TEXT).decode()


def _png(size: int, rgb: tuple[int, int, int], rng: random.Random) -> bytes:
    """A decodable one-colour palette PNG of exactly `size` bytes (>= 85): a 16x16 image padded with a
    private ancillary chunk `lgPd` (decoders skip it), or for the smallest sizes a one-row image stored
    uncompressed whose width sets the length."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    def image(w: int, h: int, level: int) -> bytes:
        raw = bytes(h * (1 + (w + 7) // 8))  # filter byte 0 + 1-bit pixels of palette index 0, per row
        ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([1, 3, 0, 0, 0])
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", ihdr)
            + chunk(b"PLTE", bytes(rgb))
            + chunk(b"IDAT", zlib.compress(raw, level))
        )

    iend = chunk(b"IEND", b"")
    base = image(16, 16, 9)
    pad = size - len(base) - len(iend)
    if pad >= 12:
        return base + chunk(b"lgPd", rng.randbytes(pad - 12)) + iend
    # Stored deflate: 1 + w/8 raw bytes + 11 of zlib framing, so each 8 pixels of width add one byte.
    w = 8 * max(size - 84, 1)
    return image(w, 1, 0) + iend


def _colour(obj: int) -> tuple[int, int, int]:
    """A saturated colour per object (never near white, which the Speed Index histograms ignore)."""
    h = hashlib.blake2b(obj.to_bytes(4, "big"), digest_size=3).digest()
    return (40 + h[0] % 180, 40 + h[1] % 180, 40 + h[2] % 180)


def _treemap(items: list[tuple[int, float]], box: tuple[float, float, float, float], out: dict) -> None:
    """Tile `box` (x0, y0, x1, y1) with one integer rectangle per item, areas in proportion to the weights
    (items sorted by weight, split in two halves of about equal weight along the longer side)."""
    x0, y0, x1, y1 = box
    if len(items) == 1:
        x, y = round(x0), round(y0)
        out[items[0][0]] = (x, y, max(round(x1) - x, 1), max(round(y1) - y, 1))
        return
    total = sum(w for _, w in items)
    k, acc, best = 1, 0.0, float("inf")
    for i in range(1, len(items)):
        acc += items[i - 1][1]
        if abs(acc - total / 2) < best:
            best, k = abs(acc - total / 2), i
    frac = sum(w for _, w in items[:k]) / total
    if x1 - x0 >= y1 - y0:
        xm = x0 + (x1 - x0) * frac
        _treemap(items[:k], (x0, y0, xm, y1), out)
        _treemap(items[k:], (xm, y0, x1, y1), out)
    else:
        ym = y0 + (y1 - y0) * frac
        _treemap(items[:k], (x0, y0, x1, ym), out)
        _treemap(items[k:], (x0, ym, x1, y1), out)


def _style(r: tuple[int, int, int, int]) -> str:
    return f"left:{r[0]}px;top:{r[1]}px;width:{r[2]}px;height:{r[3]}px"


class _Page:
    """Writes one corpus page. Every object's element lives in its *home* document (the HTML parent,
    or the home of a CSS/JS parent); visible objects get an area above the fold of their home document
    in proportion to their visual weight, the others sit below the fold."""

    def __init__(self, seed: int, page: int, objs: list[dict[str, Any]]) -> None:
        self.seed, self.page, self.objs = seed, page, {o["id"]: o for o in objs}
        self.kids: dict[int, list[int]] = {i: [] for i in self.objs}
        for o in objs:
            if o["parent"] is not None:
                self.kids[o["parent"]].append(o["id"])
        self.home: dict[int, int] = {}
        for o in objs:  # parents precede children in the corpus order
            p = o["parent"]
            if p is not None:
                self.home[o["id"]] = p if self.objs[p]["type"] == "html" else self.home[p]
        self.housed: dict[int, list[int]] = {i: [] for i in self.objs}
        for i, d in self.home.items():
            self.housed[d].append(i)
        self.weight: dict[int, float] = {}  # visual weight of an HTML document with what it houses
        for i in sorted(self.objs, reverse=True):
            if self.objs[i]["type"] == "html":
                own = self.objs[i]["visual_weight"]
                self.weight[i] = own + sum(self._visual(c) for c in self.housed[i])
        self.rect: dict[int, tuple[int, int, int, int]] = {}
        self._layout(0, VIEWPORT)

    def _visual(self, i: int) -> float:
        o = self.objs[i]
        if o["type"] == "html":
            return self.weight[i]
        return o["visual_weight"] if o["type"] == "image" else 0.0

    def _layout(self, doc: int, size: tuple[int, int]) -> None:
        items = [(c, self._visual(c)) for c in self.housed[doc] if self._visual(c) > 0]
        if self.objs[doc]["visual_weight"] > 0:
            items.append((-1 - doc, self.objs[doc]["visual_weight"]))  # the document's own text
        items.sort(key=lambda kv: -kv[1])
        if items:
            _treemap(items, (0, 0, size[0], size[1]), self.rect)
        for c in self.housed[doc]:
            if self.objs[c]["type"] == "html" and c in self.rect:
                self._layout(c, self.rect[c][2:])
            elif self.objs[c]["type"] == "html":
                self._layout(c, (300, 150))

    def url(self, i: int) -> str:
        """The URL its parent names object `i` by: a path if they share the origin, else `//host/path`."""
        o = self.objs[i]
        path = f"/{i}.{_EXT[o['type']]}"
        same = o["origin"] == self.objs[o["parent"]]["origin"]
        return path if same else f"//{hostname(self.page, o['origin'])}{path}"

    def anonymous(self, i: int) -> bool:
        """Whether the browser fetches `i` without credentials: fonts and fetches are CORS requests,
        credentialed only when same-origin with the document that makes them."""
        o = self.objs[i]
        return o["type"] in ("font", "other") and o["origin"] != self.objs[self.home[i]]["origin"]

    def content(self, i: int) -> bytes:
        o, rng = self.objs[i], random.Random(f"{self.seed}/{self.page}/{i}")
        t, size = o["type"], o["size"]
        if t == "image":
            return _png(size, _colour(i), rng)
        if t == "font":  # not a decodable font: Chrome downloads it, rejects it and falls back
            return rng.randbytes(size)
        if t == "other":
            return f'{{"d":"{_filler(rng, size - 8)}"}}'.encode()
        if t == "html":
            return self._html(i, rng).encode()
        calls = "".join(self._rule(c) if t == "css" else self._call(c) for c in self.kids[i])
        pad = size - len(calls)
        return (calls + (f"/*{_filler(rng, pad - 4)}*/" if pad >= 4 else " " * pad)).encode()

    def _rule(self, c: int) -> str:
        if self.objs[c]["type"] == "font":
            return f"@font-face{{font-family:f{c};src:url({self.url(c)})}}"
        return f"#i{c}{{background:url({self.url(c)}) 0 0/100% 100%}}"

    def _call(self, c: int) -> str:
        kind = {"js": "j", "image": "i", "other": "x"}[self.objs[c]["type"]]
        return f'L({self.objs[c]["origin"]},{c},"{kind}");'

    def _element(self, c: int) -> str:
        o, parent = self.objs[c], self.objs[self.objs[c]["parent"]]
        r = self.rect.get(c)
        place = f'class=a style="{_style(r)}"' if r else "class=b"
        if o["type"] == "html":
            return f"<iframe src={self.url(c)} " + (f'class=a style="{_style(r)}"' if r else "class=c") + "></iframe>"
        if o["type"] == "font":
            return f"<span style=font-family:f{c}>a</span>"
        if o["type"] != "image":
            return ""
        if parent["type"] == "html":
            return f"<img src={self.url(c)} {place}>"
        return f"<div id={'i' if parent['type'] == 'css' else 's'}{c} {place}></div>"

    def _html(self, d: int, rng: random.Random) -> str:
        o, housed = self.objs[d], self.housed[d]
        kinds = {self.objs[c]["type"] for c in housed}
        # The root's empty icon keeps Chromium from requesting /favicon.ico (not a corpus object).
        head = ["<!doctype html><html><head><meta charset=utf-8>", '<link rel=icon href="data:,">' if d == 0 else ""]
        head.append(f"<style>{_BASE_CSS}</style>")
        if kinds & {"js", "other"}:
            head.append(_HELPER.format(page=self.page, suffix=HOST_SUFFIX))
        direct = self.kids[d]
        head += [f"<link rel=stylesheet href={self.url(c)}>" for c in direct if self.objs[c]["type"] == "css"]
        faces = "".join(self._rule(c) for c in direct if self.objs[c]["type"] == "font")
        if faces:
            head.append(f"<style>{faces}</style>")
        above = "".join(self._element(c) for c in housed if c in self.rect)
        below = "".join(self._element(c) for c in housed if c not in self.rect)
        h = self.rect[d][3] if d in self.rect else (VIEWPORT[1] if d == 0 else 150)
        tail = "".join(f"<script src={self.url(c)}></script>" for c in direct if self.objs[c]["type"] == "js")
        xhr = "".join(self._call(c) for c in direct if self.objs[c]["type"] == "other")
        tail += f"<script>{xhr}</script>" if xhr else ""
        text = self.rect.get(-1 - d)
        pre = "".join(head) + "</head><body>" + (f'<div class="a t" style="{_style(text)}">' if text else "")
        post = ("</div>" if text else "") + above + f'<div class=f style="top:{h + 40}px">{below}</div>' + tail
        end = "</body></html>"
        pad = o["size"] - len(pre) - len(post) - len(end)
        if text:
            return pre + _filler(rng, pad) + post + end
        return pre + post + (f"<!--{_filler(rng, pad - 7)}-->" if pad >= 7 else " " * max(pad, 0)) + end


def materialise_site(seed: int, pages: list[int], root: Path) -> Site:
    """Write pages `pages` of corpus `seed` as files under `root/<hostname>/` (`index.html` is the page's
    root document, `<id>.<ext>` the others) and return the Site that names them."""
    root = Path(root)
    site = Site(seed, root, {})
    for page in dict.fromkeys(pages):
        objs = corpus.page_objects(seed, page).to_dicts()
        p = _Page(seed, page, objs)
        hosts = [hostname(page, k) for k in range(max(o["origin"] for o in objs) + 1)]
        files, written, over = {}, 0, 0
        for o in objs:
            path = root / hosts[o["origin"]] / ("index.html" if o["id"] == 0 else f"{o['id']}.{_EXT[o['type']]}")
            path.parent.mkdir(parents=True, exist_ok=True)
            data = p.content(o["id"])
            path.write_bytes(data)
            files[o["id"]], written, over = path, written + len(data), over + (len(data) > o["size"])
        corpus_bytes = sum(o["size"] for o in objs)
        conns = len({(o["origin"], p.anonymous(o["id"])) for o in objs})
        site.pages[page] = SitePage(
            page, f"https://{hosts[0]}/", hosts, len(objs), corpus_bytes, written, over, files, conns
        )
    return site


# --- the server -----------------------------------------------------------------------------------------


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
