"""experiments/start_spread.py: an old report's start under every seed, checked against the report's own row."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from milepost.datasets import write_dataset
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import start_spread  # noqa: E402

COMMAND = (
    "python experiments/seeded_arms.py --name old --work runs/gone --start checkpoints/rushhour-sft-steps "
    "--data runs/gone/data --levels 4-6 --eval-levels 4-6 --eval-limit 2 --seeds 0,1 --iterations 2 "
    "--arm atomic rushhour_atomic.yaml"
)


def _report(start_row: dict[str, float]) -> dict[str, object]:
    arm = {"0": {"4-6": {"avg": 0.5}}, "1": {"4-6": {"avg": 0.25}}}
    return {
        "command": COMMAND,
        "start": {"atomic": {"4-6": start_row}},
        "per_seed": {"atomic": arm},
        "mean_over_seeds": {
            "atomic": {"levels": {"4-6": {"mean": 0.375, "lo": 0.0, "hi": 1.0, "values": [0.5, 0.25]}}}
        },
    }


def test_report_args_keep_the_settings_and_replace_the_folders(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 2)}, {"seed": 3})
    args = start_spread.report_args({"command": COMMAND}, tmp_path / "w", str(data))
    assert (args.work, args.data, args.eval_limit, args.seeds) == (str(tmp_path / "w"), str(data), 2, "0,1")
    assert args.arm == [["atomic", "rushhour_atomic.yaml"]]
    with pytest.raises(SystemExit, match="no dataset"):
        start_spread.report_args({"command": COMMAND}, tmp_path / "w", None)  # runs/gone/data
    with pytest.raises(SystemExit, match="not a seeded_arms command"):
        start_spread.report_args({"command": "python experiments/other.py --x"}, tmp_path / "w", str(data))


def test_the_start_is_evaluated_per_seed_and_the_first_seed_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    torch.set_num_threads(1)
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 2)}, {"seed": 3})
    monkeypatch.setattr(start_spread, "RESULTS", tmp_path)
    (tmp_path / "old.json").write_text(json.dumps(_report({"avg": 0.123, "step_accuracy": 0.5, "tasks": 2})))
    first = start_spread.spread("old", tmp_path / "work", str(data))
    assert first["reproduced"] == {"atomic": False}  # the report's row is not what this start measures
    measured = {s: first["start"]["atomic"][str(s)]["4-6"] for s in (0, 1)}
    assert {m["tasks"] for m in measured.values()} == {2}
    diff = first["arms"]["atomic"]["levels"]["4-6"]["minus_start"]["values"]
    assert diff == pytest.approx([0.5 - measured[0]["avg"], 0.25 - measured[1]["avg"]])
    assert (tmp_path / "start_spread_old.png").stat().st_size > 0

    # a report whose start row is the first seed's measurement is reproduced (the evaluations are reused)
    row = {k: measured[0][k] for k in ("avg", "step_accuracy", "tasks")}
    (tmp_path / "old.json").write_text(json.dumps(_report(row)))
    again = start_spread.spread("old", tmp_path / "work", str(data))
    assert again["reproduced"] == {"atomic": True} and again["start"] == first["start"]
    start_spread.write([again], "python experiments/start_spread.py old", 1.0)
    md = (tmp_path / "start_spread.md").read_text()
    assert "Reproduced (atomic start, seed 0): **yes**" in md and "| atomic | atomic |" in md
