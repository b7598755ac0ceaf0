"""The verifiers adapter: ``load_environment`` builds a ``vf.MultiTurnEnv`` (verifiers 0.3.1) whose rollouts play
milepost episodes. Against a real ``milepost serve`` of the shipped checkpoint, verifiers' own ``evaluate`` with the
official ``openai`` client gives the same success rate as ``milepost eval`` on the same tasks at greedy decoding,
and the same answer, reward and exact distance at every turn."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.errors import InputError
from milepost.integrations.conventions import CONVENTION_KEYS, optimal_advantage

vf = pytest.importorskip("verifiers", reason="verifiers is not installed: pip install 'milepost[verifiers]'")

from milepost.integrations.verifiers import load_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"
MAX_STEPS = 10  # S2-S3 need at most 7 turns; a failing episode stops at 10, not at the default 50


def _content(message: Any) -> str:
    return str(message["content"] if isinstance(message, dict) else message.content)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verifiers") / "sudoku4"
    argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "0", "--test", "2", "--seed", "0"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``milepost serve`` of the shipped checkpoint on a free loopback port; its /v1 URL."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "milepost", "serve", str(CHECKPOINT), "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        line = ""
        while "serving" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not announce itself"
        yield line.split(" on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("memory_k", [None, 2], ids=["card", "memory-2"])
def test_verifiers_evaluate_matches_milepost_eval(
    data: Path, served: str, tmp_path: Path, capsys: Any, memory_k: int | None
) -> None:
    """The card's settings (no memory), and two remembered turns in every prompt (milepost's sliding window)."""
    from openai import AsyncOpenAI

    card = json.loads((CHECKPOINT / "milepost_prompt.json").read_text())
    if memory_k is not None:
        card["memory_k"] = memory_k
    model = CHECKPOINT.name  # milepost serve's model id: the directory name
    # milepost eval through the same server; an openai: policy has no local card, so its settings are spelled out.
    settings = ["--render", card["render"], "--action-mode", card["action_mode"], "--memory-k", str(card["memory_k"])]
    settings += ["--max-new-tokens", str(card["max_new_tokens"]), "--temperature", "0", "--batch-size", "1"]
    settings += ["--max-steps", str(MAX_STEPS)]
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", f"openai:{model}@{served}", *settings]
    assert main([*argv, "--n", "1", "--k", "1", "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    capsys.readouterr()
    episodes = {
        e["task_id"]: e for e in map(json.loads, (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines())
    }

    # verifiers' own evaluate with the official client; the prompt settings come from the checkpoint's card.
    env = load_environment(env="sudoku", data=str(data), card=str(CHECKPOINT), memory_k=memory_k, max_steps=MAX_STEPS)
    assert isinstance(env, vf.MultiTurnEnv)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=served, api_key="unused"))
    results = asyncio.run(env.evaluate(client, model, sampling_args={"temperature": 0.0}, max_concurrent=1))
    outputs = results["outputs"]

    milepost_rate = sum(e["success"] for e in episodes.values()) / len(episodes)
    verifiers_rate = sum(o["metrics"]["solved"] for o in outputs) / len(outputs)
    print(
        f"memory_k {card['memory_k']}: success rate verifiers {verifiers_rate:.3f}, milepost eval {milepost_rate:.3f}"
    )
    assert len(outputs) == len(episodes) == 4
    assert verifiers_rate == milepost_rate

    for out in outputs:
        info = out["info"]
        episode = episodes[info["task_id"]]
        turns = episode["turns"]
        answers = [
            _content(m) for m in out["completion"] if (m["role"] if isinstance(m, dict) else m.role) == "assistant"
        ]
        assert answers == [t["text"] for t in turns]  # the same prompts gave the same greedy answers
        assert info["turn_rewards"] == pytest.approx([t["reward"] for t in turns])
        assert out["metrics"]["solved"] == float(episode["success"])
        # the conventions under their shared names, and A* from milepost's own record of the distances
        assert set(CONVENTION_KEYS) <= set(info)
        assert info["goal_distance"] == episode["goal_distance"]
        assert info["remaining_distance"] == turns[-1]["remaining_distance"]
        distances = [episode["goal_distance"]] + [t["remaining_distance"] for t in turns]
        want = [optimal_advantage(d0, d1, len(t["actions"])) for d0, d1, t in zip(distances, distances[1:], turns)]
        assert info["optimal_advantages"] == pytest.approx([None if a == -math.inf else a for a in want])
        assert len(info["env_state_hash"]) == 64
        assert out["reward"] == pytest.approx(out["metrics"]["solved"] + 0.5 * out["metrics"]["progress"])


def test_bad_arguments_are_one_line_errors(data: Path) -> None:
    with pytest.raises(InputError, match="unknown environment"):
        load_environment(env="chess", data=str(data))
    with pytest.raises(InputError, match="needs data=DIR"):
        load_environment(env="sudoku")
    with pytest.raises(InputError, match="no test tasks at levels S5"):
        load_environment(env="sudoku", data=str(data), levels="S5")


def test_the_hub_package_loads_through_verifiers_loader(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``environments/milepost_sudoku`` is what ``pip install -e`` puts on the path; verifiers' own
    ``vf.load_environment(env_id, **args)`` imports it by its id (verifiers/legacy/utils/env_utils.py)."""
    monkeypatch.syspath_prepend(str(ROOT / "environments" / "milepost_sudoku"))
    env = vf.load_environment("milepost-sudoku", data=str(data), card=str(CHECKPOINT), limit=1)
    assert isinstance(env, vf.MultiTurnEnv) and env.env_id == "milepost-sudoku"
    rows = env.get_eval_dataset()
    assert len(rows) == 2  # one task from each of the two levels
    task = json.loads(rows[0]["info"]["milepost_task"])
    assert task["env"] == "sudoku" and task["size"] == 4
    assert (
        env.sampling_args["max_tokens"]
        == json.loads((CHECKPOINT / "milepost_prompt.json").read_text())["max_new_tokens"]
    )
