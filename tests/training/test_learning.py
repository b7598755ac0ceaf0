"""RL raises the success of a deliberately weakened policy on a short-horizon task (slow: about 3.5 minutes).

The policy is the shipped SFT checkpoint (`checkpoints/sudoku4-sft`) sampled at temperature 1.2 instead of
its 0.8: at 1.2 most of its answers come out garbled (about 60% format errors), so it solves only about one
in ten 4x4 puzzles with 3-4 empty cells within 6 turns. REINFORCE with the tiny CPU profile's settings
(batch-normalised advantages, alpha = 0.2, lr 1e-4, IS bounds 0.9-1.1, as in `configs/tiny-cpu/`; smaller
batches of 4 tasks x 4 samples, so that 30 updates fit in the budget) trains at that temperature,
i.e. it has to sharpen the policy's own distribution, and success on a fixed set of held-out puzzles rises.

Measured on 24 held-out puzzles x 4 samples (seed 0, two runs, identical): success 0.104 before, 0.385 after
30 iterations (about 3 minutes on one core). RL seeds 1 and 2 of the same setting reached 0.427 and 0.542, so
the asserted gain (+0.10 against +0.28 to +0.44 measured) leaves a wide margin. Notes from tuning: lr 2e-4
collapsed the policy after its first update on one seed of two, lr 1e-3 in both settings tried, and 8
iterations of 8 tasks were too few to move it beyond the noise.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.config import EnvConfig
from milepost.datasets import write_dataset
from milepost.envs.sudoku import SudokuEnv, make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.training.config import AgentConfig, EvalConfig, RLConfig, TrainConfig
from milepost.types import Task

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"
TEMPERATURE = 1.2  # the checkpoint was trained for 0.8; at 1.2 it is weak but not hopeless
MAX_STEPS = 6  # turn budget for 3-4 empty cells: two or three garbled answers are allowed, not more
EVAL_TASKS, EVAL_SAMPLES, EVAL_SEED = 24, 4, 123
MIN_GAIN = 0.10  # measured gain +0.28 at seed 0 (+0.32 and +0.44 at RL seeds 1 and 2)


def puzzles(split: str, count: int, seed: int, skip: frozenset[str] = frozenset()) -> list[Task]:
    """4x4 puzzles with 3 or 4 empty cells (level S1), none of them in ``skip``."""
    out: list[Task] = []
    index = 0
    while len(out) < count:
        puzzle, solution = generate_easy(4, 3 + index % 2, seed, index)
        index += 1
        task = make_task(puzzle, solution, level="S1", split=split, seed=seed, index=len(out))
        if task.payload["puzzle"] not in skip:
            out.append(task)
    return out


def success(model_dir: Path, tasks: list[Task]) -> float:
    """avg@EVAL_SAMPLES success at TEMPERATURE on ``tasks`` (fixed sampling seed)."""
    from milepost.backends.hf import HFBackend

    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        backend = HFBackend(model_dir)
    settings = AgentSettings(memory_k=0, temperature=TEMPERATURE, max_new_tokens=32, batch_size=128)
    jobs = [Job(task, sample) for task in tasks for sample in range(EVAL_SAMPLES)]
    episodes = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=MAX_STEPS, render="hints"),
        jobs,
        BackendPolicy(backend, settings),
        settings,
        seed=EVAL_SEED,
        progress=False,
    )
    return sum(ep.success for ep in episodes) / len(episodes)


def learning_run(tmp_path: Path, seed: int = 0, iterations: int = 30) -> tuple[float, float]:
    """(success before, success after) ``iterations`` REINFORCE iterations from the weakened checkpoint."""
    import torch

    from milepost.training.trainer import train_rl

    torch.set_num_threads(1)
    test = puzzles("test", EVAL_TASKS, seed=7)
    train = puzzles("train", 64, seed=11, skip=frozenset(t.payload["puzzle"] for t in test))
    data = write_dataset(tmp_path / "data", {"train": train, "test": test}, {"seed": 11})
    cfg = TrainConfig(
        name="learning",
        model=str(CHECKPOINT),
        data=str(data),
        env=EnvConfig(size=4, max_steps=MAX_STEPS, render="hints"),
        agent=AgentConfig(memory_k=0, temperature=TEMPERATURE, max_new_tokens=32),
        rl=RLConfig(
            iterations=iterations,
            tasks_per_iter=4,
            samples_per_task=4,
            minibatches=2,
            lr=1e-4,
            is_low=0.9,
            is_high=1.1,
        ),
        eval=EvalConfig(n=EVAL_SAMPLES, ks=[1], limit=EVAL_TASKS),
        seed=seed,
        threads=1,
        checkpoint_every=iterations,
    )
    before = success(CHECKPOINT, test)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        final = train_rl(cfg, tmp_path / "run", progress=False)
    return before, success(final, test)


@pytest.mark.slow
@pytest.mark.skipif(not (CHECKPOINT / "config.json").exists(), reason="no shipped checkpoint")
def test_rl_raises_the_success_of_a_weak_policy(tmp_path: Path) -> None:
    before, after = learning_run(tmp_path)
    print(f"success before {before:.3f}, after {after:.3f}")
    assert 0.0 < before < 0.35, f"the weakened start should be weak but not hopeless, got {before:.3f}"
    assert after >= before + MIN_GAIN, f"RL did not raise success: {before:.3f} -> {after:.3f}"
