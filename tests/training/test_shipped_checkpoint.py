"""The shipped SFT checkpoint (`checkpoints/sudoku4-sft`) and the command that reproduces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.agent.prompts import build_messages
from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.envs.sudoku import SudokuEnv

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"


def first_step_accuracy(model_dir: Path, seeds: range, level: str = "S3") -> float:
    """Share of fresh 4x4 puzzles whose first greedy answer writes a solution digit (hints renderer)."""
    import torch

    torch.set_num_threads(1)
    backend = HFBackend(model_dir)
    correct = 0
    for seed in seeds:
        env = SudokuEnv(size=4, render="hints", level=level)
        obs, _ = env.reset(seed=seed)
        request = GenerationRequest(
            messages=build_messages(env.goal_text(), obs), params=SamplingParams(temperature=0, max_new_tokens=32)
        )
        text = backend.generate([request])[0].text
        *_, info = env.step(text)
        correct += info["correct_actions"]
    return correct / len(seeds)


@pytest.mark.skipif(not (CHECKPOINT / "config.json").exists(), reason="no shipped checkpoint")
def test_shipped_checkpoint_makes_correct_first_moves() -> None:
    assert first_step_accuracy(CHECKPOINT, range(100, 116)) >= 0.75


@pytest.mark.slow
def test_the_documented_command_reproduces_a_competent_checkpoint(tmp_path: Path) -> None:
    """`milepost data sudoku ...` then `milepost sft --config configs/tiny-cpu/sudoku4_sft.yaml` (15-30 min)."""
    from milepost.cli.main import main

    data = tmp_path / "sudoku4"
    assert (
        main(
            [
                "data",
                "sudoku",
                "--size",
                "4",
                "--levels",
                "S1-S5",
                "--train",
                "400",
                "--test",
                "40",
                "--seed",
                "0",
                "--out",
                str(data),
                "--no-progress",
            ]
        )
        == 0
    )
    out = tmp_path / "sft"
    assert (
        main(
            [
                "sft",
                "--config",
                str(ROOT / "configs" / "tiny-cpu" / "sudoku4_sft.yaml"),
                "--set",
                f"data={data}",
                "--set",
                "threads=1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert first_step_accuracy(out / "final", range(100, 116)) >= 0.75
