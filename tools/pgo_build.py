"""Builds the Python extension with profile-guided optimisation (what `make build` runs).

1. builds `leoguard._core` instrumented (`-Cprofile-generate`, target/pgo-gen);
2. runs tools/pgo_train.py on a copy of the package holding that build, which writes the profile;
3. merges the profile with the toolchain's own `llvm-profdata` (rustup component `llvm-tools`,
   installed here when missing);
4. builds and installs the extension with the profile (`-Cprofile-use`, target/pgo-use) through
   `maturin develop`, as the plain build does.

The profile only steers the compiler's layout and inlining: the optimised build computes the same
results (docs/performance.md, "Kept"). Nothing is redone while the Rust sources, the toolchain and
these two scripts are unchanged (a stamp in the virtual environment). When `llvm-profdata` cannot be
had (no network to the Rust toolchain's server, say) or a step fails (the training run included), the
extension is built without a profile, as before, and the build says why on stderr; `--no-pgo`
(`make build PGO=0`) asks for that build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PGO = ROOT / "target" / "pgo"
#: What the profile and the optimised build depend on, besides the toolchain.
INPUTS = ("crates", "Cargo.toml", "Cargo.lock", "tools/pgo_build.py", "tools/pgo_train.py")


class StepError(Exception):
    """A step of the profile-guided build failed (the plain build is tried instead)."""


def say(msg: str) -> None:
    print(f"pgo_build: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
    say(" ".join(cmd))
    done = subprocess.run(cmd, env=env, cwd=cwd)
    if done.returncode != 0:
        raise StepError(f"exit {done.returncode} from {' '.join(cmd)}")


def inputs_hash(venv: Path, root: Path = ROOT) -> str:
    """sha256 of the Rust sources, the lock file, these scripts, rustc's version, RUSTFLAGS and the
    virtual environment's path (build outputs under any `target/` left out)."""
    h = hashlib.sha256()
    files: list[Path] = []
    for name in INPUTS:
        p = root / name
        if p.is_dir():
            files += [f for f in p.rglob("*") if f.is_file() and "target" not in f.relative_to(root).parts]
        elif p.is_file():
            files.append(p)
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    rustc = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    h.update(rustc.encode() + os.environ.get("RUSTFLAGS", "").encode() + str(venv.resolve()).encode())
    return h.hexdigest()


def profdata_tool() -> tuple[Path | None, str]:
    """The toolchain's llvm-profdata (the same LLVM as rustc), installing `llvm-tools` if needed."""
    try:
        sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True).stdout
        version = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, f"rustc did not say where its toolchain is ({e})"
    host = next((line.split(":", 1)[1].strip() for line in version.splitlines() if line.startswith("host:")), None)
    if host is None:
        return None, "`rustc -vV` names no host"
    tool = Path(sysroot.strip()) / "lib" / "rustlib" / host / "bin" / "llvm-profdata"
    if tool.is_file():
        return tool, ""
    if shutil.which("rustup") is None:
        return None, "rustup is not installed, so the llvm-tools component cannot be added"
    say("adding the rustup component llvm-tools (llvm-profdata)")
    try:
        done = subprocess.run(["rustup", "component", "add", "llvm-tools"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "`rustup component add llvm-tools` did not finish in 300 s"
    if done.returncode != 0 or not tool.is_file():
        return None, f"`rustup component add llvm-tools` failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return tool, ""


def plain_build(venv: Path) -> None:
    """The extension without a profile; a failure here is the build's failure."""
    try:
        run([str(venv / "bin" / "maturin"), "develop", "--profile", "dist", "-q"])
    except StepError as e:
        raise SystemExit(f"pgo_build: the build failed: {e}") from None


def pgo_build(venv: Path, tool: Path, digest: str) -> None:
    base_flags = os.environ.get("RUSTFLAGS", "").strip()
    raw = PGO / "raw"
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True)
    gen = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target" / "pgo-gen"))
    gen["RUSTFLAGS"] = f"{base_flags} -Cprofile-generate={raw}".strip()
    run(["cargo", "build", "-q", "--profile", "dist", "-p", "leoguard-py"], env=gen)

    # The package as installed, with the instrumented extension in place of the built one.
    pkg = PGO / "pkg"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(
        ROOT / "python" / "leoguard", pkg / "leoguard", ignore=shutil.ignore_patterns("_core*.so", "__pycache__")
    )
    shutil.copy2(ROOT / "target" / "pgo-gen" / "dist" / "lib_core.so", pkg / "leoguard" / "_core.abi3.so")
    train = dict(os.environ, PYTHONPATH=str(pkg), OPENBLAS_NUM_THREADS="1")
    run([str(venv / "bin" / "python"), str(ROOT / "tools" / "pgo_train.py")], env=train, cwd=PGO)
    if not any(raw.glob("*.profraw")):
        raise StepError(f"the training run wrote no profile into {raw}")

    profile = PGO / f"{digest[:16]}.profdata"
    for old in PGO.glob("*.profdata"):
        old.unlink()
    run([str(tool), "merge", "-o", str(profile), str(raw)])
    use = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target" / "pgo-use"))
    # The profile's path names it by its inputs, so a new profile rebuilds every crate with it.
    use["RUSTFLAGS"] = f"{base_flags} -Cprofile-use={profile} -Cllvm-args=-pgo-warn-missing-function=false".strip()
    run([str(venv / "bin" / "maturin"), "develop", "--profile", "dist", "-q"], env=use)
    shutil.rmtree(pkg, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv", help="virtual environment to install into")
    ap.add_argument("--no-pgo", action="store_true", help="build without a profile (the plain dist build)")
    args = ap.parse_args()
    stamp = args.venv / ".leoguard-pgo"
    if args.no_pgo:
        stamp.unlink(missing_ok=True)
        plain_build(args.venv)
        return 0
    digest = inputs_hash(args.venv)
    ext = ROOT / "python" / "leoguard" / "_core.abi3.so"
    if stamp.is_file() and ext.is_file():
        old = json.loads(stamp.read_text())
        if old.get("inputs") == digest and old.get("extension") == hashlib.sha256(ext.read_bytes()).hexdigest():
            say("the profile-guided build is up to date")
            return 0
    stamp.unlink(missing_ok=True)
    tool, why = profdata_tool()
    if tool is not None:
        try:
            pgo_build(args.venv, tool, digest)
        except StepError as e:
            tool, why = None, f"a step failed: {e}"
    if tool is None:
        say(f"WARNING: building WITHOUT profile-guided optimisation: {why}.")
        say("The engine runs about 10-15 % slower than the figures in docs/performance.md (same results).")
        plain_build(args.venv)
        return 0
    stamp.write_text(json.dumps({"inputs": digest, "extension": hashlib.sha256(ext.read_bytes()).hexdigest()}))
    say("built with profile-guided optimisation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
