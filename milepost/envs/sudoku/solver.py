"""Exact Sudoku solver: candidate bitmasks, naked + hidden single propagation, MRV branching.

Pure Python and built for speed. A search node holds

* ``cand``: one mask per cell; digit d is the bit ``1 << 4*(d-1)`` (4-bit fields, see ``tally``). A placed
  cell stores its bit shifted up by 3, so it never matches a candidate test again.
* ``boards``: per digit, an ``n*n``-bit integer of the unplaced cells that can still hold it, so that placing
  a digit finds the peers to update with one AND instead of walking all 20 of them.
* ``tally``: one big integer with a 4-bit field per (unit, digit) counting the cells of the unit that hold
  or can still hold the digit, kept in step by one subtraction per eliminated candidate.
* ``done``: the low bits of the (unit, digit) fields whose digit is already placed in the unit.

Placing a digit removes it from its peers; a peer left with one candidate is queued (naked single). When
the queue runs dry, a handful of whole-integer operations on ``tally`` find every hidden single (a field of
1 whose digit is not placed) and every contradiction (a field of 0) at once. Only when both rules stall
does the search branch, on the cell with the fewest candidates, copying the node per branch (cheaper in
Python than journalling undo records; the integers are immutable, so they are shared for free).

``solve(puzzle, limit=2)`` stops after ``limit`` solutions, so ``count_solutions`` is a uniqueness check that
never enumerates more than it needs. Sizes 4, 6 and 9 share the code through ``grid.geometry``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from milepost.envs.sudoku.grid import geometry
from milepost.errors import InputError

_PLACED_SHIFT = 3  # a placed digit's bit moves to the top of its 4-bit field


@dataclass(frozen=True)
class _Tables:
    """Per-size lookup tables, precomputed once (locals and tuples index faster than attribute chains)."""

    n: int
    cells: int
    full: int  # every candidate bit of one cell
    bits: tuple[int, ...]  # bits[d] = candidate bit of digit d (bits[0] = 0)
    index: dict[int, int]  # candidate bit -> digit index d - 1 (into boards)
    peer_mask: tuple[int, ...]  # per cell, its peers as an n*n-bit board
    not_peer_or_self: tuple[int, ...]  # per cell, ~(peers | the cell) as a board
    cell_bit: tuple[int, ...]
    unit_mask: tuple[int, ...]  # per unit, its cells as a board
    # fields[bit][cell]: the tally fields (low bits) of the cell's three units for that digit.
    fields: dict[int, tuple[int, ...]]
    tally_low: int  # the low bit of every tally field
    cell_tally: tuple[int, ...]  # per cell, its tally contribution with every candidate open
    tally_empty: int  # the tally of the empty board
    digit_of: dict[int, int]  # placed mask -> digit
    mrv_weight: tuple[int, ...]  # candidate count -> search preference (placed cells are never chosen)


@cache
def _tables(n: int) -> _Tables:
    geo = geometry(n)
    bits = (0, *(1 << 4 * (d - 1) for d in range(1, n + 1)))
    units = geo.boxes + geo.rows + geo.cols
    units_of_cell: list[list[int]] = [[] for _ in range(geo.cells)]
    for u, unit in enumerate(units):
        for c in unit:
            units_of_cell[c].append(u)
    fields = {
        bits[d]: tuple(sum(1 << 4 * (u * n + d - 1) for u in units_of_cell[c]) for c in range(geo.cells))
        for d in range(1, n + 1)
    }
    peer_mask = tuple(sum(1 << p for p in geo.peers[c]) for c in range(geo.cells))
    cell_tally = tuple(sum(fields[bits[d]][c] for d in range(1, n + 1)) for c in range(geo.cells))
    return _Tables(
        n=n,
        cells=geo.cells,
        full=sum(bits),
        bits=bits,
        index={bits[d]: d - 1 for d in range(1, n + 1)},
        peer_mask=peer_mask,
        not_peer_or_self=tuple(~(peer_mask[c] | 1 << c) for c in range(geo.cells)),
        cell_bit=tuple(1 << c for c in range(geo.cells)),
        unit_mask=tuple(sum(1 << c for c in unit) for unit in units),
        fields=fields,
        tally_low=sum(1 << 4 * f for f in range(len(units) * n)),
        cell_tally=cell_tally,
        tally_empty=sum(cell_tally),
        digit_of={bits[d] << _PLACED_SHIFT: d for d in range(1, n + 1)},
        mrv_weight=(n + 2, n + 2, *range(2, n + 1)),
    )


def _drop(mask: int, cell: int, boards: list[int], tally: int, t: _Tables) -> int:
    """Remove candidates ``mask`` of ``cell`` from ``boards`` (in place) and ``tally``; return the tally."""
    clear = ~t.cell_bit[cell]
    while mask:
        bit = mask & -mask
        mask ^= bit
        tally -= t.fields[bit][cell]
        k = t.index[bit]
        boards[k] &= clear
    return tally


def _propagate(
    cand: list[int], boards: list[int], queue: list[int], tally: int, done: int, t: _Tables
) -> tuple[int, int, int]:
    """Run naked and hidden singles to a fixpoint, updating ``cand`` and ``boards`` in place.

    ``queue`` holds unplaced cells whose mask is a single candidate bit. Returns ``(placed, tally, done)``
    with ``placed`` the number of cells placed, or -1 on a contradiction.
    """
    fields_of = t.fields
    index = t.index
    peer_mask = t.peer_mask
    not_peer_or_self = t.not_peer_or_self
    low = t.tally_low
    placed = 0
    while True:
        while queue:
            cell = queue.pop()
            bit = cand[cell]
            if bit not in index:
                continue  # already placed: a hidden single can be queued by two units
            cand[cell] = bit << _PLACED_SHIFT
            placed += 1
            fields = fields_of[bit]
            done |= fields[cell]
            k = index[bit]
            board = boards[k]
            hits = board & peer_mask[cell]
            boards[k] = board & not_peer_or_self[cell]
            keep = ~bit
            while hits:
                flag = hits & -hits
                hits ^= flag
                p = flag.bit_length() - 1
                m = cand[p] & keep
                if not m:
                    return -1, tally, done
                cand[p] = m
                tally -= fields[p]
                if not m & (m - 1):
                    queue.append(p)
        high = ((tally >> 1) | (tally >> 2) | (tally >> 3)) & low
        ones = tally & low
        if ones | high != low:
            return -1, tally, done  # a digit with no place left in some unit
        hidden = ones & ~high & ~done
        if not hidden:
            return placed, tally, done
        n = t.n
        while hidden:
            flag = hidden & -hidden
            hidden ^= flag
            unit, k = divmod((flag.bit_length() - 1) >> 2, n)
            where = boards[k] & t.unit_mask[unit]
            if not where:
                return -1, tally, done  # its only cell was just given another digit
            c = where.bit_length() - 1
            bit = t.bits[k + 1]
            m = cand[c]
            if m != bit:
                tally = _drop(m ^ bit, c, boards, tally, t)
                cand[c] = bit
                queue.append(c)


def _search(
    cand: list[int],
    boards: list[int],
    left: int,
    queue: list[int],
    tally: int,
    done: int,
    t: _Tables,
    out: list[list[int]],
    limit: int,
) -> None:
    placed, tally, done = _propagate(cand, boards, queue, tally, done, t)
    if placed < 0:
        return
    left -= placed
    if left == 0:
        digit_of = t.digit_of
        out.append([digit_of[m] for m in cand])
        return
    # MRV: after the fixpoint placed cells show one bit and unplaced ones at least two; the weight table
    # maps counts of 0-1 past every real count so that min() skips them, all at C speed. Ties go to the
    # cell with the most unplaced peers, whose digit constrains the most (about a third fewer nodes).
    weights = list(map(t.mrv_weight.__getitem__, map(int.bit_count, cand)))
    fewest = min(weights)
    unplaced = 0
    for board in boards:
        unplaced |= board
    peer_mask = t.peer_mask
    best = weights.index(fewest)
    degree = (unplaced & peer_mask[best]).bit_count()
    for i in range(best + 1, t.cells):
        if weights[i] == fewest:
            d = (unplaced & peer_mask[i]).bit_count()
            if d > degree:
                best, degree = i, d
    m = cand[best]
    rest = m
    while rest:
        bit = rest & -rest
        rest ^= bit
        child = cand[:]
        child[best] = bit
        child_boards = boards[:]
        child_tally = _drop(m ^ bit, best, child_boards, tally, t)
        _search(child, child_boards, left, [best], child_tally, done, t, out, limit)
        if len(out) >= limit:
            return


def _tables_for(puzzle: Sequence[int]) -> _Tables:
    size = len(puzzle)
    n = round(size**0.5)
    if n * n != size:
        raise InputError(f"sudoku: a puzzle of {size} cells is not a square board")
    t = _tables(n)
    for i, d in enumerate(puzzle):
        if not (isinstance(d, int) and 0 <= d <= n):
            raise InputError(f"sudoku: cell {i} holds {d!r}, not a digit 0-{n}")
    return t


def solve(puzzle: Sequence[int], limit: int = 2) -> list[list[int]]:
    """Up to ``limit`` solutions of ``puzzle`` (row-major ints, 0 = empty), in search order.

    Args:
        puzzle: ``n*n`` ints for n in 4, 6, 9.
        limit: stop after this many solutions (2 decides uniqueness).

    Returns:
        The solutions found, each a list of ``n*n`` digits; empty when the puzzle has none (including givens
        that break a rule).

    Raises:
        InputError: a board that is not 4x4, 6x6 or 9x9, or a cell outside 0..n.
    """
    t = _tables_for(puzzle)
    if limit < 1:
        return []
    bits = t.bits
    cand = [bits[d] if d else t.full for d in puzzle]
    queue = [c for c, d in enumerate(puzzle) if d]
    # A given is a cell with one candidate: clear it from the other digits' boards and tally fields.
    given = [0] * (t.n + 1)
    tally = t.tally_empty
    for c in queue:
        d = puzzle[c]
        given[d] |= 1 << c
        tally -= t.cell_tally[c] - t.fields[bits[d]][c]
    all_given = sum(given)
    all_cells = (1 << t.cells) - 1
    boards = [all_cells & ~(all_given ^ given[d]) for d in range(1, t.n + 1)]
    out: list[list[int]] = []
    _search(cand, boards, t.cells, queue, tally, 0, t, out, limit)
    return out


def count_solutions(puzzle: Sequence[int], limit: int = 2) -> int:
    """The number of solutions of ``puzzle``, counted up to ``limit`` (so 2 means "two or more")."""
    return len(solve(puzzle, limit))


def first_solution(puzzle: Sequence[int]) -> list[int] | None:
    """One solution of ``puzzle``, or None when it has none."""
    found = solve(puzzle, limit=1)
    return found[0] if found else None
