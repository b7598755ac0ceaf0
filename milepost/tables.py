"""Tables: parquet files through pyarrow (the ``hf`` extra), and the cells of every Markdown table a report writes.

Written parquet tables go through a temporary file in the same folder and an atomic rename (as ``milepost.io``
does for text), so a reader never sees half a parquet file.

Markdown tables are written row by row with ``md_row`` (and ``md_rule`` under the head), which escapes each cell:
a label chosen by a user or written by a model (a policy name, a run label, a plan's subgoal) may hold ``|``,
which would split the cell, or ``<script>``, which a Markdown viewer would pass through as HTML.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from milepost.errors import InputError
from milepost.io import atomic_write

HINT = "pip install 'milepost[hf]'"


def pyarrow() -> tuple[ModuleType, ModuleType]:
    """``(pyarrow, pyarrow.parquet)``, or an ``InputError`` saying how to install them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"parquet files need pyarrow ({HINT})") from None
    return pa, pq


def write_parquet(path: str | os.PathLike[str], table: Any) -> None:
    """Write a ``pyarrow.Table`` to ``path`` through a temporary sibling and an atomic rename
    (``milepost.io.atomic_write``: the user's umask, never over a non-regular file)."""
    _, pq = pyarrow()
    atomic_write(path, lambda tmp: pq.write_table(table, str(tmp)))


def read_parquet(path: str | os.PathLike[str], columns: list[str] | None = None) -> Any:
    """The ``pyarrow.Table`` of a parquet file (only ``columns`` when given).

    Raises:
        InputError: a missing file, or one that is not parquet.
    """
    pa, pq = pyarrow()
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{source}: no such file")
    try:
        return pq.read_table(source, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{source}: not a readable parquet file ({reason})") from None


def md_text(value: object) -> str:
    """``value`` as Markdown text that stays text: HTML's ``<``, ``>`` and ``&`` escaped, line breaks as spaces
    (for headings and table cells)."""
    return html.escape(" ".join(str(value).splitlines()), quote=False)


def md_cell(value: object) -> str:
    """``value`` as one Markdown table cell (``md_text`` with ``|`` escaped, so it cannot split the cell)."""
    return md_text(value).replace("|", "\\|")


def md_row(cells: Iterable[object]) -> str:
    """One Markdown table row, every cell escaped (``md_cell``)."""
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def md_rule(columns: int) -> str:
    """The rule under a Markdown table's head row."""
    return "|" + "---|" * columns
