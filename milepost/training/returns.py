"""Returns and advantages as pure functions (seed paper, section 4 and appendix C.3; DESIGN: Training).

Notation: r_t the trajectory reward of turn t (outcome, plus the milestone term under subgoal decomposition),
r_step_t = r_format_t + r_valid_t the step reward, gamma the discount (0.995),
G_t = sum_{k >= t} gamma^(k - t) r_k, and the advantage

    A_t = r_hat_traj_t + alpha * r_hat_step_t,    r_hat = (x - mean) / std over every turn of the batch,

with alpha = 0.2. Variants for the paper's ablations: no normalisation, alpha in {0, 0.5, 1}, and group
normalisation (GRPO-style: statistics over the episodes of the same task instead of the whole batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

EPS = 1e-6


def discounted_returns(rewards: torch.Tensor, gamma: float, cuts: torch.Tensor | None = None) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t+1}, restarting after every turn where ``cuts`` is true.

    Args:
        rewards: ``(T,)`` rewards of one episode.
        gamma: discount in [0, 1].
        cuts: optional ``(T,)`` bool; a cut after turn t (a subgoal completed at t) ends a segment, so
            G_t sums rewards up to and including t only (subgoal-segmented returns, paper section 4.2.1).

    Returns:
        ``(T,)`` returns, same dtype as ``rewards``.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    out = torch.zeros_like(rewards)
    running = torch.zeros((), dtype=rewards.dtype)
    for t in range(rewards.shape[0] - 1, -1, -1):
        if cuts is not None and bool(cuts[t]):
            running = torch.zeros((), dtype=rewards.dtype)
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def normalise(values: torch.Tensor, groups: torch.Tensor | None = None, std_floor: float = 0.0) -> torch.Tensor:
    """(x - mean) / (max(std, std_floor) + eps) over all entries, or within each group id when ``groups`` is given.

    A group (or batch) whose values are all equal normalises to 0: it carries no learning signal. ``std_floor``
    keeps a nearly constant batch (e.g. all episodes solved, returns differing only by discounting) from being
    blown up to unit variance; 0 is the paper's plain normalisation.
    """
    if groups is None:
        if values.numel() < 2:
            return torch.zeros_like(values)
        return (values - values.mean()) / (values.std(unbiased=False).clamp(min=std_floor) + EPS)
    out = torch.zeros_like(values)
    for g in torch.unique(groups):
        sel = groups == g
        chunk = values[sel]
        if chunk.numel() >= 2:
            out[sel] = (chunk - chunk.mean()) / (chunk.std(unbiased=False).clamp(min=std_floor) + EPS)
    return out


def advantages(
    traj_rewards: Sequence[torch.Tensor],
    step_rewards: Sequence[torch.Tensor],
    *,
    gamma: float = 0.995,
    alpha: float = 0.2,
    cuts: Sequence[torch.Tensor] | None = None,
    normalisation: str = "batch",
    groups: Sequence[int] | None = None,
    std_floor: float = 0.0,
) -> list[torch.Tensor]:
    """Per-turn advantages of a batch of episodes.

    Args:
        traj_rewards: per episode, ``(T_i,)`` trajectory rewards r_t.
        step_rewards: per episode, ``(T_i,)`` step rewards r_step_t (format + validity penalties).
        gamma: discount of the trajectory return.
        alpha: weight of the step component.
        cuts: per episode, optional ``(T_i,)`` segment ends (subgoal decomposition).
        normalisation: ``batch`` (the paper), ``group`` (GRPO-style, per task) or ``none``.
        groups: per episode, a group id (task) for ``group`` normalisation.
        std_floor: smallest standard deviation used when normalising (0 = the paper's).

    Returns:
        Per episode, ``(T_i,)`` advantages A_t.
    """
    if len(traj_rewards) != len(step_rewards):
        raise ValueError("traj_rewards and step_rewards need one entry per episode")
    if normalisation not in ("batch", "group", "none"):
        raise ValueError(f"normalisation must be batch, group or none, got {normalisation!r}")
    if normalisation == "group" and (groups is None or len(groups) != len(traj_rewards)):
        raise ValueError("group normalisation needs one group id per episode")
    lengths = [int(r.shape[0]) for r in traj_rewards]
    if not lengths or sum(lengths) == 0:
        return [torch.zeros(n) for n in lengths]
    returns = [
        discounted_returns(r.float(), gamma, None if cuts is None else cuts[i]) for i, r in enumerate(traj_rewards)
    ]
    return combine_with_steps(returns, step_rewards, alpha, normalisation, groups, std_floor)


def combine_with_steps(
    values: Sequence[torch.Tensor],
    step_rewards: Sequence[torch.Tensor],
    alpha: float,
    normalisation: str = "batch",
    groups: Sequence[int] | None = None,
    std_floor: float = 0.0,
) -> list[torch.Tensor]:
    """A_t = r_hat(values)_t + alpha * r_hat(step)_t over every turn of the batch (or plain sums for ``none``).

    ``values`` are per-episode ``(T_i,)`` trajectory terms (discounted returns, or MiRA's advantages);
    ``groups`` one id per episode for ``group`` normalisation.
    """
    lengths = [int(v.shape[0]) for v in values]
    if sum(lengths) == 0:
        return [torch.zeros(n) for n in lengths]
    traj = torch.cat([v.float() for v in values])  # (N,) all turns of the batch
    steps = torch.cat([s.float() for s in step_rewards])  # (N,)
    if normalisation == "none":
        adv = traj + alpha * steps
    else:
        group_ids = None
        if normalisation == "group":
            assert groups is not None
            group_ids = torch.cat([torch.full((n,), g, dtype=torch.long) for n, g in zip(lengths, groups)])
        adv = normalise(traj, group_ids, std_floor) + alpha * normalise(steps, group_ids, std_floor)
    return list(torch.split(adv, lengths))


def doubly_robust_advantages(
    rewards: torch.Tensor, values: torch.Tensor, outcome: float, *, gamma: float, lam: float = 0.5
) -> torch.Tensor:
    """MiRA's doubly-robust advantage of one episode (DESIGN: Training, MiRA):

        A_t = lam * (r~_t + gamma * V(s_t+1) - V(s_t)) + (1 - lam) * (R - V(s_t))

    a one-step TD error (low variance, biased while V is poor) mixed with the Monte-Carlo outcome R in {0, 1}
    against the same baseline (unbiased, high variance). V is a success probability.

    Args:
        rewards: ``(T,)`` (shaped) rewards r~_t.
        values: ``(T + 1,)`` V(s_0) .. V(s_T); the caller sets V(s_T) = 0 for a finished episode, whose
            outcome is already in the last reward.
        outcome: R, 1.0 if the episode succeeded else 0.0.
        gamma: discount.
        lam: weight of the TD term (1 = pure TD, 0 = Monte-Carlo with a value baseline).
    """
    if values.shape[0] != rewards.shape[0] + 1:
        raise ValueError(f"need T + 1 = {rewards.shape[0] + 1} values, got {values.shape[0]}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    td = rewards + gamma * values[1:] - values[:-1]
    mc = outcome - values[:-1]
    return lam * td + (1.0 - lam) * mc


def baseline_advantages(rewards: torch.Tensor, values: torch.Tensor, *, gamma: float) -> torch.Tensor:
    """Monte-Carlo advantage with a value baseline, G~_t - V(s_t): the 'without doubly-robust' ablation.

    ``rewards`` ``(T,)`` are the (shaped) rewards, ``values`` ``(T + 1,)`` as in :func:`doubly_robust_advantages`.
    """
    if values.shape[0] != rewards.shape[0] + 1:
        raise ValueError(f"need T + 1 = {rewards.shape[0] + 1} values, got {values.shape[0]}")
    return discounted_returns(rewards, gamma) - values[:-1]


def gae_advantages(rewards: torch.Tensor, values: torch.Tensor, *, gamma: float, lam: float = 0.95) -> torch.Tensor:
    """Generalised advantage estimation, GAE(gamma, lambda) (Schulman et al. 2016, eq. 16; framework guide):

        delta_t = r~_t + gamma * V(s_t+1) - V(s_t),    A_t = sum_{l >= 0} (gamma * lam)^l * delta_{t+l},

    computed backwards as A_t = delta_t + gamma * lam * A_{t+1}. lam = 0 is the one-step TD error, lam = 1 the
    Monte-Carlo return minus the baseline, G~_t - V(s_t).

    Args:
        rewards: ``(T,)`` (shaped) rewards r~_t.
        values: ``(T + 1,)`` V(s_0) .. V(s_T), V(s_T) = 0 for a finished episode (as in
            :func:`doubly_robust_advantages`).
        gamma: discount.
        lam: the GAE lambda (0.95 in the guide).
    """
    if values.shape[0] != rewards.shape[0] + 1:
        raise ValueError(f"need T + 1 = {rewards.shape[0] + 1} values, got {values.shape[0]}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    delta = rewards + gamma * values[1:] - values[:-1]  # (T,)
    out = torch.zeros_like(delta)
    running = torch.zeros((), dtype=delta.dtype)
    for t in range(delta.shape[0] - 1, -1, -1):
        running = delta[t] + gamma * lam * running
        out[t] = running
    return out
