"""Every shipped config validates, and the paper-scale ones carry the seed paper's values (Table 3, appendix C.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.config import load_config
from milepost.envs.levels import parse_levels
from milepost.training.config import TrainConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# configs/verl/ holds verl's agent-loop files (tests/integrations/test_verl.py builds them), not training configs.
ALL = sorted(p for p in CONFIGS.glob("**/*.yaml") if "verl" not in p.relative_to(CONFIGS).parts)
PAPER_ARMS = ("sudoku9_sft", "sudoku9_atomic", "sudoku9_macro", "sudoku9_subgoal", "sudoku9_curriculum")
RL_ARMS = [CONFIGS / "paper" / f"{name}.yaml" for name in PAPER_ARMS if name != "sudoku9_sft"]


def test_the_paper_arms_are_all_there() -> None:
    assert {p.stem for p in (CONFIGS / "paper").glob("*.yaml")} == set(PAPER_ARMS)
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    assert all(f"paper/{name}.yaml" in readme for name in PAPER_ARMS)


@pytest.mark.parametrize("path", ALL, ids=[str(p.relative_to(CONFIGS)) for p in ALL])
def test_every_config_validates(path: Path) -> None:
    """The loader `milepost sft` / `milepost train` use: unknown keys, wrong types and failed checks raise."""
    cfg = load_config(TrainConfig, path)
    levels = [cfg.levels, cfg.eval.levels, *(phase.levels for phase in cfg.rl.curriculum)]
    for spec in filter(None, levels):
        assert parse_levels(spec, cfg.env.name, cfg.env.size)


@pytest.mark.parametrize("path", RL_ARMS, ids=[p.stem for p in RL_ARMS])
def test_paper_rl_arms_carry_table_3(path: Path) -> None:
    cfg = load_config(TrainConfig, path)
    rl = cfg.rl
    assert (rl.lr, rl.gamma, rl.alpha) == (1e-6, 0.995, 0.2)
    assert (rl.is_cap, rl.is_low, rl.is_high) == (3.0, 0.995, 1.01)
    assert rl.is_truncate and rl.is_mask and rl.normalisation == "batch"
    assert cfg.agent.max_new_tokens == (4096 if cfg.env.action_mode == "flexible" else 2048)


@pytest.mark.parametrize("path", [CONFIGS / "paper" / f"{n}.yaml" for n in PAPER_ARMS], ids=PAPER_ARMS)
def test_paper_configs_share_the_paper_setting(path: Path) -> None:
    cfg = load_config(TrainConfig, path)
    assert (cfg.env.name, cfg.env.size, cfg.env.max_steps) == ("sudoku", 9, 50)  # H_max = 50
    assert (cfg.agent.memory_k, cfg.agent.temperature, cfg.agent.top_p) == (2, 0.8, 1.0)  # K = 2
    assert cfg.bf16 and cfg.device == "cuda"
    assert not cfg.model.startswith("tiny:")
    assert (cfg.eval.n, cfg.eval.ks) == (4, [1, 4])


def test_paper_arm_specifics() -> None:
    def load(name: str) -> TrainConfig:
        return load_config(TrainConfig, CONFIGS / "paper" / f"{name}.yaml")

    sft = load("sudoku9_sft")
    assert (sft.sft.lr, sft.sft.epochs, sft.levels) == (5e-6, 4.0, "L1-L2")  # appendix C.2, Table 7
    assert load("sudoku9_macro").env.action_mode == "flexible"
    subgoal = load("sudoku9_subgoal")
    assert subgoal.rl.subgoal_decomposition and subgoal.env.action_mode == "atomic"
    assert [p.levels for p in load("sudoku9_curriculum").rl.curriculum] == ["L1-L2", "L3-L4"]
    assert load("sudoku9_atomic").env.action_mode == "atomic" and not load("sudoku9_atomic").rl.subgoal_decomposition
