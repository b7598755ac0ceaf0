"""The files an analysis script writes for ``--out``: a Markdown report, its JSON and its plot beside it.

Shared by ``experiments.step_accuracy_split``, ``experiments.plan_check`` and ``experiments.sft_seed_compare``: each
reads finished evaluation folders and writes one report whose head names the command that made it and whose end
keeps a hand-written reading (``--reading``), so a rerun does not lose the reading.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_report(
    out: Path,
    *,
    title: str,
    module: str,
    body: str,
    data: Any,
    plot: Callable[[Path], None],
    reading: str | None = None,
    intro: str = "",
    alt: str = "plot",
) -> None:
    """Write ``out`` (Markdown: ``title``, the command line of ``python -m module`` with this process's arguments,
    ``intro``, ``body``, the plot, then the reading file's text), ``out`` as ``.json`` (``data``) and as ``.png``
    (``plot(path)``); the text files atomically."""
    from milepost.io import atomic_write_json, atomic_write_text

    command = shlex.join(["python", "-m", module, *sys.argv[1:]])
    head = f"# {title}\n\nCommand: `{command}`.\n\n{intro}"
    tail = f"\n![{alt}]({out.with_suffix('.png').name})\n"
    if reading:
        tail += "\n" + Path(reading).read_text(encoding="utf-8")
    atomic_write_text(out, head + body + tail)
    atomic_write_json(out.with_suffix(".json"), data)
    plot(out.with_suffix(".png"))


def labelled_json(spec: str, tool: str) -> tuple[str, Any]:
    """``LABEL=PATH`` -> (label, the file's JSON); a one-line error naming ``tool`` for a spec without a label or a
    path, and for a missing or malformed file."""
    import json

    label, sep, path = spec.partition("=")
    if not sep or not label or not path:
        raise SystemExit(f"{tool}: {spec!r}: expected LABEL=PATH")
    try:
        return label, json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{tool}: {path}: {exc}") from None


def pct(x: float | None) -> str:
    """A share as a percentage with one decimal for the reports' tables; ``-`` when it was not measured."""
    return "-" if x is None else f"{100 * x:.1f}"
