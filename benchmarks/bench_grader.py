"""Technique grader benchmark: graded puzzles per second by tier at L5, time share per technique, HoDoKu parity.

* Grading: puzzles per CPU second for easy, medium and hard 9x9 puzzles at L5 (31-35 empty cells), with the
  solution given (as the dataset generator calls it) and without (the grader then solves the puzzle first to
  check uniqueness). Easy puzzles come from ``generator.generate_easy``, medium and hard ones from
  ``harder.generate_graded``, all from fixed seeds.
* Peer: hodoku-py (a pure-Python port of HoDoKu 2.2, validated against its jar) rating the same puzzles, when
  it is installed (``pip install hodoku-py``; GPL-3.0, an optional benchmark peer only). Its solution paths
  are compared step by step with the grader's. Target: 5x the peer at every tier.
* Time share: seconds spent in each technique's finder (successful or not) over each set, from
  ``grade(..., profile=...)``.
* Generation: medium and hard puzzles per second at L5 through ``harder.generate_graded`` (seed puzzle,
  clue walk, final grade).

The process is pinned to one core and timed in process CPU seconds; each rate is the best of several runs.
Results go to ``benchmarks/results/grader.{md,json,png}``. Run: ``python benchmarks/bench_grader.py``
(``--quick`` for a smaller, noisier run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from common import best_rate, pin_one_core  # noqa: E402

from milepost.envs.levels import get_level  # noqa: E402
from milepost.envs.sudoku.generator import generate_easy  # noqa: E402
from milepost.envs.sudoku.grader import TABLE, Technique, grade  # noqa: E402
from milepost.envs.sudoku.harder import WalkStats, generate_graded  # noqa: E402

RESULTS = HERE / "results"
clock = time.process_time  # CPU time: the machine is shared
TIERS = ("easy", "medium", "hard")
PEER_RATIO_TARGET = 5.0
PLACEMENTS = {"FULL_HOUSE", "NAKED_SINGLE", "HIDDEN_SINGLE"}
OTHER = "(loading the board, applying steps, solution checks)"


def puzzle_sets(count: int, hard_count: int) -> tuple[dict[str, list[tuple[list[int], list[int]]]], dict[str, Any]]:
    """The benchmark puzzles per tier at L5, and the generation rates of the medium and hard ones."""
    level = get_level("sudoku", 9, "L5")
    sets: dict[str, list[tuple[list[int], list[int]]]] = {"easy": []}
    for i in range(count):
        empties = level.lo + i % (level.hi - level.lo + 1)
        sets["easy"].append(generate_easy(9, empties, seed=0, index=i))
    generation: dict[str, Any] = {}
    for tier in ("medium", "hard"):
        sets[tier] = []
        stats = WalkStats()
        draws = 0
        start = clock()
        while len(sets[tier]) < hard_count:
            made = generate_graded(tier, level, seed=0, index=draws, stats=stats)
            draws += 1
            if made is not None:
                sets[tier].append((made.puzzle, made.solution))
        seconds = clock() - start
        generation[tier] = {
            "puzzles": len(sets[tier]), "draws": draws, "seconds": seconds,
            "per_second": len(sets[tier]) / seconds, "seed_puzzles": stats.seeds, "grades": stats.grades,
        }  # fmt: skip
    return sets, generation


def bench_grading(puzzles: list[tuple[list[int], list[int]]], repeats: int) -> dict[str, Any]:
    def with_solution() -> tuple[int, float]:
        start = clock()
        for puzzle, solution in puzzles:
            grade(puzzle, solution)
        return len(puzzles), clock() - start

    def without_solution() -> tuple[int, float]:
        start = clock()
        for puzzle, _ in puzzles:
            grade(puzzle)
        return len(puzzles), clock() - start

    profile: dict[Technique, float] = {}
    techniques: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    start = time.perf_counter()  # the profile's own clock, so that the shares add up
    for puzzle, solution in puzzles:
        found = grade(puzzle, solution, profile=profile)
        tiers[found.tier] += 1
        techniques.update(t.value for t in found.techniques)
    total = time.perf_counter() - start
    share = {t.value: seconds / total for t, seconds in sorted(profile.items(), key=lambda kv: -kv[1])}
    share[OTHER] = max(0.0, 1.0 - sum(share.values()))
    return {
        "puzzles": len(puzzles),
        "rate": best_rate(with_solution, repeats),
        "rate_unknown_solution": best_rate(without_solution, repeats),
        "time_share": share,
        "tiers": dict(tiers),
        "techniques_used": dict(techniques.most_common()),
    }


def bench_peer(puzzles: list[tuple[list[int], list[int]]], repeats: int) -> dict[str, Any] | None:
    """hodoku-py's rate on the same puzzles and how many of its paths the grader reproduces step by step."""
    try:
        import hodoku
    except ImportError:
        return None
    solver = hodoku.Solver()
    texts = ["".join(map(str, p)) for p, _ in puzzles]

    def run() -> tuple[int, float]:
        start = clock()
        for text in texts:
            solver.solve(text)
        return len(texts), clock() - start

    names = {t.name for t in Technique}
    same = comparable = 0
    for text in texts:
        theirs = solver.solve(text)
        if not all(s.type.name in names for s in theirs.steps):
            continue
        comparable += 1
        ours = grade(text)
        expected = [
            (s.type.name, tuple(zip(s.indices, s.values)))
            if s.type.name in PLACEMENTS
            else (s.type.name, tuple(sorted((c.index, c.value) for c in s.candidates_to_delete)))
            for s in theirs.steps
        ]
        got = [(s.technique.name, s.placements or tuple(sorted(s.eliminations))) for s in ours.steps]
        same += got == expected and ours.hodoku_score == theirs.score
    return {"rate": best_rate(run, max(1, repeats - 1)), "comparable": comparable, "identical_paths": same}


def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# Technique grader throughput (9x9, L5: 31-35 empty cells)",
        "",
        f"{meta['date']}, Python {meta['python']}, {meta['machine']}, {meta['pinned']}; rates per CPU second, "
        f"best of {meta['repeats']} runs{' (quick mode)' if meta['quick'] else ''}.",
        "",
        "| tier | puzzles | graded/s (solution given) | graded/s (uniqueness checked) | hodoku-py/s | ratio | "
        "target | met | identical paths |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for tier in TIERS:
        r = results["grading"][tier]
        peer = results["peer"].get(tier) if results["peer"] else None
        ratio = r["rate"] / peer["rate"] if peer else None
        met = "-" if ratio is None else ("yes" if ratio >= PEER_RATIO_TARGET else "NO")
        peer_rate = "-" if not peer else f"{peer['rate']:,.1f}"
        same = "-" if not peer else f"{peer['identical_paths']}/{peer['comparable']}"
        ratio_text = "-" if ratio is None else f"{ratio:.1f}x"
        lines.append(
            f"| {tier} | {r['puzzles']} | {r['rate']:,.0f} | {r['rate_unknown_solution']:,.0f} | {peer_rate} | "
            f"{ratio_text} | >= {PEER_RATIO_TARGET:.0f}x peer | {met} | {same} |"
        )
    lines += ["", "Generation at L5 (`harder.generate_graded`: seed puzzle, clue walk, final grade):", ""]
    lines += [
        "| tier | puzzles | draws | seed puzzles | grades | puzzles/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for tier, g in results["generation"].items():
        lines.append(
            f"| {tier} | {g['puzzles']} | {g['draws']} | {g['seed_puzzles']} | {g['grades']} | {g['per_second']:.1f} |"
        )
    lines += ["", "Share of grading time per technique finder (successful or not; top 8) and the rest:", ""]
    for tier in TIERS:
        share = dict(results["grading"][tier]["time_share"])
        rest = share.pop(OTHER)
        top = ", ".join(f"{name} {100 * s:.0f}%" for name, s in list(share.items())[:8])
        lines.append(f"- **{tier}**: {top}; {OTHER[1:-1]} {100 * rest:.0f}%")
    lines += [
        "",
        "Tiers of the sets as graded: "
        + "; ".join(f"{t}: {results['grading'][t]['tiers']}" for t in TIERS)
        + ". Identical paths: puzzles whose HoDoKu path uses only implemented techniques and whose grader path "
        "has the same steps (technique, placements, eliminations) in the same order and the same score.",
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> bool:
    """Horizontal bars: share of grading time per technique, one panel per tier."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    order = [t.value for t in sorted(TABLE, key=lambda t: TABLE[t].order)] + [OTHER]
    fig, axes = plt.subplots(1, 3, figsize=(13, 8), sharey=True)
    for ax, tier in zip(axes, TIERS):
        share = results["grading"][tier]["time_share"]
        values = [100 * share.get(name, 0.0) for name in order]
        colors = [f"C{TIERS.index(TABLE[Technique(name)].tier)}" if name != OTHER else "grey" for name in order]
        ax.barh(range(len(order)), values, color=colors)
        ax.set_title(f"{tier} puzzles ({results['grading'][tier]['rate']:,.0f}/s)")
        ax.set_xlabel("share of grading time (%)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(order)), order, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle("Technique grader, 9x9 L5: where the time goes (colour: the technique's paper tier; grey: the rest)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the grader benchmark, print the table and write ``benchmarks/results/grader.*``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer puzzles and repeats (noisier)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per figure (default 3; quick 2)")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(list(argv))
    repeats = args.repeats or (2 if args.quick else 3)
    pinned = pin_one_core()
    print("grader benchmark: generating puzzles ...", file=sys.stderr)
    sets, generation = puzzle_sets(60 if args.quick else 200, 12 if args.quick else 40)
    results: dict[str, Any] = {"generation": generation, "grading": {}, "peer": {}}
    for tier in TIERS:
        print(f"grader benchmark: grading {tier} ...", file=sys.stderr)
        results["grading"][tier] = bench_grading(sets[tier], repeats)
        peer = bench_peer(sets[tier], repeats)
        if peer is None:
            results["peer"] = None
        elif results["peer"] is not None:
            results["peer"][tier] = peer
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "pinned": pinned,
        "repeats": repeats,
        "quick": args.quick,
    }
    text = markdown(results, meta)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grader.md").write_text(text, encoding="utf-8")
    (out / "grader.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    plot(results, out / "grader.png")
    return {"meta": meta, "results": results}


if __name__ == "__main__":
    main(sys.argv[1:])
