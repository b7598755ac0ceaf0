"""The singles solver: tiers and step counts against a naive reference, and the generator's fast checks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.envs.sudoku.bank import read_bank
from milepost.envs.sudoku.generator import carve_easy, generate_easy, random_solution
from milepost.envs.sudoku.grid import geometry, parse_grid
from milepost.envs.sudoku.singles import (
    SinglesGrade,
    classify_singles,
    naked_single_fills,
    naked_single_solvable,
)
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError

DATA = Path(__file__).resolve().parents[2] / "data" / "sudoku"


def reference_tier(puzzle: list[int]) -> tuple[str, int]:
    """Scan the whole board each step: a naked single anywhere first, else a hidden single anywhere.

    Returns the tier and the number of cells filled. Slow and independent of the module under test.
    """
    n = int(len(puzzle) ** 0.5)
    geo = geometry(n)
    cells = list(puzzle)
    used_hidden = False
    filled = 0

    def candidates(c: int) -> set[int]:
        return set(range(1, n + 1)) - {cells[p] for p in geo.peers[c]}

    while 0 in cells:
        naked = [(c, candidates(c)) for c in range(n * n) if not cells[c]]
        single = next(((c, cand) for c, cand in naked if len(cand) == 1), None)
        if single is not None:
            cells[single[0]] = single[1].pop()
            filled += 1
            continue
        hidden = None
        for unit in geo.units:
            for d in set(range(1, n + 1)) - {cells[c] for c in unit}:
                places = [c for c in unit if not cells[c] and d in candidates(c)]
                if len(places) == 1:
                    hidden = (places[0], d)
                    break
            if hidden:
                break
        if hidden is None:
            return "beyond", filled
        cells[hidden[0]] = hidden[1]
        used_hidden = True
        filled += 1
    return ("hidden" if used_hidden else "easy"), filled


@pytest.mark.parametrize(("n", "empties"), [(4, 8), (6, 20), (9, 11), (9, 30), (9, 45)])
def test_generated_puzzles_are_easy(n: int, empties: int) -> None:
    for index in range(15):
        puzzle, solution = generate_easy(n, empties, 3, index)
        grade = classify_singles(puzzle)
        assert grade.tier == "easy"
        assert grade.hidden_single == 0 and grade.remaining == 0
        assert grade.steps == empties
        assert grade.full_house >= 1  # the last placement always completes its units
        assert naked_single_solvable(puzzle) and naked_single_solvable(puzzle, solution)


def test_bank_tiers_match_the_reference() -> None:
    tiers: dict[str, int] = {}
    for name in ("easy50.txt", "top95.txt", "hardest.txt", "diabolical_v1.first50"):
        for entry in read_bank(DATA / name, 9)[:30]:
            grade = classify_singles(entry.puzzle)
            tier, filled = reference_tier(entry.puzzle)
            assert grade.tier == tier, f"{name}:{entry.line}"
            tiers[tier] = tiers.get(tier, 0) + 1
            if tier != "beyond":
                assert grade.steps == filled == entry.puzzle.count(0)
                assert grade.remaining == 0
            else:
                assert grade.remaining > 0
                assert not naked_single_solvable(entry.puzzle)
    # The Project Euler set mixes easy and hidden-single puzzles; the hard sets need more than singles.
    assert set(tiers) == {"easy", "hidden", "beyond"}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([4, 6, 9]), st.integers(0, 2**32 - 1), st.floats(0.1, 0.75))
def test_random_puzzles_match_the_reference(n: int, seed: int, share: float) -> None:
    rng = random.Random(seed)
    puzzle = random_solution(n, rng)
    for cell in rng.sample(range(n * n), int(share * n * n)):
        puzzle[cell] = 0
    grade = classify_singles(puzzle)
    tier, filled = reference_tier(puzzle)
    assert grade.tier == tier
    assert naked_single_solvable(puzzle) == (tier == "easy")
    if tier != "beyond":
        assert grade.steps == filled == puzzle.count(0)
        assert len(solve(puzzle, 2)) == 1  # singles are forced moves: a finished pass means a unique solution


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([4, 6, 9]), st.integers(0, 2**32 - 1))
def test_stopping_at_the_emptied_cell_is_exact(n: int, seed: int) -> None:
    """The generator's shortcut: from a singles-solvable puzzle, emptying one more cell keeps it solvable
    exactly when naked singles refill that cell."""
    rng = random.Random(seed)
    solution = random_solution(n, rng)
    puzzle = carve_easy(solution, (n * n) // 2, rng) or list(solution)
    for cell in [c for c, d in enumerate(puzzle) if d][:12]:
        trial = list(puzzle)
        trial[cell] = 0
        assert naked_single_fills(trial, cell) == naked_single_solvable(trial)


def test_solution_must_agree() -> None:
    puzzle, solution = generate_easy(9, 20, 0, 0)
    wrong = list(solution)
    wrong[puzzle.index(0)] = wrong[puzzle.index(0)] % 9 + 1
    assert naked_single_solvable(puzzle, solution)
    assert not naked_single_solvable(puzzle, wrong)


def test_full_house_and_naked_single_counts() -> None:
    # One empty cell per row, in different boxes and columns: every placement is a Full House.
    solution = parse_grid("534678912672195348198342567859761423426853791713924856961537284287419635345286179")
    puzzle = list(solution)
    for r in range(9):
        puzzle[r * 9 + (r * 3 + r // 3) % 9] = 0
    grade = classify_singles(puzzle)
    assert grade == SinglesGrade("easy", 9, 0, 0, 0)
    assert grade.to_dict() == {
        "tier": "easy",
        "full_house": 9,
        "naked_single": 0,
        "hidden_single": 0,
        "remaining": 0,
    }
    # r5c1, r1c5 and r4c4 are each the only empty cell of a column or row: Full Houses in any order. r5c5
    # shares its row, column and box with one of them, so it is a Naked Single unless it comes last.
    puzzle = list(solution)
    for cell in (40, 36, 4, 30):  # r5c5, r5c1, r1c5, r4c4
        puzzle[cell] = 0
    grade = classify_singles(puzzle)
    assert grade.tier == "easy" and grade.steps == 4 and grade.full_house >= 3


@pytest.mark.parametrize(
    ("puzzle", "message"),
    [([0] * 80, "not a square board"), ([0] * 80 + [12], "digits 0-9"), ([1, 1] + [0] * 79, "break a rule")],
)
def test_bad_input(puzzle: list[int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        classify_singles(puzzle)
