"""``milepost data webshop``, ``milepost play webshop`` and ``milepost eval --env webshop`` with scripted policies."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks


def test_data_webshop_writes_levels_with_disjoint_target_products(tmp_path: Path) -> None:
    out = tmp_path / "shop"
    argv = ["data", "webshop", "--items", "2", "--levels", "6-8,9-11", "--train", "12", "--test", "4"]
    assert main([*argv, "--seed", "3", "--catalogue-size", "600", "--out", str(out)]) == 0
    train, test = load_tasks(out, "train"), load_tasks(out, "test")
    assert len(train) == 24 and len(test) == 8
    for task in train + test:
        lo, hi = (int(x) for x in task.level.split("-"))
        assert lo <= task.goal_distance <= hi and task.size == 2 and task.env == "webshop"
    targets = {split: {i["product_id"] for t in tasks for i in t.payload["items"]} for split, tasks in
               (("train", train), ("test", test))}  # fmt: skip
    assert not targets["train"] & targets["test"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"train": 24, "test": 8} and manifest["catalogue"]["size"] == 600
    # Same command, same data.
    again = tmp_path / "again"
    assert main([*argv, "--seed", "3", "--catalogue-size", "600", "--out", str(again)]) == 0
    assert (again / "test.jsonl").read_text() == (out / "test.jsonl").read_text()


def test_data_webshop_bad_input_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "webshop", "--items", "9", "--out", str(tmp_path / "x")]) == 2
    assert main(["data", "webshop", "--levels", "40-42", "--train", "1", "--test", "0",
                 "--catalogue-size", "300", "--out", str(tmp_path / "y")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("milepost: error:") for line in err)


def test_eval_webshop_with_the_oracle_and_noisy_oracle(tmp_path: Path) -> None:
    data = tmp_path / "shop"
    assert main(["data", "webshop", "--train", "2", "--test", "3", "--catalogue-size", "400", "--out", str(data)]) == 0
    assert main(["eval", "--env", "webshop", "--data", str(data), "--policy", "oracle", "--n", "1", "--k", "1",
                 "--out", str(tmp_path / "oracle"), "--no-progress"]) == 0  # fmt: skip
    metrics = json.loads((tmp_path / "oracle" / "metrics.json").read_text())
    episodes = [json.loads(line) for line in (tmp_path / "oracle" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 3 and all(e["success"] and e["steps"] == e["goal_distance"] for e in episodes)
    assert metrics
    assert main(["eval", "--env", "webshop", "--data", str(data), "--policy", "noisy-oracle:0.5", "--agent", "sgo",
                 "--n", "2", "--k", "1", "--out", str(tmp_path / "noisy"), "--no-progress"]) == 0  # fmt: skip


def test_play_webshop_reads_actions_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("click[Buy Now]\nsearch[cotton tee]\nquit\n"))
    assert main(["play", "webshop", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "Goal distance:" in out and "Last action rejected" in out and "Page 1 (Total results" in out


def test_a_tampered_goal_distance_is_refused_on_load(tmp_path: Path) -> None:
    from milepost.errors import InputError

    out = tmp_path / "shop"
    assert main(["data", "webshop", "--train", "2", "--test", "2", "--catalogue-size", "300", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "test.jsonl").read_text().splitlines()]
    rows[1]["goal_distance"] += 1
    (out / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"test\.jsonl:2: goal_distance: .* shortest purchase takes"):
        load_tasks(out, "test")
