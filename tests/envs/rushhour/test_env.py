"""The Rush Hour text environment: Gymnasium contract, action modes, penalties, budget, subgoals, oracle."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import milepost.envs  # noqa: F401 - registers the environments
from milepost.envs.rushhour import RushHourEnv, make_task, oracle_move
from milepost.envs.rushhour.rules import parse_move
from milepost.envs.rushhour.state import Move
from milepost.errors import InputError
from milepost.types import Task

# Boards of Fogleman's database (tests/data/rushhour/rush_sample.txt): 7 moves / 12 steps, 20 / 32.
#    1 2 3 4 5 6
# 1  . B B B . H
# 2  . . . G . H
# 3  A A . G . H  <- exit
# 4  . . . C C C
# 5  . D D D . .
# 6  . E E E F F
BOARD7 = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"
BOARD20 = "BBBCCJDDHoIJAAHoIoGoHooxGFFooooooooo"


@pytest.fixture(scope="module")
def task7() -> Task:
    return make_task(BOARD7, level="7-9", index=3)


def test_check_env_passes_through_gymnasium_make() -> None:
    env = gymnasium.make("milepost/RushHour-v0")
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["goal_distance"] == info["remaining_distance"] > 0
    assert 4 <= env.unwrapped.task.meta["min_moves"] <= 6  # default level 4-6


def test_seeded_rollouts_match() -> None:
    def rollout(seed: int) -> list[tuple[str, float, bool, bool]]:
        env = RushHourEnv(level="4-6")
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        out = [(obs, 0.0, False, False)]
        for i in range(12):
            move = oracle_move(env.rules)  # type: ignore[arg-type]
            action = move.text() if i % 3 and move else env.action_space.sample()
            obs, reward, term, trunc, _ = env.step(action)
            out.append((obs, reward, term, trunc))
            if term or trunc:
                break
        return out

    assert rollout(11) == rollout(11)
    assert rollout(11) != rollout(12)


@pytest.mark.parametrize(("mode", "metric"), [("atomic", "min_steps"), ("slide", "min_moves")])
def test_oracle_solves_in_exactly_the_optimal_number_of_turns(task7: Task, mode: str, metric: str) -> None:
    env = RushHourEnv(action_mode=mode, reward_weights={"milestone": 1.0})
    _, info = env.reset(options={"task": task7})
    assert info["goal_distance"] == task7.meta["min_steps"] == 12
    assert info["remaining_distance"] == task7.meta[metric]
    done, total = False, 0.0
    while not done:
        move = oracle_move(env.rules)  # type: ignore[arg-type]
        assert move is not None and (mode == "slide" or move.cells == 1)
        before = info["remaining_distance"]
        _, reward, terminated, truncated, info = env.step(f"<think>..</think> REASON: optimal. ACTION: {move.text()}")
        assert info["remaining_distance"] == before - 1 and info["correct_actions"] == 1
        total += reward
        done = terminated or truncated
    assert terminated and not truncated and info["termination_reason"] == "solved"
    assert info["steps"] == task7.meta[metric]
    assert info["subgoals_completed"] == list(range(info["num_subgoals"]))
    assert total == pytest.approx(1.0 + info["num_subgoals"])


def test_oracle_fits_or_misses_the_budget_like_the_manifest_says() -> None:
    task = make_task(BOARD20)
    assert task.meta["min_moves"] == 20 and task.meta["min_steps"] == 32
    assert task.level == "19-21" and not task.meta["fits_atomic_budget"] and task.meta["fits_slide_budget"]
    env = RushHourEnv(action_mode="atomic")
    _, info = env.reset(options={"task": task})
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(oracle_move(env.rules).text())  # type: ignore[arg-type, union-attr]
    assert truncated and not terminated and info["termination_reason"] == "budget_exhausted"
    assert info["steps"] == 30 and info["remaining_distance"] == 2
    env = RushHourEnv(action_mode="slide")  # 20 slides fit the macro budget of 20 turns exactly
    env.reset(options={"task": task})
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(oracle_move(env.rules).text())  # type: ignore[arg-type, union-attr]
    assert terminated and not truncated and info["steps"] == 20


def test_format_and_invalid_actions_are_penalties_that_change_nothing(task7: Task) -> None:
    env = RushHourEnv()
    _, info0 = env.reset(options={"task": task7})
    board0 = env.state.board()
    cases = {
        "go left": ("format", "cannot parse"),
        "move(A, sideways)": ("format", "cannot parse"),
        "move(1, up)": ("format", "cannot parse"),
        "move(A, right); move(A, left)": ("format", "exactly one per step"),
        "": ("format", "no action given"),
        "move(Q, up)": ("valid", "there is no vehicle Q"),
        "move(A, up)": ("valid", "A is horizontal: it moves left/right only"),
        "move(E, right)": ("valid", "blocked by vehicle F at row 6, column 5"),
        "move(B, left, 2)": ("valid", "atomic mode moves one cell per action"),
        "move(G, down)": ("valid", "blocked by vehicle C at row 4, column 4"),
        "move(A, left)": ("valid", "the edge of the board"),
        "move(H, down, 1)": ("valid", "blocked by vehicle C at row 4, column 6"),
    }
    for answer, (term, text) in cases.items():
        obs, reward, terminated, truncated, info = env.step(answer)
        assert info["reward_terms"][term] == -1.0, answer
        assert text in (info["error"] or ""), (answer, info["error"])
        assert reward == pytest.approx(-0.1) and not terminated
        assert env.state.board() == board0 and info["remaining_distance"] == info0["remaining_distance"]
        assert info["actions"] == [] and text in obs
    assert not truncated
    _, _, _, _, info = env.step("move(b, LEFT).")  # case and a trailing period are forgiven
    assert info["actions"] == ["move(B, left)"] and info["error"] is None and info["correct_actions"] == 1


def test_slide_mode_takes_n_cells_and_counts_moves(task7: Task) -> None:
    env = RushHourEnv(action_mode="slide")
    assert env.max_steps == 20
    _, info = env.reset(options={"task": task7})
    assert info["remaining_distance"] == 7  # moves, in slide mode
    _, _, _, _, info = env.step("move(B, right)")  # N defaults to 1
    assert info["actions"] == ["move(B, right)"] and info["error"] is None
    assert info["remaining_distance"] == 7 and info["correct_actions"] == 0  # legal, but no closer
    _, _, _, _, info = env.step("move(C, left, 3)")
    assert info["actions"] == ["move(C, left, 3)"] and info["remaining_distance"] == 6 and info["correct_actions"] == 1
    _, _, _, _, info = env.step("move(G, down, 2)")
    assert info["error"] == "G cannot move down 2 cells: blocked by vehicle D at row 5, column 4"
    _, _, _, _, info = env.step("move(C, right, 3)")
    assert info["actions"] == ["move(C, right, 3)"]
    _, _, _, _, info = env.step("move(C, right, 9)")
    assert info["reward_terms"]["valid"] == -1.0 and "cannot move right 9 cells: the edge" in info["error"]
    _, _, _, _, info = env.step("move(C, right, 0)")
    assert "at least 1 cell" in info["error"]


def test_flexible_mode_applies_in_order_and_stops_at_the_first_invalid(task7: Task) -> None:
    env = RushHourEnv(action_mode="flexible", macro_k=3)
    assert env.max_steps == 20
    _, info = env.reset(options={"task": task7})
    _, _, _, _, info = env.step("ACTION: move(C, left); move(C, left); move(Q, up)")
    assert info["actions"] == ["move(C, left)", "move(C, left)"] and info["reward_terms"]["valid"] == -1.0
    assert "no vehicle Q" in info["error"] and env.state.board()[19:22] == "CCC"
    _, _, _, _, info = env.step("move(C, right); move(C, right); move(C, right); move(C, right)")
    assert info["reward_terms"]["format"] == -1.0 and "at most 3" in info["error"] and info["actions"] == []
    env = RushHourEnv(action_mode="fixed", macro_n=2)
    env.reset(options={"task": task7})
    _, _, _, _, info = env.step("move(C, left)")
    assert info["reward_terms"]["format"] == -1.0 and "exactly 2" in info["error"]
    _, _, _, _, info = env.step("move(C, left); move(C, left, 2)")
    assert info["actions"] == ["move(C, left)"] and "one cell per action" in info["error"]


def test_subgoals_follow_the_optimal_solution_and_latch(task7: Task) -> None:
    env = RushHourEnv(reward_weights={"milestone": 1.0})
    env.reset(options={"task": task7})
    goals = env.subgoals
    # G and H block row 3 right of A; the tie-broken step-optimal solution clears G first.
    assert [g.description for g in goals] == [
        "Clear vehicle G out of the exit row (row 3)",
        "Clear vehicle H out of the exit row (row 3)",
        "Drive the red car A to the exit",
    ]
    assert [g.estimated_steps for g in goals] == [6, 5, 1] and goals[-1].preconditions == [0, 1]
    assert all(g.predicate is not None for g in goals)
    for answer in ("move(B, left)", "move(G, up)"):
        _, reward, _, _, info = env.step(answer)
    assert info["new_subgoals"] == [0] and reward == pytest.approx(1.0)
    # G drives back into row 3: the subgoal stays done and pays nothing when G leaves again.
    _, reward, _, _, info = env.step("move(G, down)")
    assert info["subgoals_completed"] == [0] and reward == 0.0 and not goals[0].predicate(env.state)  # type: ignore[misc]
    _, reward, _, _, info = env.step("move(G, up)")
    assert info["new_subgoals"] == [] and info["reward_terms"]["milestone"] == 0.0
    slide = RushHourEnv(action_mode="slide")
    slide.reset(options={"task": task7})
    assert [g.estimated_steps for g in slide.subgoals] == [5, 3, 4]  # the move-optimal solution's segments


def test_bad_tasks_and_settings_are_one_line_errors(task7: Task) -> None:
    env = RushHourEnv()
    bad = Task.from_dict({**task7.to_dict(), "payload": {"board": "oooo"}})
    with pytest.raises(InputError, match="board has 4 characters"):
        env.reset(options={"task": bad})
    unsolvable = Task.from_dict({**task7.to_dict(), "payload": {"board": "ooooooooooooAAoBBooooooooooooooooooo"}})
    with pytest.raises(InputError, match="cannot be solved"):
        env.reset(options={"task": unsolvable})
    with pytest.raises(InputError, match="payload needs a 'board'"):
        env.reset(options={"task": Task.from_dict({**task7.to_dict(), "payload": {}})})
    with pytest.raises(InputError, match="6x6"):
        RushHourEnv(size=9)
    with pytest.raises(InputError, match="unknown level"):
        RushHourEnv(level="4-7")
    with pytest.raises(InputError, match="macro_n"):
        RushHourEnv(action_mode="fixed")


@pytest.mark.parametrize("mode", ["atomic", "slide"])
def test_the_legal_renderer_lists_exactly_the_moves_the_env_accepts(task7: Task, mode: str) -> None:
    """``render: legal`` lists every action the mode accepts and nothing else, on each state of a played episode
    (one-cell moves in atomic mode, slides of every length in slide mode), above the rejection line."""
    import random
    import re

    env = RushHourEnv(action_mode=mode, render="legal")
    obs, _ = env.reset(options={"task": task7})
    rules = env.rules
    rng = random.Random(0)
    candidates = [Move(v, d, n) for v in "ABCDEFGH" for d in ("up", "down", "left", "right") for n in (1, 2, 3, 4)]
    for turn in range(8):
        board, legal_line = obs.split("\nLast answer rejected:")[0].split("\nLegal moves: ")
        assert board == rules.state.render_text()  # type: ignore[attr-defined]
        texts = re.findall(r"move\([^)]*\)", legal_line)
        assert ", ".join(texts) == legal_line
        listed = [parse_move(text) for text in texts]
        accepted = [m for m in candidates if rules.check(m) is None]  # type: ignore[attr-defined]
        assert sorted(map(str, listed)) == sorted(map(str, accepted)) and len(set(listed)) == len(listed)
        assert (mode == "slide") == any(m.cells > 1 for m in accepted)  # type: ignore[union-attr]
        if turn % 3 == 2:  # an illegal answer: the same list, then the rejection line
            obs = env.step("ACTION: move(Z, up)")[0]
            assert obs.startswith(f"{board}\nLegal moves: {legal_line}\nLast answer rejected: ")
        obs = env.step(f"ACTION: {rng.choice(listed).text()}")[0]  # type: ignore[union-attr]
        assert "Last answer rejected" not in obs  # every listed move is played
    with pytest.raises(InputError, match="unknown renderer 'cells' \\(known: grid, legal\\)"):
        RushHourEnv(render="cells")


def test_the_config_takes_the_legal_renderer_for_rush_hour_only() -> None:
    from milepost.config import EnvConfig

    assert (
        RushHourEnv(**EnvConfig(name="rushhour", size=6, render="legal").env_kwargs())
        .reset(seed=1)[0]
        .count("Legal moves: move(")
        == 1
    )
    with pytest.raises(ValueError, match="'legal' is not one of"):
        EnvConfig(name="sudoku", size=4, render="legal")
    with pytest.raises(ValueError, match="'candidates' is not one of grid, legal for rushhour"):
        EnvConfig(name="rushhour", size=6, render="candidates")


def test_parse_move_forms() -> None:
    assert parse_move("move(C, down)") == Move("C", "down", 1)
    assert parse_move("MOVE( c ,Down , 3 )") == Move("C", "down", 3)
    assert parse_move("move(C, down, 1234)") is None
    assert parse_move("move(CC, down)") is None and parse_move("move(C down)") is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80) | st.from_regex(r"move\([A-Za-z0-9 ]{0,3}, ?(up|down|left|right|x)(, ?-?\d{1,4})?\)"))
def test_arbitrary_text_never_raises_and_errors_change_nothing(task7: Task, text: str) -> None:
    for mode in ("atomic", "slide", "flexible"):
        env = RushHourEnv(action_mode=mode)
        env.reset(options={"task": task7})
        before = env.state.board()
        obs, reward, _, truncated, info = env.step(text)
        assert env.observation_space.contains(obs)
        if info["error"] is not None and not info["actions"]:
            assert env.state.board() == before
        assert isinstance(reward, float) and not truncated


def test_a_non_text_answer_is_no_action_and_a_long_bad_piece_is_quoted_to_60_characters(task7: Task) -> None:
    env = RushHourEnv()
    env.reset(options={"task": task7})
    for answer in (None, 42, b"move(B, left)", ["move(B, left)"]):
        _, _, _, _, info = env.step(answer)  # type: ignore[arg-type]  # a model server may hand back anything
        assert info["error"] == "no action given" and info["reward_terms"]["format"] == -1.0, answer
    piece = "q" * 59 + "XYZ"
    _, _, _, _, info = env.step(f"ACTION: {piece}")
    assert info["error"] == f"cannot parse action {piece[:60]!r}"
    assert env.answer_error(piece) == info["error"]
