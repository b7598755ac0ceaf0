"""Observation renderers for Sudoku: the grid text (default), one character per cell, candidate hints
(all cells, or only the few with the fewest candidates)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from milepost.envs.sudoku.state import SudokuState

RENDERERS = ("grid", "cells", "candidates", "hints", "hints_tail")
TAIL_CELLS = 8
"""How many cells the ``hints_tail`` view lists."""


def render_grid(state: SudokuState) -> str:
    """The grid a person reads: row labels r1.., column labels c1.., box separators, ``.`` for empty.

    9x9 example (first lines)::

            c1 c2 c3   c4 c5 c6   c7 c8 c9
        r1   5  3  . |  .  7  . |  .  .  .
    """
    geo = state.geo
    n, br, bc = geo.n, geo.box_rows, geo.box_cols
    header_parts = []
    for c in range(n):
        if c and c % bc == 0:
            header_parts.append("  ")
        header_parts.append(f"c{c + 1}".rjust(3))
    lines = ["   " + "".join(header_parts)]
    cells = state.cells
    rule = ""
    for r in range(n):
        if r and r % br == 0:
            lines.append(rule)
        parts = []
        for c in range(n):
            if c and c % bc == 0:
                parts.append(" |")
            d = cells[r * n + c]
            parts.append(f"  {d}" if d else "  .")
        line = "".join(parts)
        rule = "   " + "".join("+" if ch == "|" else "-" for ch in line)
        lines.append(f"r{r + 1} " + line)
    return "\n".join(lines)


def render_cells(state: SudokuState) -> str:
    """One character per cell, one line per row, ``.`` for empty: the compact form for small models."""
    n = state.n
    cells = state.cells
    return "\n".join("".join(str(d) if d else "." for d in cells[r * n : (r + 1) * n]) for r in range(n))


def candidate_lines(state: SudokuState, *, fewest_first: bool = False) -> list[str]:
    """The legal digits of every empty cell, one line each (``r1c3: 1 2 4``; ``-`` when none is left).

    Lines run in cell order, or with ``fewest_first`` by number of candidates (ties in cell order).
    """
    n = state.n
    rows = []
    for cell in range(n * n):
        if not state.cells[cell]:
            mask = state.candidates(cell)
            digits = " ".join(str(d) for d in range(1, n + 1) if mask >> (d - 1) & 1)
            rows.append((mask.bit_count() if fewest_first else 0, f"r{cell // n + 1}c{cell % n + 1}: {digits or '-'}"))
    if fewest_first:
        rows.sort(key=lambda r: r[0])  # stable: ties keep cell order
    return [line for _, line in rows]


def render_candidates(state: SudokuState) -> str:
    """The grid followed by the candidate hints."""
    return "\n".join([render_grid(state), "Candidates:", *candidate_lines(state)])


def render_hints(state: SudokuState) -> str:
    """The compact board (one character per cell) followed by the candidate hints, fewest candidates first:
    the tiny-model view (CPU profile), where one step is learnable (a forced cell heads the list) and the
    number of steps, with its compounding errors, stays the variable under study."""
    return "\n".join([render_cells(state), "Candidates:", *candidate_lines(state, fewest_first=True)])


def render_hints_tail(state: SudokuState, k: int = TAIL_CELLS) -> str:
    """The compact board, then only the ``k`` empty cells with the fewest candidates, fewest *last*.

    The 9x9 tiny-model view: with every empty cell listed (``hints``) a 9x9 prompt runs to 600 tokens and the
    forced cell sits a different distance from the answer in every prompt, which a 1M-parameter model trained on
    a CPU did not learn to find (benchmarks/results/technique.md, first run). Here the prompt length is nearly
    fixed and a forced cell, when one exists, is the line right before the answer. Ties keep cell order, the
    cut keeps the ``k`` fewest; the header says how many empty cells were left out.
    """
    lines = candidate_lines(state, fewest_first=True)
    shown = lines[:k]
    header = f"Candidates ({len(shown)} of {len(lines)} empty cells, fewest last):"
    return "\n".join([render_cells(state), header, *reversed(shown)])


def render(state: SudokuState, style: str) -> str:
    if style == "grid":
        return render_grid(state)
    if style == "cells":
        return render_cells(state)
    if style == "candidates":
        return render_candidates(state)
    if style == "hints":
        return render_hints(state)
    if style == "hints_tail":
        return render_hints_tail(state)
    raise ValueError(f"unknown sudoku renderer {style!r} (known: {', '.join(RENDERERS)})")
