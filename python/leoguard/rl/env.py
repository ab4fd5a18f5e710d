"""StarTCP's lead-time choice as a Gymnasium environment backed by leoguard's simulator (StarTCP §2.2,
docs/startcp.md "Training the lead policy").

One episode is one simulated StarTCP flow (`leoguard.rl.episode`: the network drawn from the
environment's own generator); one step is one handover. The observation is the policy's input at
the moment StarTCP decides the lead for the next handover (`max_lead` = 1 s before it): the Rust
`LeadState::features` in their raw units (mean RTT ms, RTT variance ms², ACK rate Mbit/s, OWD ms, time
to the handover ms), exactly what the Rust controller feeds a weights file's network before its
`input_mean`/`input_scale` normalisation. The action is that handover's lead in milliseconds, in
[0, `max_lead_ms`]; the reward is `leoguard.rl.episode.window`'s for the 1 s around the handover.

The simulator is sans-IO and runs a scenario start to end, so a step re-runs the episode from its
start with the leads chosen so far (StarTCP's `scripted` policy) to just past the next handover:
the run is deterministic, so the prefix is the same as before and the state recorded at the next
decision is the one the agent would have seen. StarTCP needs two handovers to find the phase, so
the first decision is at the third handover; an episode has `decisions` steps and ends `truncated`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from leoguard.rl.episode import WARMUP_HANDOVERS, EpisodeParams, nearest_handover, observation, scenario, stalls, window
from leoguard.simulate import Results, simulate

#: Run this far past a handover to find its stall's record (the stall has begun by then).
_PAST_S = 0.05
#: Run this far past a handover to close its reward window (and take the sample that ends it).
_WINDOW_END_S = 0.6
#: Networks drawn at most per reset before giving up.
_REDRAWS = 20


class StartcpLeadEnv(gym.Env):
    """StarTCP's lead policy's environment: `decisions` handovers per episode, leads in
    [0, `max_lead_ms`] ms. `options={"params": EpisodeParams}` in `reset` replays a given network
    instead of drawing one."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, decisions: int = 4, max_lead_ms: float = 500.0, period_s: float = 15.0) -> None:
        if decisions < 1:
            raise ValueError(f"decisions = {decisions}: need at least 1")
        if not 0 < max_lead_ms <= 1000:
            raise ValueError(f"max_lead_ms = {max_lead_ms}: must be in (0, 1000] (StarTCP decides 1 s ahead)")
        self.decisions = decisions
        self.max_lead_ms = float(max_lead_ms)
        self.period_s = float(period_s)
        self.observation_space = spaces.Box(low=0.0, high=np.inf, shape=(5,), dtype=np.float64)
        self.action_space = spaces.Box(low=0.0, high=self.max_lead_ms, shape=(1,), dtype=np.float64)
        self.params: EpisodeParams | None = None
        self.leads_ms: list[float] = []
        self._handovers: list[float] = []
        self._obs = np.zeros(5)
        self.sim_seconds = 0.0

    def _run(self, duration_s: float) -> Results:
        assert self.params is not None  # reset() draws them
        self.sim_seconds += duration_s
        return simulate(scenario(self.params, duration_s, list(self.leads_ms)))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        # Spare handovers, in case StarTCP's phase comes one handover late.
        total = WARMUP_HANDOVERS + self.decisions + 2
        given = (options or {}).get("params")
        self.leads_ms = []
        self._handovers = []
        for _ in range(_REDRAWS):
            self.params = given if given is not None else EpisodeParams.draw(self.np_random, total, self.period_s)
            # The first stall: its record holds the state of the first decision. A network where
            # StarTCP stalls for no handover (its phase never settles) gives the agent no decision:
            # draw another.
            for k in range(WARMUP_HANDOVERS + 1, total):
                st = stalls(self._run(self.params.handover_s(k) + _PAST_S))
                if st.height:
                    row = st.row(0, named=True)
                    self._handovers.append(nearest_handover(self.params, row["predicted_ns"]))
                    self._obs = observation(row)
                    return self._obs.copy(), {"params": self.params.summary(), "handover_s": self._handovers[0]}
            if given is not None:
                break
        raise RuntimeError(f"StarTCP made no stall before the last handover of {self.params.summary()}")

    def step(self, action):
        if self.params is None or not self._handovers:
            raise RuntimeError("call reset() before step()")
        lead = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], 0.0, self.max_lead_ms))
        self.leads_ms.append(lead)
        j = len(self.leads_ms) - 1
        h = self._handovers[j]
        # Run on to the next handover's decision (the next observation, also after the last step,
        # so the critic can bootstrap from a true state) when the episode's network has one.
        has_next = h + self.period_s < len(self.params.slot_rtt_ms) * self.period_s
        r = self._run(h + (self.period_s + _PAST_S if has_next else _WINDOW_END_S))
        w = window(r, h, self.params.rate_mbps)
        info: dict[str, Any] = {"handover_s": h, "lead_ms": lead, **w}
        st = stalls(r)
        found = has_next and st.height > j + 1
        if found:
            row = st.row(j + 1, named=True)
            self._handovers.append(nearest_handover(self.params, row["predicted_ns"]))
            self._obs = observation(row)
        # An episode ends (truncated) after `decisions` steps, or early if StarTCP predicted no next
        # handover (then the observation repeats the last one).
        info["missing_stall"] = not found
        done = j + 1 >= self.decisions or not found
        return self._obs.copy(), w["reward"], False, done, info
