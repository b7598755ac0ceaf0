"""Board geometry shared by the Sudoku state, solvers, generator and canonical form.

Sizes: 9 (3x3 boxes), 6 (boxes 2 rows x 3 columns) and 4 (2x2 boxes). Cells are indexed row-major,
``cell = row * n + col``; digits are 1..n; bit ``1 << (d - 1)`` stands for digit d in candidate masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from milepost.errors import InputError

BOX_SHAPES: dict[int, tuple[int, int]] = {4: (2, 2), 6: (2, 3), 9: (3, 3)}


@dataclass(frozen=True)
class Geometry:
    """Precomputed units and peers of an n x n board with ``box_rows`` x ``box_cols`` boxes."""

    n: int
    box_rows: int
    box_cols: int
    row_of: tuple[int, ...]
    col_of: tuple[int, ...]
    box_of: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]
    cols: tuple[tuple[int, ...], ...]
    boxes: tuple[tuple[int, ...], ...]
    peers: tuple[tuple[int, ...], ...]  # the other cells sharing a row, column or box (sorted)
    full: int  # mask with all n digits

    @property
    def cells(self) -> int:
        return self.n * self.n

    @property
    def units(self) -> tuple[tuple[int, ...], ...]:
        return self.rows + self.cols + self.boxes


@cache
def geometry(n: int) -> Geometry:
    """The geometry of an n x n board; raises ``InputError`` for an unsupported size."""
    if n not in BOX_SHAPES:
        raise InputError(f"sudoku: unsupported size {n} (supported: 4, 6, 9)")
    br, bc = BOX_SHAPES[n]
    row_of = tuple(c // n for c in range(n * n))
    col_of = tuple(c % n for c in range(n * n))
    boxes_per_row = n // bc
    box_of = tuple((r // br) * boxes_per_row + (c // bc) for r, c in zip(row_of, col_of))
    rows = tuple(tuple(r * n + c for c in range(n)) for r in range(n))
    cols = tuple(tuple(r * n + c for r in range(n)) for c in range(n))
    boxes = tuple(tuple(i for i in range(n * n) if box_of[i] == b) for b in range(n))
    peers = tuple(
        tuple(sorted((set(rows[row_of[i]]) | set(cols[col_of[i]]) | set(boxes[box_of[i]])) - {i})) for i in range(n * n)
    )
    return Geometry(n, br, bc, row_of, col_of, box_of, rows, cols, boxes, peers, (1 << n) - 1)


def parse_grid(text: str, n: int | None = None) -> list[int]:
    """Parse a puzzle string (digits, with ``0`` or ``.`` for empty) into a list of n*n ints.

    Raises:
        InputError: wrong length, a character that is not a digit of the board, or an unknown size.
    """
    cleaned = text.strip()
    length = len(cleaned)
    if n is None:
        sizes = [s for s in BOX_SHAPES if s * s == length]
        if not sizes:
            raise InputError(f"sudoku: a puzzle string of {length} characters is not a 4x4, 6x6 or 9x9 board")
        n = sizes[0]
    geometry(n)
    if length != n * n:
        raise InputError(f"sudoku: expected {n * n} characters for a {n}x{n} board, got {length}")
    cells: list[int] = []
    for i, ch in enumerate(cleaned):
        if ch in ".0":
            cells.append(0)
        elif "1" <= ch <= "9" and int(ch) <= n:  # ASCII only: str.isdigit() also takes "³" and "３"
            cells.append(int(ch))
        else:
            raise InputError(f"sudoku: character {ch!r} at position {i} is not a digit 1-{n}, 0 or '.'")
    return cells


def grid_to_str(cells: list[int] | tuple[int, ...]) -> str:
    return "".join(map(str, cells))


def conflicts(cells: list[int] | tuple[int, ...], n: int) -> str | None:
    """A description of the first rule broken by the filled cells, or None when the grid is consistent."""
    geo = geometry(n)
    for kind, units in (("row", geo.rows), ("column", geo.cols), ("box", geo.boxes)):
        for u, unit in enumerate(units):
            seen = 0
            for cell in unit:
                d = cells[cell]
                if d:
                    bit = 1 << (d - 1)
                    if seen & bit:
                        return f"digit {d} appears twice in {kind} {u + 1}"
                    seen |= bit
    return None
