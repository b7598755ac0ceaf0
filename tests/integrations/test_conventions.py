"""The conventions every adapter reports (``milepost.integrations.conventions``), in all three environments:
the oracle's A* is 0 on every step, any other step's A* is ``evaluation.credit.truth``'s, state hashes follow
state identity, and ``turn_rewards`` are the step rewards. Checked through the Gymnasium wrapper and the vector
env, which carry them in ``info``."""

from __future__ import annotations

import math
import random
from typing import Any

import gymnasium
import numpy as np
import pytest

from milepost.backends.scripted import ScriptedPolicy
from milepost.envs import make_env
from milepost.evaluation.credit import truth
from milepost.integrations.conventions import (
    CONVENTION_KEYS,
    ConventionsInfo,
    ConventionTracker,
    optimal_advantage,
    state_hash,
)
from milepost.integrations.gym_vector import gym_id, make_vec
from milepost.types import Episode, TerminationReason, Turn

CASES = [("sudoku", {"size": 4}), ("rushhour", {}), ("webshop", {})]
IDS = [c[0] for c in CASES]


def _play(name: str, kwargs: dict[str, Any], policy: ScriptedPolicy, seed: int) -> tuple[list[dict], Episode]:
    """One episode through ``ConventionsInfo(gymnasium.make(...))``: every step's info, and the episode record
    built from the plain environment fields (what the audit reads)."""
    env = ConventionsInfo(gymnasium.make(gym_id(name), **kwargs))
    base = env.unwrapped
    task = make_env(name, **kwargs).sample_task(seed)
    _, info = env.reset(seed=seed, options={"task": task})
    infos, rewards, rng = [info], [], random.Random(seed)
    turns: list[Turn] = []
    done = False
    while not done:
        text = policy.answer(base, rng)
        _, reward, terminated, truncated, info = env.step(text)
        rewards.append(float(reward))
        infos.append(info)
        terms = info["reward_terms"]
        turns.append(
            Turn(len(turns), "", text, list(info["actions"]), float(reward), terms, [], info["remaining_distance"])
        )
        done = terminated or truncated
        assert info["turn_rewards"] == rewards  # the step rewards, in order
    reason = TerminationReason.SOLVED if info["solved"] else TerminationReason.BUDGET_EXHAUSTED
    ep = Episode(task.task_id, "p", 0, seed, reason, bool(info["solved"]), task.goal_distance, len(turns), turns=turns)
    env.close()
    return infos, ep


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_the_oracle_has_zero_optimal_advantage_on_every_step(name: str, kwargs: dict[str, Any]) -> None:
    infos, ep = _play(name, kwargs, ScriptedPolicy("oracle"), seed=3)
    assert all(set(CONVENTION_KEYS) <= set(i) for i in infos)
    assert infos[0]["optimal_advantage"] == 0.0 and infos[0]["turn_rewards"] == []
    assert [i["optimal_advantage"] for i in infos[1:]] == [0.0] * ep.steps
    assert infos[0]["goal_distance"] == ep.goal_distance == ep.steps  # atomic mode: one action per turn
    assert [i["remaining_distance"] for i in infos] == list(range(ep.goal_distance, -1, -1))
    assert ep.success and (truth([ep]).a_star == 0).all()


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_other_steps_have_the_audits_a_star(name: str, kwargs: dict[str, Any]) -> None:
    """Wasted (rejected or idle) and regressing turns: A* < 0, exactly ``truth``'s value (-inf into a dead end
    is None, which JSON can carry)."""
    policy = ScriptedPolicy("noisy-oracle", p=0.5, mode="mixed")
    got: list[float] = []
    want: list[float] = []
    for seed in range(4):
        infos, ep = _play(name, {**kwargs, "max_steps": 30}, policy, seed)
        got += [-math.inf if i["optimal_advantage"] is None else i["optimal_advantage"] for i in infos[1:]]
        want += truth([ep]).a_star.tolist()
    assert got == want
    assert sum(a < 0 for a in got) >= 5 and 0.0 in got


def test_optimal_advantage_by_hand() -> None:
    assert optimal_advantage(5, 4, 1) == 0.0  # one step closer for one action
    assert optimal_advantage(5, 5, 0) == -1.0  # a rejected answer: nothing applied, the turn still costs 1
    assert optimal_advantage(5, 6, 1) == -2.0  # a step away
    assert optimal_advantage(5, 2, 3) == 0.0  # a macro turn of three optimal actions
    assert optimal_advantage(5, None, 1) == -math.inf  # into a dead end
    assert optimal_advantage(None, None, 2) == -2.0  # inside one: truth's rule, the cost alone


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_equal_states_equal_hashes(name: str, kwargs: dict[str, Any]) -> None:
    env = make_env(name, **kwargs)
    tracker = ConventionTracker()
    task = env.sample_task(5)
    _, info = env.reset(options={"task": task})
    start = tracker.reset(env, info)["env_state_hash"]
    _, info = env.reset(options={"task": task})
    assert state_hash(env) == start  # the same task, reset again
    _, reward, _, _, info = env.step("ACTION: this is not a move")  # rejected: the state stays
    rejected = tracker.step(env, float(reward), info)
    assert info["error"] and rejected["env_state_hash"] == start
    _, reward, _, _, info = env.step(ScriptedPolicy("oracle").answer(env, random.Random(0)))
    moved = tracker.step(env, float(reward), info)
    assert moved["env_state_hash"] != start and moved["optimal_advantage"] == 0.0
    other = make_env(name, **kwargs)
    other.reset(options={"task": env.sample_task(6)})
    assert state_hash(other) != start
    assert len(start) == 64 and int(start, 16) >= 0  # sha256 hex


def test_rush_hour_back_and_forth_returns_to_the_same_hash() -> None:
    """A move and its reverse: the state, and so the hash, is the start's again (a GiGPO anchor state)."""
    from milepost.envs.rushhour.rules import oracle_move
    from milepost.envs.rushhour.state import Move

    env = make_env("rushhour")
    env.reset(options={"task": env.sample_task(2)})
    start = state_hash(env)
    move = oracle_move(env.rules)
    assert move is not None
    opposite = {"up": "down", "down": "up", "left": "right", "right": "left"}[move.direction]
    env.step(f"ACTION: {move.text()}")
    assert state_hash(env) != start
    _, _, _, _, info = env.step(f"ACTION: {Move(move.vehicle, opposite).text()}")
    assert info["error"] is None and state_hash(env) == start


def test_make_vec_carries_the_conventions_in_batched_info() -> None:
    vec = make_vec("sudoku", 2, "sync", conventions=True, size=4)
    _, info = vec.reset(seed=0)
    assert set(CONVENTION_KEYS) <= set(info) and len(info["env_state_hash"]) == 2
    assert np.all(info["optimal_advantage"] == 0.0)
    _, reward, *_, info = vec.step(["ACTION: nonsense", "ACTION: nonsense"])
    assert np.all(info["optimal_advantage"] == -1.0)
    assert [list(r) for r in info["turn_rewards"]] == [[float(reward[0])], [float(reward[1])]]
    vec.close()
    plain = make_vec("sudoku", 1, "sync", size=4)
    _, info = plain.reset(seed=0)
    assert "env_state_hash" not in info  # opt-in: the core env's info is unchanged
    plain.close()
