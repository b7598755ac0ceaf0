"""Fogleman's line format: ``MM BOARD36 CLUSTER`` (min moves zero-padded to two digits, board, cluster size).

Every field is validated when read; files are written atomically. Blank lines and lines starting with ``#``
(provenance notes in copied samples) are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from milepost.envs.rushhour.board import parse_board
from milepost.errors import InputError
from milepost.io import atomic_write_text


@dataclass(frozen=True)
class FoglemanRecord:
    """One line of a Fogleman file. ``line`` is its 1-based line number (0 when not read from a file)."""

    min_moves: int
    board: str
    cluster_size: int
    line: int = 0

    def format(self) -> str:
        return f"{self.min_moves:02d} {self.board} {self.cluster_size}"


def parse_line(text: str, where: str = "line") -> FoglemanRecord:
    """Parse one ``MM BOARD CLUSTER`` line.

    Raises:
        InputError: naming ``where`` and the bad field: not three fields, MM not a number of at least two
            digits, a malformed board, a cluster size that is not a positive integer.
    """
    fields = text.split()
    if len(fields) != 3:
        raise InputError(f"{where}: expected 'MM BOARD CLUSTER' (3 fields), got {len(fields)}")
    mm, board, cluster = fields
    if not (mm.isascii() and mm.isdigit()) or len(mm) < 2:
        raise InputError(f"{where}: min moves {mm!r} is not a zero-padded number (e.g. 07)")
    try:
        parse_board(board)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    if not (cluster.isascii() and cluster.isdigit()) or int(cluster) < 1:
        raise InputError(f"{where}: cluster size {cluster!r} is not a positive integer")
    return FoglemanRecord(int(mm), board, int(cluster))


def read_fogleman(path: str | os.PathLike[str]) -> list[FoglemanRecord]:
    """All records of a Fogleman file (blank and ``#`` lines skipped), each with its line number.

    Raises:
        InputError: a missing file, or the first bad line, named as ``FILE:LINE``.
    """
    source = Path(path)
    if source.is_dir():
        raise InputError(f"{source}: a folder, not a file")
    if not source.is_file():
        raise InputError(f"{source}: no such file")
    records = []
    with source.open("rb") as handle:  # bytes, so that a line that is not UTF-8 is named by its number
        for lineno, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{source}:{lineno}: not UTF-8 text (a binary file?)") from None
            if not text.strip() or text.startswith("#"):
                continue
            rec = parse_line(text, f"{source}:{lineno}")
            records.append(FoglemanRecord(rec.min_moves, rec.board, rec.cluster_size, lineno))
    return records


def write_fogleman(path: str | os.PathLike[str], records: Iterable[FoglemanRecord]) -> None:
    """Write records one per line, atomically (a reader never sees a half-written file)."""
    atomic_write_text(path, "".join(rec.format() + "\n" for rec in records))
