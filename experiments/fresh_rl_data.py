"""A dataset whose training split holds puzzles the SFT start never saw, beside the start's own test split.

The Rush Hour SFT starts (``experiments/sft_starts.py``) learn from the training split of their dataset: solver
states of every training puzzle's cluster, and DAgger rounds that play those puzzles again. RL from such a start on
the same training split optimises puzzles the start has partly memorised (the d4slide3 start solves about 40% of
its training puzzles at 7-9 in RL's first batch and 14% of the held-out test puzzles), so the RL update can raise
recall of those puzzles without moving the test score. This script keeps the evaluation exactly as before (the
base dataset's test split, copied) and replaces the training split with puzzles from another generation seed,
dropping any whose cluster (``datasets.puzzle_key``) or board appears anywhere in the base dataset.

Usage::

    milepost data rushhour --levels 7-9 --train 400 --test 1 --seed 2 --out runs/rl-fresh/gen
    python -m experiments.fresh_rl_data --base runs/sft-starts-dagger4/data --fresh runs/rl-fresh/gen \\
        --train 300 --out runs/rl-fresh/data

The manifest is the base's with the new training counts and a ``train_source`` line naming both folders.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections import Counter
from typing import Any


def fresh_split(base: dict[str, list[Any]], fresh: list[Any], per_level: int) -> list[Any]:
    """Up to ``per_level`` tasks of each level of ``fresh``, in order, sharing no puzzle with any split of ``base``.

    Raises:
        InputError: when a level has fewer unseen tasks than asked for.
    """
    from milepost.datasets import puzzle_key
    from milepost.errors import InputError

    # A Rush Hour task's key is its cluster, which every board of the cluster shares: a repeated board is caught too.
    seen = {puzzle_key(t) for split in base.values() for t in split}
    kept: dict[str, list[Any]] = {}
    for task in fresh:
        if puzzle_key(task) in seen:
            continue
        level = kept.setdefault(task.level, [])
        if len(level) < per_level:
            level.append(task)
    short = {level: len(tasks) for level, tasks in kept.items() if len(tasks) < per_level}
    if short or not kept:
        raise InputError(f"fewer than {per_level} unseen tasks per level in the fresh data: {short or 'none at all'}")
    return [t for tasks in kept.values() for t in tasks]


def main(argv: list[str] | None = None) -> int:
    from milepost.datasets import load, write_dataset
    from milepost.errors import InputError

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the start's dataset folder (its test split is kept)")
    parser.add_argument("--fresh", required=True, help="a dataset folder from another generation seed")
    parser.add_argument("--train", type=int, default=300, help="training tasks per level")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        base = load(args.base)
        fresh = load(args.fresh)
        train = fresh_split(base.splits, fresh.splits.get("train", []), args.train)
        test = base.splits["test"]
        manifest: dict[str, Any] = copy.deepcopy(base.manifest)
        manifest["counts"] = {"train": len(train), "test": len(test)}
        levels = manifest.get("levels")
        if isinstance(levels, dict):
            per_level = Counter(t.level for t in train)
            manifest["levels"] = {
                name: {**spec, "counts": {**spec.get("counts", {}), "train": per_level.get(name, 0)}}
                for name, spec in levels.items()
            }
        manifest["train_source"] = (
            f"train: {len(train)} tasks of {args.fresh} whose cluster and board appear nowhere in {args.base}; "
            f"test: {args.base}'s test split"
        )
        write_dataset(args.out, {"train": train, "test": test}, manifest)
    except InputError as exc:
        print(f"fresh_rl_data: {exc}", file=sys.stderr)
        return 2
    print(f"fresh_rl_data: {len(train)} unseen training tasks + {len(test)} test tasks -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
