"""The short-horizon proxy: ``milepost eval --single-turn`` (Sudoku in one answer, Rush Hour with slide moves) and
``milepost data ... --filter RUN_DIR`` (keep the tasks some sample solved)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.parsing import format_answer
from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.sudoku import make_task
from milepost.evaluation.proxy import board_prompt, check_board, parse_board
from milepost.types import Task

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "rushhour" / "rush_sample.txt"
# 4x4, solution 1234 / 3412 / 2143 / 4321, four empty cells
PUZZLE = [1, 0, 3, 4, 3, 4, 0, 2, 2, 1, 4, 0, 0, 3, 2, 1]
SOLUTION = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]


def _task() -> Task:
    return make_task(PUZZLE, SOLUTION, level="S1", split="test")


def test_a_board_is_checked_cell_by_cell() -> None:
    task = _task()
    right = format_answer("done", "1234/3412/2143/4321")
    assert check_board(task, parse_board(right, 4)) == (4, 4, True)
    # two of the four empty cells wrong (r1c2 = 4, r3c4 = 1), any separators
    two_wrong = "<think>...</think> REASON: x ACTION: 1 4 3 4 | 3 4 1 2 | 2 1 4 1 | 4 3 2 1"
    assert check_board(task, parse_board(two_wrong, 4)) == (2, 4, False)
    # a changed given is not a solution, even with every empty cell right
    assert check_board(task, parse_board(format_answer("x", "2234/3412/2143/4321"), 4)) == (4, 4, False)
    # 15 digits, a digit out of range, or no ACTION tag: no board
    assert parse_board(format_answer("x", "1234/3412/2143/432"), 4) is None
    assert parse_board(format_answer("x", "1234/3412/2143/4325"), 4) is None
    assert parse_board("1234341221434321", 4) is None
    assert check_board(task, None) == (0, 4, False)
    prompt = board_prompt(task)
    assert "4 rows of 4 digits" in prompt[0]["content"] and "1 . | 3 4" in prompt[1]["content"].replace("  ", " ")


def _sudoku_data(tmp_path: Path, capsys: Any, name: str = "ds", seed: str = "0") -> Path:
    out = tmp_path / name
    argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "6", "--test", "6", "--seed", seed]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    return out


def _eval(data: Path, out: Path, policy: str, *extra: str) -> dict[str, Any]:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", policy, "--single-turn", "--no-progress"]
    assert main([*argv, "--out", str(out), *extra]) == 0
    return dict(json.loads((out / "metrics.json").read_text()))


def test_single_turn_sudoku_with_scripted_policies(tmp_path: Path, capsys: Any) -> None:
    data = _sudoku_data(tmp_path, capsys)
    oracle = _eval(data, tmp_path / "oracle", "oracle", "--n", "2", "--k", "1,2")
    assert oracle["meta"]["single_turn"] and oracle["meta"]["max_steps"] == 1
    assert all(lv["pass_at"]["1"]["value"] == 1.0 and lv["step_accuracy"] == 1.0 for lv in oracle["levels"])
    noisy = _eval(data, tmp_path / "noisy", "noisy-oracle:0.8", "--n", "4", "--k", "1,4")
    episodes = [json.loads(line) for line in (tmp_path / "noisy" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 48 and all(e["steps"] == 1 and len(e["turns"]) == 1 for e in episodes)
    # each empty cell is right with probability 0.8; a task is solved only when all of them are
    cells = sum(e["meta"]["cells_correct"] for e in episodes) / sum(e["meta"]["cells_empty"] for e in episodes)
    assert 0.7 < cells < 0.9
    assert all(e["success"] == (e["meta"]["cells_correct"] == e["meta"]["cells_empty"]) for e in episodes)
    pass1 = [lv["pass_at"]["1"]["value"] for lv in noisy["levels"]]
    pass4 = [lv["pass_at"]["4"]["value"] for lv in noisy["levels"]]
    assert all(a < 1.0 and a <= b for a, b in zip(pass1, pass4))
    report = (tmp_path / "noisy" / "report.md").read_text()
    assert "Short-horizon proxy (`--single-turn`): the whole board in one answer" in report
    capsys.readouterr()


def test_single_turn_with_the_tiny_model(tmp_path: Path, capsys: Any) -> None:
    import torch

    torch.set_num_threads(1)
    data = _sudoku_data(tmp_path, capsys)
    policy = f"hf:{ROOT / 'checkpoints' / 'sudoku4-sft'}"
    result = _eval(data, tmp_path / "tiny", policy, "--n", "1", "--k", "1", "--limit", "2", "--max-new-tokens", "24")
    episodes = [json.loads(line) for line in (tmp_path / "tiny" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and result["meta"]["temperature"] == 0.8
    for e in episodes:  # the model was never trained to write boards: it answers with moves or runs out
        turn = e["turns"][0]
        assert turn["completion_ids"] and turn["finish_reason"] in ("stop", "length")
        assert e["success"] == (turn["error"] is None and e["meta"]["cells_correct"] == e["meta"]["cells_empty"])
    capsys.readouterr()


def test_single_turn_rush_hour_is_the_compressed_horizon(tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "rush"
    argv = ["data", "rushhour", "--levels", "7-9", "--source", str(SAMPLE), "--train", "0", "--test", "3"]
    assert main([*argv, "--out", str(data), "--no-progress"]) == 0
    out = tmp_path / "rush-eval"
    argv = ["eval", "--env", "rushhour", "--data", str(data), "--policy", "oracle", "--single-turn", "--n", "1"]
    assert main([*argv, "--k", "1", "--out", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["meta"]["env_kwargs"]["action_mode"] == "slide"
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    # slides: at most the optimal number of moves (7-9), fewer turns than one-cell steps
    assert all(e["success"] and e["steps"] <= 9 for e in episodes)
    slides = [a for e in episodes for t in e["turns"] for a in t["actions"]]
    assert any(re.search(r", [2-9]\)$", a) for a in slides), slides  # some answer slides a car several cells
    assert "slide moves, one per answer" in (out / "report.md").read_text()
    capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--agent", "sgo"], "needs the plain agent"),
        (["--action-mode", "atomic"], "sets action_mode flexible"),
        (["--max-steps", "5"], "sets max_steps 1"),
    ],
)
def test_single_turn_refuses_contradicting_flags(tmp_path: Path, capsys: Any, extra: list[str], message: str) -> None:
    data = _sudoku_data(tmp_path, capsys)
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--single-turn", "--n", "1"]
    assert main([*argv, "--k", "1", "--out", str(tmp_path / "x"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_data_filter_keeps_the_tasks_some_sample_solved(tmp_path: Path, capsys: Any) -> None:
    data = _sudoku_data(tmp_path, capsys)
    run = tmp_path / "proxy"
    _eval(data, run, "noisy-oracle:0.6", "--n", "2", "--k", "1")
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    solved = {e["task_id"] for e in episodes if e["success"]}
    assert 0 < len(solved) < 12
    out = tmp_path / "filtered"
    argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "6", "--test", "6", "--seed", "0"]
    assert main([*argv, "--out", str(out), "--filter", str(run), "--no-progress"]) == 0
    test = load_tasks(out, "test")  # the recounted manifest passes the loader's checks
    assert {t.task_id for t in test} == solved
    assert len(load_tasks(out, "train")) == 12  # the run played no training task: kept whole
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["filter"]["splits"]["test"] == {
        "before": 12,
        "evaluated": 12,
        "kept": len(solved),
        "filtered": True,
    }
    assert manifest["filter"]["splits"]["train"]["filtered"] is False and "--filter" in manifest["command"]
    capsys.readouterr()
    # a run made on another dataset matches none of these tasks
    other = _sudoku_data(tmp_path, capsys, "other", seed="5")
    assert main([*argv[:-2], "--seed", "7", "--out", str(tmp_path / "f2"), "--filter", str(run)]) == 2
    assert "evaluated none of this dataset's tasks" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "f3"), "--filter", str(other)]) == 2
    assert "no episodes.jsonl" in capsys.readouterr().err
