"""``milepost horizon`` as a library call: play a suite through the evaluation runner, fit, and report.

Each suite part is one ``evaluation.runner.evaluate`` call (same episode loop, resume, ``--workers``, failure
taxonomy) into ``OUT/runs/PART``; the episodes become per-task counts for ``horizon.estimator``; the report is
``horizon.md`` + ``horizon.png`` + ``horizon.json`` in ``OUT``, each naming the suite's version and hash.
The headline is per environment: each environment's curve has its own step budget and task mix, so one curve
through all of them answers no question. The only cross-environment number is the geometric mean of the
per-environment horizons (``estimator.geometric_mean_horizon``), labelled as such.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from milepost.agent.loop import AgentSettings
from milepost.backends.base import HTTPOptions
from milepost.errors import InputError
from milepost.evaluation.failures import FAILURE_KINDS, classify_failure, is_infra_failure
from milepost.horizon.estimator import (
    LEVELS,
    HorizonEstimate,
    TaskOutcomes,
    by_env,
    estimate,
    geometric_mean_horizon,
)
from milepost.horizon.suites import Suite, build_suite
from milepost.io import atomic_write_json, atomic_write_text, read_jsonl
from milepost.types import Episode

if TYPE_CHECKING:
    from milepost.evaluation.runner import EpisodePool

log = logging.getLogger(__name__)

REPORT, PLOT, RESULT = "horizon.md", "horizon.png", "horizon.json"
SUMMARY = "summary"


def distance_band(d: int) -> str:
    """Powers-of-two bands of goal distance: 1-2, 3-4, 5-8, 9-16, ..."""
    if d <= 2:
        return "1-2"
    hi = 1 << math.ceil(math.log2(d))
    return f"{hi // 2 + 1}-{hi}"


def _band_order(band: str) -> int:
    return int(band.split("-")[0])


def play_suite(
    suite: Suite,
    out: str | Path,
    *,
    policy: str,
    agent: str = "plain",
    settings: AgentSettings | None = None,
    sudoku_render: str | None = None,
    seed: int = 0,
    pool: EpisodePool | None = None,
    http: HTTPOptions | None = None,
    progress: bool = True,
    retry_failed: bool = False,
) -> tuple[dict[str, Any], dict[str, list[Episode]]]:
    """Build the suite under ``OUT/suite`` and play every part with the runner; the manifest and the episodes
    per part (infrastructure failures included; the caller leaves them out). ``pool`` plays the episodes elsewhere
    (``--workers``: ``milepost.distributed.eval_pool``; None: in this process). ``retry_failed`` plays the
    episodes the backend failed again (``milepost eval --retry-failed``)."""
    from milepost.evaluation.runner import EvalSpec, evaluate

    out = Path(out)
    manifest = build_suite(suite, out / "suite")
    episodes: dict[str, list[Episode]] = {}
    for part in suite.parts:
        if not (out / "suite" / part.name / "test.jsonl").exists():
            episodes[part.name] = []
            continue
        env_kwargs: dict[str, Any] = {"max_steps": part.max_steps, "action_mode": "atomic"}
        if part.env == "sudoku" and sudoku_render is not None:
            env_kwargs["render"] = sudoku_render
        spec = EvalSpec(
            env=part.env,
            data=str(out / "suite" / part.name),
            policy=policy,
            split="test",
            agent=agent,
            n=part.n,
            ks=[1],
            env_kwargs=env_kwargs,
            settings=settings or AgentSettings(),
            seed=seed,
            http=http or HTTPOptions(),
        )
        log.info("horizon: playing %s (%s)", part.name, policy)
        evaluate(spec, out / "runs" / part.name, progress=progress, pool=pool, retry_failed=retry_failed)
        rows = read_jsonl(out / "runs" / part.name / "episodes.jsonl", finite=True)
        episodes[part.name] = [Episode.from_dict(r) for r in rows]
    return manifest, episodes


def task_outcomes(episodes: Sequence[Episode], env: str) -> list[TaskOutcomes]:
    """Per-task counts of the episodes that say something about the policy: infrastructure failures are left
    out, and so are tasks already at their goal (distance 0: no step to measure)."""
    wins: dict[str, int] = defaultdict(int)
    plays: dict[str, int] = defaultdict(int)
    dist: dict[str, int] = {}
    for ep in episodes:
        if is_infra_failure(ep) or ep.goal_distance < 1:
            continue
        plays[ep.task_id] += 1
        wins[ep.task_id] += int(ep.success)
        dist[ep.task_id] = ep.goal_distance
    return [TaskOutcomes(dist[t], wins[t], plays[t], env=env, task_id=t) for t in sorted(plays)]


def summarise_horizon(
    manifest: dict[str, Any],
    episodes: dict[str, list[Episode]],
    out: str | Path,
    *,
    meta: dict[str, Any],
    boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    resampling: str = "two-level",
) -> dict[str, Any]:
    """Fit each environment, tabulate success and failures by distance, write JSON, Markdown and PNG."""
    out = Path(out)
    env_of = {p["name"]: p["env"] for p in manifest["parts"]}
    budget_of = {p["name"]: p["max_steps"] for p in manifest["parts"]}
    part_of: dict[str, str] = {}
    outcomes: list[TaskOutcomes] = []
    failures: dict[str, Counter[str]] = defaultdict(Counter)
    infra = at_goal = 0
    for part, eps in episodes.items():
        outcomes += task_outcomes(eps, env_of[part])
        part_of.update((ep.task_id, part) for ep in eps)
        for ep in eps:
            if is_infra_failure(ep):
                infra += 1
                continue
            if ep.goal_distance < 1:
                at_goal += 1
                continue
            band = distance_band(ep.goal_distance)
            failures[band]["episodes"] += 1
            kind = classify_failure(ep)
            failures[band]["success" if kind is None else kind] += 1
    if not outcomes:
        raise InputError(
            "horizon: no episodes to fit (every episode failed for infrastructure reasons); once the backend "
            "answers, rerun the same command with --retry-failed"
        )
    groups = by_env(outcomes)
    # Each environment its own seed: the summary's interval combines their resamples as independent draws.
    fits: dict[str, HorizonEstimate] = {
        env: estimate(group, boot=boot, confidence=confidence, seed=seed + i, resampling=resampling)
        for i, (env, group) in enumerate(groups.items())
    }
    summary = {_key(lv): geometric_mean_horizon(fits, lv, confidence) for lv in LEVELS}
    success: dict[str, dict[str, list[int]]] = {}
    for env, group in groups.items():
        table: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        for o in group:
            row = table[o.distance]
            row[0] += 1
            row[1] += o.successes
            row[2] += o.trials
        success[env] = {str(d): table[d] for d in sorted(table)}
    suite = {k: manifest[k] for k in ("name", "version", "hash", "pinned", "tasks", "played", "left_out")}
    result: dict[str, Any] = {
        "suite": suite,
        "meta": {
            **meta,
            "infra_failures": infra,
            "at_goal": at_goal,
            "boot": boot,
            "confidence": confidence,
            "seed": seed,
            "resampling": resampling,
            "tasks_fitted": len(outcomes),
        },
        "fits": {name: fit.to_dict() for name, fit in fits.items()},
        SUMMARY: summary,
        "success_by_distance": success,
        "failures_by_band": {b: dict(failures[b]) for b in sorted(failures, key=_band_order)},
        "tasks": [
            {
                "task_id": o.task_id,
                "env": o.env,
                "part": part_of[o.task_id],
                "max_steps": budget_of[part_of[o.task_id]],
                "distance": o.distance,
                "successes": o.successes,
                "trials": o.trials,
            }
            for o in outcomes
        ],
        "left_out": {p["name"]: p["left_out"] for p in manifest["parts"] if p["left_out"]},
    }
    atomic_write_json(out / RESULT, result)
    plots = True
    try:
        from milepost.horizon.plots import plot_horizon

        plot_horizon(out / PLOT, fits, groups, result["failures_by_band"], meta.get("policy", ""))
    except ImportError as exc:  # matplotlib is a core dependency; a broken install still keeps the numbers
        log.warning("%s: plot not written (%s)", out, exc)
        plots = False
    atomic_write_text(out / REPORT, render_horizon(result, PLOT if plots else None))
    return result


def _key(level: float) -> str:
    return f"h{round(level * 100)}"


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "beyond"
    return f"{x:.{digits}f}"


def horizon_cell(fit: dict[str, Any], model: str, key: str) -> str:
    """One horizon with its interval, or the words for a curve that gives none (``estimator.curve_status``)."""
    status = fit.get("status", "ok")
    if status != "ok":
        bound = fit.get("bound") or {}
        conf = round(100 * bound.get("confidence", 0.95))
        if bound.get("kind") == "at_least":
            value = bound.get(key)
            return f">= {value:g} ({conf}% one-sided)" if value is not None else "no bound (shortest task fails it)"
        if bound.get("kind") == "at_most":
            value = bound.get(key)
            return f"< {value:g} ({conf}% one-sided)" if value is not None else "no bound"
        return {"one_distance": "none (one distance)", "not_declining": "none (success does not fall)"}.get(
            status, "none"
        )
    value = fit[model]["horizons"][key]
    lo, hi = fit[model]["intervals"].get(key, [None, None])
    bottom, top = fit["distance_range"]

    def cell(x: float | None) -> str:
        # Far outside the suite the fitted number means little: say so rather than print a million steps.
        if x is not None and math.isfinite(x) and x > 10 * top:
            return f">{10 * top}"
        return "below" if x is not None and x < bottom / 10 else _fmt(x)

    inside = value is None or bottom <= value <= top
    return f"{cell(value)} [{cell(lo)}, {cell(hi)}]" + ("" if inside else " (extrapolated)")


def summary_cell(summary: dict[str, Any], key: str) -> str:
    row = summary.get(key) or {}
    if row.get("value") is None:
        return f"not defined (no horizon in: {row.get('undefined') or 'no environment'})"
    lo, hi = row["interval"]
    return f"{_fmt(row['value'])} [{_fmt(lo)}, {_fmt(hi)}]"


def _resampling_text(meta: dict[str, Any]) -> str:
    if meta.get("resampling", "two-level") == "tasks":
        return "tasks resampled within each environment, each keeping its observed counts"
    return "tasks within each environment, then each drawn task's samples (two-level)"


def render_horizon(result: dict[str, Any], plot: str | None) -> str:
    suite, meta = result["suite"], result["meta"]
    conf = round(100 * meta["confidence"])
    played = meta.get("tasks_fitted", len(result["tasks"]))
    lines = [
        f"# Horizon: {meta.get('policy', '')} ({meta.get('agent', 'plain')} agent)",
        "",
        f"Suite **{suite['name']} v{suite['version']}**, content hash `{suite['hash'][:16]}`"
        + ("" if suite.get("pinned") else " (not the pinned hash)")
        + f"; {played} tasks played and fitted, {suite['left_out']} left out (the oracle cannot finish them "
        f"within the budget); samples per task as the suite sets; {meta['infra_failures']} episodes lost to "
        "infrastructure failures (left out).",
        "",
        f"Horizons in atomic steps of goal distance, per environment (each has its own step budget and tasks), "
        f"logistic fit in log d with {conf}% percentile intervals from {meta['boot']} bootstrap resamples "
        f"({_resampling_text(meta)}; the measured coverage of both schemes is in docs/results/horizon). "
        "`beyond`: a resample's curve never falls to the level; `below`: under the level already at a tenth of "
        "the shortest task; `>= X (one-sided)`: every episode succeeded, so only an exact binomial lower bound.",
        "",
        "| environment | tasks | episodes | success | 50% horizon (logistic) | 80% horizon (logistic) "
        "| 50% horizon (q^d) | 80% horizon (q^d) | q | preferred (AIC) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    notes = []
    for name, fit in result["fits"].items():
        rate = 100 * fit["successes"] / max(fit["episodes"], 1)
        lines.append(
            f"| {name} (d {fit['distance_range'][0]}-{fit['distance_range'][1]}) | {fit['tasks']} "
            f"| {fit['episodes']} | {rate:.1f}% | {horizon_cell(fit, 'logistic', 'h50')} "
            f"| {horizon_cell(fit, 'logistic', 'h80')} | {horizon_cell(fit, 'reliability', 'h50')} "
            f"| {horizon_cell(fit, 'reliability', 'h80')} | {fit['reliability']['q']:.4f} "
            f"| {fit['comparison']['preferred_by_aic']} |"
        )
        if fit.get("note"):
            notes.append(f"- **{name}**: {fit['note']}.")
    if notes:
        lines += ["", *notes]
    summary = result[SUMMARY]
    if len(result["fits"]) > 1:
        lines += [
            "",
            f"Across environments ({summary['h50']['estimand']}): 50% horizon {summary_cell(summary, 'h50')}, "
            f"80% horizon {summary_cell(summary, 'h80')}. No curve is fitted through all environments together: "
            "their budgets and task mixes differ, so a pooled fit measures the suite's mix, not the policy.",
        ]
    lines += [
        "",
        "Model comparison per environment (log-likelihood, AIC, BIC; logistic p = sigmoid(a + b ln d), "
        "per-step reliability p = q^d):",
        "",
    ]
    for name, fit in result["fits"].items():
        cmp = fit["comparison"]
        lines.append(
            f"- {name}: "
            + "; ".join(
                f"{m} {cmp[m]['loglik']:.1f} / {cmp[m]['aic']:.1f} / {cmp[m]['bic']:.1f}"
                for m in ("logistic", "reliability")
            )
            + f" (a = {fit['logistic']['a']:.3f}, b = {fit['logistic']['b']:.3f})"
        )
    lines += [
        "",
        "## Success by goal distance",
        "",
        "| env | distance | tasks | episodes | success |",
        "|---|---:|---:|---:|---:|",
    ]
    for env, table in result["success_by_distance"].items():
        for d, (tasks, wins, plays) in table.items():
            lines.append(f"| {env} | {d} | {tasks} | {plays} | {100 * wins / max(plays, 1):.1f}% |")
    kinds = [k for k in FAILURE_KINDS if any(k in row for row in result["failures_by_band"].values())]
    lines += [
        "",
        "## Where it breaks: failure taxonomy by distance band (episodes)",
        "",
        "| " + " | ".join(["distance band", "episodes", "success", *kinds]) + " |",
        "|---|---:|---:|" + "---:|" * len(kinds),
    ]
    for band, row in result["failures_by_band"].items():
        cells = [band, str(row["episodes"]), str(row.get("success", 0)), *(str(row.get(k, 0)) for k in kinds)]
        lines.append("| " + " | ".join(cells) + " |")
    if result["left_out"]:
        lines += ["", "Left out (optimal solution longer than the budget): "]
        lines += [
            f"- {part}: {len(items)} tasks (distances {', '.join(str(i['goal_distance']) for i in items)})"
            for part, items in result["left_out"].items()
        ]
    if meta.get("at_goal"):
        lines += ["", f"{meta['at_goal']} episodes of tasks already at their goal (distance 0) are left out."]
    settings = ", ".join(f"{k} {v}" for k, v in meta.get("settings", {}).items())
    lines += ["", f"Settings: {settings}; seed {meta['seed']}.", ""]
    if plot:
        lines += [f"![horizon]({plot})", ""]
    return "\n".join(lines)
