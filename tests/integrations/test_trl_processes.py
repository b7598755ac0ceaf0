"""The TRL adapter's episode numbering across processes, at the seam TRL calls (``rollout_func(prompts,
trainer)``), without TRL itself: under several processes a GRPO group's repeats of one prompt are split over
them, and each repeat must play its own episode (its own seed), or the group holds duplicates and no spread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from milepost.envs import make_env
from milepost.integrations.trl import MilepostRollout

SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"
ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 2}


def _trainer(model: Any, tokenizer: Any, process_index: int, step: int = 0) -> Any:
    """What ``MilepostRollout`` reads of TRL's ``GRPOTrainer`` (``args``, ``accelerator``, ``model``,
    ``processing_class``, ``state``), for one process of a multi-process run."""
    return SimpleNamespace(
        args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0),
        accelerator=SimpleNamespace(process_index=process_index, unwrap_model=lambda m: m),
        model=model,
        processing_class=tokenizer,
        state=SimpleNamespace(global_step=step),
    )


def test_a_group_split_over_two_processes_plays_distinct_episodes() -> None:
    torch.manual_seed(0)
    env = make_env("sudoku", **ENV_KWARGS)
    rollout = MilepostRollout("sudoku", [env.sample_task(0)], env_kwargs=ENV_KWARGS, max_new_tokens=16)
    model = AutoModelForCausalLM.from_pretrained(SFT, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(SFT)
    prompt = rollout.dataset()[0]["prompt"]
    # One group of 4 generations of the same prompt, 2 on each of two processes (TRL's process slices).
    seeds: list[int] = []
    completions: list[tuple[int, ...]] = []
    for process in (0, 1):
        out = rollout([prompt, prompt], _trainer(model, tokenizer, process))
        assert [e.sample for e in rollout.episodes] == [2 * process, 2 * process + 1]
        seeds += [e.seed for e in rollout.episodes]
        completions += [tuple(ids) for ids in out["completion_ids"]]
    assert len(set(seeds)) == 4, seeds
    assert len(set(completions)) > 1  # the sampled answers differ too, not only the seeds


def test_each_call_within_a_trainer_step_draws_new_episodes() -> None:
    env = make_env("sudoku", **ENV_KWARGS)
    rollout = MilepostRollout("sudoku", [env.sample_task(0)], env_kwargs=ENV_KWARGS)
    prompts = [rollout.dataset()[0]["prompt"]] * 3
    jobs = rollout.jobs(prompts, process_index=1)
    assert [j.sample for j in jobs] == [3, 4, 5]
    # Two generations in one optimizer step (steps_per_generation < gradient accumulation), then the next step.
    rounds = [rollout.round_seed(7), rollout.round_seed(7), rollout.round_seed(8), rollout.round_seed(8)]
    assert len(set(rounds)) == 4
    # The same run seed, step and call give the same seed (a resumed run replays its episodes).
    again = MilepostRollout("sudoku", [env.sample_task(0)], env_kwargs=ENV_KWARGS)
    assert again.round_seed(7) == rounds[0]


@pytest.mark.distributed
def test_two_real_processes_play_distinct_episodes_of_one_group(tmp_path: Path) -> None:
    """TRL itself on two gloo processes (torchrun): the group's 4 generations, 2 per process, are 4 episodes."""
    pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'milepost[trl]'")
    script = Path(__file__).with_name("trl_two_process.py")
    root = str(Path(__file__).resolve().parents[2])  # this checkout's milepost, whatever the venv points at
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run([*command, str(script), str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["processes"] == 2 for r in ranks)
    played = [e for r in ranks for e in r["played"]]
    assert sorted(e["sample"] for e in played) == [0, 1, 2, 3]
    assert len({e["seed"] for e in played}) == 4
    assert len({tuple(e["answer"]) for e in played}) > 1
