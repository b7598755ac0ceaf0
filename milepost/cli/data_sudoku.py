"""``milepost data sudoku``: write a Sudoku level dataset folder (train.jsonl, test.jsonl, manifest.json).

Example: ``milepost data sudoku --size 9 --levels L1-L7 --train 640 --test 100 --seed 0 --out data/sudoku9``.
The same arguments always write the same dataset. Train and test never share a puzzle, counting digit
relabelling, row / column / band / stack permutations and transposition as the same puzzle. Small boards
have few distinct puzzles: a level that runs out is cut short, and the manifest says so.

``--grade`` picks the technique tier of the paper's appendix D.4: easy (Full House and Naked Single, the
default), medium or hard (9x9 only, graded by milepost's HoDoKu-style grader), or a comma list such as
``easy,medium,hard`` for one dataset holding every tier (the technique-generalisation evaluation, Figure 12).
Medium and hard puzzles come from graded seed puzzles with clues added back; a level that cannot supply the
requested count (hard puzzles need about 20+ empty cells) ends with an error saying how many were found.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from milepost.cli.data_format import add_format_argument, format_flags
from milepost.envs.levels import DEFAULT_LEVELS, levels_for, parse_levels
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.grid import parse_grid
from milepost.errors import InputError
from milepost.types import Task

TIERS = ("easy", "medium", "hard")


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
    p.add_argument(
        "--grade",
        "--tier",
        dest="grade",
        default="easy",
        help="technique tier(s): easy (default), medium, hard, or a comma list such as easy,medium,hard",
    )
    p.add_argument(
        "--keep",
        choices=("technique", "tier"),
        default="technique",
        help="medium/hard: while adding clues keep the seed's hardest technique of the tier (default) or any "
        "technique of the tier",
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


def _tiers(spec: str, size: int) -> list[str]:
    tiers = [t.strip() for t in spec.split(",") if t.strip()]
    for tier in tiers:
        if tier not in TIERS:
            raise InputError(f"sudoku: unknown tier {tier!r} (choose from {', '.join(TIERS)})")
        if tier != "easy" and size != 9:
            raise InputError(f"sudoku: {tier}-tier puzzles are 9x9 only (got --size {size})")
    if not tiers or len(set(tiers)) != len(tiers):
        raise InputError(f"sudoku: --grade needs distinct tiers, got {spec!r}")
    return tiers


def run(args: argparse.Namespace) -> int:
    # Imported here so that `milepost --help` does not load the generator stack.
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku import dataset, harder

    levels_for("sudoku", args.size)  # an unknown size fails before anything else
    spec = args.levels or DEFAULT_LEVELS[("sudoku", args.size)]
    levels = parse_levels(spec, "sudoku", args.size)
    tiers = _tiers(args.grade, args.size)
    out = Path(args.out)
    # Fail before minutes of generation rather than after; write_dataset checks again when it writes.
    if out.exists() and not args.overwrite and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not empty (pass --overwrite to replace it)")
    command = shlex.join(
        [
            "milepost", "data", "sudoku", "--size", str(args.size), "--levels", spec,
            "--train", str(args.train), "--test", str(args.test), "--seed", str(args.seed),
            "--grade", ",".join(tiers), *(["--keep", args.keep] if tiers != ["easy"] else []),
            "--out", str(out), *format_flags(args),
        ]
    )  # fmt: skip
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    manifests: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()  # canonical forms, so that no two tiers share a puzzle either
    for tier in tiers:
        if tier == "easy":
            part, manifests[tier] = dataset.build_dataset(
                args.size, levels, args.train, args.test, args.seed, tier=tier,
                progress=not args.no_progress, command=command,
            )  # fmt: skip
            if len(tiers) > 1:
                puzzles = (t.payload["puzzle"] for tasks in part.values() for t in tasks)
                seen.update(canonical_form(parse_grid(p, args.size)) for p in puzzles)
        else:
            part, manifests[tier] = harder.build_graded_dataset(
                levels, args.train, args.test, args.seed, tier, keep=args.keep,
                progress=not args.no_progress, command=command, seen=seen,
            )  # fmt: skip
        for split, tasks in part.items():
            splits[split].extend(tasks)
    manifest = manifests[tiers[0]] if len(tiers) == 1 else _merged(manifests, splits, command, args)
    if args.filter:
        from milepost.evaluation.proxy import filter_splits, filtered_manifest

        splits, kept = filter_splits(splits, args.filter)
        manifest = filtered_manifest(manifest, splits, kept)
        manifest["command"] = command + "".join(f" --filter {shlex.quote(r)}" for r in args.filter)
    target = write_dataset(out, splits, manifest, overwrite=args.overwrite, format=args.format)
    print(f"wrote {len(splits['train'])} train and {len(splits['test'])} test tasks to {target}")
    for part_manifest in manifests.values():
        for name in part_manifest["exhausted_levels"]:
            info = part_manifest["levels"][name]
            got = info["counts"]["train"] + info["counts"]["test"]
            asked = info["requested"]["train"] + info["requested"]["test"]
            print(f"level {name}: {got} distinct puzzles found of {asked} requested (the board has no more)")
    return 0


def _merged(
    manifests: dict[str, dict[str, Any]],
    splits: dict[str, list[Task]],
    command: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One manifest for a dataset of several tiers: the shared fields, then each tier's own manifest."""
    return {
        "env": "sudoku",
        "size": args.size,
        "command": command,
        "seed": args.seed,
        "tier": ",".join(manifests),
        "tiers": {tier: {k: v for k, v in m.items() if k != "command"} for tier, m in manifests.items()},
        "counts": {split: len(tasks) for split, tasks in splits.items()},
        "exhausted_levels": sorted({name for m in manifests.values() for name in m["exhausted_levels"]}),
    }
