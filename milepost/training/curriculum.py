"""Failure-driven curriculum (MiRA): each phase's failures decide the next phase's task mix.

Every training task starts with weight 1. At the end of a phase, a task that failed in a share f of its
episodes gains ``fail_boost * f``; every task at a level where episodes failed, and at the next level up (the
tasks "like" the failures, one step further out), gains ``similar_boost * f_level``. A value critic can then
filter the mix: tasks it rates hopeless (V(s_0, g) < low) or trivial (V > high) are left out while enough
others remain. Tasks are drawn without replacement in proportion to their weights.

Generation (``mira.generate``; SGO / MiRA: "analyse the agent's failure data and generate harder tasks"): at the
end of a phase, new tasks are made near the failures, from the environment's own generators: at the failed
task's level or one level up, of the same technique tier (Sudoku) or the same number of exit-row blockers (Rush
Hour). A candidate that equals a test task (Sudoku up to symmetry, Rush Hour up to cluster) or a task already in
the pool is dropped. New tasks join the pool with the weight of a task that always failed and carry their
provenance in ``meta["curriculum"]`` (the failed task, the relation, the phase).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from milepost.errors import InputError
from milepost.types import Task


class Outcome(Protocol):
    """What the curriculum reads of an episode (an ``Episode`` or a stored ``EpisodeOutcome``)."""

    @property
    def task_id(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def success(self) -> bool: ...


class EpisodeOutcome(NamedTuple):
    task_id: str
    level: str
    success: bool


class FailureCurriculum:
    def __init__(self, pool: Sequence[Task], fail_boost: float = 2.0, similar_boost: float = 1.0) -> None:
        if not pool:
            raise ValueError("curriculum: the task pool is empty")
        self.pool = list(pool)
        self.fail_boost = fail_boost
        self.similar_boost = similar_boost
        self.weights = {t.task_id: 1.0 for t in self.pool}
        self.excluded: set[str] = set()
        # Tasks the last phase end singled out: failed ones (weight raised for their own failures) and those
        # generated near failures. ``draw_stats`` measures how much of each draw they take.
        self.targeted: set[str] = set()
        self.generated: list[Task] = []  # tasks made near failures, in order (also in ``pool``)
        self.generated_rounds: list[int] = []  # tasks made per generation round
        self.draws = 0  # candidates drawn so far (candidate k of a seed is fixed)
        # Levels from the shortest horizon to the longest.
        distance: dict[str, list[int]] = defaultdict(list)
        for t in self.pool:
            distance[t.level].append(t.goal_distance)
        self.levels = sorted(distance, key=lambda lv: (sum(distance[lv]) / len(distance[lv]), lv))

    def update(self, episodes: Sequence[Outcome]) -> dict[str, float]:
        """Re-weight from one phase's episodes; returns the failure rate per level."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        by_level: dict[str, list[bool]] = defaultdict(list)
        for ep in episodes:
            by_task[ep.task_id].append(ep.success)
            by_level[ep.level].append(ep.success)
        level_fail = {lv: 1.0 - sum(s) / len(s) for lv, s in by_level.items()}
        boost: dict[str, float] = defaultdict(float)
        for lv, f in level_fail.items():
            if lv in self.levels:
                i = self.levels.index(lv)
                for near in self.levels[i : i + 2]:
                    boost[near] += self.similar_boost * f
        for t in self.pool:
            results = by_task.get(t.task_id)
            task_fail = 1.0 - sum(results) / len(results) if results else 0.0
            self.weights[t.task_id] = 1.0 + self.fail_boost * task_fail + boost[t.level]
        self.targeted = {t.task_id for t in self.pool if any(not ok for ok in by_task.get(t.task_id, []))}
        return level_fail

    def filter(self, v0: dict[str, float], low: float, high: float, min_keep: int) -> int:
        """Leave out tasks whose rated success V(s_0, g) is outside [low, high], unless fewer than
        ``min_keep`` would remain (then nothing is left out). Tasks without a rating stay. Returns how many
        were left out."""
        out = {tid for tid, v in v0.items() if v < low or v > high}
        self.excluded = out if len(self.pool) - len(out) >= min_keep else set()
        return len(self.excluded)

    def sample(self, rng: random.Random, n: int) -> list[Task]:
        """``n`` distinct tasks drawn in proportion to their weights (:func:`weighted_draw`)."""
        candidates = [t for t in self.pool if t.task_id not in self.excluded]
        return weighted_draw(rng, candidates, n, [self.weights[t.task_id] for t in candidates])

    def draw_stats(self, drawn: Sequence[Task]) -> dict[str, float]:
        """How far one draw leans on the last phase's targeted tasks (failed or generated near failures):
        their share of the candidates (what a uniform draw would give), of the sampling weight, and of the
        tasks drawn. With a large pool and few failures the weights move little, and the curriculum's draw is
        close to a uniform one; these three numbers show it."""
        candidates = [t.task_id for t in self.pool if t.task_id not in self.excluded]
        targeted = [tid for tid in candidates if tid in self.targeted]
        total = sum(self.weights[tid] for tid in candidates)
        return {
            "curriculum/targeted_pool": len(targeted) / max(len(candidates), 1),
            "curriculum/targeted_weight": sum(self.weights[tid] for tid in targeted) / max(total, 1e-9),
            "curriculum/targeted_drawn": sum(t.task_id in self.targeted for t in drawn) / max(len(drawn), 1),
        }

    def generate(self, episodes: Sequence[Outcome], count: int, seed: int, avoid: set[str]) -> list[Task]:
        """Up to ``count`` new tasks near the failed tasks of ``episodes``, appended to the pool.

        Failed tasks are taken most-failed first, in turn; each one's candidates alternate between its level and
        the next level up (when there is one). ``avoid`` holds the keys (``task_key``) of the test split; pool
        keys are avoided too. Deterministic in (``seed``, the candidates drawn so far).
        """
        by_task: dict[str, list[bool]] = defaultdict(list)
        for ep in episodes:
            by_task[ep.task_id].append(ep.success)
        known = {t.task_id: t for t in self.pool}
        failed = [
            known[tid]
            for tid, results in sorted(by_task.items(), key=lambda kv: (sum(kv[1]) / len(kv[1]), kv[0]))
            if tid in known and not all(results)
        ]
        if not failed or count <= 0:
            return []
        taken = set(avoid) | {task_key(t) for t in self.pool}
        made: list[Task] = []
        for attempt in range(count * 8):
            if len(made) >= count:
                break
            source = failed[attempt % len(failed)]
            up = (attempt // len(failed)) % 2 == 1  # each failed task: its level, then one up, in turn
            task = near_task(source, self.draws, seed, up=up)
            self.draws += 1
            if task is None or task_key(task) in taken:
                continue
            taken.add(task_key(task))
            task.meta["curriculum"] = {
                "from": source.task_id,
                "relation": "one level up" if task.level != source.level else "same level",
                "round": len(self.generated_rounds),
            }
            made.append(task)
        for task in made:
            self.pool.append(task)
            self.weights[task.task_id] = 1.0 + self.fail_boost
            self.targeted.add(task.task_id)
            self.generated.append(task)
        self.generated_rounds.append(len(made))
        return made

    def state_dict(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "excluded": sorted(self.excluded),
            "targeted": sorted(self.targeted),
            "generated": [t.to_dict() for t in self.generated],
            "generated_rounds": list(self.generated_rounds),
            "draws": self.draws,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for data in state.get("generated", []):  # checkpoints from before generation have none
            task = Task.from_dict(data)
            if task.task_id not in {t.task_id for t in self.pool}:
                self.pool.append(task)
                self.generated.append(task)
        self.generated_rounds = list(state.get("generated_rounds", []))
        self.draws = int(state.get("draws", 0))
        self.weights = dict(state["weights"])
        self.excluded = set(state["excluded"])
        if "targeted" in state:
            self.targeted = set(state["targeted"])
        else:  # checkpoints from before it was kept: a task weighs more than its level's least only if targeted
            least: dict[str, float] = {}
            for t in self.pool:
                least[t.level] = min(least.get(t.level, float("inf")), self.weights[t.task_id])
            self.targeted = {t.task_id for t in self.pool if self.weights[t.task_id] > least[t.level]}


def weighted_draw(rng: random.Random, pool: Sequence[Any], n: int, weights: Sequence[float] | None = None) -> list[Any]:
    """``n`` distinct items drawn with probabilities in proportion to ``weights`` (all 1 when None), by
    Efraimidis-Spirakis keys: one ``rng.random()`` per item in pool order, key ``u ** (1 / w)``, the ``n`` largest
    kept. Two draws from equal streams over one pool pick the same items wherever their weights agree, which is
    what lets a uniform arm (``rl.task_draw: keys``) share its tasks with a curriculum arm's. (``random`` has no
    weighted draw without replacement; ``random.choices`` draws with replacement.)"""
    w = [1.0] * len(pool) if weights is None else list(weights)
    keys = [rng.random() ** (1.0 / max(wi, 1e-9)) for wi in w]
    order = sorted(range(len(pool)), key=keys.__getitem__, reverse=True)
    return [pool[i] for i in order[: min(n, len(pool))]]


def uniform_draw(how: str, rng: random.Random, pool: Sequence[Any], n: int) -> list[Any]:
    """An iteration's ``n`` distinct tasks without a curriculum, as ``rl.task_draw`` says."""
    if how == "keys":
        return weighted_draw(rng, pool, n)
    return rng.sample(pool, min(n, len(pool)))


def draw_stream(cfg: Any) -> str:
    """Where a run's tasks come from (``RLRun.collect``): the curriculum's weighted keys (MiRA's curriculum, or
    ``rl.task_draw: keys``) or ``random.sample``. Two runs of one seed on different streams play different random
    tasks even while the curriculum's weights are equal."""
    return "keys" if (cfg.mira.enabled and cfg.mira.curriculum) or cfg.rl.task_draw == "keys" else "sample"


def task_key(task: Task) -> str:
    """What makes two tasks the same puzzle: Sudoku the canonical form (symmetry), Rush Hour the cluster."""
    if task.env == "sudoku":
        from milepost.envs.sudoku.canonical import canonical_form
        from milepost.envs.sudoku.grid import parse_grid

        return "sudoku:" + canonical_form(parse_grid(task.payload["puzzle"], task.size))
    if task.env == "rushhour":
        cluster = task.meta.get("cluster_id")
        if not cluster:
            from milepost.envs.rushhour.env import make_task as rush_task

            cluster = rush_task(task.payload["board"]).meta["cluster_id"]
        return f"rushhour:{cluster}"
    return f"{task.env}:{task.task_id}"


def blockers(task: Task) -> int:
    """Rush Hour: the vehicles blocking the exit row at the start (the puzzle's subgoals before the exit)."""
    from milepost.envs.rushhour import RushHourEnv

    env = RushHourEnv()
    env.reset(options={"task": task})
    return len(env.subgoals) - 1


def _target_level(task: Task, up: bool) -> Any:
    from milepost.envs.levels import get_level, levels_for

    table = list(levels_for(task.env, task.size))
    level = get_level(task.env, task.size, task.level)
    i = table.index(level)
    return table[i + 1] if up and i + 1 < len(table) else level


def near_task(failed: Task, k: int, seed: int, *, up: bool) -> Task | None:
    """One candidate task near ``failed`` (None when this draw finds none): the same environment, its level or
    one up, the same technique tier (Sudoku) or blocker count (Rush Hour). Candidate k of ``seed`` is fixed."""
    import random as _random

    level = _target_level(failed, up)
    index = 1_000_000 + k
    if failed.env == "sudoku":
        tier = str(failed.meta.get("tier", "easy"))
        if tier == "easy":
            from milepost.envs.sudoku import make_task
            from milepost.envs.sudoku.generator import generate_easy
            from milepost.envs.sudoku.singles import classify_singles

            empties = _random.Random(f"curriculum-empties:{seed}:{k}").randint(level.lo, level.hi)
            try:
                puzzle, solution = generate_easy(failed.size, empties, seed, index)
            except InputError:
                return None
            if classify_singles(puzzle).tier != "easy":
                return None
            meta = {"tier": "easy"}
        else:
            from milepost.envs.sudoku import make_task
            from milepost.envs.sudoku.harder import generate_graded

            made = generate_graded(tier, level, seed, index)
            if made is None or made.grade.tier != tier:
                return None
            puzzle, solution, meta = made.puzzle, made.solution, made.grade.meta()
        task = make_task(puzzle, solution, level=level.name, split="train", seed=seed, index=index, meta=meta)
        task.task_id = f"sudoku{failed.size}-gen-{level.name}-{seed}-{k}"
        return task
    if failed.env == "rushhour":
        from milepost.envs.rushhour.env import make_task as rush_task
        from milepost.envs.rushhour.generator import generate_puzzle

        want = blockers(failed)
        for j in range(6):  # blocker counts vary between draws: a few tries for the failed task's count
            try:
                made_board = generate_puzzle(seed, index * 8 + j, level)
            except InputError:
                continue
            task = rush_task(made_board.board, level=level.name, split="train", seed=seed, index=index)
            if blockers(task) == want:
                task.task_id = f"rushhour-gen-{level.name}-{seed}-{k}"
                task.meta["source"] = "generated"
                return task
        return None
    raise InputError(f"curriculum: no task generator for {failed.env}")
