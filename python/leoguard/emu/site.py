"""Pages of leoguard's synthetic web corpus (`leoguard.web`) written out as real files for a real browser:
every object a file of its corpus size, parents referencing their children as the corpus says (HTML tags,
CSS `@font-face`/`url()`, scripts that insert their children), images as real PNGs laid out above the fold
by their visual weight, one hostname per origin (docs/emu-web.md). Used by `leoguard.emu.web`."""

from __future__ import annotations

import hashlib
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leoguard import web as corpus

HOST_SUFFIX = "leoguard.test"
"""Every origin is `o<origin>.p<page>.leoguard.test` (RFC 6761 reserves `.test`)."""
VIEWPORT = (1280, 720)
"""CSS pixels of the browser's viewport; the fold is its bottom edge."""
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
