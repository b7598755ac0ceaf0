"""milepost environments as a NeMo Gym resources server (``nemo-gym`` 0.7.0, NeMo-RL's environment layer).

The server is NeMo Gym's own Gymnasium-style resources server: :class:`MilepostGymServer` subclasses
``resources_servers.gymnasium.GymnasiumServer`` (nemo-gym 0.7.0, ``resources_servers/gymnasium/base.py``), itself a
``nemo_gym.base_resources_server.SimpleResourcesServer``, and serves its ``/reset`` and ``/step`` routes, used with
NeMo Gym's ``gymnasium_agent``. Each NeMo Gym session (the signed session cookie NeMo Gym's
``setup_session_middleware`` assigns, ``nemo_gym/server_utils.py``) plays its own episode. ``/reset`` takes
``task_id``, or ``split`` and ``index``, or ``seed`` beside ``responses_create_params``; ``/step`` reads the text of
the model's Responses-API output (``extract_text``) as the answer. Every ``info`` carries the conventions of
``milepost.integrations.conventions`` (``goal_distance``, ``remaining_distance``, ``optimal_advantage``,
``turn_rewards``, ``env_state_hash``) and the reward terms.

nemo-gym 0.7.0 declares ``Requires-Python >=3.13.14``; see docs/integrations.md (NeMo Gym) for the venv it ran in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from milepost.datasets import SPLITS, load_tasks, split_file
from milepost.envs import ENVS, make_env
from milepost.errors import InputError
from milepost.integrations.conventions import ConventionTracker
from milepost.types import Task

try:  # nemo-gym 0.7.0: nemo_gym/base_resources_server.py, resources_servers/gymnasium/base.py
    from nemo_gym.base_resources_server import BaseResourcesServerConfig
    from nemo_gym.openai_utils import NeMoGymResponse
    from resources_servers.gymnasium import GymnasiumServer, extract_text
except ImportError as exc:  # pragma: no cover - only without nemo-gym
    raise ImportError("milepost.integrations.nemo_gym needs nemo-gym 0.7.0 (pip install nemo-gym==0.7.0)") from exc

__all__ = ["MilepostGymConfig", "MilepostGymServer"]


class MilepostGymConfig(BaseResourcesServerConfig):
    """NeMo Gym's resources-server config plus the environment (sudoku | rushhour | webshop), an optional dataset
    folder, and keyword arguments of ``milepost.envs.make_env``."""

    env: str = "sudoku"
    data: str | None = None
    env_kwargs: dict[str, Any] = Field(default_factory=dict)


class MilepostGymServer(GymnasiumServer):
    """A NeMo Gym Gymnasium-style resources server for one milepost environment."""

    config: MilepostGymConfig
    ray_enabled = False  # as NeMo Gym's example_multi_turn_gymnasium/app.py sets it
    tasks: dict[str, Task] = Field(default_factory=dict)
    splits: dict[str, list[Task]] = Field(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if self.config.env not in ENVS.names():
            raise InputError(f"unknown environment {self.config.env!r}; choose from {', '.join(ENVS.names())}")
        if self.config.data is not None:
            folder = Path(self.config.data)
            for split in SPLITS:
                if split_file(folder, split) is not None:
                    self.splits[split] = load_tasks(folder, split)
            self.tasks = {t.task_id: t for tasks in self.splits.values() for t in tasks}

    def _task(self, metadata: dict[str, Any]) -> Task | None:
        if "task_id" in metadata:
            task = self.tasks.get(str(metadata["task_id"]))
            if task is None:
                raise InputError(f"unknown task id {metadata['task_id']!r} ({len(self.tasks)} tasks served)")
            return task
        if "split" in metadata:
            tasks = self.splits.get(str(metadata["split"]), [])
            index = metadata.get("index")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(tasks):
                raise InputError(f"index {index!r} is outside split {metadata['split']!r} ({len(tasks)} tasks)")
            return tasks[index]
        return None

    async def reset(self, metadata: dict[str, Any], session_id: str | None = None) -> tuple[str | None, dict]:
        task = self._task(metadata)
        seed = metadata.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise InputError(f"seed must be a non-negative integer, got {seed!r}")
        env = make_env(self.config.env, **self.config.env_kwargs)
        observation, info = env.reset(seed=seed, options={"task": task} if task is not None else None)
        tracker = ConventionTracker()
        conventions = tracker.reset(env, info)
        self.session_state[str(session_id)] = (env, tracker)
        return observation, {**conventions, "task_id": env.task.task_id, "goal": env.goal_text()}

    async def step(
        self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str | None = None
    ) -> tuple[str | None, float, bool, bool, dict]:
        state = self.session_state.get(str(session_id))
        if state is None:
            raise InputError("step before reset: reset the session first")
        env, tracker = state
        observation, reward, terminated, truncated, info = env.step(extract_text(action))
        conventions = tracker.step(env, reward, info)
        out = {
            **conventions,
            "task_id": env.task.task_id,
            "solved": bool(info["solved"]),
            "reward_terms": dict(info["reward_terms"]),
            "subgoals_completed": list(info["subgoals_completed"]),
            "error": info["error"],
        }
        return observation, float(reward), bool(terminated), bool(truncated), out

    def _cleanup_session(self, session_id: str | None) -> None:
        self.session_state.pop(str(session_id), None)
        super()._cleanup_session(session_id)
