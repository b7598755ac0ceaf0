"""Wings: XY-Wing, XYZ-Wing, W-Wing.

* XY-Wing: a pivot {x,y} seeing two pincers {x,z} and {y,z}; one pincer is z, so z leaves every cell that
  sees both pincers.
* XYZ-Wing: a pivot {x,y,z} seeing pincers {x,z} and {y,z}; z leaves every cell that sees all three.
* W-Wing: two cells {x,y} that do not see each other, joined by a conjugate pair of x (one end sees each
  cell): one of them is y, so y leaves every cell that sees both.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from milepost.envs.sudoku.grader.candidates import (
    DIGITS,
    PEER_MASK,
    UNIT_MASK,
    Board,
    Step,
    cells_of,
    elimination_step,
)
from milepost.envs.sudoku.grader.scores import Technique


def _bivalue(board: Board) -> list[int]:
    cands = board.cands
    return [c for c in cells_of(board.empty) if cands[c].bit_count() == 2]


def xy_wing(board: Board) -> Iterator[Step]:
    """Pivot {x,y}, pincers {x,z} and {y,z}; z leaves what sees both pincers.

    HoDoKu's order: triples of cells with two candidates (ascending), each tried with its first, second and
    third cell as the pivot.
    """
    cands = board.cands
    bivalue = _bivalue(board)
    for i, first in enumerate(bivalue):
        for j in range(i + 1, len(bivalue)):
            second = bivalue[j]
            pair = cands[first] | cands[second]
            if pair.bit_count() != 3 or cands[first] == cands[second]:
                continue
            for third in bivalue[j + 1 :]:
                if (pair | cands[third]).bit_count() != 3 or cands[third] in (cands[first], cands[second]):
                    continue
                for pivot, a, b in ((first, second, third), (second, first, third), (third, second, first)):
                    if not (PEER_MASK[pivot] >> a & 1 and PEER_MASK[pivot] >> b & 1):
                        continue
                    z_mask = cands[a] & cands[b]
                    if z_mask.bit_count() != 1:
                        continue
                    z = z_mask.bit_length()
                    gone = board.dmask[z] & PEER_MASK[a] & PEER_MASK[b] & ~(1 << pivot)
                    if gone:
                        yield elimination_step(
                            Technique.XY_WING, DIGITS[pair], ((c, z) for c in cells_of(gone)), (pivot, a, b)
                        )


def xyz_wing(board: Board) -> Iterator[Step]:
    """Pivot {x,y,z}, pincers {x,z} and {y,z}; z leaves what sees all three."""
    cands = board.cands
    bivalue = _bivalue(board)
    for pivot in cells_of(board.empty):
        xyz = cands[pivot]
        if xyz.bit_count() != 3:
            continue
        wings = [c for c in bivalue if PEER_MASK[pivot] >> c & 1 and cands[c] & ~xyz == 0]
        for a, b in combinations(wings, 2):
            if cands[a] == cands[b]:
                continue
            z_mask = cands[a] & cands[b]
            z = z_mask.bit_length()
            gone = board.dmask[z] & PEER_MASK[a] & PEER_MASK[b] & PEER_MASK[pivot]
            if gone:
                yield elimination_step(Technique.XYZ_WING, DIGITS[xyz], ((c, z) for c in cells_of(gone)), (pivot, a, b))


def w_wing(board: Board) -> Iterator[Step]:
    """Two {x,y} cells bridged by a conjugate pair of x; y leaves what sees both cells.

    HoDoKu's rules and order: pairs of cells (ascending), the smaller digit eliminated first, the bridge the
    first unit (rows, columns, boxes) whose two places for the other digit are neither wing cell, one end
    seeing each wing cell and neither end seeing both.
    """
    cands, dmask = board.cands, board.dmask
    bivalue = _bivalue(board)
    for i, w1 in enumerate(bivalue):
        both_digits = DIGITS[cands[w1]]
        for w2 in bivalue[i + 1 :]:
            if cands[w2] != cands[w1]:
                continue
            both = PEER_MASK[w1] & PEER_MASK[w2]
            for drop, link in (both_digits, both_digits[::-1]):
                gone = dmask[drop] & both
                if gone and _bridged(dmask[link], w1, w2):
                    yield elimination_step(Technique.W_WING, both_digits, ((c, drop) for c in cells_of(gone)), (w1, w2))


def _bridged(link_cells: int, w1: int, w2: int) -> bool:
    """Whether a conjugate pair (of the digit whose cells are ``link_cells``) joins ``w1`` to ``w2``."""
    wings = (1 << w1) | (1 << w2)
    for u in range(27):
        spots = link_cells & UNIT_MASK[u]
        if spots.bit_count() != 2 or spots & wings:
            continue
        a, b = cells_of(spots)
        sees = [(PEER_MASK[c] >> w1 & 1, PEER_MASK[c] >> w2 & 1) for c in (a, b)]
        if (1, 1) in sees:
            continue  # an end that sees both wing cells: HoDoKu does not count it
        if (sees[0][0] and sees[1][1]) or (sees[0][1] and sees[1][0]):
            return True
    return False
