"""``experiments/trained_tasks_eval.py`` recomputes exactly the tasks a training run played, from its saved
config alone; a curriculum run, whose draws differ, is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from experiments.trained_tasks_eval import (
    add_gain_minus_first,
    difference_cell,
    evaluation_key,
    run_config,
    trained_tasks,
)
from milepost.training.trainer import train_rl
from tests.training.test_trainer import _cfg, data4, sft_model, tiny_fixed  # noqa: F401  (fixtures)


def test_the_recomputed_tasks_are_the_ones_the_run_played(sft_model: Path, data4: Path, tmp_path: Path) -> None:  # noqa: F811
    cfg = _cfg(sft_model, data4, iterations=3, tasks_per_iter=4, samples_per_task=1)
    played: list[str] = []
    train_rl(cfg, tmp_path / "run", progress=False, on_episodes=lambda it, eps: played.extend(e.task_id for e in eps))
    recomputed = [t.task_id for t in trained_tasks(run_config(tmp_path / "run"))]
    assert recomputed == list(dict.fromkeys(played))  # distinct, in first-played order
    assert len(played) == 12 and len(recomputed) > 4  # three draws of 4, not one repeated
    # the run's log names the same tasks (the reading every run since its tasks were logged gets)
    assert [t.task_id for t in trained_tasks(run_config(tmp_path / "run"), tmp_path / "run")] == recomputed


def test_a_mira_curriculum_run_is_read_from_its_log(sft_model: Path, data4: Path, tmp_path: Path) -> None:  # noqa: F811
    """MiRA's curriculum draws cannot be recomputed from the seed; the run's log names the tasks its policy
    iterations played (the critics' warm-up episodes, which no policy update sees, left out)."""
    cfg = _cfg(sft_model, data4, iterations=2, tasks_per_iter=4, samples_per_task=1)
    settings = dataclasses.replace(cfg.mira, enabled=True, curriculum=True, phase_iterations=2)
    mira = dataclasses.replace(cfg, mira=settings)
    played: list[str] = []
    train_rl(mira, tmp_path / "mira", progress=False, on_episodes=lambda it, eps: played.extend(e.task_id for e in eps))
    logged = [t.task_id for t in trained_tasks(run_config(tmp_path / "mira"), tmp_path / "mira")]
    assert logged == list(dict.fromkeys(played)) and len(played) == 8
    rows = (tmp_path / "mira" / "metrics.jsonl").read_text().splitlines()
    assert '"phase": "warmup"' in rows[0] or '"phase":"warmup"' in rows[0]  # the warm-up was logged, and left out


def test_a_keys_run_draws_what_the_curriculum_draws_while_its_weights_are_equal(
    sft_model: Path,  # noqa: F811
    data4: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``rl.task_draw: keys``: a uniform run and a MiRA curriculum run of one seed play the same tasks through the
    curriculum's first phase (equal weights), where ``sample`` draws others; the keys run's tasks recompute."""
    cfg = _cfg(sft_model, data4, iterations=2, tasks_per_iter=3, samples_per_task=1)
    keys = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, task_draw="keys"))
    settings = dataclasses.replace(cfg.mira, enabled=True, curriculum=True, phase_iterations=2, warmup_iterations=0)
    mira = dataclasses.replace(cfg, mira=settings)
    runs = {"keys": keys, "sample": cfg, "mira": mira}
    played: dict[str, list[list[str]]] = {name: [] for name in runs}
    for name, c in runs.items():
        train_rl(c, tmp_path / name, progress=False, on_episodes=lambda it, eps, n=name: played[n].append(
            sorted({e.task_id for e in eps})))  # fmt: skip
    assert played["keys"] == played["mira"] and played["sample"] != played["mira"]
    recomputed = [t.task_id for t in trained_tasks(run_config(tmp_path / "keys"))]  # from the config, not the log
    assert recomputed == [t.task_id for t in trained_tasks(run_config(tmp_path / "keys"), tmp_path / "keys")]


def test_a_curriculum_run_is_refused(sft_model: Path, data4: Path) -> None:  # noqa: F811
    cfg = _cfg(sft_model, data4)
    mira = dataclasses.replace(cfg, mira=dataclasses.replace(cfg.mira, enabled=True))
    with pytest.raises(SystemExit, match="draw their tasks otherwise"):
        trained_tasks(mira)


def test_the_difference_cell_gives_one_seed_no_interval() -> None:
    three = {"mean": 0.088, "lo": 0.04, "hi": 0.13, "per_seed": [0.068, 0.091, 0.105]}
    assert difference_cell(three) == "+8.8 [+4, +13] * (+6.8, +9.1, +10.5)"
    assert difference_cell(three | {"lo": -0.02}) == "+8.8 [-2, +13] (+6.8, +9.1, +10.5)"
    one = {"mean": -0.05, "lo": -0.05, "hi": -0.05, "per_seed": [-0.05]}
    assert difference_cell(one) == "-5.0 (one seed, no interval)"


def test_the_start_is_evaluated_once_per_action_mode(sft_model: Path, data4: Path) -> None:  # noqa: F811
    """A slide-mode arm's start is the start in slide moves: it must not reuse the atomic arm's evaluation of the
    same tasks, while arms that differ only in training share one."""
    cfg = _cfg(sft_model, data4)
    tasks = trained_tasks(cfg)
    other_lr = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, lr=cfg.rl.lr / 3, estimator="distance"))
    other_mode = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, action_mode="slide"))
    other_temperature = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, temperature=0.3))
    assert evaluation_key(other_lr, tasks) == evaluation_key(cfg, tasks)
    assert evaluation_key(other_mode, tasks) != evaluation_key(cfg, tasks)
    assert evaluation_key(other_temperature, tasks) != evaluation_key(cfg, tasks)
    assert evaluation_key(cfg, tasks[1:]) != evaluation_key(cfg, tasks)


def test_each_gain_is_compared_with_the_first_arms_gain_seed_by_seed() -> None:
    rows = {
        "atomic": {"minus_start": {"per_seed": [0.028, 0.017, 0.023]}},
        "macro": {"minus_start": {"per_seed": [0.102, 0.085, 0.064]}},
        "subgoal": {"minus_start": {"per_seed": [0.028, 0.017, 0.023]}},
    }
    add_gain_minus_first(rows)
    assert "gain_minus_first" not in rows["atomic"]
    macro = rows["macro"]["gain_minus_first"]
    assert macro["per_seed"] == pytest.approx([0.074, 0.068, 0.041])
    assert macro["mean"] == pytest.approx(0.061) and 0 < macro["lo"] < 0.061 < macro["hi"]
    assert rows["subgoal"]["gain_minus_first"]["per_seed"] == pytest.approx([0, 0, 0])


def test_the_report_says_where_the_tasks_came_from() -> None:
    from experiments.trained_tasks_eval import source_phrase

    assert "read from the run's log" in source_phrase([True, True]) and "recomputed" not in source_phrase([True])
    assert "recomputed" in source_phrase([False]) and "log" not in source_phrase([False, False])
    both = source_phrase([True, False])
    assert "read from the run's log" in both and "recomputed" in both
