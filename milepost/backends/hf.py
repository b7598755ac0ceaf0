"""The ``hf`` backend: any ``transformers`` causal LM, batched left-padded generation with a KV cache.

The same class serves the tiny from-scratch model on a laptop CPU and a pretrained model such as Qwen3-1.7B on
a GPU. It runs its own decoding loop over ``model(input_ids, attention_mask, position_ids, cache)`` instead of
``model.generate`` because the contract needs things ``generate`` does not give together:

* the log-prob of every sampled token, scored as the trainer scores it (the tempered, untruncated distribution,
  :func:`milepost.backends.logprobs.score_logprobs`; tokens are drawn from the truncated one,
  :func:`~milepost.backends.logprobs.process_logits`; the module doc of ``logprobs`` says why they differ);
* per-request temperature / top-p / top-k / seed inside one batch (lock-step episodes mix them), with one
  ``torch.Generator`` per seeded request so a seeded answer does not depend on its batch neighbours' draws;
* stop strings that cut the token ids and the text at the same token, and rows that leave the batch (and
  the KV cache) once they finish, so long answers do not make short ones pay.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from milepost.backends.base import (
    FinishReason,
    GenerationRequest,
    ModelLoadError,
    SamplingParams,
    admit,
    error_completion,
)
from milepost.backends.kvcache import make_kv_cache
from milepost.backends.logprobs import (
    model_forward,
    pack_prompts,
    positions_from_mask,
    prefill_shared,
    process_logits,
    score_logprobs,
    sequence_logprobs,
    shared_prefix_length,
)
from milepost.errors import InputError
from milepost.types import Completion

__all__ = [
    "HFBackend",
    "load_model",
    "process_logits",
    "render_prompt",
    "role_paragraphs",
    "sequence_logprobs",
]

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# Special tokens that mark chat roles in the templates models ship with (milepost's tiny models, ChatML, Llama).
_CHAT_ROLE_TOKEN = re.compile(r"assistant|im_start|start_header_id|\[INST\]", re.IGNORECASE)
# Rows leave the batch (and the KV cache is compacted) once at least this share of it has finished:
# compacting copies the whole cache, so doing it on every finished row would cost more than it saves.
_PRUNE_FRACTION = 0.25


def _dtype_kwarg() -> str:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56 and ``torch_dtype`` before."""
    import transformers
    from packaging.version import Version

    return "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"


def resolve_device_dtype(device: str | None, dtype: str) -> tuple[torch.device, torch.dtype]:
    """CUDA when present, else CPU; ``auto`` dtype = bf16 on CUDA (fp16 without bf16 support), fp32 on CPU."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dtype == "auto":
        if dev.type == "cuda":
            return dev, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return dev, torch.float32
    if dtype not in DTYPES:
        raise InputError(f"dtype {dtype!r} is not one of auto, {', '.join(DTYPES)}")
    return dev, DTYPES[dtype]


def load_model(path: str | os.PathLike[str], device: torch.device, dtype: torch.dtype) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from a local model directory or a hub name.

    Raises:
        ModelLoadError: one line naming the path, when it does not exist or does not load.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    text = os.fspath(path)
    local = Path(text).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ModelLoadError(f"{text}: not a model directory (no config.json)")
        source = str(local)
    elif _HUB_ID.fullmatch(text) and (local.parent == Path(".") or not local.parent.is_dir()):
        # A hub name ("org/name"): transformers resolves it through its own cache. "runs/tiny" with an
        # existing runs/ folder is a mistyped local path instead, and must not send a request to the hub.
        source = text
    else:
        raise ModelLoadError(f"model directory {text} does not exist")
    kwargs = {_dtype_kwarg(): dtype}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a bad model
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"cannot load model {text!r}: {first}") from exc
    loaded: Any = model
    return loaded.to(device).eval(), tokenizer


PlainRenderer = Callable[[Sequence[dict[str, str]]], str]


def role_paragraphs(messages: Sequence[dict[str, str]]) -> str:
    """Default plain rendering: one ``Role: content`` paragraph per message, ending with ``Assistant:``."""
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join([*parts, "Assistant:"])


def render_prompt(
    tokenizer: Any,
    request: GenerationRequest,
    plain: PlainRenderer = role_paragraphs,
    **template_kwargs: Any,
) -> tuple[str, bool]:
    """The prompt text of a request and whether it came from a chat template.

    ``prompt`` is used verbatim. ``messages`` go through the tokenizer's chat template (with the generation
    prompt added; ``template_kwargs`` such as Qwen3's ``enable_thinking`` pass through); without a template
    they become ``plain(messages)``.
    """
    if request.prompt is not None:
        return request.prompt, False
    messages = request.messages or []
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
        return str(text), True
    return plain(messages), False


@dataclass
class _Row:
    """One request's state during a batched decode."""

    index: int  # position in the caller's request list
    prompt_ids: list[int]
    params: SamplingParams
    budget: int  # tokens it may generate (max_new_tokens, capped by the context window)
    generator: torch.Generator | None
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason | None = None


class HFBackend:
    """Generation with a local ``transformers`` causal LM (the ``hf:PATH_OR_NAME`` policy).

    Args:
        path: model directory or hub name (omit when passing ``model`` and ``tokenizer``).
        model: an already loaded model (e.g. the one being trained); used as is, on its own device.
        tokenizer: its tokenizer.
        device: ``cpu``, ``cuda``, ``cuda:1``...; default CUDA when present.
        dtype: ``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16`` or ``float16``.
        max_context: context window in tokens (prompt + completion); default the model's
            ``max_position_embeddings``.
        max_batch_size: requests decoded together at most; larger lists are split.
        chat_template_kwargs: extra arguments for the chat template (e.g. ``{"enable_thinking": False}``).
        plain_renderer: how chat messages become text when the tokenizer has no chat template (the agent
            passes its own; default :func:`role_paragraphs`).
        share_prefix: prefill the prompt prefix that every row of a batch shares (the system prompt of an agent
            loop) once and copy its keys and values to every row, instead of computing it per row.
        autocast: run generation under ``torch.autocast`` with this dtype (the trainer passes bf16 when it scores
            under bf16 autocast, so behaviour and target log-probs come from the same precision); None = off.

    Raises:
        ModelLoadError: the model does not load, or its tokenizer lacks an end-of-sequence token or has more
            tokens than the model's embedding.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        device: str | None = None,
        dtype: str = "auto",
        max_context: int | None = None,
        max_batch_size: int = 64,
        chat_template_kwargs: dict[str, Any] | None = None,
        plain_renderer: PlainRenderer = role_paragraphs,
        name: str | None = None,
        share_prefix: bool = True,
        autocast: torch.dtype | None = None,
    ) -> None:
        if (path is None) == (model is None):
            raise InputError("HFBackend needs either a path or a model (with its tokenizer)")
        if path is not None:
            self.device, self.dtype = resolve_device_dtype(device, dtype)
            self.model, self.tokenizer = load_model(path, self.device, self.dtype)
        else:
            if tokenizer is None:
                raise InputError("HFBackend(model=...) also needs the tokenizer")
            self.model, self.tokenizer = model, tokenizer
            first = next(model.parameters())
            self.device, self.dtype = first.device, first.dtype
        self.name = name or (f"hf:{os.fspath(path)}" if path is not None else "hf:<in-memory>")
        if max_batch_size < 1:
            raise InputError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.max_batch_size = max_batch_size
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.plain_renderer = plain_renderer
        self.share_prefix = share_prefix
        self.autocast = autocast
        config = getattr(self.model, "config", None)
        self.max_context = int(max_context or getattr(config, "max_position_embeddings", 0) or 2048)
        self.eos_ids = self._eos_ids()
        pad = getattr(self.tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else min(self.eos_ids)
        embed = self.model.get_input_embeddings().num_embeddings
        if len(self.tokenizer) > embed:
            raise ModelLoadError(
                f"{self.name}: tokenizer has {len(self.tokenizer)} tokens but the model's embedding has {embed}"
            )
        self.vocab_limit = embed
        self._check_chat_template()

    def _check_chat_template(self) -> None:
        """Refuse a chat model whose template is missing; say loudly which format plain models get.

        Without a template, messages become ``plain_renderer`` text. A tokenizer whose special tokens name chat
        roles (``<|assistant|>``, ``<|im_start|>``...) was trained on a template, so that fallback would silently
        give every prompt a format the model never saw (rc 0, every episode a format spiral): refused.
        """
        if getattr(self.tokenizer, "chat_template", None):
            return
        special = [str(t) for t in getattr(self.tokenizer, "all_special_tokens", [])]
        special += [str(t) for t in getattr(self.tokenizer, "additional_special_tokens", None) or []]
        added = getattr(self.tokenizer, "get_added_vocab", None)
        if callable(added):
            special += [str(t) for t in added()]
        roles = sorted({t for t in special if _CHAT_ROLE_TOKEN.search(t)})
        if roles:
            raise ModelLoadError(
                f"{self.name}: the tokenizer has chat-role tokens ({', '.join(roles[:3])}) but no chat template "
                "(chat_template.jinja is missing from the model folder): restore it"
            )
        log.warning(
            "%s has no chat template: chat messages are rendered as plain 'Role: content' paragraphs", self.name
        )

    def _eos_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        tok_eos = getattr(self.tokenizer, "eos_token_id", None)
        if tok_eos is not None:
            ids.add(int(tok_eos))
        gen_config = getattr(self.model, "generation_config", None)
        gen_eos = getattr(gen_config, "eos_token_id", None)
        if gen_eos is not None:
            ids.update(int(i) for i in (gen_eos if isinstance(gen_eos, list | tuple) else [gen_eos]))
        if not ids:
            raise ModelLoadError(f"{self.name}: the tokenizer has no end-of-sequence token, so no answer could end")
        return frozenset(ids)

    # -- public API ----------------------------------------------------------------------------------------

    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt token ids of a request (validated ``prompt_ids`` are returned as given).

        Raises:
            InputError: on an empty prompt or token ids outside the model's vocabulary.
        """
        if request.prompt_ids is not None:
            ids = [int(i) for i in request.prompt_ids]
            bad = [i for i in ids if not 0 <= i < self.vocab_limit]
            if bad:
                raise InputError(f"prompt token id {bad[0]} is outside the vocabulary (0..{self.vocab_limit - 1})")
        else:
            text, from_template = render_prompt(
                self.tokenizer, request, self.plain_renderer, **self.chat_template_kwargs
            )
            # A chat template writes its own BOS; a raw prompt gets the tokenizer's usual special tokens.
            ids = list(self.tokenizer(text, add_special_tokens=not from_template)["input_ids"])
        if not ids:
            raise InputError("empty prompt: the model needs at least one token to condition on")
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated ids, special tokens (EOS, padding) left out."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request (see ``milepost.backends.base`` for the finish reasons).

        Requests are sorted by prompt length and decoded in batches of ``max_batch_size``; a failure inside
        one batch turns that batch's completions into ``error`` completions and leaves the others intact.
        """
        results, admitted = admit(requests, self.encode, self.max_context)
        rows: list[_Row] = []
        for i, prompt in admitted:
            req = requests[i]
            seed = req.params.seed
            # Seeded generators live on the CPU: they draw one number per token, and a CPU draw is the same
            # whichever device runs the model.
            gen = torch.Generator().manual_seed(seed) if seed is not None else None
            budget = min(req.params.max_new_tokens, self.max_context - len(prompt))
            rows.append(_Row(i, prompt, req.params, budget, gen))
        rows.sort(key=lambda r: len(r.prompt_ids))
        for start in range(0, len(rows), self.max_batch_size):
            chunk = rows[start : start + self.max_batch_size]
            try:
                self._decode_batch(chunk)
                for row in chunk:
                    results[row.index] = self._completion(row)
            except Exception as exc:
                log.exception("generation failed for a batch of %d requests", len(chunk))
                for row in chunk:
                    results[row.index] = error_completion(f"generation failed: {exc}", row.prompt_ids)
        return [r for r in results if r is not None]

    # -- decoding ------------------------------------------------------------------------------------------

    def _completion(self, row: _Row) -> Completion:
        assert row.finish is not None
        return Completion(
            prompt_ids=row.prompt_ids,
            completion_ids=row.ids,
            logprobs=row.logprobs if row.params.logprobs else None,
            text=self.decode(row.ids),
            finish_reason=row.finish.value,
        )

    def _decode_batch(self, rows: list[_Row]) -> None:
        """Decode ``rows`` in lock-step until each one stops; fills ``ids``, ``logprobs`` and ``finish``."""
        was_training = self.model.training
        self.model.eval()  # dropout would change the sampled distribution
        precision = (
            torch.autocast(device_type=self.device.type, dtype=self.autocast)
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        try:
            with torch.inference_mode(), precision:
                capacity = max(len(r.prompt_ids) for r in rows) + max(r.budget for r in rows)
                self._decode_loop(rows, make_kv_cache(self.model, capacity))
        finally:
            self.model.train(was_training)

    def _decode_loop(self, rows: list[_Row], cache: Any) -> None:
        dev = self.device
        prompts = [r.prompt_ids for r in rows]
        shared = shared_prefix_length(prompts) if self.share_prefix else 0
        ids, mask, _ = pack_prompts(prompts, shared, self.pad_id)  # every prompt ends in the last column
        ids, mask = ids.to(dev), mask.to(dev)
        positions = positions_from_mask(mask)
        if shared:
            prefill_shared(self.model, ids, mask, positions, shared, cache)
        logits = model_forward(self.model, ids[:, shared:], mask, positions[:, shared:], cache, logits_to_keep=1)
        logits = logits[:, -1]  # (B, V)
        live = list(rows)  # rows still in the batch, in batch order
        temps = torch.tensor([r.params.temperature for r in rows], dtype=torch.float32, device=dev)
        top_p = torch.tensor([r.params.top_p for r in rows], dtype=torch.float32, device=dev)
        top_k = torch.tensor([r.params.top_k for r in rows], dtype=torch.long, device=dev)
        last_pos = positions[:, -1]
        # Drawn from the truncated distribution, scored under the untruncated one (identical without truncation).
        truncating = bool(((temps > 0) & ((top_p < 1) | (top_k > 0))).any())
        while True:
            logp = process_logits(logits, temps, top_p, top_k)  # (B, V)
            tokens = self._choose(logp, temps, live)
            scored = score_logprobs(logits, temps) if truncating else logp
            token_logp = scored.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            for row, tok, lp in zip(live, tokens.tolist(), token_logp.tolist()):
                if row.finish is None:
                    row.ids.append(tok)
                    row.logprobs.append(lp)
                    row.finish = self._check_finished(row, tok)
            done = [r.finish is not None for r in live]
            if all(done):
                return
            if sum(done) >= _PRUNE_FRACTION * len(live):
                keep = torch.tensor([i for i, d in enumerate(done) if not d], device=dev)
                cache.batch_select_indices(keep)
                live = [r for r, d in zip(live, done) if not d]
                tokens, mask, last_pos = tokens[keep], mask[keep], last_pos[keep]
                temps, top_p, top_k = temps[keep], top_p[keep], top_k[keep]
            step_mask = torch.ones((len(live), 1), dtype=mask.dtype, device=dev)
            mask = torch.cat([mask, step_mask], dim=1)
            last_pos = last_pos + 1
            logits = model_forward(
                self.model, tokens.unsqueeze(-1), mask, last_pos.unsqueeze(-1), cache, logits_to_keep=1
            )[:, -1]

    def _choose(self, logp: torch.Tensor, temps: torch.Tensor, live: list[_Row]) -> torch.Tensor:
        """Next token per row: argmax for greedy rows, a draw from ``exp(logp)`` for the others.

        Draws are inverse-CDF: one uniform number per row, from the row's own generator when it has a seed
        (so its answer does not depend on its batch neighbours) or from torch's global CPU generator, then a
        single batched ``searchsorted``; one ``multinomial`` call per seeded row cost several times more.
        """
        tokens = logp.argmax(dim=-1)
        sampled = (temps > 0).tolist()
        rows = [b for b, row in enumerate(live) if sampled[b] and row.finish is None]
        if not rows:
            return tokens
        dev = logp.device
        shared = iter(torch.rand(sum(live[b].generator is None for b in rows)).tolist())
        draws = []
        for b in rows:
            gen = live[b].generator
            draws.append(next(shared) if gen is None else float(torch.rand((), generator=gen)))
        u = torch.tensor(draws, device=dev)
        idx = torch.tensor(rows, device=dev)
        cdf = logp[idx].exp().cumsum(dim=-1)  # (R, V)
        # right=True: the first token whose cumulative mass exceeds u * total, never a zero-probability one.
        drawn = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
        tokens[idx] = drawn.clamp(max=logp.shape[-1] - 1)
        return tokens

    def _check_finished(self, row: _Row, token: int) -> FinishReason | None:
        if token in self.eos_ids:
            return FinishReason.STOP
        if row.params.stop:
            text = self.decode(row.ids)
            # Checked after every token, so a stop string is found on the token that completes it; the ids
            # keep that token and the text is their decoding (it ends with the stop string, plus whatever
            # else that last token spells).
            if any(s in text for s in row.params.stop):
                return FinishReason.STOP
        if len(row.ids) >= row.budget:
            return FinishReason.LENGTH
        return None

    # -- trainer-side helpers ------------------------------------------------------------------------------

    def completion_logprobs(self, completions: Sequence[Completion], params: SamplingParams) -> torch.Tensor:
        """Log-probs of ``completions`` under the current weights (see ``sequence_logprobs``)."""
        return sequence_logprobs(
            self.model,
            [c.prompt_ids for c in completions],
            [c.completion_ids for c in completions],
            params.temperature,
            pad_id=self.pad_id,
        )
