"""Remote Pair: a chain of cells that all hold the same two candidates {a,b}, each seeing the next.

Along the chain the cells alternate a, b, a, b..., so two cells an odd number of steps apart hold a and b
between them, and a and b leave every cell that sees both. HoDoKu's rules are kept: the chain is a simple
path of at least four cells (at most ten: its chain-length limit of 20 links), it has an even number of
cells, it counts only when a cell that sees both its ends holds a or b, and for a chain of more than four
cells every pair of its cells three, five, ... steps apart counts.
"""

from __future__ import annotations

from collections.abc import Iterator

from milepost.envs.sudoku.grader.candidates import DIGITS, PEER_MASK, Board, Step, cells_of, elimination_step
from milepost.envs.sudoku.grader.scores import Technique

MAX_CELLS = 10


def remote_pair(board: Board) -> Iterator[Step]:
    """Remote Pairs, from every start cell (ascending) and every simple path through same-pair cells."""
    cands = board.cands
    by_pair: dict[int, list[int]] = {}
    for cell in cells_of(board.empty):
        if cands[cell].bit_count() == 2:
            by_pair.setdefault(cands[cell], []).append(cell)
    for mask, cells in by_pair.items():
        if len(cells) < 4:
            continue
        a, b = DIGITS[mask]
        links = {c: [o for o in cells if PEER_MASK[c] >> o & 1] for c in cells}
        for start in cells:
            yield from _extend(board, a, b, links, [start])


def _extend(board: Board, a: int, b: int, links: dict[int, list[int]], path: list[int]) -> Iterator[Step]:
    for nxt in links[path[-1]]:
        if nxt in path:
            continue
        path.append(nxt)
        # HoDoKu checks a chain only when one of its digits could go from a cell that sees both ends.
        ends = PEER_MASK[path[0]] & PEER_MASK[nxt]
        if len(path) >= 4 and len(path) % 2 == 0 and ends & (board.dmask[a] | board.dmask[b]):
            step = _eliminations(board, a, b, path)
            if step is not None:
                yield step
        if len(path) < MAX_CELLS:
            yield from _extend(board, a, b, links, path)
        path.pop()


def _eliminations(board: Board, a: int, b: int, path: list[int]) -> Step | None:
    seen = 0
    for i in range(len(path)):
        for j in range(i + 3, len(path), 2):
            seen |= PEER_MASK[path[i]] & PEER_MASK[path[j]]
    gone = [(c, d) for d in (a, b) for c in cells_of(seen & board.dmask[d])]
    if not gone:
        return None
    return elimination_step(Technique.REMOTE_PAIR, (a, b), gone, tuple(path))
