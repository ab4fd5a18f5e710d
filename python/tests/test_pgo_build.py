"""tools/pgo_build.py: the profile-guided build is redone exactly when what it depends on changes."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pgo_build():
    spec = importlib.util.spec_from_file_location("pgo_build", ROOT / "tools" / "pgo_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_inputs_hash_follows_rust_sources_and_the_scripts_not_build_outputs(tmp_path: Path) -> None:
    pgo = _pgo_build()
    root = tmp_path / "tree"
    (root / "crates" / "a" / "src").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "Cargo.toml").write_text("[workspace]\n")
    (root / "Cargo.lock").write_text("# lock\n")
    (root / "crates" / "a" / "src" / "lib.rs").write_text("pub fn f() {}\n")
    for name in ("pgo_build.py", "pgo_train.py"):
        shutil.copy2(ROOT / "tools" / name, root / "tools" / name)
    venv = tmp_path / "venv"
    base = pgo.inputs_hash(venv, root)
    assert pgo.inputs_hash(venv, root) == base

    # Build outputs and files outside the inputs leave it alone.
    (root / "crates" / "a" / "target").mkdir()
    (root / "crates" / "a" / "target" / "out.o").write_bytes(b"\x7fELF")
    (root / "README.md").write_text("docs\n")
    assert pgo.inputs_hash(venv, root) == base

    # A changed source, a new source, the lock file, the training script, another venv: each changes it.
    seen = {base}
    for change in (
        lambda: (root / "crates" / "a" / "src" / "lib.rs").write_text("pub fn f() { g() }\n"),
        lambda: (root / "crates" / "a" / "src" / "new.rs").write_text("\n"),
        lambda: (root / "Cargo.lock").write_text("# lock 2\n"),
        lambda: (root / "tools" / "pgo_train.py").write_text("# other training\n"),
    ):
        change()
        h = pgo.inputs_hash(venv, root)
        assert h not in seen
        seen.add(h)
    assert pgo.inputs_hash(tmp_path / "venv2", root) not in seen


def test_without_llvm_profdata_or_after_a_failed_step_the_plain_build_runs_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pgo = _pgo_build()
    built: list[Path] = []
    monkeypatch.setattr(pgo, "plain_build", built.append)
    monkeypatch.setattr(sys, "argv", ["pgo_build.py", "--venv", str(tmp_path)])

    monkeypatch.setattr(pgo, "profdata_tool", lambda: (None, "no llvm-tools here"))
    monkeypatch.setattr(pgo, "pgo_build", lambda *a: pytest.fail("the profile-guided build was tried"))
    assert pgo.main() == 0
    err = capsys.readouterr().err
    assert built == [tmp_path]
    assert "WITHOUT profile-guided optimisation: no llvm-tools here" in err

    def failing(*_: object) -> None:
        raise pgo.StepError("exit 1 from training")

    monkeypatch.setattr(pgo, "profdata_tool", lambda: (tmp_path / "llvm-profdata", ""))
    monkeypatch.setattr(pgo, "pgo_build", failing)
    assert pgo.main() == 0
    assert built == [tmp_path, tmp_path]
    assert "a step failed: exit 1 from training" in capsys.readouterr().err
    assert not (tmp_path / ".leoguard-pgo").exists(), "no stamp: the next build tries the profile again"
