import os
import subprocess
import sys
from pathlib import Path

import pytest

from leoguard.orbit import Constellation

# Every program the test process starts, recorded here and checked with sysdeps.covered when the
# session ends (test_sysdeps.py checks the source statically; this catches what it cannot see).
STARTED: dict[str, str] = {}
_popen_init = subprocess.Popen.__init__


def _unwrapped(argv: list[str]) -> list[str]:
    """The command an argv runs, looking through `ip netns exec NS`."""
    while len(argv) >= 4 and Path(argv[0]).name == "ip" and argv[1:3] == ["netns", "exec"]:
        argv = argv[4:]
    return argv


def _own(exe: str) -> bool:
    """Programs `make setup` and `make build` install by path: this interpreter, anything in the venv (its
    scripts, binaries that PyPI packages such as Ray ship), the Rust binaries in target/."""
    p = Path(exe)
    if str(p) == sys.executable:
        return True
    homes = (Path(sys.prefix), Path(sys.prefix).resolve(), Path(__file__).resolve().parents[2] / "target")
    return p.is_absolute() and any(q.is_relative_to(h) for q in (p, p.resolve()) for h in homes)


def _recording_init(self, args, *a, **kw):
    argv = [os.fspath(args)] if isinstance(args, str | bytes | os.PathLike) else [os.fspath(x) for x in args]
    argv = _unwrapped([x.decode() if isinstance(x, bytes) else x for x in argv])
    if argv and not kw.get("shell") and not _own(argv[0]):
        STARTED.setdefault(Path(argv[0]).name, " ".join(argv[:6]))
    _popen_init(self, args, *a, **kw)


subprocess.Popen.__init__ = _recording_init  # type: ignore[method-assign]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from leoguard import sysdeps

    bad = {p: cmd for p, cmd in STARTED.items() if not sysdeps.covered(p)}
    if bad:
        lines = "\n".join(f"  {p}: {cmd}" for p, cmd in sorted(bad.items()))
        sys.stderr.write(f"\nthe tests started programs that `make setup` does not install (sysdeps.py):\n{lines}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def starlink() -> Constellation:
    return Constellation.preset("starlink-shell1")


@pytest.fixture(scope="session")
def nyc_lon(starlink):
    """New York - London, 200 s at 100 ms under Starlink's global schedule (the issue's example)."""
    return starlink.path_timeline("New York", "London", duration=200, step=0.1)
