"""Metrics, the stuck definition and the failure taxonomy, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from milepost.evaluation.failures import classify_failure
from milepost.evaluation.metrics import bootstrap_interval, level_metrics, pass_at_k, wilson_interval
from milepost.planning.stuck import StuckDetector
from milepost.types import Episode, RewardTerms, TerminationReason, Turn


def test_pass_at_k_hand_values() -> None:
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 4, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(10, 3, 4) == pytest.approx(1 - math.comb(7, 4) / math.comb(10, 4))
    with pytest.raises(ValueError, match="at least 5 samples"):
        pass_at_k(4, 1, 5)


def test_wilson_and_bootstrap_intervals() -> None:
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = bootstrap_interval([0.0] * 50 + [1.0] * 50, seed=1)
    assert 0.35 < lo < 0.5 < hi < 0.65
    assert bootstrap_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)


def _terms(fmt: float = 0.0, valid: float = 0.0) -> RewardTerms:
    return RewardTerms(outcome=0.0, format=fmt, valid=valid, milestone=0.0)


def _turn(
    i: int,
    *,
    state: str = "s",
    action: str = "a",
    fmt: float = 0.0,
    valid: float = 0.0,
    new: list[int] | None = None,
    correct: int = 0,
) -> Turn:
    return Turn(
        index=i,
        observation="",
        text=f"ACTION: {action}{i if action == 'a' else ''}",
        actions=[],
        reward=0.0,
        reward_terms=_terms(fmt, valid),
        subgoals_completed=[],
        remaining_distance=None,
        state_key=f"{state}{i}" if state == "s" else state,
        new_subgoals=new or [],
        correct_actions=correct,
        n_requested=0 if fmt else 1,
    )


def _episode(turns: list[Turn], reason: TerminationReason, steps: list[int] | None = None) -> Episode:
    return Episode(
        task_id="t",
        policy="p",
        sample=0,
        seed=0,
        termination=reason,
        success=reason is TerminationReason.SOLVED,
        goal_distance=5,
        steps=len(turns),
        turns=turns,
        meta={"subgoal_steps": steps if steps is not None else [3, 3]},
    )


def test_stuck_detector_windows_and_repeats() -> None:
    det = StuckDetector([3, 2])  # W = 6 for subgoal 0, then 4
    flags = [det.update(f"s{i}", f"a{i}") for i in range(6)]
    assert flags == [False] * 5 + [True]
    assert not det.update("s6", "a6", [0])  # a milestone resets the clock; W becomes 4
    assert [det.update(f"t{i}", f"b{i}") for i in range(4)] == [False, False, False, True]
    rep = StuckDetector([])
    assert [rep.update("same", f"x{i}") for i in range(3)] == [False, False, True]
    rep = StuckDetector([10])
    assert [rep.update(f"s{i}", "same action") for i in range(3)] == [False, False, True]


def test_failure_taxonomy_first_match_wins() -> None:
    solved = _episode([_turn(0)], TerminationReason.SOLVED)
    assert classify_failure(solved) is None
    dead = _episode([_turn(i, fmt=-1.0) for i in range(4)], TerminationReason.DEAD_END)
    assert classify_failure(dead) == "dead_end"
    fmt = _episode([_turn(0)] + [_turn(i, fmt=-1.0) for i in range(1, 4)], TerminationReason.BUDGET_EXHAUSTED)
    assert classify_failure(fmt) == "format_spiral"
    inv = _episode([_turn(i, valid=-1.0) for i in range(3)], TerminationReason.BUDGET_EXHAUSTED)
    assert classify_failure(inv) == "invalid_spiral"
    two_errors = [_turn(0), _turn(1, fmt=-1.0), _turn(2, valid=-1.0)]
    progressing = _episode(two_errors, TerminationReason.BUDGET_EXHAUSTED, steps=[5])
    assert classify_failure(progressing) == "budget_exhausted"
    looping = _episode([_turn(i, state="same") for i in range(3)], TerminationReason.BUDGET_EXHAUSTED, steps=[5])
    assert classify_failure(looping) == "stuck_midway"
    stalled = _episode([_turn(i) for i in range(4)], TerminationReason.BUDGET_EXHAUSTED, steps=[1])
    assert classify_failure(stalled) == "stuck_midway"
    overflow = _episode([], TerminationReason.CONTEXT_OVERFLOW)
    assert classify_failure(overflow) == "context_overflow"


def test_level_metrics_on_known_counts() -> None:
    eps = []
    for task, wins in (("a", 2), ("b", 0)):
        for s in range(4):
            ok = s < wins
            ep = _episode(
                [_turn(0, correct=1), _turn(1, fmt=-1.0)],
                TerminationReason.SOLVED if ok else TerminationReason.BUDGET_EXHAUSTED,
            )
            ep.task_id, ep.sample = task, s
            eps.append(ep)
    m = level_metrics("L1", eps, [1, 4], ceiling=lambda tid: tid == "a")
    assert m.tasks == 2 and m.samples == 4
    assert m.pass_at["1"].value == pytest.approx(0.25) and m.pass_at["4"].value == pytest.approx(0.5)
    assert m.avg.value == pytest.approx(0.25)
    assert m.step_accuracy == pytest.approx(0.5)  # one correct + one failed attempt per episode
    assert m.oracle_ceiling == pytest.approx(0.5)
    assert m.terminations == {"solved": 2, "budget_exhausted": 6}
    assert sum(m.failures.values()) == 6
