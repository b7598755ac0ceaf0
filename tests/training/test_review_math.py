"""The training-math findings of the review: finite log-probs under top-p / top-k, one precision for rollout and
scoring, policy-invariant MiRA shaping by default, only the statistics an objective uses, and scales that match."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from milepost.backends.logprobs import process_logits, score_logprobs
from milepost.config import EnvConfig, load_config
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.rewards.shaping import shaped_rewards
from milepost.training.config import AgentConfig, MiRAConfig, RLConfig, TrainConfig
from milepost.training.mira import episode_potentials
from milepost.training.trainer import train_rl

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


def test_scoring_is_finite_where_sampling_truncates() -> None:
    logits = torch.tensor([3.0, 2.0, 0.5, -1.0, -4.0])
    sampled = process_logits(logits, 0.7, top_p=0.6, top_k=3)
    assert torch.isinf(sampled).any()  # the tail is outside the nucleus: never drawn
    scored = score_logprobs(logits, 0.7)
    assert torch.isfinite(scored).all()
    assert scored.exp().sum().item() == pytest.approx(1.0, abs=1e-6)
    assert scored.tolist() == pytest.approx(torch.log_softmax(logits / 0.7, -1).tolist(), abs=1e-6)
    # Greedy scores the untempered distribution.
    assert score_logprobs(logits, 0.0).tolist() == pytest.approx(torch.log_softmax(logits, -1).tolist(), abs=1e-6)


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list] = {"train": [], "test": []}
    for split, count in (("train", 8), ("test", 2)):
        for i in range(count):
            empties = 9 + i % 4
            splits[split].append(
                make_task(
                    *generate_easy(4, empties, 21, i + 100 * (split == "test")),
                    level="S4" if empties <= 10 else "S5",
                    split=split,
                    index=i,
                )
            )
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 21})


def _cfg(data: Path, **over: object) -> TrainConfig:
    cfg = TrainConfig(
        name="review",
        model=str(SHIPPED),
        data=str(data),
        env=EnvConfig(size=4, max_steps=8, render="hints"),
        # A hot, truncated sampler and large steps: after the first minibatch's step, tokens drawn inside the
        # behaviour nucleus fall outside the updated policy's nucleus. Scored under a truncated target (the old
        # definition) this run's loss was NaN from the first iteration.
        agent=AgentConfig(memory_k=0, max_new_tokens=32, temperature=2.5, top_p=0.8),
        rl=RLConfig(
            iterations=2,
            tasks_per_iter=4,
            samples_per_task=2,
            minibatches=4,
            lr=3e-2,
            normalisation="none",
            is_low=0.5,
            is_high=2.0,
        ),
        threads=1,
        checkpoint_every=5,
    )
    for key, value in over.items():
        section, _, name = key.partition("__")
        setattr(getattr(cfg, section), name, value) if name else setattr(cfg, key, value)
    return cfg


def _finite_run(cfg: TrainConfig, out: Path) -> list[dict]:
    final = train_rl(cfg, out, progress=False)
    rows = list(read_jsonl(out / "metrics.jsonl"))
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    updates = [r for r in rows if "loss/policy" in r]
    assert updates, "no policy update ran"
    for r in updates:
        assert math.isfinite(r["loss/policy"]) and math.isfinite(r["train/grad_norm"])
    from safetensors.torch import load_file

    params = load_file(final / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in params.values())
    return updates


def test_top_p_run_keeps_reinforce_losses_gradients_and_parameters_finite(data4: Path, tmp_path: Path) -> None:
    rows = _finite_run(_cfg(data4), tmp_path / "reinforce")
    for r in rows:
        # REINFORCE uses the importance weights, so it reports them; on-policy rho is scored before any step.
        assert 0.0 <= r["is/masked_frac"] <= 1.0 and math.isfinite(r["is/mean_weight"])
        assert r["is/onpolicy_rho"] == pytest.approx(1.0, abs=1e-4)
        assert r["is/onpolicy_rho_min"] == pytest.approx(1.0, abs=1e-3)
        assert r["is/onpolicy_rho_max"] == pytest.approx(1.0, abs=1e-3)


def test_top_p_run_keeps_the_mse_objective_finite_and_logs_no_unused_weights(data4: Path, tmp_path: Path) -> None:
    cfg = _cfg(data4, mira=MiRAConfig(enabled=True, warmup_iterations=0, phase_iterations=1, critic_epochs=1.0))
    rows = _finite_run(cfg, tmp_path / "mse")
    for r in rows:
        # The MSE regression does not use the importance weights: they are not reported.
        assert "is/masked_frac" not in r and "is/mean_weight" not in r
        assert r["is/onpolicy_rho"] == pytest.approx(1.0, abs=1e-4)


def test_bf16_rollouts_and_scoring_share_one_precision(data4: Path, tmp_path: Path) -> None:
    cfg = _cfg(data4, bf16=True)
    cfg.agent.temperature, cfg.agent.top_p, cfg.agent.top_k = 1.0, 1.0, 0
    cfg.rl.iterations, cfg.rl.minibatches = 1, 1
    cfg.rl.is_low, cfg.rl.is_high = 0.995, 1.01  # the paper's Geo-MIS thresholds
    train_rl(cfg, tmp_path / "bf16", progress=False)
    (row,) = [r for r in read_jsonl(tmp_path / "bf16" / "metrics.jsonl") if "loss/policy" in r]
    # Both sides under bf16 autocast: on-policy turns sit well inside [C_low, C_high], none masked.
    assert 0.995 < row["is/onpolicy_rho_min"] <= row["is/onpolicy_rho_max"] < 1.005
    assert row["is/masked_frac"] == 0.0


def test_terminal_potential_zero_is_policy_invariant_and_label_pays_partial_credit() -> None:
    gamma, predicted = 0.9, torch.tensor([0.1, 0.3, 0.6, 0.7])  # P(s_0) .. P(s_3) of a 4-turn episode
    rewards = torch.zeros(4)  # a failed episode: no outcome reward
    discount = gamma ** torch.arange(4, dtype=torch.float32)

    def shaping_sum(terminal: str, final_progress: float) -> float:
        potentials = episode_potentials(predicted, final_progress, terminal)
        return float((discount * shaped_rewards(rewards, potentials, gamma)).sum())

    # zero: the shaping terms telescope to -P(s_0), whatever the final state's progress.
    assert shaping_sum("zero", 0.75) == pytest.approx(-0.1, abs=1e-6)
    assert shaping_sum("zero", 0.0) == pytest.approx(-0.1, abs=1e-6)
    # label: gamma^T * k / K - P(s_0), a bonus for 3 of 4 subgoals reached.
    assert shaping_sum("label", 0.75) == pytest.approx(gamma**4 * 0.75 - 0.1, abs=1e-6)
    assert MiRAConfig().terminal_potential == "zero"


@pytest.mark.parametrize("reward", ["milestone", "guide"])
@pytest.mark.parametrize("estimator", ["dr", "td"])
def test_value_critic_estimators_refuse_rewards_on_another_scale(reward: str, estimator: str) -> None:
    over = ["mira.enabled=true", f"mira.estimator={estimator}", f"rl.reward={reward}"]
    with pytest.raises(InputError, match=f"mira.estimator {estimator}.*rl.reward outcome"):
        load_config(TrainConfig, None, over)
    # The Monte-Carlo estimator uses V only as a baseline, which any scale tolerates.
    cfg = load_config(TrainConfig, None, ["mira.enabled=true", "mira.estimator=mc", f"rl.reward={reward}"])
    assert cfg.rl.reward == reward


def test_the_cli_refuses_the_mixed_scale_config_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "milepost",
            "train",
            "--out",
            str(tmp_path / "r"),
            "--set",
            "mira.enabled=true",
            "--set",
            "rl.reward=milestone",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "rl.reward outcome" in proc.stderr
    assert not (tmp_path / "r").exists()  # nothing written by a refused start


@pytest.mark.parametrize("native", [False, True])
def test_bf16_on_a_cpu_that_emulates_it_warns_once(
    native: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On an AVX2-only CPU bf16 autocast ran 22x slower than fp32 (14 against 307 tokens/s, LoRA SFT of
    SmolLM2-135M): asking for it there says so, once; a CPU with AVX512-BF16 or AMX hears nothing."""
    from milepost.training import setup

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    setup.warn_emulated_bf16.cache_clear()
    cfg = TrainConfig(bf16=True)
    with caplog.at_level("WARNING", logger="milepost.training.setup"):
        for _ in range(3):
            with setup.autocast_for(cfg, torch.device("cpu")):
                assert torch.is_autocast_enabled("cpu")
        with setup.autocast_for(TrainConfig(bf16=False), torch.device("cpu")):
            assert not torch.is_autocast_enabled("cpu")
    warned = [r for r in caplog.records if "bf16=false" in r.getMessage()]
    assert len(warned) == (0 if native else 1)
    setup.warn_emulated_bf16.cache_clear()
