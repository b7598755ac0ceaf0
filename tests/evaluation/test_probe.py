"""The knowledge probe: generated multiple-choice sets whose answers the rules engine and the grader confirm."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.sudoku.grid import conflicts, parse_grid
from milepost.evaluation.probe import (
    DEFINITIONS,
    _board_at,
    _effect,
    _finds,
    generate,
    parse_choice,
    solve_item,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data9(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("probe")
    out = root / "easy"
    argv = ["data", "sudoku", "--size", "9", "--levels", "L4-L6", "--train", "0", "--test", "4", "--seed", "0"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    medium = root / "medium"
    argv = ["data", "sudoku", "--size", "9", "--levels", "L5-L6", "--grade", "medium", "--train", "0", "--test", "3"]
    assert main([*argv, "--out", str(medium), "--no-progress"]) == 0
    both = root / "both.jsonl"
    both.write_text((out / "test.jsonl").read_text() + (medium / "test.jsonl").read_text())
    return both


def test_every_generated_answer_is_the_one_the_rules_and_the_grader_confirm(data9: Path, capsys: Any) -> None:
    capsys.readouterr()
    tasks = load_tasks(data9)
    items = generate(tasks, 24, seed=3)
    assert Counter(i.set for i in items) == {"rules": 24, "definitions": 24, "identification": 24}
    assert len({i.answer for i in items}) == 4  # the right option is not always in one place
    for item in items:
        assert len(set(item.options)) == 4 and solve_item(item) == item.answer
        if item.set == "rules" and item.meta["kind"] == "legal":
            # independently of the environment: a move is legal when the grid with it breaks no rule
            grid = parse_grid(item.meta["task"]["payload"]["puzzle"], 9)
            for i, (r, c, d) in enumerate(item.meta["moves"]):
                after = list(grid)
                after[r * 9 + c] = d
                assert (conflicts(after, 9) is None) == (i == item.answer)
        if item.set == "identification":
            board, step = _board_at(parse_grid(item.meta["task"]["payload"]["puzzle"], 9), item.meta["step"])
            assert step.technique.value == item.options[item.answer]
            for i, other in enumerate(item.options):
                assert _finds(other, board, _effect(step)) == (i == item.answer)
        if item.set == "definitions":
            assert item.question.endswith(DEFINITIONS[item.options[item.answer]])
    # identification covers the techniques of the paths, medium ones included
    found = {i.options[i.answer] for i in items if i.set == "identification"}
    assert {"Hidden Single", "Naked Single"} <= found and any("Locked" in t or "Pair" in t for t in found)


def test_an_item_with_two_right_options_is_caught(data9: Path) -> None:
    items = generate(load_tasks(data9), 12, seed=1)
    # a Full House is a Naked Single too: with both among the options there is no single right answer
    ident = next(i for i in items if i.set == "identification" and i.options[i.answer] == "Full House")
    assert "Naked Single" not in ident.options
    options = list(ident.options)
    options[(ident.answer + 1) % 4] = "Naked Single"
    assert solve_item(dataclasses.replace(ident, options=options)) is None
    rule = next(i for i in items if i.set == "rules" and i.meta["kind"] == "legal")
    moves = list(rule.meta["moves"])
    moves[(rule.answer + 1) % 4] = moves[rule.answer]  # two legal moves
    assert solve_item(dataclasses.replace(rule, meta={**rule.meta, "moves": moves})) is None
    definition = next(i for i in items if i.set == "definitions")
    assert (
        solve_item(dataclasses.replace(definition, question="Which Sudoku technique is this?\nNone of them.")) is None
    )


def test_answers_are_read_from_the_action() -> None:
    assert parse_choice("REASON: x ACTION: B") == 1
    assert parse_choice("<think>A or C?</think> REASON: y ACTION: (c).") == 2
    assert parse_choice("REASON: z ACTION: d") == 3
    assert parse_choice("REASON: z ACTION: E") is None and parse_choice("A") is None


def _probe(data: Path, out: Path, policy: str, *extra: str) -> dict[str, Any]:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", policy, "--probe", "knowledge"]
    assert main([*argv, "--out", str(out), *extra]) == 0
    return dict(json.loads((out / "metrics.json").read_text()))


def test_probe_command_for_the_oracle_and_guessers(data9: Path, tmp_path: Path, capsys: Any) -> None:
    oracle = _probe(data9, tmp_path / "oracle", "oracle", "--probe-items", "30")
    assert {name: s["accuracy"] for name, s in oracle["sets"].items()} == {
        "rules": 1.0,
        "definitions": 1.0,
        "identification": 1.0,
    }
    guess = _probe(data9, tmp_path / "random", "random", "--probe-items", "30")
    total = sum(s["correct"] for s in guess["sets"].values())
    assert 5 <= total <= 40  # 90 four-way guesses: 22.5 expected
    noisy = _probe(data9, tmp_path / "noisy", "noisy-oracle:0.5", "--probe-items", "30")
    assert total < sum(s["correct"] for s in noisy["sets"].values()) < 90
    rows = [json.loads(line) for line in (tmp_path / "oracle" / "probe.jsonl").read_text().splitlines()]
    assert len(rows) == 90 and all(r["correct"] and r["choice"] == r["answer"] for r in rows)
    assert "| identification | 30 | 30 | 100.0 | 0 |" in capsys.readouterr().out


def test_probe_of_the_tiny_model_and_of_4x4_data(data9: Path, tmp_path: Path, capsys: Any) -> None:
    import torch

    torch.set_num_threads(1)
    model = f"hf:{ROOT / 'checkpoints' / 'sudoku4-sft'}"
    tiny = _probe(data9, tmp_path / "tiny", model, "--probe-items", "4", "--max-new-tokens", "16")
    assert sum(s["items"] for s in tiny["sets"].values()) == 12
    rows = [json.loads(line) for line in (tmp_path / "tiny" / "probe.jsonl").read_text().splitlines()]
    assert all(r["response"] for r in rows) and all(r["correct"] == (r["choice"] == r["answer"]) for r in rows)
    small = tmp_path / "s4"
    argv = ["data", "sudoku", "--size", "4", "--levels", "S3", "--train", "0", "--test", "3", "--seed", "0"]
    assert main([*argv, "--out", str(small), "--no-progress"]) == 0
    four = _probe(small, tmp_path / "four", "oracle", "--probe-items", "6")
    assert set(four["sets"]) == {"rules", "definitions"}
    assert "No items for: identification" in (tmp_path / "four" / "report.md").read_text()
    assert main(["eval", "--env", "rushhour", "--data", str(small), "--policy", "oracle", "--probe", "knowledge",
                 "--out", str(tmp_path / "rh")]) == 2  # fmt: skip
    assert "about Sudoku" in capsys.readouterr().err
