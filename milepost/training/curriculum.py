"""Failure-driven curriculum (MiRA): each phase's failures decide the next phase's task mix.

Every training task starts with weight 1. At the end of a phase, a task that failed in a share f of its
episodes gains ``fail_boost * f``; every task at a level where episodes failed, and at the next level up (the
tasks "like" the failures, one step further out), gains ``similar_boost * f_level``. A value critic can then
filter the mix: tasks it rates hopeless (V(s_0, g) < low) or trivial (V > high) are left out while enough
others remain. Tasks are drawn without replacement in proportion to their weights.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from milepost.types import Task


class Outcome(Protocol):
    """What the curriculum reads of an episode (an ``Episode`` or a stored ``EpisodeOutcome``)."""

    @property
    def task_id(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def success(self) -> bool: ...


class EpisodeOutcome(NamedTuple):
    task_id: str
    level: str
    success: bool


class FailureCurriculum:
    def __init__(self, pool: Sequence[Task], fail_boost: float = 2.0, similar_boost: float = 1.0) -> None:
        if not pool:
            raise ValueError("curriculum: the task pool is empty")
        self.pool = list(pool)
        self.fail_boost = fail_boost
        self.similar_boost = similar_boost
        self.weights = {t.task_id: 1.0 for t in self.pool}
        self.excluded: set[str] = set()
        # Levels from the shortest horizon to the longest.
        distance: dict[str, list[int]] = defaultdict(list)
        for t in self.pool:
            distance[t.level].append(t.goal_distance)
        self.levels = sorted(distance, key=lambda lv: (sum(distance[lv]) / len(distance[lv]), lv))

    def update(self, episodes: Sequence[Outcome]) -> dict[str, float]:
        """Re-weight from one phase's episodes; returns the failure rate per level."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        by_level: dict[str, list[bool]] = defaultdict(list)
        for ep in episodes:
            by_task[ep.task_id].append(ep.success)
            by_level[ep.level].append(ep.success)
        level_fail = {lv: 1.0 - sum(s) / len(s) for lv, s in by_level.items()}
        boost: dict[str, float] = defaultdict(float)
        for lv, f in level_fail.items():
            if lv in self.levels:
                i = self.levels.index(lv)
                for near in self.levels[i : i + 2]:
                    boost[near] += self.similar_boost * f
        for t in self.pool:
            results = by_task.get(t.task_id)
            task_fail = 1.0 - sum(results) / len(results) if results else 0.0
            self.weights[t.task_id] = 1.0 + self.fail_boost * task_fail + boost[t.level]
        return level_fail

    def filter(self, v0: dict[str, float], low: float, high: float, min_keep: int) -> int:
        """Leave out tasks whose rated success V(s_0, g) is outside [low, high], unless fewer than
        ``min_keep`` would remain (then nothing is left out). Tasks without a rating stay. Returns how many
        were left out."""
        out = {tid for tid, v in v0.items() if v < low or v > high}
        self.excluded = out if len(self.pool) - len(out) >= min_keep else set()
        return len(self.excluded)

    def sample(self, rng: random.Random, n: int) -> list[Task]:
        """``n`` distinct tasks drawn in proportion to their weights (Efraimidis-Spirakis keys)."""
        candidates = [t for t in self.pool if t.task_id not in self.excluded]
        keyed = sorted(
            candidates, key=lambda t: rng.random() ** (1.0 / max(self.weights[t.task_id], 1e-9)), reverse=True
        )
        return keyed[: min(n, len(keyed))]

    def state_dict(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "excluded": sorted(self.excluded)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights = dict(state["weights"])
        self.excluded = set(state["excluded"])
