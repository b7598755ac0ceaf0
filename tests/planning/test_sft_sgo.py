"""Milestone-conditioned SFT data: with ``agent.agent_kind: sgo`` the demonstrations carry the plan and
progress in the prompt and a correct PROGRESS line in the answer, exactly as the SGO agent sees them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.parsing import parse_answer
from milepost.backends.hf import HFBackend
from milepost.config import EnvConfig, load_config
from milepost.errors import InputError
from milepost.planning import parse_progress
from milepost.training.config import AgentConfig, SFTConfig, TrainConfig
from milepost.training.setup import prompt_corpus
from milepost.training.sft import demonstrations
from tests.planning.fakes import sudoku_tasks


def _cfg(kind: str) -> TrainConfig:
    return TrainConfig(
        model="unused",
        data="unused",
        env=EnvConfig(size=4, max_steps=12, render="cells"),
        agent=AgentConfig(memory_k=1, agent_kind=kind),
        sft=SFTConfig(tasks=4),
        threads=1,
    )


def test_sgo_demonstrations_condition_on_the_plan(tiny_model_dir: Path) -> None:
    backend = HFBackend(tiny_model_dir)
    tasks = sudoku_tasks(3, 8, seed=11)
    plain = demonstrations(_cfg("plain"), tasks, backend, progress=False)
    sgo = demonstrations(_cfg("sgo"), tasks, backend, progress=False)
    assert len(plain) == len(sgo) == 3 * 8
    for example in sgo:
        prompt = backend.decode(example.prompt_ids)
        answer = backend.decode(example.completion_ids)
        assert "Plan:\n1. [" in prompt and "[current]" in prompt and "PROGRESS: done=N,N" in prompt
        claim = parse_progress(answer)
        assert claim.present and claim.current is not None
        # The prompt's current subgoal is the one the answer names.
        assert f"{claim.current}. [current]" in prompt
    assert all("Plan:" not in backend.decode(e.prompt_ids) for e in plain)

    # The moves are the same oracle's: only their order within the plan and the reflection differ. Every
    # demonstration fills one empty cell with its solution digit, so both sets hold the same fills.
    def fills(examples: list) -> list[str]:  # type: ignore[type-arg]
        return sorted(parse_answer(backend.decode(e.completion_ids)).action for e in examples)

    solution_fills = []
    for task in tasks:
        puzzle, solution = task.payload["puzzle"], task.payload["solution"]
        solution_fills += [f"value({solution[i]}, r{i // 4 + 1}c{i % 4 + 1})" for i, c in enumerate(puzzle) if c == "0"]
    assert fills(sgo) == fills(plain) == sorted(solution_fills)
    plain_order = [parse_answer(backend.decode(e.completion_ids)).action for e in plain]
    sgo_order = [parse_answer(backend.decode(e.completion_ids)).action for e in sgo]
    assert plain_order != sgo_order  # the plan reorders them


def test_agent_kind_is_validated_and_feeds_the_tokenizer_corpus() -> None:
    with pytest.raises(InputError, match=r"agent\.agent_kind"):
        load_config(TrainConfig, None, ["agent.agent_kind=clever"])
    corpus = prompt_corpus(_cfg("sgo"))
    assert any(text.startswith("Plan:\n1. [current]") for text in corpus)
    assert any(text.startswith("PROGRESS: done=") for text in corpus)
    assert not any("Plan:" in text for text in prompt_corpus(_cfg("plain")))


def test_sgo_demonstration_prompts_are_the_evaluation_prompts(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token for token: the SGO demonstrations' prompts (plan checklist, progress, replans after noisy turns)
    are the prompts the evaluation's SGO agent sends the model through ``HFBackend.generate`` in the same
    states. The evaluation side plays the same demonstrator's answers, so both runs visit the same states."""
    import dataclasses

    from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
    from milepost.backends.scripted import ScriptedPolicy
    from milepost.evaluation.runner import EvalSpec, build_agent
    from milepost.training.setup import env_factory
    from milepost.types import Completion

    backend = HFBackend(tiny_model_dir)
    cfg = dataclasses.replace(_cfg("sgo"), sft=SFTConfig(tasks=4, noise=0.3, cell_first=True))
    cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, memory_k=1, max_new_tokens=2))
    tasks = sudoku_tasks(4, 8, seed=5)
    # Every turn of the demonstration episodes, error turns included (the training keeps only the oracle's).
    recorded: list[list[int]] = []
    real = ScriptedPolicy.act

    def record(self: ScriptedPolicy, episodes: Sequence[Any]) -> list[Completion]:
        out = real(self, episodes)
        recorded.extend(list(c.prompt_ids) for c in out)
        return out

    monkeypatch.setattr(ScriptedPolicy, "act", record)
    examples = demonstrations(cfg, tasks, backend, progress=False)
    monkeypatch.undo()
    assert {tuple(e.prompt_ids) for e in examples} <= {tuple(p) for p in recorded}

    demonstrator = ScriptedPolicy("noisy-oracle", 0.7, "illegal", style={"cell_first": True})
    settings = AgentSettings(memory_k=1, temperature=0.0, max_new_tokens=2)
    model_policy = BackendPolicy(backend, settings)

    class Evaluated:  # the model's prompt through the real generation path; the demonstrator's answer
        name = "evaluated"

        def act(self, episodes: Sequence[Any]) -> list[Completion]:
            generated = model_policy.act(episodes)
            answers = demonstrator.act(episodes)
            return [dataclasses.replace(a, prompt_ids=g.prompt_ids) for g, a in zip(generated, answers, strict=True)]

    episodes = run_episodes(
        env_factory(cfg, 4),
        [Job(t) for t in tasks],
        Evaluated(),
        settings,
        seed=cfg.seed,
        progress=False,
        agent=build_agent(EvalSpec(env="sudoku", data="unused", policy="oracle", agent="sgo"), None),
    )
    evaluated = [list(turn.prompt_ids) for ep in episodes for turn in ep.turns]
    assert sum(ep.meta["sgo"]["replans"] for ep in episodes) > 0  # the noisy turns made the agent replan
    assert sorted(evaluated) == sorted(recorded)
