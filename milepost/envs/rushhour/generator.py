"""Deterministic Rush Hour generation: puzzle ``index`` of a level under ``seed`` comes from its own stream.

A candidate is a random placement of vehicles (and optionally walls) around the primary car. Its whole
cluster is solved and the farthest state (most moves from the goal; ties: smallest packed state) is the
puzzle, as in Fogleman's database. Candidates whose cluster exceeds ``MAX_CLUSTER`` states are dropped
unsolved: they are slow to solve and their farthest states are rarely far. Random placements rarely land in
the long levels (about 1 in 100 for 19-21), so when a candidate misses the level the search continues from
it: each round solves a batch of variations (one vehicle or wall added, removed or placed elsewhere, at
random) and keeps the one whose farthest state comes closest to the level's range, until one falls inside.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from milepost.envs.levels import Level
from milepost.envs.rushhour.board import EXIT_ROW, SIDE, Layout, layout_from_pieces
from milepost.envs.rushhour.solver import farthest_many
from milepost.errors import InputError

GENERATOR_VERSION = "rushhour-random-placement-1"

Piece = tuple[bool, int, int, int]  # (horizontal, lane, length, pos)

_VARIATIONS = 8  # candidates solved per search round (one batched solver pass)
_ROUNDS = 60  # rounds before the search restarts from a fresh random placement
_RESTARTS = 200  # fresh placements before giving up on a level
_TRUCK_SHARE = 0.3
# Candidates whose cluster grows past this are dropped unsolved. Few vehicles on an open board make clusters
# of 10^5 states with short solutions; 99% of Fogleman's boards up to 21 moves have under 27,000 states.
MAX_CLUSTER = 40_000


@dataclass(frozen=True)
class Generated:
    """A generated puzzle: its board (Fogleman alphabet), ``min_moves`` and cluster size."""

    board: str
    min_moves: int
    cluster_size: int
    rounds: int  # solver rounds the search took (for reports)


def task_rng(seed: int, level: str, index: int) -> random.Random:
    """The random stream of puzzle ``index`` of ``level`` under ``seed`` (string seeding is stable)."""
    return random.Random(f"rushhour:{seed}:{level}:{index}")


def _cells(piece: Piece) -> list[int]:
    horizontal, lane, length, pos = piece
    if horizontal:
        return [lane * SIDE + pos + i for i in range(length)]
    return [(pos + i) * SIDE + lane for i in range(length)]


def _add_piece(rng: random.Random, pieces: list[Piece], walls: list[int]) -> list[Piece]:
    """``pieces`` plus one random vehicle on free cells (unchanged if 50 tries find no room)."""
    taken = set(walls)
    for piece in pieces:
        taken.update(_cells(piece))
    for _ in range(50):
        horizontal = rng.random() < 0.5
        length = 3 if rng.random() < _TRUCK_SHARE else 2
        lane = rng.randrange(SIDE)
        pos = rng.randrange(SIDE - length + 1)
        # A horizontal vehicle in the exit row can never leave it: the puzzle would be unsolvable.
        if horizontal and lane == EXIT_ROW:
            continue
        piece = (horizontal, lane, length, pos)
        if taken.isdisjoint(_cells(piece)):
            return [*pieces, piece]
    return pieces


def _add_wall(rng: random.Random, pieces: list[Piece], walls: list[int]) -> list[int]:
    taken = set(walls)
    for piece in pieces:
        taken.update(_cells(piece))
    free = [c for c in range(SIDE * SIDE) if c not in taken]
    return sorted([*walls, rng.choice(free)]) if free else walls


def random_placement(rng: random.Random, vehicles: int, walls: int) -> tuple[list[Piece], list[int]]:
    """The primary car on the exit row (not at the exit), up to ``vehicles - 1`` others, ``walls`` walls."""
    pieces: list[Piece] = [(True, EXIT_ROW, 2, rng.randrange(SIDE - 2))]
    wall_cells: list[int] = []
    for _ in range(walls):
        wall_cells = _add_wall(rng, pieces, wall_cells)
    for _ in range(vehicles - 1):
        pieces = _add_piece(rng, pieces, wall_cells)
    return pieces, wall_cells


def _vary(rng: random.Random, pieces: list[Piece], walls: list[int], max_walls: int) -> tuple[list[Piece], list[int]]:
    """One random variation: add, remove or move a vehicle (or, when walls are allowed, a wall)."""
    roll = rng.random()
    if max_walls and roll < 0.15:
        if walls and (len(walls) >= max_walls or rng.random() < 0.5):
            k = rng.randrange(len(walls))
            return pieces, walls[:k] + walls[k + 1 :]
        return pieces, _add_wall(rng, pieces, walls)
    if roll < 0.5 or len(pieces) < 3:
        return _add_piece(rng, pieces, walls), walls
    k = rng.randrange(1, len(pieces))  # never the primary car
    rest = pieces[:k] + pieces[k + 1 :]
    if roll < 0.7:
        return rest, walls
    return _add_piece(rng, rest, walls), walls


def _pieces_of(layout: Layout, positions: list[int]) -> list[Piece]:
    return [(v.horizontal, v.lane, v.length, p) for v, p in zip(layout.vehicles, positions)]


def _miss(level: Level, moves: int) -> int:
    """How far ``moves`` is from the level's range (0 inside)."""
    return max(level.lo - moves, moves - level.hi, 0)


def generate_puzzle(seed: int, index: int, level: Level, *, max_walls: int = 0) -> Generated:
    """Puzzle ``index`` of ``level`` under ``seed``: deterministic, its ``min_moves`` inside the level.

    Args:
        seed: dataset seed.
        index: item number; with ``seed`` and the level name it fixes the random stream.
        level: a Rush Hour level (a range of ``min_moves``).
        max_walls: walls a board may have (Fogleman's database has 0-2; default none).

    Raises:
        InputError: when no puzzle of the level turns up (levels far beyond 21 moves are very rare).
    """
    if level.measure != "min_moves":
        raise InputError(f"level {level.name} is not a Rush Hour level")
    rng = task_rng(seed, level.name, index)
    # Longer levels need more vehicles; these ranges put a random start near the level.
    fewest = min(6 + level.lo // 4, 11)
    rounds = 0
    for _ in range(_RESTARTS):
        pieces, walls = random_placement(rng, rng.randint(fewest, fewest + 3), rng.randint(0, max_walls))
        best: tuple[int, list[Piece], list[int]] | None = None  # (miss, puzzle pieces, walls)
        for round_no in range(_ROUNDS):
            if round_no == 0:
                candidates = [(pieces, walls)]
            else:
                assert best is not None
                candidates = [_vary(rng, best[1], best[2], max_walls) for _ in range(_VARIATIONS)]
            boards = [layout_from_pieces(p, w) for p, w in candidates]
            rounds += 1
            for (layout, _), (_, w), found in zip(boards, candidates, farthest_many(boards, MAX_CLUSTER)):
                if found is None:
                    continue
                moves, key, size = found
                miss = _miss(level, moves)
                positions = layout.unpack(key)
                if miss == 0:
                    return Generated(layout.board(positions), moves, size, rounds)
                if best is None or miss <= best[0]:
                    best = (miss, _pieces_of(layout, positions), w)
            if best is None:
                break  # the random start is unsolvable: draw a fresh one
    raise InputError(f"rushhour: no puzzle found for level {level.name} (seed {seed}, index {index})")
