"""The milestone-conditioned agent (framework guide 000, "Milestone-Conditioned Policy Training").

The guide trains a policy to reach a *given* milestone: its input is the state and the target milestone. Here
the target is the milestone tracker's current subgoal of the programmatic plan (the environment's subgoals in
the order its solver reaches them, each with its predicate). Before every turn the prompt names that one
target; after every turn the tracker reads the predicates, and the episode records which plan item was the
turn's target and whether that turn reached it (its predicate became true). ``rl.reward: subgoal``
(``milepost.rewards.milestone``) pays exactly those reaches and ends the segment returns there, so each
segment is a short episode of its own: reach this subgoal.

A subgoal reached while another one was the target is recorded (the tracker latches it and never makes it the
target again) but not paid: the policy is rewarded for reaching what it was asked to reach. The episode record
is ``Episode.meta["target"]``: ``plan`` (descriptions, plan order), ``refs`` (environment subgoal of each item),
``targets`` (per turn, the target's plan position or None) and ``reached`` (per turn, bool).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import LiveEpisode
from milepost.planning.planner import Planner, ProgrammaticPlanner
from milepost.planning.tracker import MilestoneTracker
from milepost.rewards.milestone import TARGET_KEY
from milepost.types import Turn


def target_text(tracker: MilestoneTracker) -> str:
    """The prompt block that names the target: the tracker's current subgoal."""
    current = tracker.current
    if current is None:  # every item done or skipped, task not over: the goal itself is what is left
        return "Target subgoal: finish the task."
    goal = tracker.plan.subgoals[current]
    return f"Target subgoal: {goal.description}."


@dataclass
class TargetState:
    """One episode's conditioned state: the tracker, the target the current prompt names, the record so far."""

    tracker: MilestoneTracker
    prompt_target: int | None = None
    targets: list[int | None] = field(default_factory=list)
    reached: list[bool] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        plan = self.tracker.plan
        return {
            "plan": [g.description for g in plan.subgoals],
            "refs": list(plan.refs),
            "targets": list(self.targets),
            "reached": list(self.reached),
        }


class SubgoalConditionedAgent:
    """The ``subgoal`` agent kind (an ``milepost.agent.loop.Agent``): the prompt carries one target subgoal.

    Args:
        planner: makes the plan whose items become the targets, in order (default: programmatic; its items all
            carry predicates, so every target can be checked).
    """

    name = "subgoal"

    def __init__(self, planner: Planner | None = None) -> None:
        self.planner = planner or ProgrammaticPlanner()

    def start(self, ep: LiveEpisode) -> None:
        env = ep.env
        tracker = MilestoneTracker(self.planner.plan(env, seed=ep.seed))
        tracker.observe(env.state, env.completed, 0)
        ep.agent_state = TargetState(tracker)

    def before_turn(self, ep: LiveEpisode) -> None:
        state: TargetState = ep.agent_state
        state.prompt_target = state.tracker.current
        ep.plan = target_text(state.tracker)

    def after_turn(self, ep: LiveEpisode, turn: Turn, info: dict[str, Any]) -> None:
        state: TargetState = ep.agent_state
        new = state.tracker.observe(ep.env.state, ep.env.completed, turn.index)
        state.tracker.tick(len(new))
        state.targets.append(state.prompt_target)
        state.reached.append(state.prompt_target is not None and state.prompt_target in new)

    def finish(self, ep: LiveEpisode) -> dict[str, Any]:
        state: TargetState | None = ep.agent_state
        return {} if state is None else {TARGET_KEY: state.to_dict()}


def corpus_texts(envs: Iterable[Any]) -> list[str]:
    """Target prompts of freshly reset environments (every plan item once), for fitting a tiny tokenizer."""
    out = []
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        tracker = MilestoneTracker(ProgrammaticPlanner().plan(env))
        for i in range(len(tracker.z)):
            out.append(target_text(tracker))
            tracker.mark(i, i + 1, "env")
        out.append(target_text(tracker))
    return out
