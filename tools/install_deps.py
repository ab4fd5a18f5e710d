"""Install leoguard's runtime, dev, ray and rl dependencies (from pyproject.toml) into the running interpreter,
without building leoguard itself (`maturin develop` does that). Used by `make setup`."""

import subprocess
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
extras = project["optional-dependencies"]
deps = project["dependencies"] + extras["dev"] + extras["ray"] + extras["rl"]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q", *deps]))
