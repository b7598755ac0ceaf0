"""Success per (level, technique tier): the paper's technique-generalisation view (appendix D.4, Figure 12).

A dataset that mixes Sudoku technique tiers (``milepost data sudoku --grade easy,medium,hard``) carries each
task's tier in ``meta["tier"]``. When the evaluated tasks carry more than one tier, ``runner.summarise`` adds
the level metrics of every (level, tier) cell to ``metrics.json`` (``"tiers"``), a table to the report, and a
plot of success against goal distance with one line per tier. Tasks without a tier are left out of the
breakdown; ``beyond`` (the grader could not finish the puzzle) stays its own line, labelled as the paper's
hard tier.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.evaluation.metrics import Estimate, LevelMetrics, level_metrics, success_by_distance
from milepost.evaluation.plots import plot_success_vs_distance
from milepost.tables import md_row, md_rule
from milepost.types import Episode, Task

TIER_ORDER = ("easy", "medium", "hard", "beyond")
LABELS = {"beyond": "beyond (grader stalled; paper: hard)"}
PLOT_NAME = "success_by_tier.png"


def _label(tier: str) -> str:
    return LABELS.get(tier, tier)


@dataclass
class TierBreakdown:
    """Level metrics per tier, levels in table order."""

    levels: dict[str, list[LevelMetrics]]  # tier -> metrics of the levels where the tier has episodes
    episodes: dict[str, list[Episode]]  # tier -> its episodes

    def to_dict(self) -> dict[str, Any]:
        return {tier: [m.to_dict() for m in metrics] for tier, metrics in self.levels.items()}

    def plot(self, path: str | Path, title: str) -> Path:
        """Success against goal distance, one line (with per-distance dots) per tier, like Figure 12."""
        series = {
            _label(tier): (metrics, success_by_distance(self.episodes[tier])) for tier, metrics in self.levels.items()
        }
        return plot_success_vs_distance(path, series, title)

    def markdown(self, ks: Sequence[int], ranges: dict[str, str], plot_name: str | None) -> str:
        """Tiers as rows, levels as columns: avg@n and pass@k with 95% intervals, tasks per cell."""
        names = [name for name in ranges if any(m.level == name for ms in self.levels.values() for m in ms)]
        head = ["tier", "metric"] + [f"{name} ({ranges[name]})" for name in names]
        lines = ["### Success by technique tier (paper appendix D.4)", "",
                 md_row(head), md_rule(len(head))]  # fmt: skip
        for tier, metrics in self.levels.items():
            cell = {m.level: m for m in metrics}
            n = max((m.samples for m in metrics), default=0)
            rows = [("tasks", [str(cell[name].tasks) if name in cell else "-" for name in names])]
            rows.append((f"avg@{n} (%)", [_est(cell[name].avg) if name in cell else "-" for name in names]))
            for k in ks:
                values = [_est(cell[name].pass_at.get(str(k))) if name in cell else "-" for name in names]
                rows.append((f"pass@{k} (%)", values))
            lines += [md_row([_label(tier), label, *values]) for label, values in rows]
        if plot_name:
            lines += ["", f"![success against goal distance by tier]({plot_name})"]
        return "\n".join(lines) + "\n"


def _est(e: Estimate | None) -> str:
    return "-" if e is None else f"{100 * e.value:.1f} [{100 * e.lo:.0f}, {100 * e.hi:.0f}]"


def tier_breakdown(
    tasks: Sequence[Task],
    episodes: Sequence[Episode],
    level_order: Sequence[str],
    ks: Sequence[int],
    *,
    ceiling: Callable[[str], bool] | None = None,
    seed: int = 0,
) -> TierBreakdown | None:
    """Level metrics per (level, tier), or None when the tasks carry fewer than two tiers."""
    tier_of = {t.task_id: str(t.meta["tier"]) for t in tasks if t.meta.get("tier")}
    present = set(tier_of.values())
    if len(present) < 2:
        return None
    tiers = [t for t in TIER_ORDER if t in present] + sorted(present - set(TIER_ORDER))
    cells: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    by_tier: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        tier = tier_of.get(ep.task_id)
        if tier is not None:
            cells[(tier, ep.level)].append(ep)
            by_tier[tier].append(ep)
    levels = {
        tier: [
            level_metrics(name, cells[(tier, name)], ks, ceiling=ceiling, seed=seed)
            for name in level_order
            if cells.get((tier, name))
        ]
        for tier in tiers
        if by_tier.get(tier)
    }
    return TierBreakdown(levels, {tier: by_tier[tier] for tier in levels})
