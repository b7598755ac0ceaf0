"""A straightforward constraint-propagation Sudoku solver in the style of Peter Norvig's essay.

Written for the benchmark as the baseline: candidates are a dict of digit strings, ``assign`` /
``eliminate`` propagate naked singles (a cell down to one digit) and hidden singles (a digit with one
place left in a unit), and the search is depth-first on the cell with the fewest candidates, copying the
dict per branch. ``count_solutions`` carries on after the first solution, up to a limit, which is the
uniqueness check a generator needs. 9x9 only, as in the essay.
"""

from __future__ import annotations

DIGITS = "123456789"
ROWS = "ABCDEFGHI"
COLS = DIGITS


def _cross(a: str, b: str) -> list[str]:
    return [x + y for x in a for y in b]


SQUARES = _cross(ROWS, COLS)
UNITLIST = (
    [_cross(ROWS, c) for c in COLS]
    + [_cross(r, COLS) for r in ROWS]
    + [_cross(rs, cs) for rs in ("ABC", "DEF", "GHI") for cs in ("123", "456", "789")]
)
UNITS = {s: [u for u in UNITLIST if s in u] for s in SQUARES}
PEERS: dict[str, set[str]] = {s: {s2 for u in UNITS[s] for s2 in u} - {s} for s in SQUARES}

Values = dict[str, str]


def parse_grid(grid: str) -> Values | None:
    """Candidates after assigning every given, or None when the givens contradict each other."""
    values = dict.fromkeys(SQUARES, DIGITS)
    for s, d in zip(SQUARES, grid):
        if d in DIGITS and not assign(values, s, d):
            return None
    return values


def assign(values: Values, s: str, d: str) -> Values | None:
    """Eliminate every other digit from square ``s``; None on a contradiction."""
    other = values[s].replace(d, "")
    if all(eliminate(values, s, d2) for d2 in other):
        return values
    return None


def eliminate(values: Values, s: str, d: str) -> Values | None:
    """Remove ``d`` from ``values[s]`` and propagate; None on a contradiction."""
    if d not in values[s]:
        return values
    values[s] = values[s].replace(d, "")
    if len(values[s]) == 0:
        return None
    if len(values[s]) == 1:
        d2 = values[s]
        if not all(eliminate(values, s2, d2) for s2 in PEERS[s]):
            return None
    for u in UNITS[s]:
        places = [s2 for s2 in u if d in values[s2]]
        if len(places) == 0:
            return None
        if len(places) == 1 and not assign(values, places[0], d):
            return None
    return values


def search(values: Values | None) -> Values | None:
    """Depth-first search for the first solution."""
    if values is None:
        return None
    if all(len(values[s]) == 1 for s in SQUARES):
        return values
    _, s = min((len(values[s]), s) for s in SQUARES if len(values[s]) > 1)
    for d in values[s]:
        found = search(assign(values.copy(), s, d))
        if found is not None:
            return found
    return None


def _count(values: Values | None, limit: int, found: list[Values]) -> None:
    if values is None or len(found) >= limit:
        return
    if all(len(values[s]) == 1 for s in SQUARES):
        found.append(values)
        return
    _, s = min((len(values[s]), s) for s in SQUARES if len(values[s]) > 1)
    for d in values[s]:
        _count(assign(values.copy(), s, d), limit, found)
        if len(found) >= limit:
            return


def solve(grid: str) -> str | None:
    """The first solution of an 81-character puzzle (``0`` or ``.`` empty), or None."""
    values = search(parse_grid(grid))
    return None if values is None else "".join(values[s] for s in SQUARES)


def count_solutions(grid: str, limit: int = 2) -> int:
    """Solutions of ``grid``, counted up to ``limit``."""
    found: list[Values] = []
    _count(parse_grid(grid), limit, found)
    return len(found)
