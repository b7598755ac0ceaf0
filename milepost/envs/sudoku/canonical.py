"""Canonical form of a Sudoku puzzle: the minimal string over the board's symmetries ("minlex").

Two puzzles count as the same when one becomes the other by relabelling digits, permuting rows inside a
band, permuting bands, permuting columns inside a stack, permuting stacks, and (only where boxes are square:
4x4 and 9x9) transposing. ``canonical_form`` returns the lexicographically smallest row-major string, with
``0`` for empty cells and digits relabelled in order of first appearance, over that whole group, so equal
forms mean equivalent puzzles and vice versa.

The search is branch and bound, one output row at a time, never enumerating the ``2 * 6^8`` transforms of a
9x9 board. A candidate is a partial transform: the orientation, the original rows placed so far, the digit
labels given so far, and what is left of the column freedom as an ordered partition:

* stacks that are still interchangeable (all their columns empty in every row placed so far) share a block;
* inside a placed stack, columns that are still interchangeable (all empty so far) share a block.

For each candidate and each row that may come next, the smallest arrangement of that row is computed by
sorting within the blocks, with a digit that has no label yet ranked above every label (its label will be
the next free one, whatever it is). All rows are compared and only the arrangements equal to the overall
minimum survive; those are expanded into children, branching only where an order among non-empty columns
or stacks is still open (each such order gives the new digits different labels).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from milepost.envs.sudoku.grid import BOX_SHAPES, geometry
from milepost.errors import InputError

Block = tuple[int, ...]  # columns that are still interchangeable
Stack = tuple[Block, ...]  # a placed stack: its column blocks in order
Arrangement = tuple[tuple[Stack, ...], ...]  # stack blocks in order; a block holds 1+ stacks


@dataclass(frozen=True)
class _Cand:
    grid: tuple[tuple[int, ...], ...]  # rows of the (possibly transposed) puzzle
    rows_left_in_band: tuple[int, ...]  # original rows of the band being placed, not yet used
    bands_left: tuple[int, ...]
    arrangement: Arrangement
    labels: tuple[int, ...]  # labels[digit] = its new label, UNLABELLED (n + 1) while it has none; [0] = 0
    next_label: int
    order: tuple[int, ...] | None  # the column order once no block holds two columns (the fast path)


def _next_rows(cand: _Cand, band_rows: int) -> Iterator[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """Each row that may come next, with the band rows and bands left after it."""
    if cand.rows_left_in_band:
        for r in cand.rows_left_in_band:
            yield r, tuple(x for x in cand.rows_left_in_band if x != r), cand.bands_left
        return
    for band in cand.bands_left:
        others = tuple(b for b in cand.bands_left if b != band)
        rows = range(band * band_rows, (band + 1) * band_rows)
        for r in rows:
            yield r, tuple(x for x in rows if x != r), others


def _arrange(arrangement: Arrangement, k: list[int]) -> list[int]:
    """The smallest arrangement of one row's keys that the column freedom allows."""
    out: list[int] = []
    for sblock in arrangement:
        if len(sblock) == 1:
            for block in sblock[0]:
                if len(block) == 1:
                    out.append(k[block[0]])
                else:
                    out.extend(sorted([k[c] for c in block]))
        else:
            # Interchangeable stacks have a single all-empty-so-far block each: order them by content.
            for keys in sorted(sorted([k[c] for c in stack[0]]) for stack in sblock):
                out.extend(keys)
    return out


def _refine_block(block: Block, k: list[int], unlabelled: int) -> list[tuple[Block, ...]]:
    """Every split of one column block that gives the minimal keys: empties stay interchangeable, labelled
    columns go by label, and the new digits' columns may come in any order (each order is a branch)."""
    empty = tuple(c for c in block if k[c] == 0)
    known = sorted((k[c], c) for c in block if 0 < k[c] < unlabelled)
    new = [c for c in block if k[c] == unlabelled]
    head: tuple[Block, ...] = ((empty,) if empty else ()) + tuple((c,) for _, c in known)
    if len(new) <= 1:
        return [head + tuple((c,) for c in new)]
    return [head + tuple((c,) for c in order) for order in itertools.permutations(new)]


def _refine_stack(stack: Stack, k: list[int], unlabelled: int) -> list[Stack]:
    choices = [_refine_block(block, k, unlabelled) for block in stack]
    return [tuple(itertools.chain.from_iterable(parts)) for parts in itertools.product(*choices)]


def _refine(arrangement: Arrangement, k: list[int], unlabelled: int) -> list[Arrangement]:
    """Every refinement of ``arrangement`` whose arranged row equals ``_arrange(arrangement, k)``."""
    per_sblock: list[list[tuple[tuple[Stack, ...], ...]]] = []
    for sblock in arrangement:
        if len(sblock) == 1:
            per_sblock.append([((stack,),) for stack in _refine_stack(sblock[0], k, unlabelled)])
            continue
        groups: dict[tuple[int, ...], list[Stack]] = {}
        for stack in sblock:
            groups.setdefault(tuple(sorted(k[c] for c in stack[0])), []).append(stack)
        options: list[list[tuple[tuple[Stack, ...], ...]]] = []
        for keys in sorted(groups):
            stacks = groups[keys]
            if not any(keys):
                options.append([(tuple(stacks),)])  # still empty in every placed row: still interchangeable
                continue
            group_options: list[tuple[tuple[Stack, ...], ...]] = []
            for order in itertools.permutations(stacks) if len(stacks) > 1 else [tuple(stacks)]:
                refined = [_refine_stack(stack, k, unlabelled) for stack in order]
                group_options.extend(tuple((s,) for s in combo) for combo in itertools.product(*refined))
            options.append(group_options)
        per_sblock.append([tuple(itertools.chain.from_iterable(p)) for p in itertools.product(*options)])
    return [tuple(itertools.chain.from_iterable(p)) for p in itertools.product(*per_sblock)]


def _child(parent: _Cand, r: int, band_left: tuple[int, ...], bands_left: tuple[int, ...], arr: Arrangement) -> _Cand:
    """The candidate after placing row ``r`` with the refined arrangement ``arr``: new digits are labelled
    in column order."""
    labels = list(parent.labels)
    nxt = parent.next_label
    unlabelled = len(labels)
    row = parent.grid[r]
    order: list[int] | None = []
    for sblock in arr:
        for stack in sblock:
            for block in stack:
                if len(block) > 1:
                    order = None
                elif order is not None:
                    order.append(block[0])
                for c in block:
                    v = row[c]
                    if labels[v] == unlabelled:
                        labels[v] = nxt
                        nxt += 1
    return _Cand(
        parent.grid,
        band_left,
        bands_left,
        arr,
        tuple(labels),
        nxt,
        tuple(order) if order is not None else None,
    )


def canonical_form(puzzle: Sequence[int]) -> str:
    """The minlex string of ``puzzle`` under relabelling, row / band / column / stack permutations and
    (4x4, 9x9) transposition.

    Args:
        puzzle: ``n*n`` ints, row-major, 0 = empty, for n in 4, 6, 9.

    Returns:
        ``n*n`` characters, ``0`` for empty; equal for two puzzles exactly when they are equivalent.

    Raises:
        InputError: a board that is not 4x4, 6x6 or 9x9 or a cell outside 0..n.
    """
    size = len(puzzle)
    n = round(size**0.5)
    if n * n != size or n not in BOX_SHAPES:
        raise InputError(f"sudoku: a puzzle of {size} cells is not a 4x4, 6x6 or 9x9 board")
    geo = geometry(n)
    if any(not (isinstance(d, int) and 0 <= d <= n) for d in puzzle):
        raise InputError(f"sudoku: cells must be digits 0-{n}")
    br, bc = geo.box_rows, geo.box_cols
    rows = tuple(tuple(puzzle[r * n : (r + 1) * n]) for r in range(n))
    grids = [rows]
    if br == bc:
        grids.append(tuple(zip(*rows)))
    # Before any row is placed every stack is interchangeable, and so is every column inside a stack.
    stacks: tuple[Stack, ...] = tuple((tuple(range(s * bc, (s + 1) * bc)),) for s in range(n // bc))
    start_arrangement: Arrangement = (stacks,)
    unlabelled = n + 1
    start_labels = (0,) + (unlabelled,) * n
    cands = [_Cand(g, (), tuple(range(n // br)), start_arrangement, start_labels, 1, None) for g in grids]
    out: list[int] = []
    for _ in range(n):
        best: list[int] | None = None
        winners: list[tuple[_Cand, int, list[int], tuple[int, ...], tuple[int, ...]]] = []
        for cand in cands:
            lab = cand.labels
            for r, band_left, bands_left in _next_rows(cand, br):
                k = [lab[v] for v in cand.grid[r]]
                row = [k[c] for c in cand.order] if cand.order is not None else _arrange(cand.arrangement, k)
                if best is None or row < best:
                    best = row
                    winners = [(cand, r, k, band_left, bands_left)]
                elif row == best:
                    winners.append((cand, r, k, band_left, bands_left))
        assert best is not None
        nxt = cands[0].next_label
        for key in best:
            if key == unlabelled:
                key, nxt = nxt, nxt + 1
            out.append(key)
        cands = [
            _child(cand, r, band_left, bands_left, child)
            for cand, r, k, band_left, bands_left in winners
            for child in ([cand.arrangement] if cand.order is not None else _refine(cand.arrangement, k, unlabelled))
        ]
    return "".join(map(str, out))
