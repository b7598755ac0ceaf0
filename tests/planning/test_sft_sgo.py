"""Milestone-conditioned SFT data: with ``agent.agent_kind: sgo`` the demonstrations carry the plan and
progress in the prompt and a correct PROGRESS line in the answer, exactly as the SGO agent sees them."""

from __future__ import annotations

from pathlib import Path

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
