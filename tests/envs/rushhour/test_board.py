"""Boards in Fogleman's format: parsing, relettering, round trips, and one-line errors for malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.envs.rushhour.board import layout_from_pieces, parse_board
from milepost.envs.rushhour.fogleman import FoglemanRecord, parse_line, read_fogleman, write_fogleman
from milepost.envs.rushhour.state import Move, RushHourState
from milepost.errors import InputError

SAMPLE = Path(__file__).parents[2] / "data" / "rushhour" / "rush_sample.txt"
WALLED = "IBBxooIooLDDJAALooJoKEEMFFKooMGGHHHM"  # the README's example: a wall, and no letter C


def test_walls_skip_letters_and_the_observation_reletters_them() -> None:
    layout, positions = parse_board(WALLED)
    assert layout.walls == (3,)
    originals = sorted(v.original for v in layout.vehicles)
    displays = sorted(v.letter for v in layout.vehicles)
    assert "C" not in originals and originals[:3] == ["A", "B", "D"]
    assert displays == [chr(65 + k) for k in range(len(displays))]  # contiguous A, B, C, ...
    # Relettering keeps the order of the original letters.
    by_original = {v.original: v.letter for v in layout.vehicles}
    assert [by_original[o] for o in originals] == displays
    assert layout.board(positions) == WALLED  # the source board round-trips
    shown = "".join(layout.grid(positions))
    assert shown.count("x") == 1 and "M" in WALLED and "L" in shown


def test_every_sample_board_round_trips() -> None:
    for rec in read_fogleman(SAMPLE):
        layout, positions = parse_board(rec.board)
        assert layout.board(positions) == rec.board
        assert RushHourState(layout, positions).board() == rec.board


def test_state_api_moves_and_clones() -> None:
    board = "oooooooooooo" + "AAoBoo" + "oooBoo" + "oooooooooooo"  # B stands in column 4 of rows 3-4
    state = RushHourState.from_board(board)
    assert not state.is_solved()
    assert state.legal_actions() == [Move("A", "right"), Move("B", "up"), Move("B", "down")]
    slides = state.legal_actions(slides=True)
    assert Move("A", "right", 1) in slides and Move("A", "right", 2) not in slides
    assert [m for m in slides if m.vehicle == "B"] == [
        Move("B", "up"),
        Move("B", "up", 2),
        *[Move("B", "down", k) for k in (1, 2)],
    ]
    twin = state.clone()
    state.apply(Move("B", "up", 2))
    state.apply(Move("A", "right", 4))
    assert state.is_solved() and not twin.is_solved()
    assert twin.board() == board
    assert state.key == state.layout.pack(state.positions)
    with pytest.raises(ValueError, match="blocked by vehicle B"):
        twin.apply(Move("A", "right", 2))


def test_render_has_coordinates_the_exit_and_axes() -> None:
    text = RushHourState.from_board(WALLED).render_text()
    lines = text.splitlines()
    assert lines[0].split() == ["1", "2", "3", "4", "5", "6"]
    assert lines[3].startswith("3 ") and lines[3].endswith("<- exit")
    assert "#" in text  # the wall
    assert "left/right: A" in lines[-1] and "up/down:" in lines[-1]


@pytest.mark.parametrize(
    ("board", "message"),
    [
        ("ooo", "board has 3 characters, expected 36"),
        ("o" * 37, "board has 37 characters, expected 36"),
        ("ooooooooooooAAoooooooooooooooooooo.o", "unexpected character '.' at row 6, column 5"),
        ("ooooooooooooAAooooooBooooooooooooooo", "vehicle B has length 1"),
        ("BBBBooooooooAAoooooooooooooooooooooo", "vehicle B has length 4"),
        ("BBoooooBooooAAoooooooooooooooooooooo", "vehicle B is bent"),
        ("BBoBBoooooooAAoooooooooooooooooooooo", "vehicle B appears in two places"),
        ("oooooBBoooooAAoooooooooooooooooooooo", "vehicle B is bent"),  # wraps from one row to the next
        ("ooooooooooooBBoooooooooooooooooooooo", "no primary car 'A'"),
        ("ooooooAoooooAooooooooooooooooooooooo", "primary car A must be horizontal"),
        ("ooooooooooooAAAooooooooooooooooooooo", "primary car A must have length 2"),
        ("AAoooooooooooooooooooooooooooooooooo", "primary car A must be on row 3"),
        (36, "board must be a string"),
    ],
)
def test_malformed_boards_are_rejected_with_a_named_problem(board: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_board(board)
    assert "\n" not in str(info.value)


def test_pieces_that_overlap_are_rejected() -> None:
    primary = (True, 2, 2, 0)
    with pytest.raises(InputError, match="overlaps piece 0 at row 3, column 2"):
        layout_from_pieces([primary, (False, 1, 2, 2)])
    with pytest.raises(InputError, match="overlaps a wall"):
        layout_from_pieces([primary, (True, 0, 2, 0)], walls=[1])
    with pytest.raises(InputError, match="first piece must be the primary car"):
        layout_from_pieces([(False, 0, 2, 0)])
    layout, positions = layout_from_pieces([primary, (False, 4, 3, 0)], walls=[35])
    assert layout.board(positions) == "ooooBoooooBoAAooBoooooooooooooooooox"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("07 ooooooooooooAAoooooooooooooooooooooo", "3 fields"),
        ("7 ooooooooooooAAoooooooooooooooooooooo 5", "not a zero-padded number"),
        ("xx ooooooooooooAAoooooooooooooooooooooo 5", "not a zero-padded number"),
        ("07 ooooooooooooAAooooooooooooooooooooo 5", "board has 35 characters"),
        ("07 ooooooooooooAAoooooooooooooooooooooo 0", "cluster size '0'"),
        ("07 ooooooooooooAAoooooooooooooooooooooo 5x", "cluster size '5x'"),
    ],
)
def test_bad_lines_name_the_field(line: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_line(line, "f.txt:3")


def test_read_names_file_and_line_and_write_round_trips(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("01 ooooooooooooAAoooooooooooooooooooooo 5\n\n02 ooBoooooBoooAABooooooooo 14\n")
    with pytest.raises(InputError, match=r"bad\.txt:3: board has 24 characters"):
        read_fogleman(bad)
    with pytest.raises(InputError, match="no such file"):
        read_fogleman(tmp_path / "missing.txt")
    records = read_fogleman(SAMPLE)
    assert records[0].line == 2  # line 1 is the provenance note
    out = tmp_path / "out" / "copy.txt"
    write_fogleman(out, records)
    assert [r.format() for r in read_fogleman(out)] == [r.format() for r in records]
    assert out.read_text() == "".join(line for line in SAMPLE.read_text().splitlines(True) if line[0] != "#")
    assert list(out.parent.iterdir()) == [out]  # no temporary file left behind
    assert FoglemanRecord(7, "ooooooooooooAAoooooooooooooooooooooo", 5).format().startswith("07 ")
