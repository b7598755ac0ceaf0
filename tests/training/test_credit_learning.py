"""experiments/credit_learning.py's plumbing at a micro size: runs, rollouts kept, audits, report, resume."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from experiments import credit_learning as cl


def test_two_level_bootstrap() -> None:
    rng = random.Random(0)
    m, lo, hi = cl.two_level_bootstrap([[0.5, 0.5], [0.5]], 200, rng)
    assert (m, lo, hi) == (0.5, 0.5, 0.5)
    # the mean is over seeds (each seed's task mean), not over all tasks pooled
    m, lo, hi = cl.two_level_bootstrap([[1.0, 1.0, 1.0, 1.0], [0.0]], 500, rng)
    assert m == 0.5 and lo == 0.0 and hi == 1.0
    m, lo, hi = cl.two_level_bootstrap([[0.0, 1.0] * 10], 500, rng)
    assert m == 0.5 and 0.2 < lo < 0.5 < hi < 0.8


def test_the_arms_are_the_demo_arm_with_one_estimator_each(tmp_path: Path) -> None:
    args = cl.parse_args(["--iterations", "3", "--tasks-per-iter", "2", "--eval-limit", "1"])
    cfgs = {arm: cl.arm_config(arm, 7, tmp_path, args) for arm in cl.ARMS}
    for cfg in cfgs.values():
        # the demo's atomic arm: sparse outcome reward, atomic actions, H_max 16, evaluated on every level
        assert (cfg.env.action_mode, cfg.env.max_steps, cfg.rl.reward) == ("atomic", 16, "outcome")
        assert not cfg.rl.subgoal_decomposition and cfg.eval.levels is None and cfg.levels == "S2-S3"
        assert (cfg.seed, cfg.threads, cfg.rl.iterations, cfg.rl.tasks_per_iter, cfg.eval.limit) == (7, 1, 3, 2, 1)
        assert cfg.model == str(cl.CHECKPOINT)
    assert {a: c.rl.estimator for a, c in cfgs.items()} == {
        "paper": "paper",
        "gigpo": "gigpo",
        "distance": "distance",
        "grpo": "paper",
    }
    grpo, paper = cfgs["grpo"].rl, cfgs["paper"].rl
    assert (grpo.gamma, grpo.alpha, grpo.normalisation) == (1.0, 0.0, "group")  # outcome only, per task
    assert (paper.gamma, paper.alpha, paper.normalisation) == (0.995, 0.2, "batch")  # the demo's, unchanged


@pytest.mark.slow  # trains and evaluates two micro runs: ~45 CPU-s (over 3 min at load 14 on the shared machine)
def test_micro_run_writes_the_report_and_resumes(tmp_path: Path) -> None:
    out, results = tmp_path / "work", tmp_path / "results"
    argv = [
        "--out", str(out), "--results", str(results), "--estimators", "paper,distance", "--seeds", "3",
        "--iterations", "1", "--tasks-per-iter", "2", "--eval-limit", "1", "--train", "3", "--test", "1",
        "--boot", "3", "--boot-eval", "20", "--no-progress",
    ]  # fmt: skip
    assert cl.main(argv) == 0
    for name in ("learning.md", "learning.json", "learning-avg4.png", "learning-curve.png", "learning-audit.png"):
        assert (results / name).stat().st_size > 0, name
    data = json.loads((results / "learning.json").read_text())
    assert set(data["arms"]) == {"paper", "distance"} and data["missing"] == []
    assert data["levels"] == ["S1", "S2", "S3", "S4", "S5"]
    firsts = {}
    for est in ("paper", "distance"):
        folder = cl.run_dir(out, est, 3)
        eps = cl.read_episodes(folder / "rollouts" / "first")
        assert len(eps) == 2 * 4  # tasks x samples of the one iteration, which is also the last
        assert (folder / "rollouts" / "last" / "episodes.jsonl").exists()
        firsts[est] = [(e.task_id, [t.text for t in e.turns]) for e in eps]
        audit = json.loads((folder / "rollouts" / "first" / "audit" / "credit.json").read_text())
        assert set(audit["estimators"]) == set(cl.AUDITED)
        assert audit["estimators"]["distance"]["spearman"] == pytest.approx(1.0)
    # the first iteration is played by the SFT policy at the same seed: the same episodes whatever the estimator
    assert firsts["paper"] == firsts["distance"]
    md = (results / "learning.md").read_text()
    assert "| SFT start | 1 |" in md and "| distance | 1 |" in md and "Rush Hour" in md
    # a rerun skips every finished run (done.json is not rewritten)
    done = cl.run_dir(out, "paper", 3) / "done.json"
    before = done.stat().st_mtime_ns
    assert cl.main(argv) == 0
    assert done.stat().st_mtime_ns == before


def test_bad_arguments_exit_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cl.main(["--out", str(tmp_path), "--estimators", "ppo"]) == 2
    assert "unknown arm ppo" in capsys.readouterr().out
