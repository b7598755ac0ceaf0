"""HoDoKu-style technique grader for 9x9 Sudoku: solution paths, HoDoKu levels and scores, paper tiers."""

from milepost.envs.sudoku.grader.candidates import Board, Step
from milepost.envs.sudoku.grader.grader import FINDERS, ORDER, Grade, grade, next_step
from milepost.envs.sudoku.grader.scores import TABLE, TIERS, Technique, Tier

__all__ = [
    "FINDERS",
    "ORDER",
    "TABLE",
    "TIERS",
    "Board",
    "Grade",
    "Step",
    "Technique",
    "Tier",
    "grade",
    "next_step",
]
