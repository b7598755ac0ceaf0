"""What a new user meets first: the demo's progress and wall time, progress off a terminal, phases that say what
they do, and the messages of the commands the README shows (issue 23, items 9, 11, 12, 13)."""

from __future__ import annotations

import argparse
import io
import json
import time
import tomllib
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.progress import progress_bar

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    tasks = [make_task(*generate_easy(4, 6, 9, i), level="S2", split="test", index=i) for i in range(3)]
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})


# Item 9: the demo's jobs show their progress, its wall time spans resumed sessions, its last line is a sentence.


def _fake_job(kind: str, arm: str, arg_dict: dict[str, Any], data: str) -> float:
    """Writes what a real demo job writes, as it goes: metrics.jsonl rows per iteration, then evaluation episodes."""
    out = Path(arg_dict["out"])
    if kind == "sft":
        folder = out / "sft-start" / arm
    else:
        folder = out / f"rl-{arm}-seed{arg_dict['train_seed']}"
        folder.mkdir(parents=True, exist_ok=True)
        for it in (1, 2):
            with (folder / "metrics.jsonl").open("a") as f:
                f.write(json.dumps({"iteration": it, "phase": "S2"}) + "\n")
            time.sleep(0.02)
        folder = folder / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "episodes.jsonl").write_text("{}\n" * 3)
    return 1.5


def test_demo_jobs_report_progress_as_log_lines_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from milepost.cli.demo import DemoJob, WallClock, run_jobs

    out = tmp_path / "demo"
    jobs = [
        DemoJob("rl", "atomic", 0, out / "rl-atomic-seed0", (2, 4, 3)),
        DemoJob("rl", "macro", 0, out / "rl-macro-seed0", (2, 4, 3)),
        DemoJob("sft", "atomic", 0, out / "sft-start" / "atomic", (0, 0, 3)),
    ]
    assert [j.total for j in jobs] == [11, 11, 3] and [j.done() for j in jobs] == [0, 0, 0]
    clock = WallClock(out)
    with ThreadPoolExecutor(max_workers=1) as pool:
        timings = run_jobs(
            pool, jobs, argparse.Namespace(out=str(out)), tmp_path, clock, work=_fake_job, poll_s=0.01, log_every=0
        )
    assert timings == {"rl_atomic_seed0_s": 1.5, "rl_macro_seed0_s": 1.5, "sft_atomic_s": 1.5}
    assert [j.done() for j in jobs] == [11, 11, 3]
    captured = capsys.readouterr()
    assert "\r" not in captured.err
    lines = captured.err.splitlines()
    assert lines and all(line.strip() for line in lines)  # whole lines, one per update
    assert any(line.startswith("all 3 jobs:") and "25/25 episodes" in line for line in lines)  # episodes, with a rate
    assert "done: RL atomic seed 0 (0.0 min; " in captured.out and "done: SFT start (atomic)" in captured.out


def test_demo_wall_time_adds_up_resumed_sessions(tmp_path: Path) -> None:
    from milepost.cli.demo import WallClock, final_line

    first = WallClock(tmp_path)
    first.before = 600.0  # as if this session had run ten minutes
    first.save()
    second = WallClock(tmp_path)
    assert second.sessions == 2 and second.before >= 600.0 and second.seconds >= 600.0
    line = final_line(tmp_path / "report" / "report.md", second.seconds, second.sessions)
    assert line.startswith("The demo finished in 10.0 min over 2 sessions; the report is ")
    assert line.endswith("report.md") and "{" not in line


# Items 9 and 12: progress off a terminal is a line now and then, a phase without a count says what it does.


def test_progress_off_a_terminal_is_whole_lines() -> None:
    stream = io.StringIO()
    for _ in progress_bar(range(3), file=stream, desc="work", log_every=0):
        pass
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and lines[0].startswith("work:") and "3/3" in lines[-1]
    quiet = io.StringIO()
    for _ in progress_bar(range(3), file=quiet, desc="work"):  # a bar shorter than the interval writes nothing
        pass
    assert quiet.getvalue() == ""


def test_phase_says_what_it_does_off_a_terminal() -> None:
    from milepost.progress import phase

    stream = io.StringIO()
    with phase("computing metrics", stream=stream, delay=0):
        pass
    assert stream.getvalue() == "computing metrics ...\n"
    quick = io.StringIO()
    with phase("computing metrics", stream=quick):  # done before the line is due: a one-line error stays one line
        pass
    assert quick.getvalue() == ""
    silent = io.StringIO()
    with phase("computing metrics", stream=silent, enabled=False):
        pass
    assert silent.getvalue() == ""


def test_eval_says_it_resumes_and_names_its_phases(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("milepost.progress.PHASE_DELAY_S", 0.0)  # every phase says what it does at once
    spec = EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=2, ks=[1])
    out = tmp_path / "run"
    evaluate(spec, out, progress=True)
    err = capsys.readouterr().err
    assert f"{out}: playing 6 episodes (3 tasks x 2 samples)" in err  # names the run before its bar
    assert "metrics (bootstrap intervals), report and plots of 6 episodes ..." in err
    rows = (out / "episodes.jsonl").read_text().splitlines()
    (out / "episodes.jsonl").write_text("\n".join(rows[:4]) + "\n")
    evaluate(spec, out, progress=True)
    assert f"{out}: resuming, 4 of 6 episodes already done; playing 2 episodes" in capsys.readouterr().err


# Item 11: a rerun with other settings is refused naming the setting.


def test_a_rerun_with_other_settings_names_the_setting(dataset: Path, tmp_path: Path) -> None:
    spec = EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=1, ks=[1])
    evaluate(spec, tmp_path / "run", progress=False)
    spec.settings.max_new_tokens = 32
    with pytest.raises(InputError, match=r"settings\.max_new_tokens 256 in the folder, 32 now"):
        evaluate(spec, tmp_path / "run", progress=False)


# Item 13: messages.


def test_noisy_oracle_p_is_called_the_accuracy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from milepost.backends.base import parse_policy_spec

    with pytest.raises(InputError, match=r"accuracy P \(the share of turns the oracle answers\) must be in \[0, 1\]"):
        parse_policy_spec("noisy-oracle:1.5")
    with pytest.raises(InputError) as exc:
        parse_policy_spec("noisy-oracle:-0.1")
    assert "error probability" not in str(exc.value)


def test_show_accepts_a_run_folder(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=1, ks=[1]), tmp_path / "run", progress=False)
    assert main(["show", str(tmp_path / "run")]) == 0
    assert "SOLVED after" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["show", str(tmp_path / "empty")]) == 2
    assert "is a folder without an episodes.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "near"), [(["evl"], "eval"), (["data", "rushour"], "rushhour")])
def test_an_unknown_subcommand_names_the_nearest(
    argv: list[str], near: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert f"did you mean {near!r}?" in capsys.readouterr().err


def test_the_license_is_an_spdx_string_that_installs_without_a_warning() -> None:
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # the licence the table form named
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert not [w for w in caught if "license" in str(w.message).lower()]
    assert dist.metadata.license_expression == "Apache-2.0"
