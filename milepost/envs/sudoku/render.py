"""Observation renderers for Sudoku: the grid text (default), one character per cell, candidate hints."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from milepost.envs.sudoku.state import SudokuState

RENDERERS = ("grid", "cells", "candidates", "hints")


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


def candidate_lines(state: SudokuState) -> list[str]:
    """The legal digits of every empty cell, one line each (``r1c3: 1 2 4``; ``-`` when none is left)."""
    n = state.n
    lines = []
    for cell in range(n * n):
        if not state.cells[cell]:
            mask = state.candidates(cell)
            digits = " ".join(str(d) for d in range(1, n + 1) if mask >> (d - 1) & 1)
            lines.append(f"r{cell // n + 1}c{cell % n + 1}: {digits or '-'}")
    return lines


def render_candidates(state: SudokuState) -> str:
    """The grid followed by the candidate hints."""
    return "\n".join([render_grid(state), "Candidates:", *candidate_lines(state)])


def render_hints(state: SudokuState) -> str:
    """The compact board (one character per cell) followed by the candidate hints: the tiny-model view, where
    a single step is learnable (read a cell with one candidate, write it) and horizon stays the variable."""
    return "\n".join([render_cells(state), "Candidates:", *candidate_lines(state)])


def render(state: SudokuState, style: str) -> str:
    if style == "grid":
        return render_grid(state)
    if style == "cells":
        return render_cells(state)
    if style == "candidates":
        return render_candidates(state)
    if style == "hints":
        return render_hints(state)
    raise ValueError(f"unknown sudoku renderer {style!r} (known: {', '.join(RENDERERS)})")
