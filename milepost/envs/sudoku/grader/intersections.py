"""Intersections: Locked Candidates Type 1 (Pointing) and Type 2 (Claiming).

HoDoKu's definition: a digit with two or three places in a unit, all of them inside one other unit that still
has more places for the digit; the digit goes from the rest of that other unit. Type 1 starts from a box (the
places share a row, tried first, or a column); Type 2 from a row or a column (the places share a box).
Locked Pairs and Triples are naked subsets (``subsets.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from milepost.envs.sudoku.grader.candidates import (
    CELL_UNITS,
    UNIT_MASK,
    Board,
    Step,
    cells_of,
    elimination_step,
)
from milepost.envs.sudoku.grader.scores import Technique


def _locked(board: Board, bases: range, targets: tuple[int, ...], technique: Technique) -> Iterator[Step]:
    dmask = board.dmask
    for base in bases:
        unit = UNIT_MASK[base]
        for digit in range(1, 10):
            spots = dmask[digit] & unit
            count = spots.bit_count()
            if count not in (2, 3):
                continue
            first = CELL_UNITS[spots.bit_length() - 1]
            for kind in targets:  # 0 row, 1 column, 2 box
                other = first[kind]
                if spots & UNIT_MASK[other] == spots:
                    gone = dmask[digit] & UNIT_MASK[other] & ~spots
                    if gone:
                        yield elimination_step(
                            technique, (digit,), ((c, digit) for c in cells_of(gone)), cells_of(spots)
                        )
                    break


def locked_candidates_1(board: Board) -> Iterator[Step]:
    """Pointing: a box's places for a digit share a row or column; the digit leaves the rest of that line."""
    return _locked(board, range(18, 27), (0, 1), Technique.LOCKED_CANDIDATES_1)


def locked_candidates_2(board: Board) -> Iterator[Step]:
    """Claiming: a line's places for a digit share a box; the digit leaves the rest of that box."""
    return _locked(board, range(18), (2,), Technique.LOCKED_CANDIDATES_2)
