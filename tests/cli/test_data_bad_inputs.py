"""Files that are not what a command expects end in one line and exit status 2, never a traceback.

Before: a binary file as ``--source`` or as a dataset split or manifest was a UnicodeDecodeError traceback, a
100,000-deep JSON array in a split a RecursionError, a folder given as ``--source`` "no such file", a digit of
another script in a Sudoku puzzle ("²") a ValueError, and bytes that are not UTF-8 piped into ``milepost play``
a UnicodeDecodeError.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from milepost.cli.main import main

BINARY = b"\x89PNG" + bytes(range(0x80, 0x100)) * 4  # not UTF-8, and no newline in it
BOARD7 = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"


def _one_line(capsys: pytest.CaptureFixture[str], *fragments: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("milepost: error: ") and err.count("\n") == 1, err
    assert all(f in err for f in fragments), err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"07 " + BOARD7.encode() + b" 1961\n" + BINARY), ":2: not UTF-8 text"),
        (lambda p: p.mkdir(), "a folder, not a file"),
        (lambda p: p.write_text(""), "level 7-9 has 0 usable boards"),
        (lambda p: p.write_text("07 " + BOARD7[:20]), ":1: expected 'MM BOARD CLUSTER' (3 fields), got 2"),
    ],
)
def test_bad_rush_hour_source_files(make, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "source.txt"
    make(source)
    argv = ["data", "rushhour", "--levels", "7-9", "--train", "0", "--test", "1", "--source", str(source)]
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    _one_line(capsys, message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"test.jsonl": BINARY}, "test.jsonl:1: not UTF-8 text"),
        ({"test.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n"}, "test.jsonl:1: JSON nested too deeply"),
        ({"test.jsonl": b'{"task_id": "x", "env"'}, "test.jsonl:1: not valid JSON"),
        ({"test.jsonl": b"", "manifest.json": BINARY}, "manifest.json: not UTF-8 text"),
        ({"test.jsonl": b"", "manifest.json": b'{"env": "sudoku",'}, "manifest.json: not valid JSON"),
        ({"test.jsonl": b"", "manifest.json/x": b""}, "no manifest.json (a folder of that name)"),
        ({"test.jsonl/x": b""}, "no test split"),
        ({}, "no test split"),
        ({"test.jsonl": b"\n"}, "the test split is empty"),
    ],
)
def test_bad_dataset_files(
    files: dict[str, bytes], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "ds"
    data.mkdir()
    for name, content in files.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(content)
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--n", "1", "--k", "1"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    _one_line(capsys, message)
    if "test.jsonl" in files and message != "the test split is empty":
        assert main(["plan", "--env", "sudoku", "--task", f"{data}:0"]) == 2
        _one_line(capsys, message)


def test_puzzle_digits_are_ascii(capsys: pytest.CaptureFixture[str]) -> None:
    for puzzle in ("\u00b2" + "0" * 15, "\uff11" + "0" * 15):  # ² (int() refuses it), fullwidth 1
        assert main(["plan", "--env", "sudoku", "--task", puzzle]) == 2
        _one_line(capsys, "at position 0 is not a digit 1-4")


def test_play_reads_bytes_that_are_not_utf8_as_a_bad_answer(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict decoding, as on a UTF-8 terminal
    stdin = BINARY[:300] + b"\nvalue(1, r1c1)\nquit\n"
    done = subprocess.run(
        [sys.executable, "-m", "milepost.cli.main", "play", "sudoku", "--size", "4"],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"cannot parse action" in done.stdout
