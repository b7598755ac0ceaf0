"""Datasets are checked on load: every tampered record is a one-line error naming the file, line and field.

Before, a task with goal distance 99, a level outside the table, a manifest of another environment or size, and
duplicate task ids (two puzzles merged in one report row) all evaluated with exit status 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks, write_dataset
from milepost.envs.rushhour import make_task as rush_task
from milepost.envs.rushhour.distances import cache_file
from milepost.envs.sudoku import make_task as sudoku_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.types import Task

BOARD7 = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"  # 7 moves, 12 one-cell steps (level 7-9)
BOARD20 = "BBBCCJDDHoIJAAHoIoGoHooxGFFooooooooo"  # 20 moves, 32 steps (level 19-21)

Row = dict[str, Any]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILEPOST_CACHE_DIR", str(tmp_path / "cache"))


def _sudoku(split: str = "test") -> list[Task]:
    return [
        sudoku_task(*generate_easy(4, empties, 9, i), level=level, split=split, seed=9, index=i)
        for i, (level, empties) in enumerate([("S2", 6), ("S2", 5), ("S4", 10)])
    ]


def _rush(split: str = "test") -> list[Task]:
    return [
        rush_task(BOARD7, level="7-9", split=split, index=0),
        rush_task(BOARD20, level="19-21", split=split, index=1),
    ]


def _dataset(path: Path, tasks: list[Task], manifest: dict[str, Any], train: list[Task] | None = None) -> Path:
    return write_dataset(path, {"train": train or [], "test": tasks}, manifest)


def _tamper(data: Path, line: int, edit: Callable[[Row], None], split: str = "test") -> Path:
    file = data / f"{split}.jsonl"
    rows = [json.loads(x) for x in file.read_text().splitlines()]
    edit(rows[line - 1])
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return file


def _set(**values: Any) -> Callable[[Row], None]:
    def edit(row: Row) -> None:
        for key, value in values.items():
            if key.startswith("payload_"):
                row["payload"][key.removeprefix("payload_")] = value
            elif key.startswith("meta_"):
                row["meta"][key.removeprefix("meta_")] = value
            else:
                row[key] = value

    return edit


SUDOKU_CASES = [
    (2, _set(goal_distance=99), "goal_distance: 99, but the puzzle has 5 empty cells"),
    (1, _set(level="S9"), "level: 'S9' is not a sudoku 4x4 level"),
    (3, _set(level="S1"), "level: S1 holds 3-4 empty cells, but the puzzle has 10"),
    (1, _set(level=""), "level: '' is not a sudoku 4x4 level"),
    (2, _set(payload_puzzle="0" * 15), "payload: sudoku: expected 16 characters"),
    (2, _set(payload_puzzle="5" + "0" * 15), "payload: sudoku: character '5' at position 0 is not a digit 1-4"),
    (1, _set(payload_puzzle="\uff11" + "0" * 15), "payload: sudoku: character '１' at position 0"),
    (1, _set(payload_solution="1234" * 4), "payload: the solution is not a complete valid grid"),
    (3, _set(payload={}), "payload: payload needs a 'puzzle' string"),
    (3, _set(payload=[]), "payload: expected a JSON object, got list"),
    (1, _set(meta="easy"), "meta: expected a JSON object, got str"),
    (2, _set(env="maze"), "env: 'maze', but"),  # the manifest says sudoku
    (2, _set(size=6), "size: 6, but"),  # the manifest says 4
    (3, _set(split="train"), "split: 'train' in the test file"),
    (3, _set(task_id="sudoku4-test-S2-9-0"), "task_id: 'sudoku4-test-S2-9-0' is also on line 1"),
]


@pytest.mark.parametrize(("line", "edit", "message"), SUDOKU_CASES)
def test_tampered_sudoku_records_are_refused(
    tmp_path: Path, line: int, edit: Callable[[Row], None], message: str
) -> None:
    data = _dataset(tmp_path / "ds", _sudoku(), {"env": "sudoku", "size": 4, "counts": {"test": 3}})
    assert len(load_tasks(data)) == 3
    file = _tamper(data, line, edit)
    with pytest.raises(InputError) as caught:
        load_tasks(data)
    assert str(caught.value).startswith(f"{file}:{line}: "), caught.value
    assert message in str(caught.value) and "\n" not in str(caught.value)


RUSH_CASES = [
    (1, _set(goal_distance=99), "goal_distance: 99, but the board's optimal solution takes 12 one-cell steps"),
    (2, _set(level="4-6"), "level: 4-6 holds 4-6 moves, but the board's optimal solution takes 20"),
    (2, _set(level="20-22"), "level: '20-22' is not a rushhour 6x6 level"),
    (1, _set(meta_min_moves=3), "meta.min_moves: 3, but the solver finds 7"),
    (1, _set(payload_board=BOARD7[:-1]), "payload: board has 35 characters"),
    (1, _set(payload_board=BOARD7[:-1] + "?"), "payload: board: unexpected character '?'"),
    (2, _set(payload_board="ooooooooooooAAoBBooooooooooooooooooo"), "payload: the board cannot be solved"),
    (1, _set(size=9), "size: rushhour has no 9x9 board"),
]


@pytest.mark.parametrize(("line", "edit", "message"), RUSH_CASES)
def test_tampered_rush_hour_records_are_refused(
    tmp_path: Path, line: int, edit: Callable[[Row], None], message: str
) -> None:
    data = _dataset(tmp_path / "ds", _rush(), {"env": "rushhour"})
    assert [t.goal_distance for t in load_tasks(data)] == [12, 32]
    file = _tamper(data, line, edit)
    with pytest.raises(InputError) as caught:
        load_tasks(data)
    assert str(caught.value).startswith(f"{file}:{line}: ") and message in str(caught.value), caught.value


def test_manifest_must_agree_with_the_records(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "a", _sudoku(), {"env": "rushhour"})
    with pytest.raises(InputError, match=r"test\.jsonl:1: env: 'sudoku', but .*manifest\.json says 'rushhour'"):
        load_tasks(data)
    data = _dataset(tmp_path / "b", _sudoku(), {"env": "sudoku", "size": 9})
    with pytest.raises(InputError, match=r"test\.jsonl:1: size: 4, but .*manifest\.json says 9"):
        load_tasks(data)
    data = _dataset(tmp_path / "c", _sudoku(), {"env": "sudoku", "levels": {"S2": {}}})
    with pytest.raises(InputError, match=r"test\.jsonl:3: level: 'S4' is not among .*manifest\.json's levels"):
        load_tasks(data)
    data = _dataset(tmp_path / "d", _sudoku(), {"counts": {"test": 2}})
    with pytest.raises(InputError, match=r"test\.jsonl: 3 tasks, but .*manifest\.json counts 2 in test"):
        load_tasks(data)


def test_unknown_environment(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "ds", _sudoku(), {})
    _tamper(data, 3, _set(env="maze"))
    with pytest.raises(InputError, match=r"test\.jsonl:3: env: unknown environment 'maze' \(known: .*sudoku"):
        load_tasks(data)


def test_task_ids_are_unique_across_the_splits_of_a_folder(tmp_path: Path) -> None:
    train = [sudoku_task(*generate_easy(4, 6, 9, 7), level="S2", split="train", seed=9, index=0)]
    train[0].task_id = _sudoku()[1].task_id
    data = _dataset(tmp_path / "ds", _sudoku(), {}, train=train)
    with pytest.raises(InputError, match=r"test\.jsonl:2: task_id: '.*' is also in .*train\.jsonl:1"):
        load_tasks(data, "test")
    with pytest.raises(InputError, match=r"train\.jsonl:1: task_id: .* is also in .*test\.jsonl:2"):
        load_tasks(data / "train.jsonl")


def test_rush_hour_distances_come_from_a_checked_cache(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "ds", _rush()[:1], {})
    load_tasks(data)
    cache = cache_file()
    assert cache.parent == tmp_path / "cache" and json.loads(cache.read_text()) == [BOARD7, [7, 12]]
    # An edited cache entry that would let a wrong goal distance through is caught by the spot check.
    cache.write_text(json.dumps([BOARD7, [7, 99]]) + "\n")
    _tamper(data, 1, _set(goal_distance=99))
    with pytest.raises(InputError, match="goal_distance: 99, but the board's optimal solution takes 12"):
        load_tasks(data)
    assert json.loads(cache.read_text()) == [BOARD7, [7, 12]]  # discarded and written again


def test_eval_on_a_tampered_dataset_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(tmp_path / "ds", _sudoku(), {"env": "sudoku", "size": 4})
    out = tmp_path / "run"
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--n", "1", "--k", "1"]
    cases = [
        (_set(goal_distance=99), "test.jsonl:2: goal_distance: 99"),
        (_set(level="S7"), "test.jsonl:2: level: 'S7' is not a sudoku 4x4 level"),
        (_set(task_id="sudoku4-test-S2-9-0"), "test.jsonl:2: task_id: 'sudoku4-test-S2-9-0' is also on line 1"),
    ]
    for edit, message in cases:
        clean = json.loads((data / "test.jsonl").read_text().splitlines()[1])
        _tamper(data, 2, edit)
        assert main([*argv, "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        _tamper(data, 2, lambda row, clean=clean: row.update(clean))
    _tamper(data, 1, _set(env="rushhour"), split="test")
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "test.jsonl:1: env: 'rushhour', but" in err and err.count("\n") == 1
