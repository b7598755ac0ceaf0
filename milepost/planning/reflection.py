"""Per-step reflection: the checklist in the prompt, the three questions, and the agent's PROGRESS line.

Each turn the SGO prompt carries the plan as a checklist (done / current / next) and asks the method's three
questions: which milestones are achieved, is the current one done, what is next. The agent answers them in
one line before its action, in plan numbers (1-based, as the checklist shows them)::

    PROGRESS: done=1,2; current=3; next=4

A finished current subgoal goes into ``done`` and the next one becomes ``current``. The line is parsed
leniently (brackets, ``none``, any order of the fields) and never raises; the claims it makes are checked by
the validator before they can move the tracker.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from milepost.planning.tracker import MilestoneTracker

QUESTIONS = (
    "Before your action, answer in PROGRESS: which subgoals are done (include the current one if it "
    "is finished), which is current, which is next."
)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_PROGRESS = re.compile(r"PROGRESS\s*:(.*?)(?=\bREASON\s*:|\bACTION\s*:|$)", re.DOTALL | re.IGNORECASE)
_DONE = re.compile(r"\bdone\s*[=:]\s*([\[\]\d,\s]*)", re.IGNORECASE)
_CURRENT = re.compile(r"\bcurrent\s*[=:]\s*(\d{1,4})", re.IGNORECASE)
_NEXT = re.compile(r"\bnext\s*[=:]\s*(\d{1,4})", re.IGNORECASE)
MAX_CLAIMS = 64  # numbers read from one done list at most (an answer cannot make the validator loop long)


@dataclass(frozen=True)
class ProgressClaim:
    """What one answer says about progress, in 1-based plan numbers (``present``: it had a PROGRESS line)."""

    present: bool
    done: list[int] = field(default_factory=list)
    current: int | None = None
    next: int | None = None


def parse_progress(text: str) -> ProgressClaim:
    """The PROGRESS line of an answer (outside any think block); an absent or garbled line claims nothing."""
    if not isinstance(text, str):
        return ProgressClaim(False)
    m = _PROGRESS.search(_THINK.sub(" ", text))
    if m is None:
        return ProgressClaim(False)
    body = m[1][:2_000]
    done_m = _DONE.search(body)
    done: list[int] = []
    if done_m is not None:
        for number in re.findall(r"\d{1,4}", done_m[1])[:MAX_CLAIMS]:
            if int(number) not in done:
                done.append(int(number))
    current = _CURRENT.search(body)
    nxt = _NEXT.search(body)
    return ProgressClaim(True, done, int(current[1]) if current else None, int(nxt[1]) if nxt else None)


def format_progress(done: Collection[int], current: int | None, nxt: int | None) -> str:
    """The PROGRESS line for 0-based plan positions."""

    def one(i: int | None) -> str:
        return "none" if i is None else str(i + 1)

    listed = ",".join(str(i + 1) for i in sorted(done)) or "none"
    return f"PROGRESS: done={listed}; current={one(current)}; next={one(nxt)}"


def true_progress(tracker: MilestoneTracker, state: Any, env_completed: Collection[int]) -> str:
    """The PROGRESS line a perfect reflection writes now: items the tracker has, plus items whose predicate
    holds (or whose environment subgoal is latched) that it has not recorded yet. Judge-only items count only
    once the tracker has them (nothing else can know)."""
    done = set(tracker.done())
    for i, (goal, ref) in enumerate(zip(tracker.plan.subgoals, tracker.plan.refs)):
        if i not in done and (
            (ref is not None and ref in env_completed) or (goal.predicate is not None and goal.predicate(state))
        ):
            done.add(i)
    open_items = [i for i in range(len(tracker.z)) if i not in done and i not in tracker.skipped]
    current = open_items[0] if open_items else None
    nxt = open_items[1] if len(open_items) > 1 else None
    return format_progress(done, current, nxt)


def render_checklist(tracker: MilestoneTracker, feedback: str | None = None) -> str:
    """The plan as the prompt shows it: one numbered line per item with its status, then the questions."""
    current = tracker.current
    nxt = tracker.next_open(current) if current is not None else None
    lines = ["Plan:"]
    for i, goal in enumerate(tracker.plan.subgoals):
        if tracker.z[i]:
            status = "done"
        elif i in tracker.skipped:
            status = "skipped"
        elif i == current:
            status = "current"
        elif i == nxt:
            status = "next"
        else:
            status = " "
        extra = "" if goal.required else " (optional)"
        lines.append(f"{i + 1}. [{status}] {goal.description}{extra}")
    lines.append(QUESTIONS)
    if feedback:
        lines.append(f"Last check: {feedback}")
    return "\n".join(lines)
