"""experiments/webshop2_interim.py: a running evaluation is summarised over its finished orders only, and says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from milepost.datasets import write_dataset
from milepost.evaluation.runner import EvalSpec, evaluate
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import webshop2_interim  # noqa: E402


def test_a_partial_evaluation_counts_only_the_orders_whose_samples_all_finished(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 3)}, {"seed": 3})
    folder = tmp_path / "eval"
    evaluate(EvalSpec(env="rushhour", data=str(data), policy="oracle", n=4, ks=[1, 4], seed=0), folder, progress=False)
    whole = webshop2_interim.evaluation(folder)
    assert whole is not None and whole["complete"] and whole["orders"] == 3 and whole["success"] == 1.0
    assert whole["score"] == pytest.approx(1.0) and whole["endings"] == {"solved": 12}
    # As if killed mid-run: the last order has 2 of its 4 episodes, and no metrics.json yet.
    rows = (folder / "episodes.jsonl").read_text().splitlines()
    last = json.loads(rows[-1])["task_id"]
    kept = [r for r in rows if json.loads(r)["task_id"] != last] + [
        r for r in rows if json.loads(r)["task_id"] == last
    ][:2]
    (folder / "episodes.jsonl").write_text("\n".join(kept) + "\n")
    (folder / "metrics.json").unlink()
    part = webshop2_interim.evaluation(folder)
    assert part is not None and not part["complete"] and part["orders"] == 2 and part["episodes"] == 8
    assert last not in part["order_ids"]
    assert webshop2_interim.evaluation(tmp_path / "nothing") is None
