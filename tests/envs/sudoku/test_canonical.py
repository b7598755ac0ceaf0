"""The canonical form: invariant under every symmetry, exact minlex (checked by brute force on small boards),
and different for puzzles that are not equivalent."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.envs.sudoku.canonical import canonical_form
from milepost.envs.sudoku.generator import generate_easy, random_solution
from milepost.envs.sudoku.grid import conflicts, geometry, parse_grid
from milepost.envs.sudoku.solver import count_solutions
from milepost.errors import InputError


def grouped_orders(n: int, size: int) -> list[list[int]]:
    """Every order of n lines that keeps blocks of ``size`` together (bands or stacks)."""
    blocks = [list(range(b * size, (b + 1) * size)) for b in range(n // size)]
    orders = []
    for block_order in itertools.permutations(blocks):
        for inner in itertools.product(*(itertools.permutations(block) for block in block_order)):
            orders.append([line for block in inner for line in block])
    return orders


def brute_minlex(puzzle: list[int]) -> str:
    """The definition, enumerated: every transform, digits relabelled by first appearance, least string."""
    n = int(len(puzzle) ** 0.5)
    geo = geometry(n)
    rows = [puzzle[r * n : (r + 1) * n] for r in range(n)]
    grids = [rows] + ([[list(c) for c in zip(*rows)]] if geo.box_rows == geo.box_cols else [])
    best: list[int] | None = None
    for grid in grids:
        for row_order in grouped_orders(n, geo.box_rows):
            for col_order in grouped_orders(n, geo.box_cols):
                labels: dict[int, int] = {}
                out = []
                for r in row_order:
                    for c in col_order:
                        v = grid[r][c]
                        if v and v not in labels:
                            labels[v] = len(labels) + 1
                        out.append(labels[v] if v else 0)
                if best is None or out < best:
                    best = out
    assert best is not None
    return "".join(map(str, best))


def transform(puzzle: list[int], rng: random.Random) -> list[int]:
    """A random symmetry of the board applied to ``puzzle``."""
    n = int(len(puzzle) ** 0.5)
    geo = geometry(n)
    row_order = rng.choice(grouped_orders(n, geo.box_rows))
    col_order = rng.choice(grouped_orders(n, geo.box_cols))
    digits = list(range(1, n + 1))
    rng.shuffle(digits)
    rows = [puzzle[r * n : (r + 1) * n] for r in range(n)]
    if geo.box_rows == geo.box_cols and rng.random() < 0.5:
        rows = [list(c) for c in zip(*rows)]
    return [digits[rows[r][c] - 1] if rows[r][c] else 0 for r in row_order for c in col_order]


def random_puzzle(n: int, rng: random.Random, share: float) -> list[int]:
    puzzle = random_solution(n, rng)
    for cell in rng.sample(range(n * n), int(share * n * n)):
        puzzle[cell] = 0
    return puzzle


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([4, 6, 9]), st.integers(0, 2**32 - 1), st.floats(0.0, 0.8))
def test_invariant_under_symmetries(n: int, seed: int, share: float) -> None:
    rng = random.Random(seed)
    # Nearly full 9x9 grids are the slow case (hundreds of tied column orders); one test below covers them.
    puzzle = random_puzzle(n, rng, max(share, 0.12) if n == 9 else share)
    form = canonical_form(puzzle)
    for _ in range(3):
        assert canonical_form(transform(puzzle, rng)) == form


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([4, 6]), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_exact_minlex_on_small_boards(n: int, seed: int, share: float) -> None:
    puzzle = random_puzzle(n, random.Random(seed), share)
    assert canonical_form(puzzle) == brute_minlex(puzzle)


@pytest.mark.parametrize("n", [9])
def test_form_is_an_equivalent_puzzle(n: int) -> None:
    for index in range(10):
        puzzle, _ = generate_easy(n, 30, 5, index)
        form = canonical_form(puzzle)
        grid = parse_grid(form, n)
        assert grid.count(0) == puzzle.count(0)
        assert conflicts(grid, n) is None and count_solutions(grid) == 1
        assert canonical_form(grid) == form  # idempotent


def test_complete_9x9_grid() -> None:
    rng = random.Random(3)
    grid = random_solution(9, rng)
    form = canonical_form(grid)
    assert form.startswith("123456789")
    assert canonical_form(transform(grid, rng)) == form


def test_4x4_grids_fall_into_two_classes() -> None:
    """All 288 complete 4x4 grids; under this group there are exactly two essentially different ones."""
    grids: list[list[int]] = [[]]
    for _ in range(4):  # extend by one row at a time, keeping only grids with no clash so far
        grids = [
            g + list(row)
            for g in grids
            for row in itertools.permutations(range(1, 5))
            if conflicts(g + list(row) + [0] * (12 - len(g)), 4) is None
        ]
    assert len(grids) == 288
    assert len({canonical_form(g) for g in grids}) == 2


def test_different_puzzles_differ() -> None:
    # Same grid, two empty-cell patterns: one keeps the empties in one box, one spreads them out.
    solution = random_solution(9, random.Random(1))
    boxed, spread = list(solution), list(solution)
    for cell in (0, 1, 2):  # r1c1-r1c3: one row, one box
        boxed[cell] = 0
    for cell in (0, 40, 80):  # r1c1, r5c5, r9c9: three rows, columns and boxes
        spread[cell] = 0
    assert canonical_form(boxed) != canonical_form(spread)
    # Puzzles drawn at random are almost never equivalent, and the forms must tell them apart; where two
    # forms collide on 4x4, brute force must agree that they are the same class.
    rng = random.Random(7)
    small = [random_puzzle(4, rng, 0.5) for _ in range(60)]
    by_form: dict[str, str] = {}
    for puzzle in small:
        form = canonical_form(puzzle)
        assert by_form.setdefault(form, brute_minlex(puzzle)) == brute_minlex(puzzle)
    assert len(by_form) > 10
    big = [generate_easy(9, 40, 11, i)[0] for i in range(30)]
    assert len({canonical_form(p) for p in big}) == 30


@pytest.mark.parametrize(("puzzle", "message"), [([0] * 80, "not a 4x4, 6x6 or 9x9"), ([0] * 15 + [5], "digits 0-4")])
def test_bad_input(puzzle: list[int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        canonical_form(puzzle)
