"""Shared pieces: records, configuration, registry, atomic I/O."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.config import EnvConfig, RewardWeights, apply_override, load_config, to_yaml
from milepost.datasets import load_tasks, write_dataset
from milepost.errors import InputError
from milepost.io import append_jsonl, atomic_write_text, read_jsonl
from milepost.registry import Registry
from milepost.types import Episode, Task, TerminationReason, Turn, zero_terms


def _task(i: int = 0) -> Task:
    return Task(
        task_id=f"t{i}",
        env="sudoku",
        size=4,
        level="S1",
        goal_distance=3,
        split="",
        seed=0,
        index=i,
        payload={"puzzle": "1234341221434321".replace("1", "0", 3), "solution": "1234341221434321"},
        meta={"tier": "easy"},
    )


def test_task_round_trip_through_json() -> None:
    task = _task()
    again = Task.from_dict(json.loads(json.dumps(task.to_dict())))
    assert again == task


def test_task_from_dict_names_the_bad_field() -> None:
    data = _task().to_dict()
    data["goal_distance"] = "three"
    with pytest.raises(InputError, match=r"Task\.goal_distance: expected an integer"):
        Task.from_dict(data)
    data = _task().to_dict()
    data["colour"] = 1
    with pytest.raises(InputError, match="unknown field"):
        Task.from_dict(data)
    del data["colour"], data["payload"]
    with pytest.raises(InputError, match="missing field 'payload'"):
        Task.from_dict(data)


def test_episode_round_trip_keeps_enum_and_turns() -> None:
    turn = Turn(
        index=0,
        observation="o",
        text="ACTION: x",
        actions=["x"],
        reward=0.5,
        reward_terms=zero_terms(),
        subgoals_completed=[1],
        remaining_distance=None,
        prompt_ids=[1, 2],
        completion_ids=[3],
        logprobs=[-0.1],
    )
    ep = Episode(
        task_id="t",
        policy="oracle",
        sample=0,
        seed=1,
        termination=TerminationReason.DEAD_END,
        success=False,
        goal_distance=3,
        steps=1,
        turns=[turn],
    )
    data = json.loads(json.dumps(ep.to_dict()))
    assert data["termination"] == "dead_end"
    again = Episode.from_dict(data)
    assert again == ep
    assert again.termination is TerminationReason.DEAD_END
    data["termination"] = "bored"
    with pytest.raises(InputError, match="not one of solved"):
        Episode.from_dict(data)


def test_config_yaml_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text("size: 4\nmax_steps: 20\nreward:\n  milestone: 1.0\n")
    cfg = load_config(EnvConfig, path, ["action_mode=flexible", "macro_k=3", "reward.format=0.5"])
    assert (cfg.size, cfg.max_steps, cfg.action_mode, cfg.macro_k) == (4, 20, "flexible", 3)
    assert cfg.reward == RewardWeights(milestone=1.0, format=0.5)
    again = load_config(
        EnvConfig,
        None,
        [f"{k}={json.dumps(v)}" for k, v in cfg.env_kwargs().items() if k != "reward_weights"],
    )
    assert again.action_mode == "flexible"
    assert "macro_k: 3" in to_yaml(cfg)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["colour=red"], "unknown field"),
        (["max_steps=0"], "env.max_steps"),
        (["max_steps=many"], "config.max_steps: expected an integer"),
        (["action_mode=atomic", "macro_k=3"], "env.macro_k"),
        (["action_mode=fixed"], "env.macro_n"),
        (["render=pretty"], "env.render"),
        (["reward.valid=-1"], "reward.valid"),
        (["subgoals=[diagonals]"], "env.subgoals"),
        (["oops"], "expected key=value"),
    ],
)
def test_config_errors_name_the_field(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_config(EnvConfig, None, overrides)


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_config(EnvConfig, tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(InputError, match="must be a mapping"):
        load_config(EnvConfig, bad)


def test_apply_override_nests() -> None:
    data: dict = {}
    apply_override(data, "a.b.c=[1, 2]")
    assert data == {"a": {"b": {"c": [1, 2]}}}


def test_registry_rejects_duplicates_and_names_known() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("one", 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("one", 2)
    with pytest.raises(InputError, match=r"unknown widget 'two' \(known: one\)"):
        reg.get("two")
    assert "one" in reg and len(reg) == 1 and list(reg) == ["one"]


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.txt"
    atomic_write_text(target, "hello")
    atomic_write_text(target, "again")
    assert target.read_text() == "again"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_read_jsonl_reports_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    append_jsonl(path, {"a": 1})
    with path.open("a") as fh:
        fh.write("{not json\n")
    rows = read_jsonl(path)
    assert next(rows) == {"a": 1}
    with pytest.raises(InputError, match=r"x\.jsonl:2: not valid JSON"):
        next(rows)


def test_dataset_write_is_atomic_and_refuses_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    other = _task(1)  # another puzzle: one puzzle in two splits is refused (datasets.check_disjoint)
    other.payload = {**other.payload, "puzzle": other.payload["solution"].replace("2", "0", 3)}
    write_dataset(out, {"train": [_task(0)], "test": [other]}, {"seed": 0})
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.jsonl", "train.jsonl"]
    assert load_tasks(out, "test") == [other]
    with pytest.raises(InputError, match="already exists"):
        write_dataset(out, {"train": [], "test": []}, {})
    write_dataset(out, {"train": [], "test": [_task(2)]}, {"seed": 1}, overwrite=True)
    assert load_tasks(out, "test") == [_task(2)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    with pytest.raises(InputError, match="no validation split"):
        load_tasks(out, "validation")
