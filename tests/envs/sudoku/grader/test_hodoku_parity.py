"""Whole solution paths against HoDoKu 2.2 itself, through hodoku-py (a port validated against HoDoKu's jar).

Where HoDoKu's path uses only techniques the grader implements, the two paths must be the same steps in the
same order (technique, placements, eliminations), with the same score and level; where HoDoKu needs another
technique, the grader must stop (``beyond``) rather than finish some other way. hodoku-py is an optional peer
(``pip install hodoku-py``, GPL-3.0, used only here and in the benchmark): without it these tests skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.envs.sudoku.grader import Technique, grade
from tests.envs.sudoku.grader.reglib import read_exemplars

hodoku = pytest.importorskip("hodoku")

DATA = Path(__file__).resolve().parents[3] / "data" / "sudoku"
NAMES = {t.name for t in Technique}
PLACEMENTS = {"FULL_HOUSE", "NAKED_SINGLE", "HIDDEN_SINGLE"}


def _compare(puzzle: str) -> str:
    """``same``, ``beyond`` (HoDoKu needs more) or a description of the first difference."""
    theirs = hodoku.Solver().solve(puzzle.replace(".", "0"))
    ours = grade(puzzle)
    if not all(step.type.name in NAMES for step in theirs.steps):
        return "beyond" if not ours.solved else "solved where HoDoKu needs another technique"
    expected = [
        (s.type.name, tuple(zip(s.indices, s.values)))
        if s.type.name in PLACEMENTS
        else (s.type.name, tuple(sorted((c.index, c.value) for c in s.candidates_to_delete)))
        for s in theirs.steps
    ]
    got = [(s.technique.name, s.placements or tuple(sorted(s.eliminations))) for s in ours.steps]
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        return f"step {at}: HoDoKu {expected[at : at + 1]}, grader {got[at : at + 1]}"
    level = theirs.level.name.lower()
    if (ours.hodoku_score, ours.hodoku_level) != (theirs.score, level):
        return f"score/level {ours.hodoku_score}/{ours.hodoku_level} vs {theirs.score}/{level}"
    return "same"


def _bank(name: str) -> list[str]:
    return [ln.split()[0] for ln in (DATA / name).read_text().splitlines() if ln.strip() and ln[0] != "#"]


@pytest.mark.parametrize("line", [13, 62, 184, 228, 234, 267, 391, 419, 606, 724])
def test_exemplar_paths_match_hodoku(line: str) -> None:
    puzzle = next(ex.puzzle for ex in read_exemplars() if ex.line == line)
    assert _compare(puzzle) == "same"


def test_public_puzzles_match_hodoku() -> None:
    assert {_compare(p) for p in _bank("easy50.txt")[:10]} == {"same"}


@pytest.mark.slow
def test_hard_public_puzzles_match_hodoku() -> None:
    results = [_compare(p) for p in _bank("top95.txt") + _bank("hardest.txt")]
    assert set(results) <= {"same", "beyond"} and results.count("same") >= 40


@pytest.mark.slow
def test_every_exemplar_matches_hodoku() -> None:
    results = {ex.line: _compare(ex.puzzle) for ex in read_exemplars()}
    assert {line: r for line, r in results.items() if r not in ("same", "beyond")} == {}
    assert sum(r == "same" for r in results.values()) >= 421
