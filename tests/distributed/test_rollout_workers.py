"""``rollout.workers: 2``: the trainer's rollouts on two Ray actors equal the in-process ones (the same episodes,
in the same order, so the same updates), with the weights pushed to the actors after every update."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from milepost.config import EnvConfig
from milepost.datasets import write_dataset
from milepost.distributed.workers import init_ray
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.io import read_jsonl
from milepost.training.config import AgentConfig, EvalConfig, RLConfig, RolloutConfig, TrainConfig
from milepost.training.trainer import train_rl

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    init_ray(num_cpus=2)  # the pool's own start: a one-node cluster on loopback
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    tasks = []
    for i in range(12):
        empties = rng.randint(3, 4)
        tasks.append(make_task(*generate_easy(4, empties, 5, i), level="S1", split="train", index=i))
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", {"train": tasks, "test": []}, {"seed": 5})


def _cfg(model: Path, data: Path, workers: int) -> TrainConfig:
    return TrainConfig(
        name="w",
        model=str(model),
        data=str(data),
        env=EnvConfig(size=4, max_steps=4, render="cells"),
        agent=AgentConfig(memory_k=1, max_new_tokens=12),
        # Raw advantages (no normalisation: the random model's episodes all fail alike) and a large step, so the
        # first update changes what iteration 2 generates: the actors must have received it.
        rl=RLConfig(iterations=2, tasks_per_iter=3, samples_per_task=2, minibatches=2, lr=0.05, normalisation="none"),
        rollout=RolloutConfig(workers=workers),
        eval=EvalConfig(n=1, ks=[1], limit=1),
        threads=1,
        checkpoint_every=2,
        device="cpu",
    )


def test_two_rollout_workers_train_like_one_process(tiny_model_dir: Path, data4: Path, tmp_path: Path) -> None:
    local = train_rl(_cfg(tiny_model_dir, data4, 0), tmp_path / "w0", progress=False)
    remote = train_rl(_cfg(tiny_model_dir, data4, 2), tmp_path / "w2", progress=False)

    def rows(run: Path) -> list[dict]:
        return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in read_jsonl(run / "metrics.jsonl")]

    a, b = rows(tmp_path / "w0"), rows(tmp_path / "w2")
    assert len(a) == len(b) == 2 and a[0]["train/turns"] > 0 and a[0]["train/grad_norm"] > 0
    for x, y in zip(a, b):
        exact = {k: v for k, v in x.items() if k.startswith("rollout/") or k in ("iteration", "train/turns")}
        assert exact == {k: y[k] for k in exact}  # the same episodes: successes, turns, tokens, lengths
        assert y["loss/policy"] == pytest.approx(x["loss/policy"], rel=1e-4, abs=1e-6)
    # Iteration 2 was played by the actors with the weights of the first update: pushed, not the initial ones.
    from safetensors.torch import load_file

    # Behaviour log-probs computed in another batch differ in the last bits, and AdamW magnifies that for the
    # elements whose gradient is near zero (it divides by the gradient's own size): 98% of the weights agree to
    # 1e-4 (99.65% measured before the micro-batched update, 98.95% after it on 2026-12-01: the chunked
    # log-probs sum in another order; 57% was seen once on a machine at load 17, so this stays a quiet-machine
    # test), the largest gap stays below one step.
    wa, wb = load_file(local / "model.safetensors"), load_file(remote / "model.safetensors")
    close = sum(int(((wa[k] - wb[k]).abs() <= 1e-4).sum()) for k in wa)
    assert close >= 0.98 * sum(v.numel() for v in wa.values())
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 0.05
