"""milepost environments as a NeMo Gym resources server (nemo-gym 0.7.0's own ``GymnasiumServer``), started on a
real uvicorn server on a free loopback port and driven over HTTP with NeMo Gym's own request and response models:
an oracle episode per environment gives the in-process environment's observations, rewards and distances.

Skipped where nemo_gym is not importable: nemo-gym 0.7.0 declares Python >= 3.13.14 (see docs/integrations.md).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nemo_gym", reason="nemo-gym 0.7.0 is not installed (it needs Python >= 3.13.14)")

import httpx
import uvicorn
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.server_utils import BaseServerConfig, ServerClient
from omegaconf import OmegaConf
from resources_servers.gymnasium import EnvResetResponse, EnvStepResponse

from milepost.backends.scripted import ScriptedPolicy
from milepost.datasets import write_dataset
from milepost.envs import make_env
from milepost.integrations.conventions import CONVENTION_KEYS, ConventionTracker
from milepost.integrations.nemo_gym import MilepostGymConfig, MilepostGymServer

CASES = [("sudoku", {"size": 4, "max_steps": 40}), ("rushhour", {"max_steps": 40}), ("webshop", {"max_steps": 40})]


def _response(text: str) -> dict[str, Any]:
    """A Responses-API output holding one assistant message, as NeMo Gym's model servers return it."""
    return NeMoGymResponse(
        id="resp",
        created_at=0.0,
        model="milepost-oracle",
        object="response",
        output=[
            {
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
    ).model_dump(mode="json")


@contextmanager
def _serve(server: MilepostGymServer) -> Iterator[str]:
    config = uvicorn.Config(server.setup_webserver(), host="127.0.0.1", port=0, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(timeout=30)


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_oracle_episode_over_http_matches_the_in_process_environment(
    name: str, kwargs: dict[str, Any], tmp_path: Path
) -> None:
    probe = make_env(name, **kwargs)
    tasks = [probe.sample_task(i) for i in range(2)]
    for task in tasks:
        task.split = "test"
    data = write_dataset(tmp_path / name, {"test": tasks}, {"env": name})
    config = MilepostGymConfig(
        host="127.0.0.1", port=0, entrypoint="", name=f"milepost_{name}", env=name, data=str(data), env_kwargs=kwargs
    )
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=OmegaConf.create({})
    )
    server = MilepostGymServer(config=config, server_client=client)
    local = make_env(name, **kwargs)
    tracker = ConventionTracker()
    rng = random.Random(0)
    with _serve(server) as url, httpx.Client(base_url=url, timeout=30) as http:
        task = tasks[1]
        r = http.post("/reset", json={"responses_create_params": {"input": []}, "task_id": task.task_id})
        assert r.status_code == 200, r.text
        reset = EnvResetResponse.model_validate(r.json())
        obs, info = local.reset(options={"task": task})
        first = tracker.reset(local, info)
        assert reset.observation == obs and reset.info["task_id"] == task.task_id
        assert reset.info["goal_distance"] == task.goal_distance == first["goal_distance"]
        done, steps = False, 0
        while not done:
            answer = ScriptedPolicy("oracle").answer(local, rng)
            body = {"responses_create_params": {"input": []}, "response": _response(answer)}
            r = http.post("/step", json=body)
            assert r.status_code == 200, r.text
            step = EnvStepResponse.model_validate(r.json())
            obs, reward, terminated, truncated, info = local.step(answer)
            conv: dict[str, Any] = dict(tracker.step(local, reward, info))
            assert step.observation == obs and step.reward == float(reward)
            assert (step.terminated, step.truncated) == (terminated, truncated)
            for key in CONVENTION_KEYS:
                assert step.info[key] == conv[key], key
            done, steps = terminated or truncated, steps + 1
        assert step.info["solved"] and step.info["remaining_distance"] == 0
        assert step.info["optimal_advantage"] == 0.0  # the oracle never loses ground
        assert steps <= task.goal_distance
