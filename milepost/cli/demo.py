"""``milepost demo``: the main job, sized for a 2-core CPU with nothing downloaded.

It builds the 4x4 Sudoku level datasets, loads the shipped SFT checkpoint (``checkpoints/sudoku4-sft``,
made by ``milepost sft --config configs/tiny-cpu/sudoku4_sft.yaml``), runs the paper's RL arms on equal
budgets (atomic actions with the sparse outcome reward; flexible macro actions; atomic actions with
subgoal-segmented returns), each over several training seeds (``--seeds``, default 0,1,2), evaluates the SFT
start and every arm on all levels with n = k = 4, and writes a report (Markdown + PNG + JSON) laid out like the
paper's Table 7, with the paper's own numbers beside it (a different board size and model: compare the ordering
of the arms, not the raw numbers): the first seed's table, then every arm's mean and 95% interval across seeds
(one seed cannot separate the arms) with each seed's training curve drawn thin.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.progress import LOG_EVERY_S, progress_bar

# The paper's Table 7 (9x9 Sudoku, Qwen3-1.7B, d_test levels L1-L7), avg@4 in %, for the report's reference rows.
PAPER_TABLE7_AVG4 = {
    "paper: macro RL (train 21-30)": [97.00, 95.50, 87.25, 69.50, 54.00, 30.75, 14.00],
    "paper: atomic RL (train 21-30, before collapse)": [81.50, 54.00, 29.75, 8.75, 3.25, 0.00, 0.00],
    "paper: atomic RL + subgoal decomposition (21-30)": [84.50, 73.50, 51.00, 28.75, 11.50, 3.00, 0.00],
    "paper: atomic SFT (11-20)": [58.50, 27.75, 7.75, 2.00, 0.50, 0.00, 0.00],
}
PAPER_LEVELS = ["L1", "L2", "L3", "L4", "L5", "L6", "L7"]
ARMS = ("atomic", "macro", "subgoal")
ROOT = Path(__file__).resolve().parents[2]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job: datasets, RL arms, evaluation, report", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument(
        "--checkpoint",
        default=str(ROOT / "checkpoints" / "sudoku4-sft"),
        help="SFT checkpoint the arms start from",
    )
    p.add_argument("--configs", default=str(ROOT / "configs" / "tiny-cpu"), help="folder of the arm configs")
    p.add_argument("--iterations", type=int, default=None, help="RL iterations per arm (default: the configs')")
    p.add_argument("--eval-limit", type=int, default=None, help="test tasks per level (default: the configs')")
    p.add_argument("--arms", default=",".join(ARMS), help="comma list of arms to run")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    p.add_argument(
        "--seeds",
        default="0,1,2",
        help="training seeds of every arm, comma list (default 0,1,2; each seed is one more run of every arm)",
    )
    p.add_argument("--workers", type=int, default=2, help="parallel jobs (one torch thread each)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a value of every arm's config, e.g. --set rl.tasks_per_iter=8",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def _arm_config(args: argparse.Namespace, arm: str, data: Path) -> Any:
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    # Each worker process gets its share of the cores: two 2-thread jobs on 2 cores oversubscribe them, and
    # torch's spinning threads then run an RL iteration ~20x slower than one thread each (measured).
    threads = max(1, (os.cpu_count() or 1) // max(1, getattr(args, "workers", 1)))
    seed = getattr(args, "train_seed", args.seed)
    overrides = [f"model={args.checkpoint}", f"data={data}", f"seed={seed}", f"threads={threads}"]
    if args.iterations is not None:
        overrides.append(f"rl.iterations={args.iterations}")
    if args.eval_limit is not None:
        overrides.append(f"eval.limit={args.eval_limit}")
    overrides += list(getattr(args, "overrides", []))
    cfg = load_config(TrainConfig, Path(args.configs) / f"sudoku4_{arm}.yaml", overrides)
    assert isinstance(cfg, TrainConfig)
    return cfg


def _run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / f"rl-{arm}-seed{seed}"


def _run_job(kind: str, arm: str, arg_dict: dict[str, Any], data: str) -> float:
    """One demo job in a worker process: evaluate the SFT start in a mode, or train and evaluate an arm (at
    ``arg_dict["train_seed"]``)."""
    import torch
    from transformers.utils import logging as hf_logging

    from milepost.backends.hf import HFBackend
    from milepost.training.trainer import evaluate_policy, train_rl

    hf_logging.disable_progress_bar()  # a fresh (spawned) process: the parent's setting does not carry over
    start = time.perf_counter()
    args = argparse.Namespace(**arg_dict)
    out = Path(args.out)
    cfg = _arm_config(args, arm, Path(data))
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, levels=None))
    torch.set_num_threads(cfg.threads)
    if kind == "sft":
        target = out / "sft-start" / arm
        if not (target / "metrics.json").exists():
            evaluate_policy(cfg, HFBackend(args.checkpoint), target, f"SFT ({arm})", progress=False)
        return time.perf_counter() - start
    run_dir = _run_dir(out, arm, args.train_seed)
    final = run_dir / "final"
    if not (final / "config.json").exists():
        final = train_rl(cfg, run_dir, resume=(run_dir / "checkpoints" / "latest").exists(), progress=False)
    if not (run_dir / "eval" / "metrics.json").exists():
        evaluate_policy(cfg, HFBackend(final), run_dir / "eval", f"RL {arm} (seed {args.train_seed})", progress=False)
    return time.perf_counter() - start


@dataclass
class DemoJob:
    """One job of the demo's pool and where its progress shows on disk.

    A job's work is counted in episodes played: an RL iteration plays ``tasks_per_iter x samples_per_task``
    of them, its evaluation one per test task and sample, so both phases of a job move one bar.
    """

    kind: str  # "rl" (train an arm, then evaluate it) or "sft" (evaluate the SFT start in an arm's mode)
    arm: str
    seed: int
    folder: Path  # the run folder (rl) or the evaluation folder (sft)
    units: tuple[int, int, int]  # (RL iterations, episodes per iteration, evaluation episodes)

    @property
    def label(self) -> str:
        return f"SFT start ({self.arm})" if self.kind == "sft" else f"RL {self.arm} seed {self.seed}"

    @property
    def timing_key(self) -> str:
        return f"sft_{self.arm}_s" if self.kind == "sft" else f"rl_{self.arm}_seed{self.seed}_s"

    @property
    def total(self) -> int:
        iterations, per_iteration, evaluation = self.units
        return iterations * per_iteration + evaluation

    def done(self) -> int:
        """Episodes played so far, read from the files the job writes (``metrics.jsonl``, ``episodes.jsonl``)."""
        iterations, per_iteration, evaluation = self.units
        if self.kind == "sft":
            return min(evaluation, _count_lines(self.folder / "episodes.jsonl"))
        trained = iterations if (self.folder / "final" / "config.json").exists() else _last_iteration(self.folder)
        played = min(evaluation, _count_lines(self.folder / "eval" / "episodes.jsonl"))
        return min(trained, iterations) * per_iteration + played


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:  # not written yet
        return 0


def _last_iteration(run_dir: Path) -> int:
    """The last training iteration ``metrics.jsonl`` records (0 before the first; warm-up rows do not count)."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:  # a line being written
            continue
        if isinstance(row, dict) and isinstance(row.get("iteration"), int) and row.get("phase") != "warmup":
            return int(row["iteration"])
    return 0


def _job_dir(out: Path, kind: str, arm: str, seed: int) -> Path:
    return out / "sft-start" / arm if kind == "sft" else _run_dir(out, arm, seed)


def _job_units(cfg: Any, kind: str, data: Path) -> tuple[int, int, int]:
    """(RL iterations, episodes per iteration, evaluation episodes) of a job; the SFT evaluations only evaluate."""
    from milepost.evaluation.runner import EvalSpec, select_tasks

    spec = EvalSpec(
        env=cfg.env.name, data=str(data), policy="oracle", n=cfg.eval.n, ks=cfg.eval.ks, limit=cfg.eval.limit
    )
    evaluation = len(select_tasks(spec)) * cfg.eval.n
    if kind == "sft":
        return (0, 0, evaluation)
    return (cfg.rl.iterations, cfg.rl.tasks_per_iter * cfg.rl.samples_per_task, evaluation)


class WallClock:
    """The demo's wall time summed over every session that worked on one output folder (``wall_time.json``).

    A resumed demo skips the finished jobs, so its own run time understates the whole; the file is rewritten
    every few seconds, so a killed session loses at most those seconds.
    """

    FILE = "wall_time.json"

    def __init__(self, out: Path) -> None:
        self.path = out / self.FILE
        try:
            before = json.loads(self.path.read_text(encoding="utf-8"))
            self.before, sessions = float(before["seconds"]), int(before["sessions"])
        except (OSError, ValueError, KeyError, TypeError):  # the first session (or an unreadable file)
            self.before, sessions = 0.0, 0
        self.sessions = sessions + 1
        self.start = time.perf_counter()
        self.saved = 0.0

    @property
    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.start

    def save(self, every: float = 0.0) -> None:
        """Record the total so far (at most once per ``every`` seconds)."""
        from milepost.io import atomic_write_json

        now = time.perf_counter()
        if now - self.saved < every:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, {"seconds": round(self.seconds, 1), "sessions": self.sessions})
        self.saved = now


def run_jobs(
    pool: Executor,
    jobs: list[DemoJob],
    args: argparse.Namespace,
    data: Path,
    clock: WallClock,
    *,
    progress: bool = True,
    work: Callable[..., float] | None = None,
    poll_s: float = 2.0,
    log_every: float = LOG_EVERY_S,
) -> dict[str, float]:
    """Run the jobs in ``pool`` and show each one's progress, with an estimate, until all have finished.

    A bar for the whole phase and one per running job (episodes played, read from the jobs' files every
    ``poll_s`` seconds): redrawn on a terminal, a line every half minute otherwise (``milepost.progress``).
    A line says when each job ends. Returns every job's seconds, keyed like ``timings.json``.
    """
    from tqdm import tqdm

    work = work or _run_job
    futures: dict[Future[float], DemoJob] = {
        pool.submit(work, job.kind, job.arm, {**vars(args), "train_seed": job.seed}, str(data)): job for job in jobs
    }
    overall = progress_bar(
        total=sum(j.total for j in jobs),
        initial=sum(j.done() for j in jobs),
        desc=f"all {len(jobs)} jobs",
        unit="episodes",
        enabled=progress,
        log_every=log_every,
    )
    bars: dict[str, Any] = {}  # label -> bar of a running job
    slots: dict[str, int] = {}  # label -> its line on a terminal (below the overall bar)
    timings: dict[str, float] = {}
    pending = set(futures)
    try:
        while pending:
            finished, pending = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
            for future, job in futures.items():
                if future in pending and future.running() and job.label not in bars:
                    taken = set(slots.values())
                    slots[job.label] = next(p for p in range(1, len(bars) + 2) if p not in taken)
                    bars[job.label] = progress_bar(
                        total=job.total,
                        initial=job.done(),
                        desc=f"  {job.label}",
                        unit="episodes",
                        enabled=progress,
                        log_every=log_every,
                        leave=False,
                        position=slots[job.label],
                    )
            for label, bar in bars.items():
                job = next(j for j in jobs if j.label == label)
                bar.update(max(0, job.done() - bar.n))
            overall.update(max(0, sum(j.done() for j in jobs) - overall.n))
            for future in finished:
                job = futures[future]
                seconds = future.result()
                timings[job.timing_key] = seconds
                if job.label in bars:
                    bars.pop(job.label).close()
                    slots.pop(job.label)
                left = len(pending)
                tqdm.write(f"  done: {job.label} ({seconds / 60:.1f} min; {left} job(s) left)")
            clock.save(every=10.0)
    finally:
        for bar in bars.values():
            bar.close()
        overall.close()
    return timings


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from milepost.errors import InputError

    console = Console()
    out = Path(args.out)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise InputError(f"--arms: unknown arm(s) {', '.join(unknown)} (known: {', '.join(ARMS)})")
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--seeds: expected a comma list of integers, got {args.seeds!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds: give distinct seeds, got {args.seeds!r}")
    args.train_seed = seeds[0]
    started = time.perf_counter()
    clock = WallClock(out)
    if clock.sessions > 1:
        console.print(
            f"resuming the demo in {out} after {clock.before / 60:.1f} min of earlier sessions: done work is kept"
        )
    timings: dict[str, float] = {}
    try:
        return _run(args, console, out, arms, seeds, started, clock, timings)
    finally:
        clock.save()


def _run(
    args: argparse.Namespace,
    console: Any,
    out: Path,
    arms: list[str],
    seeds: list[int],
    started: float,
    clock: WallClock,
    timings: dict[str, float],
) -> int:
    from milepost.datasets import write_dataset
    from milepost.envs.levels import levels_for
    from milepost.envs.sudoku.dataset import build_dataset
    from milepost.evaluation.compare import compare
    from milepost.io import atomic_write_json, atomic_write_text

    # 1. Datasets: every 4x4 level, training and test splits.
    data = out / "data" / "sudoku4"
    if not (data / "manifest.json").exists():
        console.print("[bold]1/3[/] building 4x4 Sudoku level datasets")
        splits, manifest = build_dataset(
            4, list(levels_for("sudoku", 4)), 400, 40, args.seed, progress=not args.no_progress
        )
        write_dataset(data, splits, manifest, overwrite=True)
    timings["data_s"] = time.perf_counter() - started

    # Without the shipped checkpoint, make one the way it was made (configs/tiny-cpu/sudoku4_sft.yaml).
    if not (Path(args.checkpoint) / "config.json").is_file():
        from milepost.config import load_config
        from milepost.training.config import TrainConfig
        from milepost.training.sft import train_sft

        console.print(f"[bold]1/3[/] no SFT checkpoint at {args.checkpoint}: training one (sudoku4_sft.yaml)")
        sft_cfg = load_config(TrainConfig, Path(args.configs) / "sudoku4_sft.yaml", [f"data={data}", "threads=1"])
        assert isinstance(sft_cfg, TrainConfig)
        final = out / "sft" / "final"
        if not (final / "config.json").exists():
            resume = (out / "sft" / "checkpoints" / "latest").exists()
            final = train_sft(sft_cfg, out / "sft", resume=resume, progress=not args.no_progress)
        args.checkpoint = str(final)
        timings["sft_s"] = time.perf_counter() - started - timings["data_s"]

    # 2-3. The SFT start (evaluated in atomic and macro mode) and the RL arms on equal budgets, each arm then
    # evaluated on every level. Jobs run in a pool of --workers processes (one torch thread each): on a
    # 2-core machine two single-threaded jobs finish sooner than one job with two threads.
    base_cfg = _arm_config(args, "atomic", data)
    # The long RL jobs go first so that the short evaluations fill the gaps at the end.
    jobs: list[tuple[str, str, int]] = [("rl", arm, s) for s in seeds for arm in arms]
    jobs += [("sft", "atomic", seeds[0]), ("sft", "macro", seeds[0])]
    console.print(
        f"[bold]2/3[/] evaluating the SFT start and training {len(arms)} RL arm(s) x {len(seeds)} seed(s) "
        f"({base_cfg.rl.iterations} iterations of {base_cfg.rl.tasks_per_iter} tasks x "
        f"{base_cfg.rl.samples_per_task} samples each) in {args.workers} worker process(es)"
    )
    ctx = multiprocessing.get_context("spawn")
    watched = [DemoJob(kind, a, s, _job_dir(out, kind, a, s), _job_units(base_cfg, kind, data)) for kind, a, s in jobs]
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        timings |= run_jobs(pool, watched, args, data, clock, progress=not args.no_progress)
    first = seeds[0]
    runs = [out / "sft-start" / "atomic", out / "sft-start" / "macro"] + [_run_dir(out, arm, first) for arm in arms]
    labels = ["SFT start (atomic)", "SFT start (macro)"] + [f"RL {arm} (seed {first})" for arm in arms]

    # 4. The report.
    console.print("[bold]3/3[/] writing the report")
    comparison = compare(runs, out / "report", labels, ks=[1, 4])
    for warning in comparison.warnings:
        console.print(f"[yellow]compare: {warning}[/]")
    text = comparison.text
    paper = "\n".join(
        [
            "| paper row (9x9, Qwen3-1.7B) | " + " | ".join(PAPER_LEVELS) + " |",
            "|---|" + "---|" * len(PAPER_LEVELS),
        ]
        + [f"| {name} | " + " | ".join(f"{v:.2f}" for v in row) + " |" for name, row in PAPER_TABLE7_AVG4.items()]
    )
    timings["total_s"] = time.perf_counter() - started
    timings["all_sessions_s"] = clock.seconds
    sessions = (
        f" over {clock.sessions} sessions (this one {timings['total_s'] / 60:.1f} min)" if clock.sessions > 1 else ""
    )
    header = (
        "# milepost demo: horizon reduction on 4x4 Sudoku (tiny CPU profile)\n\n"
        f"Model: the shipped SFT checkpoint `{args.checkpoint}` (a from-scratch tiny Qwen3); board 4x4; "
        f"levels S1-S5 = 3-4 ... 11-12 empty cells; budget H_max = {base_cfg.env.max_steps} turns; training "
        f"levels {base_cfg.levels}; {base_cfg.rl.iterations} RL iterations per arm of "
        f"{base_cfg.rl.tasks_per_iter} tasks x {base_cfg.rl.samples_per_task} samples; evaluation n = k = 4 on "
        f"{base_cfg.eval.limit} test tasks per level; dataset seed {args.seed}, training seeds "
        f"{', '.join(map(str, seeds))} (the table below: seed {seeds[0]}; the seeds section: all). Wall time "
        f"{clock.seconds / 60:.1f} min{sessions}.\n\n"
        "Measured here (avg@4 with 95% bootstrap intervals over tasks):\n\n"
    )
    footer = (
        "\n## The paper's Table 7 for reference (avg@4, %)\n\n"
        "A different board (9x9), model (Qwen3-1.7B) and budget: what carries over is the ordering of the arms "
        "at short and long horizons, not the raw numbers.\n\n" + paper + "\n"
    )
    report = header + text.replace("# Comparison\n", "") + _seeds_section(out, arms, seeds) + footer
    atomic_write_text(out / "report" / "report.md", report)
    atomic_write_json(out / "report" / "timings.json", timings)
    console.print(report)
    print(final_line(out / "report" / "report.md", clock.seconds, clock.sessions))
    return 0


def final_line(report: Path, seconds: float, sessions: int) -> str:
    """The demo's last line: how long it took (every session) and where the report is."""
    over = f" over {sessions} sessions" if sessions > 1 else ""
    return f"The demo finished in {seconds / 60:.1f} min{over}; the report is {report}"


def _seeds_section(out: Path, arms: list[str], seeds: list[int]) -> str:
    """Every arm's mean avg@4 and 95% interval across training seeds, and the per-seed curves plot."""
    from milepost.evaluation.seeds import plot_seed_curves, seed_table

    runs = {f"RL {arm}": [_run_dir(out, arm, s) for s in seeds] for arm in arms}
    table, data = seed_table(runs)
    from milepost.io import atomic_write_json

    atomic_write_json(out / "report" / "seeds.json", data)
    try:
        plot = plot_seed_curves(out / "report" / "seeds.png", runs)
    except ImportError:  # the tables are written: a missing plotting library loses nothing
        plot = None
    return (
        f"\n### Across training seeds ({len(seeds)}: {', '.join(map(str, seeds))})\n\n"
        "avg@4 in %, mean over seeds with a 95% t-interval across seeds (the spread of training, not of the test "
        "tasks); the collapse signal is the share of answers cut at max_new_tokens over each seed's last three "
        "iterations.\n\n" + table + ("\n![training curves per seed](seeds.png)\n" if plot is not None else "")
    )
