"""SFT from a teacher's trajectories: episodes a scripted policy and the tiny model played through the real loop,
replayed in the student's prompts, kept when solved (or when their moves were correct), think blocks kept."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.prompts import build_messages
from milepost.backends.base import GenerationRequest
from milepost.cli.main import main
from milepost.config import EnvConfig, load_config
from milepost.envs.sudoku import SudokuEnv
from milepost.errors import InputError
from milepost.training.config import AgentConfig, SFTConfig, TrainConfig
from milepost.training.sft import trajectory_examples

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


@pytest.fixture(scope="module")
def backend() -> Any:
    import torch

    from milepost.backends.hf import HFBackend

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return HFBackend(SHIPPED)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sft-traj") / "ds"
    argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "6", "--test", "2", "--seed", "1"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    return out


def _teacher(data: Path, out: Path, policy: str, *extra: str) -> Path:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--split", "train", "--policy", policy, "--n", "2"]
    argv += ["--k", "1", "--render", "hints", "--memory-k", "0", "--max-steps", "12", "--no-progress", *extra]
    assert main([*argv, "--out", str(out)]) == 0
    return out / "episodes.jsonl"


def _cfg(data: Path, episodes: list[Path], keep: str = "solved", **env: Any) -> TrainConfig:
    return TrainConfig(
        model=str(SHIPPED),
        data=str(data),
        env=EnvConfig(size=4, max_steps=12, render="hints", **env),
        agent=AgentConfig(memory_k=0, max_new_tokens=32),
        sft=SFTConfig(tasks=1, episodes=[str(e) for e in episodes], keep=keep, solver=False),
    )


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _clean(turn: dict[str, Any]) -> bool:
    terms = turn["reward_terms"]
    return not terms["format"] and not terms["valid"] and turn["n_requested"] > 0


def test_solved_episodes_of_a_scripted_teacher(tmp_path: Path, data: Path, backend: Any, capsys: Any) -> None:
    episodes = _teacher(data, tmp_path / "noisy", "noisy-oracle:0.6:mixed")
    rows = _rows(episodes)
    solved = [r for r in rows if r["success"]]
    assert 0 < len(solved) < len(rows)
    examples, counts = trajectory_examples(_cfg(data, [episodes]), backend, progress=False)
    kept = [t for r in solved for t in r["turns"] if _clean(t)]
    assert counts["solved"] == len(solved) and counts["mismatched"] == 0
    assert len(examples) == counts["examples"] == len(kept)
    # Targets are the teacher's texts; prompts are what the student sees (same renderer, K = 0).
    env = SudokuEnv(size=4, max_steps=12, render="hints")
    tasks = {json.loads(line)["task_id"]: line for line in (data / "train.jsonl").read_text().splitlines()}
    assert all(r["task_id"] in tasks for r in solved)
    tok = backend.tokenizer
    for example, turn in zip(examples, kept):
        assert example.completion_ids[:-1] == tok.encode(turn["text"], add_special_tokens=False)
        assert example.completion_ids[-1] == min(backend.eos_ids)
    first = next(r for r in solved if _clean(r["turns"][0]))
    from milepost.types import Task

    env.reset(options={"task": Task.from_dict(json.loads(tasks[first["task_id"]]))})
    messages = build_messages(env.goal_text(), first["turns"][0]["observation"])
    assert backend.encode(GenerationRequest(messages=messages)) in [e.prompt_ids for e in examples]
    # keep correct: every episode's turns whose moves the environment counts as correct, failures included
    correct, counts = trajectory_examples(_cfg(data, [episodes], keep="correct"), backend, progress=False)
    expected = [t for r in rows for t in r["turns"] if _clean(t) and t["correct_actions"] == t["n_requested"]]
    assert len(correct) == counts["examples"] == len(expected)
    from_failures = [t for r in rows if not r["success"] for t in r["turns"] if t in expected]
    assert from_failures  # correct moves of failed episodes count too
    capsys.readouterr()


def test_think_blocks_stay_in_the_targets(tmp_path: Path, data: Path, backend: Any, capsys: Any) -> None:
    episodes = _teacher(data, tmp_path / "oracle", "oracle")
    rows = _rows(episodes)
    for r in rows:
        for t in r["turns"]:
            t["text"] = "<think>the cell has one candidate left</think> " + t["text"]
    thinking = tmp_path / "thinking.jsonl"
    thinking.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples, counts = trajectory_examples(_cfg(data, [thinking]), backend, progress=False)
    assert counts["mismatched"] == 0 and len(examples) == sum(len(r["turns"]) for r in rows)
    think = backend.tokenizer.encode("<think>the cell has one candidate left</think>", add_special_tokens=False)
    assert all(e.completion_ids[: len(think)] == think for e in examples)
    capsys.readouterr()


def test_a_replay_stops_where_the_recording_no_longer_applies(
    tmp_path: Path, data: Path, backend: Any, capsys: Any
) -> None:
    # The teacher filled up to 4 cells per answer; the atomic student's environment refuses such answers.
    episodes = _teacher(data, tmp_path / "macro", "oracle", "--action-mode", "flexible", "--macro-k", "4")
    rows = _rows(episodes)
    examples, counts = trajectory_examples(_cfg(data, [episodes]), backend, progress=False)
    multi = sum(1 for r in rows if any(len(t["actions"]) > 1 for t in r["turns"]))
    assert multi > 0 and counts["mismatched"] == multi
    # the same recording replayed in the teacher's own mode applies in full
    same, counts = trajectory_examples(
        _cfg(data, [episodes], action_mode="flexible", macro_k=4), backend, progress=False
    )
    assert counts["mismatched"] == 0 and len(same) == sum(len(r["turns"]) for r in rows) > len(examples)
    capsys.readouterr()


def test_the_tiny_model_as_teacher_and_the_sft_command(tmp_path: Path, data: Path, backend: Any, capsys: Any) -> None:
    episodes = _teacher(data, tmp_path / "tiny", f"hf:{SHIPPED}", "--max-new-tokens", "32")
    rows = _rows(episodes)
    assert any(t["completion_ids"] for r in rows for t in r["turns"])
    examples, counts = trajectory_examples(_cfg(data, [episodes], keep="correct"), backend, progress=False)
    expected = [t for r in rows for t in r["turns"] if _clean(t) and t["correct_actions"] == t["n_requested"]]
    assert counts["mismatched"] == 0 and len(examples) == len(expected) > 0
    # The command: teacher turns mixed with solver demonstrations, a few steps.
    run = tmp_path / "run"
    over = [f"model={SHIPPED}", f"data={data}", "levels=S2-S3", f"sft.episodes=[{episodes}]", "sft.keep=correct"]
    over += ["sft.tasks=4", "sft.epochs=0.2", "sft.noise=0", "sft.macro_share=0", "threads=1", "env.max_steps=12"]
    argv = ["sft", "--config", str(ROOT / "configs" / "tiny-cpu" / "sudoku4_sft.yaml"), "--out", str(run)]
    assert main([*argv, *[x for o in over for x in ("--set", o)], "--no-progress"]) == 0
    made = json.loads((run / "sft_data.json").read_text())
    assert made["examples"] == len(expected) and made["solver_examples"] > 0
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[0]["train/examples"] == made["examples"] + made["solver_examples"]
    assert (run / "final" / "config.json").is_file()
    capsys.readouterr()


def test_bad_teacher_data_is_refused(tmp_path: Path, data: Path, backend: Any, capsys: Any) -> None:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--n", "1", "--k", "1"]
    assert main([*argv, "--out", str(tmp_path / "test-eval"), "--no-progress"]) == 0
    with pytest.raises(InputError, match="not in the training split"):
        trajectory_examples(_cfg(data, [tmp_path / "test-eval" / "episodes.jsonl"]), backend, progress=False)
    with pytest.raises(InputError, match="no such file"):
        trajectory_examples(_cfg(data, [tmp_path / "missing.jsonl"]), backend, progress=False)
    (tmp_path / "bad.jsonl").write_text('{"task_id": "x"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        trajectory_examples(_cfg(data, [tmp_path / "bad.jsonl"]), backend, progress=False)
    with pytest.raises(InputError, match=r"sft\.keep"):
        load_config(TrainConfig, None, ["sft.keep=all"])
    with pytest.raises(InputError, match=r"sft\.solver"):
        load_config(TrainConfig, None, ["sft.solver=false"])
    capsys.readouterr()
