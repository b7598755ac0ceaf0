"""Rush Hour boards in Fogleman's format: parsing, validation, relettering and the fixed vehicle geometry.

A board is a 36-character row-major string of the 6x6 grid: ``o`` empty, ``x`` wall, ``A`` the primary car
(horizontal, length 2, on row index 2, exits right), ``B``..``Z`` other vehicles of length 2 or 3. A
``Layout`` holds what never changes while playing (each vehicle's axis, lane and length, the walls, the
letters); a position per vehicle (its offset along its axis) holds the rest.

Two letterings coexist. Fogleman's files skip a letter per wall, so the observation reletters the pieces
contiguously in the order of their original letters (``display`` letters) and keeps the original letters so
the source board round-trips. Internally vehicles are ordered canonically (A first, then by axis, lane and
position): vehicles sharing a lane can never pass each other, so this order is the same for every state of a
cluster and for every lettering of it, which makes the cluster's minimum packed state a letter-free identity.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from milepost.errors import InputError

SIDE = 6
CELLS = SIDE * SIDE
EXIT_ROW = 2  # the primary car's row (0-based)
PRIMARY = "A"
EMPTY = "o"
WALL = "x"
BITS = 3  # bits per vehicle offset in a packed state (offsets are 0..4)
MASK = (1 << BITS) - 1
GOAL_POS = SIDE - 2  # the primary car's column when solved (it covers columns 4 and 5)


@dataclass(frozen=True)
class Vehicle:
    """One piece's fixed geometry. Its position is its column (horizontal) or row (vertical)."""

    letter: str  # display letter: A, then B, C, ... contiguous in the order of the original letters
    original: str  # the letter in the source board (Fogleman's alphabet skips one per wall)
    horizontal: bool
    lane: int  # its row when horizontal, its column when vertical
    length: int

    @property
    def max_pos(self) -> int:
        return SIDE - self.length

    def cells(self, pos: int) -> list[int]:
        """Cell indices (row * 6 + col) covered at offset ``pos``."""
        if self.horizontal:
            return [self.lane * SIDE + pos + i for i in range(self.length)]
        return [(pos + i) * SIDE + self.lane for i in range(self.length)]

    def mask(self, pos: int) -> int:
        bits = 0
        for cell in self.cells(pos):
            bits |= 1 << cell
        return bits


class Layout:
    """The fixed part of a board: vehicles in canonical order (index 0 is A), walls, letter maps.

    Positions are per-vehicle offsets in this order; ``pack`` turns them into one int (3 bits each).
    """

    def __init__(self, vehicles: Sequence[Vehicle], walls: Sequence[int]) -> None:
        self.vehicles: tuple[Vehicle, ...] = tuple(vehicles)
        self.walls: tuple[int, ...] = tuple(sorted(walls))
        self.n = len(self.vehicles)
        self.wall_mask = sum(1 << c for c in self.walls)
        self.index_of: dict[str, int] = {v.letter: i for i, v in enumerate(self.vehicles)}
        # masks[i][p]: cells of vehicle i at offset p (the inner loops read these lists, not methods).
        self.masks: list[list[int]] = [[v.mask(p) for p in range(v.max_pos + 1)] for v in self.vehicles]
        self.display_order: list[int] = sorted(range(self.n), key=lambda i: self.vehicles[i].letter)
        # For drawing: each vehicle's cells per offset, and the empty board ('.' free, '#' wall).
        self.cell_lists: list[list[list[int]]] = [[v.cells(p) for p in range(v.max_pos + 1)] for v in self.vehicles]
        self.blank: list[str] = ["#" if c in self.walls else "." for c in range(CELLS)]
        # entering[i][p]: (cell mask entered moving one cell forward, moving backward) at offset p, 0 = off
        # the board; this is what makes a one-cell legality check one AND.
        self.entering: list[list[tuple[int, int]]] = []
        for v in self.vehicles:
            stride = 1 if v.horizontal else SIDE
            first = v.lane * SIDE if v.horizontal else v.lane
            rows = []
            for p in range(v.max_pos + 1):
                ahead = p + v.length
                fwd = 1 << (first + ahead * stride) if ahead < SIDE else 0
                back = 1 << (first + (p - 1) * stride) if p > 0 else 0
                rows.append((fwd, back))
            self.entering.append(rows)

    @cached_property
    def legend(self) -> str:
        """One line saying which way each vehicle moves (and what a wall looks like)."""
        horizontal = sorted(v.letter for v in self.vehicles if v.horizontal)
        vertical = sorted(v.letter for v in self.vehicles if not v.horizontal)
        parts = [f"left/right: {', '.join(horizontal)}"] + ([f"up/down: {', '.join(vertical)}"] if vertical else [])
        return "Vehicles move " + "; ".join(parts) + "." + (" # is a wall." if self.walls else "")

    def pack(self, positions: Sequence[int]) -> int:
        key = 0
        for i, pos in enumerate(positions):
            key |= pos << (BITS * i)
        return key

    def unpack(self, key: int) -> list[int]:
        return [(key >> (BITS * i)) & MASK for i in range(self.n)]

    def occupancy(self, positions: Sequence[int]) -> int:
        occ = self.wall_mask
        for masks, pos in zip(self.masks, positions):
            occ |= masks[pos]
        return occ

    def grid(self, positions: Sequence[int], *, letters: str = "display") -> list[str]:
        """The 36 cells as characters: ``o`` empty, ``x`` wall, and ``display``, ``original`` or
        ``canonical`` (A, B, ... in internal order) vehicle letters."""
        cells = [EMPTY] * CELLS
        for c in self.walls:
            cells[c] = WALL
        for i, (v, pos) in enumerate(zip(self.vehicles, positions)):
            ch = v.letter if letters == "display" else v.original if letters == "original" else chr(65 + i)
            for c in v.cells(pos):
                cells[c] = ch
        return cells

    def board(self, positions: Sequence[int], *, letters: str = "original") -> str:
        """The Fogleman string of a position (original letters by default, so a parsed board round-trips)."""
        return "".join(self.grid(positions, letters=letters))


def _where(cell: int) -> str:
    return f"row {cell // SIDE + 1}, column {cell % SIDE + 1}"


def parse_board(text: object) -> tuple[Layout, list[int]]:
    """Parse and validate a Fogleman board string.

    Returns:
        The layout and the vehicles' positions (offsets along their axes, in the layout's order).

    Raises:
        InputError: one line naming the problem: wrong length, an unknown character, a vehicle that is bent,
            in two pieces, of length 1 or 4+, no primary car, or a primary car that is vertical, of the wrong
            length or off row 3.
    """
    if not isinstance(text, str):
        raise InputError(f"board must be a string of {CELLS} characters, got {type(text).__name__}")
    if len(text) != CELLS:
        raise InputError(f"board has {len(text)} characters, expected {CELLS} (6x6, row-major)")
    cells_of: dict[str, list[int]] = {}
    walls: list[int] = []
    for i, ch in enumerate(text):
        if ch == EMPTY:
            continue
        if ch == WALL:
            walls.append(i)
        elif "A" <= ch <= "Z":
            cells_of.setdefault(ch, []).append(i)
        else:
            raise InputError(f"board: unexpected character {ch!r} at {_where(i)} (allowed: o, x, A-Z)")
    if PRIMARY not in cells_of:
        raise InputError("board has no primary car 'A'")
    specs: list[tuple[str, bool, int, int, int]] = []  # (letter, horizontal, lane, length, pos)
    for letter in sorted(cells_of):
        specs.append(_vehicle_spec(letter, cells_of[letter]))
    _, horizontal, lane, length, _ = specs[0]
    if not horizontal:
        raise InputError("board: primary car A must be horizontal")
    if length != 2:
        raise InputError(f"board: primary car A must have length 2, not {length}")
    if lane != EXIT_ROW:
        raise InputError(f"board: primary car A must be on row {EXIT_ROW + 1} (the exit row), not row {lane + 1}")
    return _build(specs, walls)


def _vehicle_spec(letter: str, cells: list[int]) -> tuple[str, bool, int, int, int]:
    rows = {c // SIDE for c in cells}
    cols = {c % SIDE for c in cells}
    if len(cells) == 1:
        raise InputError(f"board: vehicle {letter} has length 1 at {_where(cells[0])} (vehicles are 2 or 3 long)")
    if len(rows) > 1 and len(cols) > 1:
        raise InputError(f"board: vehicle {letter} is bent (its cells are not in one row or one column)")
    horizontal = len(rows) == 1
    step = 1 if horizontal else SIDE
    if any(b - a != step for a, b in itertools.pairwise(cells)):
        raise InputError(f"board: vehicle {letter} appears in two places (its cells are not contiguous)")
    if len(cells) > 3:
        raise InputError(f"board: vehicle {letter} has length {len(cells)} (vehicles are 2 or 3 long)")
    first = cells[0]
    lane, pos = (first // SIDE, first % SIDE) if horizontal else (first % SIDE, first // SIDE)
    return letter, horizontal, lane, len(cells), pos


def _build(specs: list[tuple[str, bool, int, int, int]], walls: list[int]) -> tuple[Layout, list[int]]:
    """Layout in canonical order: A, then vertical by column, horizontal by row; by position in a lane."""
    display = {letter: chr(65 + k) for k, letter in enumerate(sorted(s[0] for s in specs))}
    order = sorted(specs, key=lambda s: (s[0] != PRIMARY, s[1], s[2], s[4]))
    vehicles = [Vehicle(display[s[0]], s[0], s[1], s[2], s[3]) for s in order]
    return Layout(vehicles, walls), [s[4] for s in order]


def layout_from_pieces(
    pieces: Sequence[tuple[bool, int, int, int]],
    walls: Sequence[int] = (),
) -> tuple[Layout, list[int]]:
    """Build a board from ``(horizontal, lane, length, pos)`` pieces; the first is the primary car A.

    Letters follow Fogleman's generator style: A, then B, C, ... in reading order of the pieces' first cells.

    Raises:
        InputError: a piece off the board, of length other than 2-3, overlapping another piece or a wall.
    """
    occupied: dict[int, str] = {c: "a wall" for c in walls}
    firsts = []
    for k, (horizontal, lane, length, pos) in enumerate(pieces):
        if length not in (2, 3) or not 0 <= lane < SIDE or not 0 <= pos <= SIDE - length:
            raise InputError(
                f"piece {k}: (horizontal={horizontal}, lane={lane}, length={length}, pos={pos}) is off the board"
            )
        v = Vehicle("?", "?", horizontal, lane, length)
        for c in v.cells(pos):
            if c in occupied:
                raise InputError(f"piece {k} overlaps {occupied[c]} at {_where(c)}")
            occupied[c] = f"piece {k}"
        firsts.append(v.cells(pos)[0])
    if not pieces or not pieces[0][0] or pieces[0][1] != EXIT_ROW or pieces[0][2] != 2:
        raise InputError("the first piece must be the primary car: horizontal, length 2, on the exit row")
    rest = sorted(range(1, len(pieces)), key=lambda k: firsts[k])
    letters = {0: PRIMARY, **{k: chr(66 + j) for j, k in enumerate(rest)}}
    specs = [(letters[k], *pieces[k][:3], pieces[k][3]) for k in range(len(pieces))]
    return _build([(s[0], s[1], s[2], s[3], s[4]) for s in specs], list(walls))
