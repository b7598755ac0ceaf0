"""``milepost plan``: print the subgoal plan of one task and the predicate behind each subgoal."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from milepost.cli.registry_help import env_names
from milepost.envs import ENVS
from milepost.errors import InputError
from milepost.planning.planner import PLANNER_FORMS
from milepost.types import Task


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="print a task's subgoal plan and its predicates",
        description="Plan one task with the SGO planners and print the subgoals in order, each with the "
        "environment predicate it maps to (or 'judge only'), whether it holds now, and the planner's notes.",
    )
    p.add_argument("--env", required=True, help=f"environment: {env_names()}")
    p.add_argument(
        "--task",
        required=True,
        help="a Sudoku puzzle string (0 or . for empty), a 36-character Rush Hour board, or "
        "DATASET:N (a dataset folder or split file, .jsonl or .parquet; N = 0-based record of the split)",
    )
    p.add_argument("--size", type=int, default=None, help="Sudoku board side (default: from the puzzle)")
    p.add_argument("--split", default="test", help="split of a dataset folder given as DATASET:N")
    p.add_argument("--planner", default="programmatic", help=PLANNER_FORMS)
    p.add_argument("--action-mode", default=None, help="atomic | flexible | fixed | slide (Rush Hour step estimates)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run)


def load_task(env: str, text: str, size: int | None, split: str = "test") -> Task:
    """The task ``--task`` names (see the option's help).

    Raises:
        InputError: a malformed puzzle or board, a missing file, or a line number out of range.
    """
    path, sep, number = text.rpartition(":")
    if sep and number.strip().isdigit() and Path(path).exists():
        from milepost.datasets import load_tasks

        tasks = load_tasks(path, split)
        index = int(number)
        if not 0 <= index < len(tasks):
            raise InputError(f"{path}: no task {index} (the {split} split has {len(tasks)})")
        task = tasks[index]
        if task.env != env:
            raise InputError(f"{path}:{index} is a {task.env} task, not {env}")
        return task
    if env == "sudoku":
        from milepost.envs.sudoku.grid import grid_to_str, parse_grid

        puzzle = parse_grid(text, size)
        n = round(len(puzzle) ** 0.5)
        empties = sum(1 for d in puzzle if d == 0)
        # No solution in the payload: the environment solves the puzzle and refuses one that has no unique
        # solution.
        return Task(
            task_id=f"sudoku{n}-cli",
            env="sudoku",
            size=n,
            level="",
            goal_distance=empties,
            split="",
            seed=0,
            index=0,
            payload={"puzzle": grid_to_str(puzzle)},
        )
    if env == "rushhour":
        from milepost.envs.rushhour import make_task

        return make_task(text.strip())
    if env in ENVS:
        raise InputError(f"{env}: --task takes DATASET:N (a puzzle or board text is read for sudoku and rushhour)")
    raise InputError(f"unknown environment {env!r} (known: {env_names(', ')})")


def describe(plan: Any, env: Any) -> str:
    """The plan as a table: order, subgoal, predicate (environment subgoal and criterion), holds now."""
    from milepost.planning import domain_for
    from milepost.tables import md_row

    vocab = domain_for(env).vocabulary(env)
    lines = [
        f"Plan ({plan.source}, {len(plan)} subgoals) for {env.task.task_id}:",
        "",
        "| # | subgoal | predicate | holds now | est. steps | required |",
        "|---|---|---|---|---|---|",
    ]
    for goal, ref in zip(plan.subgoals, plan.refs):
        if ref is None:
            predicate = "judge only"
        else:
            term = vocab.for_env(ref)
            name = term.label if term is not None else f"subgoal {ref}"
            predicate = f"{name} (env subgoal {ref}): {env.subgoals[ref].success_criteria}"
        holds = "-" if goal.predicate is None else ("yes" if goal.predicate(env.state) else "no")
        required = "yes" if goal.required else "no"
        lines.append(md_row([goal.index + 1, goal.description, predicate, holds, goal.estimated_steps, required]))
    if plan.notes:
        lines += ["", "Notes:"] + [f"- {note}" for note in plan.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from milepost.envs import make_env
    from milepost.planning import make_planner

    task = load_task(args.env, args.task, args.size, args.split)
    kwargs: dict[str, Any] = {"size": task.size}
    if args.action_mode is not None:
        kwargs["action_mode"] = args.action_mode
    env = make_env(args.env, **kwargs)
    env.reset(options={"task": task})
    plan = make_planner(args.planner).plan(env)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print(describe(plan, env))
    return 0
