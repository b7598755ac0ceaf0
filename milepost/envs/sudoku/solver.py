"""Exact Sudoku solver: candidate bitmasks, naked + hidden single propagation, MRV branching.

Pure Python and built for speed: a search node is one list of ``n*n`` candidate masks (bit ``d - 1`` for
digit d). Placing a digit removes its bit from the cell's peers; a peer left with one candidate is queued
(naked single); when the queue runs dry every unit is scanned once for a digit with a single possible cell
(hidden single). Only when both rules stall does the search branch, on the cell with the fewest candidates,
copying the mask list per branch (cheaper in Python than journalling undo records).

``solve(puzzle, limit=2)`` stops after ``limit`` solutions, so ``count_solutions`` is a uniqueness check that
never enumerates more than it needs. Sizes 4, 6 and 9 share the code through ``grid.geometry``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from milepost.envs.sudoku.grid import geometry
from milepost.errors import InputError


@dataclass(frozen=True)
class _Tables:
    """Per-size lookup tables, precomputed once (tuples index faster than attribute chains)."""

    n: int
    cells: int
    full: int
    peers: tuple[tuple[int, ...], ...]
    units: tuple[tuple[int, ...], ...]
    digit_of: dict[int, int]  # single-bit mask -> digit


@cache
def _tables(n: int) -> _Tables:
    geo = geometry(n)
    digit_of = {1 << (d - 1): d for d in range(1, n + 1)}
    # Boxes first: on 9x9 a box rarely stalls for long, so contradictions surface earlier there.
    return _Tables(n, geo.cells, geo.full, geo.peers, geo.boxes + geo.rows + geo.cols, digit_of)


def _propagate(cand: list[int], queue: list[int], placed: list[bool], t: _Tables) -> int:
    """Run singles to a fixpoint in place. Returns the number of newly placed cells, or -1 on a contradiction.

    ``queue`` holds cells whose mask is a single bit but whose digit has not yet been removed from peers.
    """
    peers = t.peers
    units = t.units
    full = t.full
    count = 0
    while True:
        while queue:
            cell = queue.pop()
            if placed[cell]:
                continue
            placed[cell] = True
            count += 1
            bit = cand[cell]
            keep = ~bit
            for p in peers[cell]:
                m = cand[p]
                if m & bit:
                    m &= keep
                    if not m:
                        return -1
                    cand[p] = m
                    if not m & (m - 1):
                        queue.append(p)
        # Hidden singles: `once` collects digits seen in the unit, `twice` those seen at least twice.
        for unit in units:
            once = twice = 0
            for c in unit:
                m = cand[c]
                twice |= once & m
                once |= m
            if once != full:
                return -1  # some digit has no place left in this unit
            hidden = once & ~twice
            if not hidden:
                continue
            for c in unit:
                m = cand[c]
                if m & (m - 1) and m & hidden:
                    h = m & hidden
                    if h & (h - 1):
                        return -1  # two digits both need this one cell
                    cand[c] = h
                    queue.append(c)
        if not queue:
            return count


def _search(
    cand: list[int],
    placed: list[bool],
    left: int,
    queue: list[int],
    t: _Tables,
    out: list[list[int]],
    limit: int,
) -> None:
    done = _propagate(cand, queue, placed, t)
    if done < 0:
        return
    left -= done
    if left == 0:
        digit_of = t.digit_of
        out.append([digit_of[m] for m in cand])
        return
    # MRV: the unplaced cell with the fewest candidates (a placed cell has exactly one bit; after the
    # fixpoint every unplaced cell has at least two, so bit_count >= 2 identifies them).
    best = -1
    best_count = t.n + 1
    for c in range(t.cells):
        k = cand[c].bit_count()
        if 1 < k < best_count:
            best, best_count = c, k
            if k == 2:
                break
    m = cand[best]
    while m:
        bit = m & -m
        m ^= bit
        child = cand[:]
        child[best] = bit
        _search(child, placed[:], left, [best], t, out, limit)
        if len(out) >= limit:
            return


def _check_puzzle(puzzle: list[int]) -> _Tables:
    size = len(puzzle)
    n = int(round(size**0.5))
    if n * n != size:
        raise InputError(f"sudoku: a puzzle of {size} cells is not a square board")
    t = _tables(n)
    for i, d in enumerate(puzzle):
        if not (isinstance(d, int) and 0 <= d <= n):
            raise InputError(f"sudoku: cell {i} holds {d!r}, not a digit 0-{n}")
    return t


def solve(puzzle: list[int], limit: int = 2) -> list[list[int]]:
    """Up to ``limit`` solutions of ``puzzle`` (row-major ints, 0 = empty), in search order.

    Args:
        puzzle: ``n*n`` ints for n in 4, 6, 9.
        limit: stop after this many solutions (2 decides uniqueness).

    Returns:
        The solutions found, each a list of ``n*n`` digits; empty when the puzzle has none (including
        givens that break a rule).

    Raises:
        InputError: a board that is not 4x4, 6x6 or 9x9, or a cell outside 0..n.
    """
    t = _check_puzzle(puzzle)
    if limit < 1:
        return []
    full = t.full
    cand = [(1 << (d - 1)) if d else full for d in puzzle]
    queue = [i for i, d in enumerate(puzzle) if d]
    out: list[list[int]] = []
    _search(cand, [False] * t.cells, t.cells, queue, t, out, limit)
    return out


def count_solutions(puzzle: list[int], limit: int = 2) -> int:
    """The number of solutions of ``puzzle``, counted up to ``limit`` (so 2 means "two or more")."""
    return len(solve(puzzle, limit))


def first_solution(puzzle: list[int]) -> list[int] | None:
    """One solution of ``puzzle``, or None when it has none."""
    found = solve(puzzle, limit=1)
    return found[0] if found else None
