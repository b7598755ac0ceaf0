"""``milepost plan`` and ``milepost eval --agent sgo`` end to end (scripted policies, tiny datasets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.errors import InputError
from milepost.evaluation.runner import EvalSpec, evaluate
from tests.planning.fakes import rush_boards, rush_tasks, sudoku_tasks

PUZZLE = "4..1.1.....21.4."  # the fakes' default 4x4 board


def test_plan_prints_subgoals_and_predicates(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--env", "sudoku", "--task", PUZZLE]) == 0
    out = capsys.readouterr().out
    assert "Plan (programmatic, 4 subgoals)" in out
    assert "| 1 | Complete box 4 (rows 3-4, columns 3-4) | box 4 (env subgoal 3): every cell of box 4" in out
    assert main(["plan", "--env", "rushhour", "--task", rush_boards(7, 9)[0], "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [g["env_subgoal"] for g in plan["subgoals"]] == [0, 1, 2] and plan["subgoals"][2]["checkable"]
    data = write_dataset(tmp_path / "ds", {"train": [], "test": sudoku_tasks(3, 6)}, {"seed": 3})
    assert main(["plan", "--env", "sudoku", "--task", f"{data}:2"]) == 0
    assert "for sudoku4-S2-0-2:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "sudoku", "--task", "1234"], "not a 4x4, 6x6 or 9x9 board"),
        (["--env", "sudoku", "--task", "1" * 16], "the givens break a rule"),
        (["--env", "sudoku", "--task", "0" * 16], "several solutions"),
        (["--env", "rushhour", "--task", "AA"], "board"),
        (["--env", "sudoku", "--task", PUZZLE, "--planner", "llm:oracle"], "needs a model backend"),
        (["--env", "sudoku", "--task", PUZZLE, "--planner", "magic"], "expected programmatic | llm:SPEC"),
        (["--env", "maze", "--task", "x"], "unknown environment"),
    ],
)
def test_plan_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_plan_dataset_line_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": sudoku_tasks(2, 6)}, {"seed": 3})
    assert main(["plan", "--env", "sudoku", "--task", f"{data}:5"]) == 2
    assert "no task 5 (the test split has 2)" in capsys.readouterr().err


def test_eval_agent_sgo_on_sudoku_and_rush_hour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sudoku = [t for level, e in (("S2", 6), ("S4", 10)) for t in sudoku_tasks(3, e, seed=4, level=level)]
    rush = rush_tasks(4, 6, 3) + rush_tasks(7, 9, 3)
    for env, tasks in (("sudoku", sudoku), ("rushhour", rush)):
        data = write_dataset(tmp_path / f"{env}-data", {"train": [], "test": tasks}, {"seed": 4})
        out = tmp_path / f"{env}-run"
        argv = [
            "eval",
            "--env",
            env,
            "--data",
            str(data),
            "--policy",
            "noisy-oracle:0.8:format",
            "--agent",
            "sgo",
            "--n",
            "2",
            "--k",
            "1,2",
            "--out",
            str(out),
            "--no-progress",
            "--max-replans",
            "1",
        ]
        if env == "sudoku":
            argv += ["--max-steps", "14"]
        assert main(argv) == 0
        metrics = json.loads((out / "metrics.json").read_text())
        sgo = metrics["sgo"]["all"]
        assert sgo["episodes"] == len(tasks) * 2 and sgo["plan_programmatic"] == sgo["episodes"]
        assert sgo["replans"] <= sgo["episodes"]
        report = (out / "report.md").read_text()
        assert "agent `sgo`" in report and "### SGO agent (planner `programmatic`, judge `None`)" in report
        assert "| replans |" in report and "| claims rejected (hallucinated progress) |" in report
        rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert all(r["meta"]["sgo"]["progress_lines"] == r["steps"] for r in rows)
    capsys.readouterr()


def test_eval_spec_checks_and_plain_identity(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": sudoku_tasks(2, 6)}, {"seed": 3})
    with pytest.raises(InputError, match="need --agent sgo"):
        EvalSpec(env="sudoku", data=str(data), policy="oracle", planner="llm:hf:x")
    with pytest.raises(InputError, match="unknown agent"):
        EvalSpec(env="sudoku", data=str(data), policy="oracle", agent="clever")
    with pytest.raises(InputError, match="the judge needs a model backend"):
        evaluate(
            EvalSpec(env="sudoku", data=str(data), policy="oracle", agent="sgo", judge="random", n=1, ks=[1]),
            tmp_path / "j",
            progress=False,
        )
    plain = EvalSpec(env="sudoku", data=str(data), policy="oracle", n=1, ks=[1])
    assert not {"planner", "judge", "max_replans"} & set(plain.identity())  # old plain runs still resume
    result = evaluate(plain, tmp_path / "plain", progress=False)
    assert "sgo" not in result and "SGO agent" not in (tmp_path / "plain" / "report.md").read_text()
    sgo = EvalSpec(env="sudoku", data=str(data), policy="oracle", agent="sgo", n=1, ks=[1])
    with pytest.raises(InputError, match="different configuration"):
        evaluate(sgo, tmp_path / "plain", progress=False)
