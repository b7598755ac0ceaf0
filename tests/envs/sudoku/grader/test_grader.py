"""The grader end to end: solution paths, HoDoKu levels and scores, paper tiers, soundness, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.grader import FINDERS, ORDER, TABLE, Board, Technique, grade, next_step
from milepost.envs.sudoku.grader.scores import LEVEL_CAPS, hodoku_level, paper_tier
from milepost.envs.sudoku.grid import parse_grid
from milepost.envs.sudoku.solver import solve
from milepost.errors import InputError

T = Technique
DATA = Path(__file__).resolve().parents[3] / "data" / "sudoku"
X_WING = "9..............7.37...962486...2.47.........5....4...642...86..5.71.......1.....2"  # exemplar 0300
HARDEST = "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4.."  # "Arto Inkala"


def _bank(name: str, limit: int | None = None) -> list[str]:
    lines = [ln.split()[0] for ln in (DATA / name).read_text().splitlines() if ln.strip() and ln[0] not in "#"]
    return [ln for ln in lines if len(ln) == 81][:limit]


def test_paper_tiers_follow_appendix_d4() -> None:
    """Easy and medium are exactly the appendix's lists (as far as implemented); everything else is hard."""
    easy = {t for t, info in TABLE.items() if info.tier == "easy"}
    medium = {t for t, info in TABLE.items() if info.tier == "medium"}
    assert easy == {T.FULL_HOUSE, T.NAKED_SINGLE}
    assert medium == {
        T.HIDDEN_SINGLE, T.LOCKED_CANDIDATES_1, T.LOCKED_CANDIDATES_2, T.NAKED_PAIR, T.NAKED_TRIPLE,
        T.HIDDEN_PAIR, T.HIDDEN_TRIPLE, T.LOCKED_PAIR, T.LOCKED_TRIPLE, T.X_WING, T.UNIQUENESS_1,
        T.UNIQUENESS_2, T.UNIQUENESS_3, T.UNIQUENESS_4, T.UNIQUENESS_6,
    }  # fmt: skip
    assert {t for t, info in TABLE.items() if info.tier == "hard"} == set(TABLE) - easy - medium


def test_hodoku_table_values() -> None:
    scores = {t: TABLE[t].score for t in (T.FULL_HOUSE, T.NAKED_SINGLE, T.HIDDEN_SINGLE, T.X_WING, T.SWORDFISH)}
    assert scores == {T.FULL_HOUSE: 4, T.NAKED_SINGLE: 4, T.HIDDEN_SINGLE: 14, T.X_WING: 140, T.SWORDFISH: 150}
    assert (TABLE[T.LOCKED_CANDIDATES_1].score, TABLE[T.LOCKED_PAIR].score, TABLE[T.LOCKED_TRIPLE].score) == (
        50, 40, 60,
    )  # fmt: skip
    caps = {"easy": 800, "medium": 1000, "hard": 1600, "unfair": 1800, "extreme": float("inf")}
    assert caps == LEVEL_CAPS
    orders = [TABLE[t].order for t, _ in ORDER]
    assert orders == sorted(orders) and set(FINDERS) == set(TABLE)


def test_level_is_bumped_while_the_score_exceeds_the_cap() -> None:
    assert hodoku_level({T.NAKED_SINGLE: 50}) == ("easy", 200)
    assert hodoku_level({T.HIDDEN_SINGLE: 58}) == ("medium", 812)  # easy techniques, but 812 > 800
    assert hodoku_level({T.X_WING: 1, T.NAKED_SINGLE: 40}) == ("hard", 300)
    assert hodoku_level({T.X_WING: 12}) == ("unfair", 1680)
    assert hodoku_level({T.X_WING: 13}) == ("extreme", 1820)
    assert paper_tier({T.NAKED_SINGLE: 3, T.X_WING: 1}) == "medium" and paper_tier([]) == "easy"


def test_easy_puzzle_grade() -> None:
    puzzle, solution = generate_easy(9, 40, seed=3, index=0)
    found = grade(puzzle, solution)
    assert found.solved and found.tier == "easy" and found.remaining == 0
    assert set(found.techniques) <= {T.FULL_HOUSE, T.NAKED_SINGLE}
    assert sum(found.techniques.values()) == len(found.steps) == 40
    assert (found.hodoku_level, found.hodoku_score) == ("easy", 160)
    board = Board.from_puzzle(puzzle)
    for step in found.steps:
        board.apply(step)
    assert board.values == solution


def test_x_wing_puzzle_is_medium_for_the_paper_and_hard_for_hodoku() -> None:
    found = grade(X_WING)
    assert found.solved and found.tier == "medium" and found.hodoku_level == "hard"
    assert T.X_WING in found.techniques
    assert list(found.techniques) == sorted(found.techniques, key=lambda t: TABLE[t].order)
    assert found.hodoku_score == sum(TABLE[t].score * n for t, n in found.techniques.items())
    assert found.meta() == {
        "tier": "medium",
        "hodoku_level": "hard",
        "hodoku_score": found.hodoku_score,
        "techniques": {t.value: n for t, n in found.techniques.items()},
    }
    step = next(s for s in found.steps if s.technique == T.X_WING)
    assert len(step.digits) == 1 and step.eliminations and f"X-Wing {step.digits[0]}" in step.describe()


def test_beyond_is_reported_not_guessed() -> None:
    found = grade(HARDEST)
    assert not found.solved and found.tier == "beyond" and found.remaining > 0
    assert found.hodoku_level is None and found.hodoku_score is None
    assert found.meta()["tier"] == "beyond"


def test_string_and_list_inputs_agree_and_are_deterministic() -> None:
    a = grade(X_WING)
    b = grade(parse_grid(X_WING, 9))
    assert a == b and a.steps == grade(X_WING).steps


def test_profile_collects_seconds_per_finder() -> None:
    profile: dict[Technique, float] = {}
    grade(X_WING, profile=profile)
    assert set(profile) >= {T.FULL_HOUSE, T.NAKED_SINGLE, T.HIDDEN_SINGLE, T.X_WING}
    assert all(seconds >= 0 for seconds in profile.values())


def test_next_step_takes_the_easiest() -> None:
    board = Board.from_puzzle(parse_grid(X_WING, 9))
    step = next_step(board)
    assert step is not None and step.technique in (T.FULL_HOUSE, T.NAKED_SINGLE, T.HIDDEN_SINGLE)


def test_board_keeps_both_views_in_step() -> None:
    puzzle = parse_grid(X_WING, 9)
    board = Board.from_puzzle(puzzle)
    cell = puzzle.index(0)
    digit = solve(puzzle, 1)[0][cell]
    board.place(cell, digit)
    assert board.values[cell] == digit and board.cands[cell] == 0 and not board.empty >> cell & 1
    board.eliminate(80, 1)
    for c in range(81):
        for d in range(1, 10):
            assert board.has(c, d) == bool(board.dmask[d] >> c & 1)
    copy = board.copy()
    copy.eliminate(cell + 1, 5)
    assert copy.cands is not board.cands


@pytest.mark.parametrize(
    ("puzzle", "message"),
    [
        ("1" * 81, "break a rule"),
        ("0" * 81, "more than one solution"),
        ("12" + "0" * 79, "more than one solution"),
        ("0" * 80, "expected 81 characters"),
        ("1" + "0" * 15, "9x9"),
    ],
)
def test_bad_puzzles_are_input_errors(puzzle: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        grade(puzzle)


def test_no_solution_is_an_input_error() -> None:
    # Row 1 needs a 9 in its last cell, which column 9 already has.
    puzzle = "12345678." + "........9" + "." * 63
    with pytest.raises(InputError, match="no solution"):
        grade(puzzle)


def test_a_wrong_solution_is_caught() -> None:
    puzzle, solution = generate_easy(9, 30, seed=1, index=0)
    wrong = list(solution)
    cell = puzzle.index(0)
    wrong[cell] = wrong[cell] % 9 + 1
    with pytest.raises(RuntimeError, match="solution has"):
        grade(puzzle, wrong)


@pytest.mark.parametrize("bank", ["easy50.txt", "top95.txt", "hardest.txt", "puzzles2_17_clue.first50"])
def test_every_step_agrees_with_the_solution(bank: str) -> None:
    """Soundness on public puzzles: ``grade`` checks each step against the unique solution and raises."""
    for puzzle in _bank(bank):
        found = grade(puzzle)
        assert found.solved == (found.tier != "beyond")


@pytest.mark.slow
@pytest.mark.parametrize(
    "bank",
    [
        "puzzles3_magictour_top1465",
        "diabolical_v1.first50",
        "puzzles5_forum_hardest_1905_11+.first50",
        "puzzles6_forum_hardest_1106.first50",
    ],
)
def test_every_step_agrees_with_the_solution_on_hard_banks(bank: str) -> None:
    for puzzle in _bank(bank):
        grade(puzzle)
