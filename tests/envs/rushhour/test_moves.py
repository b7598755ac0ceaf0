"""Scripted Rush Hour moves: the oracle in every action mode, the noisy oracle's errors, optimal turns."""

from __future__ import annotations

import random

import pytest

from milepost.backends.scripted import ScriptedPolicy
from milepost.envs.actions import ActionMode
from milepost.envs.rushhour import RushHourEnv, make_task
from milepost.envs.rushhour import moves as rush_moves

BOARD7 = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"  # 7 moves, 12 one-cell steps


@pytest.mark.parametrize(
    ("mode", "kwargs", "turns"),
    [("atomic", {}, 12), ("slide", {}, 7), ("flexible", {"macro_k": 5}, 3), ("fixed", {"macro_n": 5}, 3)],
)
def test_scripted_oracle_solves_in_the_optimal_number_of_turns(mode: str, kwargs: dict[str, int], turns: int) -> None:
    task = make_task(BOARD7)
    env = RushHourEnv(action_mode=mode, **kwargs)  # type: ignore[arg-type]
    env.reset(options={"task": task})
    assert rush_moves.optimal_turns(task, env.action_mode) == turns
    policy, rng = ScriptedPolicy("oracle"), random.Random(0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(policy.answer(env, rng))
        assert info["error"] is None
        done = terminated or truncated
    assert terminated and info["steps"] == turns


def test_noisy_oracle_errors_are_the_kind_they_claim() -> None:
    env = RushHourEnv()
    env.reset(options={"task": make_task(BOARD7)})
    rules, rng = env.rules, random.Random(1)
    for _ in range(20):
        assert rules.parse(rush_moves.malformed(rng)) is None  # type: ignore[union-attr]
        illegal = rules.parse(rush_moves.illegal(rules, rng))  # type: ignore[arg-type, union-attr]
        assert illegal is not None and rules.check(illegal) is not None  # type: ignore[union-attr]
        detour = rush_moves.wrong(rules, rng)  # type: ignore[arg-type]
        assert detour is not None
        before = env.state.clone()
        _, _, _, _, info = env.step(detour)
        assert info["error"] is None and info["correct_actions"] == 0
        env.state.positions[:] = before.positions  # undo, keeping the state's bookkeeping consistent
        env.state.occ, env.state.key = before.occ, before.key
        legal = rush_moves.random_legal(rules, rng)  # type: ignore[arg-type]
        assert legal is not None and rules.check(rules.parse(legal)) is None  # type: ignore[arg-type, union-attr]


def test_optimal_turns_without_meta_solves_the_board() -> None:
    task = make_task(BOARD7)
    task.meta = {}
    assert rush_moves.optimal_turns(task, ActionMode("atomic")) == 12
    assert rush_moves.optimal_turns(task, ActionMode("flexible")) == 1
