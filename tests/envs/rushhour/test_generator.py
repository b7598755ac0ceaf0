"""Generation (deterministic, by level, farthest states) and datasets (split rule, manifest, file source)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from milepost.envs.levels import get_level, parse_levels
from milepost.envs.rushhour.board import EXIT_ROW, layout_from_pieces
from milepost.envs.rushhour.dataset import build_dataset, file_level
from milepost.envs.rushhour.fogleman import FoglemanRecord, read_fogleman, write_fogleman
from milepost.envs.rushhour.generator import generate_puzzle, random_placement
from milepost.envs.rushhour.solver import solve_board
from milepost.envs.rushhour.state import RushHourState
from milepost.errors import InputError

SAMPLE = Path(__file__).parents[2] / "data" / "rushhour" / "rush_sample.txt"


def test_generation_is_deterministic_per_seed_and_index() -> None:
    level = get_level("rushhour", 6, "7-9")
    a = generate_puzzle(5, 2, level)
    assert a == generate_puzzle(5, 2, level)
    assert a.board != generate_puzzle(5, 3, level).board
    assert a.board != generate_puzzle(6, 2, level).board


@pytest.mark.parametrize(("name", "index"), [("4-6", 0), ("4-6", 1), ("10-12", 0), ("13-15", 4)])
def test_generated_puzzles_are_farthest_states_inside_their_level(name: str, index: int) -> None:
    level = get_level("rushhour", 6, name)
    made = generate_puzzle(0, index, level, max_walls=1)
    cluster = solve_board(made.board)
    assert level.contains(made.min_moves) and cluster.min_moves == made.min_moves
    assert cluster.size == made.cluster_size
    assert int(cluster.moves.max()) == made.min_moves  # nothing in the cluster is farther from the goal
    assert cluster.start == min(cluster.farthest("moves"))  # the tie-break between farthest states
    assert made.board.count("x") <= 1


def test_random_placements_are_valid_boards() -> None:
    rng = random.Random(0)
    for _ in range(200):
        pieces, walls = random_placement(rng, rng.randint(2, 16), rng.randint(0, 3))
        layout, positions = layout_from_pieces(pieces, walls)  # raises on any overlap
        assert not any(v.horizontal and v.lane == EXIT_ROW for v in layout.vehicles[1:])
        assert not RushHourState(layout, positions).is_solved()


def test_other_measures_are_refused() -> None:
    with pytest.raises(InputError, match="not a Rush Hour level"):
        generate_puzzle(0, 0, get_level("sudoku", 4, "S1"))


def test_generated_dataset_keeps_clusters_apart_and_reports_budget_shares() -> None:
    levels = parse_levels("4-6,7-9", "rushhour", 6)
    splits, manifest = build_dataset(levels, 4, 2, seed=3)
    again, _ = build_dataset(levels, 4, 2, seed=3)
    assert [t.to_dict() for t in splits["train"]] == [t.to_dict() for t in again["train"]]
    train_ids = {t.meta["cluster_id"] for t in splits["train"]}
    test_ids = {t.meta["cluster_id"] for t in splits["test"]}
    assert len(train_ids) == 8 and len(test_ids) == 4 and not train_ids & test_ids
    boards = [t.payload["board"] for split in splits.values() for t in split]
    assert len(set(boards)) == len(boards) == 12
    for task in splits["train"] + splits["test"]:
        assert get_level("rushhour", 6, task.level).contains(task.meta["min_moves"])
        assert task.goal_distance == task.meta["min_steps"] >= task.meta["min_moves"]
        assert task.task_id == f"rushhour-{task.split}-{task.level}-3-{task.index}"
    info = manifest["levels"]["7-9"]
    assert info["counts"] == {"train": 4, "test": 2}
    assert info["fits_budget_share"] == {"atomic_30_steps": 1.0, "slide_20_moves": 1.0}
    assert manifest["counts"] == {"train": 8, "test": 4} and manifest["seed"] == 3


def test_file_source_checks_lines_and_keeps_one_board_per_cluster(tmp_path: Path) -> None:
    levels = parse_levels("13-15,19-21", "rushhour", 6)
    splits, manifest = build_dataset(levels, 8, 4, seed=0, source=str(SAMPLE))
    assert manifest["source"] == str(SAMPLE) and manifest["generator"] is None
    tasks = splits["train"] + splits["test"]
    assert all(t.meta["source"].startswith(f"{SAMPLE}:") for t in tasks)
    assert len({t.meta["cluster_id"] for t in tasks}) == 24
    share = manifest["levels"]["19-21"]["fits_budget_share"]
    assert share["slide_20_moves"] < 1.0 and share["atomic_30_steps"] < 0.5  # 21-move boards miss 20 slides
    with pytest.raises(InputError, match="has 12 usable boards"):
        build_dataset(levels[:1], 10, 3, seed=0, source=str(SAMPLE))

    # Two boards of one cluster (a puzzle and the state one move later) count once.
    rec = next(r for r in read_fogleman(SAMPLE) if r.min_moves == 7)
    cluster = solve_board(rec.board)
    state = RushHourState.from_board(rec.board)
    state.apply(cluster.solution("moves")[0])
    twin = FoglemanRecord(6, state.board(), rec.cluster_size)
    path = tmp_path / "twins.txt"
    write_fogleman(path, [rec, twin])
    both = parse_levels("4-6,7-9", "rushhour", 6)
    taken: set[str] = set()
    assert len(file_level(read_fogleman(path), both[1], 1, 0, str(path), taken=taken)) == 1
    with pytest.raises(InputError, match="0 usable boards"):
        file_level(read_fogleman(path), both[0], 1, 0, str(path), taken=taken)

    wrong = tmp_path / "wrong.txt"
    write_fogleman(wrong, [FoglemanRecord(8, rec.board, rec.cluster_size)])
    with pytest.raises(InputError, match=r"wrong\.txt:1: the file says 8 moves / cluster \d+, the solver finds 7"):
        build_dataset(parse_levels("7-9", "rushhour", 6), 1, 0, seed=0, source=str(wrong))
