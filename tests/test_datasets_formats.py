"""Datasets in parquet and as Hugging Face ``DatasetDict``s: every field of every record survives each way, for
all three environments; parquet splits are checked on load exactly as JSONL ones; a folder that came back from
Hugging Face or plain parquet files evaluates."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed: pip install 'milepost[hf]'")
pq = pytest.importorskip("pyarrow.parquet", reason="the hf extra (pyarrow) is not installed")

from milepost.cli.main import main  # noqa: E402
from milepost.datasets import from_hf, load, load_manifest, load_tasks, to_hf, write_dataset  # noqa: E402
from milepost.errors import InputError  # noqa: E402
from milepost.types import Task  # noqa: E402

GENERATE = {
    "sudoku": ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "3", "--test", "2", "--no-progress"],
    "rushhour": ["data", "rushhour", "--levels", "4-6", "--train", "3", "--test", "2", "--no-progress"],
    "webshop": ["data", "webshop", "--train", "3", "--test", "2", "--catalogue-size", "50"],
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILEPOST_CACHE_DIR", str(tmp_path / "cache"))


def _exact(tasks: list[Task]) -> list[str]:
    """Records as type-strict text: 41.0 and 41, True and 1, a missing key and a null all differ."""
    return [json.dumps(t.to_dict(), sort_keys=True) for t in tasks]


def _both(tmp_path: Path, env: str) -> tuple[Path, Path]:
    """The same generated dataset written as JSONL and as parquet."""
    jsonl, parquet = tmp_path / f"{env}-jsonl", tmp_path / f"{env}-parquet"
    assert main([*GENERATE[env], "--out", str(jsonl)]) == 0
    assert main([*GENERATE[env], "--out", str(parquet), "--format", "parquet"]) == 0
    return jsonl, parquet


@pytest.mark.parametrize("env", ["sudoku", "rushhour", "webshop"])
def test_every_field_survives_parquet_and_hugging_face(env: str, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    jsonl, parquet = _both(tmp_path, env)
    assert sorted(p.name for p in parquet.iterdir()) == ["manifest.json", "test.parquet", "train.parquet"]
    want = load(jsonl)
    assert set(want.splits) == {"train", "test"} and all(want.splits.values())
    got = load(parquet)
    for split in ("train", "test"):
        assert _exact(got.splits[split]) == _exact(want.splits[split])
    assert got.manifest["command"] == want.manifest["command"].replace("-jsonl", "-parquet") + " --format parquet"
    assert {**got.manifest, "command": ""} == {**want.manifest, "command": ""}
    # The typed columns are typed, not text.
    schema = pq.read_schema(parquet / "test.parquet")
    assert schema.field("goal_distance").type == pa.int64() and schema.field("size").type == pa.int64()

    hf = to_hf(parquet)
    assert set(hf) == {"train", "test"} and hf["test"].num_rows == len(want.splits["test"])
    assert hf["train"].features["seed"].dtype == "int64"
    hf.save_to_disk(str(tmp_path / "saved"))
    again = datasets.load_from_disk(str(tmp_path / "saved"))
    assert json.loads(again["test"].info.description) == got.manifest
    back = from_hf(again, tmp_path / "back", format="jsonl")
    assert load_manifest(back) == got.manifest
    for split in ("train", "test"):
        assert _exact(load_tasks(back, split)) == _exact(want.splits[split])

    # Plain parquet files read by `datasets` itself (no description, as from a hub): the records still come
    # back whole, and the manifest is derived from them.
    files = {split: str(parquet / f"{split}.parquet") for split in ("train", "test")}
    plain = datasets.load_dataset("parquet", data_files=files)
    # The folder itself is what `datasets` finds in a hub repository holding it: train and test splits.
    assert {s: d.num_rows for s, d in datasets.load_dataset(str(parquet)).items()} == want.manifest["counts"]
    again_back = from_hf(plain, tmp_path / "plain")
    derived = load_manifest(again_back)
    assert derived["env"] == env and derived["counts"] == want.manifest["counts"]
    assert _exact(load_tasks(again_back, "test")) == _exact(want.splits["test"])


def test_nested_values_keep_their_exact_types(tmp_path: Path) -> None:
    _, parquet = _both(tmp_path, "webshop")
    item = load_tasks(parquet, "train")[0].payload["items"][0]
    assert type(item["price_limit"]) is float and isinstance(item["attributes"], list)
    # Each item keeps its own option names, not the union of every row's (Arrow struct inference would add them).
    options = [t.payload["items"][0]["options"] for t in load_tasks(parquet, "train")]
    assert all(None not in o.values() for o in options)
    rush = tmp_path / "rush"
    assert main([*GENERATE["rushhour"], "--out", str(rush), "--format", "parquet"]) == 0
    meta = load_tasks(rush, "test")[0].meta
    assert type(meta["fits_atomic_budget"]) is bool and type(meta["min_moves"]) is int
    assert isinstance(load_tasks(rush, "test")[0].payload["board"], str)


def _rewrite(file: Path, edit: Any) -> None:
    rows = pq.read_table(file).to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(file)), file)


def test_parquet_splits_are_checked_like_jsonl(tmp_path: Path) -> None:
    data = tmp_path / "ds"
    assert main([*GENERATE["sudoku"], "--out", str(data), "--format", "parquet"]) == 0
    test = data / "test.parquet"
    clean = pq.read_table(test)

    def expect(edit: Any, message: str, split: str = "test") -> None:
        _rewrite(test, edit)
        with pytest.raises(InputError) as caught:
            load_tasks(data, split)
        assert message in str(caught.value) and "\n" not in str(caught.value), caught.value
        pq.write_table(clean, test)

    expect(lambda rows: rows[1].update(goal_distance=99), f"{test}:2: goal_distance: 99, but the puzzle has")
    expect(lambda rows: rows[2].update(payload="{not json"), f"{test}:3: payload: not valid JSON")
    expect(lambda rows: rows[0].update(level="S9"), f"{test}:1: level: 'S9' is not among")
    duplicate = load_tasks(data, "train")[0].task_id
    expect(lambda rows: rows[0].update(task_id=duplicate), f"{test}:1: task_id: '{duplicate}' is also in")
    expect(lambda rows: rows.pop(), "3 tasks, but")  # the manifest counts 4 test tasks
    pq.write_table(clean.drop_columns(["level"]), test)
    with pytest.raises(InputError, match=r"test\.parquet: missing column\(s\) level"):
        load_tasks(data)
    test.write_text("not parquet\n")
    with pytest.raises(InputError, match=r"test\.parquet: not a readable parquet file"):
        load_tasks(data)
    pq.write_table(clean, test)
    load(data)  # clean again
    (data / "test.jsonl").write_text("")
    with pytest.raises(InputError, match="the test split is there twice"):
        load_tasks(data)


def test_eval_plays_a_parquet_folder_and_one_back_from_hugging_face(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    data = tmp_path / "ds"
    assert main([*GENERATE["sudoku"], "--out", str(data), "--format", "parquet"]) == 0
    back = from_hf(to_hf(data), tmp_path / "back")
    for folder in (data, back):
        out = tmp_path / f"eval-{folder.name}"
        argv = ["eval", "--env", "sudoku", "--data", str(folder), "--policy", "oracle", "--n", "1", "--k", "1"]
        assert main([*argv, "--out", str(out), "--no-progress"]) == 0
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["meta"]["episodes"] == 4 and {lv["level"] for lv in metrics["levels"]} == {"S2", "S3"}
        assert all(lv["avg"]["value"] == 1.0 for lv in metrics["levels"])  # the oracle solves every task
    capsys.readouterr()
    # A bad record coming from Hugging Face is refused before anything is written.
    rows = to_hf(data)["test"].to_list()
    rows[1]["goal_distance"] = 99
    with pytest.raises(InputError, match=r"^test:2: goal_distance: 99"):
        from_hf({"test": rows}, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(InputError, match="validation"):
        from_hf({"validation": rows}, tmp_path / "bad")


def test_parquet_without_pyarrow_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert main([*GENERATE["sudoku"], "--out", str(tmp_path / "ds"), "--format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert "parquet files need pyarrow (pip install 'milepost[hf]')" in err and err.count("\n") == 1
    assert not (tmp_path / "ds").exists()
    with pytest.raises(InputError, match="unknown dataset format 'csv'"):
        write_dataset(tmp_path / "x", {"test": []}, {}, format="csv")


def test_training_configs_read_a_parquet_dataset(tmp_path: Path) -> None:
    from milepost.config import load_config
    from milepost.training.config import TrainConfig
    from milepost.training.setup import select_tasks

    data = tmp_path / "ds"
    assert main([*GENERATE["sudoku"], "--out", str(data), "--format", "parquet"]) == 0
    configs = Path(__file__).resolve().parents[1] / "configs" / "tiny-cpu"
    cfg = load_config(TrainConfig, configs / "sudoku4_atomic.yaml", [f"data={data}", "levels=S2"])
    assert isinstance(cfg, TrainConfig)
    tasks = select_tasks(cfg, "train")
    assert [t.task_id for t in tasks] == [t.task_id for t in load_tasks(data, "train") if t.level == "S2"]
