"""The TRL adapter: milepost episodes inside TRL's own ``GRPOTrainer`` (skipped without the ``trl`` extra). The
transcript, its masks and the reward terms are tested without TRL in ``test_transcript.py``."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'milepost[trl]'")

import torch

from milepost.envs import make_env
from milepost.errors import InputError
from milepost.integrations.trl import MilepostRollout, reward_functions, reward_weights
from milepost.types import REWARD_TERM_NAMES

SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"
ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 6}


def _tasks(n: int) -> list:
    env = make_env("sudoku", **ENV_KWARGS)
    return [env.sample_task(seed) for seed in range(n)]


def test_rollout_refuses_tasks_of_another_environment_and_unknown_prompts() -> None:
    rollout = MilepostRollout("sudoku", _tasks(1), env_kwargs=ENV_KWARGS)
    with pytest.raises(InputError, match="not one of this rollout's tasks"):
        rollout.task_for([{"role": "user", "content": "hello"}])
    with pytest.raises(InputError, match="not rushhour"):
        MilepostRollout("rushhour", _tasks(1), env_kwargs=ENV_KWARGS)
    row = rollout.dataset()[0]
    assert rollout.task_for(row["prompt"]).task_id == row["task_id"]


def test_grpo_trainer_trains_on_milepost_episodes(tmp_path: Path) -> None:
    """Two GRPO steps of the shipped 1M-parameter Sudoku SFT model through TRL itself, on CPU."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    rollout = MilepostRollout("sudoku", _tasks(2), env_kwargs=ENV_KWARGS, max_new_tokens=32)
    model = AutoModelForCausalLM.from_pretrained(SFT, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(SFT)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        learning_rate=1e-4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        reward_weights=reward_weights(),
        temperature=1.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_functions(),
        args=args,
        train_dataset=rollout.dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.train()
    steps = [row for row in trainer.state.log_history if "loss" in row]
    assert len(steps) == 2
    assert all(math.isfinite(row["loss"]) for row in steps)
    # The environment's terms reached TRL as separate rewards, and some group had a spread (a learning signal).
    assert all(f"rewards/milepost_{name}/mean" in steps[0] for name in REWARD_TERM_NAMES)
    assert any(row["frac_reward_zero_std"] < 1 for row in steps)
    assert len(rollout.episodes) == 4 and all(e.steps >= 1 for e in rollout.episodes)
    moved = sum(float((p.detach() - before[name]).abs().sum()) for name, p in model.named_parameters())
    assert moved > 0
