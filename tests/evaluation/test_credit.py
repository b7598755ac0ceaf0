"""The credit audit: statistics by hand, the distance estimator's perfect score, the random floor, refusals."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from milepost.cli.main import main
from milepost.errors import InputError
from milepost.evaluation.credit import (
    AuditSettings,
    audit,
    kendall_tau_b,
    sign_agreement,
    spearman,
    truth,
    write_report,
)
from milepost.io import atomic_write_jsonl
from milepost.types import Episode, TerminationReason, Turn, zero_terms


def _turn(i: int, after: int | None, state: str, success_turn: bool = False) -> Turn:
    terms = zero_terms()
    if success_turn:
        terms["outcome"] = 1.0
    return Turn(
        index=i,
        observation=f"board {state}",
        text="",
        actions=["move"],
        reward=terms["outcome"],
        reward_terms=terms,
        subgoals_completed=[],
        remaining_distance=after,
        state_key=state,
    )


def _walk(task: str, sample: int, d0: int, rng: random.Random, p_good: float, budget: int) -> Episode:
    """A random walk on the distance line: each turn -1 with probability p_good, else +1 (or stays)."""
    d, turns = d0, []
    for i in range(budget):
        r = rng.random()
        d = d - 1 if r < p_good else (d if r < p_good + 0.1 else d + 1)
        turns.append(_turn(i, d, f"{task}:{d}", success_turn=d == 0))
        if d == 0:
            break
    success = d == 0
    reason = TerminationReason.SOLVED if success else TerminationReason.BUDGET_EXHAUSTED
    return Episode(task, "walk", sample, 0, reason, success, d0, len(turns), level="L", turns=turns)


def _batch(seed: int = 0, tasks: int = 12, samples: int = 4) -> list[Episode]:
    rng = random.Random(seed)
    return [_walk(f"t{t}", s, 3 + t % 4, rng, 0.65, 14) for t in range(tasks) for s in range(samples)]


def test_rank_statistics_by_hand() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, np.array([10.0, 20.0, 30.0, 40.0])) == pytest.approx(1.0)
    assert spearman(x, np.array([4.0, 3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    # One swap among 4: concordant 5, discordant 1 -> tau = 4 / 6.
    assert kendall_tau_b(x, np.array([1.0, 3.0, 2.0, 4.0])) == pytest.approx(4 / 6)
    # Ties: x = (1, 1, 2), y = (1, 2, 3): pairs (0,1) tie in x; concordant 2 -> 2 / sqrt(2 * 3).
    assert kendall_tau_b(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(2 / math.sqrt(6))
    # Blocked computation equals the one-block one, -inf included.
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=300), rng.normal(size=300)
    b[:5] = -np.inf
    assert kendall_tau_b(a, b, block=7) == pytest.approx(kendall_tau_b(a, b, block=1000))
    assert math.isnan(spearman(x, np.ones(4)))


def test_sign_agreement_by_hand() -> None:
    adv = np.array([1.0, -1.0, 0.5, -0.5, -2.0, 0.3])
    delta = np.array([1.0, 1.0, -1.0, -np.inf, 0.0, 0.0])
    s = sign_agreement(adv, delta)
    assert s["progress"] == 0.5 and s["regress"] == 0.5 and s["stay"] == 0.5
    assert s["balanced"] == 0.5


def test_truth_is_delta_minus_cost() -> None:
    ep = Episode(
        "t",
        "p",
        0,
        0,
        TerminationReason.DEAD_END,
        False,
        3,
        3,
        turns=[_turn(0, 2, "a"), _turn(1, 2, "b"), _turn(2, None, "c")],
    )
    t = truth([ep])
    assert t.delta.tolist() == [1.0, 0.0, -math.inf]
    assert t.a_star.tolist() == [0.0, -1.0, -math.inf]


def test_distance_estimator_is_perfect_and_random_is_near_zero() -> None:
    episodes = _batch()
    result = audit(episodes, AuditSettings(estimators=("distance", "random", "paper", "gigpo"), boot=20))
    est = result["estimators"]
    # One action per turn: A* = delta - 1 is a monotone function of delta, so the ranks agree exactly.
    assert est["distance"]["spearman"] == pytest.approx(1.0)
    assert est["distance"]["kendall"] == pytest.approx(1.0)
    assert abs(est["random"]["spearman"]) < 0.15
    assert result["ranking"][0] == "distance"
    lo, hi = est["random"]["spearman_interval"]
    assert lo < 0 < hi
    # Outcome-based estimators sit between: positive, below the oracle.
    assert 0.0 < est["paper"]["spearman"] < 1.0
    assert sum(result["turn_kinds"].values()) == result["turns"]


def test_critic_estimators_run_and_are_scored(tmp_path: Path) -> None:
    episodes = _batch(tasks=6, samples=2)
    settings = AuditSettings(estimators=("dr", "gae", "mira", "distance"), boot=3, critic_epochs=1.0)
    result = audit(episodes, settings)
    for name in ("dr", "gae", "mira"):
        assert -1.0 <= result["estimators"][name]["spearman"] <= 1.0
    files = write_report(result, tmp_path / "out", "walks")
    assert files == ["credit.md", "credit.png", "credit.json"]
    data = json.loads((tmp_path / "out" / "credit.json").read_text())
    assert set(data["estimators"]) == {"dr", "gae", "mira", "distance"}
    assert "| 1 | distance |" in (tmp_path / "out" / "credit.md").read_text()


def test_refuses_episodes_without_distance_and_unknown_estimators() -> None:
    ep = Episode("t", "p", 0, 0, TerminationReason.BUDGET_EXHAUSTED, False, 0, 1, turns=[_turn(0, None, "a")])
    ep.turns[0].remaining_distance = None
    ep.meta["env"] = "nodistance"
    with pytest.raises(InputError, match="no turn records a goal distance"):
        audit([ep], AuditSettings(estimators=("random",), boot=0))
    with pytest.raises(InputError, match="unknown estimator 'ppo'"):
        AuditSettings(estimators=("ppo",))


def test_cli_audits_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    atomic_write_jsonl(run / "episodes.jsonl", [ep.to_dict() for ep in _batch(tasks=6)])
    code = main(
        [
            "credit",
            "audit",
            str(run),
            "--out",
            str(tmp_path / "audit"),
            "--boot",
            "5",
            "--estimators",
            "distance,random,grpo",
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "best first: distance 1.00" in out
    assert (tmp_path / "audit" / "credit.png").stat().st_size > 0
    # A folder without episodes: one line, exit 2.
    (tmp_path / "empty").mkdir()
    assert main(["credit", "audit", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2
    assert "no episodes.jsonl" in capsys.readouterr().err
