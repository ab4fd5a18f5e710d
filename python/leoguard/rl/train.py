"""StarTCP's actor-critic (§2.2), trained offline on `StartcpLeadEnv` with JAX and optax (the `rl`
extra), exported as the weights file the Rust controller evaluates (`MlpPolicy`, format
"leoguard-startcp-policy" v1).

- Actor: the Rust file's network, inputs normalised by fixed `INPUT_MEAN`/`INPUT_SCALE` (written
  into the file), hidden layers tanh, a linear output y; the lead is y x `SCALE_MS`, clamped to
  [0, `MAX_LEAD_MS`] (what the Rust side computes). Training explores with a Gaussian around y whose
  standard deviation is one learnt number (not in the file: the deployed policy is the mean).
- Critic: an MLP of the same shape on the same inputs, the state's value.
- Advantage actor-critic, one update per episode: advantage r + gamma V(s') - V(s) (a truncated
  episode bootstraps from its last state), actor loss -log pi(a|s) x advantage - entropy weight x
  entropy, critic loss the squared TD error; Adam for each. Pensieve's conventions (REFERENCE.md:
  actor 1e-4, critic 1e-3, gamma 0.99, a decaying entropy weight), both rates x 10 because this
  budget is hundreds of episodes where Pensieve's is millions of steps.
- Seeded: the environment's draws, the exploration noise and the initial weights all come from
  `seed`; float64 throughout and one thread, so a seed gives the same file byte for byte (on one
  machine and library version).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from leoguard.rl import require

require()
# One thread (shared machines, and a fixed reduction order); set before jax is first imported.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from leoguard.rl.env import StartcpLeadEnv  # noqa: E402
from leoguard.rl.episode import ALPHA, BETA, FEATURES  # noqa: E402

jax.config.update("jax_enable_x64", True)

#: The file's `input_mean` and `input_scale`: fixed from the ranges an episode draws (RTT 40-160 ms
#: plus queueing, variance up to ~1000 ms², ACK rates 0-60 Mbit/s, OWD 10-80 ms, decisions 1 s
#: ahead), not fitted to data, so the normalisation does not depend on a run.
INPUT_MEAN = (100.0, 200.0, 30.0, 50.0, 1000.0)
INPUT_SCALE = (50.0, 400.0, 20.0, 25.0, 100.0)
#: Lead = network output x this (ms).
SCALE_MS = 100.0
#: Longest lead (ms): the action space's bound and the file's `output.max_lead_ms`.
MAX_LEAD_MS = 500.0
#: The file's format (crates/leoguard-proto/src/startcp/mlp.rs).
FORMAT, VERSION = "leoguard-startcp-policy", 1

Params = list[tuple[jax.Array, jax.Array]]


@dataclass(frozen=True)
class TrainConfig:
    """A training run; the defaults are the shipped policy's."""

    episodes: int = 1500
    seed: int = 1
    decisions: int = 4
    hidden: tuple[int, ...] = (32, 16)
    actor_lr: float = 1e-3
    critic_lr: float = 1e-2
    gamma: float = 0.99
    entropy_start: float = 0.01
    entropy_end: float = 0.001
    init_lead_ms: float = 100.0
    init_std_ms: float = 50.0
    min_std_ms: float = 5.0
    max_std_ms: float = 100.0


@dataclass
class TrainResult:
    """The trained actor as a weights-file document, and how training went."""

    weights: dict[str, Any]
    history: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    sim_seconds: float = 0.0

    def text(self) -> str:
        return dumps(self.weights)

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text(), encoding="utf-8")
        return path


def _init(key: jax.Array, sizes: list[int], out_bias: float = 0.0, out_gain: float = 1.0) -> Params:
    """Glorot-uniform layers, rows = outputs (the file's layout); the last scaled by `out_gain` with
    bias `out_bias`."""
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        lim = np.sqrt(6.0 / (n_in + n_out))
        w = jax.random.uniform(keys[i], (n_out, n_in), jnp.float64, -lim, lim)
        b = jnp.zeros(n_out, jnp.float64)
        if i == len(sizes) - 2:
            w, b = w * out_gain, b + out_bias
        params.append((w, b))
    return params


def _mlp(params: Params, x: jax.Array) -> jax.Array:
    """tanh hidden layers, a linear output; x is (batch, 5) normalised, the result (batch,)."""
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w.T + b)
    w, b = params[-1]
    return (x @ w.T + b)[:, 0]


def normalise(obs: np.ndarray) -> np.ndarray:
    """What the Rust controller feeds the network: (features - input_mean) / input_scale."""
    return (np.asarray(obs, dtype=np.float64) - np.array(INPUT_MEAN)) / np.array(INPUT_SCALE)


def _losses(actor_p, critic_p, batch, gamma, ent_w):
    (actor, log_std), critic = actor_p, critic_p
    x, a, r, x2 = batch
    v = _mlp(critic, x)
    target = jax.lax.stop_gradient(r + gamma * _mlp(critic, x2))
    adv = jax.lax.stop_gradient(target - v)
    mu = _mlp(actor, x)
    logp = -0.5 * ((a - mu) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * jnp.log(2 * jnp.pi)
    entropy = log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e)
    actor_loss = -jnp.mean(logp * adv) - ent_w * entropy
    critic_loss = jnp.mean((target - v) ** 2)
    return actor_loss + critic_loss, (actor_loss, critic_loss)


def train(cfg: TrainConfig = TrainConfig(), progress: Callable[[dict[str, float]], None] | None = None) -> TrainResult:
    """Trains the lead policy and returns its weights file document (see the module docs)."""
    if cfg.episodes < 1:
        raise ValueError(f"episodes = {cfg.episodes}: need at least 1")
    t0 = time.perf_counter()
    sizes = [len(FEATURES), *cfg.hidden, 1]
    k_actor, k_critic = jax.random.split(jax.random.key(cfg.seed))
    actor = _init(k_actor, sizes, out_bias=cfg.init_lead_ms / SCALE_MS, out_gain=0.01)
    log_std = jnp.asarray(np.log(cfg.init_std_ms / SCALE_MS))
    critic = _init(k_critic, sizes)
    opt_a, opt_c = optax.adam(cfg.actor_lr), optax.adam(cfg.critic_lr)
    state_a, state_c = opt_a.init((actor, log_std)), opt_c.init(critic)
    lo, hi = np.log(cfg.min_std_ms / SCALE_MS), np.log(cfg.max_std_ms / SCALE_MS)

    @jax.jit
    def update(actor_p, critic_p, state_a, state_c, batch, ent_w):
        grads, (la, lc) = jax.grad(_losses, argnums=(0, 1), has_aux=True)(actor_p, critic_p, batch, cfg.gamma, ent_w)
        ua, state_a = opt_a.update(grads[0], state_a, actor_p)
        uc, state_c = opt_c.update(grads[1], state_c, critic_p)
        actor_p = optax.apply_updates(actor_p, ua)
        actor_p = (actor_p[0], jnp.clip(actor_p[1], lo, hi))
        return actor_p, optax.apply_updates(critic_p, uc), state_a, state_c, la, lc

    mean_of = jax.jit(_mlp)
    env = StartcpLeadEnv(decisions=cfg.decisions, max_lead_ms=MAX_LEAD_MS)
    noise = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1]))
    history: list[dict[str, float]] = []
    for ep in range(cfg.episodes):
        obs, _ = env.reset(seed=cfg.seed if ep == 0 else None)
        xs, acts, rewards, xs2, leads = [], [], [], [], []
        done = False
        while not done:
            x = normalise(obs)
            mu = float(mean_of(actor, jnp.asarray(x[None, :]))[0])
            a = mu + float(np.exp(log_std)) * float(noise.standard_normal())
            lead = float(np.clip(a * SCALE_MS, 0.0, MAX_LEAD_MS))
            obs, reward, _, truncated, _ = env.step(np.array([lead]))
            done = truncated
            xs.append(x)
            acts.append(a)
            rewards.append(reward)
            xs2.append(normalise(obs))
            leads.append(lead)
        frac = ep / max(1, cfg.episodes - 1)
        ent_w = cfg.entropy_start + (cfg.entropy_end - cfg.entropy_start) * frac
        batch = (jnp.asarray(np.array(xs)), jnp.asarray(acts), jnp.asarray(rewards), jnp.asarray(np.array(xs2)))
        (actor, log_std), critic, state_a, state_c, la, lc = update(
            (actor, log_std), critic, state_a, state_c, batch, ent_w
        )
        row = {
            "episode": ep, "reward": float(np.mean(rewards)), "lead_ms": float(np.mean(leads)),
            "std_ms": float(np.exp(log_std)) * SCALE_MS, "actor_loss": float(la), "critic_loss": float(lc),
        }  # fmt: skip
        history.append(row)
        if progress is not None:
            progress(row)
    meta = {
        "trainer": "leoguard.rl.train: advantage actor-critic on StartcpLeadEnv (JAX + optax)",
        "command": f"leoguard train startcp --episodes {cfg.episodes} --seed {cfg.seed}",
        "config": asdict(cfg),
        "reward": {"alpha": ALPHA, "beta": BETA, "window_s": 1.0},
        "final_std_ms": float(np.exp(log_std)) * SCALE_MS,
        "libraries": {"jax": jax.__version__, "optax": optax.__version__},
    }
    doc = weights_doc(actor, meta)
    return TrainResult(doc, history, time.perf_counter() - t0, env.sim_seconds)


def weights_doc(actor: Params, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The weights file document of an actor (tanh hidden layers, linear output)."""
    layers = []
    for i, (w, b) in enumerate(actor):
        act = "linear" if i == len(actor) - 1 else "tanh"
        layers.append({"w": np.asarray(w).tolist(), "b": np.asarray(b).tolist(), "activation": act})
    return {
        "format": FORMAT,
        "version": VERSION,
        "inputs": list(FEATURES),
        "input_mean": list(INPUT_MEAN),
        "input_scale": list(INPUT_SCALE),
        "layers": layers,
        "output": {"scale_ms": SCALE_MS, "max_lead_ms": MAX_LEAD_MS},
        "meta": meta or {},
    }


def dumps(doc: dict[str, Any]) -> str:
    """A weights file's text: one line per matrix row, numbers as Python writes them (round-trip
    exact), so two runs that trained the same weights write the same bytes."""
    lines = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        end = "," if i < len(keys) - 1 else ""
        v = doc[k]
        if k == "layers":
            lines.append('  "layers": [')
            for j, layer in enumerate(v):
                rows = ",\n".join("      " + json.dumps(row) for row in layer["w"])
                lend = "," if j < len(v) - 1 else ""
                lines.append(f'    {{"activation": {json.dumps(layer["activation"])},')
                lines.append(f'     "b": {json.dumps(layer["b"])},')
                lines.append(f'     "w": [\n{rows}]}}{lend}')
            lines.append(f"  ]{end}")
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"
