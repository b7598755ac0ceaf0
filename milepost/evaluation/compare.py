"""Put runs side by side from their saved metrics: a Table 7 style comparison and plots.

A run folder is an evaluation folder (``metrics.json``), or a training run (``config.yaml`` and
``metrics.jsonl``) whose evaluation, when it has one, lives in ``eval/metrics.json``. Training logs contribute
learning curves (RL: rollout success per iteration; SFT: loss per step) to a table, and every logged concern
(success, reward, loss, importance weights, answer length, max-length share, critic quality, periodic
evaluations) to ``training.png``, the runs side by side in each panel; so training runs without an evaluation
are compared by their curves, with a note saying how to evaluate them.

Runs of different environments, board sizes or level sets are still put side by side, with a warning in the
report (and in ``Comparison.warnings`` for the command line).
"""

from __future__ import annotations

import json
import logging
import math
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from milepost.envs.levels import SIZE_MEANING
from milepost.errors import InputError
from milepost.evaluation.failures import is_infra_failure
from milepost.evaluation.metrics import Estimate, LevelMetrics, pass_at_k, success_by_distance
from milepost.evaluation.plots import plot_success_vs_distance, plot_training, smooth, training_rows
from milepost.io import atomic_write_text, read_jsonl
from milepost.tables import md_row, md_rule
from milepost.types import Episode

log = logging.getLogger(__name__)


class Curve(NamedTuple):
    """A training-log curve: its metric key, x key, plot file, y label, whether it is scaled to percent, and
    whether a higher value is the better one (the "best" column of the training table)."""

    key: str
    x_key: str
    file: str
    ylabel: str
    percent: bool
    higher_is_better: bool


CURVES = (
    Curve("rollout/success", "iteration", "success.png", "rollout success (%)", True, True),
    # The horizon paper's collapse signal (section 4.1): the share of answers cut at max_new_tokens rises
    # sharply when training collapses.
    Curve("rollout/max_length", "iteration", "max_length.png", "answers cut at max_new_tokens (%)", True, False),
    Curve("loss/sft", "step", "sft_loss.png", "SFT loss", False, False),
)
SMOOTH = 5


@dataclass
class Run:
    """What one run folder holds for a comparison."""

    label: str
    folder: Path
    meta: dict[str, Any] = field(default_factory=dict)
    levels: list[LevelMetrics] | None = None  # None: no evaluation
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # metric -> (x, y), raw
    rows: list[dict[str, Any]] = field(default_factory=list)  # the training log (plots.training_rows)
    config: dict[str, Any] = field(default_factory=dict)  # a training run's config.yaml

    @property
    def env(self) -> str | None:
        return self.meta.get("env") or (self.config.get("env") or {}).get("name")

    @property
    def size(self) -> int | None:
        size = self.meta.get("size") or (self.meta.get("env_kwargs") or {}).get("size")
        return size or (self.config.get("env") or {}).get("size")

    def missing_eval_note(self) -> str:
        """One line: this run has no evaluation, and the command that makes one."""
        env = self.env or "ENV"
        data = self.config.get("data") or "DATA"
        policy = f"hf:{self.folder / 'final'}"
        return (
            f"{self.label}: no evaluation ({self.folder}/eval/metrics.json is missing); evaluate it with "
            f"`milepost eval --env {env} --data {data} --policy {policy} --out {self.folder / 'eval'}`"
        )


@dataclass
class Comparison:
    """The Markdown report, the warnings it contains, and the files written."""

    text: str
    warnings: list[str]
    notes: list[str]
    files: list[Path]


def find_metrics(run: str | Path) -> Path | None:
    folder = Path(run)
    for candidate in (folder / "metrics.json", folder / "eval" / "metrics.json"):
        if candidate.is_file():
            return candidate
    return None


def load_levels(path: Path) -> tuple[dict[str, Any], list[LevelMetrics]]:
    """``metrics.json``'s meta and per-level results, checked against the ``episodes.jsonl`` beside it
    (:func:`check_against_episodes`) when there is one.

    Raises:
        InputError: a file that is not an evaluation's metrics, or metrics the episodes no longer give.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        meta = data.get("meta", {})
        levels = []
        for raw in data.get("levels", []):
            raw = dict(raw)
            raw["pass_at"] = {k: Estimate(**v) for k, v in raw["pass_at"].items()}
            raw["avg"] = Estimate(**raw["avg"])
            levels.append(LevelMetrics(**raw))
        by_distance = data.get("success_by_distance", {})
        if not isinstance(meta, dict) or not isinstance(by_distance, dict):
            raise TypeError("meta and success_by_distance must be objects")
    except (ValueError, UnicodeDecodeError, RecursionError, AttributeError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not an evaluation's metrics.json ({type(exc).__name__}: {exc})") from None
    episodes = path.parent / EPISODES
    if episodes.is_file():
        check_against_episodes(path, meta, levels, by_distance, episodes)
    return meta, levels


EPISODES = "episodes.jsonl"


def recount(episodes: Sequence[Episode], ks: Sequence[int]) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]]]:
    """What a comparison shows of a run, counted again from its episodes: per level the tasks, the samples per
    task, pass@k for each k and avg@n (the runner's ``level_metrics``, infrastructure failures left out), and the
    (successes, episodes) at each goal distance. Only order-free numbers: the bootstrap intervals resample by the
    dataset's task order, which a run folder does not record."""
    by_level: dict[str, dict[str, list[int]]] = defaultdict(dict)  # level -> task -> [samples, successes]
    infra: dict[str, int] = defaultdict(int)
    for ep in episodes:
        if is_infra_failure(ep):
            infra[ep.level] += 1
            continue
        task = by_level[ep.level].setdefault(ep.task_id, [0, 0])
        task[0] += 1
        task[1] += int(ep.success)
    levels: dict[str, dict[str, Any]] = {}
    for name in sorted(set(by_level) | set(infra)):
        tasks: list[tuple[int, int]] = [(n, c) for n, c in by_level[name].values()]
        rates = [c / n for n, c in tasks]
        pass_at = {}
        for k in ks:
            per_task = [pass_at_k(n, c, k) for n, c in tasks if n >= k]
            if per_task:
                pass_at[str(k)] = sum(per_task) / len(per_task)
        levels[name] = {
            "tasks": len(tasks),
            "samples": max((n for n, _ in tasks), default=0),
            "avg": sum(rates) / len(rates) if rates else 0.0,
            "pass_at": pass_at,
            "infra_failures": infra[name],
        }
    by_distance = {str(d): [s, n] for d, (s, n) in success_by_distance(episodes).items()}
    return levels, by_distance


def check_against_episodes(
    path: Path,
    meta: dict[str, Any],
    levels: Sequence[LevelMetrics],
    by_distance: dict[str, Any],
    episodes_file: Path,
) -> None:
    """Refuse ``metrics.json`` when the ``episodes.jsonl`` beside it no longer gives its numbers (an episode
    edited, added or removed after the evaluation wrote them): every number the comparison shows is counted
    again from the episodes (:func:`recount`), the way the runner selects them (samples below the run's ``n``).
    A recount rather than a hash, so folders written before this check are checked alike, and edits that
    change no compared number (a turn's text, a reward) are not refused.

    Raises:
        InputError: one line naming the first number that differs and how to recompute the metrics.
    """
    rows = read_jsonl(episodes_file, finite=True)
    episodes = []
    n = meta.get("n")
    for lineno, row in enumerate(rows, 1):
        try:
            ep = Episode.from_dict(row)
        except InputError as exc:
            raise InputError(f"{episodes_file}:{lineno}: {exc}") from None
        if not isinstance(n, int) or ep.sample < n:
            episodes.append(ep)
    ks = sorted({int(k) for lv in levels for k in lv.pass_at})
    counted, distances = recount(episodes, ks)
    stored: dict[str, dict[str, Any]] = {
        lv.level: {
            "tasks": lv.tasks,
            "samples": lv.samples,
            "avg": lv.avg.value,
            "pass_at": {k: e.value for k, e in lv.pass_at.items()},
            "infra_failures": lv.infra_failures,
        }
        for lv in levels
    }
    redo = f"rerun the same `milepost eval --out {path.parent}` (it rewrites the metrics from the episodes)"
    differs = f"{path} does not match {episodes_file}"
    if isinstance(meta.get("episodes"), int) and meta["episodes"] != len(episodes):
        raise InputError(f"{differs}: {meta['episodes']} episodes in the metrics, {len(episodes)} in the file; {redo}")
    if set(stored) != set(counted):
        raise InputError(
            f"{differs}: levels {', '.join(sorted(stored)) or 'none'} in the metrics, "
            f"{', '.join(sorted(counted)) or 'none'} in the episodes; {redo}"
        )
    for name, want in stored.items():
        got = counted[name]
        for key in ("tasks", "samples", "infra_failures", "avg", "pass_at"):
            a, b = want[key], got[key]
            same = (
                a.keys() == b.keys() and all(math.isclose(a[k], b[k], abs_tol=1e-9) for k in a)
                if key == "pass_at"
                else math.isclose(a, b, abs_tol=1e-9)
            )
            if not same:
                raise InputError(
                    f"{differs}: level {name} {key} {_shown(a)} in the metrics, {_shown(b)} recounted; {redo}"
                )
    if by_distance and {d: list(v) for d, v in by_distance.items()} != distances:
        raise InputError(f"{differs}: the successes by goal distance differ; {redo}")


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def load_run(label: str, run: str | Path) -> Run:
    """Read a run folder's evaluation, training log and config (whichever it has).

    Raises:
        InputError: when the folder has neither an evaluation nor a training log.
    """
    folder = Path(run)
    out = Run(label, folder)
    metrics = find_metrics(folder)
    if metrics is not None:
        out.meta, out.levels = load_levels(metrics)
    if (folder / "metrics.jsonl").is_file():
        out.rows = training_rows(folder)
        for key, x_key, *_ in CURVES:
            points = [(int(r[x_key]), float(r[key])) for r in out.rows if x_key in r and r.get(key) is not None]
            if points:
                out.curves[key] = points
    config = folder / "config.yaml"
    if config.is_file():
        import yaml

        loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
        out.config = loaded if isinstance(loaded, dict) else {}
    if out.levels is None and not out.rows:
        raise InputError(
            f"{folder}: nothing to compare: no evaluation (metrics.json, eval/metrics.json) and no training log "
            "(metrics.jsonl)"
        )
    return out


def comparison_table(
    runs: Sequence[tuple[str, list[LevelMetrics]]],
    ks: Sequence[int],
    reference: dict[str, dict[str, float]] | None = None,
) -> str:
    """Rows: run x metric (pass@k, avg@n); columns: levels; "-" where a run lacks a value. ``reference``
    adds rows such as the paper's."""
    names: list[str] = []
    for _, levels in runs:
        for lv in levels:
            if lv.level not in names:
                names.append(lv.level)
    head = ["run", "metric", *names]
    lines = [md_row(head), md_rule(len(head))]
    for label, levels in runs:
        by = {lv.level: lv for lv in levels}
        n = max((lv.samples for lv in levels), default=0)
        for k in ks:
            cells = [
                f"{100 * by[x].pass_at[str(k)].value:.1f}" if x in by and str(k) in by[x].pass_at else "-"
                for x in names
            ]
            lines.append(md_row([label, f"pass@{k} (%)", *cells]))
        cells = [
            f"{100 * by[x].avg.value:.1f} [{100 * by[x].avg.lo:.0f}, {100 * by[x].avg.hi:.0f}]" if x in by else "-"
            for x in names
        ]
        lines.append(md_row([label, f"avg@{n} (%)", *cells]))
    for label, row in (reference or {}).items():
        lines.append(md_row([label, "", *(row.get(x, "-") for x in names)]))
    return "\n".join(lines) + "\n"


def all_ks(runs: Sequence[Run]) -> list[int]:
    """The union of the pass@k values the runs report, ascending."""
    ks = {int(k) for run in runs for lv in run.levels or [] for k in lv.pass_at}
    return sorted(ks)


def differences(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """The properties on which the runs differ (environment, board size, level set): name -> label -> value,
    runs that do not record the property left out."""
    level_sets = {r.label: ",".join(lv.level for lv in r.levels) if r.levels else None for r in runs}
    checks: dict[str, dict[str, Any]] = {
        "environment": {r.label: r.env for r in runs},
        "board size": {r.label: r.size for r in runs},
        "levels": level_sets,
    }
    out: dict[str, dict[str, Any]] = {}
    for name, values in checks.items():
        known = {label: v for label, v in values.items() if v is not None}
        if len(set(map(str, known.values()))) > 1:
            out[name] = known
    return out


def _listed(values: dict[str, Any]) -> str:
    return ", ".join(f"{label}: {v}" for label, v in values.items())


def mismatch_warnings(runs: Sequence[Run]) -> list[str]:
    """One line per property on which the runs differ: environment, board size, level set."""
    return [
        f"the runs differ in {name} ({_listed(values)}): their rows are not comparable"
        for name, values in differences(runs).items()
    ]


def difference_note(runs: Sequence[Run]) -> str:
    """The line the plots carry under their title when the runs differ (empty when they do not)."""
    found = differences(runs)
    if not found:
        return ""
    return "not comparable: the runs differ in " + "; ".join(f"{name} ({_listed(v)})" for name, v in found.items())


def setting(run: Run) -> str:
    """What a run played, for a panel title or legend: ``sudoku, board side 4`` (``?`` where unrecorded)."""
    env, size = run.env, run.size
    if size is None:
        return env or "?"
    return f"{env or '?'}, {SIZE_MEANING.get(env or '', 'size')} {size}"


def training_table(runs: Sequence[Run]) -> str:
    """Per run and logged curve: points, the first and last logged values, the mean of the last ``SMOOTH``
    points, and the best value of the ``SMOOTH``-point running mean (a single lucky iteration is not "best")."""
    lines = [
        f"| run | curve | points | first | last | mean of last {SMOOTH} | best ({SMOOTH}-point mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for curve in CURVES:
            raw = run.curves.get(curve.key, [])
            if not raw:
                continue
            scale = 100.0 if curve.percent else 1.0
            ys = [scale * y for _, y in raw]
            means = [scale * y for _, y in smooth(raw, SMOOTH)]
            best = max(means) if curve.higher_is_better else min(means)
            fmt = "{:.1f}" if curve.percent else "{:.4f}"
            cells = [ys[0], ys[-1], means[-1], best]
            row = [run.label, curve.key, str(len(ys)), *(fmt.format(v) for v in cells)]
            lines.append(md_row(row))
    return "\n".join(lines) + "\n"


def plot_curves(
    path: Path,
    curves: dict[str, list[tuple[int, float]]],
    ylabel: str,
    title: str,
    *,
    xlabel: str = "iteration",
    percent: bool = True,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in curves.items():
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, [100 * y if percent else y for y in ys], label=label, alpha=0.85)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def compare(
    runs: Sequence[str | Path],
    out: str | Path,
    labels: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    reference: dict[str, dict[str, float]] | None = None,
) -> Comparison:
    """Write ``comparison.md`` first, then ``comparison.png`` (runs with an evaluation) and the training-curve
    plots (runs with a training log); ``ks`` None shows the union of the runs' pass@k values."""
    out_dir = Path(out)
    if not runs:
        raise InputError("compare: give at least one run folder")
    labels = list(labels) if labels else [Path(r).name for r in runs]
    if len(labels) != len(runs):
        raise InputError(f"compare: one label per run ({len(runs)} runs, {len(labels)} labels)")
    loaded = [load_run(label, run) for label, run in zip(labels, runs)]
    evaluated = [r for r in loaded if r.levels is not None]
    ks = list(ks) if ks is not None else all_ks(evaluated)
    warnings = mismatch_warnings(loaded)
    notes = [r.missing_eval_note() for r in loaded if r.levels is None]
    parts = ["# Comparison", ""]
    parts += [f"**Warning:** {w}." for w in warnings] + ([""] if warnings else [])
    plots: list[tuple[str, str]] = []  # (file, alt text)
    if evaluated:
        parts += [comparison_table([(r.label, r.levels or []) for r in evaluated], ks, reference)]
        plots.append(("comparison.png", "comparison"))
    parts += [f"- {n}" for n in notes] + ([""] if notes else [])
    if any(r.rows for r in loaded):
        parts += ["### Training curves", "", training_table(loaded)]
        plots.append(("training.png", "training curves side by side"))
        plots += [(c.file, "training curves") for c in CURVES if any(c.key in r.curves for r in loaded)]
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "comparison.md"

    def write(with_plots: bool, note: str = "") -> str:
        text = "\n".join(parts + ([f"![{alt}]({name})" for name, alt in plots] + [""] if with_plots else [note, ""]))
        atomic_write_text(report, text)  # a killed compare leaves the last whole report
        return text

    text = write(with_plots=True)
    files = [report]
    try:
        files += _plots(out_dir, evaluated, loaded)
    except ImportError as exc:  # the tables are written: a missing plotting library loses nothing
        log.warning("compare: plots not written (%s)", exc)
        text = write(with_plots=False, note=f"Plots not written: {exc}.")
    return Comparison(text, warnings, notes, files)


def _plots(out_dir: Path, evaluated: Sequence[Run], loaded: Sequence[Run]) -> list[Path]:
    files = []
    if evaluated:
        files.append(comparison_plot(out_dir / "comparison.png", evaluated))
    note = "".join(f"\n{line}" for line in textwrap.wrap(difference_note(loaded), 100))
    logs = {r.label: r.rows for r in loaded if r.rows}
    title = "training runs side by side" + note
    if logs and plot_training(out_dir / "training.png", logs, title, SMOOTH):
        files.append(out_dir / "training.png")
    for c in CURVES:
        curves = {r.label: smooth(r.curves[c.key], SMOOTH) for r in loaded if c.key in r.curves}
        if curves:
            title = f"training curves ({SMOOTH}-point running mean)" + note
            files.append(plot_curves(out_dir / c.file, curves, c.ylabel, title, xlabel=c.x_key, percent=c.percent))
    return files


def comparison_plot(path: Path, evaluated: Sequence[Run]) -> Path:
    """``comparison.png``: success against goal distance, one curve per run. When the runs differ (another
    environment, size or level set) the figure says what differs under its title, each run is named with what it
    played, and runs of another environment or size get a panel of their own: no curve seems to continue
    another's."""
    note = difference_note(evaluated)
    series: dict[str, tuple[list[LevelMetrics], dict[int, tuple[int, int]]]] = {}
    panels: dict[str, list[str]] = {}
    for run in evaluated:
        name = f"{run.label} ({setting(run)})" if note else run.label
        series[name] = (run.levels or [], {})
        panels.setdefault(setting(run), []).append(name)
    title = "success against goal distance"
    return plot_success_vs_distance(path, series, title, panels=panels if len(panels) > 1 else None, note=note)
