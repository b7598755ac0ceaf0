"""Per-turn advantage estimators beside the paper's (``returns.advantages``), as pure functions over episodes.

- **GiGPO** (Feng et al. 2025, arXiv 2505.10978, eqs. 3-8; verl-agent ``gigpo/core_gigpo.py``): an episode-level
  group advantage A^E_i = (R_i - mean_g R) / std_g R over the episodes of the same task g, plus a step-level
  advantage from *anchor states*: every turn of the group's episodes that acted in the same state s forms one
  step group, and A^S_t = (G_t - mean_s G) / std_s G of the discounted returns from those turns. The turn's
  advantage is A^E + omega * A^S. Anchor states are exact here (``Turn.state_key``, the environment state's
  fingerprint), where verl-agent compares observation strings. ``scale="mean"`` subtracts the mean only
  (verl-agent's default ``mean_norm``), ``"std"`` also divides by the standard deviation (``mean_std_norm``).
  A group of one episode gets A^E = R (verl-agent's mean 0, std 1); a step group of one turn gets A^S = 0.
  The episode statistics are taken over episodes, not over their turns (verl-agent's
  ``compute_mean_std_cross_steps`` weights an episode by its turn count).
- **Distance** (an oracle, not a learner's estimate): A_t = delta d_t = d(s_t) - d(s_t+1), the exact goal distance
  the turn removed, normalised over the batch. It is the credit an estimator would give if it knew the solver's
  distance, milepost's upper bound for how much per-turn credit information the others recover.
- **Random**: independent standard normal advantages, the floor of the credit audit.

``turn_distances`` is the truth both the distance estimator and the credit audit read: d(s_t) before and after
each turn, from the episode's goal distance and each turn's recorded ``remaining_distance`` (None = a dead end,
the goal unreachable, for environments that can reach one).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence

import torch

from milepost.training.returns import discounted_returns, normalise
from milepost.types import Episode

INF = math.inf


def turn_distances(ep: Episode) -> list[tuple[float, float]]:
    """(d(s_t), d(s_t+1)) for each turn t, with ``math.inf`` for a state from which the goal is unreachable.

    d(s_0) is the episode's goal distance; d(s_t+1) is turn t's ``remaining_distance``. A turn whose recorded
    distance is None is in a dead end (the environments return None only there); every later turn stays in it.
    """
    out = []
    before: float = float(ep.goal_distance)
    for turn in ep.turns:
        after = INF if turn.remaining_distance is None else float(turn.remaining_distance)
        out.append((before, after))
        before = after
    return out


def distance_deltas(ep: Episode, dead_penalty: float) -> torch.Tensor:
    """delta d_t = d(s_t) - d(s_t+1) per turn, ``(T,)``; entering a dead end counts ``-dead_penalty``, a turn
    already in one 0 (nothing it does changes the outcome)."""
    out = []
    for before, after in turn_distances(ep):
        if math.isinf(before):
            out.append(0.0)
        elif math.isinf(after):
            out.append(-dead_penalty)
        else:
            out.append(before - after)
    return torch.tensor(out, dtype=torch.float32)


def dead_end_penalty(episodes: Sequence[Episode]) -> float:
    """The regress a dead end counts as: one more than the largest finite distance in the batch, so entering a
    dead end ranks below every finite regression."""
    finite = [d for ep in episodes for pair in turn_distances(ep) for d in pair if not math.isinf(d)]
    finite += [float(ep.goal_distance) for ep in episodes]
    return (max(finite) if finite else 0.0) + 1.0


def distance_advantages(episodes: Sequence[Episode], normalisation: str = "batch") -> list[torch.Tensor]:
    """The distance estimator: A_t = delta d_t normalised over every turn of the batch (``batch``), within each
    task (``group``), or raw (``none``)."""
    if normalisation not in ("batch", "group", "none"):
        raise ValueError(f"normalisation must be batch, group or none, got {normalisation!r}")
    penalty = dead_end_penalty(episodes)
    deltas = [distance_deltas(ep, penalty) for ep in episodes]
    lengths = [int(d.shape[0]) for d in deltas]
    if sum(lengths) == 0 or normalisation == "none":
        return deltas
    flat = torch.cat(deltas)  # (N,) every turn of the batch
    groups = None
    if normalisation == "group":
        ids = sorted({ep.task_id for ep in episodes})
        groups = torch.cat([torch.full((n,), ids.index(ep.task_id)) for n, ep in zip(lengths, episodes)])
    return list(torch.split(normalise(flat, groups), lengths))


def _centre(values: list[float], scale: str, eps: float) -> list[float]:
    """(x - mean) / std (``std``; unbiased std as torch.std, as verl-agent) or x - mean (``mean``)."""
    t = torch.tensor(values, dtype=torch.float64)
    centred = t - t.mean()
    if scale == "std" and t.numel() > 1:
        centred = centred / (t.std() + eps)
    return centred.tolist()


def gigpo_advantages(
    episodes: Sequence[Episode],
    outcomes: Sequence[float],
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    scale: str = "std",
    step_rewards: Sequence[torch.Tensor] | None = None,
    eps: float = 1e-6,
) -> list[torch.Tensor]:
    """GiGPO's per-turn advantages A^E + omega * A^S (see the module docstring).

    Args:
        episodes: the batch; episodes of the same ``task_id`` form one episode group.
        outcomes: R_i per episode (the success bit, or any episode reward).
        gamma: discount of the step-level returns G_t (verl-agent's default 0.95).
        omega: weight of the step-level advantage (the paper's omega = 1).
        scale: ``std`` (mean and std normalisation) or ``mean`` (mean only).
        step_rewards: per episode, ``(T_i,)`` rewards whose discounted sums are G_t; default: the outcome R_i
            at the last turn and 0 elsewhere (GiGPO with a sparse reward).
        eps: added to the standard deviation.

    Returns:
        Per episode, ``(T_i,)`` advantages.
    """
    if len(outcomes) != len(episodes):
        raise ValueError("need one outcome per episode")
    if scale not in ("std", "mean"):
        raise ValueError(f"scale must be std or mean, got {scale!r}")
    if step_rewards is not None and len(step_rewards) != len(episodes):
        raise ValueError("need one step-reward tensor per episode")
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        by_task[ep.task_id].append(i)
    episode_adv = [0.0] * len(episodes)
    for members in by_task.values():
        scores = [float(outcomes[i]) for i in members]
        centred = scores if len(members) == 1 else _centre(scores, scale, eps)
        for i, a in zip(members, centred):
            episode_adv[i] = a

    returns = []
    for i, ep in enumerate(episodes):
        n = len(ep.turns)
        if step_rewards is not None:
            rewards = step_rewards[i].double()
        else:
            rewards = torch.zeros(n, dtype=torch.float64)
            if n:
                rewards[-1] = float(outcomes[i])
        returns.append(discounted_returns(rewards, gamma).tolist())
    anchors: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        for t, turn in enumerate(ep.turns):
            # A turn without a recorded state is its own anchor (never grouped with another).
            key = turn.state_key or f"#{i}:{t}"
            anchors[(ep.task_id, key)].append((i, t))
    step_adv = [[0.0] * len(ep.turns) for ep in episodes]
    for turns in anchors.values():
        if len(turns) < 2:
            continue
        centred = _centre([returns[i][t] for i, t in turns], scale, eps)
        for (i, t), a in zip(turns, centred):
            step_adv[i][t] = a
    return [
        torch.tensor([episode_adv[i] + omega * s for s in step_adv[i]], dtype=torch.float32)
        for i in range(len(episodes))
    ]


def anchor_group_sizes(episodes: Sequence[Episode]) -> list[int]:
    """Sizes of GiGPO's step groups (turns sharing a task and a state): how much step-level signal there is."""
    sizes: dict[tuple[str, str], int] = defaultdict(int)
    for i, ep in enumerate(episodes):
        for t, turn in enumerate(ep.turns):
            sizes[(ep.task_id, turn.state_key or f"#{i}:{t}")] += 1
    return sorted(sizes.values())


def grpo_advantages(episodes: Sequence[Episode], outcomes: Sequence[float]) -> list[torch.Tensor]:
    """GRPO-style outcome normalisation: A_i = (R_i - mean_g R) / (std_g R + eps) over the episodes of task g
    (``returns.normalise`` per group: population std, 0 for a group of one), the same for every turn of episode i."""
    if len(outcomes) != len(episodes):
        raise ValueError("need one outcome per episode")
    ids = sorted({ep.task_id for ep in episodes})
    groups = torch.tensor([ids.index(ep.task_id) for ep in episodes])
    adv = normalise(torch.tensor([float(r) for r in outcomes], dtype=torch.float64), groups).tolist()
    return [torch.full((len(ep.turns),), adv[i], dtype=torch.float32) for i, ep in enumerate(episodes)]


def random_advantages(episodes: Sequence[Episode], seed: int = 0) -> list[torch.Tensor]:
    """Independent N(0, 1) advantages per turn: the audit's no-information baseline."""
    # A stream of its own: Random(seed) would replay the draws of any generator seeded with the same integer
    # (a data or episode generator), correlating the "random" advantages with what they are audited against.
    rng = random.Random(f"milepost.random_advantages:{seed}")
    return [torch.tensor([rng.gauss(0.0, 1.0) for _ in ep.turns], dtype=torch.float32) for ep in episodes]
