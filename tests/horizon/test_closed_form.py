"""The closed-form check of the horizon score on real episodes.

``noisy-oracle:P:format`` (``backends/scripted.py``) answers each turn with the oracle's move with chance P (one
draw of the episode's random stream, ``rng.random() < p``), else with a malformed answer, which the environment
(``envs/base.py``) counts as a format error that changes nothing and does not end the episode. Every oracle move
in atomic mode brings the goal exactly one step closer (Sudoku: one correct fill), and the episode ends solved at
distance 0 or truncated after H_max = ``max_steps`` turns. So an episode succeeds exactly when at least d of its
first H turns are oracle moves: P(Binomial(H, P) >= d). The horizon fitted from played episodes must match the
horizon of that law.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from milepost.agent.loop import AgentSettings
from milepost.horizon.coverage import binomial_law, law_crossing, law_horizon
from milepost.horizon.estimator import estimate
from milepost.horizon.report import play_suite, task_outcomes
from milepost.horizon.suites import Suite, SuitePart
from milepost.types import TerminationReason

H, P = 12, 0.7
# A small suite of real generated 4x4 Sudoku tasks, 3-12 empty cells (the law's 50% crossing, H P ~ 8.5, inside).
SUITE = Suite("closed-form-test", 1, (SuitePart("sudoku4", "sudoku", 4, "S1-S5", 8, 3, H, 8),), content_hash="")


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list]:
    out: Path = tmp_path_factory.mktemp("horizon-closed-form")
    manifest, episodes = play_suite(
        SUITE, out, policy=f"noisy-oracle:{P}:format", settings=AgentSettings(batch_size=64), progress=False
    )
    return manifest, episodes["sudoku4"]


def test_the_budget_is_the_suites_and_failures_run_it_out(played: tuple[dict, list]) -> None:
    manifest, episodes = played
    assert manifest["parts"][0]["max_steps"] == H and manifest["left_out"] == 0
    assert len(episodes) == manifest["played"] * 8
    for ep in episodes:
        if ep.success:
            assert ep.steps <= H and ep.steps >= ep.goal_distance
        else:  # only format errors: never a dead end, always the whole budget
            assert ep.termination is TerminationReason.BUDGET_EXHAUSTED and ep.steps == H
        oracle_turns = sum(t.reward_terms["format"] == 0 for t in ep.turns)
        assert ep.success == (oracle_turns >= ep.goal_distance)


def test_success_by_distance_follows_the_binomial_law(played: tuple[dict, list]) -> None:
    _, episodes = played
    by_d: dict[int, list[bool]] = {}
    for ep in episodes:
        by_d.setdefault(ep.goal_distance, []).append(ep.success)
    chi2 = 0.0
    for d, wins in by_d.items():
        p = binomial_law(H, P, d)
        n = len(wins)
        if 0 < p < 1:
            chi2 += (sum(wins) - n * p) ** 2 / (n * p * (1 - p))
        else:
            assert sum(wins) == round(n * p)
    # chi-square with len(by_d) degrees of freedom: far below the 0.1% point of ~30 for 10 dof
    assert chi2 < 30, (chi2, sorted(by_d))


def test_fitted_horizon_matches_the_law(played: tuple[dict, list]) -> None:
    _, episodes = played
    outcomes = task_outcomes(episodes, "sudoku")
    est = estimate(outcomes, boot=500, seed=0)
    truth = law_horizon([(o.distance, H) for o in outcomes], P)  # the fit to the law at these very tasks
    assert truth == pytest.approx(law_crossing(H, P), abs=0.6)  # ... agrees with where the law crosses 50%
    fitted = est.logistic.horizon(0.5)
    lo, hi = est.intervals["logistic"]["h50"]
    assert lo <= truth <= hi, (fitted, truth, lo, hi)
    assert fitted == pytest.approx(truth, rel=0.1)
    truth80 = law_horizon([(o.distance, H) for o in outcomes], P, level=0.8)
    lo80, hi80 = est.intervals["logistic"]["h80"]
    assert lo80 <= truth80 <= hi80
    # the steep binomial law is no per-step decay: the logistic explains it better
    assert est.comparison()["preferred_by_aic"] == "logistic"
    assert math.isfinite(fitted)


def test_the_sgo_agent_follows_the_same_law(played: tuple[dict, list], tmp_path: Path) -> None:
    """Under SGO the oracle's move heads for the current subgoal, but it is still one step closer, and the episode
    draws the same random stream: every episode ends exactly as under the plain agent."""
    _, plain = played
    _, episodes = play_suite(
        SUITE,
        tmp_path,
        policy=f"noisy-oracle:{P}:format",
        agent="sgo",
        settings=AgentSettings(batch_size=64),
        progress=False,
    )
    sgo = {(e.task_id, e.sample): e.success for e in episodes["sudoku4"]}
    assert sgo == {(e.task_id, e.sample): e.success for e in plain}
