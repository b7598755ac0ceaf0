"""The level table: every environment's levels as named ranges of a goal-distance measure.

Sudoku levels range over empty cells (the atomic goal distance). 9x9 uses the paper's L1-L7 (11-15 ... 41-45
empties); the small boards have their own S-levels, bounded by how many empties a unique puzzle can have.
Rush Hour levels range over Fogleman's ``min_moves`` (slides of any length) and are written ``4-6``.
"""

from __future__ import annotations

from dataclasses import dataclass

from milepost.errors import InputError


@dataclass(frozen=True)
class Level:
    """A named inclusive range ``[lo, hi]`` of ``measure``."""

    name: str
    lo: int
    hi: int
    measure: str  # "empty_cells" | "min_moves" | "goal_distance"

    def contains(self, value: int) -> bool:
        return self.lo <= value <= self.hi


def _sudoku(prefix: str, ranges: list[tuple[int, int]]) -> tuple[Level, ...]:
    return tuple(Level(f"{prefix}{i}", lo, hi, "empty_cells") for i, (lo, hi) in enumerate(ranges, 1))


def _rush(lo: int, hi: int, width: int) -> tuple[Level, ...]:
    return tuple(Level(f"{a}-{a + width - 1}", a, a + width - 1, "min_moves") for a in range(lo, hi + 1, width))


def _webshop() -> tuple[Level, ...]:
    return tuple(Level(f"{a}-{a + 2}", a, a + 2, "goal_distance") for a in range(3, 48, 3))


# One table for the whole project. Keys: (env, size).
LEVELS: dict[tuple[str, int], tuple[Level, ...]] = {
    ("sudoku", 9): _sudoku("L", [(11 + 5 * i, 15 + 5 * i) for i in range(7)]),
    # 6x6: 36 cells; a unique puzzle needs at least 8 givens, so at most 28 empties.
    ("sudoku", 6): _sudoku("S", [(5 + 4 * i, 8 + 4 * i) for i in range(6)]),
    # 4x4: 16 cells; a unique puzzle needs at least 4 givens, so at most 12 empties.
    ("sudoku", 4): _sudoku("S", [(3 + 2 * i, 4 + 2 * i) for i in range(5)]),
    # The paper's six ranges are 4-6 ... 19-21; the table runs on to Fogleman's maximum of 60 moves.
    ("rushhour", 6): _rush(1, 60, 3),
    # Web shop: size = items per order; ranges of the goal distance (actions to a successful purchase).
    **{("webshop", k): _webshop() for k in range(1, 5)},
}

DEFAULT_LEVELS: dict[tuple[str, int], str] = {
    ("sudoku", 9): "L1-L7",
    ("sudoku", 6): "S1-S6",
    ("sudoku", 4): "S1-S5",
    ("rushhour", 6): "4-6,7-9,10-12,13-15,16-18,19-21",
    ("webshop", 1): "3-5",
    ("webshop", 2): "6-8,9-11",
    ("webshop", 3): "9-11,12-14,15-17",
    ("webshop", 4): "12-14,15-17,18-20",
}


SIZE_MEANING: dict[str, str] = {"sudoku": "board side", "rushhour": "board side", "webshop": "items per order"}
"""What ``size`` (the second key of ``LEVELS``, an environment's ``size=`` argument) counts in each environment."""


def sizes_of(env: str) -> list[int]:
    """The sizes ``LEVELS`` has levels for, ascending (empty for an environment it does not know)."""
    return sorted(s for e, s in LEVELS if e == env)


def levels_for(env: str, size: int) -> tuple[Level, ...]:
    """All levels of an environment at a board size."""
    try:
        return LEVELS[(env, size)]
    except KeyError:
        sizes = sizes_of(env)
        if not sizes:
            known = ", ".join(sorted({e for e, _ in LEVELS}))
            raise InputError(f"unknown environment {env!r} (known: {known})") from None
        raise InputError(f"{env}: unsupported size {size} (supported: {', '.join(map(str, sizes))})") from None


def get_level(env: str, size: int, name: str) -> Level:
    for level in levels_for(env, size):
        if level.name == name:
            return level
    known = ", ".join(lv.name for lv in levels_for(env, size))
    raise InputError(f"{env} {size}x{size}: unknown level {name!r} (known: {known})")


def parse_levels(spec: str, env: str, size: int) -> list[Level]:
    """Parse a ``--levels`` value: a comma list of level names and ``L1-L7`` style spans.

    Rush Hour names themselves contain a dash (``4-6``), so a span is recognised only when both ends are
    level names of the table (``L2-L5``, ``S1-S3``). Order follows the table; duplicates are dropped.
    """
    table = levels_for(env, size)
    names = [lv.name for lv in table]
    chosen: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise InputError(f"--levels {spec!r}: empty level name")
        if part in names:
            chosen.add(part)
            continue
        first, sep, last = part.partition("-")
        if sep and first in names and last in names:
            i, j = names.index(first), names.index(last)
            if i > j:
                raise InputError(f"--levels: span {part!r} runs backwards")
            chosen.update(names[i : j + 1])
            continue
        raise InputError(f"{env} {size}x{size}: unknown level {part!r} (known: {', '.join(names)})")
    return [lv for lv in table if lv.name in chosen]


def level_of(env: str, size: int, value: int) -> Level | None:
    """The level whose range holds ``value`` (empty cells or min_moves), or None."""
    for level in levels_for(env, size):
        if level.contains(value):
            return level
    return None
