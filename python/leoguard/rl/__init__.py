"""Offline training of StarTCP's lead policy (StarTCP §2.2; docs/startcp.md "Training the lead
policy"): `episode` (the simulated network and the reward, plain leoguard), `env` (a Gymnasium
environment over it), `train` (the actor-critic, JAX + optax) and `compare` (learnt against the
heuristic). `env` and `train` need the optional `rl` extra (`pip install 'leoguard[rl]'`); leoguard
itself, the shipped weights file and the Rust policy that evaluates it do not.
"""

from __future__ import annotations

import importlib.util

from leoguard.errors import LeoguardError

#: The packages of the `rl` extra (import names), as pyproject.toml lists them.
EXTRA = ("gymnasium", "jax", "optax")


def require() -> None:
    """Raises a `LeoguardError` naming the `rl` extra if any of its packages is missing."""
    missing = [m for m in EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        raise LeoguardError(
            f"training StarTCP's policy needs the rl extra ({', '.join(missing)} missing): "
            "pip install 'leoguard[rl]' (gymnasium, jax[cpu], optax)"
        )
