"""The prompt card (``milepost_prompt.json``): written by the trainers, read by ``milepost eval`` and ``horizon``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.prompt_card import CARD, card_folder, read_card, reconcile, write_card

ROOT = Path(__file__).resolve().parents[1]
SUDOKU = {"env": "sudoku", "render": "cells", "memory_k": 0, "max_new_tokens": 8}


def test_a_card_round_trips_and_keeps_who_made_it(tmp_path: Path) -> None:
    write_card(tmp_path, {**SUDOKU, "agent": "plain", "action_mode": "atomic"}, made_by="a test")
    card = read_card(tmp_path)
    assert card == {**SUDOKU, "agent": "plain", "action_mode": "atomic", "made_by": "a test"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [CARD]  # no temporary file left behind
    assert read_card(tmp_path / "nowhere") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not a readable JSON file"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"memory": 2}', "unknown field 'memory'"),
        ('{"memory_k": "2"}', "memory_k must be int, got '2'"),
        ('{"memory_k": true}', "memory_k must be int, got True"),
        ('{"memory_k": -1}', "memory_k must be >= 0"),
        ('{"max_new_tokens": 0}', "max_new_tokens >= 1"),
    ],
)
def test_a_bad_card_is_one_line_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / CARD).write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        read_card(tmp_path)
    assert str(tmp_path / CARD) in str(info.value) and "\n" not in str(info.value)


def test_reconcile_fills_what_is_left_out_and_names_each_difference() -> None:
    card = {"env": "rushhour", "render": "legal", "memory_k": 0, "max_new_tokens": 32}
    merged = reconcile(card, {"render": None, "memory_k": 2, "max_new_tokens": 32, "agent": None}, "rushhour")
    assert merged.values == {"render": "legal", "memory_k": 2, "max_new_tokens": 32}
    assert merged.from_card == ["render"]
    assert len(merged.mismatches) == 1 and "--memory-k 2 differs from its training prompts' 0" in merged.mismatches[0]
    lines = merged.messages("hf:m")
    assert lines[0] == f"milepost: hf:m: the prompt settings it was trained with ({CARD}): render legal"
    assert lines[1].startswith("milepost: warning: hf:m: --memory-k 2")


def test_a_card_for_another_environment_supplies_nothing() -> None:
    merged = reconcile(
        {"env": "rushhour", "render": "legal", "memory_k": 0}, {"render": None, "memory_k": None}, "sudoku"
    )
    assert merged.values == {} and merged.from_card == []
    assert merged.mismatches == ["it was trained on rushhour, evaluated on sudoku"]
    assert reconcile(None, {"memory_k": 3, "render": None}, "sudoku").values == {"memory_k": 3}


def test_only_local_model_folders_have_cards(tmp_path: Path) -> None:
    assert card_folder(f"hf:{tmp_path}") == tmp_path
    assert card_folder(f"vllm: {tmp_path}") == tmp_path
    assert card_folder("hf:Qwen/Qwen3-0.6B") is None  # a hub name, not a folder here
    assert card_folder("oracle") is None and card_folder(f"openai:{tmp_path}@http://x/v1") is None


@pytest.mark.parametrize("name", sorted(p.parent.name for p in (ROOT / "checkpoints").glob("*/config.json")))
def test_every_shipped_full_checkpoint_carries_a_valid_card(name: str) -> None:
    card = read_card(ROOT / "checkpoints" / name)
    assert card is not None, f"checkpoints/{name} has no {CARD}"
    assert card["env"] == ("sudoku" if name.startswith("sudoku") else "rushhour")
    assert card["memory_k"] == 0  # every shipped start was trained without memory
    assert card["render"] == ("legal" if "legal" in name else "hints" if name.startswith("sudoku") else "grid")


@pytest.fixture
def carded_model(tmp_path: Path, tiny_model_dir: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    write_card(model, SUDOKU, made_by="a test")
    return model


@pytest.fixture
def sudoku_data(tmp_path: Path) -> Path:
    tasks = [make_task(*generate_easy(4, 4, 9, i), level="S1", split="test", index=i) for i in range(2)]
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})


def _eval(data: Path, model: Path, out: Path, *extra: str) -> dict[str, Any]:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", f"hf:{model}", "--n", "1", "--k", "1"]
    argv += ["--max-steps", "2", "--no-progress", "--out", str(out), *extra]
    assert main(argv) == 0
    return json.loads((out / "run.json").read_text(encoding="utf-8"))


def test_eval_plays_with_the_checkpoints_prompt_settings(
    carded_model: Path, sudoku_data: Path, tmp_path: Path, capsys: Any
) -> None:
    run = _eval(sudoku_data, carded_model, tmp_path / "a")
    assert run["settings"]["memory_k"] == 0 and run["settings"]["max_new_tokens"] == 8
    assert run["env_kwargs"]["render"] == "cells" and run["agent"] == "plain"
    err = capsys.readouterr().err
    assert "the prompt settings it was trained with" in err and "memory_k 0" in err and "warning" not in err


def test_eval_keeps_an_option_set_against_the_card_and_warns(
    carded_model: Path, sudoku_data: Path, tmp_path: Path, capsys: Any
) -> None:
    run = _eval(sudoku_data, carded_model, tmp_path / "b", "--memory-k", "3", "--render", "grid")
    assert run["settings"]["memory_k"] == 3 and run["env_kwargs"]["render"] == "grid"
    assert run["settings"]["max_new_tokens"] == 8  # left out: still the card's
    err = capsys.readouterr().err
    assert "warning" in err and "--memory-k 3 differs from its training prompts' 0" in err
    assert "--render grid differs from its training prompts' cells" in err


def test_eval_without_a_card_keeps_the_old_defaults(
    tiny_model_dir: Path, sudoku_data: Path, tmp_path: Path, capsys: Any
) -> None:
    run = _eval(sudoku_data, tiny_model_dir, tmp_path / "c")
    assert run["settings"]["memory_k"] == 2 and run["settings"]["max_new_tokens"] == 256
    assert "render" not in run["env_kwargs"]
    assert "prompt settings" not in capsys.readouterr().err


def test_eval_refuses_a_malformed_card_in_one_line(
    carded_model: Path, sudoku_data: Path, tmp_path: Path, capsys: Any
) -> None:
    (carded_model / CARD).write_text('{"memory_k": "zero"}', encoding="utf-8")
    argv = ["eval", "--env", "sudoku", "--data", str(sudoku_data), "--policy", f"hf:{carded_model}"]
    assert main([*argv, "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert "memory_k must be int, got 'zero'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "d" / "run.json").exists()


@pytest.mark.parametrize(
    ("card", "render"),
    [({**SUDOKU}, "cells"), ({"env": "rushhour", "render": "legal", "memory_k": 0, "max_new_tokens": 8}, None)],
)
def test_horizon_takes_k_and_the_answer_cap_and_a_sudoku_cards_renderer(
    tmp_path: Path, card: dict[str, Any], render: str | None
) -> None:
    """The suite plays several environments: ``--render`` sets the Sudoku parts only, so only a Sudoku card's
    renderer applies (a Rush Hour card's ``legal`` would be no Sudoku renderer)."""
    import argparse

    from milepost.cli.horizon import _apply_card

    write_card(tmp_path, card, made_by="a test")
    args = argparse.Namespace(policy=f"hf:{tmp_path}", render=None, memory_k=None, max_new_tokens=None)
    _apply_card(args)
    assert (args.render, args.memory_k, args.max_new_tokens) == (render, 0, 8)
    args = argparse.Namespace(policy="oracle", render=None, memory_k=None, max_new_tokens=None)
    _apply_card(args)
    assert (args.render, args.memory_k, args.max_new_tokens) == (None, 2, 256)
