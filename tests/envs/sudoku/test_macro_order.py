"""A macro step stops at its first invalid action wherever it stands, not only when it is the last one."""

from __future__ import annotations

from milepost.envs.sudoku import SudokuEnv
from milepost.types import Task


def test_invalid_action_in_the_middle_of_a_macro_stops_it(task4: Task) -> None:
    env = SudokuEnv(size=4, action_mode="flexible", macro_k=3)
    env.reset(options={"task": task4})
    before = list(env.state.cells)
    # r1c2 is a given: the second action is illegal, the third (legal on its own) must not be applied.
    _, _, _, _, info = env.step("ACTION: value(1, r1c1); value(2, r1c2); value(3, r2c1)")
    assert info["actions"] == ["value(1, r1c1)"]
    assert info["reward_terms"]["valid"] == -1.0 and info["correct_actions"] == 1 and info["n_requested"] == 3
    assert env.state.cells[0] == 1 and env.state.cells[4] == before[4] == 0
    # the rejected rest can be played on the next turn
    _, _, _, _, info = env.step("ACTION: value(3, r2c1)")
    assert info["actions"] == ["value(3, r2c1)"] and env.state.cells[4] == 3
