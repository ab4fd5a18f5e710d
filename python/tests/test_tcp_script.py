"""`leoguard tcp-script`: packetdrill scripts run against the TCP model through the CLI (a pass, a
failure at the right line, an unsupported feature, and the errors for a missing file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leoguard.cli import main

SCRIPTS = Path(__file__).resolve().parents[2] / "crates" / "leoguard-proto" / "tests" / "packetdrill"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["tcp-script", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_a_passing_script_prints_pass_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(SCRIPTS / "iw10_burst.pkt"))
    assert code == 0
    assert out.strip().endswith("iw10_burst.pkt: pass")


def test_a_failing_and_an_unsupported_script_exit_1_with_their_line(capsys: pytest.CaptureFixture[str]) -> None:
    wrong = SCRIPTS / "runner" / "wrong_seq.pkt"
    unknown = SCRIPTS / "runner" / "unknown_syscall.pkt"
    code, out, _ = _run(capsys, str(wrong), str(unknown))
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[0].endswith("wrong_seq.pkt: fail: line 12: expected `. 6001:10001(4000) ack 1` at 0.100000, "
                             "got `. 5001:6001(1000) ack 1` at 0.100000")  # fmt: skip
    assert lines[1].endswith("unknown_syscall.pkt: unsupported: system call getsockopt() (line 11)")
    code, out, _ = _run(capsys, "--json", str(wrong), str(unknown))
    objs = [json.loads(x) for x in out.strip().splitlines()]
    assert code == 1
    assert (objs[0]["outcome"], objs[0]["line"], objs[0]["syntax"]) == ("fail", 12, False)
    assert (objs[1]["outcome"], objs[1]["feature"]) == ("unsupported", "system call getsockopt()")


def test_a_missing_file_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, str(SCRIPTS / "iw10_burst.pkt"), str(tmp_path / "nope.pkt"))
    assert code == 2
    assert out == ""
    assert err.strip().startswith("error: invalid script") and "nope.pkt: no such file" in err
    assert len(err.strip().splitlines()) == 1
