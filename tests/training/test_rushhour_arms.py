"""The Rush Hour arms' configs (tiny CPU profile) load and say what their arm is; slide-macro demonstrations."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from milepost.config import load_config
from milepost.errors import InputError
from milepost.training.config import TrainConfig
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "tiny-cpu"


def test_the_rush_hour_arm_configs() -> None:
    cfgs = {
        arm: load_config(TrainConfig, CONFIGS / f"rushhour_{arm}.yaml")
        for arm in ("atomic", "slide", "subgoal", "curriculum")
    }
    assert all(c.env.name == "rushhour" and c.env.size == 6 for c in cfgs.values())
    assert (cfgs["atomic"].env.action_mode, cfgs["atomic"].env.max_steps) == ("atomic", 30)
    assert (cfgs["slide"].env.action_mode, cfgs["slide"].env.max_steps) == ("slide", 20)
    assert cfgs["subgoal"].rl.subgoal_decomposition and not cfgs["atomic"].rl.subgoal_decomposition
    assert [p.levels for p in cfgs["curriculum"].rl.curriculum] == ["4-6", "7-9"]
    # equal budgets: the same iterations, tasks and samples per arm
    budgets = {(c.rl.iterations, c.rl.tasks_per_iter, c.rl.samples_per_task) for c in cfgs.values()}
    assert len(budgets) == 1
    sft = load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml")
    assert sft.model == "tiny:1m" and (sft.sft.macro_mode, sft.sft.macro_share) == ("slide", 0.5)
    with pytest.raises(InputError, match=r"sft\.macro_mode"):
        load_config(TrainConfig, None, ["sft.macro_mode=fixed"])


def test_slide_macro_demonstrations(tmp_path: Path) -> None:
    import torch

    from milepost.backends.hf import HFBackend
    from milepost.config import EnvConfig
    from milepost.training.config import AgentConfig, SFTConfig
    from milepost.training.sft import demonstrations

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        backend = HFBackend(ROOT / "checkpoints" / "sudoku4-sft")
    tasks = rush_tasks(7, 9, 2)
    cfg = TrainConfig(
        env=EnvConfig(name="rushhour", size=6, max_steps=30, action_mode="atomic"),
        agent=AgentConfig(memory_k=0),
        sft=SFTConfig(tasks=2, macro_share=1.0, macro_mode="slide"),
    )
    examples = demonstrations(cfg, tasks, backend, progress=False)
    texts = [backend.tokenizer.decode(e.completion_ids[:-1]) for e in examples]
    # every demonstration turn is one slide; optimal slides of 7-9-move puzzles move some car several cells
    assert len(examples) <= sum(t.meta["min_moves"] for t in tasks)
    assert any(re.search(r"\d\s*\)", t) and re.search(r",\s*[2-4]\s*\)", t) for t in texts), texts[:3]
