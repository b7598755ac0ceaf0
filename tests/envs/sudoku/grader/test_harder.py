"""Medium and hard datasets: seeds, the clue walk, determinism, records, de-duplication and errors."""

from __future__ import annotations

import random

import pytest

from milepost.envs.levels import get_level, parse_levels
from milepost.envs.sudoku import harder
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.grader import TABLE, Grade, Technique, grade
from milepost.envs.sudoku.grid import parse_grid
from milepost.envs.sudoku.harder import (
    anchor_of,
    build_graded_dataset,
    free_cells,
    generate_graded,
    minimal_puzzle,
    walk_down,
)
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError
from milepost.types import Task

L5 = get_level("sudoku", 9, "L5")
SINGLES = {Technique.FULL_HOUSE, Technique.NAKED_SINGLE, Technique.HIDDEN_SINGLE}


def _non_singles(found: Grade) -> list[tuple[Technique, tuple, tuple]]:
    return [(s.technique, s.placements, s.eliminations) for s in found.steps if s.technique not in SINGLES]


def test_minimal_puzzle_is_unique_and_minimal() -> None:
    puzzle, solution = minimal_puzzle(random.Random(5))
    assert solve(puzzle, 2) == [solution]
    cell = next(c for c in range(81) if puzzle[c])
    weaker = list(puzzle)
    weaker[cell] = 0
    assert len(solve(weaker, 2)) == 2


@pytest.mark.parametrize("tier", ["medium", "hard"])
def test_generated_puzzle_has_its_tier_level_and_anchor(tier: str) -> None:
    made = generate_graded(tier, L5, seed=0, index=7)
    assert made is not None
    assert L5.contains(made.puzzle.count(0)) and solve(made.puzzle, 2) == [made.solution]
    assert made.grade.tier == tier and made.grade.solved
    assert made.anchor is not None and TABLE[made.anchor].tier == tier and made.anchor in made.grade.techniques
    assert made.grade == grade(made.puzzle)  # what the task records is the puzzle's own grade
    again = generate_graded(tier, L5, seed=0, index=7)
    assert again is not None and again.puzzle == made.puzzle  # (tier, seed, index) -> the same puzzle


def test_singles_prefix_cells_are_free() -> None:
    """Adding the cells the first singles place leaves the rest of the path exactly as it was."""
    rng = random.Random(11)
    checked = 0
    while checked < 3:
        puzzle, solution = minimal_puzzle(rng)
        found = grade(puzzle, solution)
        if found.tier != "hard":
            continue
        free = free_cells(found, "hard")
        assert free
        more = list(puzzle)
        for cell in free:
            more[cell] = solution[cell]
        again = grade(more, solution)
        assert _non_singles(again) == _non_singles(found) and again.tier == "hard"
        checked += 1


def test_walk_keeps_the_anchor_or_gives_up() -> None:
    rng = random.Random(3)
    puzzle, solution = minimal_puzzle(rng)
    found = grade(puzzle, solution)
    while found.tier != "hard":
        puzzle, solution = minimal_puzzle(rng)
        found = grade(puzzle, solution)
    anchor = anchor_of(found, "hard")
    assert anchor is not None and puzzle.count(0) == 55
    # Levels L4-L7 are reachable from this 55-empty seed: the walk lands inside the level, on or below the
    # target's empties, keeping the hard tier and the anchor technique, with the seed's clues plus solution digits.
    for name, target in (("L4", 26), ("L5", 33), ("L7", 45)):
        level = get_level("sudoku", 9, name)
        made = walk_down(puzzle, solution, found, "hard", level, target, random.Random(0))
        assert made is not None, name
        assert made.anchor == anchor and anchor in made.grade.techniques and made.grade.tier == "hard"
        assert level.contains(made.puzzle.count(0)) and made.puzzle.count(0) >= target
        assert all(p in (0, s) for p, s in zip(made.puzzle, solution))
        assert all(m == p for m, p in zip(made.puzzle, puzzle) if p)  # clues are only added
    # L1-L3 need more clues than the technique survives: the walk ends with None, never a wrong tier.
    for name in ("L1", "L2", "L3"):
        level = get_level("sudoku", 9, name)
        assert walk_down(puzzle, solution, found, "hard", level, level.hi, random.Random(0)) is None, name


def test_keep_tier_mode_only_checks_the_tier() -> None:
    made = generate_graded("medium", L5, seed=1, index=2, keep="tier")
    assert made is not None and made.anchor is None and made.grade.tier == "medium"


@pytest.fixture(scope="module")
def hard_set() -> tuple[dict[str, list[Task]], dict]:
    return build_graded_dataset(parse_levels("L5,L7", "sudoku", 9), 2, 1, seed=4, tier="hard", progress=False)


def test_dataset_records_follow_the_contract(hard_set: tuple[dict[str, list[Task]], dict]) -> None:
    splits, manifest = hard_set
    assert {k: len(v) for k, v in splits.items()} == {"train": 4, "test": 2} == manifest["counts"]
    forms = set()
    for split, tasks in splits.items():
        for task in tasks:
            level = get_level("sudoku", 9, task.level)
            puzzle = parse_grid(task.payload["puzzle"], 9)
            assert task.split == split and task.size == 9 and level.contains(task.goal_distance)
            assert task.task_id == f"sudoku9-{split}-{task.level}-hard-4-{task.index}"
            assert set(task.meta) == {"tier", "hodoku_level", "hodoku_score", "techniques"}
            assert task.meta == grade(puzzle).meta() and task.meta["tier"] == "hard"
            again = generate_graded("hard", level, task.seed, task.index)
            assert again is not None and "".join(map(str, again.puzzle)) == task.payload["puzzle"]
            forms.add(canonical_form(puzzle))
            assert Task.from_dict(task.to_dict()) == task
    assert len(forms) == 6
    info = manifest["levels"]["L7"]
    assert (
        info["counts"] == {"train": 2, "test": 1}
        and info["draws"] >= 3
        and sum(info["hardest_technique"].values()) == 3
    )
    assert manifest["tier"] == "hard" and manifest["keep"] == "technique" and manifest["generator"]


def test_dataset_is_deterministic(hard_set: tuple[dict[str, list[Task]], dict]) -> None:
    splits, _ = build_graded_dataset(parse_levels("L7", "sudoku", 9), 2, 1, seed=4, tier="hard", progress=False)
    assert [t.to_dict() for t in splits["test"]] == [t.to_dict() for t in hard_set[0]["test"] if t.level == "L7"]


def test_seen_forms_are_skipped() -> None:
    levels = parse_levels("L7", "sudoku", 9)
    first, _ = build_graded_dataset(levels, 1, 0, seed=9, tier="medium", progress=False)
    seen = {canonical_form(parse_grid(first["train"][0].payload["puzzle"], 9))}
    second, manifest = build_graded_dataset(levels, 1, 0, seed=9, tier="medium", progress=False, seen=seen)
    assert second["train"][0].payload != first["train"][0].payload
    assert manifest["levels"]["L7"]["duplicates"] == 1


def test_a_request_that_cannot_be_met_says_how_many(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def sometimes(tier: str, level: object, seed: int, index: int, **kwargs: object) -> object:
        calls.append(index)
        return generate_graded(tier, L5, seed, index) if len(calls) == 1 else None

    monkeypatch.setattr(harder, "generate_graded", sometimes)
    monkeypatch.setattr(harder, "MIN_DRAWS", 5)
    monkeypatch.setattr(harder, "DRAWS_PER_TASK", 2)
    with pytest.raises(
        InputError, match=r"level L5 \(31-35 empty cells\) gave 1 of 3 requested hard-tier puzzles in 6 draws"
    ):
        build_graded_dataset(parse_levels("L5", "sudoku", 9), 2, 1, seed=0, tier="hard", progress=False)
    calls.clear()
    monkeypatch.setattr(harder, "generate_graded", lambda *a, **k: None)
    with pytest.raises(InputError, match="gave 0 of 3 requested medium-tier puzzles in 5 draws"):
        build_graded_dataset(parse_levels("L1", "sudoku", 9), 2, 1, seed=0, tier="medium", progress=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tier": "easy"}, "not generated here"),
        ({"tier": "hard", "keep": "digit"}, "keep mode 'digit' is unknown"),
        ({"tier": "hard", "n_train": 0, "n_test": 0}, "positive task count"),
        ({"tier": "hard", "n_train": -1}, "positive task count"),
        ({"tier": "hard", "levels": parse_levels("S1", "sudoku", 4)}, "9x9 only"),
        ({"tier": "hard", "levels": []}, "no levels"),
    ],
)
def test_bad_requests(kwargs: dict, message: str) -> None:
    args = {"levels": parse_levels("L5", "sudoku", 9), "n_train": 1, "n_test": 1, "seed": 0, **kwargs}
    with pytest.raises(InputError, match=message):
        build_graded_dataset(progress=False, **args)
    if "tier" in kwargs and kwargs["tier"] == "easy":
        with pytest.raises(InputError, match="not generated here"):
            generate_graded("easy", L5, 0, 0)
