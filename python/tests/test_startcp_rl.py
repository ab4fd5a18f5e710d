"""StarTCP's learnt lead (issue 14): the Gymnasium environment, the actor-critic's smoke run (a few
episodes, a fixed seed, byte-identical weights), the weights file through the Rust policy, bad weights
files, and the shipped policy."""

import json
import subprocess
import sys

import numpy as np
import pytest

from leoguard.errors import LeoguardError
from leoguard.reproduce.startcp import two_path
from leoguard.sections import STARTCP_WEIGHTS
from leoguard.simulate import simulate


def need_extra() -> None:
    for m in ("gymnasium", "jax", "optax"):
        pytest.importorskip(m, reason="the rl extra (make setup installs it)")


def forward_ms(doc: dict, x: np.ndarray) -> float:
    """The weights file's lead for raw features `x`, as mlp.rs defines it (an independent reading)."""
    h = (x - np.array(doc["input_mean"])) / np.array(doc["input_scale"])
    for layer in doc["layers"]:
        h = np.array(layer["w"]) @ h + np.array(layer["b"])
        h = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0), "linear": lambda v: v}[layer["activation"]](h)
    return float(np.clip(h[0] * doc["output"]["scale_ms"], 0, doc["output"]["max_lead_ms"]))


def run_learnt(path, duration_s=47.0):
    """The two-path experiment with the learnt policy from `path`: one stall (the third handover)."""
    return simulate(two_path("startcp", duration_s=duration_s, startcp={"policy": "learnt", "weights": str(path)}))


def test_the_environment_follows_the_gymnasium_api_and_its_seed():
    need_extra()
    from gymnasium.utils.env_checker import check_env

    from leoguard.rl.env import StartcpLeadEnv

    env = StartcpLeadEnv(decisions=2)
    with pytest.warns(UserWarning):  # it recommends a [-1, 1] action box; ours is in milliseconds
        check_env(env, skip_render_check=True)
    a, info_a = env.reset(seed=11)
    assert env.observation_space.contains(a) and info_a["handover_s"] == 45.0
    # The observation is the state the Rust controller recorded for the stall, 1 s ahead.
    assert 900 < a[4] <= 1000 and a[0] > 0 and a[3] > 0
    steps = [env.step(np.array([x])) for x in (80.0, 120.0)]
    b, info_b = env.reset(seed=11)
    assert info_a == info_b and np.array_equal(a, b)
    again = [env.step(np.array([x])) for x in (80.0, 120.0)]
    assert [s[1] for s in steps] == [s[1] for s in again]
    assert [s[4]["lead_ms"] for s in steps] == [80.0, 120.0]
    assert steps[-1][3] and not steps[0][3]  # truncated after `decisions` handovers
    _, info_c = env.reset(seed=12)
    assert info_c["params"] != info_a["params"]
    # A different lead changes the handover's reward (the action acts on the simulation).
    env.reset(seed=11)
    other = env.step(np.array([0.0]))
    assert other[4]["lost_packets"] > steps[0][4]["lost_packets"]


def test_a_smoke_training_run_is_reproducible_and_the_rust_policy_runs_its_weights(tmp_path):
    need_extra()
    from leoguard.rl.train import TrainConfig, train

    out = tmp_path / "w.json"
    cmd = [sys.executable, "-m", "leoguard.cli", "train", "startcp", "--episodes", "2", "--seed", "3", "--out",
           str(out), "--json"]  # fmt: skip
    cli = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout)
    assert cli["episodes"] == 2 and len(cli["history"]) == 2
    # The same seed in another process gives the same file, byte for byte; another seed does not.
    assert train(TrainConfig(episodes=2, seed=3)).text() == out.read_text(encoding="utf-8")
    assert train(TrainConfig(episodes=1, seed=4, decisions=1)).text() != out.read_text(encoding="utf-8")
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [len(x["w"]) for x in doc["layers"]] == [32, 16, 1]
    assert doc["meta"]["command"] == "leoguard train startcp --episodes 2 --seed 3"
    # The Rust controller loads it and its lead is the network's output on the state it recorded.
    r = run_learnt(out)
    assert r.startcp.height == 1
    row = r.startcp.row(0, named=True)
    x = np.array([row[f"state_{f}"] for f in doc["inputs"]])
    assert row["lead_ns"] / 1e6 == pytest.approx(forward_ms(doc, x), abs=1e-3)


def _doc() -> dict:
    return json.loads(STARTCP_WEIGHTS.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.update(inputs=list(reversed(d["inputs"]))), "inputs"),
        (lambda d: d["layers"][1]["b"].pop(), r"layers\[1\]\.b"),
        (lambda d: d["layers"][2].update(activation="sigmoid"), r"layers\[2\]\.activation"),
        (lambda d: d["input_scale"].__setitem__(2, 0.0), r"input_scale\[2\]"),
        (lambda d: d["output"].update(scale_ms=-1.0), r"output\.scale_ms"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(hidden=[32, 16]), "hidden"),
        (lambda d: d.pop("layers"), "layers"),
    ],
)
def test_a_mismatched_weights_file_is_refused_with_the_field_named(tmp_path, mutate, field):
    doc = _doc()
    mutate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(LeoguardError, match=rf"startcp\.weights.*{field}"):
        run_learnt(bad, duration_s=5.0)


def test_a_truncated_weights_file_is_refused_as_not_json(tmp_path):
    bad = tmp_path / "cut.json"
    bad.write_text(STARTCP_WEIGHTS.read_text(encoding="utf-8")[:500], encoding="utf-8")
    with pytest.raises(LeoguardError, match=r"startcp\.weights.*not valid JSON"):
        run_learnt(bad, duration_s=5.0)


def test_the_shipped_policy_loads_and_its_lead_is_what_the_file_computes():
    doc = _doc()
    assert doc["meta"]["command"].startswith("leoguard train startcp")
    r = run_learnt(STARTCP_WEIGHTS)
    assert r.startcp.height == 1
    row = r.startcp.row(0, named=True)
    lead = row["lead_ns"] / 1e6
    assert 0 < lead <= doc["output"]["max_lead_ms"]
    x = np.array([row[f"state_{f}"] for f in doc["inputs"]])
    assert lead == pytest.approx(forward_ms(doc, x), abs=1e-3)
    # The default weights of policy = "learnt" are the shipped file.
    r2 = simulate(two_path("startcp", duration_s=47.0, startcp={"policy": "learnt"}))
    assert r2.startcp["lead_ns"].to_list() == r.startcp["lead_ns"].to_list()


def test_without_the_extra_leoguard_works_and_training_names_the_extra():
    code = (
        "import sys\n"
        "for m in ('jax', 'optax', 'gymnasium'): sys.modules[m] = None\n"
        "import leoguard.cli, leoguard.rl.compare\n"
        "from leoguard.rl import require\n"
        "try:\n"
        "    require()\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
        "sys.argv = ['leoguard', 'train', 'startcp', '--episodes', '1']\n"
        "leoguard.cli.main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LeoguardError" in p.stdout and "leoguard[rl]" in p.stdout
    assert p.returncode == 2 and "rl extra" in p.stderr


def test_bad_training_arguments_are_refused_with_the_option_named():
    cmd = [sys.executable, "-m", "leoguard.cli", "train", "startcp", "--episodes", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--episodes" in p.stderr


def test_the_comparison_scores_both_policies_on_the_same_handovers():
    from leoguard.rl.compare import draws, evaluate, policies, summary

    nets = draws(1, seed=5)
    assert nets == draws(1, seed=5) and nets != draws(1, seed=6)
    df = evaluate(policies(STARTCP_WEIGHTS), nets, decisions=2)
    assert set(df["policy"]) == {"heuristic", "learnt"}
    s = summary(df)
    assert s["handovers"].to_list()[0] == s["handovers"].to_list()[1] >= 1
    # Each window's reward is alpha * utilisation - beta * loss rate.
    assert np.allclose(df["reward"], df["utilisation"] - 2 * df["loss_rate"])
