"""The flat parquet export (``milepost.export``'s table) on hand-built runs: per-turn columns equal to the turns'
fields (token counts equal to the id lists' lengths), the runs a folder holds, and the targets it refuses. No
evaluation is played, so the mutation gate's ``export`` group can run these per mutant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.errors import InputError
from milepost.export import check_target, default_out, export_episodes, find_runs, turn_records
from milepost.types import REWARD_TERM_NAMES, Episode, TerminationReason, Turn

pa = pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="the hf extra (pyarrow) is not installed")


def _turn(index: int, prompt: int, completion: int, *, logprobs: bool = True) -> Turn:
    terms = {"outcome": 0.0, "format": -1.0 * (index % 2), "valid": -0.5 * index, "milestone": float(index)}
    return Turn(
        index=index,
        observation=f"obs {index}",
        text=f"answer {index}",
        actions=[f"a{index}", "b"][: 1 + index % 2],
        reward=0.25 * index,
        reward_terms=terms,  # type: ignore[arg-type]
        subgoals_completed=list(range(index)),
        remaining_distance=None if index == 2 else 5 - index,
        prompt_ids=list(range(100, 100 + prompt)),
        completion_ids=list(range(7, 7 + completion)),
        logprobs=[-0.5] * completion if logprobs else None,
        correct_actions=index,
        error="bad" if index == 1 else None,
        n_requested=index + 1,
        new_subgoals=[index],
        state_key=f"k{index}",
        finish_reason="length" if index == 2 else "stop",
    )


def _episodes() -> list[Episode]:
    first = Episode(
        "t1",
        "pol",
        0,
        11,
        TerminationReason.SOLVED,
        True,
        4,
        3,
        level="L1",
        turns=[_turn(0, 5, 3), _turn(1, 9, 1), _turn(2, 12, 6, logprobs=False)],
        meta={"env": "sudoku", "x": 1},
    )
    second = Episode(
        "t2", "pol", 1, 12, TerminationReason.BUDGET_EXHAUSTED, False, 7, 1, level="L2", turns=[_turn(0, 4, 2)], meta={}
    )
    return [first, second]  # fmt: skip


def _run(folder: Path, episodes: list[Episode] | None = None, run: object = None) -> Path:
    folder.mkdir(parents=True)
    lines = [json.dumps(ep.to_dict()) for ep in episodes or _episodes()]
    (folder / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    if run is not None:
        (folder / "run.json").write_text(json.dumps(run))
    return folder


def test_each_turn_is_one_record_with_its_own_token_counts(tmp_path: Path) -> None:
    runs = find_runs(_run(tmp_path / "r", run={"policy": "pol"}))
    assert [(r.name, r.lines, r.run) for r in runs] == [("", [1, 2], {"policy": "pol"})]
    rows = turn_records(runs)
    assert [(r["task_id"], r["turn"]) for r in rows] == [("t1", 0), ("t1", 1), ("t1", 2), ("t2", 0)]
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [(5, 3), (9, 1), (12, 6), (4, 2)]
    for row in rows:
        assert row["prompt_tokens"] == len(row["prompt_ids"]) and row["completion_tokens"] == len(row["completion_ids"])
    second = rows[1]
    assert second == {
        "run": "", "task_id": "t1", "sample": 0, "episode_seed": 11, "policy": "pol", "env": "sudoku", "level": "L1",
        "goal_distance": 4, "success": True, "termination": "solved", "episode_steps": 3, "turn": 1,
        "observation": "obs 1", "text": "answer 1", "actions": ["a1", "b"], "reward": 0.25,
        "reward_outcome": 0.0, "reward_format": -1.0, "reward_valid": -0.5, "reward_milestone": 1.0,
        "subgoals_completed": [0], "new_subgoals": [1], "remaining_distance": 4, "correct_actions": 1,
        "n_requested": 2, "error": "bad", "finish_reason": "stop", "state_key": "k1",
        "prompt_tokens": 9, "completion_tokens": 1, "prompt_ids": list(range(100, 109)), "completion_ids": [7],
        "logprobs": [-0.5], "episode_meta": '{"env":"sudoku","x":1}',
    }  # fmt: skip
    assert (rows[2]["remaining_distance"], rows[2]["logprobs"], rows[3]["env"]) == (None, None, "")
    assert (rows[3]["success"], rows[3]["termination"], rows[3]["episode_meta"]) == (False, "budget_exhausted", "{}")
    assert [name for name in rows[0] if name.startswith("reward_")] == [f"reward_{n}" for n in REWARD_TERM_NAMES]


def test_the_parquet_file_holds_the_records_with_typed_columns(tmp_path: Path) -> None:
    train = tmp_path / "train"
    _run(train / "eval-000001")
    _run(train / "eval-000003", _episodes()[1:])
    (train / "eval-000002").mkdir()  # no episodes: not an evaluation
    file, count = export_episodes(train, "parquet")
    assert file == train / "episodes.parquet" == default_out(train, "parquet") and count == 5
    table = pq.read_table(file)
    assert table.num_rows == 5
    assert table.column("run").to_pylist() == ["eval-000001"] * 4 + ["eval-000003"]
    assert table.column("prompt_tokens").to_pylist() == [5, 9, 12, 4, 4]
    assert table.column("completion_tokens").to_pylist() == [3, 1, 6, 2, 2]
    assert [len(ids) for ids in table.column("completion_ids").to_pylist()] == [3, 1, 6, 2, 2]
    schema = table.schema
    assert schema.field("prompt_tokens").type == pa.int64() and schema.field("prompt_ids").type == pa.list_(pa.int64())
    assert schema.field("logprobs").type == pa.list_(pa.float64()) and schema.field("actions").type == pa.list_(
        pa.string()
    )
    assert schema.field("success").type == pa.bool_() and schema.field("reward_valid").type == pa.float64()
    assert json.loads(schema.metadata[b"milepost"]) == {"record": "milepost turn", "one_row_per": "turn"}
    records = turn_records(find_runs(train))
    assert table.column_names == list(records[0])  # every record field is a column, in order, and nothing else
    assert table.to_pylist() == records
    with pytest.raises(InputError, match="exists; pass --overwrite"):
        export_episodes(train, "parquet")
    _, again = export_episodes(train, "parquet", overwrite=True)
    assert again == 5


def test_a_run_folder_is_found_from_its_episodes_file_and_bad_ones_refused(tmp_path: Path) -> None:
    run = _run(tmp_path / "r")
    assert find_runs(run / "episodes.jsonl")[0].folder == run
    assert default_out(run / "episodes.jsonl", "chat") == run / "episodes.chat.jsonl"
    with pytest.raises(InputError, match="no such run folder"):
        find_runs(tmp_path / "nowhere")
    with pytest.raises(InputError, match=r"no episodes\.jsonl"):
        find_runs(tmp_path)
    with pytest.raises(InputError, match="unknown export format 'csv'"):
        export_episodes(run, "csv")
    lines = (run / "episodes.jsonl").read_text().splitlines()
    (run / "episodes.jsonl").write_text("\n".join([lines[0], lines[0], lines[1]]) + "\n")
    got = find_runs(run)[0]
    assert [e.task_id for e in got.episodes] == ["t1", "t2"] and got.lines == [1, 3]  # the copy is exported once
    other = json.loads(lines[0]) | {"success": False}
    (run / "episodes.jsonl").write_text("\n".join([lines[0], json.dumps(other)]) + "\n")
    with pytest.raises(InputError, match=r"episodes\.jsonl:2: task t1 sample 0 again, unlike line 1"):
        find_runs(run)
    (run / "episodes.jsonl").write_text(lines[1] + "\n" + '{"task_id": "x"}\n')
    with pytest.raises(InputError, match=r"episodes\.jsonl:2: Episode: missing field"):
        find_runs(run)
    bad = _run(tmp_path / "bad", run=[1, 2])
    with pytest.raises(InputError, match="expected a JSON object"):
        find_runs(bad)
    (bad / "run.json").write_text("{")
    with pytest.raises(InputError, match=r"run\.json: not valid JSON"):
        find_runs(bad)


def test_an_export_never_lands_on_a_file_of_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", run={})
    (run / "metrics.json").write_text("{}")
    runs = find_runs(run)
    for name in ("episodes.jsonl", "run.json", "metrics.json"):
        with pytest.raises(InputError, match="a file of the run being exported"):
            check_target(run / name, runs, run, overwrite=True)
    (run / "episodes.parquet").write_text("old")  # an earlier export at the default name may be replaced
    check_target(run / "episodes.parquet", runs, run, overwrite=True)
    with pytest.raises(InputError, match="exists; pass --overwrite"):
        check_target(run / "episodes.parquet", runs, run / "episodes.jsonl", overwrite=False)
    with pytest.raises(InputError, match="no such folder"):
        check_target(tmp_path / "missing" / "out.parquet", runs, run, overwrite=False)
    check_target(tmp_path / "out.parquet", runs, run, overwrite=False)
