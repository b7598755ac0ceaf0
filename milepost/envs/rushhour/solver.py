"""Exact breadth-first solver over a puzzle's whole cluster (every state reachable from it).

A state packs each vehicle's offset along its axis into 3 bits of one int (``Layout.pack``). Several puzzles
can be solved in one batch: the puzzle's number sits above those bits, so one numpy pass serves many small
clusters (for a small cluster, per-call overhead dominates a numpy BFS).

Enumeration goes breadth-first from the start. For a layer of m states the offsets form an (m, n) array; a
state's occupancy is the OR of its vehicles' cell masks; each vehicle's lane (its row or column) is cut out
of it as 6 bits, and two 64 x 8 tables say whether the cell ahead of and behind the vehicle is free. That
yields
every one-cell move of every vehicle for the whole layer in a few array operations. Moves are reversible,
so the graph is undirected and a layer's neighbours lie only in the layer before, the layer itself and the
next: no global visited set is needed. The moves found on the way are kept as a table (state id by vehicle
and direction -> state id, -1 when blocked); a slide of k cells is k hops along one column of it.

Two metrics are then exact shortest paths over that graph, each a multi-source BFS from the solved states:
``steps`` (one cell per action, the atomic unit, a task's ``goal_distance``) and ``moves`` (a slide of any
length counts one: Fogleman's ``min_moves``, which defines the levels). A move-optimal solution is not
always step-optimal, hence two passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from milepost.envs.rushhour.board import BITS, GOAL_POS, MASK, SIDE, Layout, parse_board
from milepost.envs.rushhour.state import Move, RushHourState

MAX_VEHICLES = 18  # 36 cells / 2: 18 x 3 bits = 54 bits of state
_PID_SHIFT = BITS * MAX_VEHICLES
_STATE_MASK = (1 << _PID_SHIFT) - 1
MAX_BATCH = 1 << (63 - _PID_SHIFT)  # puzzle numbers fit above the state bits of an int64
_CHUNK = 1 << 15  # layer rows per numpy pass, bounds the (m, n) temporaries
_COLUMN_BITS = sum(1 << (SIDE * k) for k in range(SIDE))
# Multiplying the bits of one column (at 0, 6, ..., 30) by this puts bit 6k at 25 + k, with no carries.
_COLUMN_MAGIC = sum(1 << (25 - 5 * k) for k in range(SIDE))
_FULL_LANE = 2 * SIDE  # lane index of padding vehicles: a lane with every cell taken, so they never move


def _step_tables() -> tuple[np.ndarray, np.ndarray]:
    """Flat (64 x 8) bool tables over lane bits L: FORWARD[L, q] cell q is free (q = offset + length, the
    cell ahead); BACKWARD[L, p] cell p - 1 is free (the cell behind). Cells off the board are never free."""
    forward = np.zeros((64, 8), dtype=bool)
    backward = np.zeros((64, 8), dtype=bool)
    for lane in range(64):
        for q in range(8):
            forward[lane, q] = q < SIDE and not lane >> q & 1
            backward[lane, q] = 1 <= q <= SIDE and not lane >> (q - 1) & 1
    return forward.ravel(), backward.ravel()


_FORWARD, _BACKWARD = _step_tables()


class _Batch:
    """Per-puzzle vehicle tables of a batch, padded to the largest vehicle count."""

    def __init__(self, layouts: Sequence[Layout]) -> None:
        if len(layouts) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} puzzles per batch, got {len(layouts)}")
        n = max(lay.n for lay in layouts)
        if n > MAX_VEHICLES:
            raise ValueError(f"at most {MAX_VEHICLES} vehicles per board, got {n}")
        # Tables are (n, puzzles): the passes work on (n, m) arrays, vehicles by states, so that each
        # vehicle's row is contiguous. Padding vehicles have no cells, stride 0 and a full lane.
        p = len(layouts)
        self.base = np.zeros((n, p), dtype=np.int64)  # cell mask at offset 0
        self.stride = np.zeros((n, p), dtype=np.int64)  # cell index step per offset: 1 or 6
        self.lane = np.full((n, p), _FULL_LANE, dtype=np.int64)  # 0-5 rows, 6-11 columns
        self.length = np.zeros((n, p), dtype=np.int64)
        self.walls = np.array([lay.wall_mask for lay in layouts], dtype=np.int64)
        for j, lay in enumerate(layouts):
            for i, v in enumerate(lay.vehicles):
                self.base[i, j] = v.mask(0)
                self.stride[i, j] = 1 if v.horizontal else SIDE
                self.lane[i, j] = v.lane if v.horizontal else SIDE + v.lane
                self.length[i, j] = v.length
        self.single = p == 1  # one puzzle: its columns broadcast, no per-state gathers needed
        unit = 1 << (BITS * np.arange(n, dtype=np.int64))
        self.unit = np.concatenate([unit, -unit])
        self.shifts = (np.arange(n, dtype=np.int64) * BITS)[:, None]
        self.row_shifts = (np.arange(SIDE, dtype=np.int64) * SIDE)[:, None]
        self.col_shifts = np.arange(SIDE, dtype=np.int64)[:, None]

    def free_steps(self, keys: np.ndarray) -> np.ndarray:
        """(2n, m) bool: whether vehicle i of each key can move one cell forward (row i: right or down) or
        backward (row n + i: left or up)."""
        if keys.size > _CHUNK:
            parts = [self.free_steps(keys[i : i + _CHUNK]) for i in range(0, keys.size, _CHUNK)]
            return np.concatenate(parts, axis=1)
        base, stride, lane, length, walls = self.base, self.stride, self.lane, self.length, self.walls
        if not self.single:
            pid = keys >> _PID_SHIFT
            base, stride, lane = self.base[:, pid], self.stride[:, pid], self.lane[:, pid]
            length, walls = self.length[:, pid], self.walls[pid]
        offsets = (keys[None, :] >> self.shifts) & MASK  # (n, m)
        occ = (np.bitwise_or.reduce(base << (offsets * stride), axis=0) | walls)[None, :]  # (1, m)
        rows = (occ >> self.row_shifts) & 63  # (6, m): bit q = column q of row r
        cols = ((((occ >> self.col_shifts) & _COLUMN_BITS) * _COLUMN_MAGIC) >> 25) & 63  # bit k = row k
        lanes = np.concatenate([rows, cols, np.full_like(occ, 63)])  # (13, m)
        if self.single:
            at = lanes[lane[:, 0]] * 8 + offsets  # (n, m): index into the step tables
        else:
            at = np.take_along_axis(lanes, lane, axis=0) * 8 + offsets
        return np.concatenate([_FORWARD[at + length], _BACKWARD[at]])


def _lookup_sorted(haystack: np.ndarray, needles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of sorted ``needles`` in sorted ``haystack`` and whether each is there."""
    if haystack.size == 0:
        return np.zeros(needles.size, dtype=np.int64), np.zeros(needles.size, dtype=bool)
    pos = np.searchsorted(haystack, needles)  # sorted needles: cache-friendly, several times faster
    pos[pos == haystack.size] = 0
    return pos, haystack[pos] == needles


def _explore(
    batch: _Batch, starts: np.ndarray, max_states: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Enumerate every key reachable from ``starts`` and the one-cell move graph over them.

    Ids number the keys in breadth-first order (layer by layer, ascending within a layer). Returns the keys
    by id, ``step`` (N, 2n) int32: the id reached by moving vehicle i one cell forward (column i) or
    backward (column n + i), -1 when blocked (a slide of k cells is k hops along one column), and which
    puzzles were cut off at ``max_states`` states (their tables are incomplete and must not be used).
    """
    over = np.zeros(starts.size, dtype=bool)
    seen = np.zeros(starts.size, dtype=np.int64)
    layer = np.unique(starts)
    previous = np.empty(0, dtype=np.int64)
    first_id = 0  # id of layer[0]; the previous layer starts at first_id - previous.size
    layers, blocks = [layer], []
    while layer.size:
        m = layer.size
        free = batch.free_steps(layer)  # (2n, m)
        # Row-major over (2n, m): each move's targets (layer + one unit) come out ascending, so the stable
        # sort below merges 2n sorted runs instead of sorting from scratch.
        where = np.flatnonzero(free)
        move, row = np.divmod(where, m)
        nb = layer[row] + batch.unit[move]
        order = np.argsort(nb, kind="stable")
        ordered = nb[order]
        head = np.empty(ordered.size, dtype=bool)
        head[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
        distinct = ordered[head]
        # The graph is undirected: a target is in the previous layer, this layer, or the next one.
        pos_prev, in_prev = _lookup_sorted(previous, distinct)
        pos_layer, in_layer = _lookup_sorted(layer, distinct)
        new = ~(in_prev | in_layer)
        distinct_ids = np.where(in_prev, first_id - previous.size + pos_prev, first_id + pos_layer)
        if max_states is not None:
            # A puzzle past the cap stops growing: its new states are dropped and the moves to them read as
            # blocked. (The generator uses this: random placements with huge clusters are never puzzles.)
            seen += np.bincount(layer >> _PID_SHIFT, minlength=seen.size)
            over |= seen > max_states
            dropped = new & over[distinct >> _PID_SHIFT]
            distinct_ids[dropped] = -1
            new &= ~dropped
        nxt = distinct[new]
        next_first = first_id + m
        distinct_ids[new] = np.arange(next_first, next_first + nxt.size)
        ids = np.empty(nb.size, dtype=np.int32)
        ids[order] = distinct_ids[np.cumsum(head) - 1]
        block = np.full(free.shape, -1, dtype=np.int32)
        block.ravel()[where] = ids
        blocks.append(block)
        first_id = next_first
        previous, layer = layer, nxt
        layers.append(layer)
    # One transposing copy: the distance passes gather whole rows (one state's moves) at a time.
    return np.concatenate(layers), np.ascontiguousarray(np.concatenate(blocks, axis=1).T), over


def _distances(step: np.ndarray, goals: np.ndarray, slides: bool) -> np.ndarray:
    """Multi-source BFS from ``goals`` in one-cell steps or in slides; -1 where no goal is reachable."""
    n, width = step.shape
    flat = step.ravel()
    dist = np.full(n, -1, dtype=np.int32)
    seen = np.zeros(n, dtype=bool)  # a byte per state stays in cache where dist might not
    owner = np.zeros(n, dtype=np.int32)
    seen[goals] = True
    dist[goals] = 0
    frontier = goals
    depth = 0
    while frontier.size:
        hop = step[frontier].ravel()  # (m * 2n,): row gather, then one flat pass
        where = np.flatnonzero(hop >= 0)
        nb = hop[where]
        if slides:
            column = where % width
            found = [nb]
            ids = nb
            while ids.size:  # keep sliding along the same column: 2, 3, 4 cells
                ids = flat[ids * np.int64(width) + column]
                keep = ids >= 0
                ids, column = ids[keep], column[keep]
                found.append(ids)
            nb = np.concatenate(found)
        nb = nb[~seen[nb]]
        seen[nb] = True
        depth += 1
        dist[nb] = depth
        # Deduplicate without sorting: of repeated ids, the last writer keeps its slot.
        slot = np.arange(nb.size, dtype=np.int32)
        owner[nb] = slot
        frontier = nb[owner[nb] == slot]
    return dist


@dataclass
class Cluster:
    """A solved cluster: its states and the distance of each to the nearest solved state, in both metrics.

    ``steps[i]`` / ``moves[i]`` belong to ``states[i]``; -1 means no solved state is reachable.
    """

    layout: Layout
    start: int
    states: np.ndarray  # (N,) int64 packed states, sorted
    steps: np.ndarray  # (N,) int32, one-cell actions to the goal
    moves: np.ndarray  # (N,) int32, slides of any length to the goal
    _lookup: dict[str, dict[int, int]] = field(default_factory=dict, repr=False)

    @property
    def size(self) -> int:
        return int(self.states.size)

    @property
    def solvable(self) -> bool:
        return self.min_steps is not None

    @property
    def min_steps(self) -> int | None:
        """Optimal one-cell steps from the start, None when unsolvable."""
        d = int(self.steps[self.index(self.start)])
        return None if d < 0 else d

    @property
    def min_moves(self) -> int | None:
        """Optimal moves (Fogleman's count) from the start, None when unsolvable."""
        d = int(self.moves[self.index(self.start)])
        return None if d < 0 else d

    @property
    def cluster_id(self) -> str:
        """Exact, letter-free identity: the board of the cluster's least packed state, canonical letters."""
        return self.layout.board(self.layout.unpack(int(self.states[0])), letters="canonical")

    def index(self, key: int) -> int:
        i = int(np.searchsorted(self.states, key))
        if i >= self.states.size or int(self.states[i]) != key:
            raise KeyError(f"state {key} is not in this cluster")
        return i

    def table(self, metric: str) -> dict[int, int]:
        """``{packed state: distance}`` for ``steps`` or ``moves``, built on first use (O(1) lookups then)."""
        table = self._lookup.get(metric)
        if table is None:
            dist = self.steps if metric == "steps" else self.moves
            table = dict(zip(self.states.tolist(), dist.tolist()))
            self._lookup[metric] = table
        return table

    def distance(self, key: int, metric: str = "steps") -> int | None:
        """Distance of a packed state to the goal in ``steps`` or ``moves``; None if unsolvable or unknown."""
        d = self.table(metric).get(key, -1)
        return None if d < 0 else d

    def solution(self, metric: str = "steps", start: int | None = None) -> list[Move]:
        """An optimal solution from ``start`` (default: the puzzle) in ``steps`` or ``moves``, by the fixed
        tie-break: at each state the first optimal action in ``legal_actions`` order (vehicle letter, then
        up, down, left, right, then the shortest slide). Empty when unsolvable."""
        state = RushHourState(self.layout, self.layout.unpack(self.start if start is None else start))
        out: list[Move] = []
        while (move := optimal_move(self, state, metric)) is not None:
            state.apply(move)
            out.append(move)
        return out

    def farthest(self, metric: str = "moves") -> list[int]:
        """The solvable states at the largest distance from the goal, ascending."""
        dist = self.moves if metric == "moves" else self.steps
        top = int(dist.max()) if dist.size else -1
        return [] if top < 0 else self.states[dist == top].tolist()


def _solve_batch(
    puzzles: Sequence[tuple[Layout, Sequence[int]]], with_steps: bool, max_states: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """Keys (sorted, so each puzzle's states are contiguous), moves, steps or None, bounds, starts, and
    which puzzles were cut off at ``max_states``."""
    batch = _Batch([lay for lay, _ in puzzles])
    starts = np.array([lay.pack(pos) | (j << _PID_SHIFT) for j, (lay, pos) in enumerate(puzzles)], dtype=np.int64)
    keys, step, over = _explore(batch, starts, max_states)
    goals = np.nonzero((keys & MASK) == GOAL_POS)[0]  # the primary car is vehicle 0 of every layout
    moves = _distances(step, goals, slides=True)
    steps = _distances(step, goals, slides=False) if with_steps else None
    del step
    order = np.argsort(keys)
    keys, moves = keys[order], moves[order]
    if steps is not None:
        steps = steps[order]
    bounds = np.searchsorted(keys, np.arange(len(puzzles) + 1, dtype=np.int64) << _PID_SHIFT)
    return keys, moves, steps, bounds, starts, over


def solve_many(puzzles: Sequence[tuple[Layout, Sequence[int]]], batch_size: int = 32) -> list[Cluster]:
    """Solve several puzzles, ``batch_size`` per numpy pass; one ``Cluster`` per puzzle, in order.

    Args:
        puzzles: ``(layout, positions)`` pairs.
        batch_size: puzzles per pass (at most ``MAX_BATCH``); bigger batches amortise per-call overhead,
            smaller ones bound memory (about 4 * 2n bytes per state of the batch while it is solved).
    """
    out: list[Cluster] = []
    size = max(1, min(batch_size, MAX_BATCH))
    for i in range(0, len(puzzles), size):
        chunk = puzzles[i : i + size]
        keys, moves, steps, bounds, starts, _ = _solve_batch(chunk, with_steps=True)
        assert steps is not None
        for j, (lay, _) in enumerate(chunk):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            states = keys[lo:hi] & _STATE_MASK
            out.append(Cluster(lay, int(starts[j]) & _STATE_MASK, states, steps[lo:hi], moves[lo:hi]))
    return out


def farthest_many(
    puzzles: Sequence[tuple[Layout, Sequence[int]]], max_states: int | None = None
) -> list[tuple[int, int, int] | None]:
    """For each puzzle's cluster: ``(max moves to the goal, smallest key at that distance, cluster size)``.

    None when the cluster has no solved state, is solved everywhere, or has more than ``max_states``
    states. Cheaper than ``solve_many`` (no step distances, no per-puzzle tables); the generator calls it on
    every candidate.
    """
    out: list[tuple[int, int, int] | None] = []
    for i in range(0, len(puzzles), MAX_BATCH):
        chunk = puzzles[i : i + MAX_BATCH]
        keys, moves, _, bounds, _, over = _solve_batch(chunk, with_steps=False, max_states=max_states)
        for j in range(len(chunk)):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            if over[j]:
                out.append(None)
                continue
            dist = moves[lo:hi]
            top = int(dist.max())
            if top <= 0:
                out.append(None)
                continue
            first = int(np.argmax(dist == top))  # keys ascend, so this is the smallest farthest key
            out.append((top, int(keys[lo + first]) & _STATE_MASK, hi - lo))
    return out


def optimal_move(cluster: Cluster, state: RushHourState, metric: str = "steps") -> Move | None:
    """The first action (in tie-break order) that brings ``state`` one unit of ``metric`` closer to the goal.

    None when the state is solved or cannot reach the goal.
    """
    table = cluster.table(metric)
    here = table.get(state.key, -1)
    if here <= 0:
        return None
    for move in state.legal_actions(slides=metric == "moves"):
        child = state.clone()
        child.apply(move)
        if table.get(child.key, -1) == here - 1:
            return move
    raise RuntimeError("distance table inconsistent with the state graph")  # pragma: no cover


def solve_cluster(layout: Layout, positions: Sequence[int]) -> Cluster:
    """Enumerate the cluster of ``positions`` and compute both distance tables exactly."""
    return solve_many([(layout, positions)])[0]


@lru_cache(maxsize=16)
def solve_board(board: str) -> Cluster:
    """``solve_cluster`` of a Fogleman board string, cached (env resets on recent boards reuse it).

    Raises:
        InputError: a malformed board (see ``parse_board``).
    """
    layout, positions = parse_board(board)
    return solve_cluster(layout, positions)
