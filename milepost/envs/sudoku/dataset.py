"""Sudoku level datasets (DESIGN: Contracts): train and test tasks per level, distinct up to symmetry.

Each level draws puzzles one index at a time: draw ``k`` of the level at table position ``p`` has index
``p * LEVEL_INDEX_STRIDE + k``, its number of empty cells comes from its own random stream inside the level's
range, and the puzzle is ``generator.generate_easy(size, empties, seed, index)``. So every task can be rebuilt
from ``(seed, index, goal_distance)``, and a level's tasks do not depend on which other levels were asked for.

A draw is kept only when its canonical form (``canonical.canonical_form``: digit relabelling, row / column /
band / stack permutations and transposition) is new across all levels and both splits, the solver confirms
that the solution is unique, and the singles solver confirms the tier. The first distinct draws of a level
go to the test split and the next ones to train, so the test set does not change with ``n_train``.

Small boards have few distinct puzzles (4x4 has a few hundred per empties count). A level stops after
``MAX_DUPLICATE_STREAK`` draws in a row that found nothing new, and the manifest records how many it found
against how many were asked for.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from milepost import __version__
from milepost.envs.levels import Level, levels_for
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.env import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.singles import SinglesGrade, classify_singles
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError
from milepost.progress import progress_bar
from milepost.types import Task

GENERATOR_VERSION = f"milepost {__version__} sudoku-easy/1"
"""Names the generation procedure; bump the suffix whenever a (seed, index) would give another puzzle."""

TIERS: tuple[str, ...] = ("easy",)
"""Tiers this module generates; the medium and hard tiers are built by ``harder.build_graded_dataset``."""

LEVEL_INDEX_STRIDE = 1_000_000  # draws of one level; the next level's indices start after them
MAX_PER_LEVEL = 100_000
MAX_DUPLICATE_STREAK = 1_000
MAX_FAILED_START = 64  # a level whose first draws all fail to produce a puzzle is impossible


@dataclass
class _Found:
    index: int
    puzzle: list[int]
    solution: list[int]
    grade: SinglesGrade


@dataclass
class _LevelResult:
    found: list[_Found]
    draws: int
    duplicates: int
    failures: int
    exhausted: bool


def _empties(seed: int, index: int, level: Level) -> int:
    # Its own stream, so that the empties count is not correlated with the puzzle's random grid.
    return random.Random(f"sudoku-empties:{seed}:{index}").randint(level.lo, level.hi)


def _draw_level(
    size: int,
    level: Level,
    position: int,
    wanted: int,
    seed: int,
    tier: str,
    seen: set[str],
    bar: tqdm[Any],
) -> _LevelResult:
    """Draw distinct puzzles of one level until ``wanted`` are found or the level runs out."""
    found: list[_Found] = []
    draws = duplicates = failures = streak = 0
    while len(found) < wanted and streak < MAX_DUPLICATE_STREAK and draws < LEVEL_INDEX_STRIDE:
        if not found and failures >= MAX_FAILED_START:
            break
        index = position * LEVEL_INDEX_STRIDE + draws
        draws += 1
        try:
            puzzle, solution = generate_easy(size, _empties(seed, index, level), seed, index)
        except InputError:
            failures += 1  # no puzzle of that many empties within the generator's restart budget
            streak += 1
            continue
        form = canonical_form(puzzle)
        if form in seen:
            duplicates += 1
            streak += 1
            continue
        # generate_easy promises uniqueness by construction; the check guards that promise, and a broken
        # promise is a bug (a traceback), not bad input.
        solutions = solve(puzzle, limit=2)
        if solutions != [solution]:
            raise RuntimeError(f"generator bug: sudoku seed {seed} index {index} is not a unique puzzle")
        grade = classify_singles(puzzle)
        if grade.tier != tier:
            raise RuntimeError(f"generator bug: seed {seed} index {index} graded {grade.tier}, not {tier}")
        seen.add(form)
        found.append(_Found(index, puzzle, solution, grade))
        streak = 0
        bar.update(1)
    return _LevelResult(found, draws, duplicates, failures, exhausted=len(found) < wanted)


def _split_sizes(found: int, n_train: int, n_test: int) -> tuple[int, int]:
    """How many of ``found`` distinct puzzles go to train and test; the ratio is kept when short."""
    if found >= n_train + n_test:
        return n_train, n_test
    test = round(found * n_test / (n_train + n_test))
    if n_test and found >= 2:
        test = max(test, 1)
    if n_train and found >= 2:
        test = min(test, found - 1)
    return found - test, test


def build_dataset(
    size: int,
    levels: Sequence[Level],
    n_train: int,
    n_test: int,
    seed: int,
    tier: str = "easy",
    progress: bool = True,
    *,
    command: str | None = None,
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Generate the train and test tasks of Sudoku levels, distinct up to symmetry across both splits.

    Args:
        size: board side, 4, 6 or 9.
        levels: levels of that size (``levels.parse_levels``).
        n_train: training tasks per level.
        n_test: test tasks per level.
        seed: the dataset seed; the same arguments always give the same tasks.
        tier: technique tier of every puzzle (only ``easy``, Full House and Naked Single, for now).
        progress: show a progress bar on stderr.
        command: the command line to record in the manifest.

    Returns:
        ``({"train": tasks, "test": tasks}, manifest)``; tasks are ordered by level, then draw.

    Raises:
        InputError: an unknown size or tier, a level of another size, negative or zero counts, or a level
            that yields no puzzle at all.
    """
    table = levels_for("sudoku", size)
    if tier not in TIERS:
        raise InputError(f"sudoku: tier {tier!r} cannot be generated (available: {', '.join(TIERS)})")
    if n_train < 0 or n_test < 0:
        raise InputError(f"sudoku: task counts must be >= 0 (got train {n_train}, test {n_test})")
    if n_train + n_test == 0:
        raise InputError("sudoku: nothing to generate (train and test are both 0)")
    if n_train + n_test > MAX_PER_LEVEL:
        raise InputError(f"sudoku: at most {MAX_PER_LEVEL:,} tasks per level (asked {n_train + n_test:,})")
    if not levels:
        raise InputError("sudoku: no levels given")
    for level in levels:
        if level not in table:
            raise InputError(f"sudoku {size}x{size}: level {level.name} ({level.lo}-{level.hi}) is not of this size")
    seen: set[str] = set()
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    per_level: dict[str, dict[str, Any]] = {}
    wanted = n_train + n_test
    with progress_bar(
        total=wanted * len(levels),
        desc=f"sudoku {size}x{size}",
        unit="puzzle",
        enabled=progress,
        file=sys.stderr,
    ) as bar:
        for level in levels:
            bar.set_postfix_str(level.name)
            result = _draw_level(size, level, table.index(level), wanted, seed, tier, seen, bar)
            if not result.found:
                raise InputError(
                    f"sudoku {size}x{size}: level {level.name} ({level.lo}-{level.hi} empty cells) yields no "
                    f"{tier}-tier puzzle"
                )
            k_train, k_test = _split_sizes(len(result.found), n_train, n_test)
            for split, items in (("test", result.found[:k_test]), ("train", result.found[k_test:][:k_train])):
                splits[split].extend(
                    make_task(
                        item.puzzle,
                        item.solution,
                        level=level.name,
                        split=split,
                        seed=seed,
                        index=item.index,
                        meta={"tier": item.grade.tier, "singles": _singles_counts(item.grade)},
                    )
                    for item in items
                )
            per_level[level.name] = {
                "empty_cells": [level.lo, level.hi],
                "requested": {"train": n_train, "test": n_test},
                "counts": {"train": k_train, "test": k_test},
                "exhausted": result.exhausted,
                "draws": result.draws,
                "duplicates": result.duplicates,
                "failed_draws": result.failures,
            }
    manifest: dict[str, Any] = {
        "env": "sudoku",
        "size": size,
        "command": command,
        "seed": seed,
        "tier": tier,
        "generator": GENERATOR_VERSION,
        "dedup": "canonical form: relabelling, row/column/band/stack permutations, transposition (4x4, 9x9)",
        "levels": per_level,
        "counts": {split: len(tasks) for split, tasks in splits.items()},
        "exhausted_levels": [name for name, info in per_level.items() if info["exhausted"]],
    }
    return splits, manifest


def _singles_counts(grade: SinglesGrade) -> dict[str, int]:
    return {
        "full_house": grade.full_house,
        "naked_single": grade.naked_single,
        "hidden_single": grade.hidden_single,
    }
