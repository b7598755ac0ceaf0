"""The TRL adapter: milepost episodes inside TRL's own ``GRPOTrainer`` (skipped without the ``trl`` extra)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'milepost[trl]'")

import torch

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.backends.hf import HFBackend
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.integrations.trl import (
    TERMS_FIELD,
    ConversationPolicy,
    MilepostRollout,
    reward_functions,
    reward_weights,
)
from milepost.types import REWARD_TERM_NAMES

SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"
ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 6}


def _tasks(n: int) -> list:
    env = make_env("sudoku", **ENV_KWARGS)
    return [env.sample_task(seed) for seed in range(n)]


def test_transcript_is_what_the_model_scores(tiny_model_dir: Path) -> None:
    """Every answer token's behaviour log-prob equals the model's log-prob of it in the full transcript: the
    sequence TRL trains on is the context each turn was sampled from, and observation tokens are masked."""
    torch.manual_seed(0)
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32")
    settings = AgentSettings(memory_k=0, temperature=1.0, max_new_tokens=12, batch_size=2)
    policy = ConversationPolicy(backend, settings)
    jobs = [Job(task, sample=i) for i, task in enumerate(_tasks(2))]
    episodes = run_episodes(lambda: make_env("sudoku", **ENV_KWARGS), jobs, policy, settings, progress=False)
    assert sum(e.steps for e in episodes) >= 4  # the random model plays several turns (format errors do not end it)
    for episode in episodes:
        script = policy.transcripts[episode.sample]
        mask = script.env_mask
        assert len(script.completion_ids) == len(mask) == len(script.logprobs)
        # The answer tokens, in order, are exactly the turns' completions.
        answers = [tok for tok, m in zip(script.completion_ids, mask) if m]
        assert answers == [tok for turn in episode.turns for tok in turn.completion_ids]
        # One observation block between consecutive answers, and it holds the environment's observation text.
        blocks = "".join(str(m) for m in mask).split("1")
        assert sum(1 for b in blocks if b) == episode.steps - 1
        env_text = backend.tokenizer.decode([t for t, m in zip(script.completion_ids, mask) if not m])
        for turn in episode.turns[1:]:
            assert turn.observation.splitlines()[0] in env_text
        ids = torch.tensor([script.prompt_ids + script.completion_ids])
        with torch.no_grad():
            logits = backend.model(ids).logits[0, len(script.prompt_ids) - 1 : -1]
        scored = torch.log_softmax(logits.float(), dim=-1).gather(-1, torch.tensor(script.completion_ids)[:, None])
        for lp, want, m in zip(scored[:, 0].tolist(), script.logprobs, mask):
            if m:
                assert lp == pytest.approx(want, abs=1e-4)
            else:
                assert want == 0.0


def test_reward_functions_read_the_episode_terms() -> None:
    terms = [{"outcome": 1.0, "format": 0.0, "valid": -2.0, "milestone": 3.0, "success": 1.0}]
    funcs = reward_functions()
    assert [f.__name__ for f in funcs] == [f"milepost_{n}" for n in REWARD_TERM_NAMES]
    got = [f(prompts=["p"], completions=["c"], **{TERMS_FIELD: terms})[0] for f in funcs]
    assert got == [1.0, 0.0, -2.0, 3.0]
    assert reward_weights() == [1.0, 0.1, 0.1, 0.0]


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
