"""Install leoguard's runtime and dev dependencies (from pyproject.toml) into the running interpreter,
without building leoguard itself (`maturin develop` does that). Used by `make setup`."""

import subprocess
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
deps = project["dependencies"] + project["optional-dependencies"]["dev"]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q", *deps]))
