"""``gymnasium.make_vec`` over milepost's registered ids, in both vectorisation modes.

Sync needs nothing beyond ``import milepost``: the text spaces batch as tuples of strings. Async needs
``shared_memory=False`` (``milepost.integrations.gym_vector`` says why), which ``make_vec`` there passes.
Each vector env is checked against single environments reset with the same seeds (gymnasium seeds sub-env i
with ``seed + i``): an oracle reads the single env's state, both get the same answer, and observations, rewards
and the terminated / truncated split must agree on every step, including gymnasium's next-step autoreset.
"""

from __future__ import annotations

import random
from typing import Any

import gymnasium
import numpy as np
import pytest

import milepost  # noqa: F401 - registers the Gymnasium ids
from milepost.backends.scripted import ScriptedPolicy
from milepost.errors import InputError
from milepost.integrations.gym_vector import make_vec

CASES = [
    ("milepost/Sudoku-v0", {"size": 4}),
    ("milepost/RushHour-v0", {}),
    ("milepost/WebShop-v0", {}),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("gym_id", "kwargs"), CASES, ids=[c[0].split("/")[1] for c in CASES])
def test_make_vec_matches_single_envs_over_oracle_episodes(gym_id: str, kwargs: dict[str, Any], mode: str) -> None:
    n, seed = 2, 11
    if mode == "sync":  # plain gymnasium, nothing milepost-specific
        envs = gymnasium.make_vec(gym_id, num_envs=n, vectorization_mode=mode, **kwargs)
    else:
        envs = make_vec(gym_id, n, mode, **kwargs)
    singles = [gymnasium.make(gym_id, **kwargs) for _ in range(n)]
    try:
        assert envs.num_envs == n
        assert envs.single_observation_space == singles[0].observation_space
        obs, info = envs.reset(seed=seed)
        assert isinstance(obs, tuple) and all(isinstance(o, str) for o in obs)
        assert list(obs) == [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
        assert list(info["goal_distance"]) == [env.unwrapped.rules.goal_distance for env in singles]

        oracle, rng = ScriptedPolicy("oracle"), random.Random(0)
        resetting = [False] * n  # gymnasium's default NEXT_STEP autoreset: the step after an end resets
        solved = [0] * n
        for _ in range(300):
            actions = tuple("" if resetting[i] else oracle.answer(env.unwrapped, rng) for i, env in enumerate(singles))
            obs, reward, terminated, truncated, info = envs.step(actions)
            for i, env in enumerate(singles):
                if resetting[i]:
                    assert obs[i] == env.reset()[0] and reward[i] == 0.0 and not terminated[i]
                    resetting[i] = False
                    continue
                want_obs, want_r, want_term, want_trunc, want_info = env.step(actions[i])
                assert obs[i] == want_obs
                assert reward[i] == pytest.approx(want_r)
                assert (bool(terminated[i]), bool(truncated[i])) == (want_term, want_trunc)
                assert info["reward_terms"]["outcome"][i] == want_info["reward_terms"]["outcome"]
                if want_term or want_trunc:
                    solved[i] += int(want_info["solved"])
                    resetting[i] = True
            if all(s >= 1 for s in solved):
                break
        assert solved == [1] * n, "the oracle finishes each sub-env's first episode"
        assert isinstance(reward, np.ndarray) and reward.shape == (n,)
    finally:
        envs.close()
        for env in singles:
            env.close()


def test_make_vec_takes_short_names_and_refuses_bad_settings() -> None:
    envs = make_vec("sudoku", 3, "async", size=4)
    try:
        assert envs.num_envs == 3 and len(envs.reset(seed=0)[0]) == 3
    finally:
        envs.close()
    with pytest.raises(InputError, match="unknown environment 'chess'"):
        make_vec("chess", 2)
    with pytest.raises(InputError, match="vector mode"):
        make_vec("sudoku", 2, "threads")
    with pytest.raises(InputError, match="num_envs"):
        make_vec("sudoku", 0)
    with pytest.raises(InputError, match="shared_memory"):
        make_vec("sudoku", 2, "async", vector_kwargs={"shared_memory": True})
