"""``milepost horizon compare``: several horizon reports on one plot, and whether their horizons differ.

Reports are comparable when they played the same suite (name, version, hash) and hold the same tasks.
``paired_difference`` resamples the same tasks for both runs (then each run's samples independently) and gives the
interval of the ratio of their horizons.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from milepost.errors import InputError
from milepost.horizon.estimator import TaskOutcomes, _percentile, fit_logistic_batch, logistic_horizon, task_draws
from milepost.horizon.report import ALL, RESULT, _fmt, _horizon_cell
from milepost.io import atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

COMPARE_REPORT, COMPARE_PLOT = "horizon_compare.md", "horizon_compare.png"


def paired_difference(
    first: Sequence[TaskOutcomes],
    second: Sequence[TaskOutcomes],
    *,
    level: float = 0.5,
    boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The bootstrap interval of ``log(h_first / h_second)`` (logistic horizons at ``level``), resampling the
    same tasks for both (they played the same suite), then each policy's samples independently.

    Raises:
        ValueError: the two do not hold the same tasks (by ``task_id`` and distance).
    """
    key_a = [(o.task_id, o.distance, o.env) for o in first]
    key_b = [(o.task_id, o.distance, o.env) for o in second]
    if sorted(key_a) != sorted(key_b):
        raise ValueError("the two runs do not hold the same tasks")
    order = {k: i for i, k in enumerate(key_b)}
    second = [second[order[k]] for k in key_a]
    d = np.array([o.distance for o in first], dtype=float)
    rng = np.random.default_rng(seed)
    draws = task_draws([o.env for o in first], boot, rng)
    logs = []
    for runs in (first, second):
        s = np.array([o.successes for o in runs], dtype=float)
        m = np.array([o.trials for o in runs], dtype=np.int64)
        trials = draws * m[None, :]
        succ = rng.binomial(trials, np.broadcast_to(s / m, trials.shape)).astype(float)
        a, b, _ = fit_logistic_batch(np.log(d), succ, trials.astype(float))
        with np.errstate(divide="ignore"):
            logs.append(np.log(logistic_horizon(a, b, level)))
    with np.errstate(invalid="ignore"):
        diff = logs[0] - logs[1]
    # Both horizons infinite (or both zero) in a resample: no evidence either way, a log-ratio of 0.
    diff = np.where(np.isnan(diff), 0.0, diff)
    finite = diff[np.isfinite(diff)]
    alpha = (1.0 - confidence) / 2.0
    if finite.size < boot * 0.5:
        return {"level": level, "ratio_interval": None, "differs": None, "finite_share": finite.size / boot}
    lo, hi = _percentile(np.where(np.isfinite(diff), diff, np.sign(diff) * 1e9), [alpha * 100, (1 - alpha) * 100])
    return {
        "level": level,
        "ratio": math.exp(float(np.median(finite))),
        "ratio_interval": [math.exp(max(min(float(lo), 700.0), -700.0)), math.exp(max(min(float(hi), 700.0), -700.0))],
        "differs": bool(lo > 0 or hi < 0),
        "finite_share": finite.size / boot,
    }


def _load(run: str | Path) -> dict[str, Any]:
    file = Path(run) / RESULT
    if not file.is_file():
        raise InputError(f"{run}: no {RESULT} (a `milepost horizon` output folder?)")
    data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    return data


def _outcomes(result: dict[str, Any]) -> list[TaskOutcomes]:
    return [
        TaskOutcomes(t["distance"], t["successes"], t["trials"], env=t["env"], task_id=t["task_id"])
        for t in result["tasks"]
    ]


def compare_horizons(
    runs: Sequence[str | Path], out: str | Path, labels: Sequence[str] | None = None, *, boot: int = 1000
) -> str:
    """One plot with every run's fitted curve and band, a table of horizons, and for each pair whether the 50%
    horizons differ: their intervals do not overlap, and the paired bootstrap interval of their ratio (the same
    tasks resampled for both) excludes 1. Runs of different suites (name, version or hash) are refused."""
    if len(runs) < 2:
        raise InputError("horizon compare: give at least two run folders")
    results = [_load(r) for r in runs]
    names = (
        list(labels) if labels else [f"{r['meta'].get('policy', '')} ({r['meta'].get('agent', '')})" for r in results]
    )
    if len(names) != len(results):
        raise InputError(f"--labels: {len(names)} labels for {len(results)} runs")
    first = results[0]["suite"]
    for run, res in zip(runs, results, strict=True):
        s = res["suite"]
        if (s["name"], s["version"], s["hash"]) != (first["name"], first["version"], first["hash"]):
            raise InputError(
                f"{run}: suite {s['name']} v{s['version']} ({s['hash'][:12]}) is not {first['name']} "
                f"v{first['version']} ({first['hash'][:12]}): horizons on different suites are not comparable"
            )
    lines = [
        "# Horizon comparison",
        "",
        f"Suite {first['name']} v{first['version']}, hash `{first['hash'][:16]}`; logistic horizons in atomic steps "
        f"with their {round(100 * results[0]['meta']['confidence'])}% intervals.",
        "",
        "| run | 50% horizon | 80% horizon | 50% horizon (q^d) | success |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, res in zip(names, results, strict=True):
        fit = res["fits"][ALL]
        rate = 100 * fit["successes"] / max(fit["episodes"], 1)
        lines.append(
            f"| {name} | {_horizon_cell(fit, 'logistic', 'h50')} | {_horizon_cell(fit, 'logistic', 'h80')} "
            f"| {_horizon_cell(fit, 'reliability', 'h50')} | {rate:.1f}% |"
        )
    lines += [
        "",
        "| pair | 50% intervals overlap | ratio of 50% horizons [paired interval] | differ |",
        "|---|---|---|---|",
    ]
    pairs = []
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            a = results[i]["fits"][ALL]["logistic"]["intervals"]["h50"]
            b = results[j]["fits"][ALL]["logistic"]["intervals"]["h50"]
            lo_a, hi_a = (x if x is not None else math.inf for x in a)
            lo_b, hi_b = (x if x is not None else math.inf for x in b)
            overlap = not (hi_a < lo_b or hi_b < lo_a)
            paired = paired_difference(_outcomes(results[i]), _outcomes(results[j]), boot=boot)
            if paired.get("ratio_interval") is None:
                # A horizon at zero or infinity has no ratio; intervals that do not even overlap still differ.
                ratio = "undefined (a horizon below or beyond the suite)"
                differs = "unknown" if overlap else "yes (intervals apart)"
            else:
                lo, hi = paired["ratio_interval"]
                ratio = f"{_ratio(paired['ratio'])} [{_ratio(lo)}, {_ratio(hi)}]"
                differs = "yes" if paired["differs"] else "no"
            pairs.append({"a": names[i], "b": names[j], "overlap": overlap, **paired})
            lines.append(f"| {names[i]} vs {names[j]} | {'yes' if overlap else 'no'} | {ratio} | {differs} |")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plotted = True
    try:
        _plot_compare(out / COMPARE_PLOT, names, results)
    except ImportError as exc:
        log.warning("%s: plot not written (%s)", out, exc)
        plotted = False
    if plotted:
        lines += ["", f"![horizons]({COMPARE_PLOT})"]
    text = "\n".join(lines) + "\n"
    atomic_write_text(out / COMPARE_REPORT, text)
    atomic_write_json(out / "horizon_compare.json", {"suite": first, "runs": names, "pairs": pairs})
    return text


def _ratio(x: float) -> str:
    """A ratio of horizons; 0 and inf where one side of a resample was unbounded."""
    return "0" if x < 1e-3 else "inf" if x > 1e3 else f"{x:.2f}"


def _plot_compare(path: Path, names: Sequence[str], results: Sequence[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6))
    for i, (name, res) in enumerate(zip(names, results, strict=True)):
        fit = res["fits"][ALL]
        grid = np.array(fit["band"]["d"], dtype=float)
        lo = np.array([x if x is not None else np.nan for x in fit["band"]["lo"]], dtype=float)
        hi = np.array([x if x is not None else np.nan for x in fit["band"]["hi"]], dtype=float)
        a, b = fit["logistic"]["a"], fit["logistic"]["b"]
        ax.fill_between(grid, lo, hi, color=f"C{i}", alpha=0.15)
        h = fit["logistic"]["horizons"]["h50"]
        label = f"{name}: 50% horizon {_fmt(h)}"
        ax.plot(grid, 1 / (1 + np.exp(-(a + b * np.log(grid)))), color=f"C{i}", label=label)
        if h is not None and h <= grid[-1]:
            ax.axvline(h, color=f"C{i}", ls="--", lw=1)
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("goal distance d (atomic steps, log scale)")
    ax.set_ylabel("fitted success")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("horizon comparison (logistic fits with bootstrap bands)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
