"""``milepost export episodes``: chat conversations whose messages are exactly the prompts the model saw (the
recorded prompt token ids are the tokenizer's rendering of them), and a flat parquet table that keeps every turn."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.errors import InputError
from milepost.export import export_episodes
from milepost.io import read_jsonl
from milepost.types import Episode

SUDOKU = ["data", "sudoku", "--size", "4", "--levels", "S1-S2", "--train", "1", "--test", "2", "--no-progress"]


def _eval(data: Path, out: Path, *extra: str) -> Path:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--n", "1", "--k", "1", "--no-progress"]
    assert main([*argv, "--out", str(out), *extra]) == 0
    return out


def _episodes(run: Path) -> list[Episode]:
    return [Episode.from_dict(r) for r in read_jsonl(run / "episodes.jsonl")]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / "sudoku4"
    assert main([*SUDOKU, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def tiny_run(data: Path, tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A tiny model's evaluation run: recorded prompt ids, completion ids and log-probs, and memory turns."""
    out = tmp_path_factory.mktemp("tiny-run") / "run"
    return _eval(data, out, "--policy", f"hf:{tiny_model_dir}", "--max-steps", "3", "--max-new-tokens", "12")


def test_chat_messages_render_to_the_recorded_prompt_ids(tiny_run: Path, tiny_model_dir: Path) -> None:
    from milepost.backends.base import GenerationRequest
    from milepost.backends.hf import HFBackend

    run = tiny_run
    file, count = export_episodes(run, "chat")
    assert file == run / "episodes.chat.jsonl"
    rows = list(read_jsonl(file))
    turns = [turn for ep in _episodes(run) for turn in ep.turns]
    assert count == len(rows) == len(turns) > 4
    backend = HFBackend(str(tiny_model_dir), device="cpu")
    for row, turn in zip(rows, turns):
        messages = row["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert messages[-1]["content"] == turn.text
        # The prompt, rendered by the model's own chat template, is token for token the one it answered.
        assert backend.encode(GenerationRequest(messages=messages[:-1])) == turn.prompt_ids == row["prompt_ids"]
        assert row["completion_ids"] == turn.completion_ids and len(row["logprobs"]) == len(turn.completion_ids)
        assert row["logprobs"] == turn.logprobs
    later = [r for r in rows if r["turn"] > 0]
    assert later and all("Recent turns:" in r["messages"][1]["content"] for r in later)  # the memory, as played


def test_chat_replays_the_sgo_prompt_and_refuses_what_it_cannot_rebuild(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _eval(data, tmp_path / "sgo", "--policy", "oracle", "--agent", "sgo")
    _, count = export_episodes(run, "chat")
    rows = list(read_jsonl(run / "episodes.chat.jsonl"))
    assert count == sum(len(ep.turns) for ep in _episodes(run)) == len(rows)
    assert all("PROGRESS:" in r["messages"][0]["content"] for r in rows)  # the SGO answer format and plan
    assert all(r["success"] and r["prompt_ids"] == [] and r["logprobs"] is None for r in rows)  # scripted

    # The dataset moved: one line naming --data, and --data fixes it.
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "data": str(tmp_path / "gone")}))
    again = ["export", "episodes", str(run), "--format", "chat", "--overwrite", "--no-progress"]
    assert main(again) == 2
    err = capsys.readouterr().err
    assert "is not there (pass --data DATASET)" in err and err.count("\n") == 1
    assert main([*again, "--data", str(moved)]) == 0

    # A record the replay does not reach is refused, not exported with made-up prompts.
    lines = (run / "episodes.jsonl").read_text().splitlines()
    episode = json.loads(lines[1])
    episode["turns"][1]["observation"] = "tampered"
    (run / "episodes.jsonl").write_text("\n".join([lines[0], json.dumps(episode), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r"episodes\.jsonl:2: turn 1: the replay's observation differs"):
        export_episodes(run, "chat", tmp_path / "x.jsonl", data=moved)
    (run / "run.json").unlink()
    with pytest.raises(InputError, match=r"no run\.json"):
        export_episodes(run, "chat", tmp_path / "x.jsonl")


@pytest.mark.parametrize(
    ("env", "make", "extra"),
    [
        ("rushhour", ["data", "rushhour", "--levels", "4-6", "--train", "1", "--test", "2", "--no-progress"], []),
        ("webshop", ["data", "webshop", "--train", "1", "--test", "2", "--catalogue-size", "50"], []),
        ("sudoku", SUDOKU, ["--single-turn"]),
    ],
)
def test_chat_covers_every_environment_and_the_single_turn_proxy(
    env: str, make: list[str], extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILEPOST_CACHE_DIR", str(tmp_path / "cache"))
    assert main([*make, "--out", str(tmp_path / "data")]) == 0
    argv = ["eval", "--env", env, "--data", str(tmp_path / "data"), "--policy", "oracle", "--n", "1", "--k", "1"]
    assert main([*argv, *extra, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    _, count = export_episodes(tmp_path / "run", "chat")
    rows = list(read_jsonl(tmp_path / "run" / "episodes.chat.jsonl"))
    turns = [turn for ep in _episodes(tmp_path / "run") for turn in ep.turns]
    assert count == len(rows) == len(turns) and all(r["env"] == env for r in rows)
    for row, turn in zip(rows, turns):
        assert row["messages"][-1]["content"] == turn.text and row["actions"] == turn.actions
        if extra:  # the proxy's own prompt: the whole board in one answer
            assert "in one answer" in row["messages"][0]["content"]
        else:
            assert row["messages"][1]["content"].endswith(f"Current observation:\n{turn.observation}")


def test_parquet_table_has_one_typed_row_per_turn(data: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    pq = pytest.importorskip("pyarrow.parquet", reason="the hf extra (pyarrow) is not installed")
    run = _eval(data, tmp_path / "run", "--policy", "noisy-oracle:0.5", "--max-steps", "6")
    episodes = _episodes(run)
    # A training run keeps its evaluations as eval-NNNNNN folders: the table covers them all.
    train = tmp_path / "train"
    for name in ("eval-000002", "eval-000004"):
        shutil.copytree(run, train / name)
    file, count = export_episodes(train, "parquet")
    assert file == train / "episodes.parquet"
    table = pq.read_table(file)
    turns = [(ep, turn) for ep in episodes for turn in ep.turns]
    assert count == table.num_rows == 2 * len(turns)
    schema = table.schema
    assert schema.field("prompt_ids").type == pa.list_(pa.int64()) and schema.field("success").type == pa.bool_()
    assert schema.field("logprobs").type == pa.list_(pa.float64())
    rows: list[dict[str, Any]] = table.to_pylist()
    assert [r["run"] for r in rows] == ["eval-000002"] * len(turns) + ["eval-000004"] * len(turns)
    for row, (ep, turn) in zip(rows, turns):
        assert (row["task_id"], row["sample"], row["turn"]) == (ep.task_id, ep.sample, turn.index)
        assert row["text"] == turn.text and row["actions"] == turn.actions and row["error"] == turn.error
        assert row["reward_valid"] == turn.reward_terms["valid"] and row["reward"] == turn.reward
        assert row["remaining_distance"] == turn.remaining_distance and row["success"] == ep.success
        assert json.loads(row["episode_meta"]) == ep.meta
    assert any(r["reward_valid"] < 0 or r["reward_format"] < 0 for r in rows)  # the noisy turns are there too


def test_bad_runs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "episodes", str(tmp_path), "--format", "chat"]) == 2
    err = capsys.readouterr().err
    assert "no episodes.jsonl" in err and err.count("\n") == 1
    (tmp_path / "episodes.jsonl").write_text('{"task_id": "x"}\n')
    assert main(["export", "episodes", str(tmp_path), "--format", "chat"]) == 2
    err = capsys.readouterr().err
    assert "episodes.jsonl:1: Episode: missing field" in err and err.count("\n") == 1


def test_trl_sft_trainer_trains_on_the_chat_export(tiny_run: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """TRL's SFTTrainer reads the export (as prompt / completion pairs, loss on the answer only): each example's
    prompt tokens are the recorded prompt ids, and one step changes the weights."""
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    trl = pytest.importorskip("trl", reason="TRL is not installed")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    file, _ = export_episodes(tiny_run, "chat", tmp_path / "chat.jsonl")
    rows = list(read_jsonl(file))
    chat = datasets.load_dataset("json", data_files=str(file), split="train")
    assert trl.data_utils.is_conversational(chat[0])
    pairs = chat.map(lambda r: {"prompt": r["messages"][:-1], "completion": r["messages"][-1:]})
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = [p.detach().clone() for p in model.parameters()]
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, max_length=4096,
        report_to=[], use_cpu=True, save_strategy="no", learning_rate=1e-3,
    )  # fmt: skip
    trainer = trl.SFTTrainer(
        model=model, args=args, train_dataset=pairs, processing_class=AutoTokenizer.from_pretrained(tiny_model_dir)
    )
    examples = list(trainer.train_dataset)
    assert len(examples) == len(rows)
    for example, row in zip(examples, rows):
        start = next(i for i, label in enumerate(example["labels"]) if label != -100)
        assert example["input_ids"][:start] == row["prompt_ids"]
    loss = trainer.train().training_loss
    assert torch.isfinite(torch.tensor(loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


# -- where an export may go (issue 23 items 4 and 7) -------------------------------------------------------------


@pytest.fixture(scope="module")
def oracle_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _eval(data, tmp_path_factory.mktemp("oracle") / "run", "--policy", "noisy-oracle:0.5", "--max-steps", "4")


def _copy(run: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    shutil.copytree(run, tmp_path / "run")
    copy = tmp_path / "run"
    return copy, {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()}


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["export", "episodes", *argv, "--no-progress"])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("name", ["episodes.jsonl", "run.json", "metrics.json", "report.md"])
@pytest.mark.parametrize("fmt", ["parquet", "chat"])
def test_an_export_never_replaces_a_file_of_the_run(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str
) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    run, before = _copy(oracle_run, tmp_path)
    for out in (run / name, tmp_path / "." / "run" / ".." / "run" / name):
        code, err = _export(capsys, str(run), "--format", fmt, "--out", str(out), "--overwrite")
        assert code == 2 and "a file of the run being exported" in err and "\n" not in err, err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_an_existing_file_is_replaced_only_with_overwrite(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    run, _ = _copy(oracle_run, tmp_path)
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(b"precious")
    code, err = _export(capsys, str(run), "--format", "parquet", "--out", str(mine))
    assert code == 2 and "exists; pass --overwrite" in err and mine.read_bytes() == b"precious"
    assert _export(capsys, str(run), "--format", "parquet", "--out", str(mine), "--overwrite")[0] == 0
    assert mine.read_bytes()[:4] == b"PAR1"
    # the default target beside the episodes likewise: a second export needs --overwrite
    assert _export(capsys, str(run), "--format", "parquet")[0] == 0
    code, err = _export(capsys, str(run), "--format", "parquet")
    assert code == 2 and "episodes.parquet: exists" in err
    assert _export(capsys, str(run), "--format", "parquet", "--overwrite")[0] == 0


@pytest.mark.parametrize("kind", ["symlink", "folder", "device", "missing parent", "parent a file"])
def test_an_export_target_that_is_not_a_regular_file_is_refused(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    run, _ = _copy(oracle_run, tmp_path)
    kept = tmp_path / "kept.txt"
    kept.write_text("kept", encoding="utf-8")
    out = tmp_path / "out"
    if kind == "symlink":
        out.symlink_to(kept)
    elif kind == "folder":
        out.mkdir()
    elif kind == "device":
        out = Path("/dev/null")
    elif kind == "missing parent":
        out = tmp_path / "no" / "such" / "out.parquet"
    else:
        out = kept / "out.parquet"
    code, err = _export(capsys, str(run), "--format", "parquet", "--out", str(out), "--overwrite")
    assert code == 2 and err.startswith("milepost: error:") and "\n" not in err, err
    assert out.is_symlink() if kind == "symlink" else True
    assert kept.read_text(encoding="utf-8") == "kept"
    assert not (tmp_path / "no").exists()
    if kind == "device":
        assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize(
    "text",
    ["{", "[1, 2]", '"x"', "\xff", '{"env": "sudoku"}', '{"data": 5, "split": "test", "env": "sudoku"}'],
    ids=["truncated", "a list", "a string", "not UTF-8", "fields missing", "data a number"],
)
@pytest.mark.parametrize("fmt", ["parquet", "chat"])
def test_a_malformed_run_json_is_one_line(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fmt: str
) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    run, _ = _copy(oracle_run, tmp_path)
    (run / "run.json").write_bytes(text.encode("latin-1"))
    code, err = _export(capsys, str(run), "--format", fmt, "--out", str(tmp_path / "x"))
    if fmt == "parquet" and text.startswith('{"'):  # a well-formed object: the table does not need its fields
        assert code == 0
    else:
        assert code == 2 and "run.json" in err and err.startswith("milepost: error:") and "\n" not in err, err


def test_duplicate_episode_lines_are_exported_once_and_conflicting_ones_refused(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    from milepost.tables import read_parquet

    run, before = _copy(oracle_run, tmp_path)
    lines = before["episodes.jsonl"].decode().splitlines(keepends=True)
    assert _export(capsys, str(run), "--format", "parquet", "--out", str(tmp_path / "once.parquet"))[0] == 0
    (run / "episodes.jsonl").write_text("".join(lines + lines[:2]), encoding="utf-8")
    code, err = _export(capsys, str(run), "--format", "parquet", "--out", str(tmp_path / "twice.parquet"))
    assert code == 0 and "2 duplicate episode line(s) exported once" in err
    once, twice = read_parquet(tmp_path / "once.parquet"), read_parquet(tmp_path / "twice.parquet")
    assert isinstance(once, pa.Table) and once.equals(twice)
    other = json.loads(lines[0])
    other["seed"] += 1
    (run / "episodes.jsonl").write_text("".join([*lines, json.dumps(other) + "\n"]), encoding="utf-8")
    code, err = _export(capsys, str(run), "--format", "parquet", "--out", str(tmp_path / "bad.parquet"))
    assert code == 2 and f"episodes.jsonl:{len(lines) + 1}:" in err and "unlike line 1" in err


def test_exports_are_written_with_the_user_s_umask(oracle_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    run, _ = _copy(oracle_run, tmp_path)
    old = os.umask(0o022)
    try:
        table, _ = export_episodes(run, "parquet", tmp_path / "t.parquet")
    finally:
        os.umask(old)
    assert table.stat().st_mode & 0o777 == 0o644


# -- eval rerun over a damaged run folder (issue 23 item 7) --------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "text", "says"),
    [
        ("run.json", "{", "run.json: not valid JSON"),
        ("run.json", "[]", "run.json: expected a JSON object"),
        ("episodes.jsonl", '{"sample": 0}\n', "episodes.jsonl:1: Episode: missing field"),
    ],
    ids=["run.json truncated", "run.json a list", "row without task_id"],
)
def test_an_eval_rerun_over_a_damaged_run_is_one_line(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, text: str, says: str
) -> None:
    run, _ = _copy(oracle_run, tmp_path)
    (run / file).write_text(text, encoding="utf-8")
    spec = json.loads((oracle_run / "run.json").read_text(encoding="utf-8"))
    argv = ["eval", "--env", "sudoku", "--data", spec["data"], "--n", "1", "--k", "1", "--no-progress"]
    capsys.readouterr()
    assert main([*argv, "--policy", "noisy-oracle:0.5", "--max-steps", "4", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and err.startswith("milepost: error:") and "\n" not in err, err


def test_a_failed_write_is_one_line_and_leaves_no_file(
    oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    import errno

    from milepost import tables

    def full(table: Any, where: str) -> None:
        Path(where).write_bytes(b"PAR1")
        raise OSError(errno.ENOSPC, "No space left on device")

    pq = tables.pyarrow()[1]
    monkeypatch.setattr(pq, "write_table", full)
    code, err = _export(capsys, str(oracle_run), "--format", "parquet", "--out", str(tmp_path / "t.parquet"))
    assert code == 2 and "No space left on device" in err and "\n" not in err, err
    assert list(tmp_path.iterdir()) == []
