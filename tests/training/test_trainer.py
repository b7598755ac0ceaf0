"""Seeded tiny SFT and RL runs: pinned first losses, exact resume, one-line config errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from milepost.config import EnvConfig, load_config
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.prompt_card import card_from_config, read_card
from milepost.training.config import AgentConfig, EvalConfig, RLConfig, SFTConfig, TrainConfig
from milepost.training.sft import train_sft
from milepost.training.trainer import train_rl

# First three SFT losses of the seeded run below (tiny 0.5M Qwen3, seed 0). A change to the tokenizer, the
# tiny presets, the prompt, the demonstrations or the loss moves them; update them only for such a change.
PINNED_SFT_LOSSES: list[float] = [6.0933, 5.7039, 5.4326]


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list] = {"train": [], "test": []}
    rng = random.Random(0)
    for split, count in (("train", 40), ("test", 6)):
        for i in range(count):
            empties = rng.randint(3, 6)
            level = "S1" if empties <= 4 else "S2"
            splits[split].append(
                make_task(
                    *generate_easy(4, empties, 5, len(splits[split]) + 100 * (split == "test")),
                    level=level,
                    split=split,
                    index=i,
                )
            )
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 5})


def _cfg(model: Path | str, data: Path, **rl: object) -> TrainConfig:
    return TrainConfig(
        name="t",
        model=str(model),
        data=str(data),
        env=EnvConfig(size=4, max_steps=8, render="cells"),
        agent=AgentConfig(memory_k=1, max_new_tokens=28),
        sft=SFTConfig(tasks=24, epochs=1.0, batch_size=8, lr=3e-3, warmup_steps=2),
        rl=RLConfig(
            **(
                {
                    "iterations": 4,
                    "tasks_per_iter": 3,
                    "samples_per_task": 2,
                    "minibatches": 2,
                    "lr": 1e-3,
                    "is_low": 0.5,
                    "is_high": 2.0,
                }
                | rl
            )
        ),  # type: ignore[arg-type]
        eval=EvalConfig(n=1, ks=[1], limit=3),
        threads=1,
        checkpoint_every=2,
    )


# A fixed tokenizer corpus, so the pinned losses do not move when an environment's text changes.
CORPUS = [
    "Solve this 4x4 Sudoku: fill every empty cell so that each row, each column and each 2x2 box holds the "
    "digits 1-4 exactly once. An action writes digit n into row X, column Y: value(n, rXcY).",
    "Answer as: <think>your reasoning</think> REASON: one short sentence ACTION: your action",
    "Recent turns:\nObservation:\n12.4\n3.21\nREASON: only 3 fits r1c3. ACTION: value(3, r1c3)\n"
    "Rejected: r1c3 is already filled\nCurrent observation:\n1234\n3421\n2143\n4312",
]


@pytest.fixture(scope="module")
def tiny_fixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from milepost.backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", size="0.5m", corpus=CORPUS, vocab_size=420)


@pytest.fixture(scope="module")
def sft_model(tiny_fixed: Path, data4: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sft")
    return train_sft(_cfg(tiny_fixed, data4), out, progress=False)


def test_sft_pins_its_first_losses_and_learns(sft_model: Path) -> None:
    rows = list(read_jsonl(sft_model.parent / "metrics.jsonl"))
    losses = [r["loss/sft"] for r in rows]
    if PINNED_SFT_LOSSES:
        assert losses[:3] == pytest.approx(PINNED_SFT_LOSSES, abs=2e-3)
    else:  # pragma: no cover - printed once to fill the constant
        print("PINNED", losses[:3])
    assert losses[-1] < losses[0] * 0.7
    assert (sft_model / "config.json").is_file() and (sft_model / "model.safetensors").is_file()
    # The prompt card: the settings the demonstrations were rendered with (_cfg's), for `milepost eval`.
    expected = {"env": "sudoku", "render": "cells", "action_mode": "atomic", "memory_k": 1, "agent": "plain"}
    assert read_card(sft_model) == {**expected, "max_new_tokens": 28, "made_by": "milepost sft"}


def test_rl_resume_matches_the_uninterrupted_run(
    sft_model: Path, data4: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that crashes between checkpoints and is resumed ends exactly like the uninterrupted run."""
    from milepost.training import trainer

    # Unnormalised advantages keep a gradient even when every sampled answer of this weak policy fails.
    cfg = _cfg(sft_model, data4, normalisation="none")
    seen: list[tuple[int, int]] = []  # on_episodes: every iteration's rollouts, before its update
    full = train_rl(cfg, tmp_path / "full", progress=False, on_episodes=lambda it, eps: seen.append((it, len(eps))))
    assert seen == [(it, 3 * 2) for it in range(4)]  # iterations 0-3, tasks_per_iter x samples_per_task each
    # The crash: iteration 4's update raises, after iterations 1-3 wrote their metric rows and iteration 2
    # wrote the last checkpoint (checkpoint_every=2), so row 3 lies beyond the checkpoint.
    real_update, calls = trainer.update, []

    def crashing_update(*args: object, **kwargs: object) -> dict[str, float]:
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("simulated crash")
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as mp:
        mp.setattr(trainer, "update", crashing_update)
        with pytest.raises(RuntimeError, match="simulated crash"):
            train_rl(cfg, tmp_path / "cut", progress=False)
    assert [r["iteration"] for r in read_jsonl(tmp_path / "cut" / "metrics.jsonl")] == [1, 2, 3]
    with pytest.raises(InputError, match="pass --resume"):
        train_rl(cfg, tmp_path / "cut", progress=False)
    resumed = train_rl(cfg, tmp_path / "cut", resume=True, progress=False)
    from safetensors.torch import load_file

    assert read_card(full) == read_card(resumed) == {**card_from_config(cfg), "made_by": "milepost train"}
    a, b = load_file(full / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = load_file(sft_model / "model.safetensors")
    assert not all(torch.equal(a[k], start[k]) for k in a), "RL made no update at all"

    def rows(run: str) -> list[str]:
        return [
            json.dumps({k: v for k, v in r.items() if not k.startswith("perf/")}, sort_keys=True)
            for r in read_jsonl(tmp_path / run / "metrics.jsonl")
        ]

    # identical metrics, no row duplicated by the replayed iteration 3
    assert rows("full") == rows("cut") and len(rows("full")) == 4
    # Every iteration trained on real turns and the importance weights stayed near 1: the first minibatch is
    # on-policy (rho = 1), the second follows one small step (mean weights measured 0.95-1.05; scoring at the
    # wrong temperature gives about 0.5); nothing was masked.
    for row in map(json.loads, rows("full")):
        assert row["train/turns"] > 0
        assert row["is/onpolicy_rho"] == pytest.approx(1.0, abs=1e-3)
        assert row["is/masked_frac"] == 0.0
        assert 0.85 <= row["is/mean_weight"] <= 1.15
    other = _cfg(sft_model, data4, normalisation="none", lr=5e-4)
    with pytest.raises(InputError, match="different config"):
        train_rl(other, tmp_path / "cut", resume=True, progress=False)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rl.lr=-1"], "rl.lr"),
        (["rl.colour=1"], "unknown field"),
        (["env.action_mode=atomic", "env.macro_k=3"], "env.macro_k"),
        (["rl.curriculum=[{levels: S1, iterations: 5}]"], "add up to rl.iterations"),
        (["agent.temperature=0"], "agent.temperature"),
        (["sft.noise=1.5"], "sft.noise"),
    ],
)
def test_bad_training_configs(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_config(TrainConfig, None, overrides)


def test_shipped_configs_load() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    files = sorted(p for p in root.glob("**/*.yaml") if "verl" not in p.relative_to(root).parts)  # verl's own format
    assert files
    for f in files:
        load_config(TrainConfig, f)


def test_evaluate_policy_runs_on_the_test_split(sft_model: Path, data4: Path, tmp_path: Path) -> None:
    """The trainer's evaluation hook passes the env config (which names a size) through `milepost eval`."""
    from milepost.backends.hf import HFBackend
    from milepost.training.trainer import evaluate_policy

    cfg = _cfg(sft_model, data4)
    result = evaluate_policy(cfg, HFBackend(sft_model), tmp_path / "eval", "t", progress=False)
    assert {lv["level"] for lv in result["levels"]} == {"S1", "S2"}
    assert (tmp_path / "eval" / "report.md").is_file()


def test_sft_with_length_grouped_batches_learns(tiny_fixed: Path, data4: Path, tmp_path: Path) -> None:
    cfg = _cfg(tiny_fixed, data4)
    cfg.sft.group_by_length = True
    final = train_sft(cfg, tmp_path / "grouped", progress=False)
    losses = [r["loss/sft"] for r in read_jsonl(final.parent / "metrics.jsonl")]
    assert losses[-1] < losses[0] * 0.7
    assert losses[:3] != pytest.approx(PINNED_SFT_LOSSES, abs=2e-3)  # other batches than the plain shuffle


def test_lora_sft_trains_an_adapter_merges_it_and_resumes_exactly(
    tiny_fixed: Path, data4: Path, tmp_path: Path
) -> None:
    """``sft.lora_rank``: only the adapter learns (embeddings and norms stay the base's), ``final`` is an ordinary
    model folder with the adapter merged into the targeted projections, and a resumed run ends like the full one."""
    from safetensors.torch import load_file

    def cfg() -> TrainConfig:
        c = _cfg(tiny_fixed, data4)
        c.sft.lora_rank, c.sft.lr, c.sft.lora_targets = 4, 1e-2, ["q_proj", "v_proj", "up_proj"]
        return c

    full = train_sft(cfg(), tmp_path / "full", progress=False)
    losses = [r["loss/sft"] for r in read_jsonl(full.parent / "metrics.jsonl")]
    assert losses[-1] < losses[0]
    base, merged = load_file(tiny_fixed / "model.safetensors"), load_file(full / "model.safetensors")
    assert set(merged) == set(base)  # no lora_A / lora_B names: the adapter is folded in
    changed = {k for k in base if not torch.equal(base[k], merged[k])}
    assert changed and all(any(t in k for t in ("q_proj", "v_proj", "up_proj")) for k in changed)
    assert not any("k_proj" in k or "embed" in k or "norm" in k for k in changed)
    adapter = full.parent / "checkpoints"
    assert any((p / "adapter_config.json").is_file() for p in adapter.glob("step-*"))  # checkpoints hold the adapter

    # Interrupted after an earlier checkpoint (the older of the two kept), then resumed: the same final weights.
    import shutil

    part = shutil.copytree(full.parent, tmp_path / "part")
    first, *later = sorted((part / "checkpoints").glob("step-*"))
    assert later
    for step in later:
        shutil.rmtree(step)
    (part / "checkpoints" / "latest").write_text(first.name, encoding="utf-8")
    shutil.rmtree(part / "final")
    rows = list(read_jsonl(part / "metrics.jsonl"))[: int(first.name.split("-")[1])]
    (part / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    resumed = train_sft(cfg(), part, resume=True, progress=False)
    again = load_file(resumed / "model.safetensors")
    for k in merged:
        assert torch.allclose(again[k], merged[k], atol=1e-6), k


def test_lora_sft_refuses_targets_the_model_lacks(tiny_fixed: Path, data4: Path, tmp_path: Path) -> None:
    c = _cfg(tiny_fixed, data4)
    c.sft.lora_rank, c.sft.lora_targets = 4, ["no_such_proj"]
    with pytest.raises(InputError, match=r"sft\.lora_targets"):
        train_sft(c, tmp_path / "bad", progress=False)
