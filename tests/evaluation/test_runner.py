"""`milepost eval` end to end with scripted policies: outputs, resume, refusal of a different config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.agent.loop import AgentSettings
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.io import read_jsonl


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    tasks = []
    for level, empties in (("S2", 6), ("S4", 10)):
        for i in range(6):
            tasks.append(make_task(*generate_easy(4, empties, 9, i + empties), level=level, split="test", index=i))
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})


def test_eval_writes_outputs_and_resumes(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = EvalSpec(
        env="sudoku",
        data=str(dataset),
        policy="noisy-oracle:0.8:format",
        n=4,
        ks=[1, 4],
        env_kwargs={"max_steps": 12},
        settings=AgentSettings(batch_size=8),
    )
    result = evaluate(spec, out, progress=False)
    assert {p.name for p in out.iterdir()} >= {"episodes.jsonl", "metrics.json", "report.md", "success.png", "run.json"}
    rows = list(read_jsonl(out / "episodes.jsonl"))
    assert len(rows) == 12 * 4
    levels = {lv["level"]: lv for lv in result["levels"]}
    assert set(levels) == {"S2", "S4"}
    # Budget 12 fits 6 and 10 fills; format noise makes the longer level harder.
    assert levels["S2"]["oracle_ceiling"] == 1.0 and levels["S4"]["oracle_ceiling"] == 1.0
    assert levels["S2"]["avg"]["value"] > levels["S4"]["avg"]["value"]
    report = (out / "report.md").read_text()
    assert "| pass@4 (%) |" in report and "scripted baseline" in report
    # Drop the last 10 episodes as if the run had been killed; the rerun plays exactly those again.
    kept = rows[:-10]
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    again = evaluate(spec, out, progress=False)
    rows2 = list(read_jsonl(out / "episodes.jsonl"))
    assert len(rows2) == 48 and rows2[:-10] == kept
    assert sorted((r["task_id"], r["sample"]) for r in rows2) == sorted((r["task_id"], r["sample"]) for r in rows)
    assert again["meta"]["episodes"] == 48


def test_eval_refuses_a_folder_from_another_config(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=1, ks=[1], limit=1), out, progress=False)
    with pytest.raises(
        InputError, match=r"different configuration \(policy \"oracle\" in the folder, \"random\" now\)"
    ):
        evaluate(EvalSpec(env="sudoku", data=str(dataset), policy="random", n=1, ks=[1], limit=1), out, progress=False)


def test_oracle_ceiling_reflects_the_budget(dataset: Path, tmp_path: Path) -> None:
    spec = EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=1, ks=[1], env_kwargs={"max_steps": 8})
    result = evaluate(spec, tmp_path / "r", progress=False)
    levels = {lv["level"]: lv for lv in result["levels"]}
    assert levels["S2"]["oracle_ceiling"] == 1.0 and levels["S2"]["avg"]["value"] == 1.0
    assert levels["S4"]["oracle_ceiling"] == 0.0 and levels["S4"]["avg"]["value"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 2, "ks": [4]}, "must lie in 1..n=2"),
        ({"agent": "wizard"}, "unknown agent"),
        ({"levels": "S9"}, "unknown level 'S9'"),
        ({"env": "rushhour"}, "holds sudoku tasks, not rushhour"),
        ({"policy": "noisy-oracle:1.5"}, "must be in"),
    ],
)
def test_bad_eval_requests(dataset: Path, tmp_path: Path, kwargs: dict, message: str) -> None:
    base = {"env": "sudoku", "data": str(dataset), "policy": "oracle"}
    with pytest.raises(InputError, match=message):
        evaluate(EvalSpec(**(base | kwargs)), tmp_path / "r", progress=False)
