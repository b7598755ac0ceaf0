"""Progress labels and potential-based reward shaping (MiRA; DESIGN: Training).

An episode of T turns passes through states s_0 .. s_T (s_t is the state turn t answers in; s_T the state
after the last turn). With K subgoals, the progress of a state at which k of them hold is k / K. The
*progress label* y_t of every state is that value interpolated linearly between subgoal completion events:
the anchors are s_0 (the subgoals that already held at reset) and each state right after a turn that completed
subgoals; states after the last anchor keep its value (no later completion to move towards).

The shaped reward is r~_t = r_t + c * (gamma * P(s_t+1) - P(s_t)) for a potential P. Shaping with a fixed
potential leaves the optimal policy unchanged (Ng et al., 1999); here that holds only approximately, since
episodes are truncated and the learned potential keeps changing.
"""

from __future__ import annotations

import itertools

import torch

from milepost.types import Episode


def completion_counts(ep: Episode) -> list[int]:
    """Subgoals holding in each state s_0 .. s_T (T + 1 entries)."""
    if not ep.turns:
        return [int(ep.meta.get("subgoals_completed", 0))]
    first = ep.turns[0]
    counts = [len(first.subgoals_completed) - len(first.new_subgoals)]
    counts += [len(t.subgoals_completed) for t in ep.turns]
    return counts


def progress_labels(ep: Episode) -> torch.Tensor:
    """y_0 .. y_T: progress k / K interpolated linearly between completion events, shape ``(T + 1,)``.

    An episode without subgoals (K = 0) gets the outcome as its only progress: 0 throughout, 1 at s_T if it
    succeeded.
    """
    k_total = int(ep.meta.get("num_subgoals", 0))
    n = len(ep.turns) + 1
    if k_total <= 0:
        y = torch.zeros(n)
        y[-1] = float(ep.success)
        return y
    counts = completion_counts(ep)
    anchors = [0] + [t for t in range(1, n) if counts[t] != counts[t - 1]]
    y = torch.empty(n)
    for a, b in itertools.pairwise(anchors):
        lo, hi = counts[a] / k_total, counts[b] / k_total
        for t in range(a, b + 1):
            y[t] = lo + (hi - lo) * (t - a) / (b - a)
    y[anchors[-1] :] = counts[anchors[-1]] / k_total
    return y


def shaped_rewards(rewards: torch.Tensor, potentials: torch.Tensor, gamma: float, coef: float = 1.0) -> torch.Tensor:
    """r~_t = r_t + coef * (gamma * P(s_t+1) - P(s_t)).

    Args:
        rewards: ``(T,)`` rewards r_t of one episode.
        potentials: ``(T + 1,)`` potentials P(s_0) .. P(s_T).
        gamma: discount.
        coef: shaping coefficient (anneal it to 0 to return to the unshaped objective).
    """
    if potentials.shape[0] != rewards.shape[0] + 1:
        raise ValueError(f"need T + 1 = {rewards.shape[0] + 1} potentials, got {potentials.shape[0]}")
    return rewards + coef * (gamma * potentials[1:] - potentials[:-1])
