"""The tiny model builder: an ordinary Hugging Face directory and a byte-fallback tokenizer fitted to the
environments' text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.backends.tiny import (
    BYTE_TOKENS,
    TINY_PRESETS,
    build_tiny_model,
    build_tokenizer,
    count_parameters,
    default_corpus,
    tiny_config,
)
from milepost.errors import InputError

# The preset names promise "about" a size: with a vocabulary of the default's order, each must stay within 25%
# of its nominal parameter count.
NOMINAL = {"0.5m": 0.5e6, "1m": 1e6, "5m": 5e6, "20m": 20e6}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_directory_loads_with_auto_classes(tiny_model_dir: Path, tokenizer) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen3"
    assert (tiny_model_dir / "model.safetensors").is_file()
    meta = json.loads((tiny_model_dir / "milepost_tiny.json").read_text())
    assert meta["parameters"] == count_parameters(model)
    assert 0.375e6 <= meta["parameters"] <= 0.625e6
    assert model.get_input_embeddings().num_embeddings == len(tokenizer)
    assert tokenizer.eos_token_id == model.config.eos_token_id == model.generation_config.eos_token_id
    assert tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id


@pytest.mark.parametrize("size", sorted(TINY_PRESETS))
def test_presets_have_about_their_nominal_size(size: str) -> None:
    from transformers import AutoModelForCausalLM

    for arch in ("qwen3", "llama"):
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            model = AutoModelForCausalLM.from_config(tiny_config(arch, size, 768, 0, 1))
        assert 0.75 * NOMINAL[size] <= count_parameters(model) <= 1.25 * NOMINAL[size], (arch, size)


@given(st.text(max_size=200) | st.sampled_from(["<|end|>", "x<|pad|>y", "<|user|>\n", "a<think>b</think>"]))
@settings(max_examples=200, deadline=None)
def test_any_unicode_round_trips(tokenizer, text: str) -> None:  # type: ignore[no-untyped-def]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    # Text that spells a special token ('<|end|>') encodes to it, so decoding keeps special tokens.
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert tokenizer.unk_token_id is None or tokenizer.unk_token_id not in ids


def test_environment_text_needs_no_byte_fallback_and_is_compressed(tokenizer) -> None:  # type: ignore[no-untyped-def]
    byte_ids = set(tokenizer.convert_tokens_to_ids(list(BYTE_TOKENS)))
    texts = list(default_corpus(seeds=(7,)))
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert not byte_ids & set(ids), text[:60]
    chars = sum(len(t) for t in texts)
    tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    assert tokens < 0.6 * chars  # merges fitted to the env text shorten it


def test_digits_and_format_tokens_are_single_tokens(tokenizer) -> None:  # type: ignore[no-untyped-def]
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("<think>value(5, r3c7)</think>")["input_ids"])
    assert pieces[0] == "<think>" and pieces[-1] == "</think>"
    assert "5" in pieces and "3" in pieces and "7" in pieces


def test_chat_template_renders_roles_and_generation_prompt(tokenizer) -> None:  # type: ignore[no-untyped-def]
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == "<|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\n"


def test_build_is_deterministic_and_seeded(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    corpus = ["value(1, r1c1) ACTION: REASON: Solve this Sudoku"] * 5
    a = build_tiny_model(tmp_path / "a", size="0.5m", corpus=corpus, seed=3)
    b = build_tiny_model(tmp_path / "b", size="0.5m", corpus=corpus, seed=3)
    c = build_tiny_model(tmp_path / "c", size="0.5m", corpus=corpus, seed=4)
    wa, wb, wc = (load_file(d / "model.safetensors") for d in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    state = torch.random.get_rng_state()
    build_tiny_model(tmp_path / "d", size="0.5m", corpus=corpus, seed=5)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is left alone


def test_llama_architecture_builds(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = build_tiny_model(tmp_path / "llama", arch="llama", size="0.5m", corpus=["abc def"] * 3)
    assert AutoModelForCausalLM.from_pretrained(out).config.model_type == "llama"


def test_bad_arguments_are_input_errors(tmp_path: Path, tiny_model_dir: Path) -> None:
    with pytest.raises(InputError, match="already holds"):
        build_tiny_model(tiny_model_dir)
    with pytest.raises(InputError, match="arch"):
        build_tiny_model(tmp_path / "x", arch="gpt2", corpus=["a"])
    with pytest.raises(InputError, match="size"):
        build_tiny_model(tmp_path / "y", size="3m", corpus=["a"])
    with pytest.raises(InputError, match="vocab_size"):
        build_tokenizer(["a"], vocab_size=100)
