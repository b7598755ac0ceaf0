"""Shared web-shop fixtures: a small catalogue and a few generated tasks per order size."""

from __future__ import annotations

import pytest

from milepost.envs.webshop.tasks import generate_task
from milepost.types import Task

CATALOGUE = 300


def tasks_of(k: int, count: int, seed: int = 0, size: int = CATALOGUE) -> list[Task]:
    out: list[Task] = []
    index = 0
    while len(out) < count:
        task = generate_task(seed, index, k, catalogue_size=size)
        if task is not None:
            out.append(task)
        index += 1
    return out


@pytest.fixture(scope="session")
def one_item_tasks() -> list[Task]:
    return tasks_of(1, 12)


@pytest.fixture(scope="session")
def two_item_tasks() -> list[Task]:
    return tasks_of(2, 6)
