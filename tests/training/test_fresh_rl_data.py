"""``experiments/fresh_rl_data.py``: a training split of puzzles the base dataset never holds, beside the base's
test split unchanged; a fresh folder with too few unseen puzzles is a one-line error and exit 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from experiments.fresh_rl_data import fresh_split, main
from milepost.cli.main import main as milepost
from milepost.datasets import load, puzzle_key
from milepost.errors import InputError


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILEPOST_CACHE_DIR", str(tmp_path / "cache"))


def _generate(out: Path, seed: int, train: int, test: int) -> Path:
    args = ["data", "rushhour", "--levels", "1-3", "--train", str(train), "--test", str(test), "--seed", str(seed)]
    assert milepost([*args, "--workers", "1", "--no-progress", "--out", str(out)]) == 0
    return out


def test_the_training_split_is_unseen_and_the_test_split_is_the_base(tmp_path: Path) -> None:
    base = _generate(tmp_path / "base", seed=1, train=5, test=3)
    fresh = _generate(tmp_path / "fresh", seed=2, train=8, test=1)
    out = tmp_path / "out"
    assert main(["--base", str(base), "--fresh", str(fresh), "--train", "4", "--out", str(out)]) == 0

    made, old = load(out), load(base)
    assert (out / "test.jsonl").read_bytes() == (base / "test.jsonl").read_bytes()
    assert len(made.splits["train"]) == 4
    seen = {puzzle_key(t) for split in old.splits.values() for t in split}
    assert not seen & {puzzle_key(t) for t in made.splits["train"]}
    fresh_ids = [t.task_id for t in load(fresh).splits["train"]]
    ids = [t.task_id for t in made.splits["train"]]
    assert set(ids) <= set(fresh_ids) and ids == sorted(ids, key=fresh_ids.index)  # the fresh folder's order
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"train": 4, "test": 3}
    assert manifest["levels"]["1-3"]["counts"]["train"] == 4
    assert str(fresh) in manifest["train_source"]


def test_a_puzzle_of_the_base_is_dropped_under_any_id(tmp_path: Path) -> None:
    old = load(_generate(tmp_path / "base", seed=1, train=3, test=2))
    # The base's first test puzzle, renamed as a fresh training task: its cluster gives it away.
    renamed = dataclasses.replace(old.splits["test"][0], task_id="fresh-0", split="train", seed=9)
    others = load(_generate(tmp_path / "fresh", seed=2, train=3, test=1)).splits["train"]
    kept = fresh_split(old.splits, [renamed, *others], per_level=3)
    assert [t.task_id for t in kept] == [t.task_id for t in others]
    with pytest.raises(InputError, match="fewer than 4 unseen tasks"):
        fresh_split(old.splits, [renamed, *others], per_level=4)


def test_too_few_unseen_puzzles_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _generate(tmp_path / "base", seed=1, train=3, test=2)
    assert main(["--base", str(base), "--fresh", str(base), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fresh_rl_data: fewer than 300 unseen tasks") and "\n" not in err
    assert not (tmp_path / "out").exists()
