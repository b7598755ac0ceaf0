"""Trajectory rewards r_t, by name (``rl.reward``), including the framework guide's milestone reward generator.

The guide (``seeds/000_e75aad4d8d41e361.txt``, "Dense Reward Generation") pays, per turn: a milestone bonus
proportional to the position of the milestone reached (later ones are worth more), an efficiency bonus for
reaching it quickly, a small step cost, and a penalty near the step budget. Two things differ from its code,
which is an illustration with bugs: the efficiency bonus counts the steps since the *previous* milestone (the
guide counts from the episode start, so every milestone after the first looks slow), and the step budget is
the environment's H_max rather than the trajectory's own length. A completion bonus on success is added, as
the issue asks; every constant is configurable.

``subgoal`` is the guide's milestone-conditioned objective: each turn's target is the tracker's current subgoal,
named in the prompt by the conditioned agent (``milepost.planning.conditioned``); r_t = 1 on the turn whose
target's predicate became true, else 0, and the segment returns end there (``segment_ends``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from milepost.registry import Registry
from milepost.types import Episode

TARGET_KEY = "target"
"""``Episode.meta`` key of the conditioned agent's per-turn record (``targets``, ``reached``)"""


@dataclass
class MilestoneRewardConfig:
    """Constants of the milestone reward generator (guide defaults; its guidance: milestone bonus ~10x the
    per-step signal, efficiency multiplier 2-5)."""

    milestone_bonus: float = 10.0
    """paid on reaching milestone k of K, times k / K"""
    efficiency_bonus: float = 2.0
    """times max(0, 1 - steps since the previous milestone / (2 x the milestone's estimated steps))"""
    step_cost: float = 0.01
    """subtracted every turn"""
    timeout_penalty: float = 0.5
    """subtracted on every turn past ``timeout_frac`` of the step budget"""
    timeout_frac: float = 0.9
    completion_bonus: float = 10.0
    """paid on the turn that solves the task"""

    def __post_init__(self) -> None:
        if min(self.milestone_bonus, self.efficiency_bonus, self.step_cost, self.timeout_penalty) < 0:
            raise ValueError("rl.milestone_reward: bonuses, step_cost and timeout_penalty must be >= 0")
        if not 0 < self.timeout_frac <= 1:
            raise ValueError(f"rl.milestone_reward.timeout_frac: must be in (0, 1], got {self.timeout_frac}")
        if self.completion_bonus < 0:
            raise ValueError("rl.milestone_reward.completion_bonus: must be >= 0")


def milestone_rewards(ep: Episode, max_steps: int, cfg: MilestoneRewardConfig | None = None) -> torch.Tensor:
    """The milestone reward generator's r_t for every turn of ``ep``, shape ``(T,)``."""
    cfg = cfg or MilestoneRewardConfig()
    k_total = max(int(ep.meta.get("num_subgoals", 0)), 1)
    estimated = list(ep.meta.get("subgoal_steps", []))
    out = torch.zeros(len(ep.turns))
    last_milestone = 0  # turn count at the previous milestone (0 = episode start)
    for t, turn in enumerate(ep.turns):
        step = t + 1
        reward = -cfg.step_cost
        if turn.new_subgoals:
            reward += cfg.milestone_bonus * len(turn.subgoals_completed) / k_total
            budget = 2 * sum(estimated[i] for i in turn.new_subgoals if i < len(estimated))
            taken = step - last_milestone
            if budget > 0:
                reward += cfg.efficiency_bonus * max(0.0, 1.0 - taken / budget)
            last_milestone = step
        if step > cfg.timeout_frac * max_steps:
            reward -= cfg.timeout_penalty
        if ep.success and step == len(ep.turns):  # not the web shop's partial credit for a wrong purchase
            reward += cfg.completion_bonus
        out[t] = reward
    return out


@dataclass
class RewardContext:
    """What a trajectory reward may read besides the episode."""

    max_steps: int
    milestone_weight: float = 1.0
    milestone: MilestoneRewardConfig = field(default_factory=MilestoneRewardConfig)


TrajectoryReward = Callable[[Episode, RewardContext], torch.Tensor]
TRAJECTORY_REWARDS: Registry[TrajectoryReward] = Registry("trajectory reward")


@TRAJECTORY_REWARDS.decorator("outcome")
def outcome_reward(ep: Episode, ctx: RewardContext) -> torch.Tensor:
    """The environment's outcome term: 1 on the turn that solves the task, else 0, except where the environment
    pays partial credit for a wrong ending (the web shop: WebShop's graded reward of a wrong purchase)."""
    return torch.tensor([t.reward_terms["outcome"] for t in ep.turns], dtype=torch.float32)


@TRAJECTORY_REWARDS.decorator("success")
def success_reward(ep: Episode, ctx: RewardContext) -> torch.Tensor:
    """The success bit alone: 1 on the last turn of a solved episode, else 0, whatever partial credit the
    environment pays (the SGO+MiRA paper's silent outcome reward on WebArena-Lite). Solving ends an episode, so
    the solving turn is the last one."""
    out = torch.zeros(len(ep.turns))
    if ep.turns and ep.success:
        out[-1] = 1.0
    return out


@TRAJECTORY_REWARDS.decorator("milestone")
def outcome_and_milestones(ep: Episode, ctx: RewardContext) -> torch.Tensor:
    """Outcome plus ``milestone_weight`` per subgoal completed on the turn (subgoal decomposition's r_t)."""
    return torch.tensor(
        [t.reward_terms["outcome"] + ctx.milestone_weight * t.reward_terms["milestone"] for t in ep.turns],
        dtype=torch.float32,
    )


@TRAJECTORY_REWARDS.decorator("guide")
def guide_reward(ep: Episode, ctx: RewardContext) -> torch.Tensor:
    """The framework guide's milestone reward generator (see module docstring)."""
    return milestone_rewards(ep, ctx.max_steps, ctx.milestone)


def target_record(ep: Episode) -> dict[str, Any]:
    """The conditioned agent's record of ``ep`` (``milepost.planning.conditioned``), checked against its turns.

    Raises:
        ValueError: the episode was not played by the conditioned agent, or its record does not fit its turns.
    """
    record = ep.meta.get(TARGET_KEY)
    if not isinstance(record, dict) or not isinstance(record.get("reached"), list):
        raise ValueError(f"episode {ep.task_id}: no target record; rl.reward subgoal needs agent.agent_kind subgoal")
    if len(record["reached"]) != len(ep.turns):
        raise ValueError(f"episode {ep.task_id}: target record of {len(record['reached'])} turns, not {len(ep.turns)}")
    return record


@TRAJECTORY_REWARDS.decorator("subgoal")
def subgoal_reward(ep: Episode, ctx: RewardContext) -> torch.Tensor:
    """Milestone-conditioned r_t: 1 on the turn that reached the target subgoal its prompt named, else 0.

    Solving reaches every subgoal, the target included, so a solving turn always pays 1."""
    return torch.tensor([float(bool(r)) for r in target_record(ep)["reached"]], dtype=torch.float32)


def segment_ends(ep: Episode, reward: str, decomposition: bool) -> torch.Tensor:
    """``(T,)`` bool: the turns after which the segment return restarts (``returns.discounted_returns`` cuts).

    ``reward`` subgoal: the turns that reached their target; subgoal ``decomposition``: the turns that completed
    any subgoal; otherwise none (one return over the whole episode).
    """
    if reward == "subgoal":
        return torch.tensor([bool(r) for r in target_record(ep)["reached"]], dtype=torch.bool)
    return torch.tensor([decomposition and bool(t.new_subgoals) for t in ep.turns], dtype=torch.bool)
