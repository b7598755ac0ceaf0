"""The horizon score's reported numbers, asserted exactly: each interval is the stated percentiles of the
bootstrap draws the estimate keeps, a cached suite folder is reused only when its files hash to the suite
(else refused, or rebuilt when its manifest is gone), and the report's counts are the episodes'. Fast enough to
run per mutant (the mutation gate's ``horizon`` group)."""

from __future__ import annotations

import inspect
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from milepost.errors import InputError
from milepost.horizon import estimator as est
from milepost.horizon.estimator import (
    TaskOutcomes,
    bootstrap_counts,
    estimate,
    fit_logistic_batch,
    geometric_mean_horizon,
    interval_percentiles,
    reliability_horizon,
)
from milepost.horizon.report import distance_band, summarise_horizon, task_outcomes
from milepost.horizon.suites import (
    MANIFEST,
    SUITES,
    TASKS,
    Suite,
    SuitePart,
    build_suite,
    fits_budget,
    get_suite,
    suite_hash,
)
from milepost.types import Episode, Task, TerminationReason, Turn, zero_terms

OUTCOMES = [
    TaskOutcomes(d, s, 4, env="e", task_id=f"t{d}")
    for d, s in [(1, 4), (2, 4), (3, 3), (5, 3), (8, 2), (13, 1), (21, 1), (34, 0)]
]


def _order_stat(values: np.ndarray, percent: float) -> float:
    """The inverted-CDF percentile by hand: the ceil(n p / 100)-th smallest value."""
    ordered = np.sort(values)
    return float(ordered[max(math.ceil(len(values) * percent / 100 - 1e-9), 1) - 1])


@pytest.mark.parametrize(("confidence", "boot", "low", "high"), [(0.9, 200, 10, 190), (0.95, 200, 5, 195)])
def test_the_interval_is_the_stated_order_statistics_of_the_bootstrap_draws(
    confidence: float, boot: int, low: int, high: int
) -> None:
    fit = estimate(OUTCOMES, boot=boot, confidence=confidence, seed=4)
    lo_p, hi_p = interval_percentiles(confidence)
    assert (lo_p, hi_p) == (round((1 - confidence) * 50, 9), round(100 - (1 - confidence) * 50, 9))
    for level, key in ((0.5, "h50"), (0.8, "h80")):
        draws = np.sort(fit.boot_horizons(level))
        assert len(draws) == boot
        # 5% of 200 draws: the 10th smallest; 95%: the 190th (and 2.5% / 97.5%: the 5th / 195th).
        assert fit.intervals["logistic"][key] == (float(draws[low - 1]), float(draws[high - 1]))
        assert fit.intervals["logistic"][key] == (_order_stat(draws, lo_p), _order_stat(draws, hi_p))
    # The reliability intervals come from the same resamples, refitted one by one.
    assert fit.boot_params is not None
    counts, trials = bootstrap_counts(OUTCOMES, boot, np.random.default_rng(4))
    assert np.array_equal(fit.boot_params[:, 2], counts.sum(axis=1))
    assert np.array_equal(fit.boot_params[:, 3], trials.sum(axis=1))
    d = np.array([o.distance for o in OUTCOMES], dtype=float)
    a, b, _ = fit_logistic_batch(np.log(d), counts, trials)
    assert np.allclose(fit.boot_params[:, 0], a) and np.allclose(fit.boot_params[:, 1], b)
    qs = np.array([est._fit_q(d, counts[i], trials[i]) for i in range(boot)])
    for level, key in ((0.5, "h50"), (0.8, "h80")):
        rel = np.sort([reliability_horizon(q, level) for q in qs])
        assert fit.intervals["reliability"][key] == (float(rel[low - 1]), float(rel[high - 1]))
    # The plotted band: the same percentiles of the resampled curves at each grid point.
    grid = np.array(fit.band["d"])
    assert grid[0] == 1.0 and grid[-1] == pytest.approx(2 * 34) and len(grid) == 60
    curves = 1 / (1 + np.exp(-(a[:, None] + b[:, None] * np.log(grid)[None, :])))
    assert np.allclose(fit.band["lo"], np.percentile(curves, lo_p, axis=0))
    assert np.allclose(fit.band["hi"], np.percentile(curves, hi_p, axis=0))
    assert fit.to_dict()["logistic"]["intervals"]["h50"] == [
        v if math.isfinite(v) else None for v in fit.intervals["logistic"]["h50"]
    ]


def test_the_point_estimate_and_counts_are_the_datas() -> None:
    fit = estimate(OUTCOMES, boot=50, confidence=0.8, seed=1)
    assert (fit.tasks, fit.episodes, fit.successes, fit.distance_range) == (8, 32, 18, (1, 34))
    assert (fit.confidence, fit.boot, fit.resampling, fit.status) == (0.8, 50, "two-level", "ok")
    assert fit.boot_params is not None and fit.boot_params.shape == (50, 4)
    h = fit.horizons()
    assert h["h50"] == pytest.approx(math.exp(-fit.logistic.a / fit.logistic.b))
    assert h["h80"] == pytest.approx(math.exp((math.log(4) - fit.logistic.a) / fit.logistic.b))
    assert fit.horizons("reliability")["h50"] == pytest.approx(math.log(0.5) / math.log(fit.reliability.q))
    assert fit.logistic.n == fit.reliability.n == 32
    assert estimate(OUTCOMES, boot=50, confidence=0.8, seed=1).intervals == fit.intervals  # seeded
    assert estimate(OUTCOMES, boot=50, confidence=0.8, seed=2).intervals != fit.intervals
    row = fit.comparison()
    assert row["logistic"]["aic"] == pytest.approx(4 - 2 * fit.logistic.loglik)
    assert row["reliability"]["bic"] == pytest.approx(math.log(32) - 2 * fit.reliability.loglik)


def test_the_summary_interval_is_the_percentiles_of_the_mean_log_horizon() -> None:
    fits = {
        "a": estimate(OUTCOMES, boot=200, confidence=0.9, seed=0),
        "b": estimate([TaskOutcomes(o.distance * 2, o.successes, 4, env="b") for o in OUTCOMES], boot=200, seed=1),
    }
    row = geometric_mean_horizon(fits, 0.5, 0.9)
    assert row["value"] == pytest.approx(math.sqrt(fits["a"].horizons()["h50"] * fits["b"].horizons()["h50"]))
    with np.errstate(divide="ignore"):
        means = np.sort(np.exp((np.log(fits["a"].boot_horizons()) + np.log(fits["b"].boot_horizons())) / 2))
    assert row["interval"] == [float(means[9]), float(means[189])]
    assert row["undefined"] == ""


# -- suites ------------------------------------------------------------------------------------------------------

SUITE = Suite(
    "unit",
    1,
    (SuitePart("sudoku4", "sudoku", 4, "S1-S2", 2, 0, 16, 2), SuitePart("rush", "rushhour", 6, "1-3", 2, 0, 2, 2)),
    content_hash="",
    description="a unit-test suite",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("suite") / "unit"
    return root, build_suite(SUITE, root)


def _copy(built: tuple[Path, dict], tmp_path: Path) -> Path:
    shutil.copytree(built[0], tmp_path / "unit")
    return tmp_path / "unit"


def test_a_built_suite_lists_what_it_plays_and_what_its_budget_leaves_out(built: tuple[Path, dict]) -> None:
    root, manifest = built
    tasks = json.loads((root / TASKS).read_text())
    assert manifest["hash"] == suite_hash(SUITE, {name: [_task(r) for r in rows] for name, rows in tasks.items()})
    # Pinned here like a released suite's: any change to what the hash covers, or how, moves it.
    assert manifest["hash"] == "2f8da1a43ddb7be8f628fc28ea2f202e47a634c64ec9c110e1d4fc4a962c7a4b"
    assert (manifest["name"], manifest["version"], manifest["pinned"]) == ("unit", 1, False)
    assert manifest["description"] == "a unit-test suite"
    sudoku, rush = manifest["parts"]
    assert (sudoku["tasks"], sudoku["played"], sudoku["left_out"]) == (4, 4, [])
    assert (rush["tasks"], rush["played"], rush["distances"]) == (2, 0, [])  # every task is longer than H_max 2
    assert [t["goal_distance"] for t in rush["left_out"]] == [r["goal_distance"] for r in tasks["rush"]]
    assert all(t["goal_distance"] > 2 and set(t) == {"task_id", "goal_distance"} for t in rush["left_out"])
    data = json.loads((root / "sudoku4" / "manifest.json").read_text())
    assert {k: data[k] for k in ("env", "size", "suite", "counts")} == {
        "env": "sudoku", "size": 4, "suite": "unit v1", "counts": {"test": 4}
    }  # fmt: skip
    assert list(data["levels"]) == sorted({r["level"] for r in tasks["sudoku4"]})
    for row in tasks["sudoku4"]:  # the budget holds a task whose optimal solution takes exactly H_max turns
        assert fits_budget(_task(row), row["goal_distance"]) and not fits_budget(_task(row), row["goal_distance"] - 1)
    assert sudoku["distances"] == sorted({r["goal_distance"] for r in tasks["sudoku4"]})
    assert (manifest["tasks"], manifest["played"], manifest["left_out"]) == (6, 4, 2)
    assert (root / "sudoku4" / "test.jsonl").exists() and not (root / "rush").exists()
    assert json.loads((root / MANIFEST).read_text()) == manifest


def _task(row: dict) -> Task:
    return Task.from_dict(row)


def test_an_intact_cached_suite_is_reused_and_an_edited_manifest_rewritten(
    built: tuple[Path, dict], tmp_path: Path
) -> None:
    root = _copy(built, tmp_path)
    assert build_suite(SUITE, root) == built[1]
    edited = {**built[1], "played": 99, "description": "edited"}
    (root / MANIFEST).write_text(json.dumps(edited))
    assert build_suite(SUITE, root) == built[1]
    assert json.loads((root / MANIFEST).read_text()) == built[1]


def test_a_suite_folder_with_a_stale_hash_is_refused(built: tuple[Path, dict], tmp_path: Path) -> None:
    root = _copy(built, tmp_path)
    (root / MANIFEST).write_text(json.dumps({**built[1], "hash": "f" * 64}))
    with pytest.raises(InputError) as refused:
        build_suite(SUITE, root)
    assert str(refused.value) == (
        f"{root}: tasks.json hashes to {built[1]['hash'][:12]}, not ffffffffffff, so these are not the tasks of "
        f"unit v1; delete {root} (and the runs played on it) to rebuild the suite"
    )
    # A pinned suite is checked against its pin, whatever the manifest says.
    pinned = Suite(SUITE.name, 1, SUITE.parts, content_hash="e" * 64)
    root = _copy(built, tmp_path / "pinned")
    with pytest.raises(InputError, match="not eeeeeeeeeeee"):
        build_suite(pinned, root)
    assert build_suite(pinned, root, check_hash=False)["pinned"] is False
    with pytest.raises(InputError) as refused:
        build_suite(pinned, tmp_path / "fresh")
    assert str(refused.value) == (
        f"suite unit v1: the generated tasks hash to {built[1]['hash'][:12]}, not the pinned eeeeeeeeeeee: the "
        "generators changed, so this is no longer the same suite (give it a new version and hash)"
    )


def test_a_suite_folder_whose_files_differ_is_refused(built: tuple[Path, dict], tmp_path: Path) -> None:
    root = _copy(built, tmp_path / "tasks")
    rows = json.loads((root / TASKS).read_text())
    rows["sudoku4"] = rows["sudoku4"][1:]
    (root / TASKS).write_text(json.dumps(rows))
    with pytest.raises(InputError, match=r"tasks\.json hashes to"):
        build_suite(SUITE, root)
    root = _copy(built, tmp_path / "played")
    lines = (root / "sudoku4" / "test.jsonl").read_text().splitlines()
    (root / "sudoku4" / "test.jsonl").write_text("\n".join(lines[::-1]) + "\n")  # the same tasks, reordered
    with pytest.raises(InputError, match="holds 4 tasks that are not the suite's 4"):
        build_suite(SUITE, root)
    (root / "sudoku4" / "test.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(InputError, match="does not load"):
        build_suite(SUITE, root)
    root = _copy(built, tmp_path / "garbled")
    (root / TASKS).write_text("{")
    with pytest.raises(InputError, match=r"tasks\.json is unreadable \(JSONDecodeError: "):
        build_suite(SUITE, root)
    root = _copy(built, tmp_path / "other")
    (root / MANIFEST).write_text(json.dumps({**built[1], "version": 2}))
    with pytest.raises(InputError, match="holds suite unit v2, not unit"):
        build_suite(SUITE, root)


def test_a_suite_whose_parts_play_nothing_still_gets_its_folder_and_manifest(tmp_path: Path) -> None:
    suite = Suite("unit-rush", 1, SUITE.parts[1:], content_hash="")
    manifest = build_suite(suite, tmp_path / "a" / "b")  # no part folder is written: the root is made here
    assert (manifest["played"], manifest["left_out"]) == (0, 2)
    assert json.loads((tmp_path / "a" / "b" / MANIFEST).read_text()) == manifest


def test_suites_are_found_by_name() -> None:
    assert get_suite("tiny") is SUITES["tiny"] and get_suite("standard").name == "standard"
    with pytest.raises(InputError) as refused:
        get_suite("huge")
    assert str(refused.value) == "unknown suite 'huge' (known: tiny, standard)"


def test_a_suite_folder_without_its_manifest_is_rebuilt(built: tuple[Path, dict], tmp_path: Path) -> None:
    root = _copy(built, tmp_path)
    (root / MANIFEST).unlink()
    (root / "sudoku4" / "test.jsonl").write_text("")
    assert build_suite(SUITE, root) == built[1]
    assert (root / "sudoku4" / "test.jsonl").read_text() == (built[0] / "sudoku4" / "test.jsonl").read_text()


# -- the report's counts ------------------------------------------------------------------------------------------


def _episode(task: str, d: int, ok: bool, reason: TerminationReason, sample: int = 0) -> Episode:
    turn = Turn(0, "obs", "text", ["a"], 0.0, zero_terms(), [], 0 if ok else d)
    return Episode(task, "p", sample, sample, reason, ok, d, 1, turns=[turn])


def test_distance_bands_are_powers_of_two() -> None:
    got = {d: distance_band(d) for d in (1, 2, 3, 4, 5, 8, 9, 16, 17, 33)}
    assert got == {1: "1-2", 2: "1-2", 3: "3-4", 4: "3-4", 5: "5-8", 8: "5-8", 9: "9-16", 16: "9-16",
                   17: "17-32", 33: "33-64"}  # fmt: skip


def test_the_report_counts_each_task_and_leaves_out_infrastructure_failures_and_solved_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    solved, budget, infra = (
        TerminationReason.SOLVED,
        TerminationReason.BUDGET_EXHAUSTED,
        TerminationReason.BACKEND_ERROR,
    )
    episodes = [
        _episode("a", 3, True, solved, 0),
        _episode("a", 3, False, budget, 1),
        _episode("a", 3, False, infra, 2),
        _episode("a", 3, False, infra, 3),
        _episode("b", 12, False, TerminationReason.DEAD_END, 0),
        _episode("b", 12, False, budget, 1),
        _episode("c", 0, True, solved, 0),
        _episode("c", 0, True, solved, 1),
        _episode("d", 1, True, solved, 0),
        _episode("f", 3, True, solved, 0),
        _episode("e", 30, False, budget, 0),
    ]
    outcomes = task_outcomes(episodes, "sudoku")
    assert [(o.task_id, o.distance, o.successes, o.trials, o.env) for o in outcomes] == [
        ("a", 3, 1, 2, "sudoku"), ("b", 12, 0, 2, "sudoku"), ("d", 1, 1, 1, "sudoku"), ("e", 30, 0, 1, "sudoku"),
        ("f", 3, 1, 1, "sudoku"),
    ]  # fmt: skip
    rush = [_episode(f"r{d}", d, d < 6, solved if d < 6 else budget, k) for d in (2, 4, 8, 16) for k in range(2)]
    plotted: list[tuple] = []
    monkeypatch.setattr("milepost.horizon.plots.plot_horizon", lambda *args: plotted.append(args))
    left = [{"task_id": "z", "goal_distance": 99}]
    manifest = {
        "name": "unit", "version": 1, "hash": "0" * 64, "pinned": False, "tasks": 6, "played": 5, "left_out": 1,
        "parts": [{"name": "p1", "env": "sudoku", "max_steps": 40, "left_out": left},
                  {"name": "p2", "env": "rushhour", "max_steps": 30, "left_out": []}],
    }  # fmt: skip
    parts = {"p1": episodes, "p2": rush}
    result = summarise_horizon(manifest, parts, tmp_path, meta={"policy": "x"}, boot=20, resampling="tasks", seed=3)
    meta = result["meta"]
    assert (meta["infra_failures"], meta["at_goal"], meta["tasks_fitted"]) == (2, 2, 9)
    assert (meta["boot"], meta["confidence"], meta["seed"], meta["policy"]) == (20, 0.95, 3, "x")
    assert meta["resampling"] == "tasks"
    assert result["success_by_distance"]["sudoku"] == {"1": [1, 1, 1], "3": [2, 2, 3], "12": [1, 0, 2], "30": [1, 0, 1]}
    assert result["success_by_distance"]["rushhour"] == {
        "2": [1, 2, 2],
        "4": [1, 2, 2],
        "8": [1, 0, 2],
        "16": [1, 0, 2],
    }
    assert result["failures_by_band"] == {
        "1-2": {"episodes": 3, "success": 3},
        "3-4": {"episodes": 5, "success": 4, "budget_exhausted": 1},
        "5-8": {"episodes": 2, "budget_exhausted": 2},
        "9-16": {"episodes": 4, "dead_end": 1, "budget_exhausted": 3},
        "17-32": {"episodes": 1, "budget_exhausted": 1},
    }
    assert list(result["failures_by_band"]) == ["1-2", "3-4", "5-8", "9-16", "17-32"]
    assert result["tasks"][0] == {"task_id": "a", "env": "sudoku", "part": "p1", "max_steps": 40, "distance": 3,
                                  "successes": 1, "trials": 2}  # fmt: skip
    assert result["tasks"][-1]["part"] == "p2" and result["tasks"][-1]["max_steps"] == 30
    assert result["left_out"] == {"p1": left}
    assert result["suite"] == {
        k: manifest[k] for k in ("name", "version", "hash", "pinned", "tasks", "played", "left_out")
    }
    # Each environment is fitted on its own, with its own seed (the summary treats them as independent draws).
    fits = {
        "sudoku": estimate(outcomes, boot=20, seed=3, resampling="tasks"),
        "rushhour": estimate(task_outcomes(rush, "rushhour"), boot=20, seed=4, resampling="tasks"),
    }
    assert result["fits"] == json.loads(json.dumps({env: fit.to_dict() for env, fit in fits.items()}))
    assert result["summary"] == json.loads(json.dumps({key: geometric_mean_horizon(fits, level, 0.95)
                                                       for key, level in (("h50", 0.5), ("h80", 0.8))}))  # fmt: skip
    (args,) = plotted
    assert args[0] == tmp_path / "horizon.png" and args[3] == result["failures_by_band"] and args[4] == "x"
    assert {env: fit.to_dict() for env, fit in args[1].items()} == {env: fit.to_dict() for env, fit in fits.items()}
    assert {env: [o.task_id for o in group] for env, group in args[2].items()} == {
        "sudoku": [o.task_id for o in outcomes], "rushhour": ["r16", "r2", "r4", "r8"]
    }  # fmt: skip
    assert json.loads((tmp_path / "horizon.json").read_text()) == json.loads(json.dumps(result))
    assert "(horizon.png)" in (tmp_path / "horizon.md").read_text()
    with pytest.raises(InputError) as refused:
        summarise_horizon(manifest, {"p1": episodes[2:4]}, tmp_path, meta={}, boot=20)
    assert str(refused.value) == (
        "horizon: no episodes to fit (every episode failed for infrastructure reasons); once the backend answers, "
        "rerun the same command with --retry-failed"
    )


def test_a_report_without_matplotlib_keeps_its_numbers_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_plot(*args: object) -> None:
        raise ImportError("no matplotlib")

    monkeypatch.setattr("milepost.horizon.plots.plot_horizon", no_plot)
    manifest = {"name": "unit", "version": 1, "hash": "0" * 64, "pinned": False, "tasks": 2, "played": 2,
                "left_out": 0, "parts": [{"name": "p1", "env": "sudoku", "max_steps": 40, "left_out": []}]}  # fmt: skip
    episodes = [_episode("a", 2, True, TerminationReason.SOLVED), _episode("b", 9, False, TerminationReason.DEAD_END)]
    with caplog.at_level("WARNING", logger="milepost.horizon.report"):
        result = summarise_horizon(manifest, {"p1": episodes}, tmp_path, meta={}, boot=10)
    assert [r.getMessage() for r in caplog.records] == [f"{tmp_path}: plot not written (no matplotlib)"]
    assert result["meta"]["tasks_fitted"] == 2 and (tmp_path / "horizon.json").exists()
    assert "horizon.png" not in (tmp_path / "horizon.md").read_text()
    assert inspect.signature(summarise_horizon).parameters["boot"].default == 1000
