"""``import milepost`` registers the Gymnasium environments, as Gymnasium plugins do, without loading torch."""

from __future__ import annotations

import subprocess
import sys

import gymnasium
import pytest

import milepost
from milepost.envs import ENVS, GYM_IDS


@pytest.mark.parametrize("gym_id", ["milepost/Sudoku-v0", "milepost/RushHour-v0"])
def test_import_milepost_is_enough_for_gymnasium_make(gym_id: str) -> None:
    code = (
        "import milepost, gymnasium, sys\n"
        "assert 'milepost.envs' not in sys.modules\n"
        f"env = gymnasium.make({gym_id!r})\n"
        "obs, info = env.reset(seed=0)\n"
        "assert env.observation_space.contains(obs) and info['goal_distance'] > 0\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_gymnasium_ids_and_short_names_name_the_same_classes() -> None:
    assert sorted(GYM_IDS.values()) == sorted(milepost.GYMNASIUM_ENVS)
    for name, gym_id in GYM_IDS.items():
        env = gymnasium.make(gym_id)
        assert type(env.unwrapped) is ENVS.get(name)
