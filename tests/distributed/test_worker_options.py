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
