"""Issue 27, "Learning, measured": does an estimator that ranks turns closer to the truth learn faster far out?

On 4x4 Sudoku at the demo's setting (the demo's atomic RL arm, ``configs/tiny-cpu/sudoku4_atomic.yaml``:
training levels S2-S3, evaluation on S1-S5 with n = k = 4, the shipped ``checkpoints/sudoku4-sft`` as the start),
train one run per (advantage estimator, training seed), the same seeds for every estimator:

- ``paper``: the paper's batch-normalised trajectory + alpha * step advantages (the demo's arm as it is);
- ``gigpo``: ``rl.estimator: gigpo`` (episode groups + anchor-state step groups);
- ``distance``: ``rl.estimator: distance`` (the solver's exact distance removed per turn, an oracle);
- ``grpo``: an outcome-only arm from the paper estimator's own knobs (gamma 1, alpha 0, group normalisation):
  every turn of an episode gets its task-normalised outcome (group statistics weighted by turns).

For each run it keeps the rollout episodes of the first and the last training iteration, evaluates the final
policy on every level, and runs the credit audit (``milepost.evaluation.credit``: paper, grpo, gigpo, distance
and random scored against A* = d(s_t) - d(s_t+1) - c_t) on both iterations' episodes. The SFT start is evaluated
at every seed too (the evaluation's sampling seed is the training seed). Then it writes
``experiments/results/credit/learning.{md,json}`` and three plots:

- avg@4 by level per estimator, with 95% intervals from a two-level bootstrap (seeds, then test tasks within a
  seed), and the gain over the SFT start at the long levels (S4-S5), paired by test task (the SFT start is
  evaluated at the first seed, or at every seed with ``--sft-every-seed``);
- the training curve (rollout success per iteration) per estimator, mean over seeds;
- the audit's Spearman correlation with A* at the start and the end of training.

Every (estimator, seed) run is resumable (``train_rl``'s checkpoints; finished steps are skipped, files are
written atomically); ``--report-only`` rebuilds the report from what is on disk.

Usage (one thread; on the shared machine ``nice -n 10``)::

    python -m experiments.credit_learning --out runs/credit-learning [--iterations 8] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "tiny-cpu" / "sudoku4_atomic.yaml"
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"
RESULTS = ROOT / "experiments" / "results" / "credit"
# The training arms: rl overrides on top of the demo's atomic arm.
ARMS: dict[str, list[str]] = {
    "paper": ["rl.estimator=paper"],
    "gigpo": ["rl.estimator=gigpo"],
    "distance": ["rl.estimator=distance"],
    "grpo": ["rl.estimator=paper", "rl.gamma=1.0", "rl.alpha=0.0", "rl.normalisation=group"],
}
# What the audit scores on each run's episodes: the trained estimators and the no-information floor. The critic
# estimators (mira, gae, dr) train critics per audit (minutes each on this CPU): left out here.
AUDITED = ("paper", "grpo", "gigpo", "distance", "random")
LONG_LEVELS = ("S4", "S5")


# ---------------------------------------------------------------------------------------------------------------
# Runs


def arm_config(estimator: str, seed: int, data: Path, args: argparse.Namespace, checkpoint: Path = CHECKPOINT) -> Any:
    """The demo's atomic-arm config with the estimator's overrides, one thread, evaluated on every level."""
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    overrides = [f"model={checkpoint}", f"data={data}", f"seed={seed}", "threads=1"]
    overrides += [f"name={estimator}-seed{seed}", f"rl.iterations={args.iterations}"]
    if args.tasks_per_iter is not None:
        overrides.append(f"rl.tasks_per_iter={args.tasks_per_iter}")
    if args.eval_limit is not None:
        overrides.append(f"eval.limit={args.eval_limit}")
    overrides += ARMS[estimator]
    cfg = load_config(TrainConfig, CONFIG, overrides)
    assert isinstance(cfg, TrainConfig)
    return dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, levels=None))


def run_dir(out: Path, estimator: str, seed: int) -> Path:
    return out / "runs" / f"{estimator}-seed{seed}"


def write_episodes(folder: Path, episodes: Sequence[Any]) -> None:
    """``folder/episodes.jsonl`` (the layout ``milepost credit audit`` and ``export.find_runs`` read)."""
    from milepost.io import atomic_write_jsonl

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(folder / "episodes.jsonl", (ep.to_dict() for ep in episodes))


def read_episodes(folder: Path) -> list[Any]:
    from milepost.io import read_jsonl
    from milepost.types import Episode

    return [Episode.from_dict(row) for row in read_jsonl(folder / "episodes.jsonl")]


def audit_episodes(folder: Path, base_cfg: Any, boot: int, seed: int) -> dict[str, Any]:
    """The credit audit of ``folder``'s episodes (``folder/audit/credit.{json,md,png}``), cached on disk."""
    from milepost.evaluation.credit import AuditSettings, audit, write_report

    target = folder / "audit"
    if (target / "credit.json").exists():
        return dict(json.loads((target / "credit.json").read_text(encoding="utf-8")))
    # The audit scores every estimator with the paper's settings (base_cfg: the demo's arm), whatever trained.
    settings = AuditSettings(estimators=AUDITED, boot=boot, seed=seed, config=base_cfg)
    result = audit(read_episodes(folder), settings, where=str(folder))
    write_report(result, target, title=str(folder))
    return dict(json.loads((target / "credit.json").read_text(encoding="utf-8")))


def train_one(out: Path, estimator: str, seed: int, data: Path, args: argparse.Namespace) -> dict[str, float]:
    """Train, evaluate and audit one (estimator, seed) run; every finished step is skipped on a rerun."""
    from milepost.backends.hf import HFBackend
    from milepost.io import atomic_write_json
    from milepost.training.trainer import evaluate_policy, train_rl

    folder = run_dir(out, estimator, seed)
    done_file = folder / "done.json"
    if done_file.exists():
        return dict(json.loads(done_file.read_text(encoding="utf-8")))
    cfg = arm_config(estimator, seed, data, args)
    base = arm_config("paper", seed, data, args)
    last = cfg.rl.iterations - 1
    timings: dict[str, float] = {}

    def keep(it: int, episodes: list[Any]) -> None:
        # The first and the last iteration's rollouts: what the audit scores at the start and end of training.
        if it == 0:
            write_episodes(folder / "rollouts" / "first", episodes)
        if it == last:
            write_episodes(folder / "rollouts" / "last", episodes)

    t0 = time.perf_counter()
    final = folder / "final"
    if not (final / "config.json").exists():
        resume = (folder / "checkpoints" / "latest").exists()
        final = train_rl(cfg, folder, resume=resume, progress=args.progress, on_episodes=keep)
    timings["train_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    if not (folder / "eval" / "metrics.json").exists():
        with _quiet():
            backend = HFBackend(final)
        evaluate_policy(cfg, backend, folder / "eval", f"RL {estimator} (seed {seed})", progress=args.progress)
    timings["eval_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    for which in ("first", "last"):
        audit_episodes(folder / "rollouts" / which, base, args.boot, seed)
    timings["audit_s"] = time.perf_counter() - t2
    atomic_write_json(done_file, timings)
    return timings


def eval_sft(out: Path, seed: int, data: Path, args: argparse.Namespace) -> float:
    """The SFT start evaluated like the runs (the same test tasks and sampling seed)."""
    from milepost.backends.hf import HFBackend
    from milepost.training.trainer import evaluate_policy

    target = out / "sft-start" / f"seed{seed}"
    if (target / "metrics.json").exists():
        return 0.0
    t0 = time.perf_counter()
    cfg = arm_config("paper", seed, data, args)
    with _quiet():
        backend = HFBackend(CHECKPOINT)
    evaluate_policy(cfg, backend, target, f"SFT start (seed {seed})", progress=args.progress)
    return time.perf_counter() - t0


@contextlib.contextmanager
def _quiet() -> Any:
    """transformers prints loading bars on stderr (CPU-NOTES); a long log does not need them."""
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        yield


def build_data(out: Path, args: argparse.Namespace) -> Path:
    """The demo's 4x4 level datasets (every level; ``--train`` / ``--test`` tasks per level)."""
    from milepost.datasets import write_dataset
    from milepost.envs.levels import levels_for
    from milepost.envs.sudoku.dataset import build_dataset

    data = out / "data" / "sudoku4"
    if not (data / "manifest.json").exists():
        splits, manifest = build_dataset(
            4, list(levels_for("sudoku", 4)), args.train, args.test, args.data_seed, progress=args.progress
        )
        write_dataset(data, splits, manifest, overwrite=True)
    return data


# ---------------------------------------------------------------------------------------------------------------
# Statistics


def per_task_avg(folder: Path) -> dict[str, dict[str, float]]:
    """level -> task -> avg@n (mean success over the task's samples) of an evaluation folder's episodes."""
    from milepost.io import read_jsonl

    wins: dict[tuple[str, str], list[float]] = {}
    for row in read_jsonl(folder / "episodes.jsonl"):
        wins.setdefault((str(row["level"]), str(row["task_id"])), []).append(float(bool(row["success"])))
    out: dict[str, dict[str, float]] = {}
    for (level, task), values in sorted(wins.items()):
        out.setdefault(level, {})[task] = sum(values) / len(values)
    return out


def two_level_bootstrap(
    per_seed: Sequence[Sequence[float]], boot: int, rng: random.Random, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean over seeds of each seed's task mean, with a percentile interval from resampling
    the seeds and then the tasks within each drawn seed (both sources of spread: training and test tasks)."""
    groups = [list(g) for g in per_seed if len(g)]
    if not groups:
        return math.nan, math.nan, math.nan
    mean = sum(sum(g) / len(g) for g in groups) / len(groups)
    draws = []
    for _ in range(boot):
        total = 0.0
        for _ in groups:
            g = groups[rng.randrange(len(groups))]
            total += sum(g[rng.randrange(len(g))] for _ in g) / len(g)
        draws.append(total / len(groups))
    if not draws:
        return mean, mean, mean
    draws.sort()
    tail = (1.0 - confidence) / 2.0
    lo = draws[min(len(draws) - 1, math.floor(tail * len(draws)))]
    hi = draws[min(len(draws) - 1, math.ceil((1.0 - tail) * len(draws)) - 1)]
    return mean, lo, hi


def mean_range(values: Sequence[float]) -> dict[str, Any]:
    """Mean with a 95% t-interval across seeds (``evaluation.seeds.mean_interval``) and the values."""
    from milepost.evaluation.seeds import mean_interval

    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "values": []}
    m, lo, hi = mean_interval(vals)
    return {"mean": m, "lo": lo, "hi": hi, "values": vals}


# ---------------------------------------------------------------------------------------------------------------
# The report


def collect(out: Path, estimators: Sequence[str], seeds: Sequence[int], boot: int) -> dict[str, Any]:
    """Everything the report shows, from the run folders on disk (runs not finished are left out, and named)."""
    from milepost.tracking import read_metrics

    rng = random.Random(0)
    sft = {s: per_task_avg(out / "sft-start" / f"seed{s}") for s in seeds if _has(out / "sft-start" / f"seed{s}")}
    levels = sorted({lv for per in sft.values() for lv in per})
    arms: dict[str, Any] = {}
    missing = []
    for est in estimators:
        done = [s for s in seeds if (run_dir(out, est, s) / "done.json").exists()]
        missing += [f"{est}-seed{s}" for s in seeds if s not in done]
        if not done:
            continue
        evals = {s: per_task_avg(run_dir(out, est, s) / "eval") for s in done}
        levels = sorted(set(levels) | {lv for per in evals.values() for lv in per})
        avg = {}
        for lv in levels:
            m, lo, hi = two_level_bootstrap([list(evals[s].get(lv, {}).values()) for s in done], boot, rng)
            avg[lv] = {"mean": m, "lo": lo, "hi": hi, "per_seed": [_mean(evals[s].get(lv, {}).values()) for s in done]}
        # Gain over the SFT start at the long levels, paired by test task (the same test tasks in every evaluation).
        gains = []
        for s in done:
            # The SFT start at the same seed, else at the first seed evaluated (the same test tasks).
            start = sft.get(s) or (sft[min(sft)] if sft else None)
            if start is None:
                continue
            gains.append([evals[s][lv][t] - start[lv][t] for lv in LONG_LEVELS if lv in evals[s] for t in evals[s][lv]])
        gm, glo, ghi = two_level_bootstrap(gains, boot, rng) if gains else (math.nan,) * 3
        long_avg = two_level_bootstrap(
            [[v for lv in LONG_LEVELS for v in evals[s].get(lv, {}).values()] for s in done], boot, rng
        )
        curves = []
        for s in done:
            rows = [r for r in read_metrics(run_dir(out, est, s) / "metrics.jsonl") if r.get("phase") != "warmup"]
            curves.append([float(r["rollout/success"]) for r in rows if "rollout/success" in r])
        audits: dict[str, Any] = {}
        for which in ("first", "last"):
            per_seed = [_audit(run_dir(out, est, s) / "rollouts" / which) for s in done]
            audits[which] = {
                name: {
                    stat: mean_range([a["estimators"][name][stat] for a in per_seed])
                    for stat in ("spearman", "kendall")
                }
                | {
                    "interval_per_seed": [a["estimators"][name].get("spearman_interval") for a in per_seed],
                    # share of the turns that removed distance given a positive advantage (sign agreement)
                    "progress_positive": mean_range([a["estimators"][name]["sign"]["progress"] for a in per_seed]),
                }
                for name in AUDITED
            }
            audits[which]["success_rate"] = mean_range([a["success_rate"] for a in per_seed])
            audits[which]["turns"] = [a["turns"] for a in per_seed]
        timings = [json.loads((run_dir(out, est, s) / "done.json").read_text(encoding="utf-8")) for s in done]
        arms[est] = {
            "seeds": done,
            "avg4": avg,
            "long_avg4": dict(zip(("mean", "lo", "hi"), long_avg)),
            "long_gain_over_sft": {"mean": gm, "lo": glo, "hi": ghi},
            "curves": curves,
            "audit": audits,
            "timings": timings,
        }
    sft_avg = {}
    for lv in levels:
        m, lo, hi = two_level_bootstrap([list(sft[s].get(lv, {}).values()) for s in sft], boot, rng)
        sft_avg[lv] = {"mean": m, "lo": lo, "hi": hi}
    return {"levels": levels, "sft": {"seeds": sorted(sft), "avg4": sft_avg}, "arms": arms, "missing": missing}


def _has(folder: Path) -> bool:
    return (folder / "metrics.json").exists()


def _mean(values: Any) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else math.nan


def _audit(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "audit" / "credit.json").read_text(encoding="utf-8")))


def _pct(est: dict[str, float]) -> str:
    if math.isnan(est["mean"]):
        return "-"
    return f"{100 * est['mean']:.1f} [{100 * est['lo']:.0f}, {100 * est['hi']:.0f}]"


def _rho(est: dict[str, Any]) -> str:
    if math.isnan(est["mean"]):
        return "-"
    if len(est["values"]) < 2:  # one seed: no interval across seeds
        return f"{est['mean']:.2f}"
    return f"{est['mean']:.2f} [{max(-1.0, est['lo']):.2f}, {min(1.0, est['hi']):.2f}]"  # a correlation's range


def _share(est: dict[str, Any]) -> str:
    return "-" if math.isnan(est["mean"]) else f"{100 * est['mean']:.0f}"


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (a["hi"] < b["lo"] or b["hi"] < a["lo"])


def verdict(data: dict[str, Any]) -> list[str]:
    """What the numbers say about "higher correlation to A* learns faster at long distances" (computed, not
    written in advance): the estimators ordered by their own Spearman at the start and by the long-level gain."""
    arms = data["arms"]
    names = [n for n in arms if n in AUDITED]
    if len(names) < 2:
        return ["Fewer than two estimators finished: no comparison."]
    own = {n: arms[n]["audit"]["first"][n]["spearman"]["mean"] for n in names}
    gain = {n: arms[n]["long_gain_over_sft"] for n in names}
    by_rho = sorted(names, key=lambda n: -_nan_low(own[n]))
    by_gain = sorted(names, key=lambda n: -_nan_low(gain[n]["mean"]))
    import numpy as np

    from milepost.evaluation.credit import spearman

    rank_rho = spearman(
        np.array([_nan_low(own[n]) for n in names]), np.array([_nan_low(gain[n]["mean"]) for n in names])
    )
    pairs_overlap = all(overlap(gain[a], gain[b]) for i, a in enumerate(names) for b in names[i + 1 :])

    def versus_start(g: dict[str, float]) -> str:
        if g["lo"] > 0:
            return "better than the SFT start"
        if g["hi"] < 0:
            return "worse than the SFT start"
        return "not separable from the SFT start"

    lines = [
        "- Against the SFT start at the long levels (95% interval of the gain vs 0): "
        + "; ".join(f"{n} {versus_start(gain[n])}" for n in names)
        + "."
        + (
            ' No arm gained: here "learning faster" can only mean "losing least".'
            if all(gain[n]["mean"] <= 0 for n in names)
            else ""
        ),
        "- Ordered by their own correlation with A* at the start of training (Spearman on the first iteration's "
        "rollouts, mean over seeds; n/a: the estimator gave every turn the same advantage, as outcome-only ones "
        "do when every episode of a task succeeds): "
        + " > ".join(f"{n} ({'n/a' if math.isnan(own[n]) else f'{own[n]:.2f}'})" for n in by_rho)
        + ".",
        "- Ordered by the gain in avg@4 over the SFT start at the long levels "
        f"({', '.join(LONG_LEVELS)}; paired by test task): "
        + " > ".join(f"{n} ({100 * gain[n]['mean']:+.1f} pts)" for n in by_gain)
        + ".",
        f"- Rank agreement of the two orders over the {len(names)} estimators: Spearman {rank_rho:.2f} "
        f"({'same order' if by_rho == by_gain else 'not the same order'}; with {len(names)} points this is "
        "description, not a test).",
        "- The 95% intervals of the long-level gains "
        + (
            "all overlap pairwise: at this budget and with these seeds the data cannot separate the estimators' "
            "learning at long distances, so the expectation is neither confirmed nor refuted."
            if pairs_overlap
            else "do not all overlap: "
            + "; ".join(
                f"{a} vs {b} separated"
                for i, a in enumerate(names)
                for b in names[i + 1 :]
                if not overlap(gain[a], gain[b])
            )
            + "."
        ),
    ]
    return lines


def _nan_low(x: float) -> float:
    return -math.inf if x is None or math.isnan(x) else x


def report(data: dict[str, Any], meta: dict[str, Any]) -> str:
    levels = data["levels"]
    arms = data["arms"]
    lines = [
        "# Learning, measured: advantage estimators on 4x4 Sudoku (issue 27)",
        "",
        f"The demo's atomic RL arm (`configs/tiny-cpu/sudoku4_atomic.yaml`, sparse outcome reward, training levels "
        f"S2-S3, H_max 16) from `checkpoints/sudoku4-sft`, {meta['iterations']} iterations of "
        f"{meta['tasks_per_iter']} tasks x {meta['samples_per_task']} samples per run, one run per estimator and "
        f"training seed (seeds {', '.join(map(str, meta['seeds']))}, the same for every estimator); evaluation "
        f"n = k = 4 on {meta['eval_limit']} test tasks per level, sampling seed = training seed. Measured "
        f"{meta['date']} on the shared 2-core machine ({meta['load']}); wall time of the runs "
        f"{meta['wall_min']:.1f} min. Rush Hour learning is not in this table: it needs an SFT start that makes "
        "valid Rush Hour moves (helper h7's), which was not ready in this session.",
        "",
        "Arms: `paper` (the demo's arm as shipped), `gigpo` and `distance` (`rl.estimator`), and `grpo` (outcome "
        "only: the paper estimator with gamma 1, alpha 0 and group normalisation, so every turn of an episode gets "
        "its task-normalised outcome).",
        "",
        "## avg@4 by level (%)",
        "",
        "Mean over seeds; 95% interval from a two-level bootstrap (seeds, then test tasks within each seed). Last "
        f"column: the gain over the SFT start at {', '.join(LONG_LEVELS)}, paired by test task (the SFT start "
        f"evaluated at seed(s) {', '.join(map(str, data['sft']['seeds']))}; a seed without its own SFT evaluation is "
        "paired with the first one's).",
        "",
        "| arm | seeds | " + " | ".join(levels) + f" | gain at {'+'.join(LONG_LEVELS)} (pts) |",
        "| --- | ---: |" + " ---: |" * len(levels) + " ---: |",
    ]
    sft = data["sft"]
    lines.append(
        f"| SFT start | {len(sft['seeds'])} | " + " | ".join(_pct(sft["avg4"][lv]) for lv in levels) + " | 0 |"
    )
    for name, arm in arms.items():
        g = arm["long_gain_over_sft"]
        gain = "-" if math.isnan(g["mean"]) else f"{100 * g['mean']:+.1f} [{100 * g['lo']:+.0f}, {100 * g['hi']:+.0f}]"
        lines.append(
            f"| {name} | {len(arm['seeds'])} | "
            + " | ".join(_pct(arm["avg4"][lv]) if lv in arm["avg4"] else "-" for lv in levels)
            + f" | {gain} |"
        )
    lines += [
        "",
        "![avg@4 by level](learning-avg4.png)",
        "",
        "Per seed avg@4 at S5 (%): "
        + "; ".join(
            f"{n} " + " / ".join(f"{100 * v:.0f}" for v in a["avg4"]["S5"]["per_seed"])
            for n, a in arms.items()
            if "S5" in a["avg4"]
        )
        + ".",
        "",
        "## Training curves",
        "",
        "Rollout success on the training levels (S2-S3) per iteration, mean over seeds.",
        "",
        "![training curves](learning-curve.png)",
        "",
        "## The audit at the start and the end of training",
        "",
        "The credit audit (`milepost.evaluation.credit`) on each run's rollout episodes of its first iteration "
        "(the SFT policy: the same episodes for every arm at a seed) and of its last iteration (the trained "
        "policy), every estimator scored with the paper's settings against A* = d(s_t) - d(s_t+1) - c_t. Cells: "
        "Spearman (Kendall tau-b) mean over seeds, with the 95% t-interval across seeds of Spearman (clipped to "
        "[-1, 1]); each audit's own bootstrap interval over tasks is in `learning.json`.",
        "",
        "| arm | iteration | success | " + " | ".join(AUDITED) + " |",
        "| --- | --- | ---: |" + " --- |" * len(AUDITED),
    ]
    for name, arm in arms.items():
        for which, label in (("first", "first"), ("last", "last")):
            a = arm["audit"][which]
            cells = []
            for est in AUDITED:
                sp, kd = a[est]["spearman"], a[est]["kendall"]
                mark = "**" if est == name else ""
                cells.append(f"{mark}{_rho(sp)} ({kd['mean']:.2f}){mark}" if not math.isnan(sp["mean"]) else "-")
            lines.append(f"| {name} | {label} | {100 * a['success_rate']['mean']:.0f}% | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Bold: the estimator the arm trained with. Turns audited per run (first / last): "
        + "; ".join(
            f"{n} "
            + ", ".join(
                f"{first}/{last}" for first, last in zip(a["audit"]["first"]["turns"], a["audit"]["last"]["turns"])
            )
            for n, a in arms.items()
        )
        + ".",
        "",
        "Share of the turns that made progress (removed goal distance) that each estimator gave a positive "
        "advantage (%, mean over seeds): a correct move with a negative advantage is pushed down by the update.",
        "",
        "| arm | iteration | " + " | ".join(AUDITED) + " |",
        "| --- | --- |" + " ---: |" * len(AUDITED),
        *(
            f"| {name} | {which} | "
            + " | ".join(_share(arm["audit"][which][est]["progress_positive"]) for est in AUDITED)
            + " |"
            for name, arm in arms.items()
            for which in ("first", "last")
        ),
        "",
        "![audit correlation, start and end](learning-audit.png)",
        "",
        "## The expectation, tested",
        "",
        '"Estimators with higher correlation to A* learn faster at long distances." What this data says:',
        "",
        *verdict(data),
        "",
    ]
    if data["missing"]:
        lines += [
            f"Not finished (left out above): {', '.join(data['missing'])}. The same command resumes the experiment "
            "where it stopped (finished runs are skipped, a run in progress continues from its last checkpoint).",
            "",
        ]
    if any(len(a["seeds"]) < 2 for a in arms.values()):
        lines += [
            "With one seed an arm's intervals are over test tasks only (and its audit cells have no interval): the "
            "spread between training seeds, often as large as the gap between arms at this scale (CPU-NOTES), is "
            "not measured for it.",
            "",
        ]
    lines += [
        "Reproduce: `nice -n 10 python -m experiments.credit_learning --out runs/credit-learning "
        f"--iterations {meta['iterations']} --seeds {','.join(map(str, meta['seeds']))}` (resumable; "
        "`--report-only` rebuilds this page from the run folders).",
        "",
    ]
    return "\n".join(lines)


def plots(data: dict[str, Any], results: Path) -> list[str]:
    """The three PNGs beside ``learning.md``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels, arms = data["levels"], data["arms"]
    written = []
    rows = [("SFT start", data["sft"]["avg4"])] + [(n, a["avg4"]) for n, a in arms.items()]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(rows))
    for k, (name, avg) in enumerate(rows):
        xs = [i + (k - (len(rows) - 1) / 2) * width for i in range(len(levels))]
        m = [100 * avg[lv]["mean"] if lv in avg else math.nan for lv in levels]
        lo = [100 * (avg[lv]["mean"] - avg[lv]["lo"]) if lv in avg else 0 for lv in levels]
        hi = [100 * (avg[lv]["hi"] - avg[lv]["mean"]) if lv in avg else 0 for lv in levels]
        ax.bar(xs, m, width, yerr=[lo, hi], capsize=2, label=name, color="lightgrey" if k == 0 else None)
    ax.set_xticks(range(len(levels)), levels)
    ax.set_ylabel("avg@4 (%)")
    ax.set_xlabel("level (S1: 3-4 empty cells ... S5: 11-12)")
    ax.set_title("avg@4 by level per estimator (95% bootstrap over seeds and tasks)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, results / "learning-avg4.png"))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, arm in arms.items():
        curves = [c for c in arm["curves"] if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        mean = [sum(c[i] for c in curves) / len(curves) for i in range(n)]
        line = ax.plot(range(1, n + 1), mean, marker="o", label=f"{name} (mean of {len(curves)})")[0]
        for c in curves:
            ax.plot(range(1, len(c) + 1), c, color=line.get_color(), alpha=0.25, lw=0.8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("rollout success (training levels S2-S3)")
    ax.set_title("training curves: mean over seeds (thin: each seed)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, results / "learning-curve.png"))
    plt.close(fig)

    fig, axes = plt.subplots(1, max(1, len(arms)), figsize=(3.2 * max(1, len(arms)), 3.8), sharey=True, squeeze=False)
    for ax, (name, arm) in zip(axes[0], arms.items()):
        ys = list(range(len(AUDITED)))
        for which, marker, offset in (("first", "o", -0.15), ("last", "s", 0.15)):
            a = arm["audit"][which]
            m = [a[e]["spearman"]["mean"] for e in AUDITED]
            err = [
                [a[e]["spearman"]["mean"] - a[e]["spearman"]["lo"] for e in AUDITED],
                [a[e]["spearman"]["hi"] - a[e]["spearman"]["mean"] for e in AUDITED],
            ]
            ax.errorbar(
                m,
                [y + offset for y in ys],
                xerr=err,
                fmt=marker,
                capsize=2,
                label="first iteration" if which == "first" else "last iteration",
            )
        ax.set_yticks(ys, list(AUDITED))
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlim(-0.6, 1.1)
        ax.set_title(f"trained with {name}")
        ax.set_xlabel("Spearman with A*")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("credit audit on each run's rollouts: start vs end (mean over seeds, 95% t-interval)")
    fig.tight_layout()
    written.append(_save(fig, results / "learning-audit.png"))
    plt.close(fig)
    return written


def _strict(obj: Any) -> Any:
    """NaN (a level or statistic without data) as null: ``learning.json`` stays strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


def _save(fig: Any, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path.name


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} at the end"


def write_results(
    out: Path, results: Path, args: argparse.Namespace, estimators: Sequence[str], seeds: Sequence[int]
) -> str:
    from milepost.io import atomic_write_json, atomic_write_text

    data = collect(out, estimators, seeds, args.boot_eval)
    cfg = arm_config("paper", seeds[0], out / "data" / "sudoku4", args)
    try:
        wall = float(json.loads((out / "wall_time.json").read_text(encoding="utf-8"))["seconds"])
    except (OSError, ValueError, KeyError):
        wall = math.nan
    meta = {
        "iterations": cfg.rl.iterations,
        "tasks_per_iter": cfg.rl.tasks_per_iter,
        "samples_per_task": cfg.rl.samples_per_task,
        "eval_limit": cfg.eval.limit,
        "seeds": list(seeds),
        "date": time.strftime("%Y-%m-%d"),
        "load": _load(),
        "wall_min": wall / 60,
        "audited": list(AUDITED),
        "arms": {n: ARMS[n] for n in estimators},
    }
    results.mkdir(parents=True, exist_ok=True)
    atomic_write_json(results / "learning.json", _strict({"meta": meta, **data}))
    text = report(data, meta)
    atomic_write_text(results / "learning.md", text)
    if data["arms"]:
        plots(data, results)
    return text


# ---------------------------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/credit-learning", help="work folder (data, runs)")
    p.add_argument("--results", default=str(RESULTS), help="where learning.{md,json} and the plots go")
    p.add_argument("--estimators", default=",".join(ARMS), help=f"comma list of arms (default {','.join(ARMS)})")
    p.add_argument("--seeds", default="0,1,2", help="training seeds, the same for every estimator")
    p.add_argument("--iterations", type=int, default=8, help="RL iterations per run (default 8, the demo's)")
    p.add_argument("--tasks-per-iter", type=int, default=None, help="tasks per iteration (default: the config's 8)")
    p.add_argument("--eval-limit", type=int, default=None, help="test tasks per level (default: the config's 8)")
    p.add_argument("--train", type=int, default=400, help="training tasks per level in the dataset (demo: 400)")
    p.add_argument("--test", type=int, default=40, help="test tasks per level in the dataset (demo: 40)")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--boot", type=int, default=200, help="audit bootstrap resamples (default 200)")
    p.add_argument("--boot-eval", type=int, default=2000, help="avg@4 bootstrap resamples (default 2000)")
    p.add_argument(
        "--sft-every-seed",
        action="store_true",
        help="evaluate the SFT start at every seed (default: at the first seed only; the gains of every seed are "
        "then paired with it by test task)",
    )
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from finished runs")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    args.progress = not args.no_progress
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    from transformers.utils import logging as hf_logging

    from milepost.cli.demo import WallClock
    from milepost.progress import progress_bar

    args = parse_args(argv)
    estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]
    unknown = [e for e in estimators if e not in ARMS]
    if unknown or not estimators:
        print(f"error: --estimators: unknown arm {unknown[0] if unknown else '(none)'} (known: {', '.join(ARMS)})")
        return 2
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"error: --seeds: expected a comma list of integers, got {args.seeds!r}")
        return 2
    if args.iterations < 1 or not seeds:
        print("error: need --iterations >= 1 and at least one seed")
        return 2
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    out, results = Path(args.out), Path(args.results)
    if not args.report_only:
        clock = WallClock(out)
        data = build_data(out, args)
        # Seed by seed, so an interrupted session leaves whole seeds; the optional grpo arm after the others.
        first = [e for e in estimators if e != "grpo"]
        sft_seeds = seeds if args.sft_every_seed else seeds[:1]
        jobs = [job for s in seeds for job in [("sft", "", s)] * (s in sft_seeds) + [("rl", e, s) for e in first]]
        jobs += [("rl", "grpo", s) for s in seeds if "grpo" in estimators]
        bar = progress_bar(jobs, desc="credit-learning runs", unit="run", enabled=args.progress)
        for kind, est, seed in bar:
            t0 = time.perf_counter()
            if kind == "sft":
                eval_sft(out, seed, data, args)
            else:
                train_one(out, est, seed, data, args)
            clock.save()
            bar.write(f"  done: {kind} {est} seed {seed} ({(time.perf_counter() - t0) / 60:.1f} min; {_load()})")
        clock.save()
    text = write_results(out, results, args, estimators, seeds)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
