"""experiments.step_accuracy_split: the pooled step accuracy split into solved and failed episodes, by hand."""

from __future__ import annotations

from pathlib import Path

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


def test_revisits_replays_the_answers_and_counts_moves_into_a_seen_board(tmp_path: Path) -> None:
    from experiments.step_accuracy_split import revisits
    from milepost.datasets import write_dataset
    from milepost.envs.rushhour.env import RushHourEnv
    from tests.planning.fakes import rush_tasks

    task = rush_tasks(4, 6, 1)[0]
    data = write_dataset(tmp_path / "d", {"train": [], "test": [task]}, {"seed": 0})
    env = RushHourEnv()
    env.reset(options={"task": task})
    move = env.state.legal_actions()[0]
    back = move._replace(direction={"up": "down", "down": "up", "left": "right", "right": "left"}[move.direction])
    # forward, a rejected answer, back to the start, forward again: 3 moves, 2 of them into a board seen before
    texts = [f"ACTION: {move.text()}", "ACTION: move(Z, up)", f"ACTION: {back.text()}", f"ACTION: {move.text()}"]
    ep = _episode([0] * len(texts), TerminationReason.BUDGET_EXHAUSTED)
    ep.task_id = task.task_id
    for turn, text in zip(ep.turns, texts):
        turn.text = text
    run = {"env": "rushhour", "data": str(data), "split": "test", "env_kwargs": {"max_steps": 30}}
    assert revisits([ep], run) == {"moves": 3, "into_seen": 2, "share": pytest.approx(2 / 3)}
    assert revisits([ep], {**run, "env": "sudoku"}) is None
    ep.success = True  # the replay does not solve it: the data or settings are not the ones played
    with pytest.raises(SystemExit, match="does not end as played"):
        revisits([ep], run)
    r = split([ep])
    r["revisits"] = {"share": 0.25}
    assert render({"run": r}).rstrip().endswith("| 25.0 |")
