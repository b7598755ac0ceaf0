"""PNG plots of evaluation results and training logs (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import fnmatch
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.evaluation.metrics import LevelMetrics
from milepost.io import read_jsonl
from milepost.tracking import eval_scalars, read_metrics, step_of


def plot_success_vs_distance(
    path: str | Path,
    series: Mapping[str, tuple[Sequence[LevelMetrics], Mapping[int, tuple[int, int]]]],
    title: str,
    *,
    panels: Mapping[str, Sequence[str]] | None = None,
    note: str = "",
) -> Path:
    """Success against goal distance: per-level avg success with CIs (lines) and per-distance rates (dots).

    Args:
        series: label -> (level metrics, goal distance -> (successes, episodes)).
        panels: panel title -> the labels drawn in it, side by side on one success axis (default: one panel
            with every series); ``milepost compare`` puts runs of different environments or sizes apart.
        note: a line under the title, e.g. what differs between the runs.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = dict(panels) if panels else {"": list(series)}
    width = 7.0 if len(groups) == 1 else 5.2 * len(groups)
    fig, axes = plt.subplots(1, len(groups), figsize=(width, 4.2 + 0.5 * bool(note)), squeeze=False, sharey=True)
    colour = {label: f"C{i}" for i, label in enumerate(series)}
    for ax, (panel, labels) in zip(axes[0], groups.items()):
        for label in labels:
            levels, by_distance = series[label]
            color = colour[label]
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
        ax.set_ylim(-3, 103)
        ax.set_title(panel if len(groups) > 1 else title, fontsize=10 if len(groups) > 1 else None)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("success (%)")
    if len(groups) > 1 or note:
        heading = title if len(groups) > 1 else ""
        lines = [heading] if heading else []
        lines += textwrap.wrap(note, 110) if note else []
        if len(groups) == 1:
            axes[0][0].set_title(title)
        fig.suptitle("\n".join(lines), fontsize=10, color="black")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, metadata={"Title": title, "Description": note or "the runs are comparable"})
    plt.close(fig)
    return out


def smooth(points: list[tuple[int, float]], window: int = 5) -> list[tuple[int, float]]:
    """The ``window``-point trailing running mean of ``points`` (the first points average what there is)."""
    out = []
    for i, (x, _) in enumerate(points):
        chunk = [y for _, y in points[max(0, i - window + 1) : i + 1]]
        out.append((x, sum(chunk) / len(chunk)))
    return out


@dataclass(frozen=True)
class Panel:
    """One panel of ``training.png``: a title, the metrics drawn in it (``fnmatch`` patterns, e.g.
    ``eval/*/avg``, with their legend labels), whether the values are shares drawn as percent, and whether a
    running mean is drawn (not for sparse points such as periodic evaluations: those are drawn as markers).

    One panel holds one kind of quantity (a share, a ratio, a loss...), so its y-axis means one thing. The
    y-range is ``ylim`` when given (shares: 0-100%), else the data's, widened to at least ``min_span`` (or,
    without one, a fifth of the largest magnitude): a flat curve's noise is not blown up to the panel's height.
    """

    title: str
    series: tuple[tuple[str, str], ...]
    percent: bool = False
    smooth: bool = True
    ylim: tuple[float, float] | None = None
    min_span: float | None = None


_SHARE = (-3.0, 103.0)  # a percent panel always shows 0-100

TRAINING_PANELS = (
    Panel("rollout success (%)", (("rollout/success", "success"),), percent=True, ylim=_SHARE),
    Panel("episode reward", (("rollout/reward", "reward"),)),
    Panel("loss", (("loss/policy", "RL loss"), ("loss/sft", "SFT loss"))),
    # Ratios around 1 (pi_theta / pi_old): a span of at least 0.2 keeps a 1.001 wiggle flat.
    Panel(
        "importance weights", (("is/mean_weight", "mean weight"), ("is/onpolicy_rho", "on-policy rho")), min_span=0.2
    ),
    Panel("turns masked by importance sampling (%)", (("is/masked_frac", "masked"),), percent=True, ylim=_SHARE),
    Panel("answer length (tokens)", (("rollout/completion_tokens", "tokens per answer"),)),
    # The horizon paper's collapse signal: the share of answers cut at max_new_tokens.
    Panel(
        "answers cut at max_new_tokens (%)", (("rollout/max_length", "max-length ratio"),), percent=True, ylim=_SHARE
    ),
    # AUROC lies in [0, 1] and Kendall's tau in [-1, 1]: one scale; the potential's MSE is an error of its own.
    Panel(
        "critic quality (MiRA)",
        (("critic/value_auroc", "V AUROC"), ("critic/completion_tau", "completion tau")),
        ylim=(-1.05, 1.05),
    ),
    Panel("potential error (MiRA)", (("critic/potential_mse", "P MSE"),)),
    Panel("evaluation success (%)", (("eval/*/avg", "{}"),), percent=True, smooth=False, ylim=_SHARE),
    Panel("learning rate", (("train/lr", "lr"),)),
    Panel("gradient norm", (("train/grad_norm", "grad norm"),)),
)
"""What ``training.png`` shows, in order; a panel none of the runs logged is left out."""


def _panel_series(panel: Panel, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Legend label -> (step, value) points of the panel's metrics in ``rows`` (NaN stored as null: skipped)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for pattern, label in panel.series:
        keys = sorted({k for r in rows for k in r if fnmatch.fnmatchcase(k, pattern)})
        for key in keys:
            name = label.format(key.split("/")[1]) if "{}" in label else label
            points = [
                (step_of(r), float(r[key]))
                for r in rows
                if isinstance(r.get(key), int | float) and math.isfinite(r[key])
            ]
            if points:
                out[name] = points
    return out


def _y_range(panel: Panel, values: Sequence[float]) -> tuple[float, float] | None:
    """The panel's y-limits: fixed for shares, else the data's range widened to the panel's least span."""
    if panel.ylim is not None:
        return panel.ylim
    if not values:
        return None
    lo, hi = min(values), max(values)
    need = panel.min_span if panel.min_span is not None else 0.2 * max(abs(lo), abs(hi))
    if need <= 0 or hi - lo >= need:
        return None  # matplotlib's own margins
    mid = (lo + hi) / 2
    return mid - 0.55 * need, mid + 0.55 * need


def training_figure(runs: Mapping[str, Sequence[Mapping[str, Any]]], title: str, window: int = 5) -> Any:
    """The figure ``plot_training`` saves (None when no panel has data), for callers that draw it elsewhere.

    Returns the matplotlib ``Figure``; its panels' titles are those of ``TRAINING_PANELS`` it drew.
    """
    logged = {label: [r for r in rows if r.get("phase") != "warmup"] for label, rows in runs.items()}
    drawn = []
    for panel in TRAINING_PANELS:
        series = {label: _panel_series(panel, rows) for label, rows in logged.items()}
        if any(series.values()):
            drawn.append((panel, series))
    if not drawn:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    cols = min(3, len(drawn))
    nrows = math.ceil(len(drawn) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.1 * nrows + 0.5), squeeze=False)
    x_keys = {"iteration" if "iteration" in r else "step" for rows in logged.values() for r in rows[:1]}
    single = len(logged) == 1
    for ax, (panel, series) in zip(axes.flat, drawn):
        scale = 100.0 if panel.percent else 1.0
        values: list[float] = []
        for i, (run, by_metric) in enumerate(series.items()):
            for j, (metric, points) in enumerate(by_metric.items()):
                color, style = (f"C{j}", "-") if single else (f"C{i}", ("-", "--", ":", "-.")[j % 4])
                label = metric if single else (f"{run}: {metric}" if len(by_metric) > 1 else run)
                values += [scale * y for _, y in points]
                if not panel.smooth:
                    xs, ys = zip(*points)
                    ax.plot(xs, [scale * y for y in ys], color=color, linestyle=style, marker="o", label=label)
                    continue
                if single:
                    xs, ys = zip(*points)
                    ax.plot(xs, [scale * y for y in ys], color=color, linewidth=0.8, alpha=0.35)
                xs, ys = zip(*smooth(points, window))
                marker = "o" if len(points) < 3 else None  # a lone point (e.g. an AUROC defined once) shows
                ax.plot(
                    xs, [scale * y for y in ys], color=color, linestyle=style, marker=marker, linewidth=1.6, label=label
                )
        limits = _y_range(panel, values)
        if limits is not None:
            ax.set_ylim(*limits)
        ax.ticklabel_format(
            axis="y", useOffset=False, style="sci", scilimits=(-3, 4)
        )  # no "+1" offset: it hides how small a wiggle is
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(" / ".join(sorted(x_keys)), fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    # What the two line weights mean, once for the figure (the panels' legends name the metrics).
    key = [Line2D([], [], color="0.3", linewidth=1.6, label=f"thick: {window}-point running mean")]
    if single:
        key.insert(0, Line2D([], [], color="0.3", linewidth=0.8, alpha=0.35, label="thin: each logged value"))
    if any(not panel.smooth for panel, _ in drawn):
        key.append(Line2D([], [], color="0.3", marker="o", label="markers: periodic evaluations"))
    fig.legend(handles=key, loc="lower center", ncol=len(key), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_training(
    path: str | Path, runs: Mapping[str, Sequence[Mapping[str, Any]]], title: str, window: int = 5
) -> list[str]:
    """Training curves of one or more runs, one panel per concern (``TRAINING_PANELS``); returns the panel
    titles drawn (none: nothing is written).

    One run: each metric raw (thin) and as a ``window``-point running mean. Several runs (``milepost compare``):
    the running means, one colour per run and one line style per metric. A legend under the panels says which
    line is which. MiRA's critic warm-up rows (``phase: warmup``) come before the first update and are left out.

    Args:
        runs: label -> rows of the run's ``metrics.jsonl`` (and its periodic evaluations as ``eval/...``).
    """
    fig = training_figure(runs, title, window)
    if fig is None:
        return []
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return [ax.get_title() for ax in fig.axes if ax.get_visible()]


def training_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """A training run's ``metrics.jsonl`` rows under today's metric names (``tracking.read_metrics``: an older
    run's ``train/loss`` is read as ``loss/policy``), plus one row per periodic evaluation (``eval.jsonl``) with
    its per-level results as ``eval/LEVEL/...`` (the names the trackers use)."""
    folder = Path(run_dir)
    rows = read_metrics(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []
    if (folder / "eval.jsonl").is_file():
        rows += [{"iteration": r["iteration"], **eval_scalars(r["levels"])} for r in read_jsonl(folder / "eval.jsonl")]
    return rows


def plot_training_log(run_dir: str | Path) -> Path | None:
    """Draw ``RUN/training.png`` from the run's own logs (None: nothing to draw)."""
    folder = Path(run_dir)
    out = folder / "training.png"
    return out if plot_training(out, {folder.name: training_rows(folder)}, f"training: {folder.name}") else None
