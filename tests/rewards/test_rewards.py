"""Progress labels, potential-based shaping and the milestone reward generator, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from milepost.rewards.milestone import TRAJECTORY_REWARDS, MilestoneRewardConfig, RewardContext, milestone_rewards
from milepost.rewards.shaping import progress_labels, shaped_rewards
from milepost.types import Episode, TerminationReason, Turn


def episode(completions: list[list[int]], k: int, initial: list[int], success: bool, steps: int = 2) -> Episode:
    """An episode whose turn t completes the subgoals ``completions[t]``."""
    done = list(initial)
    turns = []
    for t, new in enumerate(completions):
        done = done + new
        last = success and t == len(completions) - 1
        turns.append(
            Turn(
                index=t,
                observation="",
                text="",
                actions=[],
                reward=0.0,
                reward_terms={"outcome": 1.0 if last else 0.0, "format": 0.0, "valid": 0.0, "milestone": len(new)},
                subgoals_completed=list(done),
                remaining_distance=None,
                new_subgoals=list(new),
            )
        )
    return Episode(
        task_id="t",
        policy="p",
        sample=0,
        seed=0,
        termination=TerminationReason.SOLVED if success else TerminationReason.BUDGET_EXHAUSTED,
        success=success,
        goal_distance=len(completions),
        steps=len(completions),
        turns=turns,
        meta={"num_subgoals": k, "subgoals_completed": len(done), "subgoal_steps": [steps] * k},
    )


def test_progress_labels_interpolate_between_completions() -> None:
    # K = 4, subgoal 0 holds at reset; turn 1 completes 2, turn 4 completes 1 and 3 (solved).
    ep = episode([[], [2], [], [], [1, 3]], k=4, initial=[0], success=True)
    # counts per state s_0..s_5: 1 1 2 2 2 4 -> anchors s_0 (0.25), s_2 (0.5), s_5 (1.0)
    expected = [0.25, 0.375, 0.5, 0.5 + 0.5 / 3, 0.5 + 1.0 / 3, 1.0]
    assert progress_labels(ep).tolist() == pytest.approx(expected)


def test_progress_labels_stay_flat_after_the_last_completion() -> None:
    ep = episode([[0], [], []], k=4, initial=[], success=False)
    assert progress_labels(ep).tolist() == pytest.approx([0.0, 0.25, 0.25, 0.25])
    no_goals = episode([[], []], k=0, initial=[], success=True)
    assert progress_labels(no_goals).tolist() == [0.0, 0.0, 1.0]


def test_shaped_rewards_by_hand() -> None:
    r = torch.tensor([0.0, 0.0, 1.0])
    p = torch.tensor([0.2, 0.5, 0.6, 1.0])
    assert shaped_rewards(r, p, 0.9).tolist() == pytest.approx([0.25, 0.04, 1.3])
    assert shaped_rewards(r, p, 0.9, coef=0.0).tolist() == pytest.approx([0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="T \\+ 1"):
        shaped_rewards(r, p[:3], 0.9)


def test_shaping_telescopes_to_the_potential_difference() -> None:
    # With gamma = 1, sum_t r~_t = sum_t r_t + P(s_T) - P(s_0) for any potential.
    gen = torch.Generator().manual_seed(0)
    r, p = torch.rand(7, generator=gen), torch.rand(8, generator=gen)
    assert float(shaped_rewards(r, p, 1.0).sum()) == pytest.approx(float(r.sum() + p[-1] - p[0]), abs=1e-5)


def test_milestone_reward_generator_by_hand() -> None:
    # K = 4, each subgoal estimated at 2 steps (budget 4 between milestones), H_max = 3, timeout past 2.7 steps.
    ep = episode([[0], [], [1]], k=4, initial=[], success=False)
    r = milestone_rewards(ep, max_steps=3)
    # step 1: 10 * 1/4 + 2 * (1 - 1/4) - 0.01; step 2: -0.01;
    # step 3: 10 * 2/4 + 2 * (1 - (3 - 1)/4) - 0.01 - 0.5 (past 90% of the budget)
    assert r.tolist() == pytest.approx([3.99, -0.01, 5.49])


def test_milestone_reward_efficiency_counts_from_the_previous_milestone() -> None:
    ep = episode([[], [], [], [0], [1]], k=2, initial=[], success=True, steps=4)
    cfg = MilestoneRewardConfig(step_cost=0.0, timeout_penalty=0.0, completion_bonus=7.0)
    r = milestone_rewards(ep, max_steps=100, cfg=cfg)
    # milestone 1 after 4 steps of a budget of 8; milestone 2 one step later (not 5 from the start)
    assert r.tolist() == pytest.approx([0, 0, 0, 5.0 + 2 * (1 - 4 / 8), 10.0 + 2 * (1 - 1 / 8) + 7.0])


def test_registered_trajectory_rewards() -> None:
    ep = episode([[0], [], [1]], k=2, initial=[], success=True)
    ctx = RewardContext(max_steps=10, milestone_weight=0.5)
    assert TRAJECTORY_REWARDS.get("outcome")(ep, ctx).tolist() == [0.0, 0.0, 1.0]
    assert TRAJECTORY_REWARDS.get("milestone")(ep, ctx).tolist() == [0.5, 0.0, 1.5]
    assert TRAJECTORY_REWARDS.get("guide")(ep, ctx).shape == (3,)
    with pytest.raises(Exception, match="unknown trajectory reward"):
        TRAJECTORY_REWARDS.get("dense")
