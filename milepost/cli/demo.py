"""``milepost demo``: the main job. Until the agent and training issues land it builds a small Sudoku level
dataset and plays every test task through the environment with the solver (a labelled oracle baseline),
printing one row per level."""

from __future__ import annotations

import argparse
import time
from pathlib import Path



def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="run the main job (datasets + solver playthrough for now)", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--size", type=int, default=9, help="Sudoku board side (default 9)")
    p.add_argument("--levels", default=None, help="levels to build (default: all of the size)")
    p.add_argument("--train", type=int, default=64, help="training tasks per level")
    p.add_argument("--test", type=int, default=20, help="test tasks per level")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from milepost.datasets import write_dataset
    from milepost.envs.levels import parse_levels
    from milepost.envs.sudoku import SudokuEnv
    from milepost.envs.sudoku.dataset import build_dataset
    from milepost.envs.sudoku.rules import oracle_fill

    console = Console()
    levels = parse_levels(args.levels or ("L1-L7" if args.size == 9 else "S1-S4"), "sudoku", args.size)
    splits, manifest = build_dataset(args.size, levels, args.train, args.test, args.seed, progress=True)
    data_dir = write_dataset(Path(args.out) / f"sudoku{args.size}", splits, manifest, overwrite=True)
    console.print(f"dataset written to {data_dir}")

    table = Table(title=f"Sudoku {args.size}x{args.size}: oracle (solver) baseline through the environment")
    for col in ("level", "empties", "tasks", "solved", "mean steps", "subgoals", "env steps/s"):
        table.add_column(col, justify="right")
    env = SudokuEnv(size=args.size, max_steps=50 if args.size == 9 else 20)
    for level in levels:
        tasks = [t for t in splits["test"] if t.level == level.name]
        solved = steps = goals = 0
        start = time.perf_counter()
        for task in tasks:
            env.reset(options={"task": task})
            done = False
            info = None
            while not done:
                fill = oracle_fill(env.state)
                text = fill.text() if fill is not None else "pass"
                _, _, terminated, truncated, info = env.step(text)
                done = terminated or truncated
            assert info is not None
            solved += info["solved"]
            steps += info["steps"]
            goals += len(info["subgoals_completed"]) == info["num_subgoals"]
        elapsed = time.perf_counter() - start
        n = max(len(tasks), 1)
        table.add_row(
            level.name, f"{level.lo}-{level.hi}", str(len(tasks)), f"{100 * solved / n:.0f}%",
            f"{steps / n:.1f}", f"{100 * goals / n:.0f}%", f"{steps / max(elapsed, 1e-9):,.0f}",
        )
    console.print(table)
    console.print("oracle = the solver's next move: a labelled baseline, not a learned policy")
    return 0
