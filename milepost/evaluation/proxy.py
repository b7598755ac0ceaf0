"""The short-horizon proxy (horizon paper, section 3.1.2 and appendix B.1 / B.2, Stage 2).

"If a model has the reasoning a task needs, it should show it in a short-horizon setting": the proxy measures
*can it solve it at all* apart from *can it keep going*.

* **Sudoku, single turn**: the model writes the whole solution board in one answer (``ACTION:`` followed by the
  n x n digits, row by row; any separators). The board is checked cell by cell: the turn's correct actions are
  the empty cells it fills with the solution's digit, its requested actions the empty cells, and the task is
  solved when every cell (givens included) equals the solution. An answer without exactly n x n digits 1-n is a
  format error (no cell correct).
* **Rush Hour, compressed horizon**: the paper found a pure single-turn Rush Hour hopeless (the task needs to see
  the board after each move), so its proxy is the multi-turn game with slide moves (``move(X, dir, N)``, one
  per answer): fewer turns, the same puzzle. ``EvalSpec(single_turn=True)`` sets that mode.

``milepost eval --single-turn`` reports pass@k per level like any evaluation; ``milepost data ... --filter
RUN_DIR`` keeps the tasks some sample of such a run solved (:func:`filter_splits`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from milepost.agent.parsing import format_answer, parse_answer
from milepost.backends.base import GenerationRequest
from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.types import Completion, Episode, RewardTerms, Task, TerminationReason, Turn

SINGLE_TURN_ENVS = ("sudoku", "rushhour")
SINGLE_TURN_FORMAT = (
    "Answer as: <think>your reasoning</think> REASON: one short sentence ACTION: the solved board, {n} rows of {n} "
    "digits, rows separated by '/'"
)


def single_turn_env_kwargs(env: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The environment settings of the proxy: Sudoku one turn of unbounded fills, Rush Hour slide moves.

    Raises:
        InputError: an environment without a proxy, or settings that contradict it.
    """
    if env not in SINGLE_TURN_ENVS:
        raise InputError(f"--single-turn: no short-horizon proxy for {env} (known: {', '.join(SINGLE_TURN_ENVS)})")
    wanted: dict[str, Any] = (
        {"action_mode": "flexible", "max_steps": 1} if env == "sudoku" else {"action_mode": "slide"}
    )
    for key, value in wanted.items():
        if env_kwargs.get(key) not in (None, value):
            raise InputError(f"--single-turn sets {key} {value} for {env}; got {key} {env_kwargs[key]}")
    if env_kwargs.get("macro_k") is not None or env_kwargs.get("macro_n") is not None:
        raise InputError("--single-turn: --macro-k / --macro-n do not apply")
    return {**env_kwargs, **wanted}


def board_prompt(task: Task) -> list[dict[str, str]]:
    """The single-turn Sudoku prompt: rules, the answer format, and the puzzle as a grid."""
    from milepost.envs.sudoku import SudokuEnv
    from milepost.envs.sudoku.grid import geometry

    env = SudokuEnv(size=task.size, render="grid")
    observation, _ = env.reset(options={"task": task})
    geo = geometry(task.size)
    n = task.size
    goal = (
        f"Solve this {n}x{n} Sudoku in one answer: fill every empty cell ('.') so that each row, each column and "
        f"each {geo.box_rows}x{geo.box_cols} box holds the digits 1-{n} exactly once, and write the whole solved "
        "board."
    )
    return [
        {"role": "system", "content": f"{goal}\n{SINGLE_TURN_FORMAT.format(n=n)}"},
        {"role": "user", "content": f"Current observation:\n{observation}"},
    ]


def parse_board(text: str, n: int) -> list[int] | None:
    """The n x n digits after the answer's ACTION tag (any separators), or None if there are not exactly n x n
    digits, or one is outside 1-n."""
    action = parse_answer(text).action
    digits = [int(c) for c in action if c.isdigit()]
    if len(digits) != n * n or any(not 1 <= d <= n for d in digits):
        return None
    return digits


def check_board(task: Task, board: list[int] | None) -> tuple[int, int, bool]:
    """(empty cells filled correctly, empty cells, solved): the board against the task's solution, cell by cell."""
    puzzle = [0 if c == "." else int(c) for c in _cells(task.payload["puzzle"])]
    solution = [int(c) for c in _cells(task.payload["solution"])]
    empty = [i for i, d in enumerate(puzzle) if d == 0]
    if board is None:
        return 0, len(empty), False
    correct = sum(board[i] == solution[i] for i in empty)
    return correct, len(empty), board == solution


def _cells(text: str) -> list[str]:
    return [c for c in text if c.isdigit() or c == "."]


def scripted_board(task: Task, kind: str, p: float, rng: random.Random) -> str:
    """A scripted policy's single-turn answer: the oracle writes the solution; the noisy oracle writes each empty
    cell's solution digit with probability ``p`` and another digit otherwise; random writes any digits."""
    n = task.size
    puzzle = [0 if c == "." else int(c) for c in _cells(task.payload["puzzle"])]
    solution = [int(c) for c in _cells(task.payload["solution"])]
    board = list(solution)
    for i, given in enumerate(puzzle):
        if given:
            continue
        if kind == "random" or (kind == "noisy-oracle" and rng.random() >= p):
            others = [d for d in range(1, n + 1) if kind == "random" or d != solution[i]]
            board[i] = rng.choice(others)
    rows = ["".join(map(str, board[r * n : (r + 1) * n])) for r in range(n)]
    return format_answer("the whole solution.", "/".join(rows))


def play_single_turn(
    jobs: Sequence[Any],
    policy: Any,
    settings: Any,
    seed: int,
    on_episode: Callable[[Episode], None],
) -> None:
    """Play Sudoku ``jobs`` (``Job``: task, sample) as single-turn tasks and hand each episode to ``on_episode``.

    ``policy``: a scripted policy (``kind``, ``p``) or anything with a ``backend`` (``BackendPolicy``); model
    answers are sampled in batches of ``settings.batch_size`` with a per-episode seed.
    """
    from milepost.agent.loop import episode_seed

    batch = max(1, int(settings.batch_size))
    for start in range(0, len(jobs), batch):
        chunk = list(jobs[start : start + batch])
        seeds = [episode_seed(seed, job) for job in chunk]
        if getattr(policy, "scripted", False):
            texts = [scripted_board(job.task, policy.kind, policy.p, random.Random(s)) for job, s in zip(chunk, seeds)]
            completions = [Completion([], [], None, text, "stop") for text in texts]
        else:
            backend = getattr(policy, "backend", None)
            if backend is None:
                raise InputError(f"--single-turn: policy {getattr(policy, 'name', policy)!r} has no model backend")
            requests = [
                GenerationRequest(messages=board_prompt(job.task), params=settings.sampling(s))
                for job, s in zip(chunk, seeds)
            ]
            completions = backend.generate(requests)
        for job, s, completion in zip(chunk, seeds, completions):
            on_episode(_episode(job.task, job.sample, s, getattr(policy, "name", "?"), completion))


def _episode(task: Task, sample: int, seed: int, policy: str, completion: Completion) -> Episode:
    if completion.finish_reason in ("error", "context_overflow"):
        reason = (
            TerminationReason.BACKEND_ERROR
            if completion.finish_reason == "error"
            else TerminationReason.CONTEXT_OVERFLOW
        )
        return Episode(task.task_id, policy, sample, seed, reason, False, task.goal_distance, 0, task.level,
                       meta={"single_turn": True, "error": completion.error})  # fmt: skip
    board = parse_board(completion.text, task.size)
    correct, empty, solved = check_board(task, board)
    terms = RewardTerms(outcome=float(solved), format=-1.0 if board is None else 0.0, valid=0.0, milestone=0.0)
    turn = Turn(
        index=0,
        observation="",
        text=completion.text,
        actions=[],
        reward=float(solved),
        reward_terms=terms,
        subgoals_completed=[],
        remaining_distance=empty - correct,
        prompt_ids=completion.prompt_ids,
        completion_ids=completion.completion_ids,
        logprobs=completion.logprobs,
        correct_actions=correct,
        error=None if board is not None else f"no {task.size}x{task.size} board of digits 1-{task.size}",
        n_requested=empty if board is not None else 0,
        finish_reason=completion.finish_reason,
    )
    termination = TerminationReason.SOLVED if solved else TerminationReason.BUDGET_EXHAUSTED
    return Episode(
        task.task_id, policy, sample, seed, termination, solved, task.goal_distance, 1, task.level, turns=[turn],
        meta={"single_turn": True, "cells_correct": correct, "cells_empty": empty},
    )  # fmt: skip


# -- the dataset filter ----------------------------------------------------------------------------------------


def solved_tasks(run_dirs: Sequence[str | Path]) -> tuple[set[str], set[str]]:
    """(task ids some sample solved, task ids evaluated) over the ``episodes.jsonl`` of evaluation runs.

    Raises:
        InputError: a folder without ``episodes.jsonl``.
    """
    solved: set[str] = set()
    seen: set[str] = set()
    for run in run_dirs:
        path = Path(run) / "episodes.jsonl"
        if not path.is_file():
            raise InputError(f"--filter {run}: no episodes.jsonl (give an evaluation run folder)")
        for row in read_jsonl(path, finite=True):
            if not isinstance(row, dict) or "task_id" not in row:
                raise InputError(f"--filter {path}: not an episodes file (a record without task_id)")
            seen.add(str(row["task_id"]))
            if row.get("success") is True:
                solved.add(str(row["task_id"]))
    return solved, seen


def filter_splits(
    splits: dict[str, list[Task]], run_dirs: Sequence[str | Path]
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Keep the tasks some sample of the runs solved (the paper's Stage 2 filter).

    A split none of whose tasks the runs evaluated is kept whole (and the manifest entry says so); in a split
    they did evaluate, unsolved tasks and tasks the runs did not play are dropped.

    Returns:
        The filtered splits and a manifest entry (runs, per split: before, kept, evaluated, filtered or not).

    Raises:
        InputError: when the runs evaluated none of the dataset's tasks (made on another dataset?).
    """
    solved, seen = solved_tasks(run_dirs)
    out: dict[str, list[Task]] = {}
    info: dict[str, Any] = {"runs": [str(r) for r in run_dirs], "splits": {}}
    if not any(t.task_id in seen for tasks in splits.values() for t in tasks):
        raise InputError(
            f"--filter: the runs evaluated none of this dataset's tasks ({len(seen)} task ids seen); were they "
            "made on a dataset with the same arguments?"
        )
    for split, tasks in splits.items():
        evaluated = sum(t.task_id in seen for t in tasks)
        filtered = evaluated > 0
        out[split] = [t for t in tasks if t.task_id in solved] if filtered else list(tasks)
        info["splits"][split] = {
            "before": len(tasks),
            "evaluated": evaluated,
            "kept": len(out[split]),
            "filtered": filtered,
        }
    return out, info


def filtered_manifest(manifest: dict[str, Any], splits: dict[str, list[Task]], info: dict[str, Any]) -> dict:
    """The manifest after :func:`filter_splits`: counts recomputed, the filter recorded."""
    result = dict(manifest)
    result["filter"] = info
    if "counts" in result:
        result["counts"] = {split: len(tasks) for split, tasks in splits.items()}
    levels = result.get("levels")
    if isinstance(levels, dict):
        result["levels"] = {
            name: {**entry, "counts": {split: sum(t.level == name for t in tasks) for split, tasks in splits.items()}}
            if isinstance(entry, dict) and "counts" in entry
            else entry
            for name, entry in levels.items()
        }
    return result
