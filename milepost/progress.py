"""One progress bar for the whole package: drawn on a terminal, silent in logs and pipes.

A bar redraws itself with carriage returns; written to a file or a pipe (CI logs, ``2>run.log``) that is
noise. ``progress_bar`` is ``tqdm`` with ``disable=None`` (tqdm's own "only when the stream is a terminal")
unless the caller turns progress off altogether.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress_bar(iterable: Iterable[T] | None = None, *, enabled: bool = True, **kwargs: Any) -> tqdm[T]:
    """A ``tqdm`` bar that draws only when ``enabled`` and its stream (stderr by default) is a terminal.

    Args:
        iterable: what to iterate over, as for ``tqdm`` (None for a bar updated by hand).
        enabled: False turns the bar off whatever the stream is (``--no-progress``).
        kwargs: other ``tqdm`` arguments (``total``, ``desc``, ``unit``, ``leave``, ``initial``, ``file``...).
    """
    if "disable" in kwargs:
        raise TypeError("progress_bar: pass enabled=..., not disable=...")
    return tqdm(iterable, disable=None if enabled else True, **kwargs)
