"""Sudoku rules for the text layer: action parsing, legality, subgoals, distances and the goal text."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache, lru_cache

from milepost.envs.actions import ActionMode
from milepost.envs.sudoku.grid import conflicts, parse_grid
from milepost.envs.sudoku.render import render
from milepost.envs.sudoku.state import Fill, SudokuState
from milepost.errors import InputError
from milepost.types import Subgoal, Task

# Digit-first is the paper's order; cell-first is accepted too. Numbers are capped at 3 digits so a
# pathological answer cannot make int() slow or raise. re.ASCII: without it \d (and int()) take other
# scripts' digits ("value(r٣c7, ३)") and IGNORECASE folds non-ASCII letters.
_DIGIT_FIRST = re.compile(r"value\(\s*(\d{1,3})\s*,\s*r\s*(\d{1,3})\s*c\s*(\d{1,3})\s*\)\.?", re.IGNORECASE | re.ASCII)
_CELL_FIRST = re.compile(r"value\(\s*r\s*(\d{1,3})\s*c\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)\.?", re.IGNORECASE | re.ASCII)

SUBGOAL_KINDS = ("boxes", "rows", "cols")


@lru_cache(maxsize=8192)
def parse_fill(text: str) -> Fill | None:
    """``value(n, rXcY)`` or ``value(rXcY, n)`` (1-based) to a 0-based ``Fill``; None if it is neither.

    Out-of-range numbers still parse: they are well-formed actions that the rules then reject as illegal.
    Cached: a board has only n^3 canonical actions, so agents repeat the same strings (``Fill`` is immutable).
    The grammar is ASCII: any other character is a format error.
    """
    if not text.isascii():
        return None
    m = _DIGIT_FIRST.fullmatch(text)
    if m is not None:
        return Fill(int(m[2]) - 1, int(m[3]) - 1, int(m[1]))
    m = _CELL_FIRST.fullmatch(text)
    if m is not None:
        return Fill(int(m[1]) - 1, int(m[2]) - 1, int(m[3]))
    return None


def task_grids(task: Task) -> tuple[list[int], list[int]]:
    """Puzzle and solution of a Sudoku task, validated; a missing solution is computed by the solver.

    Raises:
        InputError: malformed strings, givens that break a rule, a solution that contradicts the givens, or a
            puzzle without exactly one solution.
    """
    payload = task.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("puzzle"), str):
        raise InputError(f"task {task.task_id}: payload needs a 'puzzle' string")
    puzzle = parse_grid(payload["puzzle"], task.size or None)
    n = round(len(puzzle) ** 0.5)
    why = conflicts(puzzle, n)
    if why:
        raise InputError(f"task {task.task_id}: the givens break a rule ({why})")
    raw_solution = payload.get("solution")
    if raw_solution is None:
        from milepost.envs.sudoku.solver import solve

        found = solve(puzzle, limit=2)
        if len(found) != 1:
            raise InputError(f"task {task.task_id}: puzzle has {'no' if not found else 'several'} solutions")
        return puzzle, found[0]
    if not isinstance(raw_solution, str):
        raise InputError(f"task {task.task_id}: 'solution' must be a string")
    solution = parse_grid(raw_solution, n)
    if 0 in solution or conflicts(solution, n):
        raise InputError(f"task {task.task_id}: the solution is not a complete valid grid")
    if any(p and p != s for p, s in zip(puzzle, solution)):
        raise InputError(f"task {task.task_id}: the solution contradicts a given")
    return puzzle, solution


def _unit_predicate(unit: tuple[int, ...]) -> Callable[[SudokuState], bool]:
    """The predicate "every cell of ``unit`` holds its solution digit"."""
    return lambda state: state.unit_solved(unit)


def make_subgoals(state: SudokuState, kinds: Iterable[str]) -> tuple[list[Subgoal], list[list[int]]]:
    """One subgoal per unit (box, row or column) that has an empty cell at the start, in a fixed order.

    Order: kinds as given, units by index (boxes row-major). Returns the subgoals and, per cell, the indices
    of the subgoals that contain it (so a fill checks only those).
    """
    geo = state.geo
    n = geo.n
    touched: list[list[int]] = [[] for _ in range(n * n)]
    goals: list[Subgoal] = []
    for kind in kinds:
        if kind not in SUBGOAL_KINDS:
            raise InputError(f"sudoku: unknown subgoal kind {kind!r} (known: {', '.join(SUBGOAL_KINDS)})")
        units = {"boxes": geo.boxes, "rows": geo.rows, "cols": geo.cols}[kind]
        for u, unit in enumerate(units):
            empties = sum(1 for i in unit if not state.cells[i])
            if empties == 0:
                continue
            if kind == "boxes":
                r0, c0 = geo.row_of[unit[0]], geo.col_of[unit[0]]
                where = f"box {u + 1} (rows {r0 + 1}-{r0 + geo.box_rows}, columns {c0 + 1}-{c0 + geo.box_cols})"
            else:
                where = f"{'row' if kind == 'rows' else 'column'} {u + 1}"
            index = len(goals)
            goals.append(
                Subgoal(
                    index=index,
                    description=f"Complete {where}",
                    success_criteria=f"every cell of {where} holds its solution digit",
                    estimated_steps=empties,
                    predicate=_unit_predicate(unit),
                )
            )
            for cell in unit:
                touched[cell].append(index)
    return goals, touched


@cache
def _text_layout(n: int, style: str) -> tuple[int, ...] | None:
    """Where each cell's character sits in a rendered board, for styles that print one character per cell at
    a fixed place (``grid``, ``cells``); None for the others. Read off the empty board's own rendering, so
    it cannot drift from the renderer."""
    if style not in ("grid", "cells"):
        return None
    text = render(SudokuState([0] * (n * n)), style)
    offsets = tuple(i for i, ch in enumerate(text) if ch == ".")
    return offsets if len(offsets) == n * n and text.isascii() else None


class SudokuRules:
    """The per-task rules object that ``TextEnv`` composes (see ``milepost.envs.base.Rules``)."""

    def __init__(
        self,
        task: Task,
        *,
        action_mode: ActionMode,
        render_style: str = "grid",
        wrong_fill: str = "dead_end",
        allow_overwrite: bool = False,
        subgoal_kinds: Iterable[str] = ("boxes",),
    ) -> None:
        puzzle, solution = task_grids(task)
        self.task = task
        self.state = SudokuState(puzzle, solution, allow_overwrite=allow_overwrite)
        self.goal_distance = self.state.empty
        self.action_mode = action_mode
        self.render_style = render_style
        self.end_on_wrong = wrong_fill == "dead_end"
        self.subgoals, self._touched = make_subgoals(self.state, subgoal_kinds)
        self.solution = solution
        # The rendered board, patched one character per fill instead of re-rendered every step; rebuilt in
        # full whenever the state was written by another path (its version moved on without us).
        self._layout = _text_layout(self.state.n, render_style)
        self._text = bytearray()
        self._text_version = -1

    # -- Rules protocol ------------------------------------------------------------------------------------

    def parse(self, piece: str) -> Fill | None:
        return parse_fill(piece)

    def check(self, action: Fill) -> str | None:
        return self.state.why_illegal(action)

    def apply(self, action: Fill) -> bool:
        state = self.state
        cell = action.row * state.n + action.col
        in_step = self._text_version == state.version
        state._write(cell, action.digit)
        if in_step and self._layout is not None:
            self._text[self._layout[cell]] = 48 + action.digit  # ASCII digit
            self._text_version = state.version
        return action.digit == self.solution[cell]

    def is_solved(self) -> bool:
        return self.state.is_solved()

    def is_dead(self) -> bool:
        # With wrong_fill="continue" play runs on to the budget even when no solution is reachable any more.
        return self.end_on_wrong and self.state.wrong > 0

    def remaining_distance(self) -> int | None:
        state = self.state
        if state.wrong and not state.allow_overwrite:
            return None
        return state.empty + state.wrong

    def touched_subgoals(self, action: Fill) -> list[int]:
        n = self.state.n
        if 0 <= action.row < n and 0 <= action.col < n:
            return self._touched[action.row * n + action.col]
        return []

    def format_action(self, action: Fill) -> str:
        return action.text()

    def render(self, feedback: str | None) -> str:
        state = self.state
        if self._layout is None:
            board = render(state, self.render_style)
        else:
            if self._text_version != state.version:
                self._text = bytearray(render(state, self.render_style), "ascii")
                self._text_version = state.version
            board = self._text.decode("ascii")
        return board if feedback is None else f"{board}\nLast answer rejected: {feedback}"

    def goal_text(self) -> str:
        geo = self.state.geo
        n = geo.n
        mode = self.action_mode
        if mode.kind == "atomic":
            how = "Give exactly one action per turn."
        elif mode.kind == "fixed":
            how = f"Give exactly {mode.n} actions per turn, separated by ';'."
        elif mode.k is None:
            how = "Give one or more actions per turn, separated by ';'."
        else:
            how = f"Give between 1 and {mode.k} actions per turn, separated by ';'."
        return (
            f"Solve this {n}x{n} Sudoku: fill every empty cell ('.') so that each row, each column and each "
            f"{geo.box_rows}x{geo.box_cols} box holds the digits 1-{n} exactly once. "
            f"An action writes digit n into row X, column Y: value(n, rXcY) or value(rXcY, n). {how}"
        )


def oracle_fill(state: SudokuState) -> Fill | None:
    """The solver's next move: the empty cell with the fewest candidates (ties: lowest index), solution digit.

    None when the board is full or the state has no solution attached.
    """
    if state.solution is None or state.empty == 0:
        return None
    n = state.n
    best, best_count = -1, n + 1
    for cell in range(n * n):
        if not state.cells[cell]:
            count = state.candidates(cell).bit_count()
            if count < best_count:
                best, best_count = cell, count
                if count <= 1:
                    break
    return Fill(best // n, best % n, state.solution[best])
