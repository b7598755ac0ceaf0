"""Do a plan's subgoals track success? Subgoal-quality statistics over an evaluation run (SGO paper, section 3).

For every episode the plan source gives a count of subgoals completed and a completion fraction (completed /
planned). Over a run, per source:

* Kendall tau-b between subgoals completed and success (0/1), ties corrected;
* AUROC of the completion fraction for success: P(fraction of a success > fraction of a failure), ties half;
* the mean completion fraction on successes and on failures.

Sources: ``plan: <source>`` for SGO episodes (their plan's final z vector; ``<source>`` is the initial plan's:
``programmatic``, ``llm`` or ``fallback``), ``plan: all`` over every SGO episode, and ``environment subgoals``
(the environment's own subgoals, ``Episode.meta["subgoals_completed"] / ["num_subgoals"]``) for any agent.
A statistic is None when it is undefined (every episode succeeded, or none did, or the counts are constant).

The statistics are computed with numpy (a core dependency, unlike torch): ``evaluate`` runs scripted policies
without torch. They agree with ``milepost.training.critics.auroc`` / ``kendall_tau_b`` (tested).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from milepost.tables import md_row
from milepost.types import Episode

ENVIRONMENT = "environment subgoals"


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (Mann-Whitney U on average ranks); NaN when one class is absent."""
    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    # average ranks over ties: rank of a value = (number below) + (number equal + 1) / 2
    sorted_s = np.sort(s)
    below = np.searchsorted(sorted_s, s, side="left")
    upto = np.searchsorted(sorted_s, s, side="right")
    ranks = below + (upto - below + 1) / 2.0
    u = float(ranks[pos].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (ties corrected); NaN if either vector is constant (or shorter than 2)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"kendall_tau_b: vectors of different lengths ({a.shape[0]} and {b.shape[0]})")
    dx = np.sign(a[None, :] - a[:, None])  # (n, n)
    dy = np.sign(b[None, :] - b[:, None])
    upper = np.triu(np.ones_like(dx, dtype=bool), k=1)
    s = float((dx * dy)[upper].sum())
    tx, ty = float((dx[upper] != 0).sum()), float((dy[upper] != 0).sum())
    if tx == 0 or ty == 0:
        return float("nan")
    return s / math.sqrt(tx * ty)


@dataclass
class SubgoalQuality:
    """Subgoal-quality statistics of one plan source over a run."""

    source: str
    episodes: int
    successes: int
    tau_b: float | None
    """Kendall tau-b between subgoals completed and success"""
    auroc: float | None
    """AUROC of the completion fraction for success"""
    completion_success: float | None
    """mean completion fraction of the successful episodes"""
    completion_failure: float | None
    """mean completion fraction of the failed episodes"""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_completion(ep: Episode) -> list[tuple[str, int, float]]:
    """(source, subgoals completed, completion fraction) of every plan source an episode has."""
    out = []
    sgo = ep.meta.get("sgo")
    if isinstance(sgo, dict) and sgo.get("z"):
        z = [bool(v) for v in sgo["z"]]
        done = sum(z)
        out.append((f"plan: {sgo.get('plan_source', '?')}", done, done / len(z)))
        out.append(("plan: all", done, done / len(z)))
    total = int(ep.meta.get("num_subgoals", 0) or 0)
    if total > 0:
        done = int(ep.meta.get("subgoals_completed", 0))
        out.append((ENVIRONMENT, done, done / total))
    return out


def _defined(x: float) -> float | None:
    return None if math.isnan(x) else x


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def subgoal_quality(episodes: Iterable[Episode]) -> list[SubgoalQuality]:
    """Per plan source (see the module docstring), the statistics over ``episodes``; sources in a fixed order
    (plans by source name, ``plan: all``, then the environment's subgoals)."""
    rows: dict[str, list[tuple[int, float, bool]]] = defaultdict(list)
    for ep in episodes:
        for source, done, fraction in episode_completion(ep):
            rows[source].append((done, fraction, bool(ep.success)))
    if sum(1 for s in rows if s.startswith("plan: ") and s != "plan: all") == 1:
        rows.pop("plan: all", None)  # one plan source: "all" would repeat it

    def order(source: str) -> tuple[int, str]:
        return (2 if source == ENVIRONMENT else 1 if source == "plan: all" else 0, source)

    out = []
    for source in sorted(rows, key=order):
        data = rows[source]
        counts = [float(d) for d, _, _ in data]
        fractions = [f for _, f, _ in data]
        success = [s for _, _, s in data]
        out.append(
            SubgoalQuality(
                source=source,
                episodes=len(data),
                successes=sum(success),
                tau_b=_defined(kendall_tau_b(counts, [float(s) for s in success])),
                auroc=_defined(auroc(fractions, success)),
                completion_success=_mean([f for f, s in zip(fractions, success) if s]),
                completion_failure=_mean([f for f, s in zip(fractions, success) if not s]),
            )
        )
    return out


def quality_table(rows: Sequence[SubgoalQuality]) -> str:
    """The report section: one row per plan source ("-" where a statistic is undefined)."""

    def num(x: float | None, pct: bool = False) -> str:
        if x is None:
            return "-"
        return f"{100 * x:.1f}" if pct else f"{x:.3f}"

    lines = [
        "### Subgoal quality (do the subgoals track success?)",
        "",
        "Kendall tau-b between subgoals completed and success, and the AUROC of the completion fraction for "
        "success, over the run's episodes (the SGO paper reports AUROC 0.84 and tau 0.46 for its planner). "
        "'-': undefined (one outcome only, or constant counts).",
        "",
        "| plan source | episodes | successes | tau-b | AUROC | completion on successes (%) | on failures (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r.source,
            str(r.episodes),
            str(r.successes),
            num(r.tau_b),
            num(r.auroc),
            num(r.completion_success, pct=True),
            num(r.completion_failure, pct=True),
        ]
        lines.append(md_row(cells))
    return "\n".join(lines) + "\n"
