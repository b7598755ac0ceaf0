"""experiments.step_accuracy_split: the pooled step accuracy split into solved and failed episodes, by hand."""

from __future__ import annotations

import pytest

from experiments.step_accuracy_split import render, split
from milepost.types import Episode, TerminationReason
from tests.turns import graded_turn


def _episode(correct: list[int], reason: TerminationReason, requested: list[int] | None = None) -> Episode:
    turns = [
        graded_turn(i, c, requested=(requested or [1] * len(correct))[i], text="ACTION: x")
        for i, c in enumerate(correct)
    ]
    return Episode(
        task_id="t",
        policy="p",
        sample=0,
        seed=0,
        termination=reason,
        success=reason is TerminationReason.SOLVED,
        goal_distance=2,
        steps=len(turns),
        turns=turns,
        meta={},
    )


def test_split_weighs_failures_by_their_length() -> None:
    solved = _episode([1, 1], TerminationReason.SOLVED)  # 2 of 2 optimal
    failed = _episode([1, 0, 0, 0, 0, 0, 0, 1], TerminationReason.BUDGET_EXHAUSTED)  # 2 of 8
    unparsable = _episode([0], TerminationReason.BUDGET_EXHAUSTED, requested=[0])  # unparsable: 1 failed try
    r = split([solved, failed, unparsable], first_turns=2)
    assert r["episodes"] == 3 and r["successes"] == 1 and r["success"] == pytest.approx(1 / 3)
    assert (r["all"]["correct"], r["all"]["attempted"]) == (4, 11)
    assert r["solved"]["accuracy"] == 1.0 and r["solved"]["action_share"] == pytest.approx(2 / 11)
    assert r["failed"]["accuracy"] == pytest.approx(2 / 9) and r["failed"]["action_share"] == pytest.approx(9 / 11)
    assert r["per_episode_mean"] == pytest.approx((1.0 + 0.25 + 0.0) / 3)  # above the pooled 4/11
    assert r["first_turns"]["accuracy"] == pytest.approx(3 / 5)  # turns 1-2 of each: 1+1, 1+0, 0 of 2+2+1
    assert r["mean_turns_solved"] == 2 and r["mean_turns_failed"] == 4.5
    assert "| 3 | 33.3 | 36.4 | 18.2 / 100.0 | 81.8 / 22.2 |" in render({"run": r})


def test_split_without_solved_episodes_and_without_episodes() -> None:
    r = split([_episode([0, 1], TerminationReason.BUDGET_EXHAUSTED)])
    assert r["solved"]["accuracy"] is None and r["mean_turns_solved"] is None
    assert "| 0.0 / - |" in render({"run": r})  # no action in a solved episode, no accuracy there
    with pytest.raises(SystemExit, match="no episodes"):
        split([])
