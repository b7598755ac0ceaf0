"""The rendered board is patched one cell per fill (a throughput optimisation): it must always equal a full
render of the current state, whatever path wrote the state."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.envs.sudoku import SudokuEnv, make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.render import render
from milepost.envs.sudoku.state import Fill


def board_of(obs: str) -> str:
    return obs.split("\nLast answer rejected:")[0]


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([4, 6, 9]),
    st.sampled_from(["grid", "cells", "candidates"]),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_observation_matches_full_render(n: int, style: str, overwrite: bool, seed: int) -> None:
    rng = random.Random(seed)
    puzzle, solution = generate_easy(n, n * n // 3, seed % 1000, 0)
    env = SudokuEnv(
        size=n, render=style, max_steps=200, allow_overwrite=overwrite,
        wrong_fill="continue" if overwrite else "dead_end",
    )  # fmt: skip
    obs, _ = env.reset(options={"task": make_task(puzzle, solution)})
    assert obs == render(env.state, style)
    for _ in range(40):
        r, c, d = rng.randrange(n), rng.randrange(n), rng.randint(1, n)
        action = rng.choice([f"value({d}, r{r + 1}c{c + 1})", "nonsense", f"value({d}, r{n + 2}c1)"])
        if rng.random() < 0.5 and 0 in env.state.cells:
            cell = env.state.cells.index(0)
            action = f"value({solution[cell]}, r{cell // n + 1}c{cell % n + 1})"
        obs, _, terminated, truncated, _ = env.step(action)
        assert board_of(obs) == render(env.state, style)
        if terminated or truncated:
            break


def test_state_written_outside_the_env_is_rendered() -> None:
    puzzle, solution = generate_easy(9, 20, 1, 0)
    env = SudokuEnv(render="grid")
    env.reset(options={"task": make_task(puzzle, solution)})
    cells = [i for i, d in enumerate(puzzle) if not d]
    env.state.apply(Fill(cells[0] // 9, cells[0] % 9, solution[cells[0]]))  # a planner writing directly
    fill = Fill(cells[1] // 9, cells[1] % 9, solution[cells[1]])
    obs, *_ = env.step(fill.text())
    assert obs == render(env.state, "grid")
    assert env.state.cells[cells[0]] == solution[cells[0]]


@pytest.mark.parametrize("style", ["grid", "cells"])
def test_clone_keeps_version(style: str) -> None:
    puzzle, solution = generate_easy(4, 6, 0, 0)
    env = SudokuEnv(size=4, render=style)
    env.reset(options={"task": make_task(puzzle, solution)})
    twin = env.state.clone()
    assert twin.version == env.state.version
    cell = puzzle.index(0)
    twin.apply(Fill(cell // 4, cell % 4, solution[cell]))
    assert twin.version == env.state.version + 1
