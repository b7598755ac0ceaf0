"""Arms over several training seeds, from one start, at an equal episode budget: the seeds' comparisons with power.

Each arm is a training config (``configs/tiny-cpu/*.yaml``) plus overrides; each (arm, seed) is one RL run from
``--start`` on ``--data``'s training split at ``--levels``, then one evaluation on the test split at
``--eval-levels`` (``--eval-limit`` tasks per level, n = 4 samples). The start itself is evaluated with the same
settings under every seed's sampling seed: one policy's score moves with the sampling seed alone (on Rush Hour 7-9,
40 tasks x 4, one start gave 8.1, 1.9 and 5.0%), and an arm is read against that spread. The report gives, per
arm and level, the mean avg@4 over seeds with a 95% t-interval across seeds (``milepost.evaluation.seeds``), each
seed's value, and each arm's difference from the first arm as a paired
t-interval over seeds (a seed shares its evaluation tasks and sampling seed across arms). Equal budget: an arm
whose MiRA critics spend warm-up batches gets that many fewer policy updates, so every arm plays the same number
of training episodes (the sparse arm gets the MiRA warm-up count as extra iterations).

Usage (resumable: finished runs are kept in ``--work`` and skipped)::

    python experiments/seeded_arms.py --name rushhour_mira --work runs/cmp-mira \\
        --start checkpoints/rushhour-sft-steps --data runs/sft-starts2/data --levels 7-9 \\
        --eval-levels 4-6,7-9 --eval-limit 40 --seeds 0,1,2 --iterations 8 --workers 2 \\
        --arm sparse rushhour_atomic.yaml --arm mira rushhour_mira.yaml \\
        --arm mira-no-potential rushhour_mira.yaml mira.potential=false

Writes ``experiments/results/{name}.{md,json}``, ``{name}.png`` (mean and interval per arm and level, every seed
as a dot), ``{name}_training.png`` (each seed's rollout success) and ``{name}_training_subgoals.png`` (subgoals
reached per rollout). The numbers are what the run measured. Several invocations may share ``--work`` (another arm
added later, side by side): each keeps its job times in ``{work}/invocation-{name}-{start}.json``, and
``--report-only --timings-from FILE ...`` writes one report over all of them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shlex
import sys
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from milepost.training.curriculum import draw_stream  # which task stream an arm's runs draw from

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
CONFIGS = ROOT / "configs" / "tiny-cpu"


def config_path(config: str) -> Path:
    """An arm's config: a path, or a file name in ``configs/tiny-cpu/``."""
    return Path(config) if Path(config).is_file() else CONFIGS / config


def arm_config(arm: list[str], seed: int, args: argparse.Namespace, warmup: int) -> Any:
    """The TrainConfig of one (arm, seed): the arm's file and overrides, then the experiment's shared settings."""
    import dataclasses

    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    _, config, *overrides = arm
    shared = [
        f"model={args.start}",
        f"data={args.data}",
        f"seed={seed}",
        "threads=1",
        f"levels={args.levels}",
        f"rl.tasks_per_iter={args.tasks_per_iter}",
        f"eval.limit={args.eval_limit}",
        f"eval.levels={args.eval_levels}",
        "eval.n=4",
        "eval.ks=[1,4]",
        "checkpoint_every=2",
    ]
    cfg = load_config(TrainConfig, config_path(config), shared + list(overrides) + list(args.set))
    assert isinstance(cfg, TrainConfig)
    if cfg.mira.enabled and cfg.mira.warmup_iterations != warmup:
        raise SystemExit(
            f"seeded_arms: arm {arm[0]} warms its critics up {cfg.mira.warmup_iterations} batches, "
            f"another MiRA arm {warmup}: the budgets would differ"
        )
    extra = 0 if cfg.mira.enabled else warmup
    rl = cfg.rl
    phases = list(rl.curriculum)
    if phases:  # a horizon curriculum keeps its phases' proportions over the shared budget; the last gets the extra
        total = sum(p.iterations for p in phases)
        phases = [dataclasses.replace(p, iterations=p.iterations * args.iterations // total) for p in phases]
        rest = args.iterations - sum(p.iterations for p in phases[:-1]) + extra
        phases[-1] = dataclasses.replace(phases[-1], iterations=rest)
    # iterations and phases in one replace: RLConfig checks that they add up
    rl = dataclasses.replace(rl, iterations=args.iterations + extra, curriculum=phases)
    return dataclasses.replace(cfg, rl=rl)


def saved_configs(runs: dict[str, list[Path]]) -> dict[str, Any]:
    """Each arm's TrainConfig as its first run saved it (arms without a saved config are left out)."""
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    out: dict[str, Any] = {}
    for arm, dirs in runs.items():
        saved = [d / "config.yaml" for d in dirs if (d / "config.yaml").is_file()]
        if saved:
            out[arm] = load_config(TrainConfig, saved[0])
    return out


def arm_streams(configs: dict[str, Any]) -> dict[str, str]:
    """Each arm's draw stream, from its saved config."""
    return {arm: draw_stream(cfg) for arm, cfg in configs.items()}


def draws_sentence(streams: dict[str, str]) -> str:
    """The report's warning when the arms draw their tasks from different streams (empty when they share one)."""
    if len(set(streams.values())) <= 1:
        return ""
    how = {"keys": "the curriculum's weighted keys", "sample": "`random.sample`"}
    groups = [
        f"{', '.join(f'`{a}`' for a, s in streams.items() if s == stream)} by {how[stream]}"
        for stream in dict.fromkeys(streams.values())
    ]
    return (
        f"Task draws: {'; '.join(groups)}. Arms on different streams trained on different random puzzles under the "
        "same seed, so their differences include the draw; `rl.task_draw: keys` gives a uniform arm the "
        "curriculum's draws (docs/mira.md).\n"
    )


# Keys every arm may differ in without confounding: its name, the seed (one row per seed), its policy iterations
# (the critics' warm-up, stated in the report) and its task stream (draws_sentence's own line).
EXPLAINED_SETTINGS = ("name", "seed", "rl.iterations", "rl.task_draw")


def arm_settings(configs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each arm's settings as dotted keys (``{"rl.alpha": 0.2, ...}``), from its saved config. An arm without MiRA
    keeps only ``mira.enabled`` of the MiRA block: the rest does not act on its training."""
    import dataclasses

    from milepost.tracking import flatten

    out: dict[str, dict[str, Any]] = {}
    for arm, cfg in configs.items():
        flat = flatten(dataclasses.asdict(cfg))
        if not flat["mira.enabled"]:
            flat = {k: v for k, v in flat.items() if not k.startswith("mira.") or k == "mira.enabled"}
        out[arm] = flat
    return out


def settings_table(settings: dict[str, dict[str, Any]]) -> str:
    """The report's table of the settings in which the arms differ, beyond those the report explains itself: what
    each comparison changes, confounds included (a step term one arm has and the other lacks). Empty with fewer
    than two arms or no difference. An arm that lacks a key (the MiRA block of an arm without MiRA) shows "-"."""
    if len(settings) < 2:
        return ""
    keys = dict.fromkeys(k for flat in settings.values() for k in flat if k not in EXPLAINED_SETTINGS)
    differ = [k for k in keys if len({repr(flat[k]) for flat in settings.values() if k in flat}) > 1]
    if not differ:
        return ""
    from milepost.tables import md_row, md_rule

    head = ["setting", *(f"`{arm}`" for arm in settings)]
    rows = [md_row(head), md_rule(len(head))]
    for k in differ:
        rows.append(md_row([f"`{k}`", *(str(flat[k]) if k in flat else "-" for flat in settings.values())]))
    return (
        "Settings in which the arms differ (from the config each arm's first run saved; the name, seed, iteration "
        "count and task stream are stated above):\n\n" + "\n".join(rows) + "\n"
    )


def zero_gradient_updates(runs: dict[str, list[Path]]) -> dict[str, list[int]]:
    """Each arm's policy updates whose gradient was exactly zero, and all its updates, over its runs' training logs
    (``train/grad_norm`` per iteration; a MiRA warm-up batch has none). Under sparse RL a batch in which every
    episode earned the same reward gives every advantage 0 and no gradient; the optimiser then moves the weights
    only by the momentum of earlier updates, if there were any."""
    from milepost.tracking import read_metrics

    out: dict[str, list[int]] = {}
    for arm, dirs in runs.items():
        norms = [
            float(r["train/grad_norm"])
            for d in dirs
            if (d / "metrics.jsonl").is_file()
            for r in read_metrics(d / "metrics.jsonl")
            if "train/grad_norm" in r
        ]
        if norms:
            out[arm] = [sum(n == 0.0 for n in norms), len(norms)]
    return out


def zero_gradient_sentence(counts: dict[str, list[int]]) -> str:
    """The report's line on updates that moved nothing (empty when every update had a gradient)."""
    if not any(zero for zero, _ in counts.values()):
        return ""
    each = ", ".join(f"`{arm}` {zero} of {total}" for arm, (zero, total) in counts.items())
    return (
        "Policy updates with a zero gradient, over all seeds (every advantage 0, as in a sparse-reward batch whose "
        f"episodes all earned the same reward, or every turn masked by the importance weights): {each}.\n"
    )


def arm_mode(arm: list[str], args: argparse.Namespace, modes: list[str], warmup: int) -> str:
    """The action mode an arm plays in (its config read only when the arms use more than one mode)."""
    if len(modes) == 1:
        return modes[0]
    return str(arm_config(arm, int(str(args.seeds).split(",")[0]), args, warmup).env.action_mode)


def signed_interval(m: float, lo: float, hi: float) -> str:
    """A difference of shares in points with its interval, ``*`` when the interval excludes 0: ``"-2.9 [-5, -1] *"``."""
    return f"{100 * m:+.1f} [{100 * lo:+.0f}, {100 * hi:+.0f}]" + (" *" if lo > 0 or hi < 0 else "")


def start_means(
    start_seeds: dict[str, dict[int, dict[str, dict[str, float]]]], levels: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per action mode and level, the start's avg@4 over the sampling seeds it was evaluated under: mean, 95%
    t-interval and the values (a mode or level with no evaluation is left out)."""
    from milepost.evaluation.seeds import mean_interval

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mode, by_seed in start_seeds.items():
        for lv in levels:
            vals = [v[lv]["avg"] for v in by_seed.values() if lv in v]
            if vals:
                m, lo, hi = mean_interval(vals)
                out.setdefault(mode, {})[lv] = {"mean": m, "lo": lo, "hi": hi, "values": vals}
    return out


def minus_start(arm: dict[int, float], start: dict[int, float]) -> dict[str, Any] | None:
    """An arm's value (avg@4, step accuracy) minus the start's, paired by seed (the arm's seed s and the start under
    sampling seed s share the test tasks and the sampling seed), over the seeds both have: mean, 95% t-interval and
    the differences; None with fewer than 2 such seeds, or a value that is NaN."""
    from milepost.evaluation.seeds import mean_interval

    d = [arm[s] - start[s] for s in arm if s in start]
    if len(d) < 2 or any(math.isnan(x) for x in d):
        return None
    m, lo, hi = mean_interval(d)
    return {"mean": m, "lo": lo, "hi": hi, "values": d}


TAKEN = "(taken by another invocation)"


def start_dir(work: Path, mode: str, seed: int, first: int) -> Path:
    """The start's evaluation folder in action mode ``mode`` under sampling seed ``seed``: ``start-{mode}`` for
    the first seed (the name of runs made before the start had one evaluation per seed), else
    ``start-{mode}-s{seed}``."""
    return work / (f"start-{mode}" if seed == first else f"start-{mode}-s{seed}")


def run_job(
    arm: list[str] | None, seed: int, arg_dict: dict[str, Any], warmup: int, mode: str = ""
) -> tuple[str, float]:
    """One job in a worker process: evaluate the start in action mode ``mode`` (``arm`` None, with the first
    arm of that mode's settings), or train and evaluate one (arm, seed)."""
    import torch
    from transformers.utils import logging as hf_logging

    from milepost.backends.hf import HFBackend
    from milepost.io import RunLock
    from milepost.training.trainer import evaluate_policy, train_rl

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    t = time.perf_counter()
    args = argparse.Namespace(**arg_dict)
    work = Path(args.work)
    if arm is None:
        cfg = next(c for a in args.arm if (c := arm_config(a, seed, args, warmup)).env.action_mode == mode)
        target = start_dir(work, mode, seed, int(args.seeds.split(",")[0]))
        if not (target / "metrics.json").exists():
            evaluate_policy(cfg, HFBackend(args.start), target, f"start ({mode})", progress=False)
        return target.name, time.perf_counter() - t
    cfg = arm_config(arm, seed, args, warmup)
    run_dir = work / f"{arm[0]}-s{seed}"
    final = run_dir / "final"
    if (run_dir / "eval" / "metrics.json").exists():
        return f"{arm[0]}-s{seed}", time.perf_counter() - t
    # Invocations may share --work (seeds split between them): a run is trained by one process at a time.
    lock = RunLock(run_dir)
    if not lock.acquire():
        return f"{arm[0]}-s{seed} {TAKEN}", 0.0
    try:
        if not (final / "config.json").exists():
            final = train_rl(cfg, run_dir, resume=(run_dir / "checkpoints" / "latest").exists(), progress=False)
        evaluate_policy(cfg, HFBackend(final), run_dir / "eval", arm[0], progress=False)
    finally:
        lock.release()
    return f"{arm[0]}-s{seed}", time.perf_counter() - t


def episode_values(ep: dict[str, Any]) -> tuple[float, float, float]:
    """(success, subgoal share, outcome score) of one ``episodes.jsonl`` record. The subgoal share is the
    evaluation's (``milepost.evaluation.metrics``); the outcome score is the sum of the outcome terms it earned:
    its success on Sudoku and Rush Hour, WebShop's graded reward of the purchase on the web shop."""
    k = ep["meta"].get("num_subgoals")
    share = ep["meta"].get("subgoals_completed", 0) / k if k else float(ep["success"])
    return float(ep["success"]), share, sum(t["reward_terms"].get("outcome", 0.0) for t in ep["turns"])


def task_values(episodes: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per level and task, the mean over its samples of :func:`episode_values`, backend failures left out as
    the evaluation's metrics leave them out."""
    from milepost.io import read_jsonl

    rows: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for ep in read_jsonl(episodes):
        if ep["termination"] == "backend_error":
            continue
        rows.setdefault(ep["level"], {}).setdefault(ep["task_id"], []).append(episode_values(ep))
    return {
        lv: {
            task: {key: sum(v[i] for v in vals) / len(vals) for i, key in enumerate(("avg", "subgoals", "score"))}
            for task, vals in tasks.items()
        }
        for lv, tasks in rows.items()
    }


def by_task_difference(
    arm: list[dict[str, dict[str, float]]], base: list[dict[str, dict[str, float]]], key: str
) -> dict[str, Any] | None:
    """``arm`` - ``base`` in ``key`` per test task (each a seed's tasks at one level), averaged over the seeds, with
    a 95% bootstrap interval over the tasks: every (arm, seed) plays the same tasks with the same sampling seed,
    so this interval is about the test tasks with the training seeds held fixed (the t-interval over seeds is
    about the training seed). None without a task every seed of both arms played."""
    from milepost.evaluation.metrics import bootstrap_interval

    common = set.intersection(*(set(d) for d in arm + base)) if arm and base else set()
    if not common:
        return None
    values = [sum(a[t][key] - b[t][key] for a, b in zip(arm, base)) / len(arm) for t in sorted(common)]
    lo, hi = bootstrap_interval(values, resamples=10000)
    return {"mean": sum(values) / len(values), "lo": lo, "hi": hi, "tasks": len(values)}


def run_task_values(run: Path) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`task_values` of a run's evaluation; empty without its episodes."""
    from milepost.evaluation.compare import find_metrics

    found = find_metrics(run)
    episodes = found.parent / "episodes.jsonl" if found is not None else None
    return task_values(episodes) if episodes is not None and episodes.is_file() else {}


def level_values(
    run: Path, per_task: dict[str, dict[str, dict[str, float]]] | None = None
) -> dict[str, dict[str, float]]:
    """Per level of a run's evaluation: avg@4, pass@4, step accuracy, subgoal share and outcome score (from
    ``per_task``, the run's :func:`run_task_values`, read here when not given)."""
    from milepost.evaluation.compare import find_metrics, load_levels

    found = find_metrics(run)
    if found is None:
        raise SystemExit(f"seeded_arms: {run} has no evaluation")
    _, rows = load_levels(found)
    per_task = run_task_values(run) if per_task is None else per_task
    scores = {lv: sum(t["score"] for t in tasks.values()) / len(tasks) for lv, tasks in per_task.items()}
    return {
        r.level: {
            "avg": r.avg.value,
            "pass4": r.pass_at["4"].value if "4" in r.pass_at else float("nan"),
            "step_accuracy": r.step_accuracy if r.step_accuracy is not None else float("nan"),
            "subgoals": r.subgoal_fraction,
            "score": scores.get(r.level, float("nan")),
            "tasks": r.tasks,
        }
        for r in rows
    }


def plot(path: Path, data: dict[str, Any], start: dict[str, dict[str, Any]], levels: list[str], title: str) -> None:
    """Mean and interval per arm and level, every seed as a dot; ``start`` (level -> mean and values over the
    sampling seeds) as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(data)
    fig, axes = plt.subplots(
        1, len(levels), figsize=(3.2 + 2.2 * len(levels) * max(1, len(arms) / 4), 4), squeeze=False
    )
    for ax, level in zip(axes[0], levels):
        for i, arm in enumerate(arms):
            est = data[arm]["levels"].get(level)
            if est is None:
                continue
            mean, lo, hi = (100 * est[k] for k in ("mean", "lo", "hi"))
            ax.bar(i, mean, color=f"C{i}", alpha=0.6)
            ax.errorbar(i, mean, yerr=[[mean - max(lo, 0)], [min(hi, 100) - mean]], color="black", capsize=4)
            vals = [100 * v for v in est["values"]]
            ax.scatter(
                [i + (j - (len(vals) - 1) / 2) * 0.12 for j in range(len(vals))], vals, color="black", s=10, zorder=3
            )
        if level in start:
            n = len(start[level]["values"])
            ax.axhline(
                100 * start[level]["mean"],
                color="grey",
                linestyle="--",
                linewidth=1,
                label="start" + (f" (mean of {n} seeds)" if n > 1 else ""),
            )
            ax.legend(fontsize=8)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"level {level}")
        ax.set_ylabel("avg@4 (%)")
        ax.grid(axis="y", alpha=0.3)
    # about 11 characters per inch at this size: a long title is wrapped, not cut at the figure's edges
    fig.suptitle(textwrap.fill(title, width=max(40, int(11 * fig.get_figwidth()))), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    """The command line (also parsed back from a report's recorded command by ``experiments/start_spread.py``)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True, help="stem of the result files in experiments/results/")
    p.add_argument("--title", default=None)
    p.add_argument("--work", required=True)
    p.add_argument("--start", required=True, help="model directory every arm starts from")
    p.add_argument("--data", required=True, help="dataset folder (train split for RL, test split for evaluation)")
    p.add_argument("--levels", required=True, help="training levels")
    p.add_argument("--eval-levels", required=True)
    p.add_argument("--eval-limit", type=int, default=40)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iterations", type=int, default=8, help="policy iterations per arm (MiRA warm-up aside)")
    p.add_argument("--tasks-per-iter", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE override for every arm")
    p.add_argument(
        "--arm",
        action="append",
        nargs="+",
        required=True,
        metavar="NAME CONFIG [KEY=VALUE ...]",
        help="an arm: its name, its config (in configs/tiny-cpu/, or a path) and overrides; the first is the baseline",
    )
    p.add_argument("--report-only", action="store_true", help="rewrite the report from the finished runs")
    p.add_argument(
        "--timings-from",
        nargs="*",
        default=[],
        help="the JSON files of earlier invocations on these runs (their job times, walls and load averages), reported "
        "beside this invocation's; with --report-only, the invocations that made the runs",
    )
    p.add_argument(
        "--reading",
        default=None,
        help="a Markdown file of hand-written reading, kept at the end of the report when it is rewritten",
    )
    return p


def check_arms(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Checks the arms and the start (one-line errors) and returns the MiRA critic warm-up every arm's budget
    accounts for and the action modes the arms use, in order of first use (the start is evaluated in each)."""
    from milepost.config import load_config
    from milepost.errors import InputError
    from milepost.training.config import TrainConfig

    for arm in args.arm:
        if len(arm) < 2:
            raise SystemExit(f"seeded_arms: --arm {arm[0]}: needs a name and a config")
    names = [a[0] for a in args.arm]
    if len(set(names)) != len(names):
        raise SystemExit(f"seeded_arms: arm names repeat: {names}")
    if not (Path(args.start) / "config.json").is_file():
        raise SystemExit(f"seeded_arms: --start {args.start}: no model directory (config.json) there")
    warmups, modes = [], []
    for arm in args.arm:
        try:  # fails early on a bad arm, in one line
            cfg = load_config(TrainConfig, config_path(arm[1]), list(arm[2:]) + list(args.set))
        except InputError as exc:
            raise SystemExit(f"seeded_arms: arm {arm[0]}: {exc}") from None
        if cfg.mira.enabled:
            warmups.append(cfg.mira.warmup_iterations)
        if cfg.env.action_mode not in modes:
            modes.append(cfg.env.action_mode)
    return max(warmups, default=0), modes


def save_invocation(
    work: Path, name: str, timings: dict[str, float], wall: float, span: list[float], load: list[float]
) -> Path:
    """This invocation's job times, wall time, epoch span and load averages, kept in ``work`` as
    ``invocation-{name}-{start}.json`` in the shape ``--timings-from`` reads, so a report over several invocations
    has every job's time even when this one ended without a report (a job left to another invocation)."""
    from milepost.io import atomic_write_json

    path = work / f"invocation-{name}-{int(span[0])}.json"
    atomic_write_json(path, {"timings_s": timings, "walls_s": [wall], "spans_s": [span], "load": load})
    return path


def read_invocations(
    files: list[str],
) -> tuple[dict[str, float], list[float], list[list[float] | None], list[float]]:
    """Job times, wall times, epoch spans and load averages of the invocations recorded in ``files`` (a report's
    JSON, or a ``save_invocation`` record); a job in several keeps its longest time, since one skipped as finished
    reports about 0 s."""
    timings: dict[str, float] = {}
    walls: list[float] = []
    spans: list[list[float] | None] = []
    load: list[float] = []
    for f in files:
        made = json.loads(Path(f).read_text(encoding="utf-8"))
        for key, secs in made["timings_s"].items():
            timings[key] = max(secs, timings.get(key, 0.0))
        made_walls = made.get("walls_s", [made.get("wall_s", 0.0)])
        walls += made_walls
        spans += made.get("spans_s", [None] * len(made_walls))  # files written before spans were kept
        load += made["load"]
    return timings, walls, spans, load


def main() -> None:
    args = build_parser().parse_args()
    warmup, modes = check_arms(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    arg_dict = vars(args)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    began = time.time()  # the epoch span, so a report over several invocations can tell whether they overlapped
    load = [os.getloadavg()[0]]
    taken: list[str] = []
    record: Path | None = None  # this invocation's job times, when it ran jobs
    if not args.report_only:
        # seed-major order, so a run stopped for time has whole seeds; each seed's arms before the start's
        # evaluation under that seed, so the first paired comparison is the first result
        jobs = [job for s in seeds for job in [(a, s, "") for a in args.arm] + [(None, s, m) for m in modes]]
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = {pool.submit(run_job, a, s, arg_dict, warmup, m): (a, s) for a, s, m in jobs}
            for fut in as_completed(futures):
                key, secs = fut.result()
                if key.endswith(TAKEN):
                    taken.append(key.split()[0])
                    print(f"seeded_arms: {key}: left to it", flush=True)
                    continue
                timings[key] = secs
                load.append(os.getloadavg()[0])
                print(f"seeded_arms: {key} done in {secs / 60:.1f} min (load {load[-1]:.1f})", flush=True)
        record = save_invocation(work, args.name, timings, time.perf_counter() - started, [began, time.time()], load)
        if taken:
            raise SystemExit(
                f"seeded_arms: {', '.join(taken)} run in another invocation; rerun with --report-only when it ends, "
                f"with --timings-from {record} and the other invocation's record"
            )
    walls = [time.perf_counter() - started]
    spans: list[list[float] | None] = [[began, time.time()]]
    if args.timings_from:  # earlier invocations on these runs: their times beside this one's, if it ran jobs
        timings, walls, spans, load = read_invocations([*args.timings_from, *([str(record)] if record else [])])
    from milepost.errors import InputError

    try:
        write_report(args, seeds, modes, warmup, timings, walls, load or [0.0], spans=spans)
    except InputError as exc:  # a run not evaluated yet (--report-only while it trains): one line, not a traceback
        raise SystemExit(f"seeded_arms: {exc}") from None


def span(lo: float, hi: float) -> str:
    """``lo-hi points`` rounded to whole points, one number when both round alike ("1 point", not "1-1 points")."""
    a, b = f"{lo:.0f}", f"{hi:.0f}"
    return f"{a} point" + ("" if a == "1" else "s") if a == b else f"{a}-{b} points"


def invocations_phrase(spans: list[list[float] | None]) -> str:
    """How several invocations on one runs folder shared the machine, from their epoch spans.

    One invocation says nothing. Spans that overlap ran side by side (their job times are inflated by each
    other); spans that do not ran one after another. A span not recorded (a JSON written before spans were kept)
    makes the order unknown, and the phrase says only that there were several.
    """
    if len(spans) <= 1:
        return ""
    if any(s is None for s in spans):
        return " (separate invocations on the same runs folder)"
    ordered = sorted((s[0], s[1]) for s in spans if s is not None)
    overlap = any(nxt[0] < cur[1] for cur, nxt in itertools.pairwise(ordered))
    how = "some side by side" if overlap else "one after another"
    return f" (invocations on the same runs folder, {how})"


def write_report(
    args: argparse.Namespace,
    seeds: list[int],
    modes: list[str],
    warmup: int,
    timings: dict[str, float],
    walls: list[float],
    load: list[float],
    results: Path = RESULTS,
    spans: list[list[float] | None] | None = None,
) -> None:
    from milepost.evaluation.compare import find_metrics
    from milepost.evaluation.seeds import mean_interval, plot_seed_curves, seed_table, share_interval
    from milepost.io import atomic_write_json, atomic_write_text
    from milepost.tables import md_row, md_rule

    spans = spans if spans is not None else [None] * len(walls)  # a caller without spans: the order is unknown
    work = Path(args.work)
    runs = {a[0]: [work / f"{a[0]}-s{s}" for s in seeds] for a in args.arm}
    table, data = seed_table(runs)
    # A start not evaluated yet (an interim report while the first seeds finish) is reported as such.
    start_dirs = {m: {s: start_dir(work, m, s, seeds[0]) for s in seeds} for m in modes}
    start_seeds = {
        m: {s: level_values(d) for s, d in dirs.items() if find_metrics(d) is not None}
        for m, dirs in start_dirs.items()
    }
    starts = {m: v[seeds[0]] for m, v in start_seeds.items() if seeds[0] in v}
    per_task = {arm: [run_task_values(r) for r in rs] for arm, rs in runs.items()}
    per_seed = {arm: {s: level_values(r, t) for s, r, t in zip(seeds, rs, per_task[arm])} for arm, rs in runs.items()}
    names = list(runs)
    base = names[0]
    configs = saved_configs(runs)  # read once: the draw streams and the settings table both come from them
    draws = draws_sentence(arm_streams(configs))
    differ = settings_table(arm_settings(configs))
    zero_updates = zero_gradient_updates(runs)
    zero_line = zero_gradient_sentence(zero_updates)
    start = starts.get(modes[0], {})
    levels = list(start or per_seed[base][seeds[0]])
    # start row, then each seed
    metrics = ("avg", "pass4", "step_accuracy", "subgoals", "score")
    heads = ("avg@4", "pass@4", "step acc.", "subgoals", "outcome score")
    head = ["run", *(f"{lv} {m}" for m in heads for lv in levels)]
    lines = [md_row(head), md_rule(len(head))]

    def cells(v: dict[str, dict[str, float]]) -> list[str]:
        out = []
        for key in metrics:
            out += [f"{100 * v[lv][key]:.1f}" if lv in v and not math.isnan(v[lv][key]) else "-" for lv in levels]
        return out

    for mode in modes:
        for s in seeds:
            v = start_seeds[mode].get(s)
            lines.append(
                md_row(
                    [
                        f"start ({mode} actions) seed {s}",
                        *(cells(v) if v else ["not evaluated yet"] * len(levels) * len(metrics)),
                    ]
                )
            )
    start_mean = start_means(start_seeds, levels)  # over the sampling seeds the start was evaluated under
    start_line = "".join(
        f"The start in {mode} actions, evaluated the same way under {len(start_seeds[mode])} of the {len(seeds)} "
        "sampling seeds: "
        + ", ".join(
            f"{lv} "
            + (share_interval(e["mean"], e["lo"], e["hi"]) if len(e["values"]) > 1 else f"{100 * e['mean']:.1f}")
            + " ("
            + ", ".join(f"{100 * x:.1f}" for x in e["values"])
            + ")"
            for lv, e in by_level.items()
        )
        + ".\n"
        for mode, by_level in start_mean.items()
    )
    for arm in names:
        for s in seeds:
            lines.append(md_row([f"{arm} seed {s}", *cells(per_seed[arm][s])]))
    seed_rows = "\n".join(lines) + "\n"

    # Paired differences from the first arm: success (avg@4), and the two signals a failed episode still carries,
    # the subgoals it reached and its outcome score (WebShop's graded reward on the web shop). Each over the seeds
    # (a t-interval, 2 seeds or more) and by test task (a bootstrap over the tasks, the training seeds held fixed).
    diffs: dict[str, dict[str, Any]] = {}
    by_task: dict[str, dict[str, Any]] = {}
    diff_tables: dict[str, list[str]] = {}

    for key in ("avg", "subgoals", "score"):
        head = [f"arm - {base}", *(f"{lv} {how}" for lv in levels for how in ("over seeds", "by test task"))]
        diff_lines = [md_row(head), md_rule(len(head))]
        for arm in names[1:]:
            row = []
            name = arm if key == "avg" else f"{arm} {key}"
            for lv in levels:
                d = [
                    per_seed[arm][s][lv][key] - per_seed[base][s][lv][key]
                    for s in seeds
                    if lv in per_seed[arm][s] and lv in per_seed[base][s]
                ]
                if len(d) < 2 or any(math.isnan(x) for x in d):
                    row.append("-")
                else:
                    m, lo, hi = mean_interval(d)
                    diffs.setdefault(name, {})[lv] = {"mean": m, "lo": lo, "hi": hi, "values": d}
                    row.append(signed_interval(m, lo, hi))
                paired = by_task_difference(
                    [t.get(lv, {}) for t in per_task[arm]], [t.get(lv, {}) for t in per_task[base]], key
                )
                if paired is None:
                    row.append("-")
                else:
                    by_task.setdefault(name, {})[lv] = paired
                    row.append(signed_interval(paired["mean"], paired["lo"], paired["hi"]))
            diff_lines.append(md_row([arm, *row]))
        diff_tables[key] = diff_lines

    # Each arm against the start in the arm's own action mode, paired by seed: did training move it at all? Success
    # (avg@4), then step accuracy, which a step term can move where success does not.
    head = ["arm - its start", "mode", *levels]
    start_tables: dict[str, list[str]] = {}
    vs_start: dict[str, dict[str, dict[str, Any]]] = {}
    for key in ("avg", "step_accuracy"):
        start_lines = [md_row(head), md_rule(len(head))]
        for arm in args.arm:
            mode = arm_mode(arm, args, modes, warmup)
            row = []
            for lv in levels:
                ms = minus_start(
                    {s: v[lv][key] for s, v in per_seed[arm[0]].items() if lv in v},
                    {s: v[lv][key] for s, v in start_seeds[mode].items() if lv in v},
                )
                if ms is None:
                    row.append("-")
                    continue
                vs_start.setdefault(key, {}).setdefault(arm[0], {})[lv] = {"mode": mode, **ms}
                each = ", ".join(f"{100 * x:+.1f}" for x in ms["values"])
                row.append(f"{signed_interval(ms['mean'], ms['lo'], ms['hi'])} ({each})")
            start_lines.append(md_row([arm[0], mode, *row]))
        start_tables[key] = start_lines
    halfwidths = {
        lv: [
            100 * (data[a]["levels"][lv]["hi"] - data[a]["levels"][lv]["lo"]) / 2
            for a in names
            if lv in data[a]["levels"]
        ]
        for lv in levels
    }
    tasks = {lv: (start or per_seed[base][seeds[0]])[lv]["tasks"] for lv in levels}
    title = args.title or args.name.replace("_", " ")
    results.mkdir(parents=True, exist_ok=True)
    png = results / f"{args.name}.png"
    plot(
        png,
        data,
        start_mean.get(modes[0], {}),
        levels,
        f"{title}: mean avg@4 over {len(seeds)} seeds, 95% t-interval, dots = seeds",
    )
    curves = plot_seed_curves(results / f"{args.name}_training.png", runs)
    # where no rollout succeeds (a silent sparse reward), the subgoals reached are what training can move
    subgoal_curves = plot_seed_curves(
        results / f"{args.name}_training_subgoals.png",
        runs,
        metric="rollout/subgoals",
        label="subgoals reached per rollout",
        scale=1.0,
    )
    arm_lines = "\n".join(
        f"- `{a[0]}`: `{a[1]}`" + (" with " + ", ".join(f"`{o}`" for o in a[2:]) if a[2:] else "") for a in args.arm
    )
    argv: list[str] = []  # the command that made the runs: without --report-only and --reading FILE
    for prev, x in zip(["", *sys.argv[1:]], sys.argv[1:]):
        if x not in ("--report-only", "--reading") and prev != "--reading":
            argv.append(x)
    cmd = "python experiments/seeded_arms.py " + " ".join(shlex.quote(x) for x in argv)
    # the jobs of this report's runs only: a --timings-from record may hold other arms' jobs on the same folder
    jobs = {r.name for rs in runs.values() for r in rs} | {d.name for ds in start_dirs.values() for d in ds.values()}
    timings = {k: v for k, v in timings.items() if k in jobs}
    mins = ", ".join(f"{k} {v / 60:.1f}" for k, v in sorted(timings.items()))
    md = (
        f"# {title}\n\n"
        f"Command: `{cmd}`.\n\n"
        f"Start: `{args.start}`. Training: {args.iterations} policy iterations of {args.tasks_per_iter} tasks x the "
        f"config's samples per task on levels {args.levels} of `{args.data}` (train split)"
        + (
            f"; arms without MiRA get {warmup} more iteration(s), the MiRA arms' critic warm-up, so every arm plays "
            "the same number of training episodes"
            if warmup
            else ""
        )
        + f". Evaluation: test split, levels {args.eval_levels}, "
        + ", ".join(f"{tasks[lv]} tasks at {lv}" for lv in levels)
        + f", 4 samples per task at the arm's temperature. Seeds {', '.join(map(str, seeds))} (the training seed and "
        "the evaluation's sampling seed). Arms:\n\n"
        + arm_lines
        + "\n\n"
        + (f"{differ}\n" if differ else "")
        + "Wall time "
        + ", ".join(f"{w / 60:.1f} min" for w in walls)
        + invocations_phrase(spans)
        + f"; {args.workers} worker process(es) per invocation, one torch thread each; load average "
        f"{min(load):.1f}-{max(load):.1f} while it ran"
        + (f"; minutes per job: {mins}" if mins else "")
        + ".\n\n## Mean over seeds (avg@4 %, 95% t-interval across seeds)\n\n"
        + table
        + (f"\n{start_line}" if start_line else "")
        + (f"\n{draws}" if draws else "")
        + (f"\n{zero_line}" if zero_line else "")
        + "\n## Difference from `"
        + base
        + "` (percentage points; over seeds: a 95% t-interval of the paired seeds; by test task: a 95% bootstrap "
        "interval over the test tasks of the per-task difference averaged over the seeds, the training seeds held "
        "fixed; * = interval excludes 0)\n\n"
        + "\n".join(diff_tables["avg"])
        + "\n\nThe same for the share of subgoals reached (percentage points):\n\n"
        + "\n".join(diff_tables["subgoals"])
        + "\n\nThe same for the outcome score (mean outcome terms per episode, x 100: success on Sudoku and Rush Hour, "
        "WebShop's graded reward of the purchase on the web shop):\n\n"
        + "\n".join(diff_tables["score"])
        + "\n\n## Difference from the start (percentage points of avg@4; each arm against the start in its own "
        "action mode, paired by seed: same test tasks, same sampling seed; 95% t-interval over the seeds that have "
        "both, each seed's difference in brackets; * = interval excludes 0)\n\n"
        + "\n".join(start_tables["avg"])
        + "\n\nThe same for step accuracy (percentage points of the actions that bring the task closer to its goal):"
        "\n\n"
        + "\n".join(start_tables["step_accuracy"])
        + "\n\nPower: the half-width of an arm's interval is "
        + "; ".join(f"{span(min(h), max(h))} at {lv}" for lv, h in halfwidths.items() if h)
        + f". With {len(seeds)} seeds, a difference smaller than about that is not detected.\n\n"
        "## Every seed (%)\n\n"
        + seed_rows
        + f"\n![mean and seeds]({png.name})\n"
        + (f"![training curves]({curves.name})\n" if curves else "")
        + (f"![subgoals in training]({subgoal_curves.name})\n" if subgoal_curves else "")
    )
    if getattr(args, "reading", None):
        md += "\n## Reading this run\n\n" + Path(args.reading).read_text(encoding="utf-8").strip() + "\n"
    atomic_write_text(results / f"{args.name}.md", md)
    atomic_write_json(
        results / f"{args.name}.json",
        {
            "command": cmd,
            "arms": {a[0]: a[1:] for a in args.arm},
            "seeds": seeds,
            "start": starts,
            "start_per_seed": {m: {str(s): v for s, v in d.items()} for m, d in start_seeds.items()},
            "start_mean_over_seeds": start_mean,
            "per_seed": {a: {str(s): v for s, v in d.items()} for a, d in per_seed.items()},
            "mean_over_seeds": data,
            "paired_difference": diffs,
            "paired_by_task": by_task,
            "minus_start": vs_start.get("avg", {}),
            "minus_start_step_accuracy": vs_start.get("step_accuracy", {}),
            "zero_gradient_updates": zero_updates,
            "timings_s": timings,
            "walls_s": walls,
            "spans_s": spans,
            "load": load,
        },
    )
    print(md)


if __name__ == "__main__":
    main()
