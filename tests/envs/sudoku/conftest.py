from __future__ import annotations

import pytest

from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.grid import parse_grid
from milepost.types import Task

SOL4 = "1234341221434321"
PUZ4 = "0234040001430020"  # 8 empties; several legal wrong fills exist
PUZ9 = "530070000600195000098000060800060003400803001700020006060000280000419005000080079"
SOL9 = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"


@pytest.fixture
def task4() -> Task:
    return make_task(parse_grid(PUZ4), parse_grid(SOL4), level="S2", index=1)


@pytest.fixture
def task9() -> Task:
    return make_task(parse_grid(PUZ9), parse_grid(SOL9), level="L7", index=2)
