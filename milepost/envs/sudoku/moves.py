"""Scripted Sudoku moves: the oracle's next move and the error modes of the noisy oracle.

These read the game state directly (they are policies, not text generators); ``milepost.backends.scripted``
turns them into answers. Every function returns an action's text, or None when no such move exists.
"""

from __future__ import annotations

import math
import random

from milepost.envs.actions import ActionMode
from milepost.envs.sudoku.rules import SudokuRules, oracle_fill
from milepost.envs.sudoku.state import Fill
from milepost.types import Task


def oracle(rules: SudokuRules, cell_first: bool = False) -> tuple[str, str] | None:
    """The solver's next move (fewest-candidate empty cell, its solution digit) and its justification."""
    state = rules.state
    fill = oracle_fill(state)
    if fill is None:
        return None
    cell = f"r{fill.row + 1}c{fill.col + 1}"
    # Short on purpose: SFT teaches these reasons to tiny models, whose every generated token costs time.
    # Cell-first text names the cell before committing to a digit, which a small model learns far sooner.
    single = state.candidates(fill.row * state.n + fill.col).bit_count() == 1
    if cell_first:
        reason = f"{cell} can only be {fill.digit}." if single else f"{cell} has fewest options: {fill.digit}."
    else:
        reason = f"only {fill.digit} fits {cell}." if single else f"{cell} has fewest options; {fill.digit}."
    return fill.text(cell_first), reason


def oracle_sequence(rules: SudokuRules, count: int | None, cell_first: bool = False) -> list[tuple[str, str]]:
    """Up to ``count`` moves for one macro turn (None: no limit): every cell that is forced now (a naked
    single of the current board), fewest-candidates order with ties by cell, else the oracle's single move.

    Forced cells of one board never conflict (each must hold its solution digit), so all of them can go in
    one turn; cells that become forced only after these fills wait for the next observation.
    """
    state = rules.state
    n = state.n
    forced = [c for c in range(n * n) if not state.cells[c] and state.candidates(c).bit_count() == 1]
    if not forced:
        single = oracle(rules, cell_first)
        return [single] if single is not None else []
    out = []
    for cell in forced[:count]:
        fill = Fill(cell // n, cell % n, rules.solution[cell])
        out.append((fill.text(cell_first), "these cells are forced."))
    return out


def illegal(rules: SudokuRules, rng: random.Random, cell_first: bool = False) -> str:
    """A well-formed fill that breaks a rule: a digit already in the cell's row, column or box, else a given."""
    state = rules.state
    n = state.n
    empties = [c for c in range(n * n) if not state.cells[c]]
    rng.shuffle(empties)
    for cell in empties:
        blocked = state.geo.full & ~state.candidates(cell)
        digits = [d for d in range(1, n + 1) if blocked >> (d - 1) & 1]
        if digits:
            return Fill(cell // n, cell % n, rng.choice(digits)).text(cell_first)
    givens = [c for c in range(n * n) if state.givens[c]]
    cell = rng.choice(givens) if givens else 0
    return Fill(cell // n, cell % n, rng.randint(1, n)).text(cell_first)


def wrong(rules: SudokuRules, rng: random.Random, cell_first: bool = False) -> str | None:
    """A legal fill with a digit that is not the solution's (no progress: it makes the puzzle unsolvable)."""
    state = rules.state
    sol = rules.solution
    choices = [f for f in state.legal_actions() if f.digit != sol[f.row * state.n + f.col]]
    return rng.choice(choices).text(cell_first) if choices else None


def random_legal(rules: SudokuRules, rng: random.Random) -> str | None:
    """A uniformly random legal fill."""
    choices = rules.state.legal_actions()
    return rng.choice(choices).text() if choices else None


def malformed(rng: random.Random) -> str:
    """An answer no parser accepts."""
    return rng.choice(["value(r?c?)", "I am not sure.", "fill(5 at r3 c7)", "value 5 r3c7", ""])


def optimal_turns(task: Task, mode: ActionMode) -> int:
    """Fewest turns that can solve ``task`` under ``mode`` (one fill per empty cell)."""
    per_turn = mode.max_actions
    if per_turn is None:
        return 1 if task.goal_distance else 0
    return math.ceil(task.goal_distance / per_turn)
