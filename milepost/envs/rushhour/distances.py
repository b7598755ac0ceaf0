"""Optimal distances of Rush Hour boards for checking dataset records, solved once per machine.

Checking a record's ``goal_distance`` means solving its board's cluster: about 30 ms a board at the paper's
levels, seconds for a test split and minutes for a training split of thousands. Each board is solved once,
then its ``(min_moves, min_steps)`` is kept in a cache file keyed by the board (one JSON line per board,
appended). The cache is checked, not trusted: every read re-solves a few of the cached boards it uses, and a
disagreement (a corrupted or edited cache) discards the whole file and solves everything again.

Location: ``$MILEPOST_CACHE_DIR``, else ``$XDG_CACHE_HOME/milepost``, else ``~/.cache/milepost``. A cache that
cannot be read or written only costs time.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path

from milepost.envs.rushhour.board import parse_board
from milepost.envs.rushhour.solver import solve_many

CACHE_NAME = "rushhour-distances-v1.jsonl"
SPOT_CHECKS = 2  # cached boards re-solved on every call that uses the cache

Distances = tuple[int, int] | None  # (min_moves, min_steps), None when the board cannot be solved


def cache_file() -> Path:
    root = os.environ.get("MILEPOST_CACHE_DIR")
    if root:
        return Path(root) / CACHE_NAME
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "milepost" / CACHE_NAME


def board_distances(boards: Sequence[str]) -> dict[str, Distances]:
    """``(min_moves, min_steps)`` of each board (None: unsolvable), from the checked cache or the solver.

    Boards must be well-formed (``parse_board`` accepts them).
    """
    wanted = sorted(set(boards))
    path = cache_file()
    cached = _read(path)
    hits = [b for b in wanted if b in cached]
    if hits:
        # A fresh draw each call, so that repeated loads end up checking every cached board they use.
        sample = random.sample(hits, min(SPOT_CHECKS, len(hits)))
        if any(_solve(sample)[b] != cached[b] for b in sample):
            _discard(path)
            cached, hits = {}, []
    found = {b: cached[b] for b in hits}
    missing = [b for b in wanted if b not in found]
    if missing:
        solved = _solve(missing)
        found.update(solved)
        _append(path, solved)
    return found


def _solve(boards: Sequence[str]) -> dict[str, Distances]:
    clusters = solve_many([parse_board(b) for b in boards])
    out: dict[str, Distances] = {}
    for board, cluster in zip(boards, clusters):
        moves, steps = cluster.min_moves, cluster.min_steps
        out[board] = None if moves is None or steps is None else (int(moves), int(steps))
    return out


def _read(path: Path) -> dict[str, Distances]:
    out: dict[str, Distances] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return out
    for line in lines:
        try:
            board, value = json.loads(line)
        except (ValueError, TypeError):
            continue  # a torn line from an interrupted append: that board is solved again
        if not isinstance(board, str):
            continue
        if value is None:
            out[board] = None
        elif isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
            out[board] = (value[0], value[1])
    return out


def _append(path: Path, solved: dict[str, Distances]) -> None:
    lines = "".join(json.dumps([b, list(d) if d else None]) + "\n" for b, d in solved.items())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(lines)
    except OSError:
        pass  # no cache: the next load solves these boards again


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
