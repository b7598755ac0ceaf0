"""The exact cluster solver against Fogleman's database and against a brute-force BFS over the state API."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from milepost.envs.rushhour.board import parse_board
from milepost.envs.rushhour.fogleman import read_fogleman
from milepost.envs.rushhour.solver import farthest_many, optimal_move, solve_board, solve_cluster, solve_many
from milepost.envs.rushhour.state import Move, RushHourState

SAMPLE = Path(__file__).parents[2] / "data" / "rushhour" / "rush_sample.txt"
FULL = Path("/work/shared/data/rush/rush_18k.txt")
SMALL = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"  # a 7-move board of the sample, 1,961 states


def _brute_force(board: str) -> dict[int, tuple[int, int]]:
    """{packed state: (steps, moves) to the goal} by plain BFS over the game-state API."""
    start = RushHourState.from_board(board)
    seen = {start.key: start}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for move in state.legal_actions():
            child = state.clone()
            child.apply(move)
            if child.key not in seen:
                seen[child.key] = child
                queue.append(child)
    out: dict[int, tuple[int, int]] = {}
    for slides in (False, True):
        dist = {k: 0 for k, s in seen.items() if s.is_solved()}
        frontier = list(dist)
        while frontier:
            nxt = []
            for key in frontier:
                for move in seen[key].legal_actions(slides=slides):
                    child = seen[key].clone()
                    child.apply(move)
                    if child.key not in dist:
                        dist[child.key] = dist[key] + 1
                        nxt.append(child.key)
            frontier = nxt
        for key in seen:
            steps, moves = out.get(key, (-1, -1))
            out[key] = (steps, dist.get(key, -1)) if slides else (dist.get(key, -1), moves)
    return out


def test_sample_of_the_database_agrees_in_moves_and_cluster_size() -> None:
    records = read_fogleman(SAMPLE)
    assert len(records) == 212 and {r.min_moves for r in records} >= {1, 20, 40, 60}
    clusters = solve_many([parse_board(r.board) for r in records])
    for rec, cluster in zip(records, clusters):
        assert (cluster.min_moves, cluster.size) == (rec.min_moves, rec.cluster_size), rec.format()
        assert cluster.min_steps is not None and cluster.min_steps >= cluster.min_moves


def test_both_distance_tables_match_a_brute_force_bfs() -> None:
    for board in (SMALL, "IBBxooIooLDDJAALooJoKEEMFFKooMGGHHHM", "ooooooooooooAAoooooooooooooooooooooo"):
        cluster = solve_board(board)
        truth = _brute_force(board)
        assert cluster.size == len(truth)
        got = {int(k): (int(s), int(m)) for k, s, m in zip(cluster.states, cluster.steps, cluster.moves)}
        assert got == truth


def test_batches_give_the_same_answers_as_single_solves() -> None:
    boards = [r.board for r in read_fogleman(SAMPLE)[::23]]
    together = solve_many([parse_board(b) for b in boards], batch_size=5)
    for board, cluster in zip(boards, together):
        alone = solve_cluster(*parse_board(board))
        assert np.array_equal(alone.states, cluster.states)
        assert np.array_equal(alone.steps, cluster.steps) and np.array_equal(alone.moves, cluster.moves)
    for board, found in zip(boards, farthest_many([parse_board(b) for b in boards])):
        cluster = solve_board(board)
        assert found is not None
        top, key, size = found
        assert (top, size) == (int(cluster.moves.max()), cluster.size)
        assert key == min(cluster.farthest("moves"))


def test_solutions_are_optimal_and_follow_the_tie_break() -> None:
    cluster = solve_board(SMALL)
    assert (cluster.min_moves, cluster.min_steps) == (7, 12)
    for metric, length in (("steps", cluster.min_steps), ("moves", cluster.min_moves)):
        plan = cluster.solution(metric)
        assert len(plan) == length
        state = RushHourState.from_board(SMALL)
        for move in plan:
            # Each chosen move is the first optimal one in legal_actions order.
            here = cluster.distance(state.key, metric)
            firsts = [
                m
                for m in state.legal_actions(slides=metric == "moves")
                if _after(state, m, cluster, metric) == here - 1
            ]  # type: ignore[operator]
            assert move == firsts[0]
            state.apply(move)
        assert state.is_solved()
    assert all(m.cells == 1 for m in cluster.solution("steps"))
    assert sum(m.cells for m in cluster.solution("moves")) >= cluster.min_steps  # type: ignore[operator]
    assert optimal_move(cluster, RushHourState.from_board("ooooooooooooooooAAoooooooooooooooooo")) is None


def _after(state: RushHourState, move: Move, cluster: object, metric: str) -> int | None:
    child = state.clone()
    child.apply(move)
    return cluster.distance(child.key, metric)  # type: ignore[attr-defined]


def test_cluster_identity_ignores_letters_and_which_state() -> None:
    cluster = solve_board(SMALL)
    relettered = SMALL.translate(str.maketrans("BC", "CB"))
    assert relettered != SMALL
    assert solve_board(relettered).cluster_id == cluster.cluster_id
    state = RushHourState.from_board(SMALL)
    for move in cluster.solution("steps")[:5]:
        state.apply(move)
    assert solve_board(state.board()).cluster_id == cluster.cluster_id
    assert solve_board("IBBxooIooLDDJAALooJoKEEMFFKooMGGHHHM").cluster_id != cluster.cluster_id
    assert len(cluster.cluster_id) == 36


def test_unsolvable_and_solved_boards() -> None:
    blocked = solve_board("ooooooooooooAAoBBooooooooooooooooooo")  # a horizontal car sits in the exit row
    assert not blocked.solvable and blocked.min_moves is None and blocked.min_steps is None
    assert blocked.distance(blocked.start) is None and blocked.farthest() == []
    done = solve_board("ooooooooooooooooAAoooooooooooooooooo")
    assert (done.min_moves, done.min_steps, done.size) == (0, 0, 5)


@pytest.mark.slow
def test_every_line_of_rush_18k_agrees() -> None:
    """All 18,068 boards of the shared copy of Fogleman's sample: min_moves and cluster size (slow)."""
    if not FULL.is_file():
        pytest.skip(f"{FULL} not available")
    records = read_fogleman(FULL)
    assert len(records) == 18_068
    start = time.perf_counter()
    wrong = []
    for i in range(0, len(records), 256):
        chunk = records[i : i + 256]
        for rec, cluster in zip(chunk, solve_many([parse_board(r.board) for r in chunk], batch_size=32)):
            if (cluster.min_moves, cluster.size) != (rec.min_moves, rec.cluster_size):
                wrong.append(rec.line)
    print(f"rush_18k: {len(records) - len(wrong)} of {len(records)} agree in {time.perf_counter() - start:.0f} s")
    assert wrong == []
