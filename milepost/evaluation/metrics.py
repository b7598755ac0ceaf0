"""Evaluation metrics by goal distance: pass@k, avg@k, confidence intervals, step accuracy, horizon.

Pure functions over episode records, so reports can be recomputed from ``episodes.jsonl`` at any time.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from milepost.evaluation.failures import classify_failure, is_infra_failure
from milepost.types import Episode


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` successes: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    Raises:
        ValueError: if k > n or the counts are inconsistent.
    """
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    # Product form avoids huge binomials: prod_{i=n-c+1}^{n} (1 - k / i).
    prob_fail = 1.0
    for i in range(n - c + 1, n + 1):
        prob_fail *= 1.0 - k / i
    return 1.0 - prob_fail


def wilson_interval(successes: float, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (0, 1 when there are no trials)."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (or ``statistic``) of per-task ``values``, resampling tasks."""
    if not values:
        return 0.0, 1.0
    stat = statistic or (lambda xs: sum(xs) / len(xs))
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    lo = draws[int((1 - level) / 2 * resamples)]
    hi = draws[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return lo, hi


@dataclass
class Estimate:
    value: float
    lo: float
    hi: float


@dataclass
class LevelMetrics:
    """Everything reported for one level (a column of the paper-style table)."""

    level: str
    tasks: int  # tasks with at least one valid sample
    samples: int  # valid samples per task (n), the most any task has
    mean_goal_distance: float
    pass_at: dict[str, Estimate]  # "1", "4", ...
    avg: Estimate  # mean success over all samples (avg@n), CI by bootstrap over tasks
    step_accuracy: float | None
    effective_horizon: float | None  # mean turns taken on successes
    goal_distance_on_success: float | None
    oracle_ceiling: float | None  # share of tasks whose optimal turns fit the budget
    subgoal_fraction: float  # mean share of subgoals completed
    terminations: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    infra_failures: int = 0  # episodes the backend failed (see failures.is_infra_failure), left out of the above
    tasks_left_out: int = 0  # tasks with no valid sample at all, left out of every metric
    pass_left_out: dict[str, int] = field(default_factory=dict)  # k -> tasks with fewer than k valid samples

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_counts(episode: Episode) -> tuple[int, int]:
    """(correct actions, attempted actions); an unparsable answer counts as one failed attempt."""
    correct = attempted = 0
    for turn in episode.turns:
        correct += turn.correct_actions
        attempted += max(turn.n_requested, 1)
    return correct, attempted


def level_metrics(
    level: str,
    episodes: Sequence[Episode],
    ks: Sequence[int],
    *,
    ceiling: Callable[[str], bool] | None = None,
    seed: int = 0,
) -> LevelMetrics:
    """Metrics of one level's episodes; ``ceiling(task_id)`` says whether the oracle fits the budget.

    Infrastructure failures (the backend gave up) are left out of every metric and counted apart: pass@k
    then uses each task's remaining n (tasks with fewer than k valid samples are left out of pass@k and
    counted in ``pass_left_out``), and a task with no valid sample is left out and counted.
    """
    infra = [ep for ep in episodes if is_infra_failure(ep)]
    episodes = [ep for ep in episodes if not is_infra_failure(ep)]
    by_task: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        by_task[ep.task_id].append(ep)
    counts = {tid: (len(eps), sum(e.success for e in eps)) for tid, eps in by_task.items()}
    pass_at: dict[str, Estimate] = {}
    pass_left_out: dict[str, int] = {}
    for k in ks:
        per_task = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
        if not per_task:
            continue
        if len(per_task) < len(counts):
            pass_left_out[str(k)] = len(counts) - len(per_task)
        lo, hi = bootstrap_interval(per_task, seed=seed)
        pass_at[str(k)] = Estimate(sum(per_task) / len(per_task), lo, hi)
    rates = [c / n for n, c in counts.values()]
    avg_value = sum(rates) / len(rates) if rates else 0.0
    avg_lo, avg_hi = bootstrap_interval(rates, seed=seed)
    correct = attempted = 0
    for ep in episodes:
        c, a = step_counts(ep)
        correct += c
        attempted += a
    wins = [ep for ep in episodes if ep.success]
    terminations: dict[str, int] = defaultdict(int)
    failures: dict[str, int] = defaultdict(int)
    for ep in episodes:
        terminations[ep.termination.value] += 1
        kind = classify_failure(ep)
        if kind is not None:
            failures[kind] += 1
    subgoal_fraction = [
        ep.meta.get("subgoals_completed", 0) / ep.meta["num_subgoals"]
        if ep.meta.get("num_subgoals")
        else float(ep.success)
        for ep in episodes
    ]
    return LevelMetrics(
        level=level,
        tasks=len(by_task),
        samples=max((n for n, _ in counts.values()), default=0),
        mean_goal_distance=sum(e.goal_distance for e in episodes) / len(episodes) if episodes else 0.0,
        pass_at=pass_at,
        avg=Estimate(avg_value, avg_lo, avg_hi),
        step_accuracy=correct / attempted if attempted else None,
        effective_horizon=sum(e.steps for e in wins) / len(wins) if wins else None,
        goal_distance_on_success=sum(e.goal_distance for e in wins) / len(wins) if wins else None,
        oracle_ceiling=(sum(ceiling(t) for t in by_task) / len(by_task)) if ceiling and by_task else None,
        subgoal_fraction=sum(subgoal_fraction) / len(subgoal_fraction) if subgoal_fraction else 0.0,
        terminations=dict(terminations),
        failures=dict(failures),
        infra_failures=len(infra),
        tasks_left_out=len({ep.task_id for ep in infra} - set(by_task)),
        pass_left_out=pass_left_out,
    )


def success_by_distance(episodes: Sequence[Episode]) -> dict[int, tuple[int, int]]:
    """Goal distance -> (successes, episodes), infrastructure failures left out."""
    table: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for ep in episodes:
        if is_infra_failure(ep):
            continue
        row = table[ep.goal_distance]
        row[0] += int(ep.success)
        row[1] += 1
    return {d: (s, n) for d, (s, n) in sorted(table.items())}
