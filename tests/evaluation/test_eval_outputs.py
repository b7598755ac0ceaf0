"""`milepost eval` outputs: no temperature for scripted policies, results kept when plotting fails, and a
failed start leaves nothing in --out that would block the corrected command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    tasks = [make_task(*generate_easy(4, 4, 9, i), level="S1", split="test", index=i) for i in range(3)]
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})


def _eval(data: Path | str, out: Path, policy: str = "oracle", *extra: str) -> int:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", policy, "--out", str(out), "--no-progress"]
    return main([*argv, "--n", "2", "--k", "1,2", *extra])


def test_scripted_report_has_no_temperature(dataset: Path, tmp_path: Path, capsys: Any) -> None:
    assert _eval(dataset, tmp_path / "o") == 0
    assert _eval(dataset, tmp_path / "t", "oracle", "--temperature", "0.3") == 0
    for run in ("o", "t"):
        report = (tmp_path / run / "report.md").read_text()
        assert "temperature" not in report and "scripted baseline" in report
        assert "temperature" not in json.loads((tmp_path / run / "metrics.json").read_text())["meta"]
    capsys.readouterr()


def test_results_survive_a_missing_plotting_library(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = tmp_path / "run"
    assert _eval(dataset, out) == 0
    assert {p.name for p in out.iterdir()} == {"run.json", "episodes.jsonl", "metrics.json", "report.md"}
    report = (out / "report.md").read_text()
    assert "| pass@2 (%) |" in report and "Plots not written" in report and ".png" not in report
    assert json.loads((out / "metrics.json").read_text())["levels"][0]["avg"]["value"] == 1.0
    assert "written: " + str(out) + "/metrics.json, report.md, episodes.jsonl" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"policy": "hf:/no/such/model/dir"}, "/no/such/model/dir"),
        ({"policy": "openai:"}, "openai needs an argument"),
        ({"data": "/no/such/dataset"}, "/no/such/dataset"),
        ({"extra": ("--agent", "sgo", "--planner", "llm:bogus")}, "unknown kind 'bogus'"),
        ({"extra": ("--levels", "S9")}, "unknown level 'S9'"),
    ],
)
def test_a_failed_start_leaves_nothing_behind(
    dataset: Path, tmp_path: Path, capsys: Any, bad: dict[str, Any], message: str
) -> None:
    out = tmp_path / "run"
    assert _eval(bad.get("data", dataset), out, bad.get("policy", "oracle"), *bad.get("extra", ())) == 2
    err = capsys.readouterr().err
    assert err.startswith("milepost: error:") and message in err and err.count("\n") == 1
    assert not out.exists() or not any(out.iterdir())
    assert _eval(dataset, out) == 0  # the corrected command, into the same --out
    assert json.loads((out / "metrics.json").read_text())["meta"]["policy"] == "oracle"
