"""experiments/sft_seed_compare.py: avg@n, step accuracy and paired differences over training seeds."""

from __future__ import annotations

import pytest

from milepost.types import Episode
from tests.turns import graded_turn


def _episode(task: str, success: bool, correct: int, attempted: int) -> Episode:
    turns = [graded_turn(i, int(i < correct)) for i in range(attempted)]
    return Episode(task, "sft", 0, 0, "solved" if success else "truncated", success, 3, attempted, "4-6", turns)


def _run(successes: dict[str, list[bool]], correct: int = 1, attempted: int = 2) -> list[Episode]:
    return [_episode(t, s, correct, attempted) for t, hits in successes.items() for s in hits]


def test_means_and_paired_differences_over_seeds() -> None:
    from experiments.sft_seed_compare import compare

    runs = {
        "move": {
            0: _run({"a": [True, False], "b": [False, False]}),  # avg 25%
            1: _run({"a": [True, True], "b": [False, False]}),  # avg 50%
        },
        "plan": {
            0: _run({"a": [True, True], "b": [True, False]}, correct=2),  # avg 75%, step acc. 100%
            1: _run({"a": [True, True], "b": [True, True]}, correct=2),  # avg 100%
        },
    }
    res = compare(runs)
    assert res["tasks"] == 2
    assert [s["avg"] for s in res["arms"]["move"]["seeds"].values()] == [0.25, 0.5]
    assert res["arms"]["move"]["step_accuracy"][0] == pytest.approx(0.5)
    assert res["arms"]["plan"]["step_accuracy"][0] == pytest.approx(1.0)
    mean, lo, hi = res["arms"]["move"]["avg"]
    assert mean == pytest.approx(0.375) and lo < 0.25 and hi > 0.5  # 2 seeds: t with 1 d.o.f. is wide
    d = res["differences"]["plan"]
    assert d["seeds"] == [0, 1]
    assert d["avg_over_seeds"] == pytest.approx((0.5, 0.5, 0.5))  # both seeds +50 points: no spread
    # by task: a +50 and +0 -> +25; b +50 and +100 -> +75; their mean +50, and the tasks spread
    assert d["avg_by_task"][0] == pytest.approx(0.5)
    assert d["avg_by_task"][1] < 0.5 < d["avg_by_task"][2]
    assert d["step_accuracy_over_seeds"][0] == pytest.approx(0.5)
    assert [s["rejected"] for s in res["arms"]["plan"]["seeds"].values()] == [0.0, 0.0]


def test_the_rejected_share_counts_turns_with_an_error() -> None:
    import dataclasses

    from experiments.sft_seed_compare import rejected_share

    eps = _run({"a": [True, False]}, attempted=4)  # 8 turns
    eps[0].turns[1] = dataclasses.replace(eps[0].turns[1], error="B cannot move up")
    eps[1].turns[3] = dataclasses.replace(eps[1].turns[3], error="cannot parse action", n_requested=0)
    assert rejected_share(eps) == pytest.approx(2 / 8)
    assert rejected_share([]) == 0.0


def test_folders_with_other_test_tasks_or_no_shared_seed_are_refused() -> None:
    from experiments.sft_seed_compare import compare

    with pytest.raises(ValueError, match="test tasks differ"):
        compare({"move": {0: _run({"a": [True]})}, "plan": {0: _run({"b": [True]})}})
    with pytest.raises(ValueError, match="share no training seed"):
        compare({"move": {0: _run({"a": [True]})}, "plan": {1: _run({"a": [True]})}})


def test_one_arm_gives_its_seeds_and_mean_and_no_difference_table() -> None:
    from experiments.sft_seed_compare import compare, render

    res = compare({"move": {0: _run({"a": [True, False]}), 1: _run({"a": [True, True]})}})
    assert res["differences"] == {} and res["arms"]["move"]["avg"][0] == pytest.approx(0.75)
    text = render(res)
    assert "| move | 0, 1 | 50.0 / 100.0 | 75.0 [" in text and "arm - move" not in text
