"""Fallback when the agent is stuck: skip a subgoal marked not required, or replan from the current state.

'Stuck' is ``milepost.planning.stuck.StuckDetector``, the one definition the evaluation's failure taxonomy
uses too, fed with the plan's items: no new milestone within W turns (twice the current item's estimated
steps, at least 4), or the same state or action three times within the window. A stuck agent whose current
item is optional skips it; otherwise it replans while replans are left; both are bounded and logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from milepost.planning.stuck import StuckDetector
from milepost.planning.tracker import MilestoneTracker


@dataclass(frozen=True)
class FallbackPolicy:
    """Bounds of the fallback."""

    max_replans: int = 2
    """replans per episode at most"""
    max_skips: int = 4
    """skips per episode at most"""

    def __post_init__(self) -> None:
        if self.max_replans < 0 or self.max_skips < 0:
            raise ValueError("max_replans and max_skips must be >= 0")


@dataclass(frozen=True)
class Decision:
    """What to do about a stuck agent: ``skip`` (``item``), ``replan``, or ``none`` (bounds reached)."""

    action: str
    reason: str
    item: int | None = None


def detector_for(tracker: MilestoneTracker) -> StuckDetector:
    """A stuck detector over the tracker's plan that already counts its done and skipped items."""
    detector = StuckDetector([g.estimated_steps for g in tracker.plan.subgoals])
    detector.completed.update(tracker.done())
    detector.completed.update(tracker.skipped)
    return detector


def stuck_reason(detector: StuckDetector) -> str:
    """Which half of the definition fired."""
    window = detector.window
    if detector.current is not None and detector.subgoal_steps and detector.since_milestone >= window:
        return f"no new milestone in {detector.since_milestone} turns (W = {detector.window})"
    return f"the same state or action {detector.repeats} times in the last {len(detector.recent)} turns"


def decide(policy: FallbackPolicy, tracker: MilestoneTracker, replans: int, skips: int, reason: str) -> Decision:
    """Skip the current item when it is not required, else replan, within the bounds."""
    current = tracker.current
    if current is not None and not tracker.plan.subgoals[current].required and skips < policy.max_skips:
        return Decision("skip", f"stuck ({reason}); item {current + 1} is optional", current)
    if replans < policy.max_replans:
        return Decision("replan", f"stuck ({reason})")
    return Decision("none", f"stuck ({reason}); no replan or skip left")
