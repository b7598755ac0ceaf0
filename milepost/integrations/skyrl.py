"""milepost environments as SkyRL-gym text environments (``pip install 'milepost[skyrl]'``).

SkyRL's trainer builds one environment per dataset row with ``skyrl_gym.make(row["env_class"], env_config=...,
extras=row_without_prompt_and_env_class)``, calls ``init(prompt)`` for the first chat messages, then
``step(answer)`` until ``done``, appending each step's ``observations`` (chat messages) to the conversation.
:class:`MilepostTextEnv` is that contract over a milepost ``TextEnv``:

* ``init`` resets the environment on the row's task (``extras["task"]``, a ``Task`` record) and returns
  milepost's turn-1 prompt (goal and answer format as the system message, the observation as the user message);
* ``step`` passes the model's answer to the environment unchanged (milepost parses its ``ACTION:`` part) and
  returns the next observation as a user message, the environment's scalar reward, ``done`` on terminated or
  truncated, and as metadata the separate reward terms, the termination reason and the conventions every
  milepost adapter reports (``milepost.integrations.conventions.CONVENTION_KEYS``: ``goal_distance``,
  ``remaining_distance``, ``optimal_advantage``, ``turn_rewards``, ``env_state_hash``); ``init``'s metadata
  carries them for the start state.

``register_skyrl_envs()`` registers ``milepost-sudoku``, ``milepost-rushhour`` and ``milepost-webshop``;
:func:`dataset_rows` writes the rows a SkyRL dataset needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from milepost.agent.prompts import build_messages
from milepost.envs import ENVS, make_env
from milepost.errors import InputError
from milepost.integrations.conventions import ConventionTracker
from milepost.types import Task

__all__ = ["MilepostTextEnv", "dataset_rows", "register_skyrl_envs", "skyrl_id"]


def skyrl_id(env: str) -> str:
    """The SkyRL-gym id of a milepost environment (``sudoku`` -> ``milepost-sudoku``)."""
    return f"milepost-{env}"


def _plain(value: Any) -> dict[str, Any]:
    """A plain dict from a mapping or an OmegaConf ``DictConfig`` (SkyRL passes its config section as one)."""
    if value is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(value, DictConfig):
            resolved = OmegaConf.to_container(value, resolve=True)
            return {str(k): v for k, v in resolved.items()} if isinstance(resolved, Mapping) else {}
    except ImportError:  # omegaconf comes with skyrl-gym; a plain mapping needs nothing
        pass
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of settings, got {type(value).__name__}")
    return dict(value)


class MilepostTextEnv(BaseTextEnv):
    """One milepost episode as a SkyRL ``BaseTextEnv``.

    Args:
        env: milepost environment name (set by the registered id).
        env_config: SkyRL's per-environment config section: ``env_kwargs`` (the environment's arguments) and
            ``seed`` (reset seed, default 0).
        extras: the dataset row's other fields: ``task`` (a ``Task`` record as a dict; without one the
            environment samples a task from ``seed``) and optionally ``env_kwargs`` overriding the config's.
    """

    def __init__(self, env: str, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = _plain(env_config)
        extras = dict(extras or {})
        kwargs = {**_plain(config.get("env_kwargs")), **_plain(extras.get("env_kwargs"))}
        self.env = make_env(env, **kwargs)
        self.name = env
        task = extras.get("task")
        self.task = Task.from_dict(dict(task)) if isinstance(task, Mapping) else task
        if self.task is not None and self.task.env != env:
            raise InputError(f"task {self.task.task_id} is a {self.task.env} task, not {env}")
        self.seed = int(config.get("seed", 0))
        self.max_turns = int(self.env.max_steps)
        self.total_reward = 0.0
        self.info: dict[str, Any] = {}
        self.conventions = ConventionTracker()

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset on the task; the conversation starts with milepost's own prompt (``prompt`` is not used: the
        environment owns its observation, and :func:`dataset_rows` stores the same messages)."""
        options = {"task": self.task} if self.task is not None else None
        observation, info = self.env.reset(seed=self.seed, options=options)
        self.turns, self.total_reward, self.info = 0, 0.0, dict(info)
        messages = build_messages(self.env.goal_text(), observation)
        return messages, {"task_id": self.env.task.task_id, **self.conventions.reset(self.env, info)}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.total_reward += float(reward)
        self.info = dict(info)
        done = bool(terminated or truncated)
        messages = [] if done else [build_messages("", observation)[1]]
        metadata = {
            "reward_terms": dict(info["reward_terms"]),
            "actions": list(info["actions"]),
            "error": info["error"],
            "termination_reason": info["termination_reason"],
            "solved": bool(info["solved"]),
            **self.conventions.step(self.env, float(reward), info),
        }
        return BaseTextEnvStepOutput(observations=messages, reward=float(reward), done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """Per-episode metrics SkyRL aggregates: solved, turns, subgoals completed and the return."""
        return {
            "solved": float(bool(self.info.get("solved", False))),
            "turns": self.turns,
            "subgoals_completed": len(self.info.get("subgoals_completed", [])),
            "return": self.total_reward,
        }


def register_skyrl_envs() -> list[str]:
    """Register every milepost environment with SkyRL-gym (idempotent); returns the ids."""
    ids = []
    for name in ENVS.names():
        env_id = skyrl_id(name)
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=MilepostTextEnv, kwargs={"env": name})
        ids.append(env_id)
    return ids


def dataset_rows(env: str, tasks: Iterable[Task], env_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """SkyRL dataset rows: ``prompt`` (turn-1 messages), ``env_class`` and the ``task`` the env resets on."""
    probe = make_env(env, **dict(env_kwargs or {}))
    rows = []
    for task in tasks:
        observation, _ = probe.reset(options={"task": task})
        rows.append(
            {
                "prompt": build_messages(probe.goal_text(), observation),
                "env_class": skyrl_id(env),
                "task": task.to_dict(),
            }
        )
    return rows
