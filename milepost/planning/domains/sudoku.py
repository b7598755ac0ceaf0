"""Sudoku planning knowledge: units (boxes, rows, columns) as the vocabulary, cells as referents.

The programmatic order comes from a unit-focused run of the solver's own move rule (fewest candidates
first): it works on one unit at a time while that unit has a cell as constrained as the best cell anywhere,
so the order is one the solver can actually follow, and units that fall into place early come first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from milepost.envs.sudoku.state import Fill, SudokuState
from milepost.planning.domains.base import PlanRejected, Resolution, Term, Vocabulary

# The env's subgoal descriptions ("Complete box 3 (rows ...)", "Complete row 2", "Complete column 4").
_ENV_DESCRIPTION = re.compile(r"Complete (box|row|column) (\d+)\b")
_UNIT = re.compile(r"\b(box|block|square|row|col|column)\s*(?:#|no\.?|number)?\s*(\d{1,3})\b", re.IGNORECASE)
_CELL = re.compile(r"\br\s*(\d{1,3})\s*c\s*(\d{1,3})\b", re.IGNORECASE)
# A digit placed in a cell: value(n, rXcY), value(rXcY, n), "3 in r1c2", "r1c2 = 3".
_PLACEMENTS = (
    (re.compile(r"value\(\s*(\d{1,3})\s*,\s*r\s*(\d{1,3})\s*c\s*(\d{1,3})\s*\)", re.IGNORECASE), (0, 1, 2)),
    (re.compile(r"value\(\s*r\s*(\d{1,3})\s*c\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)", re.IGNORECASE), (2, 0, 1)),
    (re.compile(r"\b(\d{1,3})\s+(?:in|into|at)\s+r\s*(\d{1,3})\s*c\s*(\d{1,3})\b", re.IGNORECASE), (0, 1, 2)),
    (
        re.compile(r"\br\s*(\d{1,3})\s*c\s*(\d{1,3})\s*(?:=|:=|gets|holds|becomes)\s*(\d{1,3})\b", re.IGNORECASE),
        (2, 0, 1),
    ),
)
_KIND = {"box": "box", "block": "box", "square": "box", "row": "row", "col": "col", "column": "col"}


def unit_cells(state: SudokuState, kind: str, ident: str) -> tuple[int, ...]:
    """The cells of unit ``kind`` number ``ident`` (1-based)."""
    units = {"box": state.geo.boxes, "row": state.geo.rows, "col": state.geo.cols}[kind]
    return units[int(ident) - 1]


def _placements(text: str) -> Iterator[tuple[int, int, int]]:
    """(digit, row, col), 1-based as written, of every digit-in-cell phrase in ``text``."""
    for pattern, (d, r, c) in _PLACEMENTS:
        for m in pattern.finditer(text):
            groups = m.groups()
            yield int(groups[d]), int(groups[r]), int(groups[c])


def _target_text(target: Any) -> str:
    """A target given as an object (``{"kind": "box", "index": 3}``, ``{"cell": "r1c2", "digit": 3}``) as
    the phrase it stands for, so that one parser reads both forms."""
    if isinstance(target, str):
        return target
    if not isinstance(target, Mapping):
        return ""
    kind = str(target.get("kind", "")).lower()
    index = target.get("index", target.get("id", ""))
    cell = target.get("cell")
    digit = target.get("digit", target.get("value"))
    if isinstance(cell, str):
        return f"{digit} in {cell}" if isinstance(digit, int) else cell
    if kind in _KIND and isinstance(index, int | str):
        return f"{kind} {index}"
    return ""


class SudokuDomain:
    """The Sudoku ``Domain`` (see ``milepost.planning.domains``)."""

    name = "sudoku"

    def vocabulary(self, env: Any) -> Vocabulary:
        terms = []
        for goal in env.subgoals:
            m = _ENV_DESCRIPTION.match(goal.description)
            if m is None:  # pragma: no cover - the env's descriptions are pinned by the tests
                raise RuntimeError(f"sudoku: cannot name subgoal {goal.description!r}")
            terms.append(Term(_KIND[m[1]], m[2], goal.index))
        return Vocabulary(terms)

    def resolve(self, item: Mapping[str, Any], env: Any, vocab: Vocabulary) -> Resolution:
        state: SudokuState = env.state
        n = state.n
        target = item.get("target")
        text = _target_text(target) if target is not None else str(item.get("description", ""))
        for digit, row, col in _placements(text):
            if not (1 <= row <= n and 1 <= col <= n):
                raise PlanRejected(f"cell r{row}c{col} does not exist on a {n}x{n} board")
            if not 1 <= digit <= n:
                raise PlanRejected(f"digit {digit} does not exist on a {n}x{n} board")
            cell = (row - 1) * n + (col - 1)
            if state.cells[cell] == digit:
                continue
            why = state.why_illegal(Fill(row - 1, col - 1, digit))
            if why is None and state.solution is not None and state.solution[cell] != digit:
                why = f"{digit} in r{row}c{col} contradicts the givens (the puzzle's only solution differs)"
            if why is not None:
                raise PlanRejected(f"'{text[:60]}' contradicts the state: {why}")
        for m in _CELL.finditer(text):
            if not (1 <= int(m[1]) <= n and 1 <= int(m[2]) <= n):
                raise PlanRejected(f"cell r{m[1]}c{m[2]} does not exist on a {n}x{n} board")
        units = []
        for m in _UNIT.finditer(text):
            kind, number = _KIND[m[1].lower()], int(m[2])
            if not 1 <= number <= n:
                raise PlanRejected(f"{m[1].lower()} {number} does not exist on a {n}x{n} board")
            if (kind, str(number)) not in units:
                units.append((kind, str(number)))
        if len(units) != 1:
            why = "names several units" if units else "names no box, row or column"
            return Resolution(None, f"'{text[:60]}' {why}: judge-only")
        kind, ident = units[0]
        term = vocab.lookup(kind, ident)
        label = Term(kind, ident, -1).label
        if term is None:
            if state.unit_solved(unit_cells(state, kind, ident)):
                return Resolution(None, f"{label} is already complete", drop=True)
            return Resolution(None, f"{label} is not one of the environment's subgoals: judge-only")
        if term.env_index in env.completed:
            return Resolution(None, f"{label} is already complete", drop=True)
        return Resolution(term)

    def order(self, env: Any, vocab: Vocabulary, pending: Sequence[int]) -> list[tuple[int, int]]:
        state: SudokuState = env.state
        units = {}
        for index in pending:
            term = vocab.for_env(index)
            if term is not None:
                units[index] = unit_cells(state, term.kind, term.ident)
        steps = {i: max(1, sum(1 for c in u if not state.cells[c])) for i, u in units.items()}
        sim = state.clone()
        done = {i for i, u in units.items() if sim.unit_solved(u)}
        order = [i for i in sorted(units) if i in done]
        current: int | None = None
        while sim.solution is not None and sim.empty and not sim.wrong and len(done) < len(units):
            if current is None or current in done:
                current = _pick_unit(sim, {i: u for i, u in units.items() if i not in done})
            cell = _focus_cell(sim, units[current])
            if cell is None:
                cell = _best_cell(sim)[0]
            sim._write(cell, sim.solution[cell])
            for i in sorted(units):
                if i not in done and sim.unit_solved(units[i]):
                    done.add(i)
                    order.append(i)
        order += [i for i in sorted(units) if i not in done]  # only when the state has no solution attached
        return [(i, steps[i]) for i in order]

    def focus_move(self, env: Any, term: Term | None, *, cell_first: bool = False, **_: Any) -> tuple[str, str] | None:
        state: SudokuState = env.state
        if term is None or state.solution is None or not state.empty:
            return None
        cell = _focus_cell(state, unit_cells(state, term.kind, term.ident))
        if cell is None:
            return None
        n = state.n
        fill = Fill(cell // n, cell % n, state.solution[cell])
        where = f"r{fill.row + 1}c{fill.col + 1}"
        # The plain oracle's wording (``moves.oracle``), so that plain and SGO demonstrations differ only in the
        # plan and in which forced cell is taken.
        single = state.candidates(cell).bit_count() == 1
        if cell_first:
            reason = f"{where} can only be {fill.digit}." if single else f"{where} has fewest options: {fill.digit}."
        else:
            reason = f"only {fill.digit} fits {where}." if single else f"{where} has fewest options; {fill.digit}."
        return fill.text(cell_first), reason


def _best_cell(state: SudokuState) -> tuple[int, int]:
    """The empty cell with the fewest candidates (ties: lowest index) and that count."""
    best, count = -1, state.n + 1
    for cell in range(state.n * state.n):
        if not state.cells[cell]:
            k = state.candidates(cell).bit_count()
            if k < count:
                best, count = cell, k
    return best, count


def _focus_cell(state: SudokuState, unit: Sequence[int], best: int | None = None) -> int | None:
    """The first cell of ``unit`` as constrained as the best cell on the board (``best`` candidates), or
    None when the unit has none (then working on it now would mean guessing)."""
    if best is None:
        best = _best_cell(state)[1]
    for cell in sorted(unit):
        if not state.cells[cell] and state.candidates(cell).bit_count() == best:
            return cell
    return None


def _pick_unit(state: SudokuState, units: Mapping[int, Sequence[int]]) -> int:
    """The unit to work on next: one with a cell as constrained as the best on the board, fewest empty
    cells first, ties by environment index; failing that, the unit with fewest empty cells."""

    def empties(i: int) -> int:
        return sum(1 for c in units[i] if not state.cells[c])

    best = _best_cell(state)[1]
    ready = [i for i in units if _focus_cell(state, units[i], best) is not None]
    return min(ready or list(units), key=lambda i: (empties(i), i))
