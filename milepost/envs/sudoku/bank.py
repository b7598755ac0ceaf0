"""Reading public Sudoku puzzle banks: one puzzle per line, ``#`` comments, optional extra fields.

Covers the formats of the reference sets (tdoku, Norvig, sudoku-exchange): a line holds one board token
(``n*n`` characters, ``0`` or ``.`` for empty), possibly a second board token (the solution), separated by
spaces or commas, and any number of short fields (ids, ratings) that are ignored. A malformed line is an
``InputError`` naming the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from milepost.envs.sudoku.grid import BOX_SHAPES, conflicts, parse_grid
from milepost.errors import InputError

_BOARD_LENGTHS = {n * n: n for n in BOX_SHAPES}
_SEPARATORS = re.compile(r"[\s,;]+")


class BankEntry(NamedTuple):
    """One puzzle of a bank file."""

    puzzle: list[int]
    solution: list[int] | None  # when the file gives one
    line: int  # 1-based line number in the file


def parse_bank_line(text: str, size: int | None = None) -> tuple[list[int], list[int] | None]:
    """The puzzle (and solution, if present) of one bank line.

    Raises:
        InputError: no board token, more than two, a token of the wrong size or alphabet, or a solution that
            is incomplete, breaks a rule or contradicts a given.
    """
    tokens = [t for t in _SEPARATORS.split(text.strip()) if len(t) in _BOARD_LENGTHS]
    if not tokens or len(tokens) > 2:
        raise InputError(f"expected a puzzle of 16, 36 or 81 characters (and optionally its solution), got {text!r}")
    n = size or _BOARD_LENGTHS[len(tokens[0])]
    puzzle = parse_grid(tokens[0], n)
    if len(tokens) == 1:
        return puzzle, None
    solution = parse_grid(tokens[1], n)
    if 0 in solution or conflicts(solution, n):
        raise InputError("the solution is not a complete valid grid")
    if any(p and p != s for p, s in zip(puzzle, solution)):
        raise InputError("the solution contradicts a given")
    return puzzle, solution


def read_bank(path: str | Path, size: int | None = None) -> list[BankEntry]:
    """Every puzzle of a bank file, in file order.

    Args:
        path: the file.
        size: board side every puzzle must have (default: taken from each line's token length).

    Raises:
        InputError: a missing file, or a malformed line (reported as ``file:line: why``).
    """
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{source}: no such file")
    entries: list[BankEntry] = []
    with source.open(encoding="utf-8", errors="replace") as handle:
        for lineno, raw in enumerate(handle, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            try:
                puzzle, solution = parse_bank_line(text, size)
            except InputError as exc:
                raise InputError(f"{source}:{lineno}: {exc}") from None
            entries.append(BankEntry(puzzle, solution, lineno))
    return entries
