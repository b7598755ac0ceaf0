"""Sizing an in-process vLLM engine before it starts: its context window, whether it fits, and which log-probs
it can give, decided from the config and the model's shapes (pure Python: no vLLM, no GPU needed).

* **Window.** vLLM cuts every answer at ``max_model_len - len(prompt)`` tokens, and the ``hf`` backend at the
  model's own window (``max_position_embeddings``). A fixed 2048-token engine window under 2048-token answers
  and ~1,000-token prompts silently halves the answers, so the window is derived from the config:
  ``rollout.max_prompt_tokens + agent.max_new_tokens`` (:func:`context_window`).
* **Memory.** vLLM takes ``gpu_memory_utilization`` of the device for its weights, its activations and the KV
  cache, and refuses to start when the KV cache cannot hold one whole window (vLLM's
  ``check_enough_kv_cache_memory`` in ``vllm/v1/core/kv_cache_utils.py``), after minutes of loading.
  :func:`engine_memory` does that arithmetic up front and :func:`check_engine_fits` refuses in one line.
* **Log-probs.** Exact scoring log-probs under top-p / top-k need vLLM's whole-vocabulary log-probs per token,
  normalised in Python (``backends.vllm.tempered_logprob``): fine at milepost's tiny vocabularies, a 150k-entry
  dict per token at Qwen3's. :func:`check_full_logprobs` refuses above :data:`FULL_LOGPROBS_MAX_VOCAB`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from milepost.errors import InputError

GIB = 1024**3

FULL_LOGPROBS_MAX_VOCAB = 32_768
"""Largest vocabulary for which ``logprobs="full"`` is allowed: every sampled token ships one Python float per
vocabulary entry from the engine and sums them in pure Python (O(V) per token); at 32k that is already ~10 ms a
token, at Qwen3's 151,936 it dominates the rollout."""

SAMPLER_SEQS = 256
"""vLLM's default ``max_num_seqs``: its warm-up samples this many sequences at once, fp32 logits and
probabilities over the vocabulary for each (vllm/v1/worker/gpu_model_runner.py ``_dummy_sampler_run``)."""

RUNTIME_BYTES = 1 * GIB
"""What the engine holds beyond weights, KV cache and sampler buffers (CUDA context, graphs, allocator slack):
an estimate, for the refusal's arithmetic only."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelShape:
    """What the engine's memory depends on, read from a Hugging Face config (no weights needed)."""

    params: int
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int

    @classmethod
    def from_config(cls, config: Any, params: int) -> ModelShape:
        """The shape of a model with ``params`` parameters and Hugging Face config ``config`` (the text part of a
        multimodal one, such as Gemma 3's)."""
        text = config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
        heads = int(text.num_attention_heads)
        head_dim = getattr(text, "head_dim", None) or int(text.hidden_size) // heads
        return cls(
            params=int(params),
            layers=int(text.num_hidden_layers),
            kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
            head_dim=int(head_dim),
            vocab=int(text.vocab_size),
            max_positions=int(getattr(text, "max_position_embeddings", 0) or 0),
        )

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Keys and values of one token over every layer (full attention on every layer: an upper bound for
        models with sliding-window layers)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def context_window(max_model_len: int, max_prompt_tokens: int, max_new_tokens: int, max_positions: int = 0) -> int:
    """The engine's ``max_model_len``: ``max_model_len`` when set (> 0), else the prompt budget plus the answer
    budget.

    Raises:
        InputError: the window leaves no room for a prompt beyond a whole answer, or exceeds the model's own
            window (``max_positions``, when known).
    """
    if max_model_len > 0:
        if max_model_len <= max_new_tokens:
            raise InputError(
                f"rollout.max_model_len {max_model_len} leaves no room for a prompt beside an answer of "
                f"agent.max_new_tokens {max_new_tokens}: every answer would be cut; set rollout.max_model_len 0 "
                f"(derived: rollout.max_prompt_tokens + agent.max_new_tokens)"
            )
        window = max_model_len
    else:
        window = max_prompt_tokens + max_new_tokens
    if max_positions and window > max_positions:
        raise InputError(
            f"rollout: a {window}-token engine window (prompt budget + agent.max_new_tokens) exceeds the model's "
            f"{max_positions} positions; lower rollout.max_prompt_tokens or agent.max_new_tokens"
        )
    return window


@dataclass(frozen=True)
class EngineMemory:
    """What an engine needs (bytes) against what it may take."""

    weights: int
    kv_cache: int
    sampler: int
    runtime: int
    budget: int

    @property
    def needed(self) -> int:
        return self.weights + self.kv_cache + self.sampler + self.runtime

    @property
    def fits(self) -> bool:
        return self.needed <= self.budget


def engine_memory(
    shape: ModelShape, dtype_bytes: int, window: int, device_bytes: int, utilization: float
) -> EngineMemory:
    """The engine's memory: weights at ``dtype_bytes`` each, the KV cache of one whole ``window`` (the least vLLM
    starts with), the sampler's warm-up buffers and the runtime estimate, against ``utilization`` of
    ``device_bytes``."""
    return EngineMemory(
        weights=shape.params * dtype_bytes,
        kv_cache=shape.kv_bytes_per_token(dtype_bytes) * window,
        sampler=2 * SAMPLER_SEQS * shape.vocab * 4,
        runtime=RUNTIME_BYTES,
        budget=int(utilization * device_bytes),
    )


def check_engine_fits(memory: EngineMemory, utilization: float, device_bytes: int, window: int) -> None:
    """Refuse, in one line, an engine that cannot hold its weights and one window's KV cache.

    Raises:
        InputError: naming the numbers and the least ``rollout.gpu_memory_utilization`` that would do.
    """
    if memory.fits:
        return
    least = memory.needed / device_bytes
    advice = (
        f"raise rollout.gpu_memory_utilization to at least {least:.2f} (the trainer shares the device)"
        if least <= 1
        else "the device cannot hold it: use a smaller model, a shorter window or another device"
    )
    raise InputError(
        f"rollout.gpu_memory_utilization {utilization:g} of {device_bytes / GIB:.1f} GiB is {memory.budget / GIB:.1f}"
        f" GiB, but the vLLM engine needs {memory.needed / GIB:.1f} GiB (weights {memory.weights / GIB:.1f}, KV "
        f"cache for one {window}-token window {memory.kv_cache / GIB:.2f}, sampler {memory.sampler / GIB:.2f}, "
        f"runtime {memory.runtime / GIB:.1f}); {advice}"
    )


def check_full_logprobs(vocab: int) -> None:
    """Refuse whole-vocabulary log-probs (exact scoring under top-p / top-k) at a large vocabulary.

    Raises:
        InputError: above :data:`FULL_LOGPROBS_MAX_VOCAB`.
    """
    if vocab > FULL_LOGPROBS_MAX_VOCAB:
        raise InputError(
            f"agent.top_p < 1 or agent.top_k > 0 with rollout.backend vllm: exact untruncated log-probs need all "
            f"{vocab:,} vocabulary log-probs of every sampled token in Python (allowed up to "
            f"{FULL_LOGPROBS_MAX_VOCAB:,}); use agent.top_p 1 and agent.top_k 0, or rollout.backend hf"
        )


def device_bytes(device: Any = None) -> int:
    """Memory of the device vLLM shares out: the CUDA device's total when CUDA is present, else the machine's
    RAM (vLLM's CPU build takes ``gpu_memory_utilization`` of RAM)."""
    import os

    import torch

    if torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device or torch.cuda.current_device()).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
