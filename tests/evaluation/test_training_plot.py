"""``training.png`` reads without its title (what a thin line is), one kind of quantity per axis, y-ranges that
do not blow a flat curve's noise up; compare's table gives the last point as the last value (issue 23, item 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")


def _rows(n: int = 12) -> list[dict[str, Any]]:
    return [
        {
            "iteration": i,
            "rollout/success": 0.50 + 0.001 * (i % 2),  # a flat share: noise of 0.1 percentage point
            "is/mean_weight": 1.0 + 0.0005 * (-1) ** i,  # a ratio at 1 with a tiny wiggle
            "is/onpolicy_rho": 1.0,
            "is/masked_frac": 0.02,  # a fraction
            "loss/policy": 0.300 + 0.0001 * i,
            "critic/value_auroc": 0.6,
            "critic/potential_mse": 0.01,
        }
        for i in range(1, n + 1)
    ]


def test_training_figure_explains_its_lines_and_keeps_kinds_apart() -> None:
    import matplotlib.pyplot as plt

    from milepost.evaluation.plots import training_figure

    fig = training_figure({"run": _rows()}, "training: run", window=5)
    try:
        axes = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
        assert fig._suptitle.get_text() == "training: run"  # no line key squeezed into the title
        key = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        assert key == ["thin: each logged value", "thick: 5-point running mean"]
        # Ratios and fractions on separate axes; so are a critic's ranking scores and its squared error.
        ratio_labels = [t.get_text() for t in axes["importance weights"].get_legend().get_texts()]
        assert ratio_labels == ["mean weight", "on-policy rho"]
        assert [t.get_text() for t in axes["turns masked by importance sampling (%)"].get_legend().get_texts()] == [
            "masked"
        ]
        assert "P MSE" not in [t.get_text() for t in axes["critic quality (MiRA)"].get_legend().get_texts()]
        assert "potential error (MiRA)" in axes
        # y-ranges: shares show 0-100%, a ratio's 0.001 wiggle and a loss's 0.001 drift stay flat.
        assert axes["rollout success (%)"].get_ylim() == pytest.approx((-3, 103))
        lo, hi = axes["importance weights"].get_ylim()
        assert hi - lo >= 0.2 and lo < 1.0 < hi
        lo, hi = axes["loss"].get_ylim()
        assert hi - lo >= 0.2 * 0.3
        assert axes["importance weights"].yaxis.get_major_formatter().get_useOffset() is False
    finally:
        plt.close(fig)


def test_several_runs_key_says_the_lines_are_running_means(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from milepost.evaluation.plots import plot_training, training_figure

    fig = training_figure({"a": _rows(), "b": _rows()}, "side by side", window=3)
    try:
        assert [t.get_text() for legend in fig.legends for t in legend.get_texts()] == ["thick: 3-point running mean"]
    finally:
        plt.close(fig)
    assert "importance weights" in plot_training(tmp_path / "t.png", {"a": _rows()}, "a")
    assert (tmp_path / "t.png").stat().st_size > 10_000


def test_compare_last_is_the_last_point(tmp_path: Path) -> None:
    from milepost.cli.main import main

    run = tmp_path / "run"
    run.mkdir()
    shares = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # the last iteration jumps: a 5-point mean would say 20%
    rows = [{"iteration": i, "rollout/success": s} for i, s in enumerate(shares, start=1)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["compare", str(run), "--out", str(tmp_path / "cmp"), "--log-level", "error"]) == 0
    text = (tmp_path / "cmp" / "comparison.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| run | curve |"))
    row = next(line for line in text.splitlines() if "| rollout/success |" in line)
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["last"] == "100.0" and cells["first"] == "0.0"
    assert cells["mean of last 5"] == "20.0"
