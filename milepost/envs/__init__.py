"""Text environments. Importing this package registers them with milepost's registry (short names).

``import milepost`` already registers the Gymnasium ids (``milepost.GYMNASIUM_ENVS``), so
``gymnasium.make("milepost/Sudoku-v0", size=4)`` needs nothing else; ``register_env`` registers an id with
Gymnasium too when it is not there yet (an environment added outside that table).
"""

from __future__ import annotations

from typing import Any

import gymnasium

from milepost.registry import Registry

ENVS: Registry[Any] = Registry("environment")
GYM_IDS: dict[str, str] = {}


def register_env(name: str, gym_id: str, cls: Any) -> None:
    """Register an environment class under a short name and a Gymnasium id."""
    ENVS.register(name, cls)
    GYM_IDS[name] = gym_id
    if gym_id not in gymnasium.registry:
        gymnasium.register(id=gym_id, entry_point=cls)


def make_env(name: str, **kwargs: Any) -> Any:
    """Build a registered environment by its short name (``sudoku``, ``rushhour``)."""
    return ENVS.get(name)(**kwargs)


from milepost.envs.sudoku import SudokuEnv  # noqa: E402 - registration needs the registry above

register_env("sudoku", "milepost/Sudoku-v0", SudokuEnv)
from milepost.envs.rushhour import RushHourEnv  # noqa: E402

register_env("rushhour", "milepost/RushHour-v0", RushHourEnv)
from milepost.envs.webshop import WebShopEnv  # noqa: E402

register_env("webshop", "milepost/WebShop-v0", WebShopEnv)
