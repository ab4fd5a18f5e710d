"""The emulator's real-browser web workload (leoguard.emu.web, docs/emu-web.md): corpus pages written as
files, served by nginx (HTTP/2, TLS 1.3) in one network namespace and loaded by headless Chromium in
another, over a plain veth pair with IPv6 addresses. The namespace tests need root, `ip`, chromium,
chromium-driver, nginx and openssl (`make setup`); they FAIL, never skip, without them."""

from __future__ import annotations

import io
import os
import re
import secrets
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from leoguard import sysdeps, web
from leoguard.emu import web as emu_web
from leoguard.emu.web import WebServer, load_pages, materialise_site, speed_index, visual_progress
from leoguard.errors import LeoguardError

SEED = 42
PAGES = [0, 1, 2]
TIMEOUT_S = 60.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def netns(request: pytest.FixtureRequest) -> dict[str, str]:
    """Client and server namespaces joined by a veth pair, fdXX:..::1 (client) and ::2 (server)."""
    if os.geteuid() != 0:
        pytest.fail("the emulator web tests need root (network namespaces): run them as root")
    tag = secrets.token_hex(3)
    cli, srv = f"lgw-c-{tag}", f"lgw-s-{tag}"
    prefix, v4 = f"fd{tag[:2]}:{tag[2:]}::", f"10.{int(tag[:2], 16)}.{int(tag[2:4], 16)}."
    made: list[str] = []

    def cleanup() -> None:  # deleting a namespace deletes its end of the veth pair, and so the pair
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    request.addfinalizer(cleanup)
    try:
        for ns in (cli, srv):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("link", "add", f"lgwc{tag}", "netns", cli, "type", "veth", "peer", "name", f"lgws{tag}", "netns", srv)
        for ns, dev, host in ((cli, f"lgwc{tag}", 1), (srv, f"lgws{tag}", 2)):
            _ip("-n", ns, "addr", "add", f"{prefix}{host}/64", "dev", dev, "nodad")
            _ip("-n", ns, "addr", "add", f"{v4}{host}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, OSError) as e:
        detail = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else e
        pytest.fail(f"cannot build the network-namespace test bed (needs root and `ip netns`): {detail}")
    return {"cli": cli, "srv": srv, "cli_addr": f"{prefix}1", "srv_addr": f"{prefix}2", "srv_v4": f"{v4}2"}


@pytest.fixture(scope="module")
def loaded(netns: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three corpus pages served and loaded once; the tests below check different sides of it."""
    site = materialise_site(SEED, PAGES, tmp_path_factory.mktemp("site"))
    t = time.monotonic()
    with WebServer(netns["srv"], site, [netns["srv_addr"]]) as server:
        rows = load_pages(netns["cli"], netns["srv_addr"], site, PAGES, timeout_s=TIMEOUT_S)
        log = server.access_log()
    elapsed = time.monotonic() - t
    assert site.spki is None  # the server's key is pinned only while it serves
    for r in rows:
        print(
            f"\npage {r['page']}: PLT {r['plt_ms']} ms, Speed Index {r['speed_index_ms']} ms, first paint "
            f"{r.get('first_paint_ms')} ms, visually complete {r.get('visually_complete_ms')} ms, "
            f"{r['requests']} requests, {r['bytes']} B, {r['protocol']}, {r.get('frames')} frames, error {r['error']}"
        )
    print(f"serve + load of {len(PAGES)} pages: {elapsed:.1f} s")
    return {"site": site, "rows": rows, "log": log}


def test_every_page_loads_over_h2_with_exactly_its_corpus_objects(loaded: dict) -> None:
    site, rows = loaded["site"], loaded["rows"]
    assert [r["page"] for r in rows] == PAGES
    corpus = web.corpus(SEED, n=3, first=0).to_dicts()
    for r, c in zip(rows, corpus, strict=True):
        assert r["error"] is None, r
        assert r["protocol"] == "h2" and r["tls"] == "TLS 1.3", r
        # The root HTML sets an empty icon, so the browser requests no /favicon.ico: requests = objects.
        assert r["requests"] == c["objects"] == site.pages[r["page"]].objects, r
        assert r["requests_failed"] == 0
        assert r["viewport"] == list(emu_web.VIEWPORT)


def test_bytes_are_the_corpus_bytes_plus_headers(loaded: dict) -> None:
    for r in loaded["rows"]:
        page = loaded["site"].pages[r["page"]]
        assert page.oversize == 0 and page.bytes == page.corpus_bytes
        # DevTools' encodedDataLength: body plus HTTP/2 header bytes (~200 B a response here).
        headers = r["bytes"] - page.corpus_bytes
        assert 50 * r["requests"] < headers < 400 * r["requests"], (r, page.corpus_bytes)
        assert headers < 0.03 * page.corpus_bytes


def test_server_saw_every_object_once_on_one_connection_per_origin_and_mode(loaded: dict) -> None:
    site, log = loaded["site"], loaded["log"]
    assert all(e["protocol"] == "HTTP/2.0" and e["tls"] == "TLSv1.3" and e["status"] == 200 for e in log)
    for p, page in site.pages.items():
        mine = [e for e in log if e["host"].endswith(f".p{p}.{emu_web.HOST_SUFFIX}")]
        assert len(mine) == page.objects
        assert sum(e["bytes"] for e in mine) == page.corpus_bytes  # nginx's body bytes: the files, exactly
        conns: dict[int, set[str]] = defaultdict(set)
        for e in mine:
            conns[e["connection"]].add(e["host"])
        assert all(len(hosts) == 1 for hosts in conns.values())  # no HTTP/2 coalescing across origins
        assert len({next(iter(h)) for h in conns.values()}) == len(page.hosts)
        # One connection per origin and credentials mode (cross-origin fonts and fetches are anonymous).
        assert len(conns) == page.connections


def test_plt_and_speed_index_are_plausible(loaded: dict) -> None:
    for r in loaded["rows"]:
        assert 0 < r["plt_ms"] < TIMEOUT_S * 1000
        # Frames are stamped at the compositor's swap, which trails the load event by a frame or more
        # on a loaded machine: hence the slack.
        assert 0 < r["speed_index_ms"] <= r["plt_ms"] * 1.05 + 100, r
        # Until the first contentful paint the page is blank (visual completeness 0).
        assert r["speed_index_ms"] >= r["first_paint_ms"] - 50, r
        assert r["frames"] >= 2


def test_failed_and_timed_out_pages_are_rows_not_exceptions(netns: dict[str, str], tmp_path: Path) -> None:
    site = materialise_site(SEED, [8, 3], tmp_path)
    victim = next(f for i, f in site.pages[8].files.items() if i > 0 and f.suffix == ".png")
    victim.unlink()
    with WebServer(netns["srv"], site, [netns["srv_addr"]]):
        rows = load_pages(netns["cli"], netns["srv_addr"], site, [8, 3], timeout_s=TIMEOUT_S)
        late = load_pages(netns["cli"], netns["srv_addr"], site, [3], timeout_s=0.001)
    # A 404 for an image: Chromium's opaque-response blocking fails the request (ERR_BLOCKED_BY_ORB).
    assert rows[0]["page"] == 8 and re.search("failed|non-2xx", rows[0]["error"] or ""), rows[0]
    assert rows[0]["requests"] == site.pages[8].objects
    assert rows[1]["page"] == 3 and rows[1]["error"] is None and rows[1]["requests"] == site.pages[3].objects
    assert late[0]["page"] == 3 and "timeout" in late[0]["error"] and late[0]["plt_ms"] is None, late[0]
    # With the server gone the connection is refused: an error row again.
    gone = load_pages(netns["cli"], netns["srv_addr"], site, [3], timeout_s=10, spki="AAAA")
    assert gone[0]["error"] and gone[0]["plt_ms"] is None, gone[0]


def _connects(ns: str, addr: str) -> bool:
    code = f"import socket; socket.create_connection(({addr!r}, 443), timeout=5).close()"
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True).returncode == 0


def test_server_listens_on_v6_and_v4_and_cleans_up_when_the_body_raises(netns: dict[str, str], tmp_path: Path) -> None:
    site = materialise_site(SEED, [3], tmp_path)
    with (
        pytest.raises(RuntimeError, match="body failed"),
        WebServer(netns["srv"], site, [netns["srv_addr"], netns["srv_v4"]]) as server,
    ):
        assert server.proc is not None and server.dir is not None
        pid, workdir = server.proc.pid, server.dir
        assert (workdir / "nginx.conf").is_file() and site.spki
        assert _connects(netns["cli"], netns["srv_addr"]) and _connects(netns["cli"], netns["srv_v4"])
        raise RuntimeError("body failed")
    assert not Path(f"/proc/{pid}").exists() or b"nginx" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not workdir.exists() and site.spki is None
    assert not _connects(netns["cli"], netns["srv_addr"])


def test_materialised_files_are_the_corpus_objects(tmp_path: Path) -> None:
    site = materialise_site(SEED, [0], tmp_path)
    page = site.pages[0]
    objs = web.page_objects(SEED, 0).to_dicts()
    assert page.url == "https://o0.p0.leoguard.test/" and page.objects == len(objs)
    root = page.files[0].read_text()
    assert '<link rel=icon href="data:,">' in root
    for o in objs:
        f = page.files[o["id"]]
        assert f.parent.name == emu_web.hostname(0, o["origin"])
        assert f.stat().st_size == o["size"], o
        if o["type"] == "image":
            img = Image.open(io.BytesIO(f.read_bytes()))
            img.load()  # a real, decodable image
            assert min(img.convert("RGB").getpixel((0, 0))) < 249  # not white: it counts for the Speed Index
        if o["parent"] == 0:  # the root document names each child it reveals
            name = f"/{o['id']}.{f.suffix[1:]}"
            assert name in root or f"L({o['origin']},{o['id']}," in root, o
    # Children of stylesheets and scripts are named by them, not by the HTML: the dependency depth is real.
    for o in objs:
        if o["parent"] is not None and o["parent"] != 0 and objs[o["parent"]]["type"] in ("css", "js"):
            parent = page.files[o["parent"]].read_text()
            assert f"/{o['id']}." in parent or f"L({o['origin']},{o['id']}," in parent, o
    # Above-the-fold images get visible area in proportion to their visual weight.
    areas = {}
    for m in re.finditer(r"<img src=\S*?/(\d+)\.png class=a style=\"[^\"]*width:(\d+)px;height:(\d+)px", root):
        areas[int(m[1])] = int(m[2]) * int(m[3])
    visual = {o["id"]: o["visual_weight"] for o in objs if o["type"] == "image" and o["visual_weight"] > 0}
    assert areas and set(areas) <= set(visual)
    total_w = sum(o["visual_weight"] for o in objs if o["visual_weight"] > 0)
    for i, a in areas.items():
        assert a == pytest.approx(visual[i] / total_w * 1280 * 720, rel=0.05, abs=800), i


def test_speed_index_by_histograms_on_a_hand_case() -> None:
    # Frames at 100, 200, 300 ms: the final frame's histogram differs from blank in 100 counts; the frame
    # at 100 ms has made 25 of them, the one at 200 ms 75. SI = 100 + 0.75*100 + 0.25*100 = 200 ms.
    final = np.zeros((3, 256))
    final[0, 10] = final[1, 20] = 50
    first, second = final * 0.25, final * 0.75
    vc = visual_progress([first, second, final])
    assert vc == pytest.approx([0.25, 0.75, 1.0])
    assert speed_index([100.0, 200.0, 300.0], vc) == pytest.approx(200.0)
    # Frames before navigation start do not count; overshooting a bin counts only up to the target.
    assert visual_progress([final * 2, final]) == pytest.approx([1.0, 1.0])
    assert speed_index([-30.0, 50.0], [0.9, 1.0]) == pytest.approx(50.0)


def test_missing_binaries_give_one_line_errors_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sysdeps, "EXTRA_DIRS", ())
    for name, pkg in (("chromium", "chromium"), ("chromedriver", "chromium-driver"), ("nginx", "nginx")):
        with pytest.raises(LeoguardError, match=rf"^{name} is missing: .*package {pkg} .*make setup") as e:
            emu_web.find_binary(name)
        assert "\n" not in str(e.value)
    site = emu_web.Site(SEED, tmp_path, {})
    with pytest.raises(LeoguardError, match="nginx is missing"):
        WebServer("nowhere", site, ["fd00::2"]).__enter__()
    with pytest.raises(LeoguardError, match="chromium is missing"):
        load_pages("nowhere", "fd00::2", site, [], spki="x")
