"""Property tests (hypothesis) over the scenario schema and the command line's arguments: any generated
input either runs or gets one line naming what is wrong; never a traceback, a hang, or a write outside
`--out`."""

import copy
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leoguard import LeoguardError
from leoguard.badinputs import CHAIN, Case, run_case

BASE = {
    "duration_s": 0.2,
    "topology": {"kind": "chain", "hops": 2, "rate_mbps": 10, "delay_ms": 1},
    "flows": [{"kind": "tcp", "src": 0, "dst": 2}],
}
ODD = st.one_of(
    st.sampled_from([0, -1, 1, 2, 1e-9, 1e12, 2**63, 2**64, -(2**70), math.nan, math.inf, -math.inf, True, False]),
    st.sampled_from(["", "x" * 300, "../..", "n0", "cubic", "bbr", "tcp", "cbr", "chain", "bernoulli", [], {}, [1, 2]]),
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
KEYS = {
    (): ["duration_s", "seed", "name", "sample_every_s", "link_sample_every_s", "app_delay_every", "nodes", "bogus"],
    ("topology",): ["kind", "hops", "rate_mbps", "delay_ms", "queue_bytes", "queue_packets", "loss", "loss_on"],
    ("flows", 0): ["kind", "src", "dst", "cc", "bytes", "rate_mbps", "size", "start_s", "delay_sensitive", "pages"],
}


def _set(spec, where, key, value):
    d = copy.deepcopy(spec)
    cur = d
    for k in where:
        cur = cur[k]
    cur[key] = value
    return d


mutation = st.sampled_from(list(KEYS)).flatmap(lambda w: st.tuples(st.just(w), st.sampled_from(KEYS[w]), ODD))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=3))
def test_any_scenario_runs_or_gets_one_line_naming_a_field(mutations):
    from leoguard.scenario import from_dict
    from leoguard.simulate import simulate

    spec = BASE
    for where, key, value in mutations:
        spec = _set(spec, where, key, value)
    try:
        sc = from_dict(spec)
    except LeoguardError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith("invalid scenario <dict>: ")
        assert len(msg) < 2000
        return
    # Valid: it runs (briefly) to the end, or refuses with a LeoguardError.
    sc = sc.model_copy(update={"duration_s": min(sc.duration_s, 0.05)})
    try:
        simulate(sc)
    except LeoguardError as e:
        assert "\n" not in str(e)


ARG = st.one_of(
    st.sampled_from(["0", "-1", "1", "nan", "inf", "-inf", "1e300", "9" * 25, "", "abc", "1e-9", "--json", ","]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12),
)
TEMPLATES = [
    ["path", "{}", "London", "--duration", "{}", "--step", "1", "--out", "out/p", "--no-plot"],
    ["path", "Paris", "London", "--duration", "2", "--step", "{}", "--seed", "{}", "--out", "out/p", "--no-plot"],
    ["path", "Paris", "London", "--duration", "2", "--interruption", "{}", "--out", "out/p", "--no-plot"],
    ["beams", "{}", "--t", "{}"],
    ["beams", "London", "--resolution", "{}", "--min-elevation", "{}"],
    ["places", "find", "{}"],
    ["places", "top", "{}"],
    ["constellation", "info", "{}"],
    ["run", "s.toml", "--seed", "{}", "--duration", "{}", "--out", "out/r"],
    ["run", "s.toml", "--out", "{}"],
    ["results", "list", "--store", "{}"],
    ["bench", "fec", "--blocks", "{}"],
]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(TEMPLATES), st.lists(ARG, min_size=2, max_size=2))
def test_any_arguments_run_or_get_one_line(tmp_path_factory, template, args):
    it = iter(args)
    argv = [next(it) if a == "{}" else a for a in template]
    if "--out" in argv and argv[argv.index("--out") + 1] not in ("out/p", "out/r"):
        # A free --out must stay under the scratch directory's out/ for the write check to hold.
        at = argv.index("--out") + 1
        argv[at] = "out/x" + argv[at].replace("/", "_")
    if argv[:2] == ["bench", "fec"] and argv[-1].isascii() and argv[-1].isdigit() and int(argv[-1]) > 0:
        argv[-1] = "1"  # a valid count runs the benchmark: keep it short
    o = run_case(Case("generated", argv, "", {"s.toml": CHAIN}), tmp_path_factory.mktemp("cli"), limit_s=60)
    lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in o.stderr and "hung" not in o.stderr, (argv, o.stderr[-2000:])
    assert o.status in (0, 2), (argv, o.status, o.stderr[-2000:])
    if o.status == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, lines)
    assert o.wrote_outside == [], (argv, o.wrote_outside)
