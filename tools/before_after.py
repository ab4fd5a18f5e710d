"""Before/after tables of the seeded figures: the `--json` outputs of `leoguard demo` and of the
reproductions, run once on each code version into two directories, side by side as markdown.

    leoguard demo --json > DIR/demo.json; leoguard reproduce liquid --json > DIR/liquid.json;
    leoguard reproduce startcp --json > DIR/startcp.json; leoguard reproduce leotp --json > DIR/leotp.json;
    leoguard reproduce satguard --quick --store DIR/store --json > DIR/sg_quick.json
    python tools/before_after.py BEFORE_DIR AFTER_DIR > table.md

Rows are matched by their text fields and order; only rows whose figures changed are listed, with the
number of unchanged rows per experiment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# (file, the figures compared, the fields that name a row)
FILES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (
        "demo.json",
        ("goodput_mbps", "tcp_retransmissions", "endpoint_loss_pct", "owd_p99_ms"),
        ("scheme",),
    ),
    ("liquid.json", ("goodput_bps", "retransmissions", "blocks_recovered"), ("cc", "tunnel")),
    ("startcp.json", ("throughput_mbps", "lost_packets"), ("experiment", "engine", "scheme", "handover")),
    (
        "leotp.json",
        ("throughput_mbps", "owd_ms", "retx_packets"),
        ("experiment", "scheme", "variant", "pair", "loss_pct"),
    ),
    ("sg_quick.json", ("leoguard",), ("metric", "scheme", "pair", "paper")),
]


def _rows(path: Path) -> list[dict[str, Any]]:
    d = json.loads(path.read_text())
    return d["rows"] if isinstance(d, dict) else d


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def table(before: Path, after: Path) -> str:
    out = []
    for name, figures, keys in FILES:
        b, a = before / name, after / name
        if not b.exists() or not a.exists():
            out.append(f"### {name}\n\nmissing: {b if not b.exists() else a}\n")
            continue
        try:
            rb, ra = _rows(b), _rows(a)
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            out.append(f"### {name}\n\nnot a finished run's --json output ({e})\n")
            continue
        if len(rb) != len(ra):
            out.append(f"### {name}\n\nrow counts differ: {len(rb)} before, {len(ra)} after\n")
            continue
        lines = [
            f"### {name}",
            "",
            "| " + " | ".join(keys) + " | " + " | ".join(f"{f} before / after" for f in figures) + " |",
        ]
        lines.append("|" + "---|" * (len(keys) + len(figures)))
        same = 0
        for x, y in zip(rb, ra, strict=True):
            if all(x.get(f) == y.get(f) for f in figures):
                same += 1
                continue
            cells = [_fmt(x.get(k)) for k in keys] + [f"{_fmt(x.get(f))} / {_fmt(y.get(f))}" for f in figures]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"{len(rb) - same} of {len(rb)} rows changed.", ""]
        out.append("\n".join(lines))
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: before_after.py BEFORE_DIR AFTER_DIR", file=sys.stderr)
        return 2
    print(table(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
