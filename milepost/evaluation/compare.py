"""Put runs side by side from their saved metrics: a Table 7 style comparison and plots.

A run folder is either an evaluation folder (``metrics.json``) or a training run whose final evaluation
lives in ``eval/metrics.json``; training runs also contribute their ``metrics.jsonl`` learning curves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from milepost.errors import InputError
from milepost.evaluation.metrics import Estimate, LevelMetrics
from milepost.io import read_jsonl


def find_metrics(run: str | Path) -> Path:
    folder = Path(run)
    for candidate in (folder / "metrics.json", folder / "eval" / "metrics.json"):
        if candidate.is_file():
            return candidate
    raise InputError(f"{folder}: no metrics.json (nor eval/metrics.json) to compare")


def load_levels(path: Path) -> tuple[dict[str, Any], list[LevelMetrics]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    levels = []
    for raw in data.get("levels", []):
        raw = dict(raw)
        raw["pass_at"] = {k: Estimate(**v) for k, v in raw["pass_at"].items()}
        raw["avg"] = Estimate(**raw["avg"])
        levels.append(LevelMetrics(**raw))
    return data.get("meta", {}), levels


def comparison_table(
    runs: Sequence[tuple[str, list[LevelMetrics]]],
    ks: Sequence[int],
    reference: dict[str, dict[str, float]] | None = None,
) -> str:
    """Rows: run x metric (pass@k, avg@n); columns: levels. ``reference`` adds rows such as the paper's."""
    names: list[str] = []
    for _, levels in runs:
        for lv in levels:
            if lv.level not in names:
                names.append(lv.level)
    head = ["run", "metric", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, levels in runs:
        by = {lv.level: lv for lv in levels}
        n = max((lv.samples for lv in levels), default=0)
        for k in ks:
            cells = [
                f"{100 * by[x].pass_at[str(k)].value:.1f}" if x in by and str(k) in by[x].pass_at else "-"
                for x in names
            ]
            lines.append(f"| {label} | pass@{k} (%) | " + " | ".join(cells) + " |")
        cells = [
            f"{100 * by[x].avg.value:.1f} [{100 * by[x].avg.lo:.0f}, {100 * by[x].avg.hi:.0f}]" if x in by else "-"
            for x in names
        ]
        lines.append(f"| {label} | avg@{n} (%) | " + " | ".join(cells) + " |")
    for label, row in (reference or {}).items():
        lines.append(f"| {label} | | " + " | ".join(str(row.get(x, "-")) for x in names) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(path: Path, curves: dict[str, list[tuple[int, float]]], ylabel: str, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in curves.items():
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, [100 * y for y in ys], label=label, alpha=0.85)
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def smooth(points: list[tuple[int, float]], window: int = 5) -> list[tuple[int, float]]:
    out = []
    for i, (x, _) in enumerate(points):
        chunk = [y for _, y in points[max(0, i - window + 1) : i + 1]]
        out.append((x, sum(chunk) / len(chunk)))
    return out


def compare_runs(
    runs: Sequence[str | Path],
    out: str | Path,
    labels: Sequence[str] | None = None,
    ks: Sequence[int] = (1, 4),
    reference: dict[str, dict[str, float]] | None = None,
) -> str:
    """Write ``comparison.md``, ``comparison.png`` and (when runs have training logs) ``training.png``."""
    from milepost.evaluation.plots import plot_success_vs_distance

    out_dir = Path(out)
    if not runs:
        raise InputError("compare: give at least one run folder")
    labels = list(labels) if labels else [Path(r).name for r in runs]
    if len(labels) != len(runs):
        raise InputError("compare: one label per run")
    loaded = []
    curves: dict[str, list[tuple[int, float]]] = {}
    for label, run in zip(labels, runs):
        _, levels = load_levels(find_metrics(run))
        loaded.append((label, levels))
        log = Path(run) / "metrics.jsonl"
        if log.is_file():
            pts = [(int(r["iteration"]), float(r["rollout/success"])) for r in read_jsonl(log) if "iteration" in r]
            curves[label] = smooth(pts)
    table = comparison_table(loaded, ks, reference)
    plot = plot_success_vs_distance(
        out_dir / "comparison.png", {lab: (lv, {}) for lab, lv in loaded}, "success against goal distance"
    )
    parts = ["# Comparison", "", table, f"![comparison]({plot.name})", ""]
    if curves:
        plot_curves(out_dir / "training.png", curves, "rollout success (%)", "training curves (5-iteration mean)")
        parts += ["![training curves](training.png)", ""]
    text = "\n".join(parts)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "comparison.md").write_text(text, encoding="utf-8")
    return text
