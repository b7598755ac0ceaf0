"""PNG plots of evaluation results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from milepost.evaluation.metrics import LevelMetrics


def plot_success_vs_distance(
    path: str | Path,
    series: Mapping[str, tuple[Sequence[LevelMetrics], Mapping[int, tuple[int, int]]]],
    title: str,
) -> Path:
    """Success against goal distance: per-level avg success with CIs (lines) and per-distance rates (dots).

    Args:
        series: label -> (level metrics, goal distance -> (successes, episodes)).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, (levels, by_distance)) in enumerate(series.items()):
        color = f"C{i}"
        xs = [lv.mean_goal_distance for lv in levels]
        ys = [100 * lv.avg.value for lv in levels]
        err = [
            [100 * (lv.avg.value - lv.avg.lo) for lv in levels],
            [100 * (lv.avg.hi - lv.avg.value) for lv in levels],
        ]
        ax.errorbar(xs, ys, yerr=err, marker="o", color=color, capsize=3, label=f"{label} (avg, 95% CI)")
        if by_distance:
            ds = list(by_distance)
            rates = [100 * s / n for s, n in by_distance.values()]
            sizes = [8 + 2 * n**0.5 for _, n in by_distance.values()]
            ax.scatter(ds, rates, s=sizes, color=color, alpha=0.25, linewidths=0)
    ax.set_xlabel("goal distance d(s0, g) (atomic actions)")
    ax.set_ylabel("success (%)")
    ax.set_ylim(-3, 103)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
