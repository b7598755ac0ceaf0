"""The Rush Hour text environment: ``milepost/RushHour-v0`` in Gymnasium, ``rushhour`` in milepost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from milepost.config import EnvConfig, RewardWeights
from milepost.envs.actions import ActionMode
from milepost.envs.base import TextEnv
from milepost.envs.levels import get_level, level_of
from milepost.envs.rushhour.generator import GENERATOR_VERSION, generate_puzzle
from milepost.envs.rushhour.rules import RushHourRules, check_renderer
from milepost.envs.rushhour.solver import Cluster, solve_board
from milepost.envs.rushhour.state import Move, RushHourState
from milepost.errors import InputError
from milepost.types import Task

DEFAULT_LEVEL = "4-6"
# The paper's budgets H_max: 30 turns with one-cell actions, 20 with macro actions (slides, or several moves).
ATOMIC_BUDGET = 30
MACRO_BUDGET = 20


def make_task(
    board: str,
    *,
    cluster: Cluster | None = None,
    level: str = "",
    split: str = "",
    seed: int = 0,
    index: int = 0,
    source: str = "",
    meta: dict[str, Any] | None = None,
) -> Task:
    """A Rush Hour ``Task`` record (DESIGN: Contracts) from a board; goal distance = optimal one-cell steps.

    ``meta`` gets ``min_moves`` (Fogleman's count, which sets the level), ``min_steps``, ``cluster_size``,
    ``cluster_id`` (lettering-free identity of the cluster), the vehicle and wall counts, whether the oracle
    fits the paper's budgets, and ``source``.

    Raises:
        InputError: a malformed or unsolvable board.
    """
    cluster = cluster or solve_board(board)
    if cluster.min_steps is None or cluster.min_moves is None:
        raise InputError(f"board {board}: cannot be solved")
    level = level or getattr(level_of("rushhour", 6, cluster.min_moves), "name", "")
    tag = f"{split}-" if split else ""
    info = {
        "min_moves": cluster.min_moves,
        "min_steps": cluster.min_steps,
        "cluster_size": cluster.size,
        "cluster_id": cluster.cluster_id,
        "vehicles": cluster.layout.n,
        "walls": len(cluster.layout.walls),
        # Whether the optimal solution fits the paper's budgets H_max (the oracle's ceiling per level).
        "fits_atomic_budget": cluster.min_steps <= ATOMIC_BUDGET,
        "fits_slide_budget": cluster.min_moves <= MACRO_BUDGET,
        "source": source,
    }
    info.update(meta or {})
    return Task(
        task_id=f"rushhour-{tag}{level or 'x'}-{seed}-{index}",
        env="rushhour",
        size=6,
        level=level,
        goal_distance=cluster.min_steps,
        split=split,
        seed=seed,
        index=index,
        payload={"board": board},
        meta=info,
    )


class RushHourEnv(TextEnv[RushHourState, Move]):
    """Rush Hour as a Gymnasium text environment.

    Args:
        size: board side; only 6.
        level: level used when ``reset`` gets no task (a ``min_moves`` range such as ``10-12``; default 4-6).
        max_steps: H_max, the turn budget (default: the paper's 30 in atomic mode, 20 in the macro modes).
        action_mode: ``atomic`` (one one-cell move per turn) | ``slide`` (one ``move(X, dir, N)`` per turn) |
            ``flexible`` (up to ``macro_k`` one-cell moves, None = unbounded) | ``fixed`` (``macro_n``).
        render: observation renderer: ``grid`` (the board) | ``legal`` (the board, then a ``Legal moves:`` line
            listing the legal actions of the action mode, like the admissible commands of ALFWorld).
        max_walls: walls a generated board (``reset`` without a task) may have.
        reward_weights: weights of the reward terms in the scalar reward.
        observe: render observations (turn off for throughput when the caller reads the state directly).
        wrong_fill, allow_overwrite, subgoals: Sudoku settings that ``EnvConfig.env_kwargs`` passes to every
            environment; accepted and ignored (every Rush Hour move can be undone, and the subgoals are
            always the exit-row blockers then the exit).
    """

    def __init__(
        self,
        size: int = 6,
        level: str | None = None,
        max_steps: int | None = None,
        action_mode: str = "atomic",
        macro_k: int | None = None,
        macro_n: int | None = None,
        render: str = "grid",
        max_walls: int = 0,
        reward_weights: RewardWeights | dict[str, float] | None = None,
        observe: bool = True,
        render_mode: str | None = None,
        wrong_fill: str = "dead_end",
        allow_overwrite: bool = False,
        subgoals: Sequence[str] = ("boxes",),
    ) -> None:
        if size != 6:
            raise InputError(f"rushhour: the board is 6x6, not {size}x{size}")
        check_renderer(render)
        if max_steps is None:
            max_steps = ATOMIC_BUDGET if action_mode == "atomic" else MACRO_BUDGET
        try:
            EnvConfig(
                name="rushhour",
                size=6,
                max_steps=max_steps,
                action_mode=action_mode,
                macro_k=macro_k,
                macro_n=macro_n,
                wrong_fill=wrong_fill,
                allow_overwrite=allow_overwrite,
                subgoals=list(subgoals),
            )
        except ValueError as exc:
            raise InputError(str(exc)) from None
        if not 0 <= max_walls <= 6:
            raise InputError(f"rushhour: max_walls must be in 0-6, got {max_walls}")
        self.size = size
        self.level = get_level("rushhour", 6, level or DEFAULT_LEVEL)
        self.max_walls = max_walls
        mode = ActionMode(action_mode, macro_k, macro_n)

        def make_rules(task: Task) -> RushHourRules:
            if task.env != "rushhour":
                raise InputError(f"task {task.task_id} is a {task.env} task, not rushhour")
            return RushHourRules(task, action_mode=mode, render=render)

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
        """A freshly generated task of the env's level, deterministic in ``seed``."""
        made = generate_puzzle(seed, 0, self.level, max_walls=self.max_walls)
        return make_task(
            made.board,
            level=self.level.name,
            seed=seed,
            source="generated",
            meta={"generator": GENERATOR_VERSION},
        )
