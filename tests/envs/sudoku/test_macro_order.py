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


def test_a_macro_ends_where_the_puzzle_is_solved(task4: Task) -> None:
    env = SudokuEnv(size=4, action_mode="flexible", macro_k=3)
    env.reset(options={"task": task4})
    empties = [i for i, c in enumerate(env.state.cells) if c == 0]
    solution = task4.payload["solution"]
    fills = [f"value({solution[i]}, r{i // 4 + 1}c{i % 4 + 1})" for i in empties]
    for fill in fills[:-1]:
        env.step(f"ACTION: {fill}")
    # the last empty cell solves it; the action after it is never tried (it would be illegal: r1c2 is a given)
    _, _, terminated, _, info = env.step(f"ACTION: {fills[-1]}; value(2, r1c2)")
    assert terminated and info["solved"] and info["actions"] == [fills[-1]]
    assert info["error"] is None and info["reward_terms"]["valid"] == 0.0 and info["n_requested"] == 2


def test_a_format_error_requests_nothing(task4: Task) -> None:
    env = SudokuEnv(size=4, action_mode="flexible", macro_k=2)
    env.reset(options={"task": task4})
    _, _, _, _, info = env.step("ACTION: value(1, r1c1); value(3, r2c1); value(2, r2c2)")  # three > macro_k
    assert info["reward_terms"]["format"] == -1.0 and info["n_requested"] == 0 and info["actions"] == []
    _, _, _, _, info = env.step("no action here")
    assert info["n_requested"] == 0 and info["error"]
