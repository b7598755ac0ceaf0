"""Did RL improve the puzzles it trained on? Each run of a ``seeded_arms`` work folder, and the start, evaluated on
the very training tasks that run played.

``seeded_arms`` judges an arm on held-out test puzzles. When every arm ends below its start there, two readings
remain: the update generalises badly (it helps the puzzles it saw and hurts others), or it does not even help the
puzzles it saw (the update itself points the wrong way). This script separates them. The trainer draws iteration
``it``'s tasks from ``random.Random(f"{seed}:{it}")`` over the training split at the run's levels
(``training.trainer.Trainer.collect``, no curriculum; ``.sample(pool, tasks_per_iter)``, or the curriculum's keys
under ``rl.task_draw: keys``), so the tasks a run played are recomputed exactly from its ``config.yaml``; a run
that logged its tasks (``metrics.jsonl``'s ``tasks``, every run since 2026-12-05, curriculum and MiRA runs
included) is read instead. Those tasks become a one-split dataset per seed, and the start and each named arm's
final model are evaluated on it with the run's own evaluation settings (sampling seed = training seed, n = 4).

Usage::

    python -m experiments.trained_tasks_eval --work runs/lr-sweep --arms atomic,random,distance --seeds 0,1,2 \\
        --out experiments/results/rushhour_rl_recipe_trained_tasks

Writes ``{out}.md`` and ``{out}.json``: avg@4 per policy and seed on the trained tasks, each arm minus the start
paired by seed with a t-interval, and each arm's gain minus the first arm's gain (for arms whose starts differ: a
slide-mode arm's start is evaluated in slide moves). The evaluations are kept under ``{work}/trained-tasks/``
and reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def run_config(run: Path) -> Any:
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    cfg = load_config(TrainConfig, run / "config.yaml", [])
    assert isinstance(cfg, TrainConfig)
    return cfg


def logged_tasks(run: Path | None) -> list[list[str]]:
    """The task ids each policy iteration of ``run`` played, as its ``metrics.jsonl`` rows name them (``tasks``);
    MiRA's critic warm-up rows are left out, because the policy is not updated on those episodes. Empty for a run
    that did not log them."""
    from milepost.io import read_jsonl

    log = run / "metrics.jsonl" if run is not None else None
    if log is None or not log.is_file():
        return []
    return [r["tasks"] for r in read_jsonl(log) if "tasks" in r and r.get("phase") != "warmup"]


def trained_tasks(cfg: Any, run: Path | None = None) -> list[Any]:
    """The distinct tasks a run's policy iterations played, in first-played order.

    A run that logged them (:func:`logged_tasks`) is read. An older run without the log is recomputed from
    ``Trainer.collect``'s draws, which only a run without a curriculum allows."""
    from milepost.training.curriculum import uniform_draw
    from milepost.training.setup import select_tasks

    played = logged_tasks(run)
    if played:
        if len(played) != cfg.rl.iterations:
            raise SystemExit(f"trained_tasks_eval: {run}: {len(played)} iterations logged, {cfg.rl.iterations} run")
        by_id = {t.task_id: t for t in select_tasks(cfg, "train", "")}  # every level: a curriculum's phases
        unknown = sorted({i for ids in played for i in ids} - set(by_id))
        if unknown:
            raise SystemExit(f"trained_tasks_eval: {run}: tasks {unknown[:3]} are not in the training split")
        return [by_id[i] for i in dict.fromkeys(i for ids in played for i in ids)]
    if cfg.rl.curriculum or cfg.mira.enabled:
        raise SystemExit(
            f"trained_tasks_eval: {cfg.name}: curriculum or MiRA runs draw their tasks otherwise, and this run did "
            "not log them (metrics.jsonl rows without 'tasks')"
        )
    pool = select_tasks(cfg, "train")
    seen: dict[str, Any] = {}
    for it in range(cfg.rl.iterations):
        rng = random.Random(f"{cfg.seed}:{it}")
        for task in uniform_draw(cfg.rl.task_draw, rng, pool, cfg.rl.tasks_per_iter):
            seen.setdefault(task.task_id, task)
    return list(seen.values())


def source_phrase(logged: list[bool]) -> str:
    """How the report says where the evaluated tasks came from: the runs' logs, the recomputed draws, or both."""
    recomputed = (
        "recomputed from its config: `random.Random(f'{seed}:{it}').sample(pool, tasks_per_iter)` per iteration"
    )
    read = "read from the run's log: `metrics.jsonl`'s `tasks` of its policy iterations"
    if all(logged):
        return read
    if not any(logged):
        return recomputed
    return f"{read}, where the run logged them; otherwise {recomputed}"


def evaluation_key(cfg: Any, tasks: list[Any]) -> str:
    """What the start's evaluation on ``tasks`` depends on besides the start: the tasks, the environment (a
    slide-mode run's start is evaluated in slide moves, an atomic one's in one-cell moves), the agent's prompt and
    sampling settings, the evaluation's settings and the sampling seed. Runs that differ only in training (learning
    rate, estimator, rewards) get the same key and share one evaluation of the start."""
    settings = {
        "tasks": [t.task_id for t in tasks],
        "env": dataclasses.asdict(cfg.env),
        "agent": dataclasses.asdict(cfg.agent),
        "eval": dataclasses.asdict(dataclasses.replace(cfg.eval, limit=None, every=0)),
        "seed": cfg.seed,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:10]


def evaluate_job(model: str, cfg_run: str, data: str, out: str, label: str) -> str:
    """One evaluation in a worker process (one torch thread)."""
    import torch

    from milepost.backends.hf import HFBackend
    from milepost.training.trainer import evaluate_policy

    torch.set_num_threads(1)
    if not (Path(out) / "metrics.json").exists():
        cfg = run_config(Path(cfg_run))
        cfg = dataclasses.replace(cfg, data=data, eval=dataclasses.replace(cfg.eval, limit=None))
        evaluate_policy(cfg, HFBackend(model), Path(out), label, progress=False)
    return out


def paired(per_seed: list[float]) -> dict[str, Any]:
    """A paired difference: its mean with a 95% t-interval over the seeds, and each seed's value."""
    from milepost.evaluation.seeds import mean_interval

    m, lo, hi = mean_interval(per_seed)
    return {"mean": m, "lo": lo, "hi": hi, "per_seed": per_seed}


def add_gain_minus_first(rows: dict[str, dict[str, Any]]) -> None:
    """Adds ``gain_minus_first`` to every arm after the first: each seed's gain (``final - start``) minus the first
    arm's gain under that seed, with a t-interval over the seeds. Arms whose starts differ (a slide-mode arm's start
    is the start in slide moves) are compared by what training added."""
    first = next(iter(rows.values()))["minus_start"]["per_seed"]
    for r in list(rows.values())[1:]:
        r["gain_minus_first"] = paired([a - b for a, b in zip(r["minus_start"]["per_seed"], first)])


def difference_cell(d: dict[str, Any]) -> str:
    """``final - start`` in points: mean, t-interval and ``*`` when it excludes 0, then each seed's value; one
    seed gets no interval (``mean_interval`` of one value is the value itself, which would read as resolved)."""
    from experiments.seeded_arms import signed_interval

    per = ", ".join(f"{100 * x:+.1f}" for x in d["per_seed"])
    if len(d["per_seed"]) < 2:
        return f"{per} (one seed, no interval)"
    return f"{signed_interval(d['mean'], d['lo'], d['hi'])} ({per})"


def avg(folder: Path) -> float:
    """avg@4 of an evaluation folder over all its tasks (its levels weighted by their task counts)."""
    from milepost.evaluation.compare import load_levels

    _, levels = load_levels(folder / "metrics.json")
    return sum(lv.avg.value * lv.tasks for lv in levels) / sum(lv.tasks for lv in levels)


def plot(path: Path, rows: dict[str, dict[str, Any]], seeds: list[int]) -> None:
    """Start and final avg@4 per arm, every seed as a line from the start to the final model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rows), 3.6))
    for i, r in enumerate(rows.values()):
        for j, (a, b) in enumerate(zip(r["start"], r["final"])):
            ax.plot(
                [i - 0.2, i + 0.2],
                [100 * a, 100 * b],
                "-o",
                color=f"C{j}",
                ms=4,
                label=f"seed {seeds[j]}" if i == 0 else None,
            )
    ax.set_xticks(range(len(rows)), [f"{arm}\nstart -> final" for arm in rows], fontsize=8)
    ax.set_ylabel("avg@4 on the run's training tasks (%)")
    ax.set_title("Did RL improve the puzzles it trained on?", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from milepost.datasets import write_dataset
    from milepost.io import atomic_write_text

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="a seeded_arms work folder")
    parser.add_argument("--arms", required=True, help="comma list of arm names (runs {arm}-s{seed})")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", required=True, help="result stem (.md and .json are written)")
    args = parser.parse_args(argv)
    work, arms, seeds = Path(args.work), args.arms.split(","), [int(s) for s in args.seeds.split(",")]
    base = work / "trained-tasks"
    jobs: list[tuple[str, str, str, str, str]] = []
    counts: dict[int, dict[str, int]] = {}
    start_runs: dict[str, Path] = {}
    logged: list[bool] = []
    for seed in seeds:
        runs = [work / f"{arm}-s{seed}" for arm in arms]
        missing = [str(r) for r in runs if not (r / "final" / "config.json").exists()]
        if missing:
            raise SystemExit(f"trained_tasks_eval: no finished run at {', '.join(missing)}")
        start = str(run_config(runs[0]).model)
        counts[seed] = {}
        for run in runs:
            cfg = run_config(run)
            if str(cfg.model) != start:
                raise SystemExit(f"trained_tasks_eval: {run} starts from {cfg.model}, {runs[0]} from {start}")
            tasks = trained_tasks(cfg, run)
            logged.append(bool(logged_tasks(run)))
            counts[seed][run.name] = len(tasks)
            # Runs of one seed that drew the same tasks share one dataset; those that also evaluate them alike
            # share one evaluation of the start.
            key = evaluation_key(cfg, tasks)
            tasks_hash = hashlib.sha256(" ".join(t.task_id for t in tasks).encode()).hexdigest()[:10]
            data = base / f"data-s{seed}-{tasks_hash}"
            if not data.exists():
                write_dataset(data, {"test": [dataclasses.replace(t, split="test") for t in tasks]}, {})
            start_runs[run.name] = base / f"start-s{seed}-{key}"
            jobs.append((str(run / "final"), str(run), str(data), str(base / f"{run.name}-final"), run.name))
            if not any(j[3] == str(start_runs[run.name]) for j in jobs):
                jobs.append((start, str(run), str(data), str(start_runs[run.name]), "start"))
    with ProcessPoolExecutor(args.workers) as pool:
        for done in pool.map(evaluate_job, *zip(*jobs)):
            print(f"trained_tasks_eval: {done}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for arm in arms:
        final = [avg(base / f"{arm}-s{s}-final") for s in seeds]
        begun = [avg(start_runs[f"{arm}-s{s}"]) for s in seeds]
        diff = [f - s for f, s in zip(final, begun)]
        rows[arm] = {
            "final": final,
            "start": begun,
            "minus_start": paired(diff),
            "tasks": [counts[s][f"{arm}-s{s}"] for s in seeds],
        }
    base_arm = arms[0]
    add_gain_minus_first(rows)
    out = Path(args.out)
    lines = [
        "# Did RL improve the puzzles it trained on?",
        "",
        f"Command: `python -m experiments.trained_tasks_eval {' '.join(sys.argv[1:] if argv is None else argv)}`.",
        "",
        "Each run's final model and the start, evaluated on the distinct training tasks that run played ("
        + source_phrase(logged)
        + "), with the run's evaluation settings (n = 4, sampling seed = training seed). avg@4 in %; the "
        "difference is paired by "
        "seed with a 95% t-interval over the seeds (* = it excludes 0). The last column is each arm's gain minus "
        f"`{base_arm}`'s gain, paired by seed: what training added, for arms whose starts differ.",
        "",
        f"![start and final per seed]({out.name}.png)",
        "",
        f"| arm | tasks per seed | start | final | final - start | gain - {base_arm}'s gain |",
        "|---|---|---|---|---|---|",
    ]
    for arm, r in rows.items():
        cell = difference_cell(r["minus_start"])
        rel = difference_cell(r["gain_minus_first"]) if "gain_minus_first" in r else "-"
        lines.append(
            f"| {arm} | {', '.join(map(str, r['tasks']))} | {' / '.join(f'{100 * x:.1f}' for x in r['start'])} | "
            f"{' / '.join(f'{100 * x:.1f}' for x in r['final'])} | {cell} | {rel} |"
        )
    plot(out.with_suffix(".png"), rows, seeds)
    atomic_write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")
    atomic_write_text(out.with_suffix(".json"), json.dumps({"arms": rows, "seeds": seeds}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
