"""Worker options read from the environment: GPUs per actor (``MILEPOST_WORKER_GPUS``)."""

from __future__ import annotations

import pytest

from milepost.distributed.workers import worker_gpus
from milepost.errors import InputError


def test_worker_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MILEPOST_WORKER_GPUS", raising=False)
    assert worker_gpus() == 0.0
    monkeypatch.setenv("MILEPOST_WORKER_GPUS", "0.5")
    assert worker_gpus() == 0.5
    for bad in ("-1", "x", "nan"):
        monkeypatch.setenv("MILEPOST_WORKER_GPUS", bad)
        with pytest.raises(InputError, match="MILEPOST_WORKER_GPUS"):
            worker_gpus()


def test_an_evaluation_call_holds_at_most_two_worker_batches() -> None:
    """Episodes reach disk when their call returns: half the jobs per worker, but never past two batches."""
    from milepost.distributed.eval_pool import eval_chunk_size

    assert eval_chunk_size(160, 2, 8) == 16  # the web-shop evaluation: 10 calls, not 4 of 40
    assert eval_chunk_size(20, 2, 8) == 5  # few jobs: every worker still gets two calls
    assert eval_chunk_size(1, 4, 8) == 1
    assert eval_chunk_size(1000, 2, 64) == 128
    assert eval_chunk_size(10, 1, 0) == 2  # a nonsense batch size still gives a call of at least one batch


def test_the_ray_evaluation_pool_passes_its_chunk_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """RayEvalPool.play hands the workers calls of two batches (spec.settings.batch_size), not the pool's default."""
    from types import SimpleNamespace

    from milepost.distributed import eval_pool

    seen: dict[str, object] = {}

    def fake_play(build: object, jobs: list[object], **kwargs: object) -> object:
        seen.update(kwargs)
        return SimpleNamespace(counts=SimpleNamespace(collected=len(jobs), retried=0, exhausted=0))

    monkeypatch.setattr(eval_pool, "play_on_workers", fake_play)
    spec = SimpleNamespace(settings=SimpleNamespace(batch_size=8), seed=3, policy="oracle")
    jobs: list = list(range(160))
    eval_pool.RayEvalPool(2).play(spec, {}, jobs, on_episode=lambda ep: None, progress=False)  # type: ignore[arg-type]
    assert seen["chunk_size"] == 16 and seen["workers"] == 2 and seen["seed"] == 3
