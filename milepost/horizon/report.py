"""``milepost horizon`` as a library call: play a suite through the evaluation runner, fit, and report.

Each suite part is one ``evaluation.runner.evaluate`` call (same episode loop, resume, ``--workers``, failure
taxonomy) into ``OUT/runs/PART``; the episodes become per-task counts for ``horizon.estimator``; the report is
``horizon.md`` + ``horizon.png`` + ``horizon.json`` in ``OUT``, each naming the suite's version and hash.
``compare_horizons`` puts several such reports on one plot and says whether their horizons differ.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
)
from milepost.horizon.suites import Suite, build_suite
from milepost.io import atomic_write_json, atomic_write_text, read_jsonl
from milepost.types import Episode

log = logging.getLogger(__name__)

REPORT, PLOT, RESULT = "horizon.md", "horizon.png", "horizon.json"
ALL = "all"


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
    workers: int = 0,
    http: HTTPOptions | None = None,
    progress: bool = True,
    retry_failed: bool = False,
) -> tuple[dict[str, Any], dict[str, list[Episode]]]:
    """Build the suite under ``OUT/suite`` and play every part with the runner; the manifest and the episodes
    per part (infrastructure failures included; the caller leaves them out). ``retry_failed`` plays the
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
        evaluate(spec, out / "runs" / part.name, progress=progress, workers=workers, retry_failed=retry_failed)
        rows = read_jsonl(out / "runs" / part.name / "episodes.jsonl")
        episodes[part.name] = [Episode.from_dict(r) for r in rows]
    return manifest, episodes


def task_outcomes(episodes: Sequence[Episode], env: str) -> list[TaskOutcomes]:
    """Per-task counts of the episodes that say something about the policy (infrastructure failures left out)."""
    wins: dict[str, int] = defaultdict(int)
    plays: dict[str, int] = defaultdict(int)
    dist: dict[str, int] = {}
    for ep in episodes:
        if is_infra_failure(ep):
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
) -> dict[str, Any]:
    """Fit pooled and per environment, tabulate success and failures by distance, write JSON, Markdown, PNG."""
    out = Path(out)
    env_of = {p["name"]: p["env"] for p in manifest["parts"]}
    budget_of = {p["name"]: p["max_steps"] for p in manifest["parts"]}
    part_of: dict[str, str] = {}
    outcomes: list[TaskOutcomes] = []
    failures: dict[str, Counter[str]] = defaultdict(Counter)
    infra = 0
    for part, eps in episodes.items():
        outcomes += task_outcomes(eps, env_of[part])
        part_of.update((ep.task_id, part) for ep in eps)
        for ep in eps:
            if is_infra_failure(ep):
                infra += 1
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
    fits: dict[str, HorizonEstimate] = {ALL: estimate(outcomes, boot=boot, confidence=confidence, seed=seed)}
    groups = by_env(outcomes)
    if len(groups) > 1:
        for env, group in groups.items():
            fits[env] = estimate(group, boot=boot, confidence=confidence, seed=seed)
    success: dict[str, dict[str, list[int]]] = {}
    for env, group in groups.items():
        table: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        for o in group:
            row = table[o.distance]
            row[0] += 1
            row[1] += o.successes
            row[2] += o.trials
        success[env] = {str(d): table[d] for d in sorted(table)}
    result: dict[str, Any] = {
        "suite": {k: manifest[k] for k in ("name", "version", "hash", "pinned", "tasks", "played", "left_out")},
        "meta": {**meta, "infra_failures": infra, "boot": boot, "confidence": confidence, "seed": seed},
        "fits": {name: fit.to_dict() for name, fit in fits.items()},
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
        plot_horizon(out / PLOT, fits, groups, result["failures_by_band"], meta.get("policy", ""))
    except ImportError as exc:  # matplotlib is a core dependency; a broken install still keeps the numbers
        log.warning("%s: plot not written (%s)", out, exc)
        plots = False
    atomic_write_text(out / REPORT, render_horizon(result, PLOT if plots else None))
    return result


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "beyond"
    return f"{x:.{digits}f}"


def _horizon_cell(fit: dict[str, Any], model: str, key: str) -> str:
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


def render_horizon(result: dict[str, Any], plot: str | None) -> str:
    suite, meta = result["suite"], result["meta"]
    conf = round(100 * meta["confidence"])
    lines = [
        f"# Horizon: {meta.get('policy', '')} ({meta.get('agent', 'plain')} agent)",
        "",
        f"Suite **{suite['name']} v{suite['version']}**, content hash `{suite['hash'][:16]}`"
        + ("" if suite.get("pinned") else " (not the pinned hash)")
        + f"; {suite['played']} tasks played, {suite['left_out']} left out (the oracle cannot finish them within "
        f"the budget); samples per task as the suite sets; {meta['infra_failures']} episodes lost to "
        "infrastructure failures (left out).",
        "",
        f"Horizons in atomic steps of goal distance, {conf}% intervals from a hierarchical bootstrap "
        f"({meta['boot']} resamples: tasks within each environment, then samples). `beyond`: success does not "
        "fall below the level within any distance (infinite); `below`: success is under the level already at a "
        "tenth of the shortest task's distance.",
        "",
        "| tasks | episodes | success | 50% horizon (logistic) | 80% horizon (logistic) | 50% horizon (q^d) "
        "| 80% horizon (q^d) | q | preferred (AIC) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, fit in result["fits"].items():
        rate = 100 * fit["successes"] / max(fit["episodes"], 1)
        lines.append(
            f"| {name} ({fit['tasks']} tasks, d {fit['distance_range'][0]}-{fit['distance_range'][1]}) "
            f"| {fit['episodes']} | {rate:.1f}% | {_horizon_cell(fit, 'logistic', 'h50')} "
            f"| {_horizon_cell(fit, 'logistic', 'h80')} | {_horizon_cell(fit, 'reliability', 'h50')} "
            f"| {_horizon_cell(fit, 'reliability', 'h80')} | {fit['reliability']['q']:.4f} "
            f"| {fit['comparison']['preferred_by_aic']} |"
        )
    pooled = result["fits"][ALL]["comparison"]
    if len(result["fits"]) > 2:
        lines += [
            "",
            "The `all` row fits one curve through every environment; where the per-environment rows disagree "
            "(a policy strong on one environment and lost on another), read those rows.",
        ]
    lines += [
        "",
        "Model comparison (all tasks): "
        + "; ".join(
            f"{m}: log-lik {pooled[m]['loglik']:.1f}, AIC {pooled[m]['aic']:.1f}, BIC {pooled[m]['bic']:.1f}"
            for m in ("logistic", "reliability")
        )
        + f" (logistic: p = sigmoid(a + b ln d), a = {result['fits'][ALL]['logistic']['a']:.3f}, "
        f"b = {result['fits'][ALL]['logistic']['b']:.3f}; per-step reliability: p = q^d).",
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
    settings = ", ".join(f"{k} {v}" for k, v in meta.get("settings", {}).items())
    lines += ["", f"Settings: {settings}; seed {meta['seed']}.", ""]
    if plot:
        lines += [f"![horizon]({plot})", ""]
    return "\n".join(lines)


def plot_horizon(
    path: Path,
    fits: dict[str, HorizonEstimate],
    groups: Mapping[str, list[TaskOutcomes]],
    failures: dict[str, dict[str, int]],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    for i, (env, group) in enumerate(groups.items()):
        per: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for o in group:
            per[o.distance][0] += o.successes
            per[o.distance][1] += o.trials
        ds = sorted(per)
        ax.scatter(
            ds,
            [per[d][0] / per[d][1] for d in ds],
            s=[12 + 4 * per[d][1] for d in ds],
            color=f"C{i + 1}",
            alpha=0.7,
            label=f"{env} (success per distance)",
        )
    pooled = fits[ALL]
    grid = np.array(pooled.band["d"])
    ax.fill_between(grid, pooled.band["lo"], pooled.band["hi"], color="C0", alpha=0.2, label="logistic band")
    ax.plot(grid, pooled.logistic.prob(grid), color="C0", label="logistic in log d")
    ax.plot(grid, pooled.reliability.prob(grid), color="C0", ls=":", label=f"q^d (q = {pooled.reliability.q:.3f})")
    for level, style in zip(LEVELS, ("--", "-."), strict=True):
        h = pooled.logistic.horizon(level)
        if math.isfinite(h) and h <= grid[-1]:
            ax.axvline(h, color="grey", ls=style, lw=1, label=f"{round(100 * level)}% horizon {h:.1f}")
    ax.set_xscale("log")
    ax.set_xlabel("goal distance d (atomic steps, log scale)")
    ax.set_ylabel("success")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"{title}: success against goal distance")
    ax.legend(fontsize=7, loc="lower left")
    bands = list(failures)
    bottom = np.zeros(len(bands))
    for j, kind in enumerate(("success", *FAILURE_KINDS)):
        vals = np.array([failures[b].get(kind, 0) / max(failures[b]["episodes"], 1) for b in bands])
        if vals.sum() == 0:
            continue
        bx.bar(bands, vals, bottom=bottom, label=kind, color="C2" if kind == "success" else f"C{(j + 3) % 10}")
        bottom += vals
    bx.set_xlabel("goal distance band")
    bx.set_ylabel("share of episodes")
    bx.set_title("outcomes by distance band")
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
