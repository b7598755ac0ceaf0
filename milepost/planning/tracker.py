"""The milestone tracker: the agent-side view of progress over a plan.

It holds the binary progress vector z (one bit per plan item, set in whatever order the environment allows
and never cleared: subgoals latch), the current subgoal (the first item in plan order that is neither done
nor skipped), the steps since the last milestone, and the episode's milestone events. The environment's own
latched ``completed`` list and its milestone reward are separate and unchanged; the tracker only reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from milepost.planning.plan import Plan


class MilestoneTracker:
    """Progress over ``plan``; every change is logged in ``events`` (dicts, stored in the episode record).

    Event kinds: ``plan`` (the initial plan), ``milestone`` (an item done; ``source`` env or claim),
    ``claim_rejected``, ``claim_unverifiable``, ``stuck``, ``replan``, ``skip``, ``fallback_exhausted``.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.z: list[bool] = [False] * len(plan)
        self.skipped: set[int] = set()
        self.steps_since_milestone = 0
        self.events: list[dict[str, Any]] = []
        self.log(0, "plan", source=plan.source, size=len(plan), notes=list(plan.notes))

    # -- queries -------------------------------------------------------------------------------------------

    @property
    def current(self) -> int | None:
        """The first plan item neither done nor skipped, or None when the plan is worked through."""
        return self.next_open(-1)

    def next_open(self, after: int) -> int | None:
        """The first item after position ``after`` that is neither done nor skipped."""
        for i in range(after + 1, len(self.z)):
            if not self.z[i] and i not in self.skipped:
                return i
        return None

    def done(self) -> list[int]:
        return [i for i, bit in enumerate(self.z) if bit]

    def vector(self) -> list[int]:
        """z as 0/1 integers."""
        return [int(bit) for bit in self.z]

    # -- updates -------------------------------------------------------------------------------------------

    def log(self, turn: int, kind: str, item: int | None = None, **extra: Any) -> None:
        event: dict[str, Any] = {"turn": turn, "kind": kind}
        if item is not None:
            event["item"] = item
            event["env_subgoal"] = self.plan.refs[item]
        event.update(extra)
        self.events.append(event)

    def mark(self, item: int, turn: int, source: str) -> bool:
        """Set bit ``item`` (a milestone); False when it was already set. Bits are never cleared."""
        if self.z[item]:
            return False
        self.z[item] = True
        self.skipped.discard(item)
        self.steps_since_milestone = 0
        self.log(turn, "milestone", item, source=source)
        return True

    def observe(self, state: Any, env_completed: Collection[int], turn: int) -> list[int]:
        """Mark every open item whose environment subgoal is latched or whose predicate holds in ``state``."""
        new = []
        for i, (goal, ref) in enumerate(zip(self.plan.subgoals, self.plan.refs)):
            if self.z[i]:
                continue
            latched = ref is not None and ref in env_completed
            if latched or (goal.predicate is not None and goal.predicate(state)):
                self.mark(i, turn, "env")
                new.append(i)
        return new

    def tick(self, milestones: int) -> None:
        """End of a turn: count it toward the steps since the last milestone unless it reached one."""
        if not milestones:
            self.steps_since_milestone += 1

    def skip(self, item: int, turn: int, reason: str) -> None:
        """Give up on a not-required item (it stays 0 in z, and is no longer current)."""
        self.skipped.add(item)
        self.steps_since_milestone = 0
        self.log(turn, "skip", item, reason=reason)

    def replace_plan(self, plan: Plan, turn: int, reason: str) -> None:
        """Switch to ``plan`` (made from the current state), keeping the done items first, still done."""
        kept = [i for i in self.done()]
        items, refs = [], []
        for pos, i in enumerate(kept):
            items.append(dataclasses.replace(self.plan.subgoals[i], index=pos, preconditions=[]))
            refs.append(self.plan.refs[i])
        shift = len(kept)
        for goal, ref in zip(plan.subgoals, plan.refs):
            items.append(
                dataclasses.replace(
                    goal, index=goal.index + shift, preconditions=[p + shift for p in goal.preconditions]
                )
            )
            refs.append(ref)
        self.plan = Plan(items, refs, plan.source, list(plan.notes))
        self.z = [True] * shift + [False] * len(plan)
        self.skipped = set()
        self.steps_since_milestone = 0
        self.log(turn, "replan", reason=reason, source=plan.source, size=len(plan), notes=list(plan.notes))
