"""The failure curriculum generates tasks near the failures: same level or one up, same Sudoku technique tier or
Rush Hour blocker count, never a test task, appended to the pool with provenance (and restored on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.config import EnvConfig
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.grid import parse_grid
from milepost.envs.sudoku.singles import classify_singles
from milepost.io import read_jsonl
from milepost.training.config import AgentConfig, MiRAConfig, RLConfig, TrainConfig
from milepost.training.curriculum import EpisodeOutcome, FailureCurriculum, blockers, task_key
from milepost.training.trainer import train_rl
from milepost.types import Task
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


def _sudoku_pool() -> list[Task]:
    # 4x4: S2 holds 5-6 empty cells, S3 7-8
    return [make_task(*generate_easy(4, 5 + i % 2, 4, i), level="S2", split="train", index=i) for i in range(4)]


def test_sudoku_tasks_near_the_failures(tmp_path: Path) -> None:
    pool = _sudoku_pool()
    cur = FailureCurriculum(pool, fail_boost=2.0)
    outcomes = [EpisodeOutcome(pool[0].task_id, "S2", False), EpisodeOutcome(pool[0].task_id, "S2", True)]
    outcomes += [EpisodeOutcome(pool[1].task_id, "S2", False), EpisodeOutcome(pool[2].task_id, "S2", True)]
    made = cur.generate(outcomes, 6, seed=5, avoid=set())
    assert len(made) == 6 and cur.pool[-6:] == made and cur.generated_rounds == [6]
    # the most-failed task first, then in turn; same level, then one up, alternately
    sources = [t.meta["curriculum"]["from"] for t in made]
    assert set(sources) == {pool[0].task_id, pool[1].task_id} and sources[0] == pool[1].task_id
    for t in made:
        relation = t.meta["curriculum"]["relation"]
        assert (t.level, relation) in {("S2", "same level"), ("S3", "one level up")}
        empties = t.goal_distance
        assert (5 <= empties <= 6) if t.level == "S2" else (7 <= empties <= 8)
        puzzle = parse_grid(t.payload["puzzle"], 4)
        assert puzzle.count(0) == empties and classify_singles(puzzle).tier == "easy"
        assert cur.weights[t.task_id] == 3.0 and t.split == "train"
    assert {t.level for t in made} == {"S2", "S3"}
    keys = [task_key(t) for t in made]
    assert len(set(keys)) == 6 and not set(keys) & {task_key(t) for t in pool}
    # deterministic; and a test split holding those puzzles makes it pick others
    again = FailureCurriculum(_sudoku_pool()).generate(outcomes, 6, seed=5, avoid=set())
    assert [t.payload for t in again] == [t.payload for t in made]
    other = FailureCurriculum(_sudoku_pool()).generate(outcomes, 6, seed=5, avoid=set(keys))
    assert other and not {task_key(t) for t in other} & set(keys)
    # no failures, nothing made
    assert FailureCurriculum(_sudoku_pool()).generate(outcomes[-1:], 3, seed=5, avoid=set()) == []


def test_the_state_round_trips_with_the_generated_tasks() -> None:
    pool = _sudoku_pool()
    cur = FailureCurriculum(pool)
    made = cur.generate([EpisodeOutcome(pool[0].task_id, "S2", False)], 2, seed=1, avoid=set())
    state = json.loads(json.dumps(cur.state_dict()))
    fresh = FailureCurriculum(_sudoku_pool())
    fresh.load_state_dict(state)
    assert [t.task_id for t in fresh.pool] == [t.task_id for t in cur.pool]
    assert fresh.generated[0].meta["curriculum"] == made[0].meta["curriculum"]
    fresh.load_state_dict({"weights": state["weights"], "excluded": []})  # a checkpoint from before generation
    assert len(fresh.pool) == 6


def test_rush_hour_tasks_keep_the_blocker_count() -> None:
    pool = rush_tasks(7, 9, 3)
    for t in pool:
        t.split = "train"
    want = blockers(pool[1])
    cur = FailureCurriculum(pool)
    made = cur.generate([EpisodeOutcome(pool[1].task_id, "7-9", False)], 2, seed=3, avoid=set())
    assert made
    for t in made:
        assert t.env == "rushhour" and blockers(t) == want and t.level in ("7-9", "10-12")
        lo, hi = map(int, t.level.split("-"))
        assert lo <= t.meta["min_moves"] <= hi and t.meta["curriculum"]["from"] == pool[1].task_id
        assert task_key(t) not in {task_key(p) for p in pool}


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    for split, count in (("train", 12), ("test", 4)):
        for i in range(count):
            empties = 5 + i % 4
            level = "S2" if empties <= 6 else "S3"
            index = i + 100 * (split == "test")
            splits[split].append(make_task(*generate_easy(4, empties, 9, index), level=level, split=split, index=i))
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 9})


def _rows(path: Path) -> list[str]:
    return [
        json.dumps({k: v for k, v in r.items() if not k.startswith("perf/")}, sort_keys=True)
        for r in read_jsonl(path / "metrics.jsonl")
    ]


def test_a_mira_run_generates_tasks_and_resumes_with_them(data4: Path, tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    cfg = TrainConfig(
        name="gen",
        model=str(SHIPPED),
        data=str(data4),
        levels="S2-S3",
        env=EnvConfig(size=4, max_steps=6, render="hints"),
        agent=AgentConfig(memory_k=0, max_new_tokens=32, temperature=1.4),  # hot: some episodes fail
        rl=RLConfig(iterations=2, tasks_per_iter=3, samples_per_task=2, minibatches=1, lr=1e-4, is_low=0.5),
        mira=MiRAConfig(enabled=True, warmup_iterations=0, phase_iterations=1, critic_epochs=1.0, generate=2),
        threads=1,
        checkpoint_every=1,
    )
    train_rl(cfg, tmp_path / "full", progress=False)
    rows = [json.loads(r) for r in _rows(tmp_path / "full")]
    made = [r["curriculum/generated"] for r in rows]
    assert made[0] > 0 and rows[-1]["curriculum/pool"] == 12 + sum(made)
    train_rl(cfg, tmp_path / "cut", progress=False, stop_after=1)
    train_rl(cfg, tmp_path / "cut", resume=True, progress=False)
    assert _rows(tmp_path / "full") == _rows(tmp_path / "cut")


def test_generation_config_checks() -> None:
    from milepost.config import load_config
    from milepost.errors import InputError

    with pytest.raises(InputError, match=r"mira\.generate: must be >= 0"):
        load_config(TrainConfig, None, ["mira.generate=-1"])
    with pytest.raises(InputError, match=r"mira\.curriculum true"):
        load_config(TrainConfig, None, ["mira.generate=4", "mira.curriculum=false"])
    assert load_config(TrainConfig, None, ["mira.generate=4"]).mira.generate == 4
