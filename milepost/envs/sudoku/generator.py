"""Deterministic Sudoku generation: puzzle ``index`` of seed ``seed`` comes from ``task_rng(seed, index)``.

Easy-tier puzzles (solvable by Full House and Naked Single alone, the paper's appendix D.4) are made by
removing cells from a random solution grid while the puzzle stays naked-single solvable. Such a puzzle has
a unique solution by construction (every step is forced), so no search is needed to keep it unique.
"""

from __future__ import annotations

import random

from milepost.envs.sudoku.grid import geometry
from milepost.envs.sudoku.singles import naked_single_fills, naked_single_solvable
from milepost.errors import InputError

_MAX_RESTARTS = 64

__all__ = ["carve_easy", "generate_easy", "naked_single_solvable", "random_solution", "task_rng"]


def task_rng(seed: int, index: int) -> random.Random:
    """The random stream of item ``index`` under ``seed`` (string seeding is stable across runs)."""
    return random.Random(f"sudoku:{seed}:{index}")


def random_solution(n: int, rng: random.Random) -> list[int]:
    """A uniformly shuffled valid complete grid, by randomised backtracking over bitmasks."""
    geo = geometry(n)
    cells = [0] * (n * n)
    rows = [0] * n
    cols = [0] * n
    boxes = [0] * n
    digits = list(range(1, n + 1))
    order = list(range(n * n))

    def fill(pos: int) -> bool:
        if pos == len(order):
            return True
        # Pick the empty cell with fewest candidates (keeps the search shallow on 9x9).
        best, best_count, best_mask = -1, n + 1, 0
        for cell in order[pos:]:
            mask = geo.full & ~(rows[geo.row_of[cell]] | cols[geo.col_of[cell]] | boxes[geo.box_of[cell]])
            count = mask.bit_count()
            if count < best_count:
                best, best_count, best_mask = cell, count, mask
                if count <= 1:
                    break
        if best_count == 0:
            return False
        i = order.index(best, pos)
        order[pos], order[i] = order[i], order[pos]
        r, c, b = geo.row_of[best], geo.col_of[best], geo.box_of[best]
        trial = digits[:]
        rng.shuffle(trial)
        for d in trial:
            bit = 1 << (d - 1)
            if best_mask & bit:
                cells[best] = d
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
                if fill(pos + 1):
                    return True
                rows[r] &= ~bit
                cols[c] &= ~bit
                boxes[b] &= ~bit
        cells[best] = 0
        return False

    if not fill(0):  # pragma: no cover - an empty board always has a completion
        raise RuntimeError("no completion found")
    return cells


def carve_easy(solution: list[int], empties: int, rng: random.Random) -> list[int] | None:
    """Empty ``empties`` cells, in a shuffled order, keeping the puzzle naked-single solvable.

    Naked-single solvability only gets harder as cells are removed, so a cell rejected once stays rejected
    and one pass over the shuffled cells is the whole walk. Most removals are accepted by a one-look test
    (the cell is a naked single of the current givens, so it can be solved first); only the others pay for
    a propagation, which stops as soon as it refills the cell. Returns None when the walk ends short of
    ``empties``.
    """
    n = round(len(solution) ** 0.5)
    peers = geometry(n).peers
    need = n - 1
    puzzle = list(solution)
    order = list(range(n * n))
    rng.shuffle(order)
    removed = 0
    if empties == 0:
        return puzzle
    for cell in order:
        seen = 0
        for p in peers[cell]:
            d = puzzle[p]
            if d:
                seen |= 1 << (d - 1)
        puzzle[cell] = 0
        if seen.bit_count() == need or naked_single_fills(puzzle, cell):
            removed += 1
            if removed == empties:
                return puzzle
        else:
            puzzle[cell] = solution[cell]
    return None


def generate_easy(n: int, empties: int, seed: int, index: int) -> tuple[list[int], list[int]]:
    """Easy-tier puzzle ``index`` of ``seed`` with exactly ``empties`` empty cells.

    Returns:
        ``(puzzle, solution)`` as lists of n*n ints (0 = empty).

    Raises:
        InputError: if ``empties`` is out of range or no such puzzle was found within the restart budget.
    """
    geo = geometry(n)
    if not 0 <= empties < geo.cells:
        raise InputError(f"sudoku {n}x{n}: cannot leave {empties} of {geo.cells} cells empty")
    rng = task_rng(seed, index)
    for _ in range(_MAX_RESTARTS):
        solution = random_solution(n, rng)
        puzzle = carve_easy(solution, empties, rng)
        if puzzle is not None:
            return puzzle, solution
    raise InputError(f"sudoku {n}x{n}: found no easy-tier puzzle with {empties} empty cells")
