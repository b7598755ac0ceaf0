"""Log-probabilities as pure tensor functions, shared by generation and the trainer.

Two distributions are involved, and they differ only when top-p / top-k truncation is on:

* the **sampling** distribution, :func:`process_logits`: tokens are drawn from

      log_softmax(truncate(logits / T))        T > 0
      argmax(logits)                           T = 0 (greedy)

  where ``truncate`` keeps the top-k logits (ties at the k-th value are kept), then the top-p nucleus of what is
  left (the smallest prefix of the sorted tokens whose probability reaches p; the most likely token is always
  kept), and sets the rest to -inf. This is the order Hugging Face's ``generate`` uses (temperature, top-k,
  top-p).
* the **scoring** distribution, :func:`score_logprobs`: the log-probs that are recorded as behaviour log-probs
  mu and recomputed by the trainer as pi_theta are those of the tempered, *untruncated* distribution

      log mu(. | x) = log_softmax(logits / T)  T > 0;   log_softmax(logits) at T = 0.

Why not score under the truncated distribution, which is what was sampled? Because the trainer's target
pi_theta must be finite on every sampled token: after one update a token that was inside the behaviour nucleus
can fall outside the new one, and log pi_theta = -inf then turns the REINFORCE loss into NaN and the MSE
objective's gradient into inf (the review found both). Scoring both sides under the untruncated tempered
distribution keeps every ratio finite, keeps rho = pi_theta / mu exactly 1 while the weights are unchanged
(DESIGN: Contracts, Log-probabilities), and is what RL trainers that pair a sampler with a learner score against
(verl, OpenRLHF: log-probs of the temperature-scaled logits). The truncation's own bias is left to the
importance weights' clipping, as there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

Scalar = float | int
PerRow = Scalar | Sequence[Scalar] | torch.Tensor


def _per_row(value: PerRow, lead: torch.Size, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``value`` as a tensor of shape ``lead`` (a scalar is broadcast; a vector runs along dim 0)."""
    t = torch.as_tensor(value, dtype=dtype, device=device)
    if t.dim() == 1 and len(lead) > 1:
        t = t.view(-1, *([1] * (len(lead) - 1)))
    return t.expand(lead)


def process_logits(
    logits: torch.Tensor,
    temperature: PerRow = 1.0,
    top_p: PerRow = 1.0,
    top_k: PerRow = 0,
) -> torch.Tensor:
    """Log-probs of the distribution actually sampled, from raw next-token logits.

    Args:
        logits: ``(..., V)`` raw logits; computed in float32 whatever their dtype.
        temperature: scalar or one value per row (dim 0); 0 means greedy (untempered, untruncated).
        top_p: nucleus mass in (0, 1]; 1 disables it.
        top_k: tokens to keep; 0 (or >= V) disables it.

    Returns:
        ``(..., V)`` float32 log-probs, -inf outside the kept set. Differentiable with respect to ``logits``
        (the kept set itself is a selection and carries no gradient).
    """
    logits = logits.float()
    lead, vocab, device = logits.shape[:-1], logits.shape[-1], logits.device
    temp = _per_row(temperature, lead, torch.float32, device)
    greedy = temp <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temp), temp).unsqueeze(-1)
    k = _per_row(top_k, lead, torch.long, device)
    k = torch.where(greedy | (k <= 0) | (k >= vocab), torch.full_like(k, vocab), k)
    p = torch.where(greedy, torch.ones_like(temp), _per_row(top_p, lead, torch.float32, device))
    if bool((k < vocab).any()) or bool((p < 1.0).any()):
        with torch.no_grad():
            keep = _kept_set(scaled.detach(), k, p)
        scaled = scaled.masked_fill(~keep, float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


def score_logprobs(logits: torch.Tensor, temperature: PerRow = 1.0) -> torch.Tensor:
    """Log-probs of the scoring distribution: ``log_softmax(logits / T)``, untruncated (see the module doc).

    Args:
        logits: ``(..., V)`` raw logits; computed in float32 whatever their dtype.
        temperature: scalar or one value per row (dim 0); 0 (greedy) scores the untempered distribution.

    Returns:
        ``(..., V)`` float32 log-probs, finite everywhere. Differentiable with respect to ``logits``.
    """
    logits = logits.float()
    temp = _per_row(temperature, logits.shape[:-1], torch.float32, logits.device)
    temp = torch.where(temp <= 0, torch.ones_like(temp), temp)
    return torch.log_softmax(logits / temp.unsqueeze(-1), dim=-1)


def _kept_set(scaled: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., V)`` mask of the tokens that survive top-k then top-p."""
    # Stable sort so that equal logits are ordered the same way in the sampler and in the trainer.
    sorted_vals, order = torch.sort(scaled, dim=-1, descending=True, stable=True)
    kth = sorted_vals.gather(-1, (k - 1).unsqueeze(-1))  # (..., 1)
    keep_sorted = sorted_vals >= kth  # top-k by value: ties at the k-th value survive
    masked = sorted_vals.masked_fill(~keep_sorted, float("-inf"))
    probs = torch.softmax(masked, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    # Rows with p == 1 skip the nucleus test: a float32 cumsum can reach 1.0 before the tail and drop tokens.
    nucleus = (mass_before < p.unsqueeze(-1)) | (p.unsqueeze(-1) >= 1.0)
    keep_sorted &= nucleus
    keep = torch.zeros_like(keep_sorted)
    return keep.scatter(-1, order, keep_sorted)


_FORWARD_PARAMS: dict[type, frozenset[str]] = {}


def _forward_params(cls: Any) -> frozenset[str]:
    """Argument names of a model class's ``forward`` (cached: ``inspect.signature`` is slow per step)."""
    if cls not in _FORWARD_PARAMS:
        _FORWARD_PARAMS[cls] = frozenset(inspect.signature(cls.forward).parameters)
    return _FORWARD_PARAMS[cls]


def base_model(model: Any) -> Any:
    """The underlying transformers model of a PEFT wrapper (its forward takes ``**kwargs`` only), else ``model``."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def text_decoder(model: Any) -> Any | None:
    """The text decoder trunk of a causal LM or a PEFT wrapper of one, as transformers'
    ``PreTrainedModel.get_decoder`` finds it (``model`` / ``language_model`` / ``text_model`` / ``decoder``;
    modeling_utils.py), without the output head; None for a model without ``get_decoder``."""
    get_decoder = getattr(base_model(model), "get_decoder", None)
    return get_decoder() if callable(get_decoder) else None


def model_forward(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    cache: Any = None,
    logits_to_keep: int = 0,
) -> torch.Tensor:
    """One forward pass of a causal LM; returns logits ``(B, T', V)`` (the last ``logits_to_keep`` positions
    when that is > 0, all positions otherwise).

    Works across transformers versions: the KV cache argument is ``cache`` in 5.x and ``past_key_values``
    before; ``logits_to_keep`` (which skips the LM head on positions nobody reads) is used when supported.
    """
    params = _forward_params(type(base_model(model)))
    kwargs: dict[str, Any] = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "use_cache": cache is not None,
    }
    if cache is not None:
        kwargs["cache" if "cache" in params else "past_key_values"] = cache
    if logits_to_keep > 0 and "logits_to_keep" in params:
        kwargs["logits_to_keep"] = logits_to_keep
    logits: torch.Tensor = model(**kwargs).logits
    return logits[:, -logits_to_keep:] if logits_to_keep > 0 else logits


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding gets position 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


LOGITS_CHUNK_TOKENS = 512
"""Positions (rows x columns) whose full-vocabulary logits exist at once while scoring: one float32 chunk of
``LOGITS_CHUNK_TOKENS x V`` (311 MB at V = 151,936; a few such copies in its backward), recomputed in backward
rather than kept."""


MIN_SHARED_PREFIX = 16
"""Shortest prompt prefix shared by every row that is computed once for the batch (shorter ones: per row)."""


def shared_prefix_length(prompt_ids: Sequence[Sequence[int]]) -> int:
    """Length of the prefix every prompt shares, leaving each at least one token of its own; 0 for a single
    row or a prefix shorter than ``MIN_SHARED_PREFIX``."""
    if len(prompt_ids) < 2:
        return 0
    first = prompt_ids[0]
    n = min(len(p) for p in prompt_ids) - 1
    for ids in prompt_ids[1:]:
        k = 0
        while k < n and ids[k] == first[k]:
            k += 1
        n = k
    return n if n >= MIN_SHARED_PREFIX else 0


def pack_prompts(
    prompt_ids: Sequence[Sequence[int]], shared: int, pad_id: int, extra: int = 0
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Rows laid out for one batched forward: the ``shared`` prefix in the first columns, then left padding,
    then the rest of each prompt ending in column ``width - 1``, then ``extra`` free columns (for completions).
    Position ids from the mask (``positions_from_mask``) run on across the padding as if it were not there.

    Returns ``(ids, mask, width)``: ``(B, width + extra)`` token ids (``pad_id`` in free places) and attention
    mask (1 on prompt tokens), and the prompt width.
    """
    width = shared + max(len(p) - shared for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width + extra), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompt_ids):
        ids[b, :shared] = torch.tensor(p[:shared], dtype=torch.long)
        ids[b, width - len(p) + shared : width] = torch.tensor(p[shared:], dtype=torch.long)
        mask[b, :shared] = 1
        mask[b, width - len(p) + shared : width] = 1
    return ids, mask, width


def prefill_shared(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, shared: int, cache: Any
) -> None:
    """Run the first ``shared`` columns (the same in every row) for one row into ``cache``, then copy the cache
    to every row, so the batch's forward over the remaining columns sees the prefix's keys and values."""
    model_forward(model, ids[:1, :shared], mask[:1, :shared], positions[:1, :shared], cache, logits_to_keep=1)
    cache.batch_repeat_interleave(ids.shape[0])


def _checkpointing(model: Any) -> bool:
    """Gradient checkpointing turns the KV cache off in training, so a shared prefix cannot be carried over."""
    base = base_model(model)
    flag = getattr(base, "is_activation_checkpointing", None)  # transformers >= 5; the older name warns there
    if flag is None:
        flag = getattr(base, "is_gradient_checkpointing", False)
    return bool(flag) and model.training


def sequence_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    temperature: PerRow = 1.0,
    pad_id: int = 0,
    share_prefix: bool = True,
    chunk_tokens: int = LOGITS_CHUNK_TOKENS,
) -> torch.Tensor:
    """Recompute per-token log-probs of given completions under ``model`` (the scoring distribution at the
    sampler's temperature, :func:`score_logprobs`; top-p / top-k do not enter it).

    The rows are laid out as in generation (prompt left-padded to a common end, completion after it), so the
    positions match the sampler's. Gradients flow when called outside ``torch.no_grad``. With ``share_prefix``
    the prompt prefix every row shares (an agent's system prompt) is run once and its keys and values copied to
    every row (the same result; its gradient then sums over the rows through the copy).

    Args:
        model: a causal LM (transformers or a PEFT wrapper of one).
        prompt_ids: one token-id list per row.
        completion_ids: the generated ids per row (the behaviour tokens, EOS included if it was generated).
        temperature: the temperature the completions were drawn with, scalar or per row.
        pad_id: id placed in padding positions (never attended to).
        share_prefix: run the prefix every row shares once.
        chunk_tokens: positions whose full-vocabulary logits exist at once (:func:`chunked_token_logprobs`);
            the model's output head runs on the completion positions a chunk at a time, so no ``(B, C, V)``
            logits are materialised.

    Returns:
        ``(B, C)`` float32, ``C`` the longest completion; position j of row b is log pi(y_bj | x_b, y_b<j),
        0 beyond the row's completion length.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt_ids and completion_ids must have the same number of rows")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    device = next(model.parameters()).device
    batch = len(prompt_ids)
    width_c = max((len(c) for c in completion_ids), default=0)
    if width_c == 0:
        return torch.zeros(batch, 0, device=device)
    shared = shared_prefix_length(prompt_ids) if share_prefix and not _checkpointing(model) else 0
    ids, mask, width_p = pack_prompts(prompt_ids, shared, pad_id, extra=width_c)
    comp = torch.full((batch, width_c), pad_id, dtype=torch.long)
    comp_mask = torch.zeros(batch, width_c, dtype=torch.bool)
    for b, c in enumerate(completion_ids):
        ids[b, width_p : width_p + len(c)] = torch.tensor(c, dtype=torch.long)
        mask[b, width_p : width_p + len(c)] = 1
        comp[b, : len(c)] = torch.tensor(c, dtype=torch.long)
        comp_mask[b, : len(c)] = True
    ids, mask, comp, comp_mask = ids.to(device), mask.to(device), comp.to(device), comp_mask.to(device)
    positions = positions_from_mask(mask)
    cache = None
    if shared:
        from transformers import DynamicCache  # a plain cache: concatenation keeps the graph for gradients

        cache = DynamicCache(config=base_model(model).config)
        prefill_shared(model, ids, mask, positions, shared, cache)
    # Column width_p - 1 (the last prompt token) predicts the first completion token, and so on.
    head = _output_head(model)
    if head is None:  # no separable output head: the full logits, scored a chunk of positions at a time
        logits = model_forward(model, ids[:, shared:], mask, positions[:, shared:], cache, width_c + 1)[:, :-1]
        token_logp = chunked_token_logprobs(logits, lambda x: x, comp, temperature, chunk_tokens)
    else:
        hidden = _head_inputs(model, head, ids[:, shared:], mask, positions[:, shared:], cache, width_c + 1)
        token_logp = chunked_token_logprobs(hidden[:, -(width_c + 1) : -1], _head_fn(model, head), comp, temperature,
                                            chunk_tokens)  # fmt: skip
    return token_logp.masked_fill(~comp_mask, 0.0)  # (B, C)


def chunked_token_logprobs(
    hidden: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    tokens: torch.Tensor,
    temperature: PerRow = 1.0,
    chunk_tokens: int = LOGITS_CHUNK_TOKENS,
) -> torch.Tensor:
    """log softmax(head(hidden) / T) at ``tokens``, a chunk of columns at a time: the chosen token's tempered
    logit minus the logsumexp of its row, equal to :func:`score_logprobs` followed by a gather.

    Only one chunk's float32 logits ``(B, chunk_tokens // B, V)`` exist at a time: with gradients each chunk runs
    under ``torch.utils.checkpoint``, which keeps its input and recomputes its logits in backward, so the
    full ``(B, C, V)`` logits are never stored (the temperature, the float32 cast and the logsumexp are applied
    per chunk).

    Args:
        hidden: ``(B, C, H)`` inputs of the output head (or ``(B, C, V)`` logits with ``head`` the identity).
        head: maps ``(B, c, H)`` to ``(B, c, V)`` raw logits.
        tokens: ``(B, C)`` the token whose log-prob each position scores.
        temperature: scalar or one value per row; 0 scores the untempered distribution.
        chunk_tokens: positions (rows x columns) per chunk.

    Returns:
        ``(B, C)`` float32 log-probs.
    """
    batch, width = tokens.shape
    temp = _per_row(temperature, torch.Size([batch]), torch.float32, hidden.device)
    temp = torch.where(temp <= 0, torch.ones_like(temp), temp).view(batch, 1, 1)

    def score(h: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        logits = head(h).float() / temp  # (B, c, V)
        return logits.gather(-1, tok.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)  # (B, c)

    step = max(1, chunk_tokens // max(batch, 1))
    grad = torch.is_grad_enabled() and hidden.requires_grad
    parts = []
    for lo in range(0, width, step):
        h, tok = hidden[:, lo : lo + step], tokens[:, lo : lo + step]
        parts.append(checkpoint(score, h, tok, use_reentrant=False) if grad else score(h, tok))
    return torch.cat(parts, dim=1) if parts else torch.zeros(batch, 0, device=hidden.device)


def _output_head(model: Any) -> torch.nn.Module | None:
    """The output projection of a transformers causal LM whose logits are ``lm_head(hidden)`` (softcapped at
    most); None where the forward transforms them otherwise (those are scored from their full logits)."""
    base = base_model(model)
    get_head = getattr(base, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    config = getattr(base, "config", None)
    if not isinstance(head, torch.nn.Module) or any(
        getattr(config, key, None) not in (None, 1, 1.0) for key in ("logit_scale", "logits_scaling")
    ):
        return None
    return head


def _head_fn(model: Any, head: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """``head`` followed by the model's final-logit softcapping (Gemma 2 / 3), where it has one."""
    cap = getattr(getattr(base_model(model), "config", None), "final_logit_softcapping", None)
    if not cap:
        return head
    return lambda h: torch.tanh(head(h) / cap) * cap


def _head_inputs(
    model: Any,
    head: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    cache: Any,
    logits_to_keep: int,
) -> torch.Tensor:
    """The output head's input ``(B, T', H)`` of one forward, with the head itself run on no position.

    A pre-hook on the head takes its input and hands it an empty slice, so the model's own forward (and, under
    FSDP2, the root module's all-gather around it) runs as always while no full-vocabulary logits are built.
    The root FSDP2 module keeps its parameters (the head's among them) unsharded from its forward until its
    backward (torch/distributed/fsdp/_fully_shard/_fsdp_state.py: ``post_forward_mesh_info = None`` for the
    root; its post-backward runs in ``_root_post_backward_final_callback``), so the chunks may call the head
    after the forward.
    """
    taken: list[torch.Tensor] = []

    def take(_: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        taken.append(args[0])
        return (args[0][:, :0], *args[1:])

    handle = head.register_forward_pre_hook(take)
    try:
        model_forward(model, ids, mask, positions, cache, logits_to_keep=logits_to_keep)
    finally:
        handle.remove()
    return taken[-1]
