"""``milepost data rushhour``: a Rush Hour level dataset (train.jsonl, test.jsonl, manifest.json).

Puzzles come from the generator (random placements, farthest state of each cluster) or from a file in
Fogleman's ``MM BOARD CLUSTER`` format, whose every line is checked against the solver. Levels are ranges of
``min_moves``; a task's ``goal_distance`` is its optimal number of one-cell steps.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from rich.console import Console
from rich.table import Table

from milepost.cli.data_format import add_format_argument, format_flags
from milepost.envs.levels import DEFAULT_LEVELS, parse_levels
from milepost.errors import InputError


def add_parser(envs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = envs.add_parser(
        "rushhour",
        help="Rush Hour level dataset",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--levels",
        default=DEFAULT_LEVELS[("rushhour", 6)],
        help="comma list of min_moves ranges (default: the paper's 4-6,7-9,10-12,13-15,16-18,19-21)",
    )
    p.add_argument("--source", default="generate", help="'generate' (default) or a file in Fogleman's format")
    p.add_argument("--train", type=int, default=640, help="training tasks per level (default 640)")
    p.add_argument("--test", type=int, default=100, help="test tasks per level (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the puzzles and the split (default 0)")
    p.add_argument("--max-walls", type=int, default=0, help="walls a generated board may have (default 0)")
    p.add_argument(
        "--workers",
        type=int,
        default=_cores(),
        help=f"processes for generation (default: this machine's cores, {_cores()}); the tasks are the same for any",
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="keep only the tasks some sample of this evaluation run solved (e.g. a `milepost eval --single-turn` "
        "run on the same dataset; repeatable, one run per split)",
    )
    p.add_argument("--out", required=True, help="dataset folder to write")
    add_format_argument(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing non-empty folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `milepost --help` does not load the solver stack.
    from milepost.datasets import write_dataset
    from milepost.envs.rushhour.dataset import build_dataset

    if args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if not 0 <= args.max_walls <= 6:
        raise InputError(f"--max-walls must be in 0-6, got {args.max_walls}")
    levels = parse_levels(args.levels, "rushhour", 6)
    out = Path(args.out)
    # Fail before minutes of generation rather than after; write_dataset checks again when it writes.
    if out.exists() and not args.overwrite and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not empty (pass --overwrite to replace it)")
    command = shlex.join(
        [
            "milepost", "data", "rushhour", "--levels", args.levels, "--source", args.source,
            "--train", str(args.train), "--test", str(args.test), "--seed", str(args.seed),
            "--max-walls", str(args.max_walls), "--out", str(out), *format_flags(args),
        ]
    )  # fmt: skip
    if args.source == "generate":
        # Every puzzle is the farthest state of a whole solved cluster: a fraction of a second of one core each at
        # short levels, seconds at the long ones. Say so before a command that can run for many minutes.
        count = (args.train + args.test) * len(levels)
        print(
            f"generating {count} Rush Hour puzzles on {args.workers} process(es); each is solved exactly (its whole "
            "cluster searched), which takes minutes for hundreds of puzzles (the README's 2,220 at 4-12 moves: "
            "about 11 core-minutes, 0.3 s of one core per puzzle)",
            flush=True,
        )
    splits, manifest = build_dataset(
        levels, args.train, args.test, args.seed, source=args.source, max_walls=args.max_walls,
        workers=args.workers, progress=not args.no_progress, command=command,
    )  # fmt: skip
    if args.filter:
        from milepost.evaluation.proxy import filter_splits, filtered_manifest

        splits, kept = filter_splits(splits, args.filter)
        manifest = filtered_manifest(manifest, splits, kept)
        manifest["command"] = command + "".join(f" --filter {shlex.quote(r)}" for r in args.filter)
    target = write_dataset(out, splits, manifest, overwrite=args.overwrite, format=args.format)
    counts = manifest["counts"]
    print(f"wrote {counts['train']} train and {counts['test']} test tasks to {target}")
    table = Table(title="Rush Hour levels (share of tasks whose optimal solution fits the paper's budgets)")
    for col in ("level", "train", "test", "min_steps", "fits 30 steps", "fits 20 slides"):
        table.add_column(col, justify="right")
    for name, info in manifest["levels"].items():
        lo, hi = info["min_steps_range"]
        shares = [f"{v:.0%}" if v is not None else "-" for v in info["fits_budget_share"].values()]
        table.add_row(name, str(info["counts"]["train"]), str(info["counts"]["test"]), f"{lo}-{hi}", *shares)
    Console(width=100).print(table)
    return 0
