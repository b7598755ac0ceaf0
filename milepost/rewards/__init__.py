"""Reward terms built on top of the environments' own (outcome, format, validity, milestone).

``shaping``: progress labels and potential-based shaping (MiRA). ``milestone``: the milestone reward generator
of the subgoal-driven framework guide. ``TRAJECTORY_REWARDS`` names the per-turn trajectory rewards r_t that
the trainer can optimise (``rl.reward``).
"""

from milepost.rewards.milestone import TRAJECTORY_REWARDS, MilestoneRewardConfig, milestone_rewards
from milepost.rewards.shaping import progress_labels, shaped_rewards

__all__ = [
    "TRAJECTORY_REWARDS",
    "MilestoneRewardConfig",
    "milestone_rewards",
    "progress_labels",
    "shaped_rewards",
]
