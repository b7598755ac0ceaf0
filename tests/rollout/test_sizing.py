"""Sizing the in-process vLLM engine from the config and the model's shapes, without vLLM: the window makes room
for whole answers, an engine that cannot hold its weights and one window's KV cache is refused in one line
before anything loads, and whole-vocabulary log-probs are refused at a large vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from milepost.errors import InputError
from milepost.rollout import make_rollout_source
from milepost.rollout.sizing import (
    FULL_LOGPROBS_MAX_VOCAB,
    GIB,
    ModelShape,
    check_engine_fits,
    check_full_logprobs,
    context_window,
    engine_memory,
)
from milepost.rollout.source import engine_window
from milepost.training.config import AgentConfig, RolloutConfig, TrainConfig

H100 = 80 * GIB


def _qwen3_8b() -> Qwen3Config:
    """Qwen3-8B's published shapes (config.json of Qwen/Qwen3-8B)."""
    return Qwen3Config(
        vocab_size=151_936,
        hidden_size=4096,
        intermediate_size=12_288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40_960,
        tie_word_embeddings=False,
    )


@pytest.fixture(scope="module")
def qwen3_8b() -> torch.nn.Module:
    with torch.device("meta"):  # shapes only: 8B parameters, no memory
        return AutoModelForCausalLM.from_config(_qwen3_8b())


def _paper_cfg(**rollout: object) -> TrainConfig:
    """The paper config's sampling (configs/paper/sudoku9_atomic.yaml: 2048-token answers) with vLLM rollouts."""
    return TrainConfig(
        agent=AgentConfig(temperature=0.8, max_new_tokens=2048),
        rollout=RolloutConfig(backend="vllm", **rollout),  # type: ignore[arg-type]
        bf16=True,
    )


def test_the_window_makes_room_for_whole_answers() -> None:
    # The paper's prompts run to ~1,011 tokens: the derived window holds one and a whole 2048-token answer.
    window = context_window(0, 2048, 2048, max_positions=40_960)
    assert window == 4096 and window - 1_011 >= 2048
    assert context_window(1024, 2048, 64) == 1024  # an explicit window is kept when answers fit it
    with pytest.raises(InputError, match="max_new_tokens 2048"):
        context_window(2048, 2048, 2048)  # the old default under 2048-token answers: every answer cut
    with pytest.raises(InputError, match="40960 positions"):
        context_window(0, 40_000, 2048, max_positions=40_960)


def test_the_shapes_come_from_the_config(qwen3_8b: torch.nn.Module) -> None:
    params = sum(p.numel() for p in qwen3_8b.parameters())
    shape = ModelShape.from_config(qwen3_8b.config, params)
    assert 8.0e9 < shape.params < 8.3e9
    assert (shape.layers, shape.kv_heads, shape.head_dim, shape.vocab) == (36, 8, 128, 151_936)
    assert shape.kv_bytes_per_token(2) == 2 * 36 * 8 * 128 * 2  # 144 KiB of bf16 keys and values per token


def test_an_engine_that_cannot_hold_its_weights_is_refused_before_it_loads(
    qwen3_8b: torch.nn.Module, tmp_path: Path
) -> None:
    # 0.1 of 80 GiB is 8 GiB; 8B bf16 weights alone are ~15 GiB. Refused by the source itself, before vLLM.
    with pytest.raises(InputError, match=r"gpu_memory_utilization 0\.1 of 80\.0 GiB.*at least 0\.2") as err:
        engine_window(_paper_cfg(gpu_memory_utilization=0.1), qwen3_8b, device_memory=H100)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="gpu_memory_utilization"):
        make_rollout_source(_paper_cfg(gpu_memory_utilization=0.1), qwen3_8b, None, tmp_path)
    assert engine_window(_paper_cfg(gpu_memory_utilization=0.3), qwen3_8b, device_memory=H100) == 4096
    # The KV cache counts: a 40k window of 8B needs ~5.6 GiB more than a 4k one.
    shape = ModelShape.from_config(qwen3_8b.config, sum(p.numel() for p in qwen3_8b.parameters()))
    short, long = (engine_memory(shape, 2, w, H100, 0.23) for w in (4096, 40_960))
    assert short.fits and not long.fits
    with pytest.raises(InputError, match="40960-token window"):
        check_engine_fits(long, 0.23, H100, 40_960)
    # A device too small at any share says so rather than suggesting a share above 1.
    with pytest.raises(InputError, match="device cannot hold it"):
        check_engine_fits(engine_memory(shape, 2, 4096, 8 * GIB, 0.9), 0.9, 8 * GIB, 4096)


def test_whole_vocabulary_log_probs_are_refused_at_a_large_vocabulary(qwen3_8b: torch.nn.Module) -> None:
    check_full_logprobs(FULL_LOGPROBS_MAX_VOCAB)  # milepost's tiny vocabularies pass
    with pytest.raises(InputError, match="151,936"):
        check_full_logprobs(151_936)
    cfg = _paper_cfg(gpu_memory_utilization=0.5)
    cfg.agent.top_p = 0.95
    with pytest.raises(InputError, match="top_p"):
        engine_window(cfg, qwen3_8b, device_memory=H100)
