"""The horizon estimator (``milepost.horizon.estimator``): fits that recover known parameters, the model
comparison, degenerate data, the hierarchical bootstrap and the coverage of its intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from milepost.horizon.compare import paired_difference
from milepost.horizon.coverage import CoverageScenario, binomial_law, law_crossing, law_horizon, simulate_coverage
from milepost.horizon.estimator import (
    TaskOutcomes,
    bootstrap_counts,
    estimate,
    fit_logistic,
    fit_reliability,
    logistic_horizon,
    reliability_horizon,
    task_draws,
)


def _logistic_data(a: float, b: float, tasks: int, samples: int, seed: int, env: str = "e") -> list[TaskOutcomes]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(tasks):
        d = int(rng.integers(1, 65))
        p = 1 / (1 + math.exp(-(a + b * math.log(d))))
        out.append(TaskOutcomes(d, int(rng.binomial(samples, p)), samples, env=env, task_id=f"{env}{i}"))
    return out


def _reliability_data(q: float, tasks: int, samples: int, seed: int) -> list[TaskOutcomes]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(tasks):
        d = int(rng.integers(1, 41))
        out.append(TaskOutcomes(d, int(rng.binomial(samples, q**d)), samples, env="e", task_id=str(i)))
    return out


def test_logistic_fit_recovers_the_parameters_and_horizon() -> None:
    a, b = 2.0 * math.log(10.0), -2.0  # 50% horizon 10 steps, 80% horizon 10 / 4**(1/2) = 5
    fit = fit_logistic(_logistic_data(a, b, tasks=2000, samples=8, seed=1))
    assert fit.a == pytest.approx(a, abs=0.3)
    assert fit.b == pytest.approx(b, abs=0.12)
    assert fit.horizon(0.5) == pytest.approx(10.0, rel=0.06)
    assert fit.horizon(0.8) == pytest.approx(5.0, rel=0.08)
    assert fit.n == 16000


def test_reliability_fit_recovers_q_and_its_horizon() -> None:
    fit = fit_reliability(_reliability_data(0.95, tasks=2000, samples=8, seed=2))
    assert fit.q == pytest.approx(0.95, abs=0.003)
    assert fit.horizon(0.5) == pytest.approx(math.log(0.5) / math.log(0.95), rel=0.05)
    assert reliability_horizon(0.5, 0.5) == pytest.approx(1.0)
    assert reliability_horizon(1.0) == math.inf and reliability_horizon(0.0) == 0.0


def test_likelihood_comparison_prefers_the_model_that_made_the_data() -> None:
    logistic = estimate(_logistic_data(2.0 * math.log(10.0), -4.0, 300, 4, seed=3), boot=20)
    assert logistic.comparison()["preferred_by_aic"] == "logistic"
    assert logistic.comparison()["logistic"]["loglik"] > logistic.comparison()["reliability"]["loglik"]
    reliable = estimate(_reliability_data(0.9, 300, 4, seed=4), boot=20)
    comparison = reliable.comparison()
    assert comparison["preferred_by_bic"] == "reliability"
    # AIC = 2k - 2 loglik, BIC = k ln n - 2 loglik
    assert comparison["reliability"]["aic"] == pytest.approx(2 - 2 * comparison["reliability"]["loglik"])
    assert comparison["logistic"]["bic"] == pytest.approx(2 * math.log(1200) - 2 * comparison["logistic"]["loglik"])


def test_everything_solved_gives_an_infinite_horizon_reported_as_beyond() -> None:
    data = [TaskOutcomes(d, 4, 4, env="e", task_id=str(d)) for d in range(1, 20)]
    est = estimate(data, boot=50)
    assert est.reliability.q == 1.0
    assert math.isinf(est.reliability.horizon())
    assert est.to_dict()["reliability"]["horizons"]["h50"] is None  # JSON has no inf
    none = estimate([TaskOutcomes(d, 0, 4, env="e", task_id=str(d)) for d in range(1, 20)], boot=50)
    assert none.reliability.q == 0.0 and none.reliability.horizon() == 0.0
    assert none.logistic.prob(np.array([1.0]))[0] < 0.01


def test_perfect_separation_stays_finite_and_falls_between_the_groups() -> None:
    data = [TaskOutcomes(d, 4 if d <= 10 else 0, 4, env="e", task_id=str(d)) for d in range(2, 30)]
    fit = fit_logistic(data)
    assert math.isfinite(fit.a) and math.isfinite(fit.b) and fit.b < 0
    assert 10 <= fit.horizon(0.5) <= 11


def test_rising_success_has_no_horizon() -> None:
    assert math.isinf(logistic_horizon(np.array([0.0]), np.array([0.5]))[0])


def test_bootstrap_resamples_tasks_within_each_environment() -> None:
    envs = ["a"] * 5 + ["b"] * 3
    draws = task_draws(envs, 400, np.random.default_rng(0))
    assert draws.shape == (400, 8)
    assert (draws[:, :5].sum(axis=1) == 5).all() and (draws[:, 5:].sum(axis=1) == 3).all()
    assert draws[:, 0].std() > 0  # tasks really vary between resamples
    outcomes = [TaskOutcomes(3, 2, 4, env=e, task_id=str(i)) for i, e in enumerate(envs)]
    successes, trials = bootstrap_counts(outcomes, 400, np.random.default_rng(1), "two-level")
    assert (trials.sum(axis=1) == 32).all()
    assert (successes <= trials).all()
    # two-level: samples are resampled too, a task at a 50% rate does not always give back 2 of 4
    drawn_once = trials == 4
    assert len(set(successes[drawn_once].tolist())) > 2


def test_interval_holds_the_point_estimate_and_narrows_with_data() -> None:
    small = estimate(_logistic_data(2.0 * math.log(10.0), -2.0, 40, 4, seed=5), boot=300)
    large = estimate(_logistic_data(2.0 * math.log(10.0), -2.0, 400, 4, seed=5), boot=300)
    for est in (small, large):
        lo, hi = est.intervals["logistic"]["h50"]
        assert lo <= est.logistic.horizon(0.5) <= hi
    width = {
        id(e): math.log(e.intervals["logistic"]["h50"][1] / e.intervals["logistic"]["h50"][0]) for e in (small, large)
    }
    assert width[id(large)] < width[id(small)] / 2


def test_task_outcomes_refuse_impossible_counts() -> None:
    with pytest.raises(ValueError):
        TaskOutcomes(0, 1, 1)
    with pytest.raises(ValueError):
        TaskOutcomes(3, 5, 4)
    with pytest.raises(ValueError):
        estimate([], boot=10)
    with pytest.raises(ValueError):
        estimate([TaskOutcomes(3, 1, 2)], boot=0)


def test_binomial_law_and_its_horizon() -> None:
    assert binomial_law(10, 0.5, 0) == 1.0 and binomial_law(10, 0.5, 11) == 0.0
    assert binomial_law(10, 0.5, 10) == pytest.approx(0.5**10)
    assert binomial_law(4, 0.5, 2) == pytest.approx(11 / 16)
    # the law crosses 50% near the binomial median H p
    assert law_crossing(50, 0.9) == pytest.approx(45.5, abs=0.5)
    # the logistic fit to the law's own probabilities lands on the crossing
    assert law_horizon([(d, 16) for d in range(3, 13)], 0.5) == pytest.approx(law_crossing(16, 0.5), abs=0.5)


def test_paired_difference_tells_a_real_gap_from_none() -> None:
    base = _logistic_data(2.0 * math.log(10.0), -3.0, 120, 4, seed=6)
    again = _logistic_data(2.0 * math.log(10.0), -3.0, 120, 4, seed=6)
    same = paired_difference(base, again, boot=300)
    assert same["differs"] is False and same["ratio"] == pytest.approx(1.0, abs=0.1)
    rng = np.random.default_rng(7)
    longer = [
        TaskOutcomes(
            o.distance, int(rng.binomial(4, 1 / (1 + (o.distance / 25) ** 3))), 4, env=o.env, task_id=o.task_id
        )
        for o in base
    ]
    gap = paired_difference(longer, base, boot=300)
    assert gap["differs"] is True and gap["ratio"] > 1.5
    with pytest.raises(ValueError):
        paired_difference(base, base[:-1])


def test_bootstrap_interval_covers_the_truth_near_its_nominal_rate() -> None:
    """A fast, loose version of the coverage simulation (the handoff reports 200 suites per scenario)."""
    for scenario in (CoverageScenario(), CoverageScenario(kind="law")):
        result = simulate_coverage(scenario, datasets=60, boot=200, seed=11)
        cover = result["coverage"]["h50"]
        assert 0.8 <= cover["0.95"] <= 1.0, result
        assert 0.75 <= cover["0.9"] <= 1.0, result
        assert cover["0.95"] >= cover["0.9"]
