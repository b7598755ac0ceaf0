"""Pencil marks for the technique grader: candidate bitmasks per cell and per digit, and the ``Step`` record.

The grader works on 9x9 boards only (HoDoKu's domain). Two views of the candidates are kept in step:

* ``cands[cell]``: a 9-bit mask, bit ``d - 1`` for digit d (0 for a placed cell);
* ``dmask[d]``: an 81-bit board of the cells where digit d is still a candidate, so that "where can d go in
  this unit" is one AND with ``UNIT_MASK[u]`` and "which of those see this cell" one more with ``PEER_MASK``.

Units are numbered as in HoDoKu: rows 0-8, columns 9-17, boxes 18-26. Cells are row-major, ``r * 9 + c``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from milepost.envs.sudoku.grader.scores import Technique
from milepost.envs.sudoku.grid import geometry
from milepost.errors import InputError

_GEO = geometry(9)
ROW_OF: tuple[int, ...] = _GEO.row_of
COL_OF: tuple[int, ...] = _GEO.col_of
BOX_OF: tuple[int, ...] = _GEO.box_of
ROWS, COLS, BOXES = _GEO.rows, _GEO.cols, _GEO.boxes
UNITS: tuple[tuple[int, ...], ...] = ROWS + COLS + BOXES
UNIT_MASK: tuple[int, ...] = tuple(sum(1 << c for c in unit) for unit in UNITS)
CELL_UNITS: tuple[tuple[int, int, int], ...] = tuple((ROW_OF[c], 9 + COL_OF[c], 18 + BOX_OF[c]) for c in range(81))
PEERS: tuple[tuple[int, ...], ...] = _GEO.peers
PEER_MASK: tuple[int, ...] = tuple(sum(1 << p for p in PEERS[c]) for c in range(81))
ALL_CELLS = (1 << 81) - 1
FULL = 0x1FF  # every digit
BIT: tuple[int, ...] = (0, *(1 << (d - 1) for d in range(1, 10)))  # BIT[d]; BIT[0] = 0
DIGITS: tuple[tuple[int, ...], ...] = tuple(tuple(d for d in range(1, 10) if m & (1 << (d - 1))) for m in range(512))
"""The digits of each 9-bit mask, ascending."""


def cells_of(board: int) -> list[int]:
    """The cells of an 81-bit board, ascending."""
    out = []
    while board:
        low = board & -board
        out.append(low.bit_length() - 1)
        board ^= low
    return out


def board_of(cells: Iterable[int]) -> int:
    """The 81-bit board of some cells."""
    board = 0
    for c in cells:
        board |= 1 << c
    return board


def name(cell: int) -> str:
    """``r1c1`` style name of a cell."""
    return f"r{cell // 9 + 1}c{cell % 9 + 1}"


@dataclass(frozen=True, slots=True)
class Step:
    """One deduction: the technique, the digits its pattern uses, and what it places or eliminates.

    ``digits`` are what HoDoKu's library calls the step's candidates (the digit of a fish, the three digits of
    an XY-Wing, none for BUG+1); ``cells`` are the pattern's cells, for explanations.
    """

    technique: Technique
    digits: tuple[int, ...]
    placements: tuple[tuple[int, int], ...] = ()  # (cell, digit)
    eliminations: tuple[tuple[int, int], ...] = ()  # (cell, digit), in the order they are applied
    cells: tuple[int, ...] = ()

    def describe(self) -> str:
        """One line for logs: technique, digits, pattern cells and effect."""
        what = ", ".join(f"{name(c)}={d}" for c, d in self.placements) or ", ".join(
            f"{name(c)}<>{d}" for c, d in self.eliminations
        )
        pattern = " ".join(name(c) for c in self.cells)
        digits = "".join(map(str, self.digits))
        return f"{self.technique.value} {digits} [{pattern}]: {what}"


def elimination_step(
    technique: Technique,
    digits: Iterable[int],
    eliminations: Iterable[tuple[int, int]],
    cells: Iterable[int] = (),
) -> Step:
    """A ``Step`` with its eliminations de-duplicated, in the order given.

    The order is HoDoKu's (unit by unit, cells in unit order, digits ascending; ascending cells for patterns
    it collects as cell sets): eliminations are applied in that order, and the singles they create are
    queued in that order, which decides the path's next singles.
    """
    return Step(technique, tuple(sorted(set(digits))), (), tuple(dict.fromkeys(eliminations)), tuple(cells))


class Board:
    """The pencil-mark state a solution path walks through: values, candidates, and HoDoKu's singles queues.

    Candidates only ever shrink: ``place`` removes the digit from the cell's peers, ``eliminate`` removes one
    candidate. Nothing here checks the state against a solution; the grader does that.

    Which single HoDoKu takes next depends on when each single appeared, so the board keeps what HoDoKu's
    ``Sudoku2`` keeps: ``free[unit][digit]``, the places left for a digit in a unit, and two first-in
    first-out queues of ``(cell, digit)``, one entry per cell whose candidates drop to one (naked) and one per
    unit whose places for a digit drop to one (hidden). Entries go stale when their cell is filled and are
    skipped. Puzzles are loaded the way HoDoKu loads them (all candidates, then the givens placed in cell
    order), and ``place`` / ``eliminate`` update in HoDoKu's order, so the queues match its own.
    """

    __slots__ = (
        "cands", "dmask", "empty", "free", "givens", "hs_head", "hs_queue", "ns_head", "ns_pos", "ns_queue",
        "values",
    )  # fmt: skip

    def __init__(self) -> None:
        """An empty board: every candidate everywhere."""
        self.givens = 0  # board of the givens (Avoidable Rectangles tell them from placed cells)
        self.values = [0] * 81
        self.cands = [FULL] * 81
        self.dmask = [0] + [ALL_CELLS] * 9  # dmask[0] unused
        self.empty = ALL_CELLS  # board of the unplaced cells
        self.free = [[9] * 10 for _ in range(27)]  # free[unit][digit]; digit 0 unused
        self.ns_queue: list[tuple[int, int]] = []
        self.ns_pos: dict[int, int] = {}  # cell -> its naked-single entry (a cell drops to one candidate once)
        self.hs_queue: list[tuple[int, int]] = []
        self.ns_head = 0  # entries before the heads are stale
        self.hs_head = 0

    @classmethod
    def from_puzzle(cls, puzzle: Sequence[int], placed: int = 0) -> Board:
        """The pencil marks of a 9x9 puzzle: every digit its peers do not show.

        Args:
            puzzle: 81 cells, 0 for empty.
            placed: board of the filled cells that are not givens (solved earlier; HoDoKu's ``+`` cells).

        Raises:
            InputError: not 81 cells of 0-9.
        """
        if len(puzzle) != 81 or any(not (isinstance(d, int) and 0 <= d <= 9) for d in puzzle):
            raise InputError("sudoku grader: expected 81 cells of 0-9 (the grader works on 9x9 boards)")
        board = cls()
        for cell, digit in enumerate(puzzle):
            if digit:
                board.place(cell, digit)
        board.givens = ALL_CELLS & ~board.empty & ~placed
        return board

    def copy(self) -> Board:
        other = Board.__new__(Board)
        other.values, other.cands, other.dmask = self.values[:], self.cands[:], self.dmask[:]
        other.empty, other.givens = self.empty, self.givens
        other.free = [row[:] for row in self.free]
        other.ns_queue, other.hs_queue, other.ns_pos = self.ns_queue[:], self.hs_queue[:], dict(self.ns_pos)
        other.ns_head, other.hs_head = self.ns_head, self.hs_head
        return other

    def _drop(self, cell: int, digit: int) -> None:
        """Remove a present candidate and queue the singles it creates (HoDoKu's ``setCandidate(false)``)."""
        mask = self.cands[cell] & ~BIT[digit]
        self.cands[cell] = mask
        board = self.dmask[digit] & ~(1 << cell)
        self.dmask[digit] = board
        if mask and not mask & (mask - 1):
            self.ns_pos[cell] = len(self.ns_queue)
            self.ns_queue.append((cell, mask.bit_length()))
        for u in CELL_UNITS[cell]:
            row = self.free[u]
            left = row[digit] - 1
            row[digit] = left
            if left == 1:
                rest = board & UNIT_MASK[u]
                if rest:  # the cell being placed has no candidates left, so it is never the one found
                    self.hs_queue.append(((rest & -rest).bit_length() - 1, digit))

    def place(self, cell: int, digit: int) -> None:
        """Set ``cell`` to ``digit`` and remove the digit from its peers (HoDoKu's ``setCell``).

        As in HoDoKu, the cell's own candidates are cleared first, the peers lose the digit in cell order,
        and only then do the cell's units stop counting its old candidates.
        """
        own = self.cands[cell]
        cell_bit = 1 << cell
        self.values[cell] = digit
        self.cands[cell] = 0
        self.empty &= ~cell_bit
        dmask = self.dmask
        for d in DIGITS[own]:
            dmask[d] &= ~cell_bit
        hit = dmask[digit] & PEER_MASK[cell]
        while hit:
            low = hit & -hit
            self._drop(low.bit_length() - 1, digit)
            hit ^= low
        for d in DIGITS[own]:
            for u in CELL_UNITS[cell]:
                row = self.free[u]
                left = row[d] - 1
                row[d] = left
                if left == 1 and d != digit:
                    rest = dmask[d] & UNIT_MASK[u]
                    if rest:
                        self.hs_queue.append(((rest & -rest).bit_length() - 1, d))

    def eliminate(self, cell: int, digit: int) -> None:
        """Remove ``digit`` from the candidates of ``cell`` (a no-op when it is not one)."""
        if self.cands[cell] & BIT[digit]:
            self._drop(cell, digit)

    def apply(self, step: Step) -> None:
        """Carry out a step's placements and eliminations."""
        for cell, digit in step.placements:
            self.place(cell, digit)
        for cell, digit in step.eliminations:
            self.eliminate(cell, digit)

    def has(self, cell: int, digit: int) -> bool:
        return bool(self.cands[cell] & BIT[digit])

    def in_unit(self, unit: int, digit: int) -> int:
        """The board of the cells of ``unit`` where ``digit`` is a candidate."""
        return self.dmask[digit] & UNIT_MASK[unit]

    def solved(self) -> bool:
        return not self.empty

    def to_string(self) -> str:
        return "".join(map(str, self.values))
