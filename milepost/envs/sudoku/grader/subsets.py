"""Subsets: Naked and Hidden Pairs / Triples / Quadruples, and Locked Pairs / Triples.

A naked subset is n cells of one unit holding n digits between them: the digits leave every other cell of
every unit the n cells share. A hidden subset is n digits of one unit confined to n cells: every other digit
leaves those cells. HoDoKu calls a naked pair or triple *locked* when its cells share a box and a line and it
eliminates both inside the box and on the line outside the box; a locked subset is not also reported as a
naked one. Units are searched boxes first, then rows, then columns, as HoDoKu does.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from milepost.envs.sudoku.grader.candidates import (
    CELL_UNITS,
    DIGITS,
    UNIT_MASK,
    UNITS,
    Board,
    Step,
    elimination_step,
)
from milepost.envs.sudoku.grader.scores import Technique

_SCAN = (*range(18, 27), *range(9), *range(9, 18))
_NAKED = {2: Technique.NAKED_PAIR, 3: Technique.NAKED_TRIPLE, 4: Technique.NAKED_QUADRUPLE}
_LOCKED = {2: Technique.LOCKED_PAIR, 3: Technique.LOCKED_TRIPLE}
_HIDDEN = {2: Technique.HIDDEN_PAIR, 3: Technique.HIDDEN_TRIPLE, 4: Technique.HIDDEN_QUADRUPLE}


def _naked_step(board: Board, cells: tuple[int, ...], digits: int, size: int) -> Step | None:
    """The step of a naked subset (locked or not), or None when it eliminates nothing."""
    shared = [u for k, u in enumerate(CELL_UNITS[cells[0]]) if all(CELL_UNITS[c][k] == u for c in cells[1:])]
    box = CELL_UNITS[cells[0]][2]
    box_mask = UNIT_MASK[box]
    own = sum(1 << c for c in cells)
    gone: list[tuple[int, int]] = []
    in_box = outside_box = False
    for u in shared:  # row, column, box; cells in unit order, digits ascending (HoDoKu's order)
        for cell in UNITS[u]:
            hit = board.cands[cell] & digits
            if not hit or own >> cell & 1:
                continue
            if u == box:
                in_box = True
            elif not box_mask >> cell & 1:
                outside_box = True
            gone.extend((cell, d) for d in DIGITS[hit])
    if not gone:
        return None
    locked = size < 4 and box in shared and len(shared) == 2 and in_box and outside_box
    technique = _LOCKED[size] if locked else _NAKED[size]
    return elimination_step(technique, DIGITS[digits], gone, cells)


def naked_subsets(board: Board, size: int, *, locked: bool | None = None) -> Iterator[Step]:
    """Naked subsets of ``size`` cells; ``locked`` True / False keeps only locked / only naked ones."""
    cands = board.cands
    units = range(18, 27) if locked else _SCAN  # a locked subset lies in a box
    for u in units:
        small = [c for c in UNITS[u] if cands[c] and cands[c].bit_count() <= size]
        if len(small) < size:
            continue
        for cells in combinations(small, size):
            digits = 0
            for c in cells:
                digits |= cands[c]
            if digits.bit_count() != size:
                continue
            step = _naked_step(board, cells, digits, size)
            if step is None:
                continue
            is_locked = step.technique in (Technique.LOCKED_PAIR, Technique.LOCKED_TRIPLE)
            if locked is None or locked == is_locked:
                yield step


def hidden_subsets(board: Board, size: int) -> Iterator[Step]:
    """Hidden subsets: ``size`` digits of a unit confined to ``size`` of its cells."""
    dmask, cands = board.dmask, board.cands
    for u in _SCAN:
        unit = UNIT_MASK[u]
        if (board.empty & unit).bit_count() <= size:
            continue
        spots = {d: dmask[d] & unit for d in range(1, 10)}
        digits = [d for d, s in spots.items() if s and s.bit_count() <= size]
        for combo in combinations(digits, size):
            where = 0
            for d in combo:
                where |= spots[d]
            if where.bit_count() != size:
                continue
            keep = sum(1 << (d - 1) for d in combo)
            gone: list[tuple[int, int]] = []
            cells = []
            while where:
                low = where & -where
                c = low.bit_length() - 1
                cells.append(c)
                gone.extend((c, d) for d in DIGITS[cands[c] & ~keep])
                where ^= low
            if gone:
                yield elimination_step(_HIDDEN[size], combo, gone, cells)


def locked_pair(board: Board) -> Iterator[Step]:
    return naked_subsets(board, 2, locked=True)


def locked_triple(board: Board) -> Iterator[Step]:
    return naked_subsets(board, 3, locked=True)


def naked_pair(board: Board) -> Iterator[Step]:
    return naked_subsets(board, 2, locked=False)


def naked_triple(board: Board) -> Iterator[Step]:
    return naked_subsets(board, 3, locked=False)


def naked_quadruple(board: Board) -> Iterator[Step]:
    return naked_subsets(board, 4, locked=False)


def hidden_pair(board: Board) -> Iterator[Step]:
    return hidden_subsets(board, 2)


def hidden_triple(board: Board) -> Iterator[Step]:
    return hidden_subsets(board, 3)


def hidden_quadruple(board: Board) -> Iterator[Step]:
    return hidden_subsets(board, 4)
