"""Split rules under forced collisions: the generators are made to repeat themselves, and the datasets must
still hold each Rush Hour cluster and each Sudoku puzzle (up to symmetry) once, across splits and tiers."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.levels import parse_levels
from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.grid import parse_grid


def _reletter(board: str) -> str:
    """The same Rush Hour position with the other vehicles' letters reversed (same cluster, other string)."""
    letters = sorted({c for c in board if c.isupper() and c != "A"})
    swap = dict(zip(letters, reversed(letters)))
    return "".join(swap.get(c, c) for c in board)


def test_rushhour_generator_repeating_a_cluster_lands_it_in_one_split(monkeypatch: pytest.MonkeyPatch) -> None:
    from milepost.envs.rushhour import dataset

    real = dataset.generate_puzzle

    def twice(seed: int, index: int, level: Any, **kwargs: Any) -> Any:
        # index 2k is puzzle k, index 2k + 1 the same cluster relettered: every cluster is offered twice
        made = real(seed, index // 2, level, **kwargs)
        return dataclasses.replace(made, board=_reletter(made.board)) if index % 2 else made

    monkeypatch.setattr(dataset, "generate_puzzle", twice)
    levels = parse_levels("4-6", "rushhour", 6)
    splits, manifest = dataset.build_dataset(levels, 3, 3, seed=3)
    tasks = splits["train"] + splits["test"]
    assert len(tasks) == 6 and manifest["counts"] == {"train": 3, "test": 3}
    clusters = [t.meta["cluster_id"] for t in tasks]
    assert len(set(clusters)) == 6, "one cluster appears twice in the dataset"
    assert not {t.meta["cluster_id"] for t in splits["train"]} & {t.meta["cluster_id"] for t in splits["test"]}
    assert sorted(t.index for t in tasks) == [0, 2, 4, 6, 8, 10]  # every relettered twin was skipped


def _relabel(cells: list[int]) -> list[int]:
    """Digits d -> 10 - d: the same puzzle up to symmetry."""
    return [0 if d == 0 else 10 - d for d in cells]


def test_sudoku_tiers_never_share_a_puzzle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from milepost.envs.sudoku import dataset, harder

    easy: list[Any] = []
    real_build, real_graded = dataset.build_dataset, harder.generate_graded

    def build(*args: Any, **kwargs: Any) -> Any:
        part, manifest = real_build(*args, **kwargs)
        easy.extend(t for tasks in part.values() for t in tasks)
        return part, manifest

    offered: list[str] = []

    def graded(*args: Any, **kwargs: Any) -> Any:
        made = real_graded(*args, **kwargs)
        if made is not None and len(offered) < len(easy):
            # offer each easy puzzle again, relabelled, as a graded one before the real draws
            twin = easy[len(offered)]
            offered.append(twin.task_id)
            puzzle = _relabel(parse_grid(twin.payload["puzzle"], 9))
            solution = _relabel(parse_grid(twin.payload["solution"], 9))
            return dataclasses.replace(made, puzzle=puzzle, solution=solution)
        return made

    monkeypatch.setattr(dataset, "build_dataset", build)
    monkeypatch.setattr(harder, "generate_graded", graded)
    out = tmp_path / "mixed"
    argv = ["data", "sudoku", "--levels", "L6", "--train", "1", "--test", "1", "--seed", "3", "--grade", "easy,hard"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    assert len(offered) == 2, "the collisions were not offered"
    tasks = load_tasks(out, "train") + load_tasks(out, "test")
    assert sorted(t.meta["tier"] for t in tasks) == ["easy", "easy", "hard", "hard"]
    forms = [canonical_form(parse_grid(t.payload["puzzle"], 9)) for t in tasks]
    assert len(set(forms)) == 4, "a puzzle appears in two tiers"


def _plant_twin(module: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap ``module.name`` (a dataset builder) so that its first test task is its first training task's puzzle
    under the test task's own id: what no generator should ever hand to ``write_dataset``."""
    real = getattr(module, name)

    def build(*args: Any, **kwargs: Any) -> Any:
        splits, manifest = real(*args, **kwargs)
        twin, test = splits["train"][0], splits["test"][0]
        splits["test"][0] = dataclasses.replace(twin, task_id=test.task_id, split="test", index=test.index)
        return splits, manifest

    monkeypatch.setattr(module, name, build)


@pytest.mark.parametrize(
    ("env", "module", "argv"),
    [
        ("sudoku", "milepost.envs.sudoku.dataset", ["--size", "4", "--levels", "S1", "--train", "2", "--test", "2"]),
        ("rushhour", "milepost.envs.rushhour.dataset", ["--levels", "1-3", "--train", "2", "--test", "2"]),
        ("webshop", "milepost.envs.webshop.dataset", ["--train", "2", "--test", "2", "--catalogue-size", "200"]),
    ],
)
def test_one_puzzle_in_two_splits_under_another_id_is_refused(
    env: str, module: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import importlib

    _plant_twin(importlib.import_module(module), "build_dataset", monkeypatch)
    out = tmp_path / env
    capsys.readouterr()
    assert main(["data", env, *argv, "--out", str(out), *(["--no-progress"] if env != "webshop" else [])]) == 2
    err = capsys.readouterr().err.strip()
    assert "is the same puzzle as train task" in err and "\n" not in err, err
    assert not out.exists()


def test_a_converted_dataset_sharing_a_puzzle_across_splits_is_refused(tmp_path: Path) -> None:
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku import make_task
    from milepost.envs.sudoku.generator import generate_easy
    from milepost.errors import InputError

    puzzle = generate_easy(4, 3, 5, 0)
    train = make_task(*puzzle, level="S1", split="train", index=0)
    test = make_task(*puzzle, level="S1", split="test", index=7)
    assert train.task_id != test.task_id
    with pytest.raises(InputError, match="same puzzle"):
        write_dataset(tmp_path / "d", {"train": [train], "test": [test]}, {})
    assert not (tmp_path / "d").exists()
    write_dataset(tmp_path / "ok", {"train": [train], "test": []}, {})  # once is fine
