"""Medium and hard 9x9 Sudoku datasets: puzzles whose HoDoKu-style solution path needs the paper's tier.

The paper's default levels keep the easy tier (Full House and Naked Single), so that horizon is the only
variable; its technique-generalisation study (appendix D.4, Figure 12) adds medium and hard puzzles at the
same goal distances. Public hard puzzles have 45-64 empty cells, more than any level, so a puzzle of a tier
and a level is made in two stages, one draw at a time:

1. Seed: a random minimal puzzle (a random solution grid with cells emptied in random order while the
   solution stays unique), redrawn until the grader (``grader.grade``) puts it in the requested tier.
2. Walk down: add clues from the solution one at a time, in random order, keeping a clue only while the
   re-graded puzzle still needs the tier (``keep="tier"``), or, by default, still needs the *anchor*: the
   seed's hardest technique of that tier (``keep="technique"``; otherwise medium puzzles drift to Hidden
   Singles and hard ones to BUG+1, the most robust technique of each tier). The walk stops at the draw's
   target number of empty cells, or anywhere in the level's range when it runs out of cells to try.

A clue that the singles before the path's first harder step would place anyway needs no re-grade: the
singles closure of the new givens is the same state, so the rest of the path is unchanged (Full House and
Naked Single for medium; Hidden Single too for hard), unless the path uses an Avoidable Rectangle, the one
technique that tells givens from placed cells. Every kept puzzle is graded once more at the end, and
that grade is what its task records: ``meta = {"tier", "hodoku_level", "hodoku_score", "techniques"}``.

Draw ``k`` of the level at table position ``p`` has index ``p * LEVEL_INDEX_STRIDE + k`` and its own random
streams, so every task can be rebuilt from ``(tier, seed, index)``. Puzzles are distinct up to symmetry across
levels and splits (``canonical.canonical_form``), as in ``dataset.py``. Hard puzzles come easily from about
20 empty cells up (most draws succeed); at 11-15 few draws do, through endgame patterns such as Remote Pairs
or BUG+1. A request a level cannot meet within its draw budget is an ``InputError`` that says how many
puzzles were found.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from milepost import __version__
from milepost.envs.levels import Level, levels_for
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.dataset import LEVEL_INDEX_STRIDE, MAX_PER_LEVEL, _split_sizes
from milepost.envs.sudoku.env import make_task
from milepost.envs.sudoku.generator import random_solution
from milepost.envs.sudoku.grader import TABLE, Grade, Technique, grade
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError
from milepost.progress import progress_bar
from milepost.types import Task

GENERATOR_VERSION = f"milepost {__version__} sudoku-graded/1"
"""Names the procedure; bump the suffix whenever a (tier, seed, index) would give another puzzle."""

TIERS: tuple[str, ...] = ("medium", "hard")
KEEP_MODES: tuple[str, ...] = ("technique", "tier")

MAX_SEEDS = 64  # seed puzzles drawn per draw while looking for ones of the tier
MAX_WALKS = 3  # seeds of the tier walked down per draw before the draw fails
DRAWS_PER_TASK = 10  # a level's draw budget: this many per requested task ...
MIN_DRAWS = 60  # ... and at least this many; a level with nothing after MIN_DRAWS draws is given up

_T = Technique
_SINGLES: dict[str, frozenset[Technique]] = {
    "medium": frozenset({_T.FULL_HOUSE, _T.NAKED_SINGLE}),
    "hard": frozenset({_T.FULL_HOUSE, _T.NAKED_SINGLE, _T.HIDDEN_SINGLE}),
}


@dataclass
class WalkStats:
    """What one draw cost: seed puzzles drawn, seeds walked, grader calls."""

    seeds: int = 0
    walks: int = 0
    grades: int = 0

    def add(self, other: WalkStats) -> None:
        self.seeds += other.seeds
        self.walks += other.walks
        self.grades += other.grades


@dataclass(frozen=True)
class GradedPuzzle:
    """A generated puzzle, its solution, and its final grade."""

    puzzle: list[int]
    solution: list[int]
    grade: Grade
    anchor: Technique | None  # the technique the walk kept (None with keep="tier")


def minimal_puzzle(rng: random.Random) -> tuple[list[int], list[int]]:
    """A random minimal 9x9 puzzle: every given is needed for a unique solution."""
    solution = random_solution(9, rng)
    puzzle = list(solution)
    order = list(range(81))
    rng.shuffle(order)
    for cell in order:
        digit = puzzle[cell]
        puzzle[cell] = 0
        if len(solve(puzzle, limit=2)) != 1:
            puzzle[cell] = digit
    return puzzle, solution


def anchor_of(found: Grade, tier: str) -> Technique | None:
    """The path's hardest technique of ``tier`` (latest in HoDoKu's order), or None."""
    of_tier = [t for t in found.techniques if TABLE[t].tier == tier]
    return max(of_tier, key=lambda t: TABLE[t].order) if of_tier else None


def free_cells(found: Grade, tier: str) -> set[int]:
    """Cells placed by singles before the path's first other step: adding them as clues keeps the path.

    Avoidable Rectangles are the one technique that tells givens from placed cells, and a new clue turns a
    placed cell into a given, so a path that uses one gets no free cells.
    """
    if _T.AVOIDABLE_RECTANGLE_1 in found.techniques or _T.AVOIDABLE_RECTANGLE_2 in found.techniques:
        return set()
    singles = _SINGLES[tier]
    cells: set[int] = set()
    for step in found.steps:
        if step.technique not in singles:
            break
        cells.update(cell for cell, _ in step.placements)
    return cells


def walk_down(
    puzzle: list[int],
    solution: list[int],
    found: Grade,
    tier: str,
    level: Level,
    target: int,
    rng: random.Random,
    *,
    keep: str = "technique",
    stats: WalkStats | None = None,
) -> GradedPuzzle | None:
    """Add clues to ``puzzle`` (of ``tier``) down to ``target`` empty cells while it keeps needing the tier.

    Returns None when the walk cannot bring the puzzle into ``level``'s range.
    """
    stats = stats if stats is not None else WalkStats()
    anchor = anchor_of(found, tier) if keep == "technique" else None
    current = list(puzzle)
    empty = [c for c in range(81) if not current[c]]
    rng.shuffle(empty)
    left = len(empty)
    free = free_cells(found, tier)
    for cell in empty:
        if left <= target:
            break
        current[cell] = solution[cell]
        if cell in free:
            left -= 1  # the same singles closure: the path after it does not change
            continue
        stats.grades += 1
        trial = grade(current, solution)
        if trial.tier == tier and (anchor is None or anchor in trial.techniques):
            left -= 1
            free = free_cells(trial, tier)
        else:
            current[cell] = 0
    if not level.contains(left):
        return None
    stats.grades += 1
    final = grade(current, solution)
    if final.tier != tier or (anchor is not None and anchor not in final.techniques):
        raise RuntimeError(f"generator bug: a {tier} walk ended on a {final.tier} puzzle")
    return GradedPuzzle(current, list(solution), final, anchor)


def _target(seed: int, index: int, level: Level) -> int:
    # Its own stream, so that the target is not correlated with the puzzle's random choices.
    return random.Random(f"sudoku-graded-empties:{seed}:{index}").randint(level.lo, level.hi)


def generate_graded(
    tier: str, level: Level, seed: int, index: int, *, keep: str = "technique", stats: WalkStats | None = None
) -> GradedPuzzle | None:
    """Puzzle ``index`` of ``seed`` for ``tier`` at ``level``, or None when this draw finds none.

    Raises:
        InputError: an unknown tier or keep mode, or a level that is not a 9x9 level.
    """
    if tier not in TIERS:
        raise InputError(f"sudoku: tier {tier!r} is not generated here (choose from {', '.join(TIERS)})")
    if keep not in KEEP_MODES:
        raise InputError(f"sudoku: keep mode {keep!r} is unknown (choose from {', '.join(KEEP_MODES)})")
    if level not in levels_for("sudoku", 9):
        raise InputError(f"sudoku: medium and hard puzzles are 9x9 only (level {level.name} is not)")
    own = WalkStats()  # this draw's cost; the walk limit is per draw
    rng = random.Random(f"sudoku-graded:{tier}:{seed}:{index}")
    target = _target(seed, index, level)
    result = None
    while result is None and own.seeds < MAX_SEEDS and own.walks < MAX_WALKS:
        puzzle, solution = minimal_puzzle(rng)
        own.seeds += 1
        own.grades += 1
        found = grade(puzzle, solution)
        if found.tier == tier:
            own.walks += 1
            result = walk_down(puzzle, solution, found, tier, level, target, rng, keep=keep, stats=own)
    if stats is not None:
        stats.add(own)
    return result


@dataclass
class _LevelResult:
    found: list[tuple[int, GradedPuzzle]] = field(default_factory=list)
    draws: int = 0
    duplicates: int = 0
    failures: int = 0
    stats: WalkStats = field(default_factory=WalkStats)


def _draw_level(
    level: Level, position: int, wanted: int, seed: int, tier: str, keep: str, seen: set[str], bar: tqdm[Any]
) -> _LevelResult:
    result = _LevelResult()
    budget = max(MIN_DRAWS, DRAWS_PER_TASK * wanted)
    while len(result.found) < wanted and result.draws < budget:
        if not result.found and result.draws >= MIN_DRAWS:
            break
        index = position * LEVEL_INDEX_STRIDE + result.draws
        result.draws += 1
        made = generate_graded(tier, level, seed, index, keep=keep, stats=result.stats)
        if made is None:
            result.failures += 1
            continue
        form = canonical_form(made.puzzle)
        if form in seen:
            result.duplicates += 1
            continue
        seen.add(form)
        result.found.append((index, made))
        bar.update(1)
    return result


def build_graded_dataset(
    levels: Sequence[Level],
    n_train: int,
    n_test: int,
    seed: int,
    tier: str,
    *,
    keep: str = "technique",
    progress: bool = True,
    command: str | None = None,
    seen: set[str] | None = None,
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Generate train and test tasks of 9x9 levels in a medium or hard tier, distinct up to symmetry.

    Args:
        levels: 9x9 levels (``levels.parse_levels``).
        n_train: training tasks per level.
        n_test: test tasks per level (the first distinct draws of a level).
        seed: the dataset seed; the same arguments always give the same tasks.
        tier: ``medium`` or ``hard`` (the paper's tiers, appendix D.4).
        keep: ``technique`` (default: the seed's hardest technique of the tier stays needed) or ``tier``.
        progress: show a progress bar on stderr.
        command: the command line to record in the manifest.
        seen: canonical forms already used (e.g. by another tier of the same dataset); updated in place.

    Returns:
        ``({"train": tasks, "test": tasks}, manifest)``, tasks ordered by level, then draw. Task ids carry
        the tier (``sudoku9-test-L5-hard-0-4000012``), so they never collide with an easy dataset's.

    Raises:
        InputError: bad arguments, or a level that cannot supply the requested count within its draw
            budget (the message says how many puzzles it found).
    """
    if tier not in TIERS:
        raise InputError(f"sudoku: tier {tier!r} is not generated here (choose from {', '.join(TIERS)})")
    if keep not in KEEP_MODES:
        raise InputError(f"sudoku: keep mode {keep!r} is unknown (choose from {', '.join(KEEP_MODES)})")
    if n_train < 0 or n_test < 0 or n_train + n_test == 0:
        raise InputError(f"sudoku: need a positive task count (got train {n_train}, test {n_test})")
    if n_train + n_test > MAX_PER_LEVEL:
        raise InputError(f"sudoku: at most {MAX_PER_LEVEL:,} tasks per level (asked {n_train + n_test:,})")
    if not levels:
        raise InputError("sudoku: no levels given")
    table = levels_for("sudoku", 9)
    for level in levels:
        if level not in table:
            raise InputError(f"sudoku: {tier} puzzles are 9x9 only; level {level.name} is not a 9x9 level")
    seen = seen if seen is not None else set()
    wanted = n_train + n_test
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    per_level: dict[str, dict[str, Any]] = {}
    with progress_bar(
        total=wanted * len(levels),
        desc=f"sudoku 9x9 {tier}",
        unit="puzzle",
        enabled=progress,
        file=sys.stderr,
    ) as bar:
        for level in levels:
            bar.set_postfix_str(level.name)
            result = _draw_level(level, table.index(level), wanted, seed, tier, keep, seen, bar)
            if len(result.found) < wanted:
                raise InputError(
                    f"sudoku 9x9: level {level.name} ({level.lo}-{level.hi} empty cells) gave "
                    f"{len(result.found)} of {wanted} requested {tier}-tier puzzles in {result.draws} draws"
                )
            k_train, k_test = _split_sizes(len(result.found), n_train, n_test)
            for split, items in (("test", result.found[:k_test]), ("train", result.found[k_test:][:k_train])):
                splits[split].extend(_task(made, level, split, seed, index, tier) for index, made in items)
            hardest = Counter(str(anchor_of(made.grade, tier)) for _, made in result.found)
            per_level[level.name] = {
                "empty_cells": [level.lo, level.hi],
                "requested": {"train": n_train, "test": n_test},
                "counts": {"train": k_train, "test": k_test},
                "exhausted": False,
                "draws": result.draws,
                "duplicates": result.duplicates,
                "failed_draws": result.failures,
                "seed_puzzles": result.stats.seeds,
                "walks": result.stats.walks,
                "grades": result.stats.grades,
                "hardest_technique": dict(hardest.most_common()),
            }
    manifest: dict[str, Any] = {
        "env": "sudoku",
        "size": 9,
        "command": command,
        "seed": seed,
        "tier": tier,
        "keep": keep,
        "generator": GENERATOR_VERSION,
        "grader": "milepost HoDoKu-style technique grader (HoDoKu 2.2 order, scores and levels; paper tiers)",
        "dedup": "canonical form: relabelling, row/column/band/stack permutations, transposition",
        "levels": per_level,
        "counts": {split: len(tasks) for split, tasks in splits.items()},
        "exhausted_levels": [],
    }
    return splits, manifest


def _task(made: GradedPuzzle, level: Level, split: str, seed: int, index: int, tier: str) -> Task:
    task = make_task(
        made.puzzle,
        made.solution,
        level=level.name,
        split=split,
        seed=seed,
        index=index,
        meta=made.grade.meta(),
    )
    return dataclasses.replace(task, task_id=f"sudoku9-{split}-{level.name}-{tier}-{seed}-{index}")
