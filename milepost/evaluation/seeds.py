"""Arms over several training seeds: mean and interval across seeds per level, and every seed's curve.

One seed cannot separate the arms: the spread between seeds of one arm is often as large as the gap between
arms. For each arm this reads every seed's run folder (``eval/metrics.json`` and ``metrics.jsonl``) and reports,
per level, the mean avg@n over seeds with a 95% t-interval across seeds (Student's t with seeds - 1 degrees of
freedom; the interval is about the training seed, the per-seed bootstrap intervals are about the test tasks), and
the collapse signal's mean over the last iterations. The plot draws each seed's rollout-success curve thin and
the arm's mean thick.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from milepost.errors import InputError
from milepost.evaluation.compare import find_metrics, load_levels
from milepost.evaluation.plots import smooth
from milepost.tables import md_row, md_rule
from milepost.tracking import read_metrics

# Two-sided 95% Student t quantiles by degrees of freedom (seeds - 1).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean and its 95% t-interval across ``values`` (one value: the value itself)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_interval: no values")
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T95.get(n - 1, 1.96) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def share_interval(mean: float, lo: float, hi: float) -> str:
    """A share's mean and interval in %, the interval clipped to [0, 100]: ``"4.6 [0, 10]"``. The bounds are whole
    points unless rounding them would leave the mean outside (``"0.6 [0.6, 0.6]"``, not ``"0.6 [1, 1]"``)."""
    m, a, b = 100 * mean, 100 * max(0.0, lo), 100 * min(1.0, hi)
    digits = 0 if round(a) <= round(m, 1) <= round(b) else 1
    return f"{m:.1f} [{a:.{digits}f}, {b:.{digits}f}]"


def seed_table(arms: Mapping[str, Sequence[str | Path]]) -> tuple[str, dict[str, Any]]:
    """The Markdown table (arms as rows, levels as columns: mean avg@n [lo, hi] over seeds, in %) and its data.

    Raises:
        InputError: a run folder without an evaluation.
    """
    data: dict[str, Any] = {}
    levels: list[str] = []
    for arm, runs in arms.items():
        per_level: dict[str, list[float]] = {}
        collapse: list[float] = []
        for run in runs:
            metrics = find_metrics(run)
            if metrics is None:
                raise InputError(f"{run}: no evaluation (eval/metrics.json) to average over seeds")
            _, rows = load_levels(metrics)
            for row in rows:
                per_level.setdefault(row.level, []).append(row.avg.value)
                if row.level not in levels:
                    levels.append(row.level)
            log = Path(run) / "metrics.jsonl"
            if log.is_file():
                shares = [float(r["rollout/max_length"]) for r in read_metrics(log) if "rollout/max_length" in r]
                if shares:
                    collapse.append(sum(shares[-3:]) / len(shares[-3:]))
        data[arm] = {
            "seeds": len(runs),
            "levels": {lv: dict(zip(("mean", "lo", "hi"), mean_interval(v)), values=v) for lv, v in per_level.items()},
            "max_length_last3": collapse,
        }
    head = ["arm", "seeds", *levels, "answers cut at max_new_tokens, last 3 iterations (%)"]
    lines = [md_row(head), md_rule(len(head))]
    for arm, info in data.items():
        cells = [arm, str(info["seeds"])]
        for lv in levels:
            est = info["levels"].get(lv)
            if est is None:
                cells.append("-")
            else:
                cells.append(share_interval(est["mean"], est["lo"], est["hi"]))
        shares = info["max_length_last3"]
        cells.append(f"{100 * sum(shares) / len(shares):.1f}" if shares else "-")
        lines.append(md_row(cells))
    return "\n".join(lines) + "\n", data


def plot_seed_curves(
    path: Path,
    arms: Mapping[str, Sequence[str | Path]],
    window: int = 3,
    metric: str = "rollout/success",
    label: str = "rollout success (%)",
    scale: float = 100.0,
) -> Path | None:
    """A training metric per iteration (rollout success unless ``metric`` names another column of the runs'
    ``metrics.jsonl``, drawn times ``scale``): each seed thin, the arm's mean over seeds thick (None: no run logged
    it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for i, (arm, runs) in enumerate(arms.items()):
        color = f"C{i}"
        curves = []
        for run in runs:
            log = Path(run) / "metrics.jsonl"
            if not log.is_file():
                continue
            points = [
                (int(r["iteration"]), float(r[metric]))
                for r in read_metrics(log)
                if metric in r and isinstance(r.get("iteration"), int) and r.get("phase") != "warmup"
            ]
            points = smooth(points, window)
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, [scale * y for y in ys], color=color, linewidth=0.7, alpha=0.45)
                curves.append(dict(points))
        if curves:
            common = sorted(set.intersection(*(set(c) for c in curves)))
            ax.plot(
                common,
                [scale * sum(c[x] for c in curves) / len(curves) for x in common],
                color=color,
                linewidth=2.2,
                label=f"{arm} (mean of {len(curves)})",
            )
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("iteration")
    ax.set_ylabel(label)
    ax.set_title(f"training curves per seed (thin) and mean (thick), {window}-point running mean")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
