"""experiments/rushhour_smollm2.py: the pretrained Rush Hour start is evaluated under the 1M starts' settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from milepost.config import load_config
from milepost.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def _args(**over: object) -> argparse.Namespace:
    base = dict(work="runs", tasks=300, epochs=1.0, threads=2, n=4, limit=40, workers=0, batch_size=16, seed=0)
    base.update(baseline="checkpoints/rushhour-sft-d4slide3", tag="")
    base.update(over)
    return argparse.Namespace(**base)


def test_both_models_are_evaluated_with_the_1m_starts_episode_settings() -> None:
    from experiments.rushhour_smollm2 import CONFIG, LEVEL, eval_argv

    ref = load_config(TrainConfig, ROOT / "configs" / "tiny-cpu" / "rushhour_sft.yaml", [])  # sft_starts' config
    argv = eval_argv(Path("m"), Path("d"), Path("o"), _args())
    flag = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert float(flag["--temperature"]) == ref.agent.temperature
    assert int(flag["--max-steps"]) == ref.env.max_steps
    assert int(flag["--memory-k"]) == ref.agent.memory_k
    assert int(flag["--max-new-tokens"]) == ref.agent.max_new_tokens
    assert flag["--levels"] == LEVEL and flag["--policy"] == "hf:m" and "--action-mode" not in flag  # atomic
    ours = load_config(TrainConfig, CONFIG, [])
    assert (ours.agent.temperature, ours.env.max_steps, ours.agent.memory_k) == (0.8, 30, 0)
    assert ours.env.action_mode == "atomic" and ours.sft.lora_rank > 0 and not ours.bf16


def test_the_command_line_names_only_what_differs_from_the_defaults() -> None:
    from experiments.rushhour_smollm2 import command_line

    assert command_line(_args()) == "python -m experiments.rushhour_smollm2 --work runs"
    line = command_line(_args(tasks=100, batch_size=8, epochs=2.0, tag="_t100"))
    assert line.endswith("--tasks 100 --epochs 2 --tag _t100 --batch-size 8")
