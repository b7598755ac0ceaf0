"""Basic fish (X-Wing, Swordfish, Jellyfish) and their finned and sashimi forms.

For one digit, ``n`` base lines (rows, or columns) whose candidates lie in ``n`` cover lines of the other kind
place the digit once in each cover line, so it leaves the cover lines outside the base. A finned fish has
extra base candidates (fins) outside the cover lines, all in one box: either a fin is true or the fish is,
so the digit leaves only the cover cells that also see every fin (the cover cells of the fins' box). HoDoKu
calls a finned fish *sashimi* when some base line holds a single candidate besides its fins.

Lines are 9-bit masks: for rows as base, ``lines[r]`` holds the columns of row r where the digit can go.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from milepost.envs.sudoku.grader.candidates import DIGITS, PEER_MASK, UNIT_MASK, Board, Step, cells_of, elimination_step
from milepost.envs.sudoku.grader.scores import Technique

_BASIC = {2: Technique.X_WING, 3: Technique.SWORDFISH, 4: Technique.JELLYFISH}
_FINNED = {2: Technique.FINNED_X_WING, 3: Technique.FINNED_SWORDFISH, 4: Technique.FINNED_JELLYFISH}
_SASHIMI = {2: Technique.SASHIMI_X_WING, 3: Technique.SASHIMI_SWORDFISH, 4: Technique.SASHIMI_JELLYFISH}
_STACK = (0b000000111, 0b000111000, 0b111000000)  # the three line indices of a band / stack
LINE_MASK = (UNIT_MASK[9:18], UNIT_MASK[:9])  # LINE_MASK[True][r]: row r's cells; LINE_MASK[False][c]: column c's


def _bits(mask: int) -> tuple[int, ...]:
    """Zero-based positions of a 9-bit mask."""
    return tuple(d - 1 for d in DIGITS[mask])


def _lines(board: Board, digit: int) -> tuple[list[int], list[int]]:
    """Per row, the columns holding ``digit``; per column, the rows."""
    m = board.dmask[digit]
    rows = [(m >> (9 * r)) & 0x1FF for r in range(9)]
    cols = [0] * 9
    for r, bits in enumerate(rows):
        for c in _bits(bits):
            cols[c] |= 1 << r
    return rows, cols


def _cell(by_rows: bool, base: int, cover: int) -> int:
    return base * 9 + cover if by_rows else cover * 9 + base


def basic_fish(board: Board, size: int) -> Iterator[Step]:
    """X-Wing (2), Swordfish (3), Jellyfish (4), rows then columns as base, digits ascending."""
    for digit in range(1, 10):
        rows, cols = _lines(board, digit)
        for by_rows, base_lines, cover_lines in ((True, rows, cols), (False, cols, rows)):
            eligible = [i for i in range(9) if 1 <= base_lines[i].bit_count() <= size]
            for base in combinations(eligible, size):
                cover = 0
                for i in base:
                    cover |= base_lines[i]
                if cover.bit_count() != size:
                    continue
                base_mask = sum(1 << i for i in base)
                gone = [(_cell(by_rows, i, j), digit) for j in _bits(cover) for i in _bits(cover_lines[j] & ~base_mask)]
                if gone:
                    cells = [_cell(by_rows, i, j) for i in base for j in _bits(base_lines[i])]
                    yield elimination_step(_BASIC[size], (digit,), sorted(gone), cells)


def finned_fish(board: Board, size: int, *, sashimi: bool | None = None) -> Iterator[Step]:
    """Finned and sashimi fish of ``size``; ``sashimi`` True / False keeps only one kind.

    HoDoKu's order: digits, rows then columns as base, base lines in combination order, then cover sets in
    combination order. Fins that eliminate anything lie in one box (a cell seeing every fin and lying in a
    cover line outside the base must share the fins' box), so for each base the search only tries cover
    sets that leave fins in one stack of positions, at most five of them, as HoDoKu's search bounds them.
    """
    for digit in range(1, 10):
        dmask = board.dmask[digit]
        if not dmask:
            continue
        rows, cols = _lines(board, digit)
        for by_rows, base_lines in ((True, rows), (False, cols)):
            eligible = [i for i in range(9) if 1 <= base_lines[i].bit_count() <= size + 3]
            for base in combinations(eligible, size):
                union = 0
                for i in base:
                    union |= base_lines[i]
                extra = union.bit_count() - size
                if not 0 < extra <= 3:
                    continue
                covers = list(
                    union & ~sum(1 << j for j in fin_pos)
                    for stack in _STACK
                    if (union & stack).bit_count() >= extra
                    for fin_pos in combinations(_bits(union & stack), extra)
                )
                # HoDoKu walks cover sets in combination order: ascending positions, compared left to right.
                covers.sort(key=_bits)
                for cover in covers:
                    step = _finned_step(dmask, digit, size, by_rows, base, base_lines, cover)
                    if step is not None and (sashimi is None or sashimi == (step.technique == _SASHIMI[size])):
                        yield step


def _finned_step(
    dmask: int, digit: int, size: int, by_rows: bool, base: tuple[int, ...], base_lines: list[int], cover: int
) -> Step | None:
    fins = [_cell(by_rows, i, j) for i in base for j in _bits(base_lines[i] & ~cover)]
    if not fins or len(fins) > 5:
        return None
    sees_fins = (1 << 81) - 1
    for fin in fins:
        sees_fins &= PEER_MASK[fin]
    cover_cells = base_cells = 0
    for j in _bits(cover):
        cover_cells |= LINE_MASK[not by_rows][j]
    for i in base:
        base_cells |= LINE_MASK[by_rows][i]
    gone = dmask & cover_cells & sees_fins & ~base_cells
    if not gone:
        return None
    # Sashimi: a base line with at most one body candidate (without its fins it could not be part of a fish).
    # HoDoKu 2.2's regression library labels by this rule; its older exemplar library by another.
    thin = any((base_lines[i] & cover).bit_count() <= 1 for i in base)
    technique = _SASHIMI[size] if thin else _FINNED[size]
    cells = [_cell(by_rows, i, j) for i in base for j in _bits(base_lines[i])]
    return elimination_step(technique, (digit,), [(c, digit) for c in cells_of(gone)], cells)


def x_wing(board: Board) -> Iterator[Step]:
    return basic_fish(board, 2)


def swordfish(board: Board) -> Iterator[Step]:
    return basic_fish(board, 3)


def jellyfish(board: Board) -> Iterator[Step]:
    return basic_fish(board, 4)


def finned_x_wing(board: Board) -> Iterator[Step]:
    return finned_fish(board, 2, sashimi=False)


def sashimi_x_wing(board: Board) -> Iterator[Step]:
    return finned_fish(board, 2, sashimi=True)


def finned_swordfish(board: Board) -> Iterator[Step]:
    return finned_fish(board, 3, sashimi=False)


def sashimi_swordfish(board: Board) -> Iterator[Step]:
    return finned_fish(board, 3, sashimi=True)


def finned_jellyfish(board: Board) -> Iterator[Step]:
    return finned_fish(board, 4, sashimi=False)


def sashimi_jellyfish(board: Board) -> Iterator[Step]:
    return finned_fish(board, 4, sashimi=True)
