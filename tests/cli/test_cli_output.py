"""What the command line writes: `milepost show` with unknown distances, `--log-level` /
`MILEPOST_LOG_LEVEL`, and no progress-bar noise when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.io import append_jsonl
from milepost.progress import progress_bar
from milepost.types import Episode, RewardTerms, TerminationReason, Turn


def _turn(i: int, remaining: int | None) -> Turn:
    return Turn(
        index=i,
        observation=f"obs {i}",
        text="ACTION: move(A, right)",
        actions=["move(A, right)"],
        reward=0.0,
        reward_terms=RewardTerms(outcome=0.0, format=0.0, valid=0.0, milestone=0.0),
        subgoals_completed=[],
        remaining_distance=remaining,
        n_requested=1,
    )


def test_show_prints_unknown_distances_as_a_question_mark(tmp_path: Path, capsys: Any) -> None:
    episode = Episode(
        task_id="t",
        policy="openai:m@http://x/v1",
        sample=0,
        seed=1,
        termination=TerminationReason.BACKEND_ERROR,
        success=False,
        goal_distance=3,
        steps=2,
        turns=[_turn(0, 2), _turn(1, None)],
        meta={"error": "http://x/v1: HTTP 500: overloaded (gave up after 3 attempts)"},
    )
    append_jsonl(tmp_path / "e.jsonl", episode.to_dict())
    assert main(["show", str(tmp_path / "e.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "None" not in out
    assert "| remaining 2 |" in out and "| remaining ? |" in out
    assert "backend error: http://x/v1: HTTP 500: overloaded (gave up after 3 attempts)" in out


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    tasks = [make_task(*generate_easy(4, 4, 9, i), level="S1", split="test", index=i) for i in range(2)]
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})


def _milepost(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "MILEPOST_LOG_LEVEL"} | env
    cmd = [sys.executable, "-m", "milepost", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=environ)


def test_piped_eval_has_no_progress_noise_and_logs_at_the_chosen_level(dataset: Path, tmp_path: Path) -> None:
    common = ["eval", "--env", "sudoku", "--data", str(dataset), "--policy", "oracle", "--n", "2", "--k", "1"]
    quiet = _milepost([*common, "--out", str(tmp_path / "a")])
    assert quiet.returncode == 0, quiet.stderr
    assert "\r" not in quiet.stderr and "DEBUG" not in quiet.stderr  # progress on, but stderr is a pipe
    loud = _milepost(["--log-level", "debug", *common, "--out", str(tmp_path / "b")])
    assert loud.returncode == 0 and "\r" not in loud.stderr
    assert "milepost DEBUG milepost.evaluation.runner:" in loud.stderr and "4 episodes to play" in loud.stderr
    from_env = _milepost([*common, "--out", str(tmp_path / "b")], MILEPOST_LOG_LEVEL="debug")
    assert "milepost DEBUG" in from_env.stderr and "0 episodes to play, 4 done" in from_env.stderr


def test_log_level_flag_and_variable(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "none.jsonl")
    monkeypatch.setenv("MILEPOST_LOG_LEVEL", "debug")
    assert main(["show", missing]) == 2
    assert "milepost DEBUG milepost.cli: milepost" in capsys.readouterr().err
    assert main(["show", missing, "--log-level", "warning"]) == 2  # the flag wins, also after the subcommand
    assert "DEBUG" not in capsys.readouterr().err
    monkeypatch.setenv("MILEPOST_LOG_LEVEL", "loud")
    assert main(["show", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith("milepost: error: MILEPOST_LOG_LEVEL='loud'") and err.count("\n") == 1
    monkeypatch.delenv("MILEPOST_LOG_LEVEL")
    assert main(["show", missing]) == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_only_on_a_terminal() -> None:
    cases = ((io.StringIO(), True, False), (_Terminal(), False, False), (_Terminal(), True, True))
    for stream, enabled, drawn in cases:
        for _ in progress_bar(range(3), enabled=enabled, file=stream, mininterval=0):
            pass
        assert bool(stream.getvalue()) == drawn


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`milepost show ... | head -1`: no BrokenPipeError traceback, the Unix exit status for SIGPIPE."""
    # 2,000 turns print ~240 KB, several times a pipe's 64 KB buffer: the writer cannot finish before the reader
    # leaves (400 turns printed 47 KB, which a loaded machine let through whole: exit 0, a flaky failure).
    turns = [_turn(i, 3) for i in range(2000)]
    episode = Episode(
        task_id="t", policy="oracle", sample=0, seed=1, termination=TerminationReason.BUDGET_EXHAUSTED,
        success=False, goal_distance=3, steps=2000, turns=turns, meta={},
    )  # fmt: skip
    append_jsonl(tmp_path / "e.jsonl", episode.to_dict())
    cmd = [sys.executable, "-m", "milepost", "show", str(tmp_path / "e.jsonl")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after one line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
