"""Sudoku throughput benchmarks: environment steps, solver, dataset generation, each against a peer.

* Environment: atomic steps per second of the raw ``SudokuEnv`` (not wrapped by ``gymnasium.make``) playing
  precomputed correct fills, without rendering (``observe=False``: parse, validate, apply, subgoal check,
  info) and with rendering, beside TextArena's Sudoku environment playing the same moves on the same
  puzzles (its ``step`` plus the ``get_observation`` that hands its rendered board to the player).
  Targets: 100,000 steps/s unrendered; 3x TextArena rendered.
* Solver: puzzles per second on tdoku's top1465, first solution and count-to-two, beside the Norvig-style
  solver written for this benchmark (``baselines/norvig_sudoku.py``). Target: 5x, pure Python both.
* Dataset: easy puzzles per second per 9x9 level through ``build_dataset`` (generation, uniqueness check,
  singles grading, canonical-form de-duplication, records). Target: 200/s at every level.

The process is pinned to one core and timed in process CPU seconds (the machine is shared: wall time would
count other jobs); each figure is the best of several runs.
Results go to ``benchmarks/results/sudoku.{md,json,png}``. Run: ``python benchmarks/bench_sudoku.py``
(``--quick`` for a smaller, noisier run).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # for baselines/, whether run as a script or from run_all

from baselines import norvig_sudoku  # noqa: E402
from common import best_rate, best_rates, pin_one_core  # noqa: E402

from milepost.envs.levels import levels_for  # noqa: E402
from milepost.envs.sudoku import SudokuEnv, make_task  # noqa: E402
from milepost.envs.sudoku.bank import read_bank  # noqa: E402
from milepost.envs.sudoku.dataset import build_dataset  # noqa: E402
from milepost.envs.sudoku.generator import generate_easy  # noqa: E402
from milepost.envs.sudoku.grid import grid_to_str  # noqa: E402
from milepost.envs.sudoku.solver import solve  # noqa: E402

TOP1465 = HERE.parent / "tests" / "data" / "sudoku" / "puzzles3_magictour_top1465"
RESULTS = HERE / "results"
# CPU time of this process, not wall time: the machine is shared, and wall time would count the slices other
# jobs take from this core. Every figure, milepost's and the peers', is measured the same way.
clock = time.process_time
TARGETS = {"env_raw": 100_000.0, "env_rendered_ratio": 3.0, "solver_ratio": 5.0, "dataset": 200.0}


# -- environment ---------------------------------------------------------------------------------------


def env_games(count: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """L7 puzzles (41-45 empty cells): the longest episodes, so resets weigh least."""
    level = levels_for("sudoku", 9)[-1]
    rng = random.Random(seed)
    return [generate_easy(9, rng.randint(level.lo, level.hi), seed, i) for i in range(count)]


def milepost_env_run(games: list[tuple[list[int], list[int]]], observe: bool) -> Callable[[], tuple[int, float]]:
    """One timed pass of the milepost environment over ``games``: returns (steps, seconds)."""
    env = SudokuEnv(observe=observe, max_steps=100)
    tasks = [make_task(p, s, level="L7", index=i) for i, (p, s) in enumerate(games)]
    moves = [[f"value({s[i]}, r{i // 9 + 1}c{i % 9 + 1})" for i in range(81) if not p[i]] for p, s in games]

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for task, actions in zip(tasks, moves):
            env.reset(options={"task": task})
            start = clock()
            for action in actions:
                _, _, terminated, _, info = env.step(action)
            seconds += clock() - start
            steps += len(actions)
            if not (terminated and info["solved"]):
                raise RuntimeError("milepost env: the oracle moves did not solve the puzzle")
        return steps, seconds

    return run


def textarena_env_run(games: list[tuple[list[int], list[int]]]) -> Callable[[], tuple[int, float]] | None:
    """One timed pass of TextArena's Sudoku, unwrapped like ours; its board is swapped for ours after reset
    (outside the timing). None when textarena is not installed."""
    try:
        from textarena.envs.Sudoku.env import SudokuEnv as TextArenaSudoku
    except ImportError:
        return None
    env = TextArenaSudoku(clues=80, max_turns=100)  # 80 clues: its own generator's uniqueness search is short

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for puzzle, solution in games:
            random.seed(0)
            env.reset(num_players=1, seed=0)
            board = [puzzle[r * 9 : (r + 1) * 9] for r in range(9)]
            env.full_grid = [solution[r * 9 : (r + 1) * 9] for r in range(9)]
            env.game_board = copy.deepcopy(board)
            env.state.game_state["board"] = copy.deepcopy(board)
            env.get_observation()
            actions = [f"[{i // 9 + 1} {i % 9 + 1} {solution[i]}]" for i in range(81) if not puzzle[i]]
            start = clock()
            for action in actions:
                done, _ = env.step(action)
                env.get_observation()
            seconds += clock() - start
            steps += len(actions)
            if not (done and env.state.rewards == {0: 1}):
                raise RuntimeError("textarena env: the oracle moves did not solve the puzzle")
        return steps, seconds

    return run


def bench_env(games: list[tuple[list[int], list[int]]], repeats: int) -> dict[str, float | None]:
    """Steps/s of the three configurations, run in turn within each repeat so that load drift hits all."""
    runs: dict[str, Callable[[], tuple[int, float]] | None] = {
        "raw": milepost_env_run(games, observe=False),
        "rendered": milepost_env_run(games, observe=True),
        "textarena": textarena_env_run(games),
    }
    return best_rates(runs, repeats)


# -- solver --------------------------------------------------------------------------------------------


def _ours(puzzles: list[list[int]], limit: int) -> list[list[list[int]]]:
    return [solve(p, limit) for p in puzzles]


def _baseline(texts: list[str], count: bool) -> list[object]:
    if count:
        return [norvig_sudoku.count_solutions(t) for t in texts]
    return [norvig_sudoku.solve(t) for t in texts]


def bench_solver(puzzles: list[list[int]], repeats: int, chunk: int = 100) -> dict[str, float]:
    """Puzzles per second, interleaving milepost and baseline chunk by chunk so that load drift hits both."""
    texts = [grid_to_str(p) for p in puzzles]
    totals = dict.fromkeys(("first", "count2", "base_first", "base_count2"), 0.0)
    for i in range(0, len(puzzles), chunk):
        part, part_text = puzzles[i : i + chunk], texts[i : i + chunk]
        runs: dict[str, Callable[[], object]] = {
            "first": partial(_ours, part, 1),
            "count2": partial(_ours, part, 2),
            "base_first": partial(_baseline, part_text, False),
            "base_count2": partial(_baseline, part_text, True),
        }
        for name, fn in runs.items():
            best = float("inf")
            for _ in range(repeats):
                start = clock()
                fn()
                best = min(best, clock() - start)
            totals[name] += best
    n = len(puzzles)
    return {name: n / seconds for name, seconds in totals.items()}


def check_solver_agrees(puzzles: list[list[int]]) -> None:
    """Both solvers must give the same unique solution, or the speed comparison means nothing."""
    for p in puzzles:
        ours = solve(p, 2)
        base = norvig_sudoku.solve(grid_to_str(p))
        if len(ours) != 1 or grid_to_str(ours[0]) != base or norvig_sudoku.count_solutions(grid_to_str(p)) != 1:
            raise RuntimeError(f"solvers disagree on {grid_to_str(p)}")


# -- dataset -------------------------------------------------------------------------------------------


def bench_dataset(per_level: int, repeats: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    for level in levels_for("sudoku", 9):

        def run(level: Any = level) -> tuple[int, float]:
            start = clock()
            splits, _ = build_dataset(9, [level], per_level, 0, seed=0, progress=False)
            return len(splits["train"]), clock() - start

        rates[level.name] = best_rate(run, repeats)
    return rates


# -- report --------------------------------------------------------------------------------------------


def report_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: measure, milepost figure, peer figure, ratio, target, verdict."""
    rows: list[dict[str, Any]] = []

    def add(measure: str, ours: float, peer: float | None, peer_name: str, target: str, ok: bool) -> None:
        ratio = ours / peer if peer else None
        rows.append(
            {"measure": measure, "milepost": ours, "peer": peer, "peer_name": peer_name, "ratio": ratio,
             "target": target, "met": ok}
        )  # fmt: skip

    env = r["env"]
    add("env steps/s, no rendering", env["raw"], None, "", ">= 100,000/s", env["raw"] >= TARGETS["env_raw"])
    ta = env["textarena"]
    ratio_ok = ta is not None and env["rendered"] / ta >= TARGETS["env_rendered_ratio"]
    add("env steps/s, rendered", env["rendered"], ta, "TextArena Sudoku", ">= 3x peer", ratio_ok)
    s = r["solver"]
    for key, label in (("first", "first solution"), ("count2", "count to two")):
        ok = s[key] / s[f"base_{key}"] >= TARGETS["solver_ratio"]
        add(f"solver puzzles/s, top1465, {label}", s[key], s[f"base_{key}"], "Norvig-style", ">= 5x peer", ok)
    for name, rate in r["dataset"].items():
        add(f"dataset easy puzzles/s, 9x9 {name}", rate, None, "", ">= 200/s", rate >= TARGETS["dataset"])
    return rows


def _fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Sudoku throughput",
        "",
        f"{meta['date']}, Python {meta['python']}, {meta['machine']}, {meta['pinned']}; "
        f"rates per CPU second, best of {meta['repeats']} runs{' (quick mode)' if meta['quick'] else ''}. "
        f"Solver set: {meta['solver_puzzles']} puzzles of top1465.",
        "",
        "| measure | milepost | peer | peer figure | ratio | target | met |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(
            f"| {row['measure']} | {_fmt(row['milepost'])} | {row['peer_name'] or '-'} | "
            f"{_fmt(row['peer'])} | {ratio} | {row['target']} | {'yes' if row['met'] else 'NO'} |"
        )
    lines += [
        "",
        "Environment: the raw `SudokuEnv` (not `gymnasium.make`) plays precomputed correct fills of "
        f"{meta['env_episodes']} L7 puzzles; `observe=False` skips the observation, the rendered figure "
        "returns it (grid text). TextArena's `SudokuEnv` plays the same moves on the same puzzles "
        "(`[r c n]` actions), timing its `step` plus the `get_observation` that hands it the rendered board. "
        "Solver: milepost's `solve(p, 1)` / `solve(p, 2)` against `baselines/norvig_sudoku.py`, chunk by "
        "chunk. Dataset: `build_dataset` on one 9x9 level (generation, uniqueness check, singles grade, "
        "canonical-form de-duplication, records).",
    ]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Bar chart of the ratios against their targets; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # Peer comparisons show milepost / peer against their target ratio; absolute targets show figure / target.
    bars: list[tuple[str, float, float, bool]] = []  # label, ratio, target ratio, met
    for row in rows:
        if row["ratio"] is not None:
            target = TARGETS["solver_ratio"] if row["measure"].startswith("solver") else TARGETS["env_rendered_ratio"]
            bars.append((f"{row['measure']}\nvs {row['peer_name']}", row["ratio"], target, row["met"]))
        else:
            absolute = TARGETS["dataset"] if row["measure"].startswith("dataset") else TARGETS["env_raw"]
            bars.append(
                (
                    f"{row['measure']}\nvs target {absolute:,.0f}/s",
                    row["milepost"] / absolute,
                    1.0,
                    row["met"],
                )
            )
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(bars) + 1.5))
    ax.barh(range(len(bars)), [b[1] for b in bars], color=["tab:green" if b[3] else "tab:red" for b in bars])
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    for i, (_, value, target, _) in enumerate(bars):
        ax.text(value, i, f" {value:.1f}x", va="center", fontsize=7)
        ax.plot([target, target], [i - 0.42, i + 0.42], color="black", linewidth=1.5)
    ax.set_xlabel("ratio: milepost / peer, or figure / target (black tick: the target)")
    ax.set_title("Sudoku throughput, one core")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run every Sudoku benchmark, print the table and write ``benchmarks/results/sudoku.*``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer puzzles and repeats (noisier)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per figure (default 3; quick 2)")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(list(argv))
    repeats = args.repeats or (2 if args.quick else 3)
    pinned = pin_one_core()
    bank = [entry.puzzle for entry in read_bank(TOP1465, 9)]
    solver_set = bank[:300] if args.quick else bank
    check_solver_agrees(solver_set[:50])
    games = env_games(20 if args.quick else 60, seed=0)

    print("sudoku benchmark: environment ...", file=sys.stderr)
    env = bench_env(games, repeats=max(10, repeats))  # one pass is ~0.02 s: cheap to repeat on a busy machine
    results: dict[str, Any] = {
        "env": {**env, "episodes": len(games), "steps_per_pass": sum(p.count(0) for p, _ in games)}
    }
    print("sudoku benchmark: solver ...", file=sys.stderr)
    results["solver"] = bench_solver(solver_set, repeats=repeats)
    results["solver"]["puzzles"] = len(solver_set)
    print("sudoku benchmark: dataset ...", file=sys.stderr)
    results["dataset"] = bench_dataset(60 if args.quick else 200, repeats=repeats)
    rows = report_rows(results)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "pinned": pinned,
        "repeats": repeats,
        "quick": args.quick,
        "solver_puzzles": len(solver_set),
        "env_episodes": len(games),
    }
    text = markdown(rows, meta)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sudoku.md").write_text(text, encoding="utf-8")
    (out / "sudoku.json").write_text(json.dumps({"meta": meta, "results": results, "rows": rows}, indent=2) + "\n")
    plot(rows, out / "sudoku.png")
    return {"meta": meta, "results": results, "rows": rows}


if __name__ == "__main__":
    main(sys.argv[1:])
