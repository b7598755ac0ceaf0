"""How far to trust the horizon's interval: the closed form of the format-error noisy oracle (a policy whose
true success curve is known exactly) and the coverage of the bootstrap interval by simulation.

``binomial_law`` / ``law_horizon`` / ``law_crossing`` give the population answer for ``noisy-oracle:P:format``;
``simulate_coverage`` draws suites from a scenario with a known population horizon and counts how often the
interval holds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from milepost.horizon.estimator import (
    LEVELS,
    TaskOutcomes,
    _key,
    _percentile,
    _sigmoid,
    bootstrap_counts,
    fit_logistic_batch,
    interval_percentiles,
    logistic_horizon,
)

# -- the closed form of the format-error noisy oracle --------------------------------------------------------


def binomial_law(budget: int, p: float, distance: int) -> float:
    """P(Binomial(budget, p) >= distance): the success chance of ``noisy-oracle:p:format`` on a task ``distance``
    atomic steps from its goal with a budget of ``budget`` turns (each turn the oracle's move with chance p, else
    a malformed answer that changes nothing; the episode is solved once ``distance`` moves were made)."""
    if distance <= 0:
        return 1.0
    if distance > budget:
        return 0.0
    return float(sum(math.comb(budget, k) * p**k * (1 - p) ** (budget - k) for k in range(distance, budget + 1)))


def law_horizon(
    tasks: Sequence[tuple[int, int]], p: float, level: float = 0.5, weights: Sequence[float] | None = None
) -> float:
    """The population horizon of the logistic model under the binomial law: the fit to the law's exact success
    probabilities at the given ``(distance, budget)`` tasks (what the fit converges to with infinitely many
    samples per task)."""
    d = np.array([t[0] for t in tasks], dtype=float)
    probs = np.array([binomial_law(t[1], p, t[0]) for t in tasks])
    w = np.ones_like(d) if weights is None else np.asarray(weights, dtype=float)
    big = 1e6  # expected counts of a huge sample: the maximum-likelihood fit to the probabilities themselves
    a, b, _ = fit_logistic_batch(np.log(d), (probs * w * big)[None, :], (w * big)[None, :], penalty=0.0)
    return float(logistic_horizon(a, b, level)[0])


def law_crossing(budget: int, p: float, level: float = 0.5) -> float:
    """The distance where the law's success chance crosses ``level``, interpolated linearly between integers."""
    prev = 1.0
    for d in range(1, budget + 2):
        here = binomial_law(budget, p, d)
        if here < level:
            return (d - 1) + (prev - level) / (prev - here) if d > 1 else 1.0
        prev = here
    return math.inf


# -- coverage of the bootstrap interval, by simulation ------------------------------------------------------


@dataclass(frozen=True)
class CoverageScenario:
    """Simulated suites with a known population horizon.

    ``kind="logistic"``: task i at distance d_i succeeds with ``sigmoid(a + b log d_i + u_i)``, ``u_i ~ N(0, sigma^2)``
    (tasks differ beyond their distance: what the task level of the bootstrap is for). ``kind="law"``: the
    format-error noisy oracle's ``P(Binomial(budget, p) >= d)``. Distances are drawn log-uniformly in
    ``[d_min, d_max]`` for each simulated suite; the truth is the logistic fit to the population success rates
    over that distance distribution (what the estimator converges to with infinitely many tasks and samples).
    """

    kind: str = "logistic"
    tasks: int = 40
    samples: int = 4
    d_min: int = 2
    d_max: int = 64
    a: float = 2.0 * math.log(12.0)
    b: float = -2.0
    sigma: float = 0.75
    budget: int = 30
    p: float = 0.6

    def population(self, d: np.ndarray) -> np.ndarray:
        """Success rate at each distance, averaged over the task effect."""
        if self.kind == "law":
            return np.array([binomial_law(self.budget, self.p, int(x)) for x in d])
        nodes, weights = np.polynomial.hermite_e.hermegauss(40)
        weights = weights / weights.sum()
        z = self.a + self.b * np.log(d)[:, None] + self.sigma * nodes[None, :]
        return np.asarray((_sigmoid(z) * weights[None, :]).sum(axis=1))

    def draw_distances(self, rng: np.random.Generator, size: int) -> np.ndarray:
        lo, hi = math.log(self.d_min), math.log(self.d_max + 1)
        return np.minimum(np.floor(np.exp(rng.uniform(lo, hi, size=size))), self.d_max)

    def truth(self, level: float = 0.5) -> float:
        d = np.arange(self.d_min, self.d_max + 1, dtype=float)
        # log-uniform weight of each integer distance: the share of [log d, log(d + 1)) in the drawn range
        w = np.log(d + 1) - np.log(d)
        probs = self.population(d)
        big = 1e7
        a, b, _ = fit_logistic_batch(np.log(d), (probs * w * big)[None, :], (w * big)[None, :], penalty=0.0)
        return float(logistic_horizon(a, b, level)[0])

    def simulate(self, rng: np.random.Generator) -> list[TaskOutcomes]:
        d = self.draw_distances(rng, self.tasks)
        if self.kind == "law":
            rate = self.population(d)
        else:
            rate = _sigmoid(self.a + self.b * np.log(d) + self.sigma * rng.standard_normal(self.tasks))
        wins = rng.binomial(self.samples, rate)
        return [
            TaskOutcomes(int(x), int(k), self.samples, env="sim", task_id=str(i))
            for i, (x, k) in enumerate(zip(d, wins, strict=True))
        ]


def simulate_coverage(
    scenario: CoverageScenario,
    *,
    datasets: int = 200,
    boot: int = 500,
    confidences: Sequence[float] = (0.9, 0.95),
    levels: Sequence[float] = LEVELS,
    seed: int = 0,
    resampling: str = "two-level",
) -> dict[str, Any]:
    """How often the bootstrap percentile interval (``resampling``: "tasks" or "two-level") of each horizon
    holds the population horizon, over ``datasets`` simulated suites.

    Returns:
        ``{"truth": {h50: ..}, "coverage": {h50: {0.95: share}}, ...}``.
    """
    rng = np.random.default_rng(seed)
    truth = {_key(level): scenario.truth(level) for level in levels}
    hits = {_key(level): dict.fromkeys(confidences, 0) for level in levels}
    widths: dict[str, list[float]] = {_key(level): [] for level in levels}
    for _ in range(datasets):
        outcomes = scenario.simulate(rng)
        d = np.array([o.distance for o in outcomes], dtype=float)
        bs, bm = bootstrap_counts(outcomes, boot, rng, resampling)
        a, b, _ = fit_logistic_batch(np.log(d), bs, bm)
        for level in levels:
            horizons = logistic_horizon(a, b, level)
            key = _key(level)
            for conf in confidences:
                lo, hi = _percentile(horizons, interval_percentiles(conf))
                hits[key][conf] += int(lo <= truth[key] <= hi)
            lo95, hi95 = _percentile(horizons, [2.5, 97.5])
            widths[key].append(float(np.log(hi95) - np.log(lo95)) if np.isfinite(hi95) and lo95 > 0 else math.inf)
    return {
        "scenario": {k: getattr(scenario, k) for k in scenario.__dataclass_fields__},
        "datasets": datasets,
        "boot": boot,
        "resampling": resampling,
        "truth": truth,
        "coverage": {key: {str(c): n / datasets for c, n in row.items()} for key, row in hits.items()},
        "median_log_width_95": {key: float(np.median(v)) for key, v in widths.items()},
    }
