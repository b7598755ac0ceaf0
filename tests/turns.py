"""A turn of an episode record for analysis tests: the fields the analysis scripts read, the rest neutral."""

from __future__ import annotations

from milepost.types import RewardTerms, Turn


def graded_turn(index: int, correct: int, *, requested: int = 1, observation: str = "", text: str = "") -> Turn:
    """Turn ``index`` with ``correct`` distance-reducing actions out of ``requested`` attempted, zero rewards."""
    return Turn(
        index=index,
        observation=observation,
        text=text,
        actions=[],
        reward=0.0,
        reward_terms=RewardTerms(outcome=0.0, format=0.0, valid=0.0, milestone=0.0),
        subgoals_completed=[],
        remaining_distance=None,
        state_key=f"s{index}",
        correct_actions=correct,
        n_requested=requested,
    )
