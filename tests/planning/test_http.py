"""The LLM planner and judge over a real HTTP round trip to ``milepost serve`` (a tiny random model, whose
answers are garbage JSON: the episode must fall back cleanly and record why), also through ``milepost eval``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.backends.openai_compat import OpenAIBackend
from milepost.backends.scripted import ScriptedPolicy
from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import SudokuEnv
from milepost.planning import LLMJudge, LLMPlanner, SGOAgent
from milepost.planning.validator import judge_messages, parse_verdict
from milepost.serve.app import create_app
from milepost.serve.runner import BackgroundServer
from milepost.types import Subgoal
from tests.planning.fakes import sudoku_env, sudoku_tasks

NAME = "tiny"


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[BackgroundServer]:
    app = create_app(HFBackend(tiny_model_dir, max_context=1024), max_tokens_limit=64, model_name=NAME)
    with BackgroundServer(app) as running:
        yield running


@pytest.fixture(scope="module")
def remote(server: BackgroundServer) -> Iterator[OpenAIBackend]:
    with OpenAIBackend(NAME, server.base_url, max_retries=0) as backend:
        yield backend


def test_llm_planner_and_judge_over_http(remote: OpenAIBackend) -> None:
    env = sudoku_env()
    plan = LLMPlanner(remote, retries=1, max_new_tokens=40).plan(env, seed=3)
    # A random model does not write a valid plan; whatever it wrote is recorded and the fallback stands in.
    assert plan.source == "fallback" and len(plan.notes) == 3
    assert all(n.startswith(("attempt 1:", "attempt 2:")) for n in plan.notes[:2])
    assert sorted(plan.refs) == [0, 1, 2, 3]  # type: ignore[type-var]
    subgoal, state = Subgoal(0, "Complete box 1", "box 1 holds 1-4"), env.rules.render(None)
    verdict = LLMJudge(remote).judge(subgoal, state)
    # The judge decodes greedily: its verdict is the first YES / NO of the served answer to the same request.
    params = SamplingParams(temperature=0.0, max_new_tokens=8, seed=0, logprobs=False)
    served = remote.generate([GenerationRequest(messages=judge_messages(subgoal, state), params=params)])[0]
    assert served.finish_reason in ("stop", "length") and served.text
    assert verdict is parse_verdict(served.text)
    assert LLMJudge(remote).judge(subgoal, state) is verdict  # deterministic
    # A judge whose server cannot be reached abstains instead of failing the episode.
    with OpenAIBackend(NAME, "http://127.0.0.1:9/v1", max_retries=0, timeout=2.0) as dead:
        assert LLMJudge(dead).judge(subgoal, state) is None


def test_sgo_episodes_with_a_served_planner_and_judge(remote: OpenAIBackend) -> None:
    agent = SGOAgent(LLMPlanner(remote, retries=0, max_new_tokens=32), LLMJudge(remote))
    eps = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=12),
        [Job(t) for t in sudoku_tasks(2, 6)],
        ScriptedPolicy("oracle"),
        AgentSettings(),
        progress=False,
        agent=agent,
    )
    for ep in eps:
        assert ep.success
        sgo = ep.meta["sgo"]
        assert sgo["plan_source"] == "fallback" and sgo["initial_plan"]["notes"][0].startswith("attempt 1:")


def test_eval_cli_with_a_served_llm_planner(
    server: BackgroundServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [t for level, e in (("S2", 6), ("S3", 8)) for t in sudoku_tasks(2, e, seed=5, level=level)]
    data = write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 5})
    out = tmp_path / "run"
    rc = main(
        [
            "eval",
            "--env",
            "sudoku",
            "--data",
            str(data),
            "--policy",
            "oracle",
            "--agent",
            "sgo",
            "--planner",
            f"llm:openai:{NAME}@{server.base_url}",
            "--n",
            "1",
            "--k",
            "1",
            "--max-steps",
            "12",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["sgo"]["all"]["plan_fallback"] == 4 and metrics["meta"]["planner"].startswith("llm:openai")
    assert "LLM plans rejected (fallback used) | 2 | 2 | 4 |" in (out / "report.md").read_text()
    capsys.readouterr()
