"""``experiments/trained_tasks_eval.py`` recomputes exactly the tasks a training run played, from its saved
config alone; a curriculum run, whose draws differ, is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from experiments.trained_tasks_eval import run_config, trained_tasks
from milepost.training.trainer import train_rl
from tests.training.test_trainer import _cfg, data4, sft_model, tiny_fixed  # noqa: F401  (fixtures)


def test_the_recomputed_tasks_are_the_ones_the_run_played(sft_model: Path, data4: Path, tmp_path: Path) -> None:  # noqa: F811
    cfg = _cfg(sft_model, data4, iterations=3, tasks_per_iter=4, samples_per_task=1)
    played: list[str] = []
    train_rl(cfg, tmp_path / "run", progress=False, on_episodes=lambda it, eps: played.extend(e.task_id for e in eps))
    recomputed = [t.task_id for t in trained_tasks(run_config(tmp_path / "run"))]
    assert recomputed == list(dict.fromkeys(played))  # distinct, in first-played order
    assert len(played) == 12 and len(recomputed) > 4  # three draws of 4, not one repeated


def test_a_curriculum_run_is_refused(sft_model: Path, data4: Path) -> None:  # noqa: F811
    cfg = _cfg(sft_model, data4)
    mira = dataclasses.replace(cfg, mira=dataclasses.replace(cfg.mira, enabled=True))
    with pytest.raises(SystemExit, match="draw their tasks otherwise"):
        trained_tasks(mira)
