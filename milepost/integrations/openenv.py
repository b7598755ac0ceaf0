"""milepost environments as OpenEnv environments (``pip install 'milepost[openenv]'``; OpenEnv 0.10).

OpenEnv (meta-pytorch/OpenEnv, the ``openenv`` package) serves an ``Environment`` subclass with
``create_app(factory, ActionCls, ObservationCls, ...)``: ``/ws`` is a WebSocket session per connection, each with
its own environment made by the factory (``openenv/core/env_server/http_server.py``: ``_create_session`` calls the
factory once per connection, runs it on the session's own one-thread executor, and refuses connections past
``max_concurrent_envs``); HTTP ``/reset`` and ``/step`` make a fresh environment per request and close it, so an
episode of several turns is a WebSocket session (``EnvClient``, ``openenv/core/env_client.py``). This module is
that contract over a milepost ``TextEnv``:

* :class:`MilepostAction` ``{"text": answer}``: the model's answer, passed to ``TextEnv.step`` unchanged (it never
  raises on model output: a malformed answer is the environment's format penalty, as in process);
* :class:`MilepostObservation`: ``text`` (what the model reads), ``goal`` (the system prompt's goal), ``reward``,
  ``done``, and in ``metadata`` the conventions of ``milepost.integrations.conventions`` (``goal_distance``,
  ``remaining_distance``, ``optimal_advantage``, ``turn_rewards``, ``env_state_hash``) plus ``reward``,
  ``subgoals_completed`` / ``new_subgoals``, ``task_id``, ``terminated`` / ``truncated`` kept apart, and the
  step's reward terms and error;
* ``reset(task_id=...)`` plays a task of the data folder, ``reset(split=..., index=...)`` the OpenEnv task-API
  way, ``reset(seed=...)`` a task the environment's generator samples from that seed.

Bad input (an unknown task id, a step before reset, an unknown reset argument) raises ``InputError`` with one
line; over the WebSocket OpenEnv answers it as an error frame and the session lives on, over HTTP
:func:`build_app` maps it to a 400. :func:`build_app` also adds a bearer token (HTTP 401; a WebSocket
handshake without it is refused, a 403) and a request-body limit (413); :func:`serve` sets uvicorn's WebSocket
frame limit to the same size. :class:`MilepostEnvClient` is OpenEnv's ``EnvClient`` for these types.
"""

from __future__ import annotations

import functools
import hmac
import logging
import math
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from milepost.agent.prompts import build_messages
from milepost.datasets import SPLITS, load_tasks, split_file
from milepost.envs import ENVS, make_env
from milepost.errors import InputError
from milepost.integrations.conventions import ConventionTracker
from milepost.types import StepInfo, Task

__all__ = [
    "MilepostAction",
    "MilepostEnvClient",
    "MilepostEnvironment",
    "MilepostObservation",
    "MilepostState",
    "TaskBank",
    "build_app",
    "serve",
]

log = logging.getLogger("milepost.openenv")

MAX_BODY_BYTES = 1 << 20  # an answer is at most a few KiB; a request body or WebSocket frame past this is refused
RESET_KEYS = frozenset({"seed", "episode_id", "task_id", "split", "index"})


class MilepostAction(Action):
    """One answer of the model, as it wrote it (milepost parses its ``ACTION:`` part)."""

    text: str = Field(description="the model's answer text; the environment parses its ACTION: part")

    @model_validator(mode="wrap")
    @classmethod
    def _log_refusal(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # OpenEnv validates actions itself (422 over HTTP, an error frame on the WebSocket) and logs neither.
        try:
            return handler(data)
        except ValidationError as exc:
            log.warning("refused: a malformed action (%d problem(s): %s)", exc.error_count(), exc.errors()[0]["msg"])
            raise


class MilepostObservation(Observation):
    """What the model reads after reset or a step; the exact measurements are in ``metadata``."""

    text: str = Field(default="", description="the observation the model reads (the user message)")
    goal: str = Field(default="", description="the task's goal and answer format (the system message)")


class MilepostState(State):
    """The episode's identity and progress (``GET /state`` on a fresh environment gives the empty one)."""

    env: str = ""
    task_id: str | None = None
    goal_distance: int | None = None
    remaining_distance: int | None = None
    solved: bool = False
    done: bool = False
    termination_reason: str | None = None


class TaskBank:
    """The tasks of a data folder's splits, by id, shared read-only by every session of a server.

    Args:
        env: milepost environment name; every task must be one of its tasks.
        data: a dataset folder (``train.jsonl`` / ``test.jsonl`` or parquet, see ``milepost.datasets``), or None
            for an environment that only samples tasks from seeds.
    """

    def __init__(self, env: str, data: str | Path | None) -> None:
        if env not in ENVS.names():
            raise InputError(f"unknown environment {env!r}; choose from {', '.join(ENVS.names())}")
        self.env = env
        self.splits: dict[str, list[Task]] = {}
        if data is not None:
            folder = Path(data)
            if not folder.is_dir():
                raise InputError(f"--data {data}: not a dataset folder")
            for split in SPLITS:
                if split_file(folder, split) is not None:
                    self.splits[split] = load_tasks(folder, split)
            if not self.splits:
                raise InputError(f"--data {data}: no train or test split in it")
        self.by_id: dict[str, Task] = {}
        for tasks in self.splits.values():
            for task in tasks:
                if task.env != env:
                    raise InputError(f"--data {data}: task {task.task_id} is a {task.env} task, not {env}")
                self.by_id[task.task_id] = task
        sizes = {task.size for task in self.by_id.values()}
        if len(sizes) > 1:
            raise InputError(f"--data {data}: tasks of several board sizes {sorted(sizes)}; serve one size")
        self.size = sizes.pop() if sizes else None

    def task(self, task_id: str) -> Task:
        try:
            return self.by_id[task_id]
        except KeyError:
            raise InputError(f"unknown task id {task_id!r} (this server has {len(self.by_id)} tasks)") from None

    def at(self, split: str, index: int) -> Task:
        tasks = self.splits.get(split)
        if tasks is None:
            raise InputError(f"unknown split {split!r}; this server has {', '.join(self.splits) or 'none'}")
        if not 0 <= index < len(tasks):
            raise IndexError(index)  # OpenEnv's task routes turn IndexError into a 400
        return tasks[index]


def _summary(task: Task) -> dict[str, Any]:
    return {"task_id": task.task_id, "index": task.index, "level": task.level, "goal_distance": task.goal_distance}


def _refuse(message: str) -> InputError:
    log.warning("refused: %s", message)  # the one log line of a refused request
    return InputError(message)


class MilepostEnvironment(Environment[MilepostAction, MilepostObservation, MilepostState]):
    """One session's milepost episode behind OpenEnv's ``Environment`` interface.

    Made by the server's factory per WebSocket session (and per stateless HTTP request); the ``TextEnv`` is
    built on the first reset, so the factory stays cheap for the HTTP routes that only read metadata.

    Args:
        env: milepost environment name.
        bank: the server's tasks.
        env_kwargs: the environment's arguments (``max_steps``, ``render``, ...); the data's board size wins.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # one TextEnv per instance; the bank is only read

    def __init__(self, env: str, bank: TaskBank, env_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.name = env
        self.bank = bank
        self.env_kwargs = dict(env_kwargs or {})
        if bank.size is not None:
            self.env_kwargs["size"] = bank.size
        self._env: Any = None
        self._tracker = ConventionTracker()
        self._state = MilepostState(env=env)

    def _text_env(self) -> Any:
        if self._env is None:
            self._env = make_env(self.name, **self.env_kwargs)
        return self._env

    # -- OpenEnv's Environment ------------------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> MilepostObservation:
        unknown = sorted(set(kwargs) - RESET_KEYS)
        if unknown:
            raise _refuse(f"unknown reset argument(s) {', '.join(unknown)}; use task_id, split and index, or seed")
        task: Task | None = None
        task_id, split, index = kwargs.get("task_id"), kwargs.get("split"), kwargs.get("index")
        if task_id is not None:
            if not isinstance(task_id, str):
                raise _refuse(f"task_id must be a string, got {type(task_id).__name__}")
            try:
                task = self.bank.task(task_id)
            except InputError as exc:
                raise _refuse(str(exc)) from None
        elif split is not None or index is not None:
            if not isinstance(split, str) or not isinstance(index, int) or isinstance(index, bool):
                raise _refuse("reset by position needs split (a string) and index (an integer)")
            try:
                task = self.bank.at(split, index)
            except InputError as exc:
                raise _refuse(str(exc)) from None
            except IndexError:
                raise _refuse(
                    f"index {index} is outside split {split!r} ({len(self.bank.splits[split])} tasks)"
                ) from None
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise _refuse(f"seed must be a non-negative integer, got {seed!r}")
        env = self._text_env()
        observation, info = env.reset(seed=seed, options={"task": task} if task is not None else None)
        conventions = self._tracker.reset(env, info)
        self._state = MilepostState(
            episode_id=episode_id,
            step_count=0,
            env=self.name,
            task_id=env.task.task_id,
            goal_distance=info["goal_distance"],
            remaining_distance=info["remaining_distance"],
        )
        return MilepostObservation(
            text=observation,
            goal=build_messages(env.goal_text(), observation)[0]["content"],
            done=False,
            reward=None,
            metadata=self._metadata(info, 0.0, conventions, terminated=False, truncated=False),
        )

    def step(self, action: MilepostAction, timeout_s: float | None = None, **kwargs: Any) -> MilepostObservation:
        env = self._env
        if env is None or env.rules is None:
            raise _refuse("step before reset: reset the session first")
        if self._state.done:
            raise _refuse("the episode is over: reset the session for a new one")
        observation, reward, terminated, truncated, info = env.step(action.text)
        conventions = self._tracker.step(env, reward, info)
        done = bool(terminated or truncated)
        self._state = self._state.model_copy(
            update={
                "step_count": self._state.step_count + 1,
                "remaining_distance": info["remaining_distance"],
                "solved": bool(info["solved"]),
                "done": done,
                "termination_reason": info["termination_reason"],
            }
        )
        return MilepostObservation(
            text=observation,
            goal="",
            done=done,
            reward=float(reward),
            metadata=self._metadata(info, float(reward), conventions, terminated=terminated, truncated=truncated),
        )

    @property
    def state(self) -> MilepostState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        from milepost import __version__

        return EnvironmentMetadata(
            name=f"milepost-{self.name}",
            description=f"milepost {self.name}: a long-horizon text task with the exact distance to its goal",
            version=__version__,
        )

    def _metadata(
        self, info: StepInfo, reward: float, conventions: Mapping[str, Any], *, terminated: bool, truncated: bool
    ) -> dict[str, Any]:
        a_star = conventions["optimal_advantage"]
        assert a_star is None or math.isfinite(a_star)  # ConventionTracker sends -inf as None
        return {
            **conventions,
            "reward": reward,
            "task_id": self._env.task.task_id,
            "subgoals_completed": list(info["subgoals_completed"]),
            "new_subgoals": list(info["new_subgoals"]),
            "num_subgoals": info["num_subgoals"],
            "reward_terms": dict(info["reward_terms"]),
            "actions": list(info["actions"]),
            "error": info["error"],
            "steps": info["steps"],
            "solved": bool(info["solved"]),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "termination_reason": info["termination_reason"],
        }

    # -- OpenEnv's task API (TaskProvider, openenv/core/env_server/interfaces.py) ----------------------------

    def list_splits(self) -> list[str]:
        return list(self.bank.splits)

    def num_tasks(self, split: str) -> int:
        if split not in self.bank.splits:
            raise IndexError(split)
        return len(self.bank.splits[split])

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        if split not in self.bank.splits:
            raise IndexError(split)
        return [_summary(task) for task in self.bank.splits[split]]

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        try:
            return _summary(self.bank.at(split, index))
        except InputError:
            raise IndexError(split) from None

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return self.list_tasks(split)[start:stop]


# -- the server ---------------------------------------------------------------------------------------------


class _Guard:
    """ASGI middleware: the bearer token on every route but ``/health`` (HTTP 401; a WebSocket handshake is
    refused before it is accepted, which clients see as a 403), and HTTP bodies of at most ``max_bytes``."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_bytes: int) -> None:
        self.app, self.api_key, self.max_bytes = app, api_key, max_bytes

    def _authorized(self, scope: Scope) -> bool:
        if self.api_key is None or scope.get("path") == "/health":
            return True
        header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.api_key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            log.warning("refused: %s %s without a valid bearer token", scope["type"], scope.get("path"))
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            response: Response = JSONResponse({"detail": "missing or invalid API key"}, status_code=401)
            await response(scope, receive, send)
            return
        if scope["type"] == "http":
            from milepost.serve.limits import READ_TIMEOUT_S, BodyDeadline

            def refuse(status: int, message: str) -> Response:
                log.warning("refused: %s %s: %s", scope.get("method"), scope.get("path"), message)
                return JSONResponse({"detail": message}, status_code=status)

            await BodyDeadline(self.app, READ_TIMEOUT_S, self.max_bytes, refuse)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(
    env: str,
    data: str | Path | None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    max_sessions: int = 64,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Any:
    """OpenEnv's own FastAPI app (``create_app``) for one milepost environment, behind :class:`_Guard`.

    Args:
        env: ``sudoku`` | ``rushhour`` | ``webshop``.
        data: a dataset folder whose tasks ``reset(task_id=...)`` plays (None: seeds only).
        env_kwargs: the environment's arguments.
        api_key: when set, every route but ``/health`` needs ``Authorization: Bearer <api_key>``.
        max_sessions: concurrent WebSocket sessions (OpenEnv's ``max_concurrent_envs``); more are refused.
        max_body_bytes: largest HTTP request body (else a 413).
    """
    if api_key is not None and not api_key.strip():
        raise InputError("the API key must not be empty")
    if max_sessions < 1 or max_body_bytes < 1:
        raise InputError("max_sessions and max_body_bytes must be positive")
    bank = TaskBank(env, data)
    make_env(env, **{**dict(env_kwargs or {}), **({"size": bank.size} if bank.size else {})})  # bad kwargs: now
    factory = functools.partial(MilepostEnvironment, env, bank, dict(env_kwargs or {}))
    app = create_app(
        factory,
        MilepostAction,
        MilepostObservation,
        env_name=env,
        max_concurrent_envs=max_sessions,
        state_cls=MilepostState,
    )

    async def input_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    app.add_exception_handler(InputError, input_error)
    app.add_middleware(_Guard, api_key=api_key, max_bytes=max_body_bytes)
    return app


def uvicorn_config(app: Any, *, ws_max_size: int = MAX_BODY_BYTES, log_level: str = "info") -> Any:
    """uvicorn's config for the app: a WebSocket frame past ``ws_max_size`` closes that session (1009), and a
    connection whose request headers are slow is closed (``milepost.serve.limits``)."""
    import uvicorn

    from milepost.serve.limits import READ_TIMEOUT_S, header_deadline_protocol

    return uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        ws_max_size=ws_max_size,
        http=header_deadline_protocol(READ_TIMEOUT_S),
    )


def serve(app: Any, sock: socket.socket, *, ws_max_size: int = MAX_BODY_BYTES) -> None:
    """Serve the app on an already bound socket until interrupted."""
    import uvicorn

    uvicorn.Server(uvicorn_config(app, ws_max_size=ws_max_size)).run(sockets=[sock])


# -- the client ---------------------------------------------------------------------------------------------


class MilepostEnvClient(EnvClient[MilepostAction, MilepostObservation, MilepostState]):
    """OpenEnv's WebSocket client for a ``milepost openenv`` server: ``reset(task_id=...)`` / ``reset(seed=...)``,
    ``step(MilepostAction(text=...))``, ``state()``; use ``.sync()`` outside async code."""

    def _step_payload(self, action: MilepostAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[MilepostObservation]:
        fields = dict(payload.get("observation", {}))
        observation = MilepostObservation(
            text=fields.get("text", ""),
            goal=fields.get("goal", ""),
            done=bool(payload.get("done", False)),
            reward=payload.get("reward"),
            metadata=dict(payload.get("metadata") or fields.get("metadata") or {}),
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
            metadata=observation.metadata,
        )

    def _parse_state(self, payload: dict[str, Any]) -> MilepostState:
        return MilepostState.model_validate(payload)
