"""Checks of ``Task`` records against their environment (DESIGN: Contracts), run on every dataset file read.

A record is trusted only after its payload is well-formed and its stated facts are recomputed: Sudoku puzzle
and solution (lengths, digits, givens that keep the rules, a solution consistent with the puzzle), goal distance
= empty cells, level of the table holding that many; Rush Hour board (36 characters of Fogleman's alphabet),
goal distance = the solver's optimal one-cell steps (through the checked cache of ``rushhour.distances``),
level of the table holding the optimal move count, and ``meta.min_moves`` / ``meta.min_steps`` when present.
Other registered environments get the checks that hold for all: a level of the table, holding the goal
distance when the level measures it (an environment adds its own check to ``_CHECKS``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from milepost.envs import ENVS
from milepost.envs.levels import LEVELS, Level
from milepost.envs.rushhour.board import parse_board
from milepost.envs.rushhour.distances import board_distances
from milepost.envs.rushhour.rules import task_board
from milepost.envs.sudoku.rules import task_grids
from milepost.envs.webshop.records import check_record as webshop_record
from milepost.errors import InputError
from milepost.types import Task


@dataclass(frozen=True)
class Problem:
    """What is wrong with record ``index`` of a sequence: the field and why."""

    index: int
    field: str
    message: str


def first_problem(tasks: Sequence[Task]) -> Problem | None:
    """The first problem of ``tasks`` (record checks in order, then the Rush Hour distances), or None."""
    for index, task in enumerate(tasks):
        if task.env not in ENVS:
            return Problem(index, "env", f"unknown environment {task.env!r} (known: {', '.join(ENVS.names())})")
        for name in ("payload", "meta"):
            if not isinstance(getattr(task, name), dict):
                return Problem(index, name, f"expected a JSON object, got {type(getattr(task, name)).__name__}")
        found = _CHECKS.get(task.env, _generic)(task)
        if found is not None:
            return Problem(index, *found)
    rush = [(i, t) for i, t in enumerate(tasks) if t.env == "rushhour"]
    return _rush_distances(rush) if rush else None


def _level(task: Task) -> Level | tuple[str, str]:
    """The task's level from the table, or the (field, message) of why it has none."""
    table = LEVELS.get((task.env, task.size))
    if table is None:
        sizes = ", ".join(str(s) for e, s in LEVELS if e == task.env)
        return "size", f"{task.env} has no {task.size}x{task.size} board (sizes: {sizes})"
    for level in table:
        if level.name == task.level:
            return level
    shown = ", ".join(lv.name for lv in table[:8]) + (", ..." if len(table) > 8 else "")
    return "level", f"{task.level!r} is not a {task.env} {task.size}x{task.size} level (known: {shown})"


def _generic(task: Task) -> tuple[str, str] | None:
    """What holds for every environment: a level of the table, holding the goal distance if it measures it."""
    level = _level(task)
    if isinstance(level, tuple):
        return level
    if level.measure == "goal_distance" and not level.contains(task.goal_distance):
        return "level", f"{level.name} holds goal distances {level.lo}-{level.hi}, not {task.goal_distance}"
    return None


def _sudoku(task: Task) -> tuple[str, str] | None:
    level = _level(task)
    if isinstance(level, tuple):
        return level
    try:
        puzzle, _ = task_grids(task)
    except InputError as exc:
        return "payload", str(exc).removeprefix(f"task {task.task_id}: ")
    empties = puzzle.count(0)
    if task.goal_distance != empties:
        return "goal_distance", f"{task.goal_distance}, but the puzzle has {empties} empty cells"
    if not level.contains(empties):
        return "level", f"{level.name} holds {level.lo}-{level.hi} empty cells, but the puzzle has {empties}"
    return None


def _rushhour(task: Task) -> tuple[str, str] | None:
    level = _level(task)
    if isinstance(level, tuple):
        return level
    try:
        parse_board(task_board(task))
    except InputError as exc:
        return "payload", str(exc).removeprefix(f"task {task.task_id}: ")
    return None


def _rush_distances(rush: list[tuple[int, Task]]) -> Problem | None:
    """Goal distance, level and meta of Rush Hour records (already well-formed) against the solver."""
    known = board_distances([t.payload["board"] for _, t in rush])
    for index, task in rush:
        found = known[task.payload["board"]]
        if found is None:
            return Problem(index, "payload", "the board cannot be solved")
        moves, steps = found
        if task.goal_distance != steps:
            why = f"{task.goal_distance}, but the board's optimal solution takes {steps} one-cell steps"
            return Problem(index, "goal_distance", why)
        level = _level(task)
        if isinstance(level, tuple):  # not reached: _rushhour checked it
            return Problem(index, *level)
        if not level.contains(moves):
            why = f"{level.name} holds {level.lo}-{level.hi} moves, but the board's optimal solution takes {moves}"
            return Problem(index, "level", why)
        for key, value in (("min_moves", moves), ("min_steps", steps)):
            if key in task.meta and task.meta[key] != value:
                return Problem(index, f"meta.{key}", f"{task.meta[key]!r}, but the solver finds {value}")
    return None


_CHECKS: dict[str, Callable[[Task], tuple[str, str] | None]] = {
    "sudoku": _sudoku,
    "rushhour": _rushhour,
    "webshop": webshop_record,
}
