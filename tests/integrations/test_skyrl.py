"""milepost environments under SkyRL-gym's ``BaseTextEnv`` contract (skipped without the ``skyrl`` extra)."""

from __future__ import annotations

import random

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the skyrl extra is not installed: pip install 'milepost[skyrl]'")

from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from milepost.backends.scripted import ScriptedPolicy  # noqa: E402
from milepost.envs import make_env  # noqa: E402
from milepost.errors import InputError  # noqa: E402
from milepost.integrations.skyrl import MilepostTextEnv, dataset_rows, register_skyrl_envs  # noqa: E402

CASES = [("sudoku", {"size": 4}), ("rushhour", {}), ("webshop", {})]


def _task(env: str, kwargs: dict, seed: int = 3):
    return make_env(env, **kwargs).sample_task(seed)


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_oracle_plays_a_full_episode_through_skyrl_make(name: str, kwargs: dict) -> None:
    """SkyRL's loop: make from the dataset row, init, step the answers until done; the return is the
    environment's, the final step is a solve, and every observation comes back as a user message."""
    ids = register_skyrl_envs()
    assert f"milepost-{name}" in ids and register_skyrl_envs() == ids  # idempotent
    row = dataset_rows(name, [_task(name, kwargs)], kwargs)[0]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(row["env_class"], env_config={"env_kwargs": kwargs}, extras=extras)
    assert isinstance(env, BaseTextEnv) and isinstance(env, MilepostTextEnv)

    conversation, meta = env.init(row["prompt"])
    assert conversation == row["prompt"] and [m["role"] for m in conversation] == ["system", "user"]
    assert meta["task_id"] == row["task"]["task_id"] and meta["goal_distance"] > 0
    oracle, rng = ScriptedPolicy("oracle"), random.Random(0)
    rewards, done, out = [], False, None
    while not done:
        answer = oracle.answer(env.env, rng)
        out = env.step(answer)
        conversation += [{"role": "assistant", "content": answer}, *out["observations"]]
        rewards.append(out["reward"])
        done = out["done"]
        if not done:
            assert out["observations"][0]["role"] == "user"
            assert out["observations"][0]["content"].startswith("Current observation:")
        assert env.turns <= env.max_turns
    assert out is not None and out["metadata"]["solved"] and out["metadata"]["termination_reason"] == "solved"
    assert out["metadata"]["reward_terms"]["outcome"] == 1.0 and out["observations"] == []
    assert sum(rewards) == pytest.approx(1.0)  # default weights: outcome 1, and the oracle never errs
    metrics = env.get_metrics()
    assert metrics["solved"] == 1.0 and metrics["turns"] == len(rewards) and metrics["return"] == pytest.approx(1.0)
    assert len(conversation) == 2 + 2 * len(rewards) - 1  # system, user, then answer/observation pairs


def test_a_bad_answer_is_a_penalty_not_an_exception() -> None:
    kwargs = {"size": 4}
    env = MilepostTextEnv("sudoku", {"env_kwargs": kwargs}, {"task": _task("sudoku", kwargs).to_dict()})
    env.init()
    out = env.step("I do not know")
    assert out["done"] is False and out["reward"] == pytest.approx(-0.1)
    assert out["metadata"]["reward_terms"]["format"] == -1.0 and out["metadata"]["error"]
    assert out["observations"][0]["content"].endswith(f"Last answer rejected: {out['metadata']['error']}")


def test_refuses_a_task_of_another_environment() -> None:
    task = _task("rushhour", {})
    with pytest.raises(InputError, match="not sudoku"):
        MilepostTextEnv("sudoku", {"env_kwargs": {"size": 4}}, {"task": task.to_dict()})


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_step_metadata_carries_the_conventions(name: str, kwargs: dict) -> None:
    """init and every step report goal_distance, remaining_distance, optimal_advantage (A*), turn_rewards and
    env_state_hash: the oracle's A* is 0 throughout, a rejected answer's is -1 with the state's hash unchanged."""
    from milepost.integrations.conventions import CONVENTION_KEYS

    register_skyrl_envs()
    task = _task(name, kwargs)
    env = skyrl_gym.make(f"milepost-{name}", env_config={"env_kwargs": kwargs}, extras={"task": task.to_dict()})
    _, meta = env.init()
    assert set(CONVENTION_KEYS) <= set(meta) and meta["goal_distance"] == task.goal_distance
    out = env.step("ACTION: not a move")
    assert out["metadata"]["optimal_advantage"] == -1.0 and out["metadata"]["env_state_hash"] == meta["env_state_hash"]
    oracle, rng, rewards = ScriptedPolicy("oracle"), random.Random(0), [out["reward"]]
    while not out["done"]:
        out = env.step(oracle.answer(env.env, rng))
        rewards.append(out["reward"])
        assert out["metadata"]["optimal_advantage"] == 0.0
        assert out["metadata"]["turn_rewards"] == rewards
    assert out["metadata"]["remaining_distance"] == 0 and out["metadata"]["solved"]
    assert out["metadata"]["env_state_hash"] != meta["env_state_hash"]
