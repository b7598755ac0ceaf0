"""milepost environments served by OpenEnv's own ``create_app`` and driven by OpenEnv's own ``EnvClient`` over a
real uvicorn server on a free loopback port (skipped without the ``openenv`` extra)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv", reason="the openenv extra is not installed: pip install 'milepost[openenv]'")

import httpx
import uvicorn
from openenv.core.env_client import EnvClient
from openenv.core.env_server.interfaces import Environment

from milepost.backends.scripted import ScriptedPolicy
from milepost.datasets import write_dataset
from milepost.envs import make_env
from milepost.integrations.conventions import CONVENTION_KEYS, ConventionTracker
from milepost.integrations.openenv import (
    MilepostAction,
    MilepostEnvClient,
    MilepostEnvironment,
    build_app,
    uvicorn_config,
)

CASES = [("sudoku", {"size": 4}), ("rushhour", {}), ("webshop", {})]
ENV_KWARGS = {"max_steps": 40}


def _dataset(root: Path, name: str, kwargs: dict[str, Any]) -> tuple[Path, list]:
    probe = make_env(name, **kwargs)
    train = [probe.sample_task(100 + i) for i in range(2)]
    test = [probe.sample_task(i) for i in range(2)]
    for split, tasks in (("train", train), ("test", test)):
        for task in tasks:
            task.split = split
    out = write_dataset(root / name, {"train": train, "test": test}, {"env": name})
    return out, test


@contextmanager
def _server(app: Any) -> Iterator[str]:
    config = uvicorn_config(app, log_level="warning")
    config.host, config.port = "127.0.0.1", 0
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _garbled(rng: random.Random) -> str:
    pieces = ["ACTION:", "r1c1=", "9", "move", "A", "+", "ACTION: ACTION:", "\n", "🙂", "REASON: none", "click[", "]"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))


def _answers(kind: str, env: Any, rng: random.Random) -> str:
    if kind == "oracle":
        return ScriptedPolicy("oracle").answer(env, rng)
    roll = rng.random()
    if roll < 0.3:
        return _garbled(rng)
    if roll < 0.6:
        return ScriptedPolicy("random").answer(env, rng)
    return ScriptedPolicy("oracle").answer(env, rng)


def _check_same(result: Any, obs: str, reward: float | None, done: bool, info: dict, conventions: dict) -> None:
    meta = result.observation.metadata
    assert result.observation.text == obs
    assert result.reward == reward and result.done == done
    for key in CONVENTION_KEYS:
        assert meta[key] == conventions[key], key
    assert meta["remaining_distance"] == info["remaining_distance"]
    assert meta["subgoals_completed"] == info["subgoals_completed"]
    assert meta["reward_terms"] == dict(info["reward_terms"]) and meta["error"] == info["error"]


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_oracle_and_fuzzed_episodes_match_the_in_process_environment(
    tmp_path: Path, name: str, kwargs: dict[str, Any]
) -> None:
    """Every step over OpenEnv's WebSocket client gives the observation, reward, done flag and the exact
    measurements (conventions) the in-process environment gives for the same answer."""
    data, tasks = _dataset(tmp_path, name, kwargs)
    app = build_app(name, data, env_kwargs=ENV_KWARGS)
    steps = 0
    with _server(app) as url:
        for kind, task in (("oracle", tasks[0]), ("fuzz", tasks[1])):
            local = make_env(name, **{**kwargs, **ENV_KWARGS})
            tracker, rng = ConventionTracker(), random.Random(7)
            with MilepostEnvClient(base_url=url).sync() as client:
                obs, info = local.reset(options={"task": task})
                result = client.reset(task_id=task.task_id)
                _check_same(result, obs, None, False, info, tracker.reset(local, info))
                assert result.observation.metadata["task_id"] == task.task_id
                assert result.observation.goal.startswith(local.goal_text())
                done = False
                while not done:
                    answer = _answers(kind, local, rng)
                    obs, reward, terminated, truncated, info = local.step(answer)
                    done = terminated or truncated
                    result = client.step(MilepostAction(text=answer))
                    _check_same(result, obs, reward, done, info, tracker.step(local, reward, info))
                    meta = result.observation.metadata
                    assert (meta["terminated"], meta["truncated"]) == (terminated, truncated)
                    steps += 1
                state = client.state()
                assert state.task_id == task.task_id and state.done and state.step_count == local.steps
            if kind == "oracle":
                assert info["solved"] and result.observation.metadata["remaining_distance"] == 0
    print(f"{name}: {steps} steps over OpenEnv matched the in-process environment")


def test_two_concurrent_sessions_keep_their_own_episodes(tmp_path: Path) -> None:
    """Two WebSocket sessions on one server, stepped in turn: each sees only its own task, and closing one
    leaves the other playing."""
    data, tasks = _dataset(tmp_path, "sudoku", {"size": 4})
    with _server(build_app("sudoku", data, env_kwargs=ENV_KWARGS)) as url:
        a, b = MilepostEnvClient(base_url=url).sync(), MilepostEnvClient(base_url=url).sync()
        locals_ = [make_env("sudoku", size=4, **ENV_KWARGS) for _ in range(2)]
        for client, local, task in zip((a, b), locals_, tasks, strict=True):
            local.reset(options={"task": task})
            assert client.reset(task_id=task.task_id).observation.metadata["task_id"] == task.task_id
        rng = random.Random(0)
        for _ in range(2):
            for client, local in zip((a, b), locals_, strict=True):
                answer = ScriptedPolicy("oracle").answer(local, rng)
                obs, reward, *_ = local.step(answer)
                result = client.step(MilepostAction(text=answer))
                assert result.observation.text == obs and result.reward == reward
        assert a.state().task_id == tasks[0].task_id and b.state().task_id == tasks[1].task_id
        a.close()
        answer = ScriptedPolicy("oracle").answer(locals_[1], rng)
        obs, *_ = locals_[1].step(answer)
        assert b.step(MilepostAction(text=answer)).observation.text == obs
        b.close()


def test_bad_input_is_a_4xx_or_an_error_frame_and_the_server_lives_on(tmp_path: Path) -> None:
    data, tasks = _dataset(tmp_path, "sudoku", {"size": 4})
    with _server(build_app("sudoku", data, env_kwargs=ENV_KWARGS)) as url:
        assert httpx.post(f"{url}/step", json={"action": {"txt": "r1c1=1"}}).status_code == 422  # malformed action
        assert httpx.post(f"{url}/step", json={"action": "r1c1=1"}).status_code == 422
        unknown = httpx.post(f"{url}/reset", json={"task_id": "no-such-task"})
        assert unknown.status_code == 400 and "no-such-task" in unknown.json()["detail"]
        assert httpx.post(f"{url}/reset", json={"colour": "red"}).status_code == 400
        assert httpx.post(f"{url}/step", json={"action": {"text": "ACTION: r1c1=1"}}).status_code == 400  # no reset
        big = b'{"action": {"text": "' + b"x" * (2 << 20) + b'"}}'
        assert httpx.post(f"{url}/step", content=big, headers={"content-type": "application/json"}).status_code == 413
        assert httpx.post(f"{url}/sudoku/task", json={"split": "test", "index": 99}).status_code == 400
        with MilepostEnvClient(base_url=url).sync() as client:
            with pytest.raises(RuntimeError, match="step before reset"):
                client.step(MilepostAction(text="ACTION: r1c1=1"))
            with pytest.raises(RuntimeError, match="unknown task id 'nope'"):
                client.reset(task_id="nope")
            with pytest.raises(RuntimeError, match="outside split"):
                client.reset(split="test", index=5)
            result = client.reset(split="test", index=1)  # the same session, still usable
            assert result.observation.metadata["task_id"] == tasks[1].task_id
        assert httpx.get(f"{url}/health").json()["status"] == "healthy"
        assert [s["name"] for s in httpx.get(f"{url}/sudoku/splits").json()] == ["train", "test"]


def test_a_seed_resets_to_the_generators_task_and_the_token_guards_every_route(tmp_path: Path) -> None:
    data, _ = _dataset(tmp_path, "rushhour", {})
    app = build_app("rushhour", data, api_key="s3cret")
    with _server(app) as url:
        assert httpx.post(f"{url}/reset", json={}).status_code == 401
        assert httpx.get(f"{url}/schema", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200
        with pytest.raises(ConnectionError):
            MilepostEnvClient(base_url=url).sync().connect()
        with MilepostEnvClient(base_url=url, headers={"Authorization": "Bearer s3cret"}).sync() as client:
            local = make_env("rushhour")
            obs, _ = local.reset(seed=5)
            result = client.reset(seed=5)
            assert result.observation.text == obs and result.observation.metadata["task_id"] == local.task.task_id


def test_the_types_are_openenvs_own() -> None:
    assert issubclass(MilepostEnvironment, Environment) and issubclass(MilepostEnvClient, EnvClient)
    assert MilepostEnvironment.SUPPORTS_CONCURRENT_SESSIONS


def test_cli_refuses_bad_input_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from milepost.cli.main import main

    assert main(["openenv", "--env", "sudoku", "--data", str(tmp_path / "missing")]) == 2
    assert "not a dataset folder" in capsys.readouterr().err
    data, _ = _dataset(tmp_path, "sudoku", {"size": 4})
    assert main(["openenv", "--env", "rushhour", "--data", str(data)]) == 2
    assert "not rushhour" in capsys.readouterr().err
    assert main(["openenv", "--env", "sudoku", "--api-key-env", "MILEPOST_NO_SUCH_VAR_X"]) == 2


def test_openenvs_own_runtime_validator_passes_the_server(tmp_path: Path) -> None:
    """``openenv validate --url``'s checks (openenv/cli/_validation.py: validate_running_environment)."""
    from openenv.cli._validation import validate_running_environment

    data, _ = _dataset(tmp_path, "webshop", {})
    with _server(build_app("webshop", data)) as url:
        report = validate_running_environment(url)
    assert report["passed"], [c for c in report["criteria"] if not c["passed"]]


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_each_environment_has_a_manifest_naming_an_app_that_builds(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sys

    import yaml

    root = Path(__file__).resolve().parents[2] / "deploy" / "openenv"
    manifest = yaml.safe_load((root / name / "openenv.yaml").read_text(encoding="utf-8"))
    assert manifest["name"] == f"milepost-{name}" and manifest["runtime"] == "fastapi" and manifest["port"] == 8000
    module, _, attr = manifest["app"].partition(":")
    data, _ = _dataset(tmp_path, name, dict(CASES)[name])
    monkeypatch.setenv("MILEPOST_ENV", name)
    monkeypatch.setenv("MILEPOST_DATA", str(data))
    monkeypatch.delitem(sys.modules, module, raising=False)
    app = getattr(importlib.import_module(module), attr)
    with _server(app) as url:
        assert httpx.get(f"{url}/metadata").json()["name"] == f"milepost-{name}"
    assert "--env" in (root / "Dockerfile").read_text(encoding="utf-8")


def test_a_malformed_or_oversized_websocket_message_ends_only_its_own_request_or_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenEnv's generic client sends what it is given: a malformed action is an error frame (the session lives
    on, one log line), a frame over the size limit closes that session only, and past --max-sessions a new
    session is refused without evicting the open ones."""
    from openenv.core.generic_client import GenericEnvClient

    data, tasks = _dataset(tmp_path, "sudoku", {"size": 4})
    with _server(build_app("sudoku", data, env_kwargs=ENV_KWARGS, max_sessions=2)) as url:
        a, b = GenericEnvClient(base_url=url).sync(), MilepostEnvClient(base_url=url).sync()
        a.reset(task_id=tasks[0].task_id)
        b.reset(task_id=tasks[1].task_id)
        with (
            caplog.at_level("WARNING", logger="milepost.openenv"),
            pytest.raises(RuntimeError, match="VALIDATION_ERROR"),
        ):
            a.step({"txt": "ACTION: value(1, r1c1)"})
        assert [r.getMessage() for r in caplog.records if "malformed action" in r.getMessage()]
        assert a.step({"text": "nonsense"}).observation["metadata"]["task_id"] == tasks[0].task_id
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
            MilepostEnvClient(base_url=url).sync().reset(task_id=tasks[0].task_id)
        with pytest.raises(Exception):  # noqa: B017 - the websockets library's ConnectionClosed
            a.step({"text": "x" * (2 << 20)})
        assert b.step(MilepostAction(text="nonsense")).observation.metadata["task_id"] == tasks[1].task_id
        b.close()


def test_many_concurrent_sessions_each_play_their_own_episode(tmp_path: Path) -> None:
    """Sixteen async sessions at once, four on each of four seeded tasks, each an oracle episode: every one is
    solved, with its own task id, and the sessions of one task play identical episodes."""
    import asyncio

    data, _ = _dataset(tmp_path, "rushhour", {})

    async def play(url: str, i: int) -> tuple[str, int, list[float]]:
        local = make_env("rushhour", **ENV_KWARGS)
        local.reset(seed=300 + i)
        async with MilepostEnvClient(base_url=url) as client:
            result = await client.reset(seed=300 + i)
            rng, turns = random.Random(i), 0
            while not result.done:
                answer = ScriptedPolicy("oracle").answer(local, rng)
                local.step(answer)
                result = await client.step(MilepostAction(text=answer))
                turns += 1
            meta = result.observation.metadata
            assert meta["solved"] and meta["task_id"] == local.task.task_id
            return meta["task_id"], turns, meta["turn_rewards"]

    async def main(url: str) -> list[tuple[str, int, list[float]]]:
        return await asyncio.gather(*(play(url, i % 4) for i in range(16)))

    with _server(build_app("rushhour", data, env_kwargs=ENV_KWARGS)) as url:
        results = asyncio.run(main(url))
    by_task: dict[str, set[tuple[int, tuple[float, ...]]]] = {}
    for task_id, turns, rewards in results:
        assert len(rewards) == turns
        by_task.setdefault(task_id, set()).add((turns, tuple(rewards)))
    assert len(by_task) == 4 and all(len(v) == 1 for v in by_task.values())  # same seed, same episode
