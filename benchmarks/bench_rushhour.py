"""Rush Hour throughput benchmarks: the exact cluster solver and the environment, each against a peer.

* Solver: puzzles per second over Fogleman's boards (``/work/shared/data/rush/rush_18k.txt``, 18,068 boards,
  about 85 million cluster states; falls back to ``tests/data/rushhour/rush_sample.txt``), beside the plain
  breadth-first solver written for this benchmark (``baselines/plain_bfs_rush.py``: string states, one
  dictionary of visited boards). Both explore each puzzle's whole cluster and are checked against the
  file's ``MM`` and ``CLUSTER`` columns; milepost computes both distance tables (steps and moves) of every
  state, the baseline only the start's move count. Timing alternates between the two chunk by chunk, so
  load drift on the shared machine hits both; no distance table outlives its chunk. Target: 5x.
  The default is an evenly spaced sample of the file (``--limit``); ``--limit 0`` runs all of it.
* Environment: atomic steps per second of the raw ``RushHourEnv`` playing precomputed legal one-cell moves
  (random walks that never solve), without rendering (``observe=False``; target 100,000/s) and with
  rendering, beside TextArena's Rush Hour environment playing the same moves on the same boards (its red
  car is ``X``; it renders its board on every step). Best of several runs.
* Generation (information, no target): generated puzzles per second for each of the paper's levels.

The process is pinned to one core. Results go to ``benchmarks/results/rushhour.{md,json,png}``.
Run: ``python benchmarks/bench_rushhour.py [--limit N] [--batch B]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # for baselines/, whether run as a script or from run_all

from baselines import plain_bfs_rush  # noqa: E402
from common import best_rates, pin_one_core  # noqa: E402

from milepost.envs.levels import parse_levels  # noqa: E402
from milepost.envs.rushhour import RushHourEnv, make_task  # noqa: E402
from milepost.envs.rushhour.board import parse_board  # noqa: E402
from milepost.envs.rushhour.fogleman import FoglemanRecord, read_fogleman  # noqa: E402
from milepost.envs.rushhour.generator import generate_puzzle  # noqa: E402
from milepost.envs.rushhour.solver import solve_many  # noqa: E402
from milepost.envs.rushhour.state import RushHourState  # noqa: E402
from milepost.progress import progress_bar  # noqa: E402

FULL = Path("/work/shared/data/rush/rush_18k.txt")
SAMPLE = HERE.parent / "tests" / "data" / "rushhour" / "rush_sample.txt"
RESULTS = HERE / "results"
TARGETS = {"solver_ratio": 5.0, "env_raw": 100_000.0}


# -- solver --------------------------------------------------------------------------------------------


def pick(records: list[FoglemanRecord], limit: int) -> list[FoglemanRecord]:
    """``limit`` evenly spaced records (the file is ordered by moves, so every level is represented)."""
    if not limit or limit >= len(records):
        return records
    return [records[round(i * (len(records) - 1) / (limit - 1))] for i in range(limit)] if limit > 1 else records[:1]


def bench_solver(records: list[FoglemanRecord], batch: int, progress: bool) -> dict[str, Any]:
    """Seconds, states and agreement of both solvers over ``records``, alternating chunk by chunk."""
    seconds = {"milepost": 0.0, "baseline": 0.0}
    agree = {"milepost": 0, "baseline": 0}
    states = 0
    bar = progress_bar(total=len(records), desc="rushhour solver", unit="board", enabled=progress)
    for i in range(0, len(records), batch):
        chunk = records[i : i + batch]
        start = time.process_time()
        clusters = solve_many([parse_board(rec.board) for rec in chunk], batch_size=batch)
        found = [(c.min_moves, c.size) for c in clusters]
        seconds["milepost"] += time.process_time() - start
        del clusters  # the distance tables of a chunk go before the next chunk is solved
        start = time.process_time()
        plain = [plain_bfs_rush.solve(rec.board) for rec in chunk]
        seconds["baseline"] += time.process_time() - start
        for rec, ours, theirs in zip(chunk, found, plain):
            truth = (rec.min_moves, rec.cluster_size)
            agree["milepost"] += ours == truth
            agree["baseline"] += theirs == truth
            states += rec.cluster_size
        bar.update(len(chunk))
    bar.close()
    n = len(records)
    return {
        "boards": n,
        "states": states,
        "batch": batch,
        "seconds": seconds,
        "agree": agree,
        "puzzles_per_s": {k: n / v for k, v in seconds.items()},
        "states_per_s": {k: states / v for k, v in seconds.items()},
    }


# -- environment ---------------------------------------------------------------------------------------


def walks(records: list[FoglemanRecord], boards: int, length: int, seed: int) -> list[tuple[str, list[str]]]:
    """Wall-free boards (TextArena has no walls) with a random walk of legal one-cell moves that never
    solves the puzzle (so every move of every walk is played)."""
    rng = random.Random(seed)
    pool = [rec.board for rec in records if "x" not in rec.board and rec.min_moves >= 4]
    chosen = [pool[round(i * (len(pool) - 1) / max(boards - 1, 1))] for i in range(boards)]
    out = []
    for board in chosen:
        state = RushHourState.from_board(board)
        moves = []
        for _ in range(length):
            options = [m for m in state.legal_actions() if not (m.vehicle == "A" and state.positions[0] == 3)]
            move = rng.choice(options)
            state.apply(move)
            moves.append(move.text())
        out.append((board, moves))
    return out


def milepost_env_run(games: list[tuple[str, list[str]]], observe: bool) -> Callable[[], tuple[int, float]]:
    """One timed pass of the milepost environment (resets outside the timing): returns (steps, seconds)."""
    env = RushHourEnv(observe=observe, max_steps=10**9)
    tasks = [make_task(board) for board, _ in games]

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for task, (_, actions) in zip(tasks, games):
            env.reset(options={"task": task})
            start = time.perf_counter()
            for action in actions:
                _, _, _, _, info = env.step(action)
            seconds += time.perf_counter() - start
            steps += len(actions)
            if info["error"] is not None or info["solved"]:
                raise RuntimeError(f"milepost env: walk on {task.payload['board']} went wrong: {info['error']}")
        return steps, seconds

    return run


def textarena_env_run(games: list[tuple[str, list[str]]]) -> Callable[[], tuple[int, float]] | None:
    """One timed pass of TextArena's Rush Hour (its puzzle replaced by ours after reset, outside the timing);
    None when textarena is not installed."""
    try:
        from textarena.envs.RushHour.env import RushHourEnv as TextArenaRushHour
        from textarena.envs.RushHour.env import _Vehicle
    except ImportError:
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # its generator prints on construction and reset
        env = TextArenaRushHour(difficulty="easy")
    converted = []
    for board, actions in games:
        state = RushHourState.from_board(board)
        vehicles = {}
        for v, pos in zip(state.layout.vehicles, state.positions):
            vid = "X" if v.letter == "A" else v.letter  # its red car is X; our letters stop before X
            row, col = (v.lane, pos) if v.horizontal else (pos, v.lane)
            vehicles[vid] = _Vehicle(vid, row, col, v.length, v.horizontal)
        signs = {"right": "+", "down": "+", "left": "-", "up": "-"}
        ta_actions = []
        for text in actions:
            letter, direction = text[5:-1].split(", ")
            ta_actions.append(f"[{'X' if letter == 'A' else letter}{signs[direction]}]")
        converted.append((vehicles, ta_actions))

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for vehicles, actions in converted:
            with contextlib.redirect_stdout(io.StringIO()):
                env.reset(num_players=1, seed=0)
            env.state.game_state["vehicles"] = {vid: v.copy() for vid, v in vehicles.items()}
            start = time.perf_counter()
            for action in actions:
                done, _ = env.step(action)
            seconds += time.perf_counter() - start
            steps += len(actions)
            if done or env.state.made_invalid_move:
                raise RuntimeError("textarena env: a legal walk was refused or ended the game")
        return steps, seconds

    return run


def bench_env(games: list[tuple[str, list[str]]], repeats: int) -> dict[str, float | None]:
    """Best steps/s of the three configurations, run in turn within each repeat so load drift hits all."""
    runs: dict[str, Callable[[], tuple[int, float]] | None] = {
        "raw": milepost_env_run(games, observe=False),
        "rendered": milepost_env_run(games, observe=True),
        "textarena": textarena_env_run(games),
    }
    return best_rates(runs, repeats)


def bench_generation(per_level: int) -> dict[str, float]:
    """Generated puzzles per second (search included) for each of the paper's levels."""
    rates = {}
    for level in parse_levels("4-6,7-9,10-12,13-15,16-18,19-21", "rushhour", 6):
        start = time.process_time()
        for index in range(per_level):
            generate_puzzle(0, index, level)
        rates[level.name] = per_level / (time.process_time() - start)
    return rates


# -- report --------------------------------------------------------------------------------------------


def report_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: measure, milepost figure, peer figure, ratio, target, verdict."""
    rows: list[dict[str, Any]] = []

    def add(measure: str, ours: float, peer: float | None, peer_name: str, target: str, ok: bool | None) -> None:
        rows.append(
            {"measure": measure, "milepost": ours, "peer": peer, "peer_name": peer_name,
             "ratio": ours / peer if peer else None, "target": target, "met": ok}
        )  # fmt: skip

    s = r["solver"]
    where = f"{s['boards']:,} boards, {s['states']:,} states"
    ratio = s["puzzles_per_s"]["milepost"] / s["puzzles_per_s"]["baseline"]
    add(f"solver puzzles/s ({where})", s["puzzles_per_s"]["milepost"], s["puzzles_per_s"]["baseline"],
        "plain BFS", ">= 5x peer", ratio >= TARGETS["solver_ratio"])  # fmt: skip
    add("solver cluster states/s", s["states_per_s"]["milepost"], s["states_per_s"]["baseline"], "plain BFS",
        "-", None)  # fmt: skip
    env = r["env"]
    add("env steps/s, no rendering", env["raw"], None, "", ">= 100,000/s", env["raw"] >= TARGETS["env_raw"])
    add("env steps/s, rendered", env["rendered"], env["textarena"], "TextArena RushHour", "side by side", None)
    for name, rate in r.get("generation", {}).items():
        add(f"generated puzzles/s, level {name}", rate, None, "", "-", None)
    return rows


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:,.2f}"


def markdown(rows: list[dict[str, Any]], r: dict[str, Any], meta: dict[str, Any]) -> str:
    s = r["solver"]
    lines = [
        "# Rush Hour throughput",
        "",
        f"{meta['date']}, Python {meta['python']}, {meta['machine']}, {meta['pinned']}. "
        f"Solver: {meta['data']}, "
        f"{s['boards']:,} boards ({meta['selection']}), batches of {s['batch']}, process time, alternating "
        f"chunk by chunk; both solvers agree with the file on {s['agree']['milepost']:,} / "
        f"{s['agree']['baseline']:,} of {s['boards']:,} boards (milepost / baseline). Environment: best of "
        f"{meta['repeats']} runs, {meta['env_steps']:,} steps per run.",
        "",
        "| measure | milepost | peer | peer figure | ratio | target | met |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        met = "-" if row["met"] is None else "yes" if row["met"] else "NO"
        lines.append(
            f"| {row['measure']} | {_fmt(row['milepost'])} | {row['peer_name'] or '-'} | "
            f"{_fmt(row['peer'])} | {ratio} | {row['target']} | {met} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Bar chart of the ratios (milepost / peer, or / target figure); False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bars = [(f"{row['measure']}\nvs {row['peer_name']}", row["ratio"], row["met"]) for row in rows if row["ratio"]]
    raw = next(row for row in rows if row["measure"] == "env steps/s, no rendering")
    bars.append(("env steps/s, no rendering\nvs target 100,000/s", raw["milepost"] / TARGETS["env_raw"], raw["met"]))
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(bars) + 1.5))
    colours = ["tab:green" if met or met is None else "tab:red" for _, _, met in bars]
    ax.barh(range(len(bars)), [v for _, v, _ in bars], color=colours)
    ax.set_yticks(range(len(bars)), [label for label, _, _ in bars], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.axvline(TARGETS["solver_ratio"], color="tab:orange", linewidth=0.8, linestyle="--", label="solver target 5x")
    for i, (_, v, _) in enumerate(bars):
        ax.text(v, i, f" {v:.1f}x", va="center", fontsize=7)
    ax.set_xlabel("ratio (milepost / peer, or / target figure)")
    ax.set_title("Rush Hour throughput, one core")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the Rush Hour benchmarks, print the table and write ``benchmarks/results/rushhour.*``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=600, help="boards for the solver (default 600; 0 = all)")
    parser.add_argument("--batch", type=int, default=32, help="boards per solver batch (default 32)")
    parser.add_argument("--data", default=None, help="Fogleman file (default: rush_18k.txt, else the sample)")
    parser.add_argument("--env-boards", type=int, default=10, help="boards for the environment runs")
    parser.add_argument("--env-steps", type=int, default=2000, help="random-walk moves per board")
    parser.add_argument("--repeats", type=int, default=3, help="environment runs (best is kept)")
    parser.add_argument("--gen", type=int, default=3, help="generated puzzles per level (0 = skip)")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(list(argv))
    pinned = pin_one_core()
    data = Path(args.data) if args.data else FULL if FULL.is_file() else SAMPLE
    records = read_fogleman(data)
    chosen = pick(records, args.limit)

    print(f"rushhour benchmark: solver on {len(chosen):,} boards of {data} ...", file=sys.stderr)
    results: dict[str, Any] = {"solver": bench_solver(chosen, args.batch, progress=not args.no_progress)}
    print("rushhour benchmark: environment ...", file=sys.stderr)
    games = walks(records, args.env_boards, args.env_steps, seed=0)
    results["env"] = {
        **bench_env(games, args.repeats),
        "boards": len(games),
        "steps_per_run": len(games) * args.env_steps,
    }
    if args.gen:
        print("rushhour benchmark: generation ...", file=sys.stderr)
        results["generation"] = bench_generation(args.gen)
    rows = report_rows(results)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "pinned": pinned,
        "data": str(data),
        "selection": "all" if len(chosen) == len(records) else f"{len(chosen)} evenly spaced of {len(records):,}",
        "repeats": args.repeats,
        "env_steps": len(games) * args.env_steps,
    }
    text = markdown(rows, results, meta)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rushhour.md").write_text(text, encoding="utf-8")
    (out / "rushhour.json").write_text(json.dumps({"meta": meta, "results": results, "rows": rows}, indent=2) + "\n")
    plot(rows, out / "rushhour.png")
    return {"meta": meta, "results": results, "rows": rows}


if __name__ == "__main__":
    main(sys.argv[1:])
