"""Uniqueness: Unique Rectangles (Uniqueness Tests 1-6), Hidden Rectangle, and BUG+1.

A puzzle with one solution cannot end in a *deadly pattern*: four unsolved cells in two rows, two columns and
two boxes holding only digits a and b, which could be swapped. Each test rules the pattern out:

* Test 1: three corners hold only {a,b}; a and b leave the fourth.
* Tests 2 / 5: the other corners hold {a,b} plus one same extra digit z; one of them is z, so z leaves every
  cell that sees all of them (Test 2 when two corners in one row or column carry z, else Test 5).
* Test 3: two corners in one unit carry extras; together they act as one cell holding the extras, which
  may form a naked subset with other cells of the unit (without a or b).
* Test 4: two corners in one row or column carry extras, and a is confined to them where they meet: b leaves
  both.
* Test 6: two diagonal corners carry extras and a appears in the rectangle's rows and columns only on its
  corners (an X-Wing on a): a leaves the two diagonal corners.
* Hidden Rectangle: a corner {a,b} whose opposite corner's row and column hold a only on the rectangle: b
  leaves the opposite corner.
* BUG+1: every unsolved cell holds two candidates except one with three, and every digit appears twice per
  unit except one digit three times around that cell: it is the cell's value.

Rectangles are found as HoDoKu finds them: from every cell with two candidates {a,b} (ascending), a second
corner in its box and line, then the far side in another box; each set of four corners is checked once,
with the first start cell's pair. Corners may miss a or b (HoDoKu's default "allow missing candidates"), as
long as no placed digit rules them out.
"""

from __future__ import annotations

from collections.abc import Iterator

from milepost.envs.sudoku.grader.candidates import (
    BOX_OF,
    CELL_UNITS,
    COL_OF,
    COLS,
    DIGITS,
    PEER_MASK,
    ROW_OF,
    ROWS,
    UNIT_MASK,
    UNITS,
    Board,
    Step,
    board_of,
    cells_of,
    elimination_step,
)
from milepost.envs.sudoku.grader.scores import Technique

_T = Technique


def _allowed(board: Board) -> list[int]:
    """Per digit, the unsolved cells that no placed digit rules it out of (HoDoKu's "allowed candidates")."""
    seen = [0] * 10
    for cell, digit in enumerate(board.values):
        if digit:
            seen[digit] |= PEER_MASK[cell]
    return [board.empty & ~seen[d] for d in range(10)]


def rectangles(board: Board) -> Iterator[tuple[tuple[int, int, int, int], int, int]]:
    """Candidate unique rectangles as ``(corners, a, b)``, each set of corners once, in HoDoKu's order."""
    allowed = _allowed(board)
    cands = board.cands
    done: set[tuple[int, ...]] = set()
    for c11 in cells_of(board.empty):
        if cands[c11].bit_count() != 2:
            continue
        a, b = DIGITS[cands[c11]]
        both = allowed[a] & allowed[b]
        for c12 in UNITS[18 + BOX_OF[c11]]:
            if c12 == c11 or (ROW_OF[c12] != ROW_OF[c11] and COL_OF[c12] != COL_OF[c11]):
                continue
            if not both >> c12 & 1:
                continue
            by_rows = ROW_OF[c12] == ROW_OF[c11]
            line11 = COLS[COL_OF[c11]] if by_rows else ROWS[ROW_OF[c11]]
            line12 = COLS[COL_OF[c12]] if by_rows else ROWS[ROW_OF[c12]]
            for c21, c22 in zip(line11, line12):
                if BOX_OF[c21] == BOX_OF[c11] or not (both >> c21 & 1 and both >> c22 & 1):
                    continue
                key = tuple(sorted((c11, c12, c21, c22)))
                if key in done:
                    continue
                done.add(key)
                yield (c11, c12, c21, c22), a, b


def _split(board: Board, corners: tuple[int, ...], ur: int) -> tuple[list[int], list[int]]:
    """Corners holding only UR digits, and corners with extra candidates (ascending, as HoDoKu's cell sets)."""
    two = [c for c in sorted(corners) if not board.cands[c] & ~ur]
    extra = [c for c in sorted(corners) if board.cands[c] & ~ur]
    return two, extra


def unique_rectangles(board: Board) -> Iterator[Step]:
    """Every Uniqueness Test 1-6 and Hidden Rectangle step, rectangle by rectangle."""
    cands, dmask = board.cands, board.dmask
    for corners, a, b in rectangles(board):
        ur = (1 << (a - 1)) | (1 << (b - 1))
        two, extra = _split(board, corners, ur)

        if len(two) == 3:
            gone = [(extra[0], d) for d in (a, b) if cands[extra[0]] >> (d - 1) & 1]
            if gone:
                yield elimination_step(_T.UNIQUENESS_1, (a, b), gone, corners)
        if len(two) in (1, 2):
            z_mask = 0
            sees = (1 << 81) - 1
            for c in extra:
                z_mask |= cands[c] & ~ur
                if z_mask.bit_count() > 1:
                    break
                sees &= PEER_MASK[c]
            if z_mask.bit_count() == 1:
                z = z_mask.bit_length()
                gone_cells = sees & dmask[z]
                if gone_cells:
                    i1, i2 = extra[0], extra[1]
                    aligned = ROW_OF[i1] == ROW_OF[i2] or COL_OF[i1] == COL_OF[i2]
                    technique = _T.UNIQUENESS_2 if len(extra) == 2 and aligned else _T.UNIQUENESS_5
                    yield elimination_step(technique, (a, b), [(c, z) for c in cells_of(gone_cells)], corners)
        if len(two) == 2:
            i1, i2 = extra
            yield from _uniqueness_3(board, corners, two, extra, a, b)
            if ROW_OF[i1] == ROW_OF[i2] or COL_OF[i1] == COL_OF[i2]:
                common = PEER_MASK[i1] & PEER_MASK[i2]
                drop = b if not common & dmask[a] else a if not common & dmask[b] else 0
                gone = [(c, drop) for c in extra if drop and cands[c] >> (drop - 1) & 1]
                if gone:
                    yield elimination_step(_T.UNIQUENESS_4, (a, b), gone, corners)
            else:
                lines = UNIT_MASK[ROW_OF[i1]] | UNIT_MASK[ROW_OF[i2]] | UNIT_MASK[9 + COL_OF[i1]]
                lines = (lines | UNIT_MASK[9 + COL_OF[i2]]) & ~board_of(corners)
                drop = a if not lines & dmask[a] else b if not lines & dmask[b] else 0
                gone = [(c, drop) for c in extra if drop and cands[c] >> (drop - 1) & 1]
                if gone:
                    yield elimination_step(_T.UNIQUENESS_6, (a, b), gone, corners)
        diagonal = len(two) == 2 and ROW_OF[two[0]] != ROW_OF[two[1]] and COL_OF[two[0]] != COL_OF[two[1]]
        if len(two) == 1 or diagonal:
            for corner in two:
                yield from _hidden_rectangle(board, corners, corner, extra, a, b)


def _hidden_rectangle(
    board: Board, corners: tuple[int, ...], corner: int, extra: list[int], a: int, b: int
) -> Iterator[Step]:
    row = ROW_OF[extra[0]] if ROW_OF[extra[0]] != ROW_OF[corner] else ROW_OF[extra[1]]
    col = COL_OF[extra[0]] if COL_OF[extra[0]] != COL_OF[corner] else COL_OF[extra[1]]
    outside = ~board_of(corners)
    target = row * 9 + col
    for keep, drop in ((a, b), (b, a)):
        spots = board.dmask[keep] & outside
        if spots & (UNIT_MASK[row] | UNIT_MASK[9 + col]):
            continue
        if board.cands[target] >> (drop - 1) & 1:
            yield elimination_step(_T.HIDDEN_RECTANGLE, (a, b), [(target, drop)], corners)


def _uniqueness_3(
    board: Board, corners: tuple[int, ...], two: list[int], extra: list[int], a: int, b: int
) -> Iterator[Step]:
    """The roof corners as one virtual cell of their extra digits, in a naked subset of a shared unit."""
    cands = board.cands
    ur = (1 << (a - 1)) | (1 << (b - 1))
    i1, i2 = extra
    virtual = (cands[i1] | cands[i2]) & ~ur
    shared = [u for u in CELL_UNITS[i1] if u in CELL_UNITS[i2]]
    # HoDoKu tries rows, then columns, then boxes.
    for u in sorted(shared, key=lambda u: (u >= 18, u)):
        others = [c for c in UNITS[u] if cands[c] and not cands[c] & ur and c not in corners]
        yield from _u3_subsets(board, corners, u, others, 0, virtual, [i1, i2], a, b)


def _u3_subsets(
    board: Board,
    corners: tuple[int, ...],
    unit: int,
    others: list[int],
    start: int,
    digits: int,
    cells: list[int],
    a: int,
    b: int,
) -> Iterator[Step]:
    cands = board.cands
    for i in range(start, len(others)):
        now_cells = [*cells, others[i]]
        now_digits = digits | cands[others[i]]
        rows = {ROW_OF[c] for c in now_cells}
        cols = {COL_OF[c] for c in now_cells}
        in_line = len(rows) == 1 or len(cols) == 1
        # In a box, a subset that lies in one line was already checked with the line.
        if (unit < 18 or not in_line) and now_digits.bit_count() == len(now_cells) - 1:
            units = [unit]
            if unit < 18 and len({BOX_OF[c] for c in now_cells}) == 1:
                units.append(18 + BOX_OF[now_cells[0]])  # a locked subset also clears its box
            gone = [
                (c, d)
                for u in units
                for c in UNITS[u]
                if cands[c] and c not in now_cells
                for d in DIGITS[cands[c] & now_digits]
            ]
            if gone:
                yield elimination_step(_T.UNIQUENESS_3, (a, b), gone, corners)
        yield from _u3_subsets(board, corners, unit, others, i + 1, now_digits, now_cells, a, b)


def _only(technique: Technique, board: Board) -> Iterator[Step]:
    return (s for s in unique_rectangles(board) if s.technique == technique)


def uniqueness_1(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_1, board)


def uniqueness_2(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_2, board)


def uniqueness_3(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_3, board)


def uniqueness_4(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_4, board)


def uniqueness_5(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_5, board)


def uniqueness_6(board: Board) -> Iterator[Step]:
    return _only(_T.UNIQUENESS_6, board)


def hidden_rectangle(board: Board) -> Iterator[Step]:
    return _only(_T.HIDDEN_RECTANGLE, board)


def bug_plus_1(board: Board) -> Iterator[Step]:
    """BUG+1: the one cell with three candidates takes the digit that appears three times around it."""
    cands = board.cands
    triple = -1
    for cell in cells_of(board.empty):
        count = cands[cell].bit_count()
        if count > 3:
            return
        if count == 3:
            if triple >= 0:
                return
            triple = cell
    if triple < 0:
        return
    odd_digit = 0
    odd_units = [-1, -1, -1]
    for u in range(27):
        for digit in range(1, 10):
            count = (board.dmask[digit] & UNIT_MASK[u]).bit_count()
            if count > 3:
                return
            if count == 3:
                kind = u // 9
                if odd_units[kind] != -1 or (odd_digit and odd_digit != digit):
                    return
                odd_digit = digit
                odd_units[kind] = u
    if odd_digit and cands[triple] >> (odd_digit - 1) & 1 and tuple(odd_units) == CELL_UNITS[triple]:
        gone = [(triple, d) for d in DIGITS[cands[triple]] if d != odd_digit]
        yield Step(_T.BUG_PLUS_1, (), (), tuple(gone), (triple,))


def avoidable_rectangles(board: Board) -> Iterator[Step]:
    """Avoidable Rectangles: a would-be deadly pattern with solved corners that are not givens.

    Two solved cells a, b (not givens) in one box and line, and the rectangle's far side in another box: if
    one far corner is solved with the opposite digit, the other cannot take the digit that would complete the
    pattern (Type 1); if both are unsolved with {b, z} and {a, z}, one of them is z, so z leaves every cell
    that sees both (Type 2). Found as HoDoKu finds them: solved cells ascending, each rectangle once.
    """
    values, cands, givens = board.values, board.cands, board.givens

    def placed(cell: int) -> bool:
        return bool(values[cell]) and not givens >> cell & 1

    def two_with(cell: int, digit: int) -> bool:
        return not values[cell] and cands[cell].bit_count() == 2 and bool(cands[cell] >> (digit - 1) & 1)

    done: set[tuple[int, ...]] = set()
    for c11 in range(81):
        if not placed(c11):
            continue
        a = values[c11]
        for c12 in UNITS[18 + BOX_OF[c11]]:
            if c12 == c11 or (ROW_OF[c12] != ROW_OF[c11] and COL_OF[c12] != COL_OF[c11]) or not placed(c12):
                continue
            b = values[c12]
            by_rows = ROW_OF[c12] == ROW_OF[c11]
            line11 = COLS[COL_OF[c11]] if by_rows else ROWS[ROW_OF[c11]]
            line12 = COLS[COL_OF[c12]] if by_rows else ROWS[ROW_OF[c12]]
            for c21, c22 in zip(line11, line12):
                if BOX_OF[c21] == BOX_OF[c11]:
                    continue
                if not (
                    (values[c21] == b and placed(c21) and two_with(c22, a))
                    or (values[c22] == a and placed(c22) and two_with(c21, b))
                    or (two_with(c21, b) and two_with(c22, a))
                ):
                    continue
                corners = (c11, c12, c21, c22)
                key = tuple(sorted(corners))
                if key in done:
                    continue
                done.add(key)
                if values[c21] or values[c22]:
                    cell, digit = (c22, a) if values[c21] else (c21, b)
                    if cands[cell] >> (digit - 1) & 1:
                        yield elimination_step(_T.AVOIDABLE_RECTANGLE_1, (a, b), [(cell, digit)], corners)
                    continue
                z = DIGITS[cands[c21] & ~(1 << (b - 1))][0]
                if not cands[c22] >> (z - 1) & 1:
                    continue
                gone = board.dmask[z] & PEER_MASK[c21] & PEER_MASK[c22]
                if gone:
                    yield elimination_step(_T.AVOIDABLE_RECTANGLE_2, (a, b), [(c, z) for c in cells_of(gone)], corners)


def avoidable_rectangle_1(board: Board) -> Iterator[Step]:
    return (s for s in avoidable_rectangles(board) if s.technique == _T.AVOIDABLE_RECTANGLE_1)


def avoidable_rectangle_2(board: Board) -> Iterator[Step]:
    return (s for s in avoidable_rectangles(board) if s.technique == _T.AVOIDABLE_RECTANGLE_2)
