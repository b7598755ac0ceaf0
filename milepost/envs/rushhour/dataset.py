"""Rush Hour level datasets: tasks per level and split, from the generator or from a Fogleman file.

Split rule: no board, and no two boards of one cluster, appear in two splits (or twice in one). A cluster is
identified exactly by ``Cluster.cluster_id``, the board of its smallest packed state with letters assigned in
canonical order, so two letterings of one cluster count as the same.
"""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.pool import Pool
from typing import Any

from milepost.envs.levels import Level
from milepost.envs.rushhour.board import parse_board
from milepost.envs.rushhour.env import ATOMIC_BUDGET, MACRO_BUDGET, make_task
from milepost.envs.rushhour.fogleman import FoglemanRecord, read_fogleman
from milepost.envs.rushhour.generator import GENERATOR_VERSION, generate_puzzle
from milepost.envs.rushhour.solver import solve_many
from milepost.errors import InputError
from milepost.progress import progress_bar
from milepost.types import Task

_SOLVE_CHUNK = 32


def _split(tasks: list[Task], n_train: int, seed: int, level: str) -> dict[str, list[Task]]:
    """First ``n_train`` tasks (after a seeded shuffle) train, the rest test; ids follow the split."""
    order = list(range(len(tasks)))
    random.Random(f"rushhour-split:{seed}:{level}").shuffle(order)
    out: dict[str, list[Task]] = {"train": [], "test": []}
    for rank, k in enumerate(order):
        task = tasks[k]
        split = "train" if rank < n_train else "test"
        task.split = split
        task.task_id = f"rushhour-{split}-{task.level}-{seed}-{task.index}"
        out[split].append(task)
    return out


def _generated(level: Level, seed: int, max_walls: int, pool: Pool | None, workers: int) -> Iterator[Task]:
    """Tasks of puzzle index 0, 1, 2, ... of a level, in index order, optionally computed by a process pool.

    Each index is generated and solved on its own (``generate_puzzle`` seeds from (seed, level, index)), and the
    pool's results come back in index order, so the tasks are the same for any number of workers.
    """
    if pool is None:
        index = 0
        while True:
            yield _generate_task(seed, index, level, max_walls)
            index += 1
    start = 0
    batch = 2 * workers  # enough to keep every process busy; a level's last batch wastes at most this much
    while True:
        indices = range(start, start + batch)
        yield from pool.starmap(_generate_task, [(seed, i, level, max_walls) for i in indices])
        start += batch


def _generate_task(seed: int, index: int, level: Level, max_walls: int) -> Task:
    """Puzzle ``index`` of ``level`` as a task (its cluster solved: the other tenth of the work, also in a worker)."""
    made = generate_puzzle(seed, index, level, max_walls=max_walls)
    return make_task(
        made.board,
        level=level.name,
        seed=seed,
        index=index,
        source="generated",
        meta={"generator": GENERATOR_VERSION, "search_rounds": made.rounds},
    )


def generate_level(
    level: Level,
    count: int,
    seed: int,
    *,
    max_walls: int = 0,
    workers: int = 1,
    taken: set[str] | None = None,
    progress: Callable[[int], None] | None = None,
    pool: Pool | None = None,
) -> list[Task]:
    """``count`` generated tasks of ``level``, one per cluster; puzzle ``index`` is fixed by (seed, index).

    Indices whose cluster is already in ``taken`` (updated in place) are skipped, which is how one cluster
    never lands in two splits. ``pool`` (of ``workers`` processes) generates them in parallel; without one,
    ``workers`` > 1 starts a pool for this level.
    """
    taken = set() if taken is None else taken
    tasks: list[Task] = []
    if count <= 0:
        return tasks
    if pool is None and workers > 1:
        with _pool(workers) as own:
            return generate_level(
                level, count, seed, max_walls=max_walls, workers=workers, taken=taken, progress=progress, pool=own
            )
    for task in _generated(level, seed, max_walls, pool, workers):
        if task.meta["cluster_id"] in taken:
            continue
        taken.add(task.meta["cluster_id"])
        tasks.append(task)
        if progress is not None:
            progress(1)
        if len(tasks) >= count:
            break
    return tasks


def _pool(workers: int) -> Pool:
    # spawn, not fork: the parent may hold threads (torch, tqdm's monitor) that fork would copy mid-lock.
    return multiprocessing.get_context("spawn").Pool(workers)


def file_level(
    records: Sequence[FoglemanRecord],
    level: Level,
    count: int,
    seed: int,
    source: str,
    *,
    taken: set[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Task]:
    """``count`` tasks of ``level`` drawn (seeded shuffle) from a Fogleman file's records, one per cluster.

    Raises:
        InputError: when the file has fewer distinct clusters at this level than requested, or a line whose
            MM or cluster size disagrees with the solver.
    """
    taken = set() if taken is None else taken
    pool = [rec for rec in records if level.contains(rec.min_moves)]
    random.Random(f"rushhour-file:{seed}:{level.name}").shuffle(pool)
    tasks: list[Task] = []
    pos = 0
    while len(tasks) < count and pos < len(pool):
        chunk = pool[pos : pos + _SOLVE_CHUNK]
        pos += len(chunk)
        clusters = solve_many([parse_board(rec.board) for rec in chunk])
        for rec, cluster in zip(chunk, clusters):
            if cluster.min_moves != rec.min_moves or cluster.size != rec.cluster_size:
                raise InputError(
                    f"{source}:{rec.line}: the file says {rec.min_moves} moves / cluster {rec.cluster_size}, "
                    f"the solver finds {cluster.min_moves} / {cluster.size}"
                )
            if len(tasks) >= count or cluster.cluster_id in taken:
                continue
            taken.add(cluster.cluster_id)
            tasks.append(
                make_task(
                    rec.board,
                    cluster=cluster,
                    level=level.name,
                    seed=seed,
                    index=rec.line,
                    source=f"{source}:{rec.line}",
                )
            )
            if progress is not None:
                progress(1)
    if len(tasks) < count:
        raise InputError(
            f"{source}: level {level.name} has {len(tasks)} usable boards (distinct clusters), {count} requested"
        )
    return tasks


def budget_shares(tasks: Sequence[Task]) -> dict[str, float | None]:
    """Share of tasks whose optimal solution fits the paper's budgets (the oracle's ceiling)."""
    if not tasks:
        return {f"atomic_{ATOMIC_BUDGET}_steps": None, f"slide_{MACRO_BUDGET}_moves": None}
    n = len(tasks)
    return {
        f"atomic_{ATOMIC_BUDGET}_steps": round(sum(t.meta["min_steps"] <= ATOMIC_BUDGET for t in tasks) / n, 4),
        f"slide_{MACRO_BUDGET}_moves": round(sum(t.meta["min_moves"] <= MACRO_BUDGET for t in tasks) / n, 4),
    }


def build_dataset(
    levels: Sequence[Level],
    n_train: int,
    n_test: int,
    seed: int,
    *,
    source: str = "generate",
    max_walls: int = 0,
    workers: int = 1,
    progress: bool = False,
    command: str = "",
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Tasks per split for each level, and the manifest (DESIGN: Contracts).

    Args:
        levels: Rush Hour levels (``min_moves`` ranges).
        n_train, n_test: tasks per level in each split.
        seed: fixes the generated puzzles (or the draw from the file) and the split.
        source: ``generate``, or the path of a file in Fogleman's line format.
        max_walls: walls a generated board may have.
        workers: processes for generation (the tasks are the same for any number).
        progress: show a progress bar.
        command: the command line, recorded in the manifest.

    Raises:
        InputError: negative counts, an unreadable or malformed file, too few boards in the file.
    """
    if n_train < 0 or n_test < 0 or n_train + n_test == 0:
        raise InputError(f"--train/--test must be >= 0 and not both 0 (got {n_train}, {n_test})")
    records = None if source == "generate" else read_fogleman(source)
    per_level_count = n_train + n_test
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    taken: set[str] = set()
    per_level: dict[str, dict[str, Any]] = {}
    bar = progress_bar(total=per_level_count * len(levels), desc="rushhour tasks", unit="tasks", enabled=progress)
    # One pool for every level (starting one costs a second per process); a file needs none.
    pool = _pool(workers) if records is None and workers > 1 else None
    try:
        for level in levels:
            bar.set_postfix_str(f"level {level.name}")
            if records is None:
                tasks = generate_level(
                    level,
                    per_level_count,
                    seed,
                    max_walls=max_walls,
                    workers=workers,
                    taken=taken,
                    progress=bar.update,
                    pool=pool,
                )
            else:
                tasks = file_level(records, level, per_level_count, seed, source, taken=taken, progress=bar.update)
            parts = _split(tasks, n_train, seed, level.name)
            for split, part in parts.items():
                splits[split].extend(part)
            per_level[level.name] = {
                "min_moves": [level.lo, level.hi],
                "requested": {"train": n_train, "test": n_test},
                "counts": {split: len(part) for split, part in parts.items()},
                "min_steps_range": [min(t.goal_distance for t in tasks), max(t.goal_distance for t in tasks)],
                "fits_budget_share": budget_shares(tasks),
            }
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()  # a level's last batch may still be running; its puzzles are not needed
    manifest: dict[str, Any] = {
        "env": "rushhour",
        "size": 6,
        "command": command,
        "seed": seed,
        "source": source,
        "generator": GENERATOR_VERSION if records is None else None,
        "max_walls": max_walls if records is None else None,
        "level_measure": "min_moves (Fogleman: one slide of any length is one move)",
        "goal_distance": "min_steps (one-cell steps, the atomic action)",
        "budgets": {"atomic_max_steps": ATOMIC_BUDGET, "slide_max_steps": MACRO_BUDGET},
        "dedup": "no board and no two boards of one cluster in the dataset (meta.cluster_id)",
        "levels": per_level,
        "counts": {split: len(tasks) for split, tasks in splits.items()},
    }
    return splits, manifest
