"""The technique grader: solve a 9x9 puzzle the way HoDoKu does and report what it took.

Each round tries the technique finders in HoDoKu's order (``scores.TABLE``) and applies the first step the
first successful finder returns, so the path always takes the easiest step available. The path ends when the
grid is full (graded: HoDoKu level and score, the paper's tier) or when no finder has a step (``beyond``:
the puzzle needs a technique the grader does not implement; nothing is guessed).

Every step is checked against the puzzle's unique solution as it is applied: a placement must write the
solution's digit and an elimination must not remove it. A finder that breaks this is a bug, reported as a
``RuntimeError`` rather than a wrong grade.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from milepost.envs.sudoku.grader import (
    chains,
    fish,
    intersections,
    single_digit,
    singles,
    subsets,
    uniqueness,
    wings,
)
from milepost.envs.sudoku.grader.candidates import Board, Step, name
from milepost.envs.sudoku.grader.scores import (
    TABLE,
    HodokuLevel,
    Technique,
    Tier,
    hodoku_level,
    paper_tier,
)
from milepost.envs.sudoku.grid import conflicts, parse_grid
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError

Finder = Callable[[Board], Iterator[Step]]

_T = Technique
FINDERS: dict[Technique, Finder] = {
    _T.FULL_HOUSE: singles.full_house,
    _T.NAKED_SINGLE: singles.naked_single,
    _T.HIDDEN_SINGLE: singles.hidden_single,
    _T.LOCKED_PAIR: subsets.locked_pair,
    _T.LOCKED_TRIPLE: subsets.locked_triple,
    _T.LOCKED_CANDIDATES_1: intersections.locked_candidates_1,
    _T.LOCKED_CANDIDATES_2: intersections.locked_candidates_2,
    _T.NAKED_PAIR: subsets.naked_pair,
    _T.NAKED_TRIPLE: subsets.naked_triple,
    _T.HIDDEN_PAIR: subsets.hidden_pair,
    _T.HIDDEN_TRIPLE: subsets.hidden_triple,
    _T.NAKED_QUADRUPLE: subsets.naked_quadruple,
    _T.HIDDEN_QUADRUPLE: subsets.hidden_quadruple,
    _T.X_WING: fish.x_wing,
    _T.SWORDFISH: fish.swordfish,
    _T.JELLYFISH: fish.jellyfish,
    _T.SKYSCRAPER: single_digit.skyscraper,
    _T.TWO_STRING_KITE: single_digit.two_string_kite,
    _T.TURBOT_FISH: single_digit.turbot_fish,
    _T.EMPTY_RECTANGLE: single_digit.empty_rectangle,
    _T.W_WING: wings.w_wing,
    _T.XY_WING: wings.xy_wing,
    _T.XYZ_WING: wings.xyz_wing,
    _T.REMOTE_PAIR: chains.remote_pair,
    _T.BUG_PLUS_1: uniqueness.bug_plus_1,
    _T.UNIQUENESS_1: uniqueness.uniqueness_1,
    _T.UNIQUENESS_2: uniqueness.uniqueness_2,
    _T.UNIQUENESS_3: uniqueness.uniqueness_3,
    _T.UNIQUENESS_4: uniqueness.uniqueness_4,
    _T.UNIQUENESS_5: uniqueness.uniqueness_5,
    _T.UNIQUENESS_6: uniqueness.uniqueness_6,
    _T.HIDDEN_RECTANGLE: uniqueness.hidden_rectangle,
    _T.AVOIDABLE_RECTANGLE_1: uniqueness.avoidable_rectangle_1,
    _T.AVOIDABLE_RECTANGLE_2: uniqueness.avoidable_rectangle_2,
    _T.FINNED_X_WING: fish.finned_x_wing,
    _T.SASHIMI_X_WING: fish.sashimi_x_wing,
    _T.FINNED_SWORDFISH: fish.finned_swordfish,
    _T.SASHIMI_SWORDFISH: fish.sashimi_swordfish,
    _T.FINNED_JELLYFISH: fish.finned_jellyfish,
    _T.SASHIMI_JELLYFISH: fish.sashimi_jellyfish,
}
"""Every technique's finder: it yields each instance on the board, in a fixed order."""

ORDER: tuple[tuple[Technique, Finder], ...] = tuple(
    (t, FINDERS[t]) for t in sorted(FINDERS, key=lambda t: TABLE[t].order)
)
"""The finders in HoDoKu's solving order."""

BEST_OF: frozenset[Technique] = frozenset({_T.TURBOT_FISH, _T.REMOTE_PAIR})
"""Techniques whose HoDoKu solver collects every instance and applies the one that eliminates most (its chain
solver sorts its steps); the others apply the first instance of their scan order."""


def _rank(step: Step) -> tuple[int, int]:
    # HoDoKu's SolutionStep order: more eliminations first, then the smaller weighted index sum over the
    # eliminations sorted by (digit, cell), with weights 1, 81, 161, ...
    ordered = sorted((digit, cell) for cell, digit in step.eliminations)
    return -len(ordered), sum(cell * (1 + 80 * i) + digit for i, (digit, cell) in enumerate(ordered))


def _first(technique: Technique, finder: Finder, board: Board) -> Step | None:
    if technique in BEST_OF:
        return min(finder(board), key=_rank, default=None)
    return next(finder(board), None)


@dataclass(frozen=True)
class Grade:
    """What solving one puzzle took.

    Attributes:
        tier: the paper's tier: the hardest among the techniques used; ``beyond`` when the grader got stuck.
        solved: whether the grader filled the grid.
        techniques: steps per technique, in HoDoKu's order (for ``beyond``, the steps made before stalling).
        hodoku_level: HoDoKu's level (``easy`` .. ``extreme``); None when not solved.
        hodoku_score: HoDoKu's score (sum of the steps' base scores); None when not solved.
        steps: the solution path.
        remaining: empty cells left when the grader stalled (0 when solved).
    """

    tier: Tier
    solved: bool
    techniques: dict[Technique, int]
    hodoku_level: HodokuLevel | None
    hodoku_score: int | None
    steps: tuple[Step, ...]
    remaining: int

    def meta(self) -> dict[str, Any]:
        """The task ``meta`` fields: tier, HoDoKu level and score, technique counts by name."""
        return {
            "tier": self.tier,
            "hodoku_level": self.hodoku_level,
            "hodoku_score": self.hodoku_score,
            "techniques": {t.value: n for t, n in self.techniques.items()},
        }


def _cells(puzzle: Sequence[int] | str) -> list[int]:
    cells = parse_grid(puzzle, 9) if isinstance(puzzle, str) else list(puzzle)
    if len(cells) != 81 or any(not (isinstance(d, int) and 0 <= d <= 9) for d in cells):
        raise InputError("sudoku grader: expected a 9x9 puzzle (81 cells of 0-9)")
    why = conflicts(cells, 9)
    if why:
        raise InputError(f"sudoku grader: the givens break a rule ({why})")
    return cells


def next_step(board: Board, profile: dict[Technique, float] | None = None) -> Step | None:
    """The step of the first finder (in HoDoKu's order) that has one; None when all are stuck.

    ``profile`` accumulates seconds spent per finder, successful or not.
    """
    if profile is None:
        for technique, finder in ORDER:
            step = _first(technique, finder, board)
            if step is not None:
                return step
        return None
    clock = time.perf_counter
    for technique, finder in ORDER:
        start = clock()
        step = _first(technique, finder, board)
        profile[technique] = profile.get(technique, 0.0) + clock() - start
        if step is not None:
            return step
    return None


def grade(
    puzzle: Sequence[int] | str,
    solution: Sequence[int] | None = None,
    *,
    profile: dict[Technique, float] | None = None,
) -> Grade:
    """Grade a 9x9 puzzle by the techniques its HoDoKu-style solution path needs.

    Args:
        puzzle: 81 cells (0 = empty), as ints or a string (``0`` or ``.`` for empty).
        solution: the puzzle's unique solution when known (generators know it); otherwise the solver finds
            it and checks that it is unique.
        profile: when given, seconds spent in each finder are added to it (for benchmarks).

    Raises:
        InputError: not a 9x9 puzzle, givens that break a rule, no solution or more than one.
        RuntimeError: a step that contradicts the solution (a grader bug, or a wrong ``solution``).
    """
    cells = _cells(puzzle)
    if solution is None:
        found = solve(cells, limit=2)
        if len(found) != 1:
            raise InputError(
                "sudoku grader: the puzzle has " + ("no solution" if not found else "more than one solution")
            )
        answer = found[0]
    else:
        answer = list(solution)
    board = Board.from_puzzle(cells)
    steps: list[Step] = []
    counts: dict[Technique, int] = {}
    while board.empty:
        step = next_step(board, profile)
        if step is None:
            break
        for cell, digit in step.placements:
            if answer[cell] != digit:
                raise RuntimeError(
                    f"sudoku grader: {step.describe()} places {name(cell)}={digit}, but the solution has {answer[cell]}"
                )
        for cell, digit in step.eliminations:
            if answer[cell] == digit:
                raise RuntimeError(
                    f"sudoku grader: {step.describe()} eliminates the solution's {digit} from {name(cell)}"
                )
        board.apply(step)
        steps.append(step)
        counts[step.technique] = counts.get(step.technique, 0) + 1
    ordered = {t: counts[t] for t in FINDERS if t in counts}
    ordered = dict(sorted(ordered.items(), key=lambda item: TABLE[item[0]].order))
    remaining = board.empty.bit_count()
    if remaining:
        return Grade("beyond", False, ordered, None, None, tuple(steps), remaining)
    level, score = hodoku_level(ordered)
    return Grade(paper_tier(ordered), True, ordered, level, score, tuple(steps), 0)
