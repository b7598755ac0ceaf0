from __future__ import annotations

import pytest

from milepost.envs.levels import DEFAULT_LEVELS, get_level, level_of, levels_for, parse_levels
from milepost.errors import InputError


def test_paper_sudoku_levels() -> None:
    table = levels_for("sudoku", 9)
    assert [(lv.name, lv.lo, lv.hi) for lv in table] == [
        ("L1", 11, 15),
        ("L2", 16, 20),
        ("L3", 21, 25),
        ("L4", 26, 30),
        ("L5", 31, 35),
        ("L6", 36, 40),
        ("L7", 41, 45),
    ]
    assert level_of("sudoku", 9, 23) == get_level("sudoku", 9, "L3")
    assert level_of("sudoku", 9, 46) is None


def test_small_board_levels_stay_within_unique_range() -> None:
    assert max(lv.hi for lv in levels_for("sudoku", 4)) <= 12
    assert max(lv.hi for lv in levels_for("sudoku", 6)) <= 28


def test_rush_hour_levels_cover_the_paper_ranges() -> None:
    names = [lv.name for lv in parse_levels(DEFAULT_LEVELS[("rushhour", 6)], "rushhour", 6)]
    assert names == ["4-6", "7-9", "10-12", "13-15", "16-18", "19-21"]
    assert get_level("rushhour", 6, "10-12").measure == "min_moves"


def test_spans_lists_and_order() -> None:
    assert [lv.name for lv in parse_levels("L5,L1-L3,L2", "sudoku", 9)] == ["L1", "L2", "L3", "L5"]
    assert [lv.name for lv in parse_levels("S2-S3", "sudoku", 4)] == ["S2", "S3"]


@pytest.mark.parametrize(
    ("spec", "env", "size", "message"),
    [
        ("L8", "sudoku", 9, "unknown level 'L8'"),
        ("L3-L1", "sudoku", 9, "runs backwards"),
        ("L1,,L2", "sudoku", 9, "empty level name"),
        ("L1", "sudoku", 5, "unsupported size 5"),
        ("L1", "chess", 8, "unknown environment"),
        ("5-7", "rushhour", 6, "unknown level '5-7'"),
    ],
)
def test_bad_level_specs(spec: str, env: str, size: int, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_levels(spec, env, size)
