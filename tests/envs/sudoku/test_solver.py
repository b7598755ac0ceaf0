"""The exact solver: public puzzle banks, solution counting against brute force, and bad input."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.envs.sudoku.bank import read_bank
from milepost.envs.sudoku.generator import random_solution
from milepost.envs.sudoku.grid import conflicts, geometry, grid_to_str, parse_grid
from milepost.envs.sudoku.rules import task_grids
from milepost.envs.sudoku.solver import count_solutions, first_solution, solve
from milepost.errors import InputError
from milepost.types import Task

DATA = Path(__file__).resolve().parents[2] / "data" / "sudoku"
SHARED = Path("/work/shared/data/sudoku")
SAMPLES = [
    "puzzles3_magictour_top1465",
    "puzzles2_17_clue.first50",
    "puzzles5_forum_hardest_1905_11+.first50",
    "puzzles6_forum_hardest_1106.first50",
    "diabolical_v1.first50",
    "easy50.txt",
    "top95.txt",
    "hardest.txt",
]


def assert_solves(puzzle: list[int], solution: list[int]) -> None:
    n = int(len(puzzle) ** 0.5)
    assert 0 not in solution
    assert conflicts(solution, n) is None
    assert all(p in (0, s) for p, s in zip(puzzle, solution))


def brute_count(puzzle: list[int], limit: int = 2) -> int:
    """Plain backtracking in cell order: slow, obviously right, for small boards."""
    n = int(len(puzzle) ** 0.5)
    geo = geometry(n)
    cells = list(puzzle)
    if conflicts(cells, n):
        return 0
    empty = [i for i, d in enumerate(cells) if not d]

    def count(k: int) -> int:
        if k == len(empty):
            return 1
        cell = empty[k]
        total = 0
        for d in range(1, n + 1):
            if all(cells[p] != d for p in geo.peers[cell]):
                cells[cell] = d
                total += count(k + 1)
                cells[cell] = 0
                if total >= limit:
                    break
        return min(total, limit)

    return count(0)


@pytest.mark.parametrize("name", SAMPLES)
def test_solves_bank_samples_uniquely(name: str) -> None:
    entries = read_bank(DATA / name, 9)[:50]
    assert entries
    for entry in entries:
        found = solve(entry.puzzle, limit=2)
        assert len(found) == 1, f"{name}:{entry.line}"
        assert_solves(entry.puzzle, found[0])
        assert first_solution(entry.puzzle) == found[0]


def test_empty_board_counts_to_the_limit() -> None:
    for n in (4, 6, 9):
        assert count_solutions([0] * (n * n)) == 2
        found = solve([0] * (n * n), limit=5)
        assert len(found) == 5 and len({grid_to_str(s) for s in found}) == 5
        for s in found:
            assert_solves([0] * (n * n), s)
    assert solve([0] * 81, limit=0) == []


def test_no_solution() -> None:
    # Givens that clash, and givens that are consistent but leave r1c9 without a candidate.
    clash = [0] * 81
    clash[0] = clash[5] = 7
    assert solve(clash) == [] and count_solutions(clash) == 0
    stuck = [0] * 81
    stuck[:8] = range(1, 9)
    stuck[9 * 4 + 8] = 9
    assert conflicts(stuck, 9) is None
    assert solve(stuck) == []
    assert first_solution(stuck) is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([4, 6]), st.integers(0, 2**32 - 1), st.floats(0.2, 0.9))
def test_counts_match_brute_force_on_small_boards(n: int, seed: int, empty_share: float) -> None:
    rng = random.Random(seed)
    puzzle = random_solution(n, rng)
    for cell in rng.sample(range(n * n), int(empty_share * n * n)):
        puzzle[cell] = 0
    if rng.random() < 0.3:  # sometimes break it: a wrong digit in an empty cell
        cell = rng.choice([i for i, d in enumerate(puzzle) if not d] or [0])
        puzzle[cell] = rng.randint(1, n)
    expected = brute_count(puzzle)
    found = solve(puzzle, limit=2)
    assert len(found) == expected
    assert len({grid_to_str(s) for s in found}) == len(found)
    for s in found:
        assert_solves(puzzle, s)


@pytest.mark.parametrize(
    ("puzzle", "message"),
    [([0] * 80, "not a square board"), ([0] * 25, "unsupported size 5"), ([0] * 80 + [10], "not a digit")],
)
def test_bad_input(puzzle: list[int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        solve(puzzle)


def test_task_without_solution_is_solved_by_the_solver() -> None:
    puzzle = read_bank(DATA / "top95.txt", 9)[0].puzzle
    task = Task("t", "sudoku", 9, "", 0, "", 0, 0, {"puzzle": grid_to_str(puzzle)})
    grid, solution = task_grids(task)
    assert grid == puzzle
    assert_solves(puzzle, solution)
    several = Task("u", "sudoku", 4, "", 0, "", 0, 0, {"puzzle": "0" * 16})
    with pytest.raises(InputError, match="several solutions"):
        task_grids(several)


@pytest.mark.slow
def test_full_sweep_of_reference_banks() -> None:
    """Every puzzle of the reference banks (not hodoku-py) has exactly one solution, found by the solver."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not available")
    files = sorted(p for sub in ("tdoku", "norvig", "sudoku-exchange") for p in (SHARED / sub).glob("*") if p.is_file())
    assert files
    total = 0
    for path in files:
        for entry in read_bank(path, 9):
            found = solve(entry.puzzle, limit=2)
            assert len(found) == 1, f"{path.name}:{entry.line}"
            assert_solves(entry.puzzle, found[0])
            if entry.solution is not None:
                assert found[0] == entry.solution, f"{path.name}:{entry.line}"
            total += 1
        if path.parent.name == "sudoku-exchange":
            # Each line starts with the first 12 hex digits of its puzzle's SHA1: the right field was read.
            for raw, entry in zip(path.read_text().splitlines(), read_bank(path, 9)):
                assert hashlib.sha1(grid_to_str(entry.puzzle).encode()).hexdigest()[:12] == raw.split()[0]
    assert total > 10_000


def test_bank_reader_reports_malformed_lines(tmp_path: Path) -> None:
    good = grid_to_str(read_bank(DATA / "easy50.txt", 9)[0].puzzle)
    path = tmp_path / "bank.txt"
    path.write_text(f"# a comment\n\n{good}\n{good[:-1]}\n")
    with pytest.raises(InputError, match=r"bank\.txt:4: expected a puzzle"):
        read_bank(path)
    path.write_text(f"{good} {good}\n")
    with pytest.raises(InputError, match=r"bank\.txt:1: the solution is not a complete valid grid"):
        read_bank(path)
    solution = grid_to_str(solve(parse_grid(good))[0])
    path.write_text(f"id-1,{good},{solution},3.4\n")
    (entry,) = read_bank(path)
    assert entry.solution == parse_grid(solution) and entry.line == 1
    with pytest.raises(InputError, match="no such file"):
        read_bank(tmp_path / "missing.txt")
