"""Single-digit patterns: Skyscraper, 2-String Kite, Turbot Fish, Empty Rectangle.

All four chain strong links of one digit (a unit with exactly two places for it, a *conjugate pair*):

* Skyscraper: conjugate pairs in two rows (or two columns) with one end of each in the same column (row);
  the free ends are not aligned (that would be an X-Wing). One free end holds the digit, so it leaves every
  cell that sees both free ends.
* 2-String Kite: a conjugate pair in a row and one in a column, one end of each in the same box (four
  distinct cells); the digit leaves the cell in the row of one free end and the column of the other.
* Turbot Fish: HoDoKu's three-link X-chain, strong - weak - strong through any units; the digit leaves every
  cell that sees both ends (a chain that closes on its start cell makes the start the digit's place).
* Empty Rectangle: a box whose places for the digit all lie in one row and one column of the box (at least
  two of them in that row or that column, some off the crossing in each), plus a conjugate pair in a column
  (row) with one end on the box's row (column): the digit leaves the cell where the pair's other row
  (column) crosses the box's column (row).

Scan orders follow HoDoKu's so that reports read the same; the grader takes the first step.
"""

from __future__ import annotations

from collections.abc import Iterator

from milepost.envs.sudoku.grader.candidates import (
    BOX_OF,
    CELL_UNITS,
    COL_OF,
    PEER_MASK,
    ROW_OF,
    UNIT_MASK,
    Board,
    Step,
    cells_of,
    elimination_step,
)
from milepost.envs.sudoku.grader.scores import Technique


def _pairs(board: Board, digit: int, units: range) -> list[tuple[int, int]]:
    """The conjugate pairs (two cells, ascending) of ``digit`` in ``units``, in unit order."""
    out = []
    dmask = board.dmask[digit]
    for u in units:
        spots = dmask & UNIT_MASK[u]
        if spots.bit_count() == 2:
            low = spots & -spots
            out.append((low.bit_length() - 1, (spots ^ low).bit_length() - 1))
    return out


def _step(technique: Technique, digit: int, gone: int, cells: tuple[int, ...]) -> Step:
    return elimination_step(technique, (digit,), ((c, digit) for c in cells_of(gone)), cells)


def skyscraper(board: Board) -> Iterator[Step]:
    """Two parallel conjugate pairs with one aligned end; the digit leaves what sees both free ends."""
    for by_rows in (True, False):
        across = COL_OF if by_rows else ROW_OF  # the index that must match for the aligned ends
        for digit in range(1, 10):
            pairs = _pairs(board, digit, range(9) if by_rows else range(9, 18))
            for i, (a0, a1) in enumerate(pairs):
                for b0, b1 in pairs[i + 1 :]:
                    if across[a0] == across[b0]:
                        free = (a1, b1)
                    elif across[a1] == across[b1]:
                        free = (a0, b0)
                    else:
                        continue
                    if across[free[0]] == across[free[1]]:
                        continue  # an X-Wing
                    gone = board.dmask[digit] & PEER_MASK[free[0]] & PEER_MASK[free[1]]
                    if gone:
                        yield _step(Technique.SKYSCRAPER, digit, gone, (a0, a1, b0, b1))


def two_string_kite(board: Board) -> Iterator[Step]:
    """A row pair and a column pair joined in a box; the digit leaves the crossing of their free ends."""
    for digit in range(1, 10):
        rows = _pairs(board, digit, range(9))
        cols = _pairs(board, digit, range(9, 18))
        for row_pair in rows:
            for col_pair in cols:
                joined = [(r, c) for r in (0, 1) for c in (0, 1) if BOX_OF[row_pair[r]] == BOX_OF[col_pair[c]]]
                if not joined:
                    continue
                r, c = joined[0]
                if set(row_pair) & set(col_pair):
                    continue
                row_free, col_free = row_pair[1 - r], col_pair[1 - c]
                cross = ROW_OF[col_free] * 9 + COL_OF[row_free]
                if board.dmask[digit] >> cross & 1:
                    yield _step(
                        Technique.TWO_STRING_KITE,
                        digit,
                        1 << cross,
                        (row_pair[r], col_pair[c], row_free, col_free),
                    )


def turbot_fish(board: Board) -> Iterator[Step]:
    """Strong - weak - strong X-chains of one digit; the digit leaves what sees both ends."""
    for digit in range(1, 10):
        dmask = board.dmask[digit]
        strong: dict[int, list[int]] = {}
        for u in range(27):
            spots = dmask & UNIT_MASK[u]
            if spots.bit_count() == 2:
                a, b = cells_of(spots)
                strong.setdefault(a, []).append(b)
                strong.setdefault(b, []).append(a)
        for start in cells_of(dmask):
            for first in strong.get(start, ()):
                for weak in cells_of(dmask & PEER_MASK[first] & ~(1 << start)):
                    for end in strong.get(weak, ()):
                        if end == first:
                            continue
                        # A chain that closes on its start forces the start cell: all its peers lose the digit.
                        sees = PEER_MASK[start] if end == start else PEER_MASK[start] & PEER_MASK[end]
                        gone = dmask & sees
                        if gone:
                            yield _step(Technique.TURBOT_FISH, digit, gone, (start, first, weak, end))


def empty_rectangle(board: Board, *, allow_two: bool = False) -> Iterator[Step]:
    """Empty Rectangles; ``allow_two`` also accepts boxes with one place on each line (HoDoKu's option)."""
    for digit in range(1, 10):
        dmask = board.dmask[digit]
        for box in range(9):
            spots = dmask & UNIT_MASK[18 + box]
            if not 2 <= spots.bit_count() <= 5:
                continue
            top, left = box // 3 * 3, box % 3 * 3
            for row in range(top, top + 3):
                for col in range(left, left + 3):
                    on_row = spots & UNIT_MASK[row]
                    on_col = spots & UNIT_MASK[9 + col]
                    if spots & ~(on_row | on_col):
                        continue
                    cross = 1 << (row * 9 + col)
                    if not on_row & ~cross or not on_col & ~cross:
                        continue
                    if on_row.bit_count() < 2 and on_col.bit_count() < 2 and not allow_two:
                        continue
                    yield from _er_eliminations(dmask, digit, box, spots, row, col, by_rows=True)
                    yield from _er_eliminations(dmask, digit, box, spots, row, col, by_rows=False)


def _er_eliminations(
    dmask: int, digit: int, box: int, spots: int, row: int, col: int, *, by_rows: bool
) -> Iterator[Step]:
    """From the box's row (``by_rows``) or column: a conjugate pair leaving it, and the cell it points at."""
    line = UNIT_MASK[row] if by_rows else UNIT_MASK[9 + col]
    for cell in cells_of(dmask & line):
        if BOX_OF[cell] == box:
            continue
        # The pair runs across the ER line: along the cell's column when the line is the box's row.
        pair_unit = CELL_UNITS[cell][1] if by_rows else CELL_UNITS[cell][0]
        pair = dmask & UNIT_MASK[pair_unit]
        if pair.bit_count() != 2:
            continue
        other = (pair & ~(1 << cell)).bit_length() - 1
        target = ROW_OF[other] * 9 + col if by_rows else row * 9 + COL_OF[other]
        if BOX_OF[target] != box and dmask >> target & 1:
            yield _step(Technique.EMPTY_RECTANGLE, digit, 1 << target, (*cells_of(spots), cell, other))
