"""``milepost data rushhour`` and ``milepost play rushhour``: dataset folder, determinism, one-line errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import load_manifest, load_tasks

SAMPLE = Path(__file__).parents[1] / "data" / "rushhour" / "rush_sample.txt"
SMALL = [
    "data",
    "rushhour",
    "--levels",
    "1-3,4-6",
    "--train",
    "3",
    "--test",
    "2",
    "--seed",
    "1",
    "--no-progress",
]


def test_generated_dataset_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    assert main([*SMALL, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.jsonl", "train.jsonl"]
    train, test = load_tasks(out, "train"), load_tasks(out, "test")
    assert len(train) == 6 and len(test) == 4 and {t.level for t in test} == {"1-3", "4-6"}
    assert all(t.env == "rushhour" and len(t.payload["board"]) == 36 for t in train + test)
    assert not {t.meta["cluster_id"] for t in train} & {t.meta["cluster_id"] for t in test}
    manifest = load_manifest(out)
    assert manifest["command"].startswith("milepost data rushhour --levels 1-3,4-6 --source generate --train 3")
    assert manifest["levels"]["4-6"]["counts"] == {"train": 3, "test": 2}
    assert set(manifest["levels"]["4-6"]["fits_budget_share"]) == {"atomic_30_steps", "slide_20_moves"}
    captured = capsys.readouterr()
    assert "wrote 6 train and 4 test tasks" in captured.out and "fits 30 steps" in captured.out
    assert captured.err == ""
    again = tmp_path / "again"
    assert main([*SMALL, "--out", str(again)]) == 0
    for file in ("train.jsonl", "test.jsonl"):
        assert (out / file).read_bytes() == (again / file).read_bytes()


def test_dataset_from_a_fogleman_file(tmp_path: Path) -> None:
    out = tmp_path / "file"
    args = ["data", "rushhour", "--levels", "16-18", "--source", str(SAMPLE), "--train", "8", "--test", "4"]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    tasks = load_tasks(out, "train") + load_tasks(out, "test")
    assert len(tasks) == 12 and all(16 <= t.meta["min_moves"] <= 18 for t in tasks)
    lines = SAMPLE.read_text().splitlines()
    for task in tasks:
        line = int(task.meta["source"].rsplit(":", 1)[1])
        assert lines[line - 1].split()[1] == task.payload["board"]
    shares = json.loads((out / "manifest.json").read_text())["levels"]["16-18"]["fits_budget_share"]
    assert shares["slide_20_moves"] == 1.0 and 0 < shares["atomic_30_steps"] < 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--levels", "4-7"], "unknown level '4-7'"),
        (["--source", "missing.txt"], "missing.txt: no such file"),
        (["--train", "-1"], "--train/--test must be >= 0"),
        (["--workers", "0"], "--workers must be >= 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "bad"
    assert main([*SMALL, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_malformed_file_and_existing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("05 " + "o" * 12 + "AABBBB" + "o" * 18 + " 9\n")
    assert main([*SMALL, "--source", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "bad.txt:1: board: vehicle B has length 4" in capsys.readouterr().err
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main([*SMALL, "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "x"


def test_play_reads_moves_from_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("move(A, up)\nnonsense\nquit\n"))
    assert main(["play", "rushhour", "--level", "4-6", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "Rush Hour" in out and "<- exit" in out
    assert "A is horizontal" in out and "cannot parse action 'nonsense'" in out


def test_generation_uses_every_core_says_it_takes_time_and_ignores_the_worker_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from milepost.cli.data_rushhour import _cores
    from milepost.cli.main import build_parser

    assert build_parser().parse_args(["data", "rushhour", "--out", "x"]).workers == _cores()
    tiny = ["data", "rushhour", "--levels", "1-3,4-6", "--train", "2", "--test", "1", "--seed", "3", "--no-progress"]
    assert main([*tiny, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    assert "generating 6 Rush Hour puzzles on 1 process(es); each is solved exactly" in capsys.readouterr().out
    assert main([*tiny, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    for file in ("train.jsonl", "test.jsonl"):
        assert (tmp_path / "one" / file).read_bytes() == (tmp_path / "two" / file).read_bytes()
    one, two = (load_manifest(tmp_path / name) for name in ("one", "two"))
    assert {**one, "command": ""} == {**two, "command": ""}  # the command names its own --out
