"""Sudoku: game state, rules, renderers, generator and the text environment."""

from milepost.envs.sudoku.env import SudokuEnv, make_task
from milepost.envs.sudoku.state import Fill, SudokuState

__all__ = ["Fill", "SudokuEnv", "SudokuState", "make_task"]
