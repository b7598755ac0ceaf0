"""A label with ``|`` or ``<script>`` (a user's run label, a policy name, a model's plan text) stays one cell of
text in every Markdown table a report writes (issue 23 item 8): ``milepost.tables.md_row`` escapes each cell."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from milepost.cli.main import main

HOSTILE = "a|b <script>alert(1)</script>"
CELL_BREAK = re.compile(r"(?<!\\)\|")


def _check_tables(text: str) -> int:
    """Every table row has as many cells as its head; nothing is raw HTML. Returns the rows checked."""
    assert "<script>" not in text
    rows, width = 0, None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(CELL_BREAK.findall(line))
        width = width if width is not None else cells
        assert cells == width, line
        rows += 1
    return rows


def test_a_cell_is_escaped() -> None:
    from milepost.tables import md_row

    assert md_row([HOSTILE, 1]) == r"| a\|b &lt;script&gt;alert(1)&lt;/script&gt; | 1 |"
    assert md_row(["two\nlines"]) == "| two lines |"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("md")
    data = root / "data"
    argv = ["data", "sudoku", "--size", "4", "--levels", "S1", "--train", "1", "--test", "2", "--no-progress"]
    assert main([*argv, "--out", str(data)]) == 0
    made = []
    for name, policy in (("one", "oracle"), ("two", "noisy-oracle:0.5")):
        out = root / name
        argv = ["eval", "--env", "sudoku", "--data", str(data), "--n", "1", "--k", "1", "--no-progress"]
        assert main([*argv, "--policy", policy, "--max-steps", "4", "--out", str(out)]) == 0
        made.append(out)
    return made


def test_compare_labels_stay_in_their_cells(runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--labels", f"{HOSTILE},<b>bold</b>", "--out", str(out)]) == 0
    text = (out / "comparison.md").read_text(encoding="utf-8")
    assert _check_tables(text) >= 4
    assert r"a\|b &lt;script&gt;" in text and "&lt;b&gt;bold" in text


def test_an_evaluation_report_escapes_its_policy_label(runs: list[Path]) -> None:
    from milepost.evaluation.compare import load_levels
    from milepost.evaluation.report import render_report

    meta, levels = load_levels(runs[0] / "metrics.json")
    text = render_report({**meta, "policy": HOSTILE}, levels, [1], {lv.level: "" for lv in levels}, None)
    assert _check_tables(text) >= 4
    assert json.dumps(HOSTILE) not in text and HOSTILE not in text
