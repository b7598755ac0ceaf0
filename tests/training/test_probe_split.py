"""experiments.probe_split: the one-step probe on training and held-out puzzles, by distance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from experiments.probe_split import main
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["probe_split", *args])
    main()


def test_probe_split_on_a_shipped_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from milepost.datasets import write_dataset

    tasks = rush_tasks(4, 6, 6)
    data = write_dataset(tmp_path / "data", {"train": tasks[:4], "test": tasks[4:]}, {"seed": 0})
    out = tmp_path / "probe.md"
    model = ROOT / "checkpoints" / "rushhour-sft-legal-dagger2"
    _run(monkeypatch, "--data", str(data), "--n", "6", f"start={model}", "--out", str(out))
    rows = json.loads(out.with_suffix(".json").read_text())["start"]
    assert rows["render"] == "legal"  # from the checkpoint's prompt card
    assert rows["train"]["states"] == 6 and rows["test"]["states"] == 4  # two per puzzle, at most --n
    for split in ("train", "test"):
        r = rows[split]
        buckets = r["buckets"].values()
        assert sum(b["states"] for b in buckets) == r["states"]
        # the buckets partition the states, so their optimal shares average to the whole's
        assert sum(b["optimal"] * b["states"] for b in buckets) / r["states"] == pytest.approx(r["optimal"])
        lo, hi = r["optimal_ci"]
        assert lo <= r["optimal"] <= hi and r["optimal"] <= r["legal"]
    text = out.read_text()
    assert "| start | train | 6 |" in text and "| start | test | 4 |" in text
    assert out.with_suffix(".png").stat().st_size > 0


def test_probe_split_refuses_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="expected LABEL=CHECKPOINT"):
        _run(monkeypatch, "--data", str(tmp_path), "nolabel", "--out", str(tmp_path / "x.md"))
    with pytest.raises(SystemExit, match="not a dataset folder"):
        _run(monkeypatch, "--data", str(tmp_path), f"a={tmp_path}", "--out", str(tmp_path / "x.md"))
