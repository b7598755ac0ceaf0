"""The per-step measurements every milepost adapter reports, under one set of names.

Agent-RL frameworks ask environments for per-turn credit (``turn_rewards``), a state identity for anchor-state
groups (``env_state_hash``, GiGPO-style) and a distance to the goal. milepost knows the last one exactly, so every
adapter (OpenEnv observation metadata, verifiers state, SkyRL-gym metadata, verl's agent loop, Gymnasium ``info``)
reports the same keys, computed here once:

============================  =========================================================================
key                           meaning
============================  =========================================================================
``goal_distance``             d(s_0, g): the task's optimal distance in atomic actions
``remaining_distance``        d(s_t+1, g) after this step in the current mode's units; None in a dead end
``optimal_advantage``         A* = d(s_t) - d(s_t+1) - c_t of the step just taken, c_t = max(1, actions
                              applied); -inf into a dead end (sent as None over JSON), -c_t inside one
                              (``evaluation.credit.truth``'s rule: no progress is possible, the cost stays)
``turn_rewards``              the environment's scalar reward of every turn so far, in order
``env_state_hash``            sha256 hex of the state's identity (``Rules.state_key`` where the game has
                              one, else its rendered state without feedback): equal states, equal hashes
============================  =========================================================================

:class:`ConventionTracker` keeps the running parts (the previous distance, the reward list) for an adapter that
sees one step at a time. :class:`ConventionsInfo` is the Gymnasium form: an opt-in wrapper that adds the keys to
``info`` of ``reset`` and ``step`` (``milepost.types.StepInfo``, shared by every caller of the core environments,
stays as it is); ``milepost.integrations.gym_vector.make_vec(..., conventions=True)`` wraps every sub-environment.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, SupportsFloat, TypedDict

import gymnasium

from milepost.envs.base import TextEnv
from milepost.types import StepInfo

__all__ = [
    "CONVENTION_KEYS",
    "ConventionTracker",
    "Conventions",
    "ConventionsInfo",
    "optimal_advantage",
    "state_hash",
]

CONVENTION_KEYS = (
    "goal_distance",
    "remaining_distance",
    "optimal_advantage",
    "turn_rewards",
    "env_state_hash",
)


class Conventions(TypedDict):
    goal_distance: int
    remaining_distance: int | None
    optimal_advantage: float | None  # None: the step entered a dead end (-inf, which JSON cannot carry)
    turn_rewards: list[float]
    env_state_hash: str


def state_hash(env: TextEnv[Any, Any]) -> str:
    """sha256 hex of the live state's identity: ``state_key()`` where the game defines one, else the rendered
    state with no feedback line (which names the whole state in Sudoku and on every web-shop page)."""
    rules = env.rules
    if rules is None:
        raise RuntimeError("call reset() first")
    key = env.state_key()
    text = f"key:{key!r}" if key is not None else f"render:{rules.render(None)}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def optimal_advantage(before: int | None, after: int | None, actions_applied: int) -> float:
    """A*(s_t, a_t) = d(s_t) - d(s_t+1) - c_t with unit action cost (``evaluation.credit.truth``'s rule): 0 for
    an optimal step, less for anything else, -inf into a dead end, -c_t for a step already inside one."""
    if before is None:
        return -float(max(1, actions_applied))
    if after is None:
        return -math.inf
    return float(before - after - max(1, actions_applied))


@dataclass
class ConventionTracker:
    """The running conventions of one episode: call :meth:`reset` after ``env.reset`` and :meth:`step` after
    each ``env.step``."""

    goal_distance: int = 0
    distance: int | None = None
    turn_rewards: list[float] = field(default_factory=list)

    def reset(self, env: TextEnv[Any, Any], info: StepInfo) -> Conventions:
        self.goal_distance = int(info["goal_distance"])
        self.distance = info["remaining_distance"]
        self.turn_rewards = []
        return Conventions(
            goal_distance=self.goal_distance,
            remaining_distance=self.distance,
            optimal_advantage=0.0,
            turn_rewards=[],
            env_state_hash=state_hash(env),
        )

    def step(self, env: TextEnv[Any, Any], reward: float, info: StepInfo) -> Conventions:
        after = info["remaining_distance"]
        a_star = optimal_advantage(self.distance, after, len(info["actions"]))
        self.distance = after
        self.turn_rewards.append(float(reward))
        return Conventions(
            goal_distance=self.goal_distance,
            remaining_distance=after,
            optimal_advantage=None if math.isinf(a_star) else a_star,
            turn_rewards=list(self.turn_rewards),
            env_state_hash=state_hash(env),
        )


class ConventionsInfo(gymnasium.Wrapper[str, str, str, str]):
    """A milepost Gymnasium environment whose ``info`` also carries ``CONVENTION_KEYS`` (opt-in:
    ``ConventionsInfo(gymnasium.make("milepost/Sudoku-v0", size=4))``)."""

    def __init__(self, env: gymnasium.Env[str, str]) -> None:
        super().__init__(env)
        if not isinstance(env.unwrapped, TextEnv):
            raise TypeError(f"ConventionsInfo wraps a milepost environment, not {type(env.unwrapped).__name__}")
        self.tracker = ConventionTracker()

    def _text_env(self) -> TextEnv[Any, Any]:
        base = self.env.unwrapped
        assert isinstance(base, TextEnv)
        return base

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        conv = self.tracker.reset(self._text_env(), info)  # type: ignore[arg-type]
        return obs, {**info, **conv}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        conv = self.tracker.step(self._text_env(), float(reward), info)  # type: ignore[arg-type]
        return obs, reward, terminated, truncated, {**info, **conv}
