"""Progress for the whole package: a bar on a terminal, a plain line now and then in logs and pipes.

A bar redraws itself with carriage returns; written to a file or a pipe (CI logs, ``2>run.log``) that is
noise, but silence for minutes is worse (a new user cannot tell a slow job from a hung one). So
``progress_bar`` is ``tqdm`` on a terminal, and elsewhere the same ``tqdm`` meter written as one line at most
every ``log_every`` seconds (none for a bar that ends sooner). ``phase`` names a step that has no count
(computing metrics, loading a model): a spinner on a terminal, one line otherwise.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

LOG_EVERY_S = 30.0
"""Seconds between two lines of a bar that is not on a terminal."""
PHASE_DELAY_S = 3.0
"""Seconds a ``phase`` runs off a terminal before its line is written."""

_LINE = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%), {elapsed} elapsed, about {remaining} left{postfix}"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Lines:
    """A stream for tqdm that turns its carriage-return redraws into whole lines (one per redraw).

    tqdm writes ``\\r`` + meter + padding for each redraw, cursor moves for stacked bars and a bare newline when
    it closes (``tqdm/std.py``: ``status_printer``, ``moveto``, ``close``); only the meters are kept.
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        line = _ANSI.sub("", text).replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class _LineBar(tqdm):
    """tqdm off a terminal: a new postfix or description waits for the next timed line instead of forcing one
    (tqdm's ``set_postfix*`` / ``set_description*`` redraw at once by default)."""

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        super().set_postfix(ordered_dict, refresh=False, **kwargs)

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        super().set_postfix_str(s, refresh=False)

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        super().set_description(desc, refresh=False)

    def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None:
        super().set_description_str(desc, refresh=False)


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def progress_bar(
    iterable: Iterable[T] | None = None, *, enabled: bool = True, log_every: float | None = LOG_EVERY_S, **kwargs: Any
) -> tqdm[T]:
    """A ``tqdm`` bar: drawn on a terminal, else one line every ``log_every`` seconds (stderr by default).

    Args:
        iterable: what to iterate over, as for ``tqdm`` (None for a bar updated by hand).
        enabled: False turns the bar off whatever the stream is (``--no-progress``).
        log_every: off a terminal, seconds between lines (the first comes after as long; a bar that ends
            sooner writes nothing); None keeps it silent there.
        kwargs: other ``tqdm`` arguments (``total``, ``desc``, ``unit``, ``leave``, ``initial``, ``file``...).
    """
    if "disable" in kwargs:
        raise TypeError("progress_bar: pass enabled=..., not disable=...")
    if not enabled:
        return tqdm(iterable, disable=True, **kwargs)
    stream = kwargs.pop("file", None) or sys.stderr
    if _is_terminal(stream):
        return tqdm(iterable, file=stream, **kwargs)
    if log_every is None:
        return tqdm(iterable, disable=True, file=stream, **kwargs)
    # maxinterval caps tqdm's own back-off of redraws (its monitor thread); delay holds back the first line.
    timing: dict[str, Any] = {"mininterval": log_every, "maxinterval": max(log_every, 10.0), "delay": log_every}
    total = kwargs.get("total", len(iterable) if isinstance(iterable, Sized) else None)
    if total is not None and "bar_format" not in kwargs:  # a sentence rather than a drawn bar
        timing["bar_format"] = _LINE
    return _LineBar(iterable, file=_Lines(stream), ascii=True, dynamic_ncols=False, **(timing | kwargs))


@contextmanager
def phase(
    message: str, *, enabled: bool = True, stream: IO[str] | None = None, delay: float | None = None
) -> Iterator[None]:
    """Say what a step without a count does while it runs: a spinner on a terminal, one line otherwise.

    Off a terminal the line is written once the step has run ``delay`` seconds (default ``PHASE_DELAY_S``), so a
    log shows what a long silence is while a quick step, or one that fails at once with a one-line error, adds
    nothing; a step that ran long gets a second line with its time. On a terminal the spinner goes away when the
    step ends.
    """
    out = stream or sys.stderr
    if not enabled:
        yield
        return
    if _is_terminal(out):
        from rich.console import Console

        with Console(file=out).status(message):
            yield
        return
    wait = PHASE_DELAY_S if delay is None else delay
    start = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        out.write(f"{message} ...\n")
        out.flush()
        said.set()

    timer = threading.Timer(wait, say)
    timer.daemon = True
    if wait <= 0:
        say()
    else:
        timer.start()
    try:
        yield
    finally:
        timer.cancel()
    if said.is_set() and time.perf_counter() - start >= 5:
        out.write(f"{message}: done in {time.perf_counter() - start:.0f} s\n")
        out.flush()
