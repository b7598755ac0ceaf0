"""Helpers shared by the benchmarks: single-core pinning, best-of-N rates, writing an experiment's results."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from milepost.io import atomic_write_text

Run = Callable[[], tuple[int, float]]  # returns (items, seconds)
PlotFn = Callable[[dict[str, Any], Path], None]  # draws a result into a PNG path


def pin_one_core() -> str:
    """Pin this process to one CPU so that figures are single-core ones."""
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"cpu {cpu}"
    return "not pinned (no sched_setaffinity)"


def best_rate(run: Run, repeats: int) -> float:
    """The best items/second over ``repeats`` runs."""
    best = 0.0
    for _ in range(repeats):
        items, seconds = run()
        best = max(best, items / max(seconds, 1e-9))
    return best


def best_rates(runs: Mapping[str, Run | None], repeats: int) -> dict[str, float | None]:
    """Best items/second of each named run (None where a peer is unavailable), run in turn within each repeat
    so that load drift on a shared machine hits every configuration alike."""
    best: dict[str, float | None] = {name: (0.0 if run else None) for name, run in runs.items()}
    for _ in range(repeats):
        for name, run in runs.items():
            if run is not None:
                items, seconds = run()
                best[name] = max(best[name] or 0.0, items / max(seconds, 1e-9))
    return best


def write_experiment(
    out: Path, stem: str, result: dict[str, Any], render: Callable[[dict[str, Any]], str], plot: PlotFn
) -> str:
    """``stem.json``, ``stem.png`` and ``stem.md`` under ``out`` (each written atomically); returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{stem}.json", json.dumps(result, indent=1) + "\n")
    plot(result, out / f"{stem}.png")
    text = render(result)
    atomic_write_text(out / f"{stem}.md", text)
    return text
