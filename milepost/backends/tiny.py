"""The ``tiny`` builder: a small tokenizer and a randomly initialised causal LM, saved as an ordinary Hugging
Face model directory, so the whole pipeline runs on a CPU without downloading anything.

Tokenizer: BPE with byte fallback (the Llama recipe). Its base alphabet is printable ASCII plus the 256
``<0xNN>`` byte tokens; merges are fitted to the environments' own text (goals, rendered observations,
actions, answer format). Any other text, such as planner JSON with unicode in it, falls back to bytes, so
nothing ever becomes an unknown token and encode -> decode is the identity. The pre-tokenizer splits single
digits (board cells and coordinates stay one token each), words with their leading space, punctuation runs
and whitespace.

Model: the Qwen3 (default) or Llama architecture, built from ``transformers``' own config class: rotary
positions trained better than learned absolute ones at this scale (CPU-NOTES). Embeddings are tied, which
keeps the 0.5M preset from being mostly embedding.
"""

from __future__ import annotations

import contextlib
import json
import os
import string
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from milepost.errors import InputError, MilepostError

PAD, EOS = "<|pad|>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (PAD, EOS, *ROLE_TOKENS)
# Ordinary (non-special) atomic tokens: they survive decoding with skip_special_tokens=True.
FORMAT_TOKENS = ("<think>", "</think>")
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))
# One ``<|role|>`` block per message, closed by the EOS token, which is also where an assistant answer stops.
CHAT_TEMPLATE = (
    "{%- for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
PRETOKENIZE = r"\d| ?[A-Za-z]+| ?[^\sA-Za-z\d]+|\s+(?!\S)|\s+"

FORMAT_TEXTS = (
    "<think>\nThe empty cell in row 1 can only hold one digit.\n</think>\n"
    "REASON: r1c3 is the last cell of its "
    "row.\nACTION: value(2, r1c3)",
    "REASON: fill the box. ACTION: value(4, r2c2); value(1, r2c3)",
    '{"subgoals": [{"index": 0, "description": "complete box 1", "success_criteria": "box 1 holds 1-4", '
    '"preconditions": [], "estimated_steps": 2, "required": true}, {"index": 1, "required": false}]}',
    "Plan:\n1. complete box 1 (done)\n2. complete box 2 (current)\nChecklist: milestones done 1/4; next: box 3",
    "Previous turns:\nObservation:\nYour answer:\nLast answer rejected: cannot parse action",
)

# Model size presets: hidden size, layers, attention heads, key/value heads, MLP width. With the default
# 768-token vocabulary (tied embeddings) Qwen3 counts 517k, 1.04M, 4.92M and 20.3M parameters (Llama <1k
# fewer: no q/k norms); the tests keep each within 25% of its name.
TINY_PRESETS: dict[str, dict[str, int]] = {
    "0.5m": {
        "hidden_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 256,
    },
    "1m": {
        "hidden_size": 128,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 320,
    },
    "5m": {
        "hidden_size": 256,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "intermediate_size": 768,
    },
    "20m": {
        "hidden_size": 448,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "intermediate_size": 1408,
    },
}
ARCHS = ("qwen3", "llama")
DEFAULT_VOCAB_SIZE = 768


# -- corpus --------------------------------------------------------------------------------------------------

# Environment variants whose text goes into the default corpus; envs not listed contribute their defaults.
_ENV_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "sudoku": [
        {"size": size, "render": render, "action_mode": mode, **extra}
        for size in (4, 6, 9)
        for render in ("grid", "cells", "candidates")
        for mode, extra in (("atomic", {}), ("flexible", {"macro_k": 3}))
    ],
    "rushhour": [{}, {"action_mode": "slide"}],
}


def default_corpus(seeds: Iterable[int] = (0, 1)) -> Iterator[str]:
    """Texts the registered environments produce: goals, observations (every renderer), actions, feedback,
    plus the answer format and planner JSON."""
    import milepost.envs as envs

    yield from FORMAT_TEXTS
    for name in envs.ENVS.names():
        for kwargs in _ENV_VARIANTS.get(name, [{}]):
            try:
                env = envs.make_env(name, **kwargs)
            except (MilepostError, TypeError, ValueError):
                continue  # a variant this environment does not take
            for seed in seeds:
                obs, _ = env.reset(seed=seed)
                yield env.goal_text()
                yield obs
                actions = [env.rules.format_action(a) for a in env.state.legal_actions()[:6]]
                yield "; ".join(actions)
                yield env.step("ACTION: nonsense")[0]  # the feedback line of a rejected answer
                if actions:
                    yield env.step(f"ACTION: {actions[0]}")[0]


# -- tokenizer -----------------------------------------------------------------------------------------------


def build_tokenizer(corpus: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE, max_context: int = 4096) -> Any:
    """A byte-fallback BPE ``PreTrainedTokenizerFast`` fitted to ``corpus``, at most ``vocab_size`` tokens.

    Raises:
        InputError: when ``vocab_size`` leaves no room for the byte tokens and the ASCII alphabet.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(set(string.printable))
    floor = len(SPECIAL_TOKENS) + len(BYTE_TOKENS) + len(alphabet) + len(FORMAT_TOKENS)
    if vocab_size < floor:
        raise InputError(f"vocab_size must be at least {floor} (specials, 256 bytes, ASCII), got {vocab_size}")
    pre = pre_tokenizers.Split(Regex(PRETOKENIZE), behavior="isolated")
    fit = Tokenizer(models.BPE())
    fit.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(BYTE_TOKENS) - len(FORMAT_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    fit.train_from_iterator(corpus, trainer)
    fitted = json.loads(fit.to_str())["model"]
    # Rebuild with the byte tokens as ordinary vocabulary right after the specials (ids 5..260), so that
    # decoding with skip_special_tokens=True still turns them back into text.
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for byte_token in BYTE_TOKENS:
        vocab[byte_token] = len(vocab)
    for piece, _ in sorted(fitted["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in fitted["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in FORMAT_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=max_context,
        padding_side="left",
    )


# -- model ---------------------------------------------------------------------------------------------------


def tiny_config(
    arch: str, size: str | dict[str, int], vocab_size: int, pad_id: int, eos_id: int, max_context: int = 4096
) -> Any:
    """The ``transformers`` config of a tiny model (``size`` a preset name or explicit dimensions)."""
    from transformers import LlamaConfig, Qwen3Config

    if arch not in ARCHS:
        raise InputError(f"arch {arch!r} is not one of {', '.join(ARCHS)}")
    if isinstance(size, str):
        if size.lower() not in TINY_PRESETS:
            raise InputError(f"size {size!r} is not one of {', '.join(TINY_PRESETS)}")
        dims = dict(TINY_PRESETS[size.lower()])
    else:
        dims = dict(size)
    if dims["hidden_size"] % dims["num_attention_heads"]:
        raise InputError("hidden_size must be a multiple of num_attention_heads")
    common: dict[str, Any] = {
        **dims,
        "vocab_size": vocab_size,
        "head_dim": dims["hidden_size"] // dims["num_attention_heads"],
        "max_position_embeddings": max_context,
        "tie_word_embeddings": True,
        "pad_token_id": pad_id,
        "eos_token_id": eos_id,
        "bos_token_id": None,
        "rms_norm_eps": 1e-6,
    }
    if arch == "qwen3":
        return Qwen3Config(**common, use_sliding_window=False)
    return LlamaConfig(**common)


def count_parameters(model: Any) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    arch: str = "qwen3",
    size: str | dict[str, int] = "1m",
    corpus: Iterable[str] | None = None,
    seed: int = 0,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    max_context: int = 4096,
    overwrite: bool = False,
) -> Path:
    """Write a tokenizer and a randomly initialised model to ``out_dir`` as a normal Hugging Face directory.

    ``AutoTokenizer.from_pretrained`` and ``AutoModelForCausalLM.from_pretrained`` load it, and so does
    ``HFBackend``. A ``milepost_tiny.json`` beside the weights records how it was built.

    Args:
        out_dir: target directory (created).
        arch: ``qwen3`` or ``llama``.
        size: a preset name from ``TINY_PRESETS`` (``0.5m``, ``1m``, ``5m``, ``20m``) or explicit dimensions.
        corpus: texts to fit the tokenizer's merges to; default :func:`default_corpus`.
        seed: seed of the weight initialisation (the global torch RNG is left as it was).
        vocab_size: tokenizer size at most, byte tokens included (a small corpus may yield fewer).
        max_context: context window (``max_position_embeddings``).
        overwrite: replace an existing model directory instead of refusing.

    Returns:
        The directory path.

    Raises:
        InputError: on a bad arch / size / vocabulary, or an existing model directory without ``overwrite``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    if (out / "config.json").exists() and not overwrite:
        raise InputError(f"{out} already holds a model (pass overwrite=True / --overwrite to replace it)")
    tokenizer = build_tokenizer(default_corpus() if corpus is None else corpus, vocab_size, max_context)
    config = tiny_config(arch, size, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, max_context)
    devices: list[Any] = []  # CPU only: forking CUDA RNGs here would initialise CUDA for nothing
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    out.mkdir(parents=True, exist_ok=True)
    # transformers 5 prints progress bars on stderr while saving; they are noise in a builder.
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    meta = {
        "arch": arch,
        "size": size,
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "seed": seed,
        "max_context": max_context,
    }
    (out / "milepost_tiny.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out
