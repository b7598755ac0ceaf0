"""``milepost data sudoku``: the dataset folder it writes, determinism, and one-line errors with nothing left
behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from milepost import datasets as datasets_module
from milepost.cli.main import main
from milepost.datasets import load_manifest, load_tasks

SMALL = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "6", "--test", "3", "--seed", "1"]


def test_writes_a_dataset_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    assert main([*SMALL, "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.jsonl", "train.jsonl"]
    train, test = load_tasks(out, "train"), load_tasks(out, "test")
    assert len(train) == 12 and len(test) == 6
    assert {t.level for t in test} == {"S2", "S3"}
    manifest = load_manifest(out)
    assert manifest["command"].startswith("milepost data sudoku --size 4 --levels S2-S3 --train 6 --test 3 --seed 1")
    assert manifest["counts"] == {"train": 12, "test": 6}
    assert manifest["levels"]["S2"]["counts"] == {"train": 6, "test": 3}
    captured = capsys.readouterr()
    assert "wrote 12 train and 6 test tasks" in captured.out
    assert captured.err == ""  # --no-progress


def test_same_arguments_same_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert main([*SMALL, "--out", str(tmp_path / name), "--no-progress"]) == 0
    for file in ("train.jsonl", "test.jsonl"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
    a = json.loads((tmp_path / "a" / "manifest.json").read_text())
    b = json.loads((tmp_path / "b" / "manifest.json").read_text())
    a.pop("command"), b.pop("command")
    assert a == b


def test_default_levels_and_exhaustion_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s4"
    assert main(["data", "sudoku", "--size", "4", "--levels", "S1", "--out", str(out), "--no-progress"]) == 0
    manifest = load_manifest(out)
    assert manifest["exhausted_levels"] == ["S1"]
    assert "level S1:" in capsys.readouterr().out


def test_existing_folder_needs_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main([*SMALL, "--out", str(out), "--no-progress"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "keep.txt").exists()
    assert main([*SMALL, "--out", str(out), "--no-progress", "--overwrite"]) == 0
    assert not (out / "keep.txt").exists() and (out / "train.jsonl").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--size", "5"], "unsupported size 5"),
        (["--levels", "L9"], "unknown level 'L9'"),
        (["--size", "4", "--levels", "L1"], "4x4: unknown level 'L1'"),
        (["--levels", "L3-L1"], "runs backwards"),
        (["--grade", "expert"], "unknown tier 'expert'"),
        (["--size", "4", "--levels", "S2", "--grade", "hard"], "hard-tier puzzles are 9x9 only"),
        (["--grade", "easy,easy"], "distinct tiers"),
        (["--train", "-3"], "must be >= 0"),
        (["--train", "0", "--test", "0"], "nothing to generate"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "ds"
    assert main(["data", "sudoku", *extra, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("milepost: error: ") and message in err
    assert not out.exists()


def test_graded_tiers_in_one_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--grade easy,hard`` (``--tier`` is an alias): one dataset holding both tiers, with tier metadata."""
    out = tmp_path / "mixed"
    argv = ["data", "sudoku", "--levels", "L6", "--train", "1", "--test", "1", "--seed", "3"]
    assert main([*argv, "--tier", "easy,hard", "--out", str(out), "--no-progress"]) == 0
    tasks = load_tasks(out, "train") + load_tasks(out, "test")
    assert sorted(t.meta["tier"] for t in tasks) == ["easy", "easy", "hard", "hard"]
    hard = [t for t in tasks if t.meta["tier"] == "hard"]
    assert all(set(t.meta) == {"tier", "hodoku_level", "hodoku_score", "techniques"} for t in hard)
    assert len({t.task_id for t in tasks}) == 4
    manifest = load_manifest(out)
    assert manifest["tier"] == "easy,hard" and set(manifest["tiers"]) == {"easy", "hard"}
    assert manifest["command"].endswith("--grade easy,hard --keep technique --out " + str(out))
    assert "wrote 2 train and 2 test tasks" in capsys.readouterr().out


def test_graded_request_that_cannot_be_met(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from milepost.envs.sudoku import harder

    monkeypatch.setattr(harder, "generate_graded", lambda *args, **kwargs: None)
    out = tmp_path / "ds"
    argv = ["data", "sudoku", "--levels", "L1", "--grade", "hard", "--train", "2", "--test", "1"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "level L1 (11-15 empty cells) gave 0 of 3 requested hard-tier puzzles" in err
    assert not out.exists()


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing_write(path: Path, rows: object) -> None:
        calls.append(path)
        if len(calls) == 2:  # the first split is written, the second fails
            raise OSError("disk full")
        Path(path).write_text("partial\n")

    monkeypatch.setattr(datasets_module, "atomic_write_jsonl", failing_write)
    with pytest.raises(OSError, match="disk full"):
        main([*SMALL, "--out", str(tmp_path / "ds"), "--no-progress"])
    assert list(tmp_path.iterdir()) == []


def test_interrupted_generation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from milepost.envs.sudoku import dataset

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(dataset, "build_dataset", interrupted)
    assert main([*SMALL, "--out", str(tmp_path / "ds"), "--no-progress"]) == 130
    assert list(tmp_path.iterdir()) == []


def test_error_from_the_installed_command(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("milepost")
    if not exe.exists():
        pytest.skip("the milepost console script is not installed next to this Python")
    result = subprocess.run(
        [str(exe), "data", "sudoku", "--levels", "L1-L9", "--out", str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "milepost: error: sudoku 9x9: unknown level 'L1-L9' (known: L1, L2, L3, L4, L5, L6, L7)"
    ]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "ds").exists()
