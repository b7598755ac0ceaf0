"""Singles: Full House, Naked Single, Hidden Single (placements), found through HoDoKu's singles queues.

A Full House is the last empty cell of a unit; a Naked Single a cell with one candidate left; a Hidden Single a
digit with one place left in a unit. HoDoKu does not scan the grid for them: it keeps the singles in the order
they appeared (``Board.ns_queue`` / ``Board.hs_queue``) and takes the oldest, which decides how a path splits
its placements between the three (and so its score: 4, 4 and 14 points). Each finder yields every live entry
of its queue once per cell, oldest first: a Full House is a queued naked single whose unit has no other
candidate left; HoDoKu lists Full Houses among the Naked Singles too, and its order tries Full House first.
"""

from __future__ import annotations

from collections.abc import Iterator

from milepost.envs.sudoku.grader.candidates import CELL_UNITS, UNIT_MASK, Board, Step, cells_of
from milepost.envs.sudoku.grader.scores import Technique


def _live(board: Board, queue: list[tuple[int, int]], head: int) -> int:
    """Skip the stale entries (filled cells) at the front of a queue; the new head."""
    values = board.values
    while head < len(queue) and values[queue[head][0]]:
        head += 1
    return head


def full_house(board: Board) -> Iterator[Step]:
    """The last empty cell of a row, column or box, oldest queued first."""
    # HoDoKu asks that no other digit has a place left in the unit: with every empty cell holding a candidate,
    # that is the cell being the unit's only empty one. Such cells are found from the unit masks, then taken
    # in the order of their naked-single entries (each has one: it is down to one candidate).
    empty = board.empty
    last = 0
    for mask in UNIT_MASK:
        left = empty & mask
        if left and not left & (left - 1):
            last |= left
    positions = board.ns_pos
    for cell in sorted(cells_of(last), key=lambda c: positions.get(c, 1 << 30)):
        digit = board.cands[cell].bit_length()
        yield Step(Technique.FULL_HOUSE, (digit,), ((cell, digit),), cells=(cell,))


def naked_single(board: Board) -> Iterator[Step]:
    """A cell with one candidate left, oldest queued first."""
    queue = board.ns_queue
    board.ns_head = head = _live(board, queue, board.ns_head)
    values = board.values
    for i in range(head, len(queue)):
        cell, digit = queue[i]
        if not values[cell]:
            yield Step(Technique.NAKED_SINGLE, (digit,), ((cell, digit),), cells=(cell,))


def hidden_single(board: Board) -> Iterator[Step]:
    """A digit with one place left in a unit, oldest queued first (each cell reported once)."""
    queue = board.hs_queue
    board.hs_head = head = _live(board, queue, board.hs_head)
    values, free = board.values, board.free
    done = 0
    for i in range(head, len(queue)):
        cell, digit = queue[i]
        if values[cell] or done >> cell & 1:
            continue
        if any(free[u][digit] == 1 for u in CELL_UNITS[cell]):
            done |= 1 << cell
            yield Step(Technique.HIDDEN_SINGLE, (digit,), ((cell, digit),), cells=(cell,))
