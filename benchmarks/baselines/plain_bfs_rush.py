"""A plain breadth-first Rush Hour solver, the benchmark's baseline.

This is how the problem is usually first written: board strings as states, one dictionary of visited boards
(board -> moves from the start), a deque, and slides of any length as moves (Fogleman's metric). It explores
the puzzle's whole cluster, as the milepost solver does, and returns the start's ``min_moves`` (distance to
the nearest solved board) and the cluster size, so both columns of a ``rush_18k`` line can be checked.
"""

from __future__ import annotations

from collections import deque

SIDE = 6


def _vehicles(board: str) -> list[tuple[str, int, int]]:
    """(letter, length, stride) of every vehicle: stride 1 for horizontal, 6 for vertical."""
    out = []
    for letter in sorted(set(board) - {"o", "x"}):
        first = board.index(letter)
        length = board.count(letter)
        horizontal = first + 1 < len(board) and board[first + 1] == letter and (first + 1) % SIDE != 0
        out.append((letter, length, 1 if horizontal else SIDE))
    return out


def _neighbours(board: str, vehicles: list[tuple[str, int, int]]) -> list[str]:
    result = []
    for letter, length, stride in vehicles:
        first = board.index(letter)
        last = first + (length - 1) * stride
        # forward (right / down), one cell further per iteration, while the cell ahead is empty
        cells = list(board)
        tail, ahead = first, last + stride
        while ahead < len(board) and (stride == SIDE or ahead // SIDE == first // SIDE) and cells[ahead] == "o":
            cells[ahead], cells[tail] = letter, "o"
            tail, ahead = tail + stride, ahead + stride
            result.append("".join(cells))
        # backward (left / up)
        cells = list(board)
        head, behind = last, first - stride
        while behind >= 0 and (stride == SIDE or behind // SIDE == first // SIDE) and cells[behind] == "o":
            cells[behind], cells[head] = letter, "o"
            head, behind = head - stride, behind - stride
            result.append("".join(cells))
    return result


def _solved(board: str) -> bool:
    return board[16] == "A" and board[17] == "A"


def solve(board: str) -> tuple[int | None, int]:
    """``(min_moves, cluster_size)`` of a Fogleman board; min_moves is None when unsolvable."""
    vehicles = _vehicles(board)
    seen = {board: 0}
    queue = deque([board])
    best: int | None = None
    while queue:
        state = queue.popleft()
        depth = seen[state]
        if best is None and _solved(state):
            best = depth
        for nxt in _neighbours(state, vehicles):
            if nxt not in seen:
                seen[nxt] = depth + 1
                queue.append(nxt)
    return best, len(seen)
