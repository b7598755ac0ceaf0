"""'Stuck', one definition for evaluation and for the SGO agent's fallback (DESIGN: Contracts).

An agent is stuck when no new subgoal was completed within a window of W turns (W = twice the current
subgoal's estimated steps, at least 4), or when the same state or the same action occurs three times within
the window. The current subgoal is the first one, in plan order, not yet completed.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence


class StuckDetector:
    """Feed it one turn at a time; ``update`` says whether the agent is stuck after that turn.

    Args:
        subgoal_steps: estimated steps of each subgoal, in plan order (empty: only repetition counts).
        factor: W = factor * estimated steps of the current subgoal.
        min_window: the smallest W.
        repeats: occurrences of one state or action within the window that mean 'stuck'.
    """

    def __init__(self, subgoal_steps: Sequence[int], *, factor: int = 2, min_window: int = 4, repeats: int = 3) -> None:
        self.subgoal_steps = list(subgoal_steps)
        self.factor, self.min_window, self.repeats = factor, min_window, repeats
        self.completed: set[int] = set()
        self.since_milestone = 0
        self.recent: deque[tuple[str, str]] = deque()

    @property
    def current(self) -> int | None:
        """Index of the first subgoal not yet completed, or None."""
        for i in range(len(self.subgoal_steps)):
            if i not in self.completed:
                return i
        return None

    @property
    def window(self) -> int:
        cur = self.current
        steps = self.subgoal_steps[cur] if cur is not None else 0
        return max(self.min_window, self.factor * steps)

    def update(self, state_key: str, action: str, new_subgoals: Sequence[int] = ()) -> bool:
        """Record one turn (the state it was taken in, the action text, subgoals it completed)."""
        if new_subgoals:
            self.completed.update(new_subgoals)
            self.since_milestone = 0
        else:
            self.since_milestone += 1
        self.recent.append((state_key, action))
        window = self.window
        while len(self.recent) > window:
            self.recent.popleft()
        return self.is_stuck()

    def is_stuck(self) -> bool:
        if self.subgoal_steps and self.current is not None and self.since_milestone >= self.window:
            return True
        states = Counter(s for s, _ in self.recent)
        actions = Counter(a for _, a in self.recent)
        return max(states.values(), default=0) >= self.repeats or max(actions.values(), default=0) >= self.repeats

    def reset_progress(self) -> None:
        """Start a fresh window (after a replan or skip), keeping the completed subgoals."""
        self.since_milestone = 0
        self.recent.clear()
