"""Install the Debian packages of every program leoguard starts (python/leoguard/sysdeps.py's
DEBIAN_TOOLS) that this machine lacks, then check that each program is there. Used by `make setup`;
exits non-zero naming what could not be installed."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "sysdeps", Path(__file__).resolve().parents[1] / "python" / "leoguard" / "sysdeps.py"
)
assert spec is not None and spec.loader is not None
sysdeps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sysdeps)

missing = sorted({sysdeps.package(t) for t in sysdeps.DEBIAN_TOOLS if sysdeps.find(t) is None})
if missing:
    print(f"installing {', '.join(missing)} (apt)", flush=True)
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, env=env, stdout=subprocess.DEVNULL)
still = [f"{t} ({sysdeps.package(t)})" for t in sysdeps.DEBIAN_TOOLS if sysdeps.find(t) is None]
if still:
    sys.exit(f"still missing after apt-get install: {', '.join(still)}")
