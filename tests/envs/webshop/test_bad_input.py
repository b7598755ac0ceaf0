"""Bad web-shop input is a one-line ``InputError`` (a ``ValueError``) naming the problem, never a traceback: task
records with an overflowing price limit or a category that is not the target's, a non-integer catalogue seed, a
task that is not a task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.datasets import load_tasks
from milepost.envs.webshop import WebShopEnv
from milepost.errors import InputError
from milepost.types import Task


def _dataset(tmp_path: Path, tasks: list[Task], edit: dict[str, object]) -> Path:
    rows = [task.to_dict() for task in tasks[:2]]
    rows[0]["payload"]["items"][0].update(edit)
    out = tmp_path / "test.jsonl"
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return out


@pytest.mark.parametrize("limit", [1e308, float("inf"), -1.0, 1e10])
def test_a_price_limit_that_overflows_or_is_out_of_range_is_refused(
    tmp_path: Path, one_item_tasks: list[Task], limit: float
) -> None:
    path = _dataset(tmp_path, one_item_tasks, {"price_limit": limit})  # json writes Infinity for inf
    with pytest.raises(InputError, match=r"test.jsonl:1: payload: webshop item: price_limit must be 0-1e\+09"):
        load_tasks(path)


def test_a_price_limit_overflow_is_a_one_line_error_in_eval_and_shop(
    tmp_path: Path, one_item_tasks: list[Task], capsys: pytest.CaptureFixture[str]
) -> None:
    from milepost.cli.main import main

    path = _dataset(tmp_path, one_item_tasks, {"price_limit": 1e308})
    assert main(["shop", "--data", str(path)]) == 2
    out = tmp_path / "run"
    assert main(["eval", "--env", "webshop", "--data", str(path), "--policy", "oracle", "--n", "1", "--k", "1",
                 "--out", str(out), "--no-progress"]) == 2  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all("price_limit" in line for line in lines), lines


def test_a_category_that_is_not_the_targets_is_refused(tmp_path: Path, one_item_tasks: list[Task]) -> None:
    item = one_item_tasks[0].payload["items"][0]
    other = "electronics" if item["category"] != "electronics" else "home"
    # The lie mattered: a product of another type in the stated category would earn half credit.
    with pytest.raises(InputError, match=rf"payload: item 1: category '{other}', but {item['product_id']} is in"):
        load_tasks(_dataset(tmp_path, one_item_tasks, {"category": other}))


@pytest.mark.parametrize(("setting", "value"), [("catalogue_seed", "x"), ("catalogue_size", "300"),
                                                ("catalogue_seed", 1.5), ("catalogue_size", True)])  # fmt: skip
def test_catalogue_settings_must_be_integers(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"webshop: {setting} must be an integer"):
        WebShopEnv(**{setting: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("task", ["hello", 5, ["webshop"]])
def test_reset_with_something_that_is_not_a_task_is_refused_and_changes_nothing(
    one_item_tasks: list[Task], task: object
) -> None:
    env = WebShopEnv()
    obs, _ = env.reset(options={"task": one_item_tasks[0]})
    with pytest.raises(ValueError, match="options\\['task'\\] must be a Task or its dict"):
        env.reset(options={"task": task})
    assert env.task is one_item_tasks[0] and env.rules is not None and env.rules.render(None) == obs
