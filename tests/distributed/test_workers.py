"""Ray evaluation workers on a real local cluster (two CPUs): ``--workers 2`` plays the same episodes as
``--workers 0`` (scripted policies, and the ``hf`` backend at temperature 0: token ids, rewards, metrics), and
workers killed with ``os._exit`` at chosen episodes lose none: every episode is collected exactly once.

Run with ``make test-distributed`` (marker ``distributed``; one cluster for the module, a few seconds to start).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.cli.main import main
from milepost.datasets import load_tasks, write_dataset
from milepost.distributed.eval_pool import EvalKit, RayEvalPool
from milepost.distributed.workers import init_ray, play_on_workers
from milepost.envs import make_env
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.evaluation.failures import is_infra_failure
from milepost.evaluation.runner import EvalSpec, build_policy, evaluate
from milepost.io import read_jsonl

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    init_ray(num_cpus=2)  # the pool's own start: a one-node cluster on loopback
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tasks = []
    for level, empties in (("S2", 6), ("S4", 10)):
        for i in range(4):
            tasks.append(make_task(*generate_easy(4, empties, 9, i + empties), level=level, split="test", index=i))
    return write_dataset(tmp_path_factory.mktemp("ds") / "ds", {"train": [], "test": tasks}, {"seed": 9})


def _by_id(out: Path) -> dict[tuple[str, int], dict[str, Any]]:
    rows = list(read_jsonl(out / "episodes.jsonl"))
    by_id = {(r["task_id"], r["sample"]): r for r in rows}
    assert len(by_id) == len(rows)  # no episode twice
    return by_id


def _metrics(out: Path) -> dict[str, Any]:
    return json.loads((out / "metrics.json").read_text())


def test_scripted_policy_on_two_workers_equals_in_process(dataset: Path, tmp_path: Path) -> None:
    args = ["eval", "--env", "sudoku", "--data", str(dataset), "--policy", "noisy-oracle:0.7:format", "--n", "4"]
    args += ["--max-steps", "12", "--no-progress", "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "w0")]) == 0
    assert main([*args, "--out", str(tmp_path / "w2"), "--workers", "2"]) == 0
    local, remote = _by_id(tmp_path / "w0"), _by_id(tmp_path / "w2")
    assert len(local) == 32 and local == remote
    assert len({r["success"] for r in local.values()}) == 2  # the noise makes some fail: a real comparison
    assert _metrics(tmp_path / "w0") == _metrics(tmp_path / "w2")


def test_hf_at_temperature_zero_on_two_workers_equals_in_process(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    spec = EvalSpec(
        env="sudoku",
        data=str(dataset),
        policy=f"hf:{tiny_model_dir}",
        n=2,
        ks=[1, 2],
        limit=2,
        env_kwargs={"max_steps": 3},
        settings=AgentSettings(temperature=0.0, max_new_tokens=12, batch_size=8),
    )
    evaluate(spec, tmp_path / "w0", progress=False)
    evaluate(spec, tmp_path / "w2", progress=False, pool=RayEvalPool(2))
    local, remote = _by_id(tmp_path / "w0"), _by_id(tmp_path / "w2")
    assert len(local) == 8 and local.keys() == remote.keys()
    for key, row in local.items():
        other = remote[key]
        assert [t["completion_ids"] for t in row["turns"]] == [t["completion_ids"] for t in other["turns"]]
        assert [t["prompt_ids"] for t in row["turns"]] == [t["prompt_ids"] for t in other["turns"]]
        assert [t["reward"] for t in row["turns"]] == [t["reward"] for t in other["turns"]]
    assert sum(len(t["completion_ids"]) for r in local.values() for t in r["turns"]) > 0
    assert _metrics(tmp_path / "w0") == _metrics(tmp_path / "w2")


def test_killed_workers_lose_no_episode(dataset: Path) -> None:
    spec = EvalSpec(
        env="sudoku",
        data=str(dataset),
        policy="noisy-oracle:0.7:format",
        n=4,
        env_kwargs={"max_steps": 12},
        settings=AgentSettings(batch_size=8),
        seed=1,
    )
    tasks = load_tasks(str(dataset), "test")
    jobs = [Job(t, s) for t in tasks for s in range(4)]
    expected = run_episodes(
        lambda: make_env("sudoku", max_steps=12, size=4),
        jobs,
        build_policy(spec),
        spec.settings,
        seed=1,
        progress=False,
    )
    kit = EvalKit(spec, {"max_steps": 12, "size": 4})
    # Three episodes kill their worker on the first attempt (replayed elsewhere), one on every attempt.
    doomed = [(jobs[i].task.task_id, jobs[i].sample) for i in (0, 9, 30)]
    hopeless = (jobs[17].task.task_id, jobs[17].sample)
    faults = {**dict.fromkeys(doomed, 1), hopeless: 3}
    seen: list[tuple[str, int]] = []
    run = play_on_workers(
        kit,
        jobs,
        workers=2,
        seed=1,
        policy_name="noisy-oracle",
        on_episode=lambda ep: seen.append((ep.task_id, ep.sample)),
        max_attempts=3,
        chunk_size=4,
        faults=faults,
        progress=False,
    )
    c = run.counts
    assert sorted(seen) == sorted((j.task.task_id, j.sample) for j in jobs)  # each exactly once
    assert (c.submitted, c.collected, c.duplicated, c.exhausted) == (32, 32, 0, 1)
    # Four first-attempt chunks of 4 die (16 retries, each chunk again whole); the hopeless one's chunk dies
    # once more (4 retries, now alone), then the hopeless one alone.
    assert (c.lost_chunks, c.retried) == (4 + 1 + 1, 16 + 4) and len(run.recoveries_s) == c.lost_chunks
    want = {(e.task_id, e.sample): e.to_dict() for e in expected}
    for ep in run.episodes:
        key = (ep.task_id, ep.sample)
        if key == hopeless:
            assert is_infra_failure(ep) and "3 attempts" in ep.meta["error"]
        else:
            assert ep.to_dict() == want[key]  # a replayed episode is the one the dead worker would have returned
    print(f"fault injection: {c}")
