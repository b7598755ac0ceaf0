"""The Sudoku text environment, registered as ``milepost/Sudoku-v0`` (and ``sudoku`` in milepost's registry)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from milepost.config import EnvConfig, RewardWeights
from milepost.envs.actions import ActionMode
from milepost.envs.base import TextEnv
from milepost.envs.levels import get_level, levels_for
from milepost.envs.sudoku.generator import generate_easy, task_rng
from milepost.envs.sudoku.grid import grid_to_str
from milepost.envs.sudoku.rules import SudokuRules
from milepost.envs.sudoku.state import Fill, SudokuState
from milepost.errors import InputError
from milepost.types import Task


def make_task(
    puzzle: Sequence[int],
    solution: Sequence[int],
    *,
    level: str = "",
    split: str = "",
    seed: int = 0,
    index: int = 0,
    meta: dict[str, Any] | None = None,
) -> Task:
    """A Sudoku ``Task`` record (DESIGN: Contracts) from grids; goal distance = empty cells."""
    n = round(len(puzzle) ** 0.5)
    empties = sum(1 for d in puzzle if d == 0)
    tag = f"{split}-" if split else ""
    return Task(
        task_id=f"sudoku{n}-{tag}{level or 'x'}-{seed}-{index}",
        env="sudoku",
        size=n,
        level=level,
        goal_distance=empties,
        split=split,
        seed=seed,
        index=index,
        payload={"puzzle": grid_to_str(list(puzzle)), "solution": grid_to_str(list(solution))},
        meta=dict(meta or {}),
    )


class SudokuEnv(TextEnv[SudokuState, Fill]):
    """Sudoku as a Gymnasium text environment.

    Args:
        size: 9 (default), 6 or 4.
        level: level used when ``reset`` gets no task (default: the size's first level).
        max_steps: H_max, the turn budget (paper: 50).
        action_mode: ``atomic`` | ``flexible`` (up to ``macro_k``, None = unbounded) | ``fixed`` (``macro_n``).
        render: observation renderer: ``grid`` (default), ``cells`` (one character per cell), ``candidates``,
            ``hints``, ``hints_tail`` (see render.py).
        wrong_fill: ``dead_end`` ends the episode on a legal fill with a wrong digit; ``continue`` plays on.
        allow_overwrite: let non-given cells be rewritten (needed for ``continue`` to be recoverable).
        subgoals: unit kinds that become subgoals: ``boxes`` (default), ``rows``, ``cols``.
        reward_weights: weights of the reward terms in the scalar reward.
        observe: render observations (turn off for throughput when the caller reads the state directly).
    """

    def __init__(
        self,
        size: int = 9,
        level: str | None = None,
        max_steps: int = 50,
        action_mode: str = "atomic",
        macro_k: int | None = None,
        macro_n: int | None = None,
        render: str = "grid",
        wrong_fill: str = "dead_end",
        allow_overwrite: bool = False,
        subgoals: Sequence[str] = ("boxes",),
        reward_weights: RewardWeights | dict[str, float] | None = None,
        observe: bool = True,
        render_mode: str | None = None,
    ) -> None:
        if action_mode == "slide":
            raise InputError("sudoku: action_mode 'slide' is a Rush Hour mode")
        try:
            EnvConfig(
                name="sudoku",
                size=size,
                max_steps=max_steps,
                action_mode=action_mode,
                macro_k=macro_k,
                macro_n=macro_n,
                render=render,
                wrong_fill=wrong_fill,
                allow_overwrite=allow_overwrite,
                subgoals=list(subgoals),
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.size = size
        self.level = get_level("sudoku", size, level) if level else levels_for("sudoku", size)[0]
        mode = ActionMode(action_mode, macro_k, macro_n)

        def make_rules(task: Task) -> SudokuRules:
            if task.env != "sudoku":
                raise InputError(f"task {task.task_id} is a {task.env} task, not sudoku")
            if task.size != size:
                raise InputError(f"task {task.task_id} is {task.size}x{task.size}; this env is {size}x{size}")
            return SudokuRules(
                task,
                action_mode=mode,
                render_style=render,
                wrong_fill=wrong_fill,
                allow_overwrite=allow_overwrite,
                subgoal_kinds=subgoals,
            )

        super().__init__(
            make_rules,
            self.sample_task,
            max_steps=max_steps,
            action_mode=mode,
            reward_weights=reward_weights,
            observe=observe,
            render_mode=render_mode,
        )

    def sample_task(self, seed: int) -> Task:
        """A fresh easy-tier task of the env's level, deterministic in ``seed``."""
        rng = task_rng(seed, -1)
        empties = rng.randint(self.level.lo, self.level.hi)
        puzzle, solution = generate_easy(self.size, empties, seed, 0)
        return make_task(puzzle, solution, level=self.level.name, seed=seed, meta={"tier": "easy"})
