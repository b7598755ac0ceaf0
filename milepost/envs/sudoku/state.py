"""Sudoku game state: the object solvers, planners, subgoal predicates and tests use directly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from operator import itemgetter
from typing import NamedTuple, Self

from milepost.envs.sudoku.grid import Geometry, geometry


@cache
def _unit_getter(unit: tuple[int, ...]) -> Callable[[Sequence[int]], tuple[int, ...]]:
    """Fetch a unit's cells as a tuple (``itemgetter`` returns a bare item for one index: hence the wrap)."""
    if len(unit) == 1:
        only = unit[0]
        return lambda cells: (cells[only],)
    return itemgetter(*unit)


class Fill(NamedTuple):
    """Write ``digit`` into 0-based ``row``, ``col``; text form ``value(digit, r{row+1}c{col+1})``."""

    row: int
    col: int
    digit: int

    def text(self, cell_first: bool = False) -> str:
        """``value(n, rXcY)`` (the paper's order) or, with ``cell_first``, ``value(rXcY, n)``."""
        if cell_first:
            return f"value(r{self.row + 1}c{self.col + 1}, {self.digit})"
        return f"value({self.digit}, r{self.row + 1}c{self.col + 1})"


class SudokuState:
    """A board with givens, the solution, and row / column / box digit masks for O(1) legality checks.

    ``allow_overwrite`` lets non-given filled cells be rewritten (off by default, as in the paper).
    """

    __slots__ = (
        "allow_overwrite",
        "box_mask",
        "cells",
        "col_mask",
        "empty",
        "geo",
        "givens",
        "n",
        "row_mask",
        "solution",
        "version",
        "wrong",
    )

    def __init__(
        self,
        puzzle: list[int],
        solution: list[int] | None = None,
        *,
        allow_overwrite: bool = False,
    ) -> None:
        n_cells = len(puzzle)
        n = round(n_cells**0.5)
        self.geo: Geometry = geometry(n)
        self.n = n
        self.cells = list(puzzle)
        self.givens = tuple(d != 0 for d in puzzle)
        self.solution = tuple(solution) if solution is not None else None
        self.allow_overwrite = allow_overwrite
        self.row_mask = [0] * n
        self.col_mask = [0] * n
        self.box_mask = [0] * n
        self.empty = 0
        self.wrong = 0  # filled cells that disagree with the solution
        self.version = 0  # counts writes, so that views of the board (rendered text) can tell they are stale
        geo = self.geo
        for i, d in enumerate(puzzle):
            if d:
                bit = 1 << (d - 1)
                self.row_mask[geo.row_of[i]] |= bit
                self.col_mask[geo.col_of[i]] |= bit
                self.box_mask[geo.box_of[i]] |= bit
            else:
                self.empty += 1

    # -- game-state API ------------------------------------------------------------------------------------

    def why_illegal(self, fill: Fill) -> str | None:
        """Why ``fill`` breaks a rule, or None when it is legal."""
        n = self.n
        row, col, digit = fill
        if not (0 <= row < n and 0 <= col < n):
            return f"cell r{row + 1}c{col + 1} is off the {n}x{n} board"
        if not 1 <= digit <= n:
            return f"digit {digit} is not in 1-{n}"
        cell = row * n + col
        if self.givens[cell]:
            return f"r{row + 1}c{col + 1} is a given cell"
        current = self.cells[cell]
        if current and not self.allow_overwrite:
            return f"r{row + 1}c{col + 1} is already filled"
        if current == digit:
            return f"r{row + 1}c{col + 1} already holds {digit}"
        bit = 1 << (digit - 1)
        if self.row_mask[row] & bit:
            return f"{digit} is already in row {row + 1}"
        if self.col_mask[col] & bit:
            return f"{digit} is already in column {col + 1}"
        if self.box_mask[self.geo.box_of[cell]] & bit:
            return f"{digit} is already in the box of r{row + 1}c{col + 1}"
        return None

    def apply(self, fill: Fill) -> None:
        """Apply a fill; raises ``ValueError`` when it is illegal (the text env checks first)."""
        why = self.why_illegal(fill)
        if why is not None:
            raise ValueError(why)
        self._write(fill.row * self.n + fill.col, fill.digit)

    def _write(self, cell: int, digit: int) -> None:
        geo = self.geo
        r, c, b = geo.row_of[cell], geo.col_of[cell], geo.box_of[cell]
        old = self.cells[cell]
        if old:
            clear = ~(1 << (old - 1))
            self.row_mask[r] &= clear
            self.col_mask[c] &= clear
            self.box_mask[b] &= clear
            if self.solution is not None and old != self.solution[cell]:
                self.wrong -= 1
        else:
            self.empty -= 1
        bit = 1 << (digit - 1)
        self.row_mask[r] |= bit
        self.col_mask[c] |= bit
        self.box_mask[b] |= bit
        self.cells[cell] = digit
        self.version += 1
        if self.solution is not None and digit != self.solution[cell]:
            self.wrong += 1

    def candidates(self, cell: int) -> int:
        """Mask of digits that can legally go into an empty ``cell`` (0 for a filled one)."""
        if self.cells[cell]:
            return 0
        geo = self.geo
        used = self.row_mask[geo.row_of[cell]] | self.col_mask[geo.col_of[cell]] | self.box_mask[geo.box_of[cell]]
        return geo.full & ~used

    def legal_actions(self) -> list[Fill]:
        """Every legal fill of an empty cell (rewrites are not listed even if allowed), by cell then digit."""
        n = self.n
        out: list[Fill] = []
        for cell in range(n * n):
            mask = self.candidates(cell)
            d = 1
            while mask:
                if mask & 1:
                    out.append(Fill(cell // n, cell % n, d))
                mask >>= 1
                d += 1
        return out

    def is_solved(self) -> bool:
        # Every cell filled with no rule broken (legality is enforced on every write) is a solution.
        return self.empty == 0 and (self.solution is None or self.wrong == 0)

    def is_dead(self) -> bool:
        """True when the board can no longer become the solution (a wrong digit that cannot be erased)."""
        return self.wrong > 0 and not self.allow_overwrite

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other.geo, other.n = self.geo, self.n
        other.cells = list(self.cells)
        other.givens, other.solution, other.allow_overwrite = self.givens, self.solution, self.allow_overwrite
        other.row_mask, other.col_mask, other.box_mask = (
            list(self.row_mask),
            list(self.col_mask),
            list(self.box_mask),
        )
        other.empty, other.wrong, other.version = self.empty, self.wrong, self.version
        return other

    def unit_solved(self, unit: tuple[int, ...]) -> bool:
        """True when every cell of ``unit`` holds its solution digit."""
        # Runs on every fill (subgoal checks): C-level item fetches instead of a generator over the cells.
        fetch = _unit_getter(unit)
        if self.solution is None:
            return all(fetch(self.cells))
        return fetch(self.cells) == fetch(self.solution)

    def __repr__(self) -> str:
        return f"SudokuState({''.join(map(str, self.cells))!r})"
