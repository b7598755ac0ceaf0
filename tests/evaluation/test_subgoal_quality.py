"""Subgoal-quality statistics (Kendall tau-b, AUROC of the completion fraction) for any plan source."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from milepost.datasets import write_dataset
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.evaluation.subgoal_quality import auroc, kendall_tau_b, subgoal_quality
from milepost.planning import LLMPlanner, SGOAgent
from milepost.training import critics
from milepost.types import Episode, TerminationReason
from tests.planning.fakes import CannedBackend, sudoku_tasks


def test_statistics_by_hand() -> None:
    # successes score 0.9 and 0.5, failures 0.5 and 0.1: pairs (0.9 > 0.5, 0.9 > 0.1, tie, 0.5 > 0.1) = 3.5 / 4
    assert auroc([0.9, 0.5, 0.5, 0.1], [True, True, False, False]) == pytest.approx(0.875)
    assert auroc([0.2, 0.4], [True, True]) != auroc([0.2, 0.4], [True, True])  # NaN: one class only
    # x = 3, 2, 2, 0 against y = 1, 1, 0, 0, six pairs: concordant (0, 2), (0, 3), (1, 3); tied in y (0, 1),
    # (2, 3); tied in x (1, 2); none discordant: tau-b = 3 / sqrt((6 - 1) * (6 - 2)) = 3 / sqrt(20)
    assert kendall_tau_b([3, 2, 2, 0], [1, 1, 0, 0]) == pytest.approx(3 / 20**0.5)
    assert kendall_tau_b([0, 1, 2], [2.0, 1.0, 0.0]) == pytest.approx(-1.0)
    assert kendall_tau_b([1, 2, 3], [1.0, 1.0, 1.0]) != kendall_tau_b([1, 2, 3], [1.0, 1.0, 1.0])


def test_statistics_agree_with_the_critic_helpers() -> None:
    rng = random.Random(0)
    for _ in range(20):
        n = rng.randint(2, 30)
        x = [float(rng.randint(0, 4)) for _ in range(n)]
        y = [float(rng.random() < 0.5) for _ in range(n)]
        ours, theirs = kendall_tau_b(x, y), critics.kendall_tau_b(torch.tensor(x), torch.tensor(y))
        assert ours == pytest.approx(theirs, nan_ok=True)
        a, b = auroc(x, [v > 0 for v in y]), critics.auroc(torch.tensor(x), torch.tensor(y))
        assert a == pytest.approx(b, nan_ok=True)


def _episode(success: bool, z: list[int] | None, env: tuple[int, int], source: str = "programmatic") -> Episode:
    meta: dict[str, object] = {"subgoals_completed": env[0], "num_subgoals": env[1]}
    if z is not None:
        meta["sgo"] = {"plan_source": source, "z": z}
    reason = TerminationReason.SOLVED if success else TerminationReason.BUDGET_EXHAUSTED
    return Episode("t", "p", 0, 0, reason, success, 4, 4, meta=meta)


def test_per_source_rows_by_hand() -> None:
    eps = [
        _episode(True, [1, 1, 1, 1], (4, 4)),
        _episode(False, [1, 1, 0, 0], (2, 4)),
        _episode(False, [1, 0, 0], (3, 4), source="llm"),
        _episode(True, [1, 1, 0], (1, 4), source="llm"),
    ]
    rows = {r.source: r for r in subgoal_quality(eps)}
    assert list(rows) == ["plan: llm", "plan: programmatic", "plan: all", "environment subgoals"]
    prog = rows["plan: programmatic"]
    assert (prog.episodes, prog.successes, prog.tau_b, prog.auroc) == (2, 1, pytest.approx(1.0), 1.0)
    llm = rows["plan: llm"]
    assert llm.auroc == 1.0 and llm.completion_success == pytest.approx(2 / 3)
    # all plans: fractions 1, 0.5, 1/3, 2/3 for success 1, 0, 0, 1: every success above every failure
    assert rows["plan: all"].auroc == 1.0
    # environment: fractions 1, 0.5, 0.75, 0.25 -> success pairs (1 > .5, 1 > .75, .25 < .5, .25 < .75) = 2 / 4
    env = rows["environment subgoals"]
    assert env.auroc == 0.5 and env.tau_b == pytest.approx(0.0)
    assert env.completion_failure == pytest.approx(0.625)
    # a run where everything succeeded: the statistics are undefined, not 0
    solved = subgoal_quality([_episode(True, [1, 1], (2, 2)), _episode(True, [1, 1], (2, 2))])
    assert solved[0].auroc is None and solved[0].tau_b is None and solved[0].completion_failure is None


def _data(tmp_path: Path) -> Path:
    tasks = sudoku_tasks(6, 10, seed=5)
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 5})


def test_an_sgo_evaluation_reports_subgoal_quality(tmp_path: Path) -> None:
    data = _data(tmp_path)
    spec = EvalSpec(
        env="sudoku",
        data=str(data),
        policy="noisy-oracle:0.8:mixed",
        agent="sgo",
        n=4,
        ks=[1],
        env_kwargs={"max_steps": 14},
    )
    result = evaluate(spec, tmp_path / "prog", progress=False)
    rows = {r["source"]: r for r in result["subgoal_quality"]}
    assert set(rows) == {"plan: programmatic", "environment subgoals"}
    prog = rows["plan: programmatic"]
    episodes = [json.loads(line) for line in (tmp_path / "prog" / "episodes.jsonl").read_text().splitlines()]
    assert prog["episodes"] == len(episodes) == 24 and prog["successes"] == sum(e["success"] for e in episodes)
    assert 0 < prog["successes"] < 24  # both outcomes, so the statistics are defined
    # A solved puzzle completes every box of the plan: successes sit at 100%, so completion separates them.
    assert prog["completion_success"] == 1.0 and prog["auroc"] > 0.5 and prog["tau_b"] > 0
    report = (tmp_path / "prog" / "report.md").read_text()
    assert "### Subgoal quality" in report and "| plan: programmatic | 24 |" in report


def test_an_llm_plan_with_a_judge_only_item_is_scored_by_its_own_completion(tmp_path: Path) -> None:
    data = _data(tmp_path)
    # A scripted planner client: every box in a fixed order plus an item no predicate checks (never completed).
    answer = json.dumps({"subgoals": ["box 1", "box 2", "box 3", "box 4", {"description": "double-check"}]})
    planner = LLMPlanner(CannedBackend([answer], name="scripted-planner"))
    spec = EvalSpec(
        env="sudoku", data=str(data), policy="oracle", agent="sgo", n=1, ks=[1], planner="llm:hf:scripted-planner"
    )
    result = evaluate(spec, tmp_path / "llm", progress=False, agent=SGOAgent(planner))
    rows = {r["source"]: r for r in result["subgoal_quality"]}
    llm = rows["plan: llm"]
    # the oracle solves every task; the judge-only item keeps each plan at 4 / 5
    assert llm["successes"] == llm["episodes"] == 6 and llm["completion_success"] == pytest.approx(0.8)
    assert llm["auroc"] is None and llm["tau_b"] is None
