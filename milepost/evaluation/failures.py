"""The failure taxonomy of a failed episode (DESIGN: Contracts), first match wins:

``context_overflow`` and ``backend_error`` (the run, not the agent, failed), ``dead_end``,
``format_spiral`` (3+ consecutive format errors at the end), ``invalid_spiral`` (3+ consecutive illegal
actions at the end), ``stuck_midway`` (the episode ended while stuck, as ``milepost.planning.stuck``
defines it; the same definition the SGO agent acts on), ``budget_exhausted`` (still progressing when the
budget ran out).
"""

from __future__ import annotations

from milepost.agent.parsing import parse_answer
from milepost.planning.stuck import StuckDetector
from milepost.types import Episode, TerminationReason

FAILURE_KINDS = (
    "context_overflow",
    "backend_error",
    "dead_end",
    "format_spiral",
    "invalid_spiral",
    "stuck_midway",
    "budget_exhausted",
)
SPIRAL = 3


def _tail_run(flags: list[bool]) -> int:
    run = 0
    for flag in reversed(flags):
        if not flag:
            break
        run += 1
    return run


def ended_stuck(episode: Episode) -> bool:
    """Replay the episode through the stuck detector and report whether it was stuck at the end."""
    detector = StuckDetector(episode.meta.get("subgoal_steps", []))
    stuck = False
    for turn in episode.turns:
        action = parse_answer(turn.text).action or turn.text.strip()
        stuck = detector.update(turn.state_key, action, turn.new_subgoals)
    return stuck


def is_infra_failure(episode: Episode) -> bool:
    """Whether the run, not the agent, failed: the backend gave up (server down, timeouts after every retry).

    Such episodes say nothing about the policy: metrics leave them out and reports count them apart
    (``milepost eval --retry-failed`` plays them again). A context overflow stays an agent outcome: the
    agent's own prompt outgrew the model.
    """
    return episode.termination is TerminationReason.BACKEND_ERROR


def classify_failure(episode: Episode) -> str | None:
    """The failure kind of ``episode``, or None when it succeeded."""
    if episode.success:
        return None
    reason = episode.termination
    if reason is TerminationReason.CONTEXT_OVERFLOW:
        return "context_overflow"
    if reason is TerminationReason.BACKEND_ERROR:
        return "backend_error"
    if reason is TerminationReason.DEAD_END:
        return "dead_end"
    turns = episode.turns
    if _tail_run([t.reward_terms["format"] < 0 for t in turns]) >= SPIRAL:
        return "format_spiral"
    if _tail_run([t.reward_terms["valid"] < 0 for t in turns]) >= SPIRAL:
        return "invalid_spiral"
    if ended_stuck(episode):
        return "stuck_midway"
    return "budget_exhausted"
