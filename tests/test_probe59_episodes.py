"""Issue 59, items 5 and 8: episodes that carry NaN, and episodes edited after their metrics were written.

Before: an ``episodes.jsonl`` line with ``"reward": NaN`` (Python's ``json`` reads ``NaN``, ``Infinity`` and
``-Infinity``, which are not JSON) was exported as ``NaN`` (invalid JSON for every strict reader), shown, resumed,
used as a filter and fed to the credit audit, each silently. And ``milepost compare`` read ``metrics.json`` only, so
an episode edited, added or removed after the evaluation never changed (nor stopped) a comparison. Now every
episode reader refuses a non-finite number naming FILE:LINE, and compare recounts what it shows from the episodes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.io import loads_finite, read_jsonl

EVAL = ["--env", "sudoku", "--policy", "noisy-oracle:0.4", "--n", "2", "--k", "1,2", "--no-progress"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    tasks = {
        "train": [],
        "test": [
            make_task(*generate_easy(4, e, 9, i), level=lv, split="test", index=i)
            for lv, e in (("S1", 3), ("S2", 6))
            for i in range(3)
        ],
    }
    return write_dataset(root / "ds4", tasks, {"env": "sudoku", "size": 4, "seed": 9})


@pytest.fixture(scope="module")
def played(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evaluation folder as ``milepost eval`` writes it: 12 episodes, some solved, some not."""
    out = tmp_path_factory.mktemp("eval") / "run"
    assert main(["eval", "--data", str(data), *EVAL, "--out", str(out)]) == 0
    successes = [r["success"] for r in read_jsonl(out / "episodes.jsonl")]
    assert len(successes) == 12 and 0 < sum(successes) < 12  # both kinds, so either edit changes a number
    return out


def copy(run: Path, to: Path) -> Path:
    to.mkdir(parents=True)
    for name in ("episodes.jsonl", "metrics.json", "run.json"):
        (to / name).write_bytes((run / name).read_bytes())
    return to


def edit(run: Path, line: int, old: str, new: str) -> None:
    file = run / "episodes.jsonl"
    lines = file.read_text().splitlines(keepends=True)
    assert re.search(old, lines[line - 1]), old
    lines[line - 1] = re.sub(old, new, lines[line - 1], count=1)
    file.write_text("".join(lines))


# --------------------------------------------------------------------------------------------------------------
# item 5: non-finite numbers


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_loads_finite_refuses_what_json_loads_accepts(text: str) -> None:
    line = '{"turns": [{"reward": 0.0, "logprobs": [-0.5, ' + text + "]}]}"
    assert not math.isfinite(json.loads(line)["turns"][0]["logprobs"][1])  # what every reader did before
    with pytest.raises(InputError, match=rf"^f\.jsonl:7: holds {re.escape(text)}, a non-finite number"):
        loads_finite(line, "f.jsonl:7")


def test_loads_finite_refuses_a_float_past_the_range_and_keeps_finite_values() -> None:
    with pytest.raises(InputError, match=r"holds 1e999, a number past the float range"):
        loads_finite('{"reward": 1e999}', "w")
    assert loads_finite('{"reward": -1.5e300, "name": "NaN", "n": 12345678901234567890}', "w") == {
        "reward": -1.5e300,
        "name": "NaN",  # a string is a string
        "n": 12345678901234567890,
    }
    with pytest.raises(InputError, match=r"^w: not valid JSON"):
        loads_finite("{reward: 1}", "w")


def test_read_jsonl_keeps_nan_by_default_for_logs(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"iteration": 1, "loss/policy": NaN}\n')  # a diverged loss, as the trainer logs it
    assert math.isnan(next(read_jsonl(log))["loss/policy"])
    with pytest.raises(InputError, match=rf"^{re.escape(str(log))}:1: holds NaN"):
        list(read_jsonl(log, finite=True))


def readers(run: Path, data: Path, tmp: Path) -> dict[str, list[str]]:
    """Every command that reads an evaluation's episodes, each with a place of its own to write."""
    return {
        "export parquet": ["export", "episodes", str(run), "--format", "parquet", "--out", str(tmp / "t.parquet")],
        "export chat": ["export", "episodes", str(run), "--format", "chat", "--out", str(tmp / "chat.jsonl")],
        "show": ["show", str(run), "--index", "1"],
        "show file": ["show", str(run / "episodes.jsonl")],
        "credit audit": ["credit", "audit", str(run), "--out", str(tmp / "credit"), "--no-progress"],
        "eval resume": ["eval", "--data", str(data), *EVAL, "--out", str(run)],
        "data --filter": [
            *["data", "sudoku", "--size", "4", "--levels", "S1", "--train", "2", "--test", "1"],
            *["--filter", str(run), "--out", str(tmp / "filtered"), "--no-progress"],
        ],
        "compare": ["compare", str(run), "--out", str(tmp / "cmp")],
    }


COMMANDS = list(readers(Path("r"), Path("d"), Path("t")))


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        (r'"reward":-?[0-9.e-]+', '"reward":NaN', "NaN"),
        (r'"reward":-?[0-9.e-]+', '"reward":Infinity', "Infinity"),
        (r'"goal_distance":[0-9]+', '"goal_distance":-Infinity', "-Infinity"),
        (r'"reward":-?[0-9.e-]+', '"reward":1e999', "1e999"),
    ],
)
def test_every_episode_reader_refuses_non_finite_numbers_naming_file_and_line(
    command: str,
    old: str,
    new: str,
    shown: str,
    played: Path,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = copy(played, tmp_path / "run")
    edit(run, 3, old, new)
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    assert main(readers(run, data, tmp_path)[command]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{run / 'episodes.jsonl'}:3: holds {shown}" in err, err
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before  # nothing rewritten (eval resume)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing written anywhere else


def test_the_untouched_folder_passes_every_reader(played: Path, data: Path, tmp_path: Path) -> None:
    run = copy(played, tmp_path / "run")
    for command, argv in readers(run, data, tmp_path).items():
        if command != "credit audit":  # trains critics: tens of seconds; its reader is export's (find_runs)
            assert main(argv) == 0, command
    chat = (tmp_path / "chat.jsonl").read_text().splitlines()
    assert chat and all(loads_finite(line, "chat") for line in chat)


# --------------------------------------------------------------------------------------------------------------
# item 8: metrics that the episodes no longer give


def compare(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["compare", str(run), "--out", str(tmp_path / "cmp")])
    return code, capsys.readouterr().err


def first_line(run: Path, success: bool) -> int:
    rows = list(read_jsonl(run / "episodes.jsonl"))
    return next(i for i, r in enumerate(rows, 1) if r["success"] is success)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("solve a failed episode", r"level S\d avg [0-9.]+ in the metrics, [0-9.]+ recounted"),
        ("fail a solved episode", r"level S\d avg [0-9.]+ in the metrics, [0-9.]+ recounted"),
        ("delete an episode", r"12 episodes in the metrics, 11 in the file"),
        ("duplicate an episode", r"12 episodes in the metrics, 13 in the file"),
        ("move an episode to another level", r"level S\d (tasks|avg|samples)"),
        ("move an episode to another distance", r"the successes by goal distance differ"),
    ],
)
def test_compare_refuses_metrics_the_episodes_no_longer_give(
    change: str, message: str, played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy(played, tmp_path / "run")
    file = run / "episodes.jsonl"
    lines = file.read_text().splitlines(keepends=True)
    if change == "solve a failed episode":
        edit(run, first_line(run, False), '"success":false', '"success":true')
    elif change == "fail a solved episode":
        edit(run, first_line(run, True), '"success":true', '"success":false')
    elif change == "delete an episode":
        file.write_text("".join(lines[1:]))
    elif change == "duplicate an episode":
        file.write_text("".join(lines + lines[:1]))
    elif change == "move an episode to another level":
        level = json.loads(lines[0])["level"]
        edit(run, 1, f'"level":"{level}"', '"level":"S1"' if level != "S1" else '"level":"S2"')
    else:
        edit(run, 1, r'"goal_distance":[0-9]+', '"goal_distance":99')
    code, err = compare(run, tmp_path, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{run / 'metrics.json'} does not match {file}" in err and re.search(message, err), err
    assert f"rerun the same `milepost eval --out {run}`" in err
    assert not (tmp_path / "cmp").exists()


def test_an_edit_no_compared_number_sees_still_compares(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy(played, tmp_path / "run")
    edit(run, 2, r'"text":"[^"]*"', '"text":"an answer rewritten after the run"')
    assert compare(run, tmp_path, capsys) == (0, "")


def test_rerunning_the_evaluation_makes_the_folder_comparable_again(
    played: Path, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy(played, tmp_path / "run")
    edit(run, first_line(run, False), '"success":false', '"success":true')
    assert compare(run, tmp_path, capsys)[0] == 2
    assert main(["eval", "--data", str(data), *EVAL, "--out", str(run)]) == 0  # plays nothing, rewrites metrics
    capsys.readouterr()
    assert compare(run, tmp_path, capsys) == (0, "")


def test_a_folder_without_episodes_compares_from_its_metrics_as_before(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_bytes((played / "metrics.json").read_bytes())
    assert compare(run, tmp_path, capsys) == (0, "")


@pytest.mark.parametrize("text", ["{", '{"levels": [{"level": "S1"}]}', "[]", '{"meta": 3}'])
def test_a_metrics_file_that_is_not_one_is_a_one_line_error(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(text)
    code, err = compare(run, tmp_path, capsys)
    assert code == 2 and err.count("\n") == 1 and "not an evaluation's metrics.json" in err, err
