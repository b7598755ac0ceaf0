"""``milepost horizon compare``: several horizon reports side by side, per environment, and whether they differ.

Reports are comparable when they played the same suite (name, version, hash) and hold the same tasks; a task
missing from one report (every sample of it lost to infrastructure failures, say) is refused in one line unless
``intersect`` asks to compare on the tasks both hold. Only the suite, the labels and the per-task counts are read
from ``horizon.json``, and all of them are checked; the fits are redone from the counts, so an edited fit cannot
change the verdict. For each environment and level, ``paired_difference`` resamples the same tasks for both runs
and gives the interval of the ratio of their horizons; the verdict is "yes", "no" or "cannot tell" (a horizon
beyond the suite in too many resamples to bound the ratio).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from milepost.errors import InputError
from milepost.horizon.estimator import (
    LEVELS,
    HorizonEstimate,
    TaskOutcomes,
    _json_floats,
    _percentile,
    by_env,
    estimate,
    fit_logistic,
    fit_logistic_batch,
    geometric_mean_horizon,
    interval_percentiles,
    resample_horizons,
    task_draws,
)
from milepost.horizon.report import RESULT, _key, horizon_cell, summary_cell
from milepost.io import atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

COMPARE_REPORT, COMPARE_PLOT, COMPARE_RESULT = "horizon_compare.md", "horizon_compare.png", "horizon_compare.json"


def paired_difference(
    first: Sequence[TaskOutcomes],
    second: Sequence[TaskOutcomes],
    *,
    level: float = 0.5,
    boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The ratio ``h_first / h_second`` of the logistic horizons at ``level`` (of the point estimates) and the
    bootstrap interval of the ratio, resampling the same tasks for both (they played the same suite).

    Tasks are resampled within each environment, then each drawn task's samples (two-level, as the reports'
    default). A resample where both horizons are
    infinite (or both zero) says nothing about the ratio: it counts as unbounded on both sides, so once such
    resamples outnumber an interval tail the interval is [0, inf] and ``differs`` is None ("cannot tell")
    rather than False; True / False otherwise.

    Raises:
        ValueError: the two do not hold the same tasks (by ``task_id``, distance and environment).
    """
    key_a = [(o.task_id, o.distance, o.env) for o in first]
    key_b = [(o.task_id, o.distance, o.env) for o in second]
    if sorted(key_a) != sorted(key_b):
        raise ValueError("the two runs do not hold the same tasks")
    order = {k: i for i, k in enumerate(key_b)}
    second = [second[order[k]] for k in key_a]
    d = np.array([o.distance for o in first], dtype=float)
    rng = np.random.default_rng(seed)
    draws = task_draws([o.env for o in first], boot, rng)
    logs = []
    for runs in (first, second):
        s = np.array([o.successes for o in runs], dtype=float)
        m = np.array([o.trials for o in runs], dtype=float)
        wins, plays = draws * s[None, :], draws * m[None, :]
        # two-level, as the reports' default: each drawn task's samples redrawn at its observed rate
        wins = rng.binomial(plays.astype(np.int64), np.broadcast_to(s / m, plays.shape)).astype(float)
        a, b, _ = fit_logistic_batch(np.log(d), wins, plays)
        with np.errstate(divide="ignore"):
            logs.append(np.log(resample_horizons(a, b, wins.sum(axis=1), plays.sum(axis=1), level)))
    with np.errstate(invalid="ignore"):
        diff = logs[0] - logs[1]
    undefined = np.isnan(diff)
    lo_q, hi_q = interval_percentiles(confidence)
    # Undefined resamples widen both ends: they could hold any ratio.
    lo = float(_percentile(np.where(undefined, -np.inf, diff), [lo_q])[0])
    hi = float(_percentile(np.where(undefined, np.inf, diff), [hi_q])[0])
    h_first, h_second = _point_horizon(first, level), _point_horizon(second, level)
    if (h_first, h_second) in ((0.0, 0.0), (math.inf, math.inf)):
        ratio = math.nan  # both unbounded (or both at 0): no ratio
    else:
        ratio = math.inf if h_second == 0.0 else h_first / h_second
    differs: bool | None = bool(lo > 0 or hi < 0)
    if not differs and lo == -math.inf and hi == math.inf:
        differs = None  # the interval spans every ratio: no evidence either way, not evidence of equality
    return {
        "level": level,
        "ratio": None if math.isnan(ratio) else ratio,
        "ratio_interval": [math.exp(x) if x < 700.0 else math.inf for x in (lo, hi)],
        "differs": differs,
        "undefined_share": float(undefined.mean()),
    }


def _point_horizon(outcomes: Sequence[TaskOutcomes], level: float) -> float:
    """The logistic horizon, or inf / 0 where every episode succeeded / failed (no slope to read)."""
    wins, plays = sum(o.successes for o in outcomes), sum(o.trials for o in outcomes)
    if wins == plays:
        return math.inf
    return 0.0 if wins == 0 else fit_logistic(outcomes).horizon(level)


# -- reading reports -------------------------------------------------------------------------------------------


def _fail(run: str | Path, what: str) -> InputError:
    return InputError(f"{Path(run) / RESULT}: {what} (edited or from another tool? rerun `milepost horizon`)")


def load_report(run: str | Path) -> dict[str, Any]:
    """The parts of ``RUN/horizon.json`` that compare uses, checked: suite, labels, confidence and tasks.

    Raises:
        InputError: no such file, not JSON, or a field missing or of the wrong type or range.
    """
    file = Path(run) / RESULT
    if not file.is_file():
        raise InputError(f"{run}: no {RESULT} (a `milepost horizon` output folder?)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(run, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _fail(run, "not a JSON object")
    suite, meta, tasks = data.get("suite"), data.get("meta", {}), data.get("tasks")
    if not isinstance(suite, dict):
        raise _fail(run, "no 'suite' object")
    for key, kind in (("name", str), ("version", int), ("hash", str)):
        if not isinstance(suite.get(key), kind) or isinstance(suite.get(key), bool):
            raise _fail(run, f"suite '{key}' missing or not a {kind.__name__}")
    if not isinstance(meta, dict):
        raise _fail(run, "'meta' is not an object")
    confidence = meta.get("confidence", 0.95)
    if not isinstance(confidence, float | int) or isinstance(confidence, bool) or not 0 < confidence < 1:
        raise _fail(run, f"meta 'confidence' must be a number in (0, 1), got {confidence!r}")
    if not isinstance(tasks, list) or not tasks:
        raise _fail(run, "no 'tasks' list (or an empty one)")
    outcomes, seen = [], set()
    for i, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise _fail(run, f"tasks[{i}] is not an object")
        for key in ("task_id", "env"):
            if not isinstance(task.get(key), str):
                raise _fail(run, f"tasks[{i}] '{key}' missing or not a string")
        try:
            # TaskOutcomes checks that the counts are integers in range
            distance, successes, trials = (cast(int, task.get(k)) for k in ("distance", "successes", "trials"))
            outcome = TaskOutcomes(distance, successes, trials, env=task["env"], task_id=task["task_id"])
        except (ValueError, TypeError) as exc:
            raise _fail(run, f"tasks[{i}]: {exc}") from None
        if (outcome.env, outcome.task_id) in seen:
            raise _fail(run, f"task {outcome.task_id!r} listed twice")
        seen.add((outcome.env, outcome.task_id))
        outcomes.append(outcome)
    label = f"{meta.get('policy', '')} ({meta.get('agent', '')})"
    return {"suite": suite, "confidence": float(confidence), "label": label, "outcomes": outcomes}


def _common_tasks(runs: Sequence[str | Path], reports: list[dict[str, Any]], intersect: bool) -> list[str]:
    """Restrict every report to the tasks all of them hold (``intersect``) or refuse differing task sets."""
    keys = [{(o.env, o.task_id, o.distance) for o in r["outcomes"]} for r in reports]
    common = set.intersection(*keys)
    notes = []
    for run, report, key in zip(runs, reports, keys, strict=True):
        extra = len(key - common)
        if extra and not intersect:
            other = max(len(k - key) for k in keys)
            raise InputError(
                f"horizon compare: {run} holds {extra} task(s) the others do not (and lacks up to {other} of "
                "theirs; e.g. every sample of a task lost to infrastructure failures): rerun with --retry-failed, "
                "or pass --intersect to compare on the tasks all runs hold"
            )
        if extra:
            notes.append(f"{run}: {extra} task(s) left out")
            report["outcomes"] = [o for o in report["outcomes"] if (o.env, o.task_id, o.distance) in common]
    if not common:
        raise InputError("horizon compare --intersect: the runs share no task")
    return notes


def compare_horizons(
    runs: Sequence[str | Path],
    out: str | Path,
    labels: Sequence[str] | None = None,
    *,
    boot: int = 1000,
    intersect: bool = False,
) -> str:
    """Per environment: every run's horizons with intervals, and for each pair of runs and each level the ratio
    of their horizons with a paired interval and a verdict; the geometric-mean summary across environments;
    one plot panel per environment. Runs of different suites (name, version or hash) are refused; runs with
    different task sets are refused unless ``intersect``.
    """
    if len(runs) < 2:
        raise InputError("horizon compare: give at least two run folders")
    reports = [load_report(r) for r in runs]
    names = list(labels) if labels else [r["label"] for r in reports]
    if len(names) != len(reports):
        raise InputError(f"--labels: {len(names)} labels for {len(reports)} runs")
    first = reports[0]["suite"]
    for run, rep in zip(runs, reports, strict=True):
        s = rep["suite"]
        if (s["name"], s["version"], s["hash"]) != (first["name"], first["version"], first["hash"]):
            raise InputError(
                f"{run}: suite {s['name']} v{s['version']} ({s['hash'][:12]}) is not {first['name']} "
                f"v{first['version']} ({first['hash'][:12]}): horizons on different suites are not comparable"
            )
    notes = _common_tasks(runs, reports, intersect)
    confidence = reports[0]["confidence"]
    conf = round(100 * confidence)
    fits: list[dict[str, HorizonEstimate]] = [
        {
            env: estimate(group, boot=boot, confidence=confidence, seed=k)
            for k, (env, group) in enumerate(by_env(rep["outcomes"]).items())
        }
        for rep in reports
    ]
    envs = list(fits[0])
    lines = [
        "# Horizon comparison",
        "",
        f"Suite {first['name']} v{first['version']}, hash `{first['hash'][:16]}`; horizons per environment in atomic "
        f"steps (logistic in log d, refitted from each report's task counts) with {conf}% intervals from {boot} "
        "task resamples.",
    ]
    if notes:
        lines += ["", "Compared on the tasks all runs hold (--intersect): " + "; ".join(notes) + "."]
    lines += ["", "| environment | run | success | 50% horizon | 80% horizon |", "|---|---|---:|---:|---:|"]
    for env in envs:
        for name, env_fits in zip(names, fits, strict=True):
            fit = env_fits[env].to_dict()
            rate = 100 * fit["successes"] / max(fit["episodes"], 1)
            lines.append(
                f"| {env} | {name} | {rate:.1f}% | {horizon_cell(fit, 'logistic', 'h50')} "
                f"| {horizon_cell(fit, 'logistic', 'h80')} |"
            )
    summaries = [{_key(lv): geometric_mean_horizon(f, lv, confidence) for lv in LEVELS} for f in fits]
    if len(envs) > 1:
        lines += ["", f"Across environments ({summaries[0]['h50']['estimand']}):", ""]
        lines += [
            f"- {name}: 50% {summary_cell(s, 'h50')}; 80% {summary_cell(s, 'h80')}"
            for name, s in zip(names, summaries, strict=True)
        ]
    lines += [
        "",
        "| environment | pair | level | ratio of horizons [paired interval] | differ |",
        "|---|---|---|---|---|",
    ]
    pairs = []
    for env in envs:
        for i in range(len(reports)):
            for j in range(i + 1, len(reports)):
                group_i = [o for o in reports[i]["outcomes"] if o.env == env]
                group_j = [o for o in reports[j]["outcomes"] if o.env == env]
                for level in LEVELS:
                    paired = paired_difference(group_i, group_j, level=level, boot=boot, confidence=confidence)
                    lo, hi = paired["ratio_interval"]
                    ratio = f"{_ratio(paired['ratio'])} [{_ratio(lo)}, {_ratio(hi)}]"
                    verdict = {True: "yes", False: "no"}.get(paired["differs"], "cannot tell")
                    if paired["differs"] is None:
                        verdict += f" ({100 * paired['undefined_share']:.0f}% of resamples have no ratio)"
                    pairs.append({"env": env, "a": names[i], "b": names[j], **paired})
                    lines.append(f"| {env} | {names[i]} vs {names[j]} | {round(100 * level)}% | {ratio} | {verdict} |")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        from milepost.horizon.plots import plot_compare

        plot_compare(out / COMPARE_PLOT, names, fits)
        lines += ["", f"![horizons]({COMPARE_PLOT})"]
    except ImportError as exc:
        log.warning("%s: plot not written (%s)", out, exc)
    text = "\n".join(lines) + "\n"
    atomic_write_text(out / COMPARE_REPORT, text)
    atomic_write_json(
        out / COMPARE_RESULT,
        _json_floats(
            {"suite": first, "runs": names, "pairs": pairs, "summary": dict(zip(names, summaries, strict=True))}
        ),
    )
    return text


def _ratio(x: float | None) -> str:
    """A ratio of horizons; 0 and inf where one side is unbounded, "undefined" where both are."""
    if x is None:
        return "undefined"
    if not math.isfinite(x) or x > 1e3:
        return "inf"
    return "0" if x < 1e-3 else f"{x:.2f}"
