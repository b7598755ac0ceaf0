"""Level datasets: contents, determinism, de-duplication up to symmetry, small boards that run out, errors."""

from __future__ import annotations

import io
import sys

import pytest

from milepost.envs.levels import get_level, parse_levels
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku import dataset as dataset_module
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.dataset import build_dataset
from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.grid import parse_grid
from milepost.envs.sudoku.rules import oracle_fill
from milepost.envs.sudoku.singles import classify_singles
from milepost.errors import InputError
from milepost.types import Task


@pytest.fixture(scope="module")
def nine() -> tuple[dict[str, list[Task]], dict]:
    return build_dataset(9, parse_levels("L1,L4,L7", "sudoku", 9), 6, 3, seed=2, progress=False)


def test_records_follow_the_contract(nine: tuple[dict[str, list[Task]], dict]) -> None:
    splits, manifest = nine
    assert {k: len(v) for k, v in splits.items()} == {"train": 18, "test": 9} == manifest["counts"]
    for split, tasks in splits.items():
        for task in tasks:
            level = get_level("sudoku", 9, task.level)
            puzzle = parse_grid(task.payload["puzzle"], 9)
            assert task.split == split and task.env == "sudoku" and task.size == 9 and task.seed == 2
            assert level.contains(task.goal_distance) and task.goal_distance == puzzle.count(0)
            grade = classify_singles(puzzle)
            assert task.meta == {
                "tier": "easy",
                "singles": {
                    "full_house": grade.full_house,
                    "naked_single": grade.naked_single,
                    "hidden_single": 0,
                },
            }
            assert grade.full_house + grade.naked_single == task.goal_distance
            # Any task can be regenerated from (seed, index, goal distance).
            again = generate_easy(9, task.goal_distance, task.seed, task.index)
            assert [task.payload["puzzle"], task.payload["solution"]] == ["".join(map(str, g)) for g in again]
            assert Task.from_dict(task.to_dict()) == task
    assert len({t.task_id for tasks in splits.values() for t in tasks}) == 27
    info = manifest["levels"]["L4"]
    assert info["counts"] == {"train": 6, "test": 3} and not info["exhausted"]
    assert manifest["seed"] == 2 and manifest["tier"] == "easy" and manifest["generator"]
    assert manifest["exhausted_levels"] == []


def test_tasks_play_through_the_environment(nine: tuple[dict[str, list[Task]], dict]) -> None:
    env = SudokuEnv(size=9, max_steps=60)
    for task in nine[0]["test"][:3]:
        env.reset(options={"task": task})
        info = None
        while (fill := oracle_fill(env.state)) is not None:
            *_, info = env.step(fill.text())
        assert info is not None and info["solved"]


def test_deterministic_and_test_split_independent_of_train_size() -> None:
    levels = parse_levels("L2", "sudoku", 9)
    a, manifest_a = build_dataset(9, levels, 4, 3, seed=5, progress=False)
    b, manifest_b = build_dataset(9, levels, 4, 3, seed=5, progress=False)
    c, _ = build_dataset(9, levels, 9, 3, seed=5, progress=False)
    assert a == b and manifest_a == manifest_b
    assert c["test"] == a["test"]
    assert c["train"][:4] == a["train"]
    other, _ = build_dataset(9, levels, 4, 3, seed=6, progress=False)
    assert {t.payload["puzzle"] for t in other["test"]} != {t.payload["puzzle"] for t in a["test"]}


def test_no_puzzle_repeats_up_to_symmetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when the generator keeps offering the same puzzle in disguise, each class appears once."""
    base, solution = generate_easy(9, 13, 0, 0)
    digits = [0, 9, 8, 7, 6, 5, 4, 3, 2, 1]

    def disguised(n: int, empties: int, seed: int, index: int) -> tuple[list[int], list[int]]:
        if index % 2:  # every other draw: the base puzzle relabelled and transposed
            grid = [base[c * 9 + r] for r in range(9) for c in range(9)]
            sol = [solution[c * 9 + r] for r in range(9) for c in range(9)]
            return [digits[d] for d in grid], [digits[d] for d in sol]
        return generate_easy(n, empties, seed, index)

    monkeypatch.setattr(dataset_module, "generate_easy", disguised)
    splits, manifest = build_dataset(9, parse_levels("L1", "sudoku", 9), 5, 3, seed=0, progress=False)
    forms = [canonical_form(parse_grid(t.payload["puzzle"], 9)) for s in splits.values() for t in s]
    assert len(forms) == len(set(forms)) == 8
    assert manifest["levels"]["L1"]["duplicates"] >= 3


def test_small_board_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataset_module, "MAX_DUPLICATE_STREAK", 150)
    levels = parse_levels("S1,S3", "sudoku", 4)
    splits, manifest = build_dataset(4, levels, 300, 60, seed=0, progress=False)
    s1, s3 = manifest["levels"]["S1"], manifest["levels"]["S3"]
    assert s1["exhausted"] and manifest["exhausted_levels"] == ["S1"]
    found = s1["counts"]["train"] + s1["counts"]["test"]
    assert 20 < found < 360 and s1["counts"]["test"] == round(found * 60 / 360)
    assert s3["counts"] == {"train": 300, "test": 60} and not s3["exhausted"]
    forms = [canonical_form(parse_grid(t.payload["puzzle"], 4)) for s in splits.values() for t in s]
    assert len(forms) == len(set(forms)) == found + 360


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_stderr_only_when_it_is_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    build_dataset(4, parse_levels("S2", "sudoku", 4), 3, 1, seed=0, progress=True)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""  # a log file or a pipe gets no carriage-return noise
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    build_dataset(4, parse_levels("S2", "sudoku", 4), 3, 1, seed=0, progress=True)
    assert "sudoku 4x4" in terminal.getvalue() and capsys.readouterr().out == ""


def test_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    l1 = parse_levels("L1", "sudoku", 9)
    with pytest.raises(InputError, match="tier 'medium' cannot be generated"):
        build_dataset(9, l1, 1, 1, 0, tier="medium")
    with pytest.raises(InputError, match="must be >= 0"):
        build_dataset(9, l1, -1, 1, 0)
    with pytest.raises(InputError, match="nothing to generate"):
        build_dataset(9, l1, 0, 0, 0)
    with pytest.raises(InputError, match="at most 100,000 tasks per level"):
        build_dataset(9, l1, 100_000, 1, 0)
    with pytest.raises(InputError, match="no levels"):
        build_dataset(9, [], 1, 1, 0)
    with pytest.raises(InputError, match="not of this size"):
        build_dataset(4, l1, 1, 1, 0)
    with pytest.raises(InputError, match="unsupported size 5"):
        build_dataset(5, l1, 1, 1, 0)

    def never(n: int, empties: int, seed: int, index: int) -> tuple[list[int], list[int]]:
        raise InputError("no puzzle")

    monkeypatch.setattr(dataset_module, "generate_easy", never)
    with pytest.raises(InputError, match=r"level L1 .* yields no easy-tier puzzle"):
        build_dataset(9, l1, 1, 1, 0, progress=False)
