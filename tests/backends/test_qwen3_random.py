"""The real Qwen3 architecture (grouped-query attention, q/k norms, head_dim apart from hidden/heads, a padded
embedding as in the released checkpoints), randomly initialised from transformers' own config class and run
through the same HFBackend code path as the tiny model and Qwen3-1.7B."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend

PROMPTS = ["Solve this 4x4 Sudoku", "ACTION: value(2, r3c4)", "héllo ∑ <think>"]


@pytest.fixture(scope="module")
def qwen3_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    vocab = (len(tokenizer) // 128 + 1) * 128  # Qwen pads its embedding past the tokenizer's size
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=96,
        intermediate_size=256,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(1)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():  # a peakier output distribution than the default 0.02 init, so sampling is not uniform
        model.lm_head.weight.mul_(20.0)
    out = tmp_path_factory.mktemp("qwen3") / "qwen3-random"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def backend(qwen3_dir: Path) -> HFBackend:
    return HFBackend(qwen3_dir)


def test_config_is_the_real_architecture(backend: HFBackend) -> None:
    cfg = backend.model.config
    assert cfg.model_type == "qwen3" and cfg.num_key_value_heads < cfg.num_attention_heads
    assert cfg.head_dim * cfg.num_attention_heads != cfg.hidden_size
    assert backend.vocab_limit > len(backend.tokenizer)


def test_batched_greedy_equals_unbatched(backend: HFBackend) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=10)
    batched = backend.generate([GenerationRequest(prompt=p, params=params) for p in PROMPTS])
    for prompt, got in zip(PROMPTS, batched):
        alone = backend.generate([GenerationRequest(prompt=prompt, params=params)])[0]
        assert got.completion_ids == alone.completion_ids
        assert got.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_sampled_logprobs_match_recomputation(backend: HFBackend) -> None:
    params = SamplingParams(temperature=0.9, top_p=0.9, top_k=40, max_new_tokens=12, seed=4)
    done = backend.generate([GenerationRequest(prompt=p, params=params) for p in PROMPTS])
    again = backend.completion_logprobs(done, params)
    for b, c in enumerate(done):
        assert again[b, : len(c.completion_ids)].tolist() == pytest.approx(c.logprobs, abs=1e-5)
    assert len({tuple(c.completion_ids) for c in done}) == len(done)


def test_bfloat16_runs_the_same_path(qwen3_dir: Path) -> None:
    backend = HFBackend(qwen3_dir, dtype="bfloat16")
    assert backend.dtype == torch.bfloat16
    params = SamplingParams(temperature=0.7, max_new_tokens=6, seed=0)
    done = backend.generate([GenerationRequest(prompt=p, params=params) for p in PROMPTS])
    assert all(c.finish_reason in ("stop", "length") and c.logprobs for c in done)
    again = backend.completion_logprobs(done, params)
    for b, c in enumerate(done):  # bf16 rounding may differ between cached and full forwards: looser tolerance
        assert again[b, : len(c.completion_ids)].tolist() == pytest.approx(c.logprobs, abs=0.05)
