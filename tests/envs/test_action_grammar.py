"""The action grammar is ASCII, and every observation stays inside the observation space.

Found by fuzzing: Rush Hour echoed ``move(İ, up)`` and ``move(K, up)`` (Kelvin sign) unescaped into its feedback
(observations outside the Text space) and applied ``move(ı, down)`` as ``move(I, down)``; Sudoku applied
``value(r٣c7, ३)`` as ``value(3, r3c7)``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milepost.envs.actions import action_segment, split_actions
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.rushhour import make_task as rush_task
from milepost.envs.rushhour.rules import parse_move
from milepost.envs.rushhour.state import Move
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku import make_task as sudoku_task
from milepost.envs.sudoku.grid import parse_grid
from milepost.envs.sudoku.rules import parse_fill
from milepost.envs.sudoku.state import Fill
from milepost.types import Task

from .confusables import DOTLESS_I, DOTTED_I, KELVIN, fullwidth, rush_actions, sudoku_actions
from .sudoku.conftest import PUZ4, SOL4

# A board with a vehicle I, so that "ı" folding to "I" would be a legal move:
#    1 2 3 4 5 6
# 1  . B B B . H
# 2  . . . G . H
# 3  A A . G . H  <- exit
# 4  I . . C C C
# 5  I D D D . .
# 6  . E E E F F
BOARD = "oBBBoHoooGoHAAoGoHIooCCCIDDDoooEEEFF"


@pytest.fixture(scope="module")
def rush() -> Task:
    return rush_task(BOARD)


@pytest.fixture(scope="module")
def sudoku() -> Task:
    return sudoku_task(parse_grid(PUZ4), parse_grid(SOL4), level="S4")


@pytest.mark.parametrize(
    "text",
    [
        f"move({DOTTED_I}, up)",
        f"move({KELVIN}, up)",
        f"move({DOTLESS_I}, up)",
        f"move({DOTLESS_I}, down)",
        f"move(B, r{DOTLESS_I}ght)",  # used to raise KeyError: IGNORECASE matched "right", lower() kept the ı
        f"move(B, r{DOTTED_I}ght)",
        f"{fullwidth('move')}(B, left)",
        "move(B, left\u0301)",
        "move(B, left)\u00a0",
        "move(B, left)\x1c",
        "move(B, left, \u0661)",
        "mo\u0307ve(B, left)",
    ],
)
def test_rush_hour_refuses_non_ascii_actions_and_stays_in_the_space(rush: Task, text: str) -> None:
    assert parse_move(text) is None
    env = RushHourEnv(action_mode="slide")
    env.reset(options={"task": rush})
    before = env.state.board()
    obs, _, _, _, info = env.step(text)
    assert info["reward_terms"]["format"] == -1.0 and info["actions"] == [], info
    assert env.state.board() == before
    assert env.observation_space.contains(obs), obs
    assert "cannot parse action" in obs


def test_rush_hour_ascii_actions_still_parse(rush: Task) -> None:
    assert parse_move("move(i, down)") == Move("I", "down") and parse_move("MOVE(k,UP,2).") == Move("K", "up", 2)
    env = RushHourEnv()
    env.reset(options={"task": rush})
    _, _, _, _, info = env.step("action: move(i, down)")
    assert info["actions"] == ["move(I, down)"] and info["error"] is None


@pytest.mark.parametrize(
    "text",
    [
        "value(r\u0663c2, \u0969)",  # value(r٣c2, ३): Arabic-Indic and Devanagari three
        "value(\u0663, r3c2)",
        "value(r3c2, \uff13)",  # fullwidth 3
        "value(r3c2, \U0001d7d1)",  # mathematical bold 3
        f"{fullwidth('value')}(3, r1c1)",
        "value(3, r1\u0441\u0661)",
        "value(1, r1c1)\u3000",
        "val\u0301ue(1, r1c1)",
    ],
)
def test_sudoku_refuses_non_ascii_actions(sudoku: Task, text: str) -> None:
    assert parse_fill(text) is None
    env = SudokuEnv(size=4)
    env.reset(options={"task": sudoku})
    before = list(env.state.cells)
    obs, _, _, _, info = env.step(text)
    assert info["reward_terms"]["format"] == -1.0 and info["actions"] == [], info
    assert env.state.cells == before and env.observation_space.contains(obs)


def test_sudoku_ascii_actions_still_parse() -> None:
    assert parse_fill("value(r3c2, 3)") == Fill(2, 1, 3) == parse_fill("VALUE(3, R3C2).")


def test_the_action_tag_is_found_in_ascii_case_only() -> None:
    # "ß".upper() is "SS": a position found in text.upper() pointed 3 characters too far into the text.
    assert action_segment("ßßß aCtIoN: move(B, left)") == " move(B, left)"
    assert action_segment(f"ACT{DOTTED_I}ON: move(B, left)") == f"ACT{DOTTED_I}ON: move(B, left)"
    assert split_actions("move(B, left)\u00a0; \x1cmove(C, up) ") == ["move(B, left)\u00a0", "\x1cmove(C, up)"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=rush_actions(), mode=st.sampled_from(["atomic", "slide", "flexible"]))
def test_rush_hour_look_alikes_are_format_errors(rush: Task, text: str, mode: str) -> None:
    env = RushHourEnv(action_mode=mode)
    env.reset(options={"task": rush})
    before = env.state.board()
    obs, reward, _, truncated, info = env.step(text)
    assert env.observation_space.contains(obs), obs
    assert isinstance(reward, float) and not truncated
    if not action_segment(text).isascii():
        assert info["reward_terms"]["format"] == -1.0, (text, info)
    if not info["actions"]:
        assert env.state.board() == before
    else:  # what was applied is exactly the listed actions, each of them ASCII grammar
        replay = RushHourEnv(action_mode=mode)
        replay.reset(options={"task": rush})
        for action in info["actions"]:
            replay.state.apply(parse_move(action))  # type: ignore[arg-type]
        assert replay.state.board() == env.state.board()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=sudoku_actions(4), mode=st.sampled_from(["atomic", "flexible"]))
def test_sudoku_look_alikes_are_format_errors(sudoku: Task, text: str, mode: str) -> None:
    env = SudokuEnv(size=4, action_mode=mode, wrong_fill="continue")
    env.reset(options={"task": sudoku})
    before = list(env.state.cells)
    obs, reward, _, _, info = env.step(text)
    assert env.observation_space.contains(obs), obs
    assert isinstance(reward, float)
    if not action_segment(text).isascii():
        assert info["reward_terms"]["format"] == -1.0, (text, info)
    expected = list(before)
    for action in info["actions"]:
        fill = parse_fill(action)
        assert fill is not None
        expected[fill.row * 4 + fill.col] = fill.digit
    assert env.state.cells == expected
