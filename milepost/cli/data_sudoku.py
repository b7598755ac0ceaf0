"""``milepost data sudoku``: write a Sudoku level dataset folder (train.jsonl, test.jsonl, manifest.json).

Example: ``milepost data sudoku --size 9 --levels L1-L7 --train 640 --test 100 --seed 0 --out data/sudoku9``.
The same arguments always write the same dataset. Train and test never share a puzzle, counting digit
relabelling, row / column / band / stack permutations and transposition as the same puzzle. Small boards
have few distinct puzzles: a level that runs out is cut short, and the manifest says so.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from milepost.envs.levels import DEFAULT_LEVELS, levels_for, parse_levels
from milepost.errors import InputError


def add_parser(envs: argparse._SubParsersAction) -> None:
    p = envs.add_parser(
        "sudoku",
        help="Sudoku level dataset",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", type=int, default=9, help="board side: 9 (default), 6 or 4")
    p.add_argument(
        "--levels",
        default=None,
        help="comma list of levels and spans, e.g. L1-L7 or L2,L5 (default: every level of the size)",
    )
    p.add_argument("--train", type=int, default=640, help="training tasks per level (default 640)")
    p.add_argument("--test", type=int, default=100, help="test tasks per level (default 100)")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    p.add_argument("--tier", default="easy", help="technique tier: easy (Full House + Naked Single; default)")
    p.add_argument("--out", required=True, help="dataset folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing non-empty folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `milepost --help` does not load the generator stack.
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku.dataset import build_dataset

    levels_for("sudoku", args.size)  # an unknown size fails before anything else
    spec = args.levels or DEFAULT_LEVELS[("sudoku", args.size)]
    levels = parse_levels(spec, "sudoku", args.size)
    out = Path(args.out)
    # Fail before minutes of generation rather than after; write_dataset checks again when it writes.
    if out.exists() and not args.overwrite and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not empty (pass --overwrite to replace it)")
    command = shlex.join(
        [
            "milepost", "data", "sudoku", "--size", str(args.size), "--levels", spec,
            "--train", str(args.train), "--test", str(args.test), "--seed", str(args.seed),
            "--tier", args.tier, "--out", str(out),
        ]
    )  # fmt: skip
    splits, manifest = build_dataset(
        args.size, levels, args.train, args.test, args.seed, tier=args.tier,
        progress=not args.no_progress, command=command,
    )  # fmt: skip
    target = write_dataset(out, splits, manifest, overwrite=args.overwrite)
    counts = manifest["counts"]
    print(f"wrote {counts['train']} train and {counts['test']} test tasks to {target}")
    for name in manifest["exhausted_levels"]:
        info = manifest["levels"][name]
        got = info["counts"]["train"] + info["counts"]["test"]
        asked = info["requested"]["train"] + info["requested"]["test"]
        print(f"level {name}: {got} distinct puzzles found of {asked} requested (the board has no more)")
    return 0
