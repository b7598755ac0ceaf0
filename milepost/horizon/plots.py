"""The horizon's figures: ``horizon.png`` (one panel per environment and the outcomes by distance band) and
``horizon_compare.png`` (one panel per environment, every run's curve).

Every panel reads on its own: a log distance axis ticked at the suite's distances, dots sized by the episodes
behind them (with a legend for the size), the fitted curve and its band only where the fit identifies a horizon
(a flagged curve shows its dots and the reason), and the episode count over each outcome bar.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from milepost.evaluation.failures import FAILURE_KINDS
from milepost.horizon.estimator import LEVELS, HorizonEstimate, TaskOutcomes


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _dot_size(episodes: int) -> float:
    return 12 + 4 * episodes


def _distance_axis(ax: Any, distances: Sequence[int]) -> None:
    """Log scale with a tick at the distances the suite holds, thinned so that labels do not overlap on the log
    axis (each kept tick at least 1.25x the one before; the longest distance always kept)."""
    ax.set_xscale("log")
    ticks: list[int] = []
    for d in sorted(set(distances)):
        if not ticks or d >= 1.25 * ticks[-1]:
            ticks.append(d)
    longest = max(distances)
    if ticks[-1] != longest:
        ticks[-1 if len(ticks) > 1 and longest < 1.25 * ticks[-1] else len(ticks) :] = [longest]
    ax.set_xlim(min(ticks) / 1.3, longest * 1.5)  # the suite's range even where no curve is drawn
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks], fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("goal distance d (atomic steps, log scale)")


def _size_legend(ax: Any, counts: Sequence[int]) -> Any:
    """Handles for a legend of dot sizes: the fewest and the most episodes behind one dot."""
    lo, hi = min(counts), max(counts)
    sizes = [lo] if lo == hi else [lo, hi]
    return [ax.scatter([], [], s=_dot_size(n), color="grey", alpha=0.5, label=f"{n} episodes") for n in sizes]


def plot_horizon(
    path: Path,
    fits: Mapping[str, HorizonEstimate],
    groups: Mapping[str, list[TaskOutcomes]],
    failures: dict[str, dict[str, int]],
    title: str,
) -> None:
    """Write ``horizon_figure`` to ``path``."""
    plt = _pyplot()
    fig = horizon_figure(fits, groups, failures, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def horizon_figure(
    fits: Mapping[str, HorizonEstimate],
    groups: Mapping[str, list[TaskOutcomes]],
    failures: dict[str, dict[str, int]],
    title: str,
) -> Any:
    """One panel per environment (dots, and the fit where it identifies a horizon), then the outcome bars."""
    plt = _pyplot()
    panels = len(groups) + 1
    fig, axes = plt.subplots(1, panels, figsize=(4.4 * panels, 4.4), squeeze=False)
    for i, (env, group) in enumerate(groups.items()):
        ax, fit = axes[0][i], fits[env]
        per: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for o in group:
            per[o.distance][0] += o.successes
            per[o.distance][1] += o.trials
        ds = sorted(per)
        ax.scatter(
            ds,
            [per[d][0] / per[d][1] for d in ds],
            s=[_dot_size(per[d][1]) for d in ds],
            color=f"C{i + 1}",
            alpha=0.7,
            label="success at a distance",
        )
        handles = _size_legend(ax, [per[d][1] for d in ds])
        grid = np.array(fit.band["d"])
        if fit.identified:
            ax.fill_between(grid, fit.band["lo"], fit.band["hi"], color="C0", alpha=0.2, label="logistic band")
            ax.plot(grid, fit.logistic.prob(grid), color="C0", label="logistic in log d")
            ax.plot(grid, fit.reliability.prob(grid), color="C0", ls=":", label=f"q^d (q = {fit.reliability.q:.3f})")
            for level, style in zip(LEVELS, ("--", "-."), strict=True):
                h = fit.logistic.horizon(level)
                if math.isfinite(h) and h <= grid[-1]:
                    ax.axvline(h, color="grey", ls=style, lw=1, label=f"{round(100 * level)}% horizon {h:.1f}")
        else:
            ax.text(
                0.5,
                0.5,
                "no curve drawn:\n" + fit.status.replace("_", " "),
                transform=ax.transAxes,
                ha="center",
                fontsize=8,
                color="grey",
            )
        _distance_axis(ax, ds)
        ax.set_ylabel("success")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{env}", fontsize=9)
        main_handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=[h for h in main_handles if h not in handles] + handles, fontsize=6, loc="lower left")
    bx = axes[0][-1]
    bands = list(failures)
    bottom = np.zeros(len(bands))
    for j, kind in enumerate(("success", *FAILURE_KINDS)):
        vals = np.array([failures[b].get(kind, 0) / max(failures[b]["episodes"], 1) for b in bands])
        if vals.sum() == 0:
            continue
        bx.bar(bands, vals, bottom=bottom, label=kind, color="C2" if kind == "success" else f"C{(j + 3) % 10}")
        bottom += vals
    for x, band in enumerate(bands):
        bx.text(x, 1.01, f"n={failures[band]['episodes']}", ha="center", va="bottom", fontsize=7)
    bx.set_ylim(0, 1.1)
    bx.set_xlabel("goal distance band")
    bx.set_ylabel("share of episodes")
    bx.set_title("outcomes by distance band (n: episodes)", fontsize=9)
    bx.legend(fontsize=6)
    fig.suptitle(f"{title}: success against goal distance, per environment", fontsize=10)
    fig.tight_layout()
    return fig


def plot_compare(path: Path, names: Sequence[str], fits: Sequence[Mapping[str, HorizonEstimate]]) -> None:
    """One panel per environment; each run's logistic curve and band where its fit identifies a horizon."""
    plt = _pyplot()
    envs = list(dict.fromkeys(env for run in fits for env in run))
    fig, axes = plt.subplots(1, len(envs), figsize=(4.6 * len(envs), 4.4), squeeze=False)
    for k, env in enumerate(envs):
        ax = axes[0][k]
        distances: list[int] = []
        for i, (name, run) in enumerate(zip(names, fits, strict=True)):
            fit = run.get(env)
            if fit is None:
                continue
            distances += list(range(fit.distance_range[0], fit.distance_range[1] + 1))
            grid = np.array(fit.band["d"])
            if not fit.identified:
                ax.plot([], [], color=f"C{i}", label=f"{name}: no curve ({fit.status.replace('_', ' ')})")
                continue
            ax.fill_between(grid, fit.band["lo"], fit.band["hi"], color=f"C{i}", alpha=0.15)
            h = fit.logistic.horizon(0.5)
            label = f"{name}: 50% horizon {h:.1f}" if math.isfinite(h) else f"{name}: beyond"
            ax.plot(grid, fit.logistic.prob(grid), color=f"C{i}", label=label)
            if math.isfinite(h) and h <= grid[-1]:
                ax.axvline(h, color=f"C{i}", ls="--", lw=1)
        ax.axhline(0.5, color="grey", lw=0.5)
        _distance_axis(ax, sorted(set(distances)) or [1])
        ax.set_ylabel("fitted success")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(env, fontsize=9)
        ax.legend(fontsize=6, loc="lower left")
    fig.suptitle("horizon comparison per environment (logistic fits with bootstrap bands)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
