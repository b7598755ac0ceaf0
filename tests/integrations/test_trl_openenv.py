"""TRL's ``GRPOTrainer`` with its ``environment_factory`` on a real ``milepost openenv`` server (a subprocess on a
free loopback port), two GRPO steps of the shipped 1M-parameter 4x4 Sudoku SFT model on CPU (skipped without the
``trl`` and ``openenv`` extras)."""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'milepost[trl]'")
pytest.importorskip("openenv", reason="the openenv extra is not installed: pip install 'milepost[openenv]'")

import torch

from milepost.cli.main import main
from milepost.integrations.openenv_trl import OpenEnvEpisode, answer_reward, optimal_advantage_reward, trl_dataset

SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"

# The checkpoint's own template (`<|role|>\ncontent<|end|>`), which TRL's environment_factory refuses because it drops
# tool calls (trl/chat_template_utils.py: supports_tool_calling). This one renders every message without tool calls
# exactly as the checkpoint's does, so the model reads the prompts it was trained on, and renders tool calls and
# tool messages too.
TOOL_TEMPLATE = (
    "{%- for message in messages %}<|{{ message['role'] }}|>\n"
    "{%- if message.get('tool_calls') %}{% for call in message['tool_calls'] %}\n"
    "{{ call['function']['name'] }}({{ call['function']['arguments'] | tojson }}){% endfor %}\n"
    "{%- else %}\n{{ message['content'] }}{% endif %}<|end|>\n"
    "{% endfor %}{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``milepost openenv`` on 4x4 Sudoku tasks, the checkpoint's settings (hints rendering, 6 turns)."""
    data = tmp_path / "sudoku4"
    args = ["data", "sudoku", "--size", "4", "--levels", "S1", "--train", "8", "--test", "2", "--seed", "0"]
    assert main([*args, "--out", str(data)]) == 0
    cmd = [sys.executable, "-m", "milepost", "openenv", "--env", "sudoku", "--data", str(data), "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--render", "hints", "--max-steps", "6"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        url = None
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "milepost openenv exited before serving"
            match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            url = match.group(1) if match else None
        assert url is not None, "milepost openenv did not say where it serves"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_grpo_trainer_environment_factory_trains_against_milepost_openenv(server: str, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    dataset = trl_dataset(server, "sudoku", "train", limit=4)
    model = AutoModelForCausalLM.from_pretrained(SFT, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(SFT)
    tokenizer.chat_template = TOOL_TEMPLATE
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    episodes: list[OpenEnvEpisode] = []

    def factory() -> OpenEnvEpisode:
        episodes.append(functools.partial(OpenEnvEpisode, server)())
        return episodes[-1]

    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_completion_length=32,
        learning_rate=1e-4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        reward_weights=[1.0, 0.0],  # A* is logged beside the reward, not trained on
        temperature=1.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[answer_reward, optimal_advantage_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.train()
    steps = [row for row in trainer.state.log_history if "loss" in row]
    assert len(steps) == 2 and all(math.isfinite(row["loss"]) for row in steps)
    # Each rollout reset a session of the server on a dataset task and played one answer there.
    assert len(episodes) >= 4
    played = [e for e in episodes if e.rewards]
    assert len(played) >= 4 and all(len(e.rewards) == 1 for e in played)
    assert {e._last.observation.metadata["task_id"] for e in played} <= set(dataset["task_id"])
    # What TRL logged as the reward of the last step is what the environment gave the last batch.
    last = sum(e.rewards[0] for e in played[-4:]) / 4
    assert steps[-1]["rewards/answer_reward/mean"] == pytest.approx(last, abs=1e-6)
    assert "rewards/optimal_advantage_reward/mean" in steps[-1]
    moved = sum(float((p.detach() - before[name]).abs().sum()) for name, p in model.named_parameters())
    assert moved > 0
    for row in steps:
        print(
            f"GRPO step {row['step'] if 'step' in row else steps.index(row) + 1}: loss {row['loss']:.4f}, "
            f"reward {row['rewards/answer_reward/mean']:.3f}, "
            f"A* {row.get('rewards/optimal_advantage_reward/mean', float('nan')):.3f}, "
            f"frac_reward_zero_std {row['frac_reward_zero_std']:.2f}"
        )
