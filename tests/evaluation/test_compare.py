"""`milepost compare`: the union of pass@k values, warnings for unlike runs, training runs without an evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.config import to_yaml
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.training.config import TrainConfig


def _data(root: Path, size: int, empties: int) -> Path:
    tasks = [make_task(*generate_easy(size, empties, 9, i), level="S1", split="test", index=i) for i in range(2)]
    return write_dataset(root / f"ds{size}", {"train": [], "test": tasks}, {"seed": 9})


def _eval(data: Path, out: Path, n: int, ks: list[int]) -> Path:
    evaluate(EvalSpec(env="sudoku", data=str(data), policy="oracle", n=n, ks=ks), out, progress=False)
    return out


def _rows(text: str, run: str) -> dict[str, list[str]]:
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == run and len(cells) > 2:
            out[cells[1]] = cells[2:]
    return out


def test_runs_with_different_k_show_the_union(tmp_path: Path, capsys: Any) -> None:
    data = _data(tmp_path, 4, 4)
    a = _eval(data, tmp_path / "a", 2, [1, 2])
    b = _eval(data, tmp_path / "b", 4, [1, 4])
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    rows_a, rows_b = _rows(text, "a"), _rows(text, "b")
    assert rows_a["pass@2 (%)"] == ["100.0"] and rows_a["pass@4 (%)"] == ["-"]
    assert rows_b["pass@4 (%)"] == ["100.0"] and rows_b["pass@2 (%)"] == ["-"]
    assert "avg@2 (%)" in rows_a and "avg@4 (%)" in rows_b
    assert (tmp_path / "cmp" / "comparison.md").read_text().strip() == text.strip()


def test_unlike_runs_are_compared_with_a_warning(tmp_path: Path, capsys: Any) -> None:
    small = _eval(_data(tmp_path, 4, 4), tmp_path / "s4", 1, [1])
    large = _eval(_data(tmp_path, 6, 6), tmp_path / "s6", 1, [1])
    assert main(["compare", str(small), str(large), "--out", str(tmp_path / "cmp")]) == 0
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("milepost: warning:") and "board size (s4: 4, s6: 6)" in line
    assert "**Warning:** the runs differ in board size" in (tmp_path / "cmp" / "comparison.md").read_text()
    same = _eval(_data(tmp_path / "x", 4, 4), tmp_path / "s4b", 1, [1])
    assert main(["compare", str(small), str(same), "--out", str(tmp_path / "cmp2")]) == 0
    assert capsys.readouterr().err == ""


def _png(path: Path) -> tuple[int, str]:
    """A PNG's width in pixels and the description it carries (what differs between the runs)."""
    from PIL import Image

    with Image.open(path) as image:
        return image.size[0], image.text.get("Description", "")


def test_comparison_png_says_when_runs_differ_and_draws_them_apart(tmp_path: Path, monkeypatch: Any) -> None:
    small = _eval(_data(tmp_path, 4, 4), tmp_path / "s4", 1, [1])
    large = _eval(_data(tmp_path, 6, 6), tmp_path / "s6", 1, [1])
    same = _eval(_data(tmp_path / "x", 4, 4), tmp_path / "s4b", 1, [1])
    assert main(["compare", str(small), str(large), "--out", str(tmp_path / "unlike")]) == 0
    assert main(["compare", str(small), str(same), "--out", str(tmp_path / "like")]) == 0
    unlike, note = _png(tmp_path / "unlike" / "comparison.png")
    like, plain = _png(tmp_path / "like" / "comparison.png")
    assert note == "not comparable: the runs differ in board size (s4: 4, s6: 6)"
    assert plain == "the runs are comparable"
    assert unlike > 1.4 * like  # one panel per board size, side by side: no curve runs on into the other

    import matplotlib.pyplot as plt

    from milepost.evaluation.compare import comparison_plot, load_run

    drawn: list[Any] = []
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure comparison_plot saves, to read it
    comparison_plot(tmp_path / "again.png", [load_run("s4", small), load_run("s6", large)])
    (fig,) = drawn
    assert [ax.get_title() for ax in fig.axes] == ["sudoku, board side 4", "sudoku, board side 6"]
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]
    assert legends == [["s4 (sudoku, board side 4) (avg, 95% CI)"], ["s6 (sudoku, board side 6) (avg, 95% CI)"]]
    assert "differ in board size (s4: 4, s6: 6)" in fig._suptitle.get_text()


@pytest.fixture
def training_run(tmp_path: Path) -> Path:
    """A training run folder as ``milepost train`` without ``--eval`` leaves it: config, log, final model."""
    run = tmp_path / "rl"
    (run / "final").mkdir(parents=True)
    cfg = TrainConfig(name="rl", data=str(tmp_path / "ds4"))
    (run / "config.yaml").write_text(to_yaml(cfg))
    rows = [
        {"iteration": i, "phase": "", "rollout/success": s, "rollout/turns": 8.0, "loss/policy": -1.0}
        for i, s in enumerate([0.0, 0.25, 0.5, 0.5, 0.75, 1.0], start=1)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_a_training_run_without_evaluation_is_compared_by_its_curves(
    training_run: Path, tmp_path: Path, capsys: Any
) -> None:
    evaluated = _eval(_data(tmp_path, 4, 4), tmp_path / "ev", 1, [1])
    out = tmp_path / "cmp"
    assert main(["compare", str(evaluated), str(training_run), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert _rows(text, "ev")["pass@1 (%)"] == ["100.0"]
    assert f"--policy hf:{training_run / 'final'}" in text and "milepost eval --env sudoku" in text
    # Last value: the last iteration's; then the mean of the last five iterations (0.25 .. 1.0) and its best.
    assert _rows(text, "rl")["rollout/success"] == ["6", "0.0", "100.0", "60.0", "60.0"]
    assert {"comparison.png", "training.png"} <= {p.name for p in out.iterdir()}


def test_a_folder_with_nothing_to_compare_is_a_one_line_error(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty"), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert "nothing to compare" in err and err.count("\n") == 1
