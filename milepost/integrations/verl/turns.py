"""The per-turn reward layout on one verl token sequence, and the paper's advantage computed over it.

verl hands an advantage estimator token-level tensors only, ``token_level_rewards`` and ``response_mask``, both
``(B, L)``: one row per episode, the response holding every model turn (mask 1) and every observation between
turns (mask 0). The paper's advantage needs two per-turn streams, the trajectory reward r_t and the step reward
r_step_t (``milepost.training.returns``), so the agent loop writes them at fixed places of turn t's span
[s_t, e_t] (a maximal run of mask 1):

    rewards[e_t]     = r_t         (the turn's last model token: verl's own place for a reward)
    rewards[e_t + 1] = r_step_t    (the first token after the turn, an observation token with mask 0)

The agent loop guarantees that each turn has at least one model token and that at least one observation token
follows it (the final observation is appended too), so both places exist and turns never touch. The estimator
reads the streams back, computes A_t with ``returns.advantages`` and spreads A_t over the turn's model tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from milepost.training.returns import advantages


def turn_spans(mask: torch.Tensor | Sequence[int]) -> list[tuple[int, int]]:
    """The maximal runs of 1 in a ``(L,)`` response mask, as (first, last) token positions (inclusive)."""
    values = [int(v) for v in (mask.tolist() if isinstance(mask, torch.Tensor) else mask)]
    spans: list[tuple[int, int]] = []
    start = None
    for i, v in enumerate(values):
        if v and start is None:
            start = i
        elif not v and start is not None:
            spans.append((start, i - 1))
            start = None
    if start is not None:
        spans.append((start, len(values) - 1))
    return spans


def place_turn_rewards(
    mask: Sequence[int], traj_rewards: Sequence[float], step_rewards: Sequence[float]
) -> list[float]:
    """Token rewards ``(L,)`` holding r_t at each turn's last model token and r_step_t right after it.

    Raises:
        ValueError: the mask's turns do not match the reward streams, or a turn has no token after it.
    """
    spans = turn_spans(mask)
    if not len(spans) == len(traj_rewards) == len(step_rewards):
        raise ValueError(
            f"{len(spans)} model turns in the mask but {len(traj_rewards)} trajectory and "
            f"{len(step_rewards)} step rewards"
        )
    out = [0.0] * len(mask)
    for (_, end), r, step in zip(spans, traj_rewards, step_rewards):
        if end + 1 >= len(mask):
            raise ValueError(f"the turn ending at token {end} has no observation token after it")
        out[end] = float(r)
        out[end + 1] = float(step)
    return out


def read_turn_rewards(
    rewards: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    """(r_t ``(T,)``, r_step_t ``(T,)``, the turn spans) of one ``(L,)`` row; the inverse of
    :func:`place_turn_rewards`. A step slot past the row's end (a response cut inside a turn) reads as 0."""
    spans = turn_spans(mask)
    length = rewards.shape[0]
    traj = torch.tensor([float(rewards[end]) for _, end in spans], dtype=torch.float32)
    step = torch.tensor([float(rewards[end + 1]) if end + 1 < length else 0.0 for _, end in spans])
    return traj, step, spans


def token_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    gamma: float,
    alpha: float,
    normalisation: str = "batch",
    groups: Sequence[int] | None = None,
    std_floor: float = 0.0,
) -> torch.Tensor:
    """The paper's advantage of every model token of a batch, ``(B, L)``.

    Reads each row's per-turn rewards (:func:`read_turn_rewards`), computes A_t = r_hat(G)_t +
    alpha * r_hat(r_step)_t with ``returns.advantages`` over every turn of the batch, and gives each model
    token of turn t the value A_t (0 on observation and padding tokens).
    """
    if token_level_rewards.shape != response_mask.shape:
        raise ValueError(f"rewards {tuple(token_level_rewards.shape)} and mask {tuple(response_mask.shape)} differ")
    rows = [read_turn_rewards(token_level_rewards[i], response_mask[i]) for i in range(response_mask.shape[0])]
    per_turn = advantages(
        [r[0] for r in rows],
        [r[1] for r in rows],
        gamma=gamma,
        alpha=alpha,
        normalisation=normalisation,
        groups=groups,
        std_floor=std_floor,
    )
    out = torch.zeros(response_mask.shape, dtype=torch.float32)  # (B, L)
    for i, ((_, _, spans), adv) in enumerate(zip(rows, per_turn)):
        for (start, end), value in zip(spans, adv.tolist()):
            out[i, start : end + 1] = value
    return out
