"""What a published horizon must say (issue 25): per-environment headlines with a labelled cross-environment
summary, one-sided bounds where every episode succeeds, curves without a horizon said in words, exact
percentile indices, counts that are counts, a stated resampling scheme and readable plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from milepost.horizon.compare import paired_difference
from milepost.horizon.estimator import (
    TaskOutcomes,
    _percentile,
    binomial_lower,
    bootstrap_counts,
    estimate,
    fit_logistic,
    interval_percentiles,
)
from milepost.horizon.report import horizon_cell, summarise_horizon, task_outcomes
from milepost.types import Episode, TerminationReason, Turn, zero_terms


def _episodes(task: str, distance: int, wins: int, trials: int) -> list[Episode]:
    out = []
    for k in range(trials):
        ok = k < wins
        turn = Turn(0, "obs", "text", ["a"], 0.0, zero_terms(), [], 0 if ok else distance)
        out.append(
            Episode(
                task_id=task,
                policy="p",
                sample=k,
                seed=k,
                termination=TerminationReason.SOLVED if ok else TerminationReason.BUDGET_EXHAUSTED,
                success=ok,
                goal_distance=distance,
                steps=distance,
                turns=[turn],
            )
        )
    return out


def _manifest(parts: dict[str, tuple[str, int]]) -> dict:
    return {
        "name": "fixture",
        "version": 1,
        "hash": "0" * 64,
        "pinned": False,
        "tasks": 0,
        "played": 0,
        "left_out": 0,
        "parts": [{"name": n, "env": env, "max_steps": budget, "left_out": []} for n, (env, budget) in parts.items()],
    }


def _falling(env: str, h50: float, distances: range, trials: int = 8) -> list[Episode]:
    """Episodes whose success falls with distance as sigmoid(-3 (ln d - ln h50)), rounded to counts."""
    eps = []
    for d in distances:
        p = 1 / (1 + math.exp(3 * (math.log(d) - math.log(h50))))
        eps += _episodes(f"{env}-{d}", d, round(p * trials), trials)
    return eps


def _summarise(tmp_path: Path, episodes: dict[str, list[Episode]], parts: dict[str, tuple[str, int]]) -> dict:
    return summarise_horizon(_manifest(parts), episodes, tmp_path, meta={"policy": "p"}, boot=200, seed=0)


# -- item 1: per-environment headlines; the only cross-environment number is a labelled geometric mean --------


def test_horizons_are_per_environment_and_the_summary_is_a_labelled_geometric_mean(tmp_path: Path) -> None:
    parts = {"sudoku9": ("sudoku", 50), "shop": ("webshop", 45)}
    episodes = {"sudoku9": _falling("sudoku", 20.0, range(5, 45, 3)), "shop": _falling("webshop", 8.0, range(2, 18))}
    result = _summarise(tmp_path, episodes, parts)
    assert set(result["fits"]) == {"sudoku", "webshop"}  # no curve through both environments
    h = {env: fit["logistic"]["horizons"]["h50"] for env, fit in result["fits"].items()}
    assert h["sudoku"] == pytest.approx(20.0, rel=0.15) and h["webshop"] == pytest.approx(8.0, rel=0.15)
    summary = result["summary"]["h50"]
    assert "geometric mean" in summary["estimand"] and "equal environment weights" in summary["estimand"]
    assert summary["value"] == pytest.approx(math.sqrt(h["sudoku"] * h["webshop"]))
    lo, hi = summary["interval"]
    assert lo < summary["value"] < hi
    report = (tmp_path / "horizon.md").read_text()
    assert "| all" not in report and "Across environments (geometric mean" in report
    assert "| sudoku (d 5-44)" in report and "| webshop (d 2-17)" in report


def test_an_environment_without_a_horizon_leaves_the_summary_undefined_not_millions(tmp_path: Path) -> None:
    """The shipped 4x4 model's shape: one environment mostly solved, the other never (main: pooled h50 2.8M)."""
    parts = {"sudoku4": ("sudoku", 16), "rush": ("rushhour", 30)}
    solved = _falling("sudoku", 11.0, range(3, 13), trials=12)
    never = [ep for d in range(2, 11) for ep in _episodes(f"r{d}", d, 0, 4)]
    result = _summarise(tmp_path, {"sudoku4": solved, "rush": never}, parts)
    assert result["fits"]["rushhour"]["status"] == "no_successes"
    assert result["summary"]["h50"]["value"] is None
    assert "rushhour (no successes)" in result["summary"]["h50"]["undefined"]
    report = (tmp_path / "horizon.md").read_text()
    assert "not defined (no horizon in: rushhour (no successes))" in report
    assert not any(len(tok) > 6 and tok.replace(".", "").isdigit() for tok in report.split())  # no 2832306.8


# -- item 2: every episode solved: a one-sided exact bound; compare says "cannot tell" ----------------------------


def _all_solved(trials: int = 4) -> list[TaskOutcomes]:
    return [TaskOutcomes(d, trials, trials, env="e", task_id=str(d)) for d in range(2, 13)]


def test_all_success_gives_an_exact_one_sided_bound() -> None:
    fit = estimate(_all_solved(), boot=200)
    assert fit.status == "no_failures" and not fit.identified
    # (1 - 0.95)^(1/n) >= 0.5 needs n >= 5 episodes at distance >= d: 8 at d >= 11 (4 at 12 alone are too few);
    # >= 0.8 needs n >= 14: 16 at d >= 9.
    assert fit.bound == {"kind": "at_least", "h50": 11.0, "h80": 9.0, "confidence": 0.95}
    assert binomial_lower(8, 8, 0.95) == pytest.approx(0.05 ** (1 / 8))
    cell = horizon_cell(fit.to_dict(), "logistic", "h50")
    assert cell == ">= 11 (95% one-sided)" and "beyond" not in cell
    assert "at least 11 steps" in fit.note


def test_the_exact_lower_bound_is_clopper_pearson() -> None:
    # P(X >= 7 | n = 10, p) = 0.05 at p = 0.3933 (the Beta(7, 4) 5% quantile)
    assert binomial_lower(7, 10, 0.95) == pytest.approx(0.39338, abs=1e-4)
    assert binomial_lower(0, 10, 0.95) == 0.0


def test_comparing_two_all_success_runs_cannot_tell() -> None:
    gap = paired_difference(_all_solved(), _all_solved(), boot=200)
    assert gap["differs"] is None and gap["undefined_share"] == 1.0  # main: ratio 1.0 [1.0, 1.0], differs False
    assert gap["ratio"] is None and gap["ratio_interval"] == [0.0, math.inf]


# -- item 3: curves that do not fall, or cannot be read, are said in words --------------------------------------


def test_rising_success_is_flagged_not_declining() -> None:
    rising = [TaskOutcomes(d, k, 20, env="e", task_id=str(d)) for d, k in ((2, 1), (4, 3), (8, 5), (16, 8))]
    fit = estimate(rising, boot=100)
    assert fit.status == "not_declining" and "does not fall" in fit.note
    assert horizon_cell(fit.to_dict(), "logistic", "h50") == "none (success does not fall)"
    # no number to misread in horizon.json: main printed "beyond" (an infinite horizon) for this curve
    assert fit.to_dict()["logistic"]["horizons"] == {"h50": None, "h80": None}


def test_every_task_at_one_distance_has_no_horizon() -> None:
    same = [TaskOutcomes(7, k, 4, env="e", task_id=str(k)) for k in (1, 2, 3)]
    fit = estimate(same, boot=100)
    assert fit.status == "one_distance" and "every task is 7 steps" in fit.note
    assert fit.to_dict()["status"] == "one_distance"


# -- item 6: the smaller ones ------------------------------------------------------------------------------------


def test_the_95_percent_interval_takes_the_25th_of_1000_values() -> None:
    assert interval_percentiles(0.95) == (2.5, 97.5)
    values = np.arange(1.0, 1001.0)
    lo, hi = _percentile(values, interval_percentiles(0.95))
    assert (lo, hi) == (25.0, 975.0)  # main: 26.0 (its 2.500000000000002 percentile)


@pytest.mark.parametrize("bad", [float("nan"), 2.5, True, "3"])
def test_task_outcomes_refuse_non_integer_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        TaskOutcomes(bad, 1, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be an integer"):
        TaskOutcomes(3, bad, 2)  # type: ignore[arg-type]


def test_tasks_at_distance_zero_are_left_out_of_the_fit_not_a_crash(tmp_path: Path) -> None:
    eps = _falling("sudoku", 6.0, range(2, 12)) + _episodes("done", 0, 2, 2)
    assert all(o.distance >= 1 for o in task_outcomes(eps, "sudoku"))
    result = _summarise(tmp_path, {"p": eps}, {"p": ("sudoku", 20)})
    assert result["meta"]["at_goal"] == 2
    assert "2 episodes of tasks already at their goal" in (tmp_path / "horizon.md").read_text()


def test_compare_ratio_is_the_ratio_of_the_point_estimates() -> None:
    rng = np.random.default_rng(3)
    first = [TaskOutcomes(d, int(rng.binomial(8, 1 / (1 + (d / 12) ** 3))), 8, "e", str(d)) for d in range(2, 40)]
    second = [TaskOutcomes(d, int(rng.binomial(8, 1 / (1 + (d / 8) ** 3))), 8, "e", str(d)) for d in range(2, 40)]
    gap = paired_difference(first, second, boot=200)
    assert gap["ratio"] == pytest.approx(fit_logistic(first).horizon() / fit_logistic(second).horizon())
    assert gap["differs"] is True


# -- item 7: task-only resampling by default, two-level on request, both stated ----------------------------------


def test_task_resampling_keeps_each_tasks_counts_and_two_level_redraws_them() -> None:
    outcomes = [TaskOutcomes(3, 2, 4, env="e", task_id=str(i)) for i in range(6)]
    s, m = bootstrap_counts(outcomes, 300, np.random.default_rng(0), "tasks")
    assert np.array_equal(s * 2, m)  # every drawn task brings its own 2 of 4
    s2, m2 = bootstrap_counts(outcomes, 300, np.random.default_rng(0), "two-level")
    assert len(set((s2 / np.maximum(m2, 1))[m2 == 4].tolist())) > 2
    with pytest.raises(ValueError, match="resampling"):
        bootstrap_counts(outcomes, 10, np.random.default_rng(0), "bogus")


def test_two_level_is_the_default_and_the_report_states_its_scheme(tmp_path: Path) -> None:
    assert estimate(_all_solved(), boot=10).resampling == "two-level"
    eps = {"p": _falling("sudoku", 6.0, range(2, 12))}
    result = summarise_horizon(_manifest({"p": ("sudoku", 20)}), eps, tmp_path, meta={}, boot=100, resampling="tasks")
    assert result["meta"]["resampling"] == "tasks" and result["fits"]["sudoku"]["resampling"] == "tasks"
    assert "each keeping its observed counts" in (tmp_path / "horizon.md").read_text()


# -- item 9: plots ------------------------------------------------------------------------------------------------


def test_the_plot_ticks_the_distances_sizes_its_dots_counts_its_bars_and_skips_flagged_curves() -> None:
    from milepost.horizon.estimator import by_env
    from milepost.horizon.plots import horizon_figure

    falling = [o for o in task_outcomes(_falling("sudoku", 6.0, range(2, 12)), "sudoku")]
    solved = [TaskOutcomes(d, 4, 4, env="webshop", task_id=f"w{d}") for d in (3, 6, 9)]
    groups = by_env(falling + solved)
    fits = {env: estimate(g, boot=50) for env, g in groups.items()}
    failures = {"1-2": {"episodes": 8, "success": 8}, "3-4": {"episodes": 16, "success": 10, "budget": 6}}
    fig = horizon_figure(fits, groups, failures, "p")
    sudoku_ax, shop_ax, bars = fig.axes
    assert set(sudoku_ax.get_xticks()) <= set(range(2, 12)) and len(sudoku_ax.get_xticks()) >= 5
    assert [t.get_text() for t in shop_ax.get_xticklabels()] == ["3", "6", "9"]
    assert any("episodes" in t.get_text() for t in sudoku_ax.get_legend().get_texts())  # dot-size legend
    assert len(sudoku_ax.lines) >= 2 and len(shop_ax.lines) == 0  # no curve where every episode succeeded
    assert "no curve drawn" in " ".join(t.get_text() for t in shop_ax.texts)
    assert {t.get_text() for t in bars.texts} == {"n=8", "n=16"}
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_a_written_report_round_trips_as_json(tmp_path: Path) -> None:
    result = _summarise(
        tmp_path, {"p": [ep for d in range(2, 9) for ep in _episodes(str(d), d, 4, 4)]}, {"p": ("sudoku", 20)}
    )
    on_disk = json.loads((tmp_path / "horizon.json").read_text())
    assert on_disk["fits"]["sudoku"]["status"] == result["fits"]["sudoku"]["status"] == "no_failures"
    assert on_disk["fits"]["sudoku"]["bound"]["kind"] == "at_least"


def test_all_success_against_all_failure_differs_with_an_unbounded_ratio() -> None:
    """Degenerate resamples are read from their counts: main read an all-failure curve's slope of ~0 as an
    infinite horizon, so this pair came out 'no difference'."""
    failed = [TaskOutcomes(d, 0, 4, env="e", task_id=str(d)) for d in range(2, 13)]
    gap = paired_difference(_all_solved(), failed, boot=100)
    assert gap["differs"] is True and gap["ratio"] == math.inf and gap["undefined_share"] == 0.0
