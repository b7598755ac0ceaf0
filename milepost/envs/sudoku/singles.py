"""The singles solver: which of the paper's easiest techniques a puzzle needs (appendix D.4).

The paper's easy tier is what Full House and Naked Single alone can finish. A Full House is the last empty
cell of a row, column or box; a Naked Single is a cell whose peers already show every digit but one (a Full
House is the special case that one unit alone shows them). A Hidden Single is a digit with one possible cell
left in a unit; HoDoKu counts it as easy, the paper as medium. The full technique grader (pairs, fish,
chains, ...) is a separate module; this one only separates

* ``easy``: Full House and Naked Single finish the puzzle;
* ``hidden``: they stall, and Hidden Singles are needed (with them, singles finish it);
* ``beyond``: singles of every kind stall before the grid is full.

Naked-single progress is monotone (a placement only removes candidates), so whether they finish a puzzle does
not depend on the order. The step counts do, and follow the propagation order: a placement counts as a Full
House when it fills the last empty cell of one of its units, and a Hidden Single is used only when no naked
single is left (boxes, then rows, then columns; lowest digit first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from milepost.envs.sudoku.grid import Geometry, conflicts, geometry
from milepost.errors import InputError

Tier = Literal["easy", "hidden", "beyond"]
TIERS: tuple[Tier, ...] = ("easy", "hidden", "beyond")


@dataclass(frozen=True)
class SinglesGrade:
    """What the singles solver needed for one puzzle."""

    tier: Tier
    full_house: int  # placements that were the last empty cell of a unit
    naked_single: int  # other placements forced by a cell's peers
    hidden_single: int  # placements forced by a digit's last place in a unit
    remaining: int  # empty cells the singles could not fill (0 unless tier is "beyond")

    @property
    def steps(self) -> int:
        return self.full_house + self.naked_single + self.hidden_single

    def to_dict(self) -> dict[str, int | str]:
        return {
            "tier": self.tier,
            "full_house": self.full_house,
            "naked_single": self.naked_single,
            "hidden_single": self.hidden_single,
            "remaining": self.remaining,
        }


_STALLED, _REACHED, _CONTRADICTION = 0, 1, 2


def _seen_masks(cells: list[int], geo: Geometry) -> tuple[dict[int, int], list[int]]:
    """Per empty cell, the mask of digits its peers show; and the cells that are already naked singles.

    Built from one mask per row, column and box (a pass over the cells) rather than by visiting every
    cell's 20 peers: the generator calls this for most cells it tries to empty.
    """
    n = geo.n
    row_of, col_of, box_of = geo.row_of, geo.col_of, geo.box_of
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    empty: list[int] = []
    for cell, d in enumerate(cells):
        if d:
            bit = 1 << (d - 1)
            rows[row_of[cell]] |= bit
            cols[col_of[cell]] |= bit
            boxes[box_of[cell]] |= bit
        else:
            empty.append(cell)
    seen: dict[int, int] = {}
    naked: list[int] = []
    need = n - 1
    for cell in empty:
        mask = rows[row_of[cell]] | cols[col_of[cell]] | boxes[box_of[cell]]
        seen[cell] = mask
        if mask.bit_count() >= need:
            naked.append(cell)
    return seen, naked


def _place(
    cell: int,
    digit: int,
    cells: list[int],
    seen: dict[int, int],
    peers: tuple[tuple[int, ...], ...],
    need: int,
    naked: list[int],
) -> None:
    """Write ``digit`` and show it to the empty peers, queueing those that become naked singles."""
    cells[cell] = digit
    bit = 1 << (digit - 1)
    for p in peers[cell]:
        if not cells[p]:
            mask = seen[p]
            if not mask & bit:
                mask |= bit
                seen[p] = mask
                if mask.bit_count() >= need:
                    naked.append(p)


def _fill_naked(
    cells: list[int],
    seen: dict[int, int],
    naked: list[int],
    peers: tuple[tuple[int, ...], ...],
    need: int,
    full: int,
    *,
    expect: list[int] | None = None,
    stop_at: int = -1,
    on_place: Callable[[int], None] | None = None,
) -> int:
    """Place naked singles (Full Houses included) until none is left; the one propagation of this module.

    Returns ``_STALLED`` when the queue runs dry, ``_REACHED`` as soon as ``stop_at`` is filled, and
    ``_CONTRADICTION`` for a cell with no candidate left or a digit that disagrees with ``expect``.
    """
    while naked:
        cell = naked.pop()
        if cells[cell]:
            continue
        left = full & ~seen[cell]
        if not left:
            return _CONTRADICTION  # the peers show every digit: no candidate left
        digit = left.bit_length()
        if expect is not None and expect[cell] != digit:
            return _CONTRADICTION
        _place(cell, digit, cells, seen, peers, need, naked)
        if on_place is not None:
            on_place(cell)
        if cell == stop_at:
            return _REACHED
    return _STALLED


def _hidden_single(
    cells: list[int], seen: dict[int, int], units: tuple[tuple[int, ...], ...], full: int
) -> tuple[int, int] | None:
    """The first Hidden Single as ``(cell, digit)``; ``(-1, 0)`` for a digit with no place; None if none."""
    for unit in units:
        once = twice = placed = 0
        for c in unit:
            d = cells[c]
            if d:
                placed |= 1 << (d - 1)
            else:
                m = full & ~seen[c]
                twice |= once & m
                once |= m
        missing = full & ~placed
        if missing & ~once:
            return -1, 0
        hidden = missing & once & ~twice
        if hidden:
            bit = hidden & -hidden
            for c in unit:
                if not cells[c] and not seen[c] & bit:
                    return c, bit.bit_length()
    return None


def naked_single_solvable(puzzle: list[int], solution: list[int] | None = None) -> bool:
    """True when Full House / Naked Single steps alone fill every empty cell of ``puzzle``.

    When ``solution`` is given, every forced digit must also agree with it.
    """
    n = round(len(puzzle) ** 0.5)
    geo = geometry(n)
    cells = list(puzzle)
    seen, naked = _seen_masks(cells, geo)
    status = _fill_naked(cells, seen, naked, geo.peers, n - 1, geo.full, expect=solution)
    return status == _STALLED and 0 not in cells


def naked_single_fills(puzzle: list[int], cell: int) -> bool:
    """True when Naked Singles from the givens of ``puzzle`` eventually fill ``cell``.

    The generator's hot path: when a cell is emptied from a puzzle that singles could finish, the result
    stays finishable exactly when singles refill that cell (after which every former given is back), so the
    propagation can stop there instead of running to the end.
    """
    n = round(len(puzzle) ** 0.5)
    geo = geometry(n)
    cells = list(puzzle)
    seen, naked = _seen_masks(cells, geo)
    return _fill_naked(cells, seen, naked, geo.peers, n - 1, geo.full, stop_at=cell) == _REACHED


def classify_singles(puzzle: list[int]) -> SinglesGrade:
    """Grade a puzzle by the singles it needs: ``easy`` / ``hidden`` / ``beyond`` plus step counts.

    The counts are those of the pass that decided the tier: for ``easy`` and ``hidden`` the whole solve; for
    ``beyond`` the steps made before singles stalled (``remaining`` cells were left).

    Raises:
        InputError: a board that is not 4x4, 6x6 or 9x9, a cell outside 0..n, or givens that break a rule.
    """
    n = round(len(puzzle) ** 0.5)
    if n * n != len(puzzle):
        raise InputError(f"sudoku: a puzzle of {len(puzzle)} cells is not a square board")
    geo = geometry(n)
    if any(not (isinstance(d, int) and 0 <= d <= n) for d in puzzle):
        raise InputError(f"sudoku: cells must be digits 0-{n}")
    why = conflicts(puzzle, n)
    if why:
        raise InputError(f"sudoku: the givens break a rule ({why})")
    peers, need, full = geo.peers, n - 1, geo.full
    units = geo.boxes + geo.rows + geo.cols
    units_of = tuple((geo.box_of[c], n + geo.row_of[c], 2 * n + geo.col_of[c]) for c in range(n * n))
    cells = list(puzzle)
    empty_in = [sum(1 for c in unit if not cells[c]) for unit in units]
    counts = {"full_house": 0, "naked_single": 0, "hidden_single": 0}

    def count_naked(cell: int) -> None:
        # A Full House is a placement into the last empty cell of one of its units.
        house = False
        for u in units_of[cell]:
            empty_in[u] -= 1
            house = house or empty_in[u] == 0
        counts["full_house" if house else "naked_single"] += 1

    seen, naked = _seen_masks(cells, geo)
    contradiction = False  # only when the givens admit no solution
    while True:
        status = _fill_naked(cells, seen, naked, peers, need, full, on_place=count_naked)
        if status == _CONTRADICTION or 0 not in cells:
            contradiction = status == _CONTRADICTION
            break
        # Naked singles have stalled: one Hidden Single, then back to the naked ones.
        found = _hidden_single(cells, seen, units, full)
        if found is None or found[0] < 0:
            contradiction = found is not None
            break
        cell, digit = found
        _place(cell, digit, cells, seen, peers, need, naked)
        for u in units_of[cell]:
            empty_in[u] -= 1
        counts["hidden_single"] += 1
    remaining = cells.count(0)
    if contradiction or remaining:
        tier: Tier = "beyond"
    elif counts["hidden_single"]:
        tier = "hidden"
    else:
        tier = "easy"
    return SinglesGrade(tier, counts["full_house"], counts["naked_single"], counts["hidden_single"], remaining)
