"""Config values that are not finite, and config files that are not text, are one-line errors (exit status 2).

Before, ``lr: .nan`` passed every check (``nan <= 0`` is false, so a check for ``lr <= 0`` let it through) and
training ran with NaN parameters; a binary config file was a UnicodeDecodeError traceback, a YAML syntax error a
multi-line message, and ``--set rl.lr=1e-4`` (YAML 1.1 reads ``1e-4`` as a string) was refused.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.config import EnvConfig, RewardWeights, load_config
from milepost.errors import InputError

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "tiny-cpu"


@pytest.mark.parametrize(
    ("command", "config", "override", "field"),
    [
        ("train", "sudoku4_atomic.yaml", "rl.lr=.nan", "config.rl.lr"),
        ("train", "sudoku4_atomic.yaml", "rl.gamma=.inf", "config.rl.gamma"),
        ("train", "sudoku4_atomic.yaml", "rl.is_low=-.inf", "config.rl.is_low"),
        ("train", "sudoku4_atomic.yaml", "agent.temperature=1.0e+999", "config.agent.temperature"),
        ("train", "sudoku4_atomic.yaml", "rl.lr=1e999", "config.rl.lr"),
        ("train", "sudoku4_mira.yaml", "mira.shaping_coef=.NaN", "config.mira.shaping_coef"),
        ("train", "sudoku4_atomic.yaml", "env.reward.outcome=.inf", "config.env.reward.outcome"),
        ("sft", "sudoku4_sft.yaml", "sft.lr=.nan", "config.sft.lr"),
        ("sft", "sudoku4_sft.yaml", "sft.epochs=.inf", "config.sft.epochs"),
    ],
)
def test_non_finite_overrides_are_refused(
    command: str, config: str, override: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main([command, "--config", str(CONFIGS / config), "--set", override, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{field}: must be a finite number" in err and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize("text", ["rl: {lr: .nan}", "rl:\n  lr: .inf\n", "sft: {lr: -.Inf}", "agent: {top_p: .NAN}"])
def test_non_finite_yaml_values_are_refused(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "must be a finite number" in err and err.count("\n") == 1, err


def test_finite_values_and_nan_strings_keep_their_meaning(tmp_path: Path) -> None:
    from milepost.training.config import TrainConfig

    # 1e-4 is a string to YAML 1.1 (PyYAML): the documented `--set rl.lr=1e-4` used to be refused.
    cfg = load_config(TrainConfig, CONFIGS / "sudoku4_atomic.yaml", ["rl.lr=1e-4", "sft.lr=5e-6", "name=nan"])
    assert cfg.rl.lr == 1e-4 and cfg.sft.lr == 5e-6 and cfg.name == "nan"  # "nan" is a name, not a number
    config = tmp_path / "c.yaml"
    config.write_text("rl: {lr: 3e-5, gamma: 0.99}\n")
    assert load_config(TrainConfig, config).rl.lr == 3e-5
    with pytest.raises(InputError, match=r"config\.rl\.lr: expected a number, got 'nan'"):
        load_config(TrainConfig, None, ["rl.lr=nan"])


def test_reward_weights_refuse_non_finite_values_when_built_in_code() -> None:
    with pytest.raises(ValueError, match=r"reward\.valid: weights must be finite"):
        RewardWeights(valid=math.nan)
    with pytest.raises(ValueError, match=r"reward\.outcome: weights must be finite"):
        EnvConfig(reward=RewardWeights(outcome=math.inf))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a UTF-8 text file"),
        (b"rl: {lr: [1, 2\nsft: x\n", "not valid YAML"),
    ],
)
def test_unreadable_config_files_are_one_line(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_bytes(content)
    assert main(["sft", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("overrides", "message"),
    [(["eval.n=2", "eval.ks=[1,4]"], "eval.ks"), (["eval.ks=[]"], "eval.ks"), (["eval.n=0"], "eval")],
)
def test_evaluation_settings_are_checked_before_training(overrides: list[str], message: str) -> None:
    """pass@k with k > n used to pass the config and kill the run at its first evaluation."""
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    with pytest.raises(InputError, match=message):
        load_config(TrainConfig, None, overrides)
