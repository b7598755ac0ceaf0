"""Progress judging and self-correction (SGO paper: "the agent evaluates its progress with an LLM-as-judge and
replans at once when it has drifted from the goal").

Every N turns (``SGOConfig.judge_every``) a progress judge reads the goal, the plan's checklist, the last N
answers and the current state and says ON-TRACK or OFF-TRACK; OFF-TRACK triggers a replan from the current
state (like stuck does, within the same replan budget). Each verdict is recorded beside the environment's own
progress over the same window (:func:`environment_progress`: did the remaining distance to the goal shrink?),
so a run reports how often the judge agrees with the environment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from milepost.backends.base import Backend, GenerationRequest, SamplingParams

_TRACK = re.compile(r"\b(ON|OFF)[-_ ]?TRACK\b", re.IGNORECASE)


class ProgressJudge(Protocol):
    """Says whether an agent is on track: True, False, or None (no usable answer)."""

    name: str

    def on_track(
        self, goal: str, checklist: str, history: Sequence[str], state_text: str, *, seed: int = 0
    ) -> bool | None: ...


def progress_messages(goal: str, checklist: str, history: Sequence[str], state_text: str) -> list[dict[str, str]]:
    """The judge's prompt: the task, the plan, the agent's recent actions and the current state."""
    recent = "\n".join(f"- {h}" for h in history) or "- (none)"
    return [
        {
            "role": "system",
            "content": "You watch an agent solve a puzzle and judge its progress. Answer ON-TRACK or OFF-TRACK only.",
        },
        {
            "role": "user",
            "content": (
                f"Task: {goal}\n\nPlan:\n{checklist}\n\nThe agent's last actions:\n{recent}\n\n"
                f"Current state:\n{state_text}\n\n"
                "Is the agent making progress toward the goal along its plan? Answer ON-TRACK or OFF-TRACK."
            ),
        },
    ]


def parse_track(text: str) -> bool | None:
    """The first ON-TRACK / OFF-TRACK of an answer (within its first 200 characters), None when there is none."""
    m = _TRACK.search(text[:200]) if isinstance(text, str) else None
    return None if m is None else m[1].upper() == "ON"


class LLMProgressJudge:
    """A progress judge over any backend (greedy, a few tokens); an unreachable backend abstains."""

    def __init__(self, backend: Backend, *, max_new_tokens: int = 8) -> None:
        self.backend = backend
        self.max_new_tokens = max_new_tokens
        self.name = f"progress-judge:{backend.name}"

    def on_track(
        self, goal: str, checklist: str, history: Sequence[str], state_text: str, *, seed: int = 0
    ) -> bool | None:
        params = SamplingParams(temperature=0.0, max_new_tokens=self.max_new_tokens, seed=seed, logprobs=False)
        request = GenerationRequest(messages=progress_messages(goal, checklist, history, state_text), params=params)
        try:
            completion = self.backend.generate([request])[0]
        except Exception:  # an unreachable judge abstains; the episode goes on
            return None
        if completion.finish_reason in ("error", "context_overflow"):
            return None
        return parse_track(completion.text)


def environment_progress(before: int | None, now: int | None, *, solved: bool, dead: bool) -> bool | None:
    """The environment's own verdict over a window: on track when the remaining distance to the goal shrank
    (or the puzzle is solved), off track in a dead end; None when a distance is unknown."""
    if solved:
        return True
    if dead:
        return False
    if before is None or now is None:
        return None
    return now < before
