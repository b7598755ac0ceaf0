"""The Sudoku text environment: Gymnasium contract, actions, penalties, subgoals, budget, renderers."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import milepost.envs  # noqa: F401 - registers the environments
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku.rules import oracle_fill, parse_fill
from milepost.envs.sudoku.state import Fill
from milepost.errors import InputError
from milepost.types import Task

from .conftest import PUZ4, PUZ9, SOL4, SOL9


def _cell_text(i: int, digit: int, n: int) -> str:
    return f"value({digit}, r{i // n + 1}c{i % n + 1})"


@pytest.mark.parametrize("size", [4, 6, 9])
def test_check_env_passes_through_gymnasium_make(size: int) -> None:
    env = gymnasium.make("milepost/Sudoku-v0", size=size)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    empties = sum(c == 0 for c in env.unwrapped.state.cells)
    assert info["goal_distance"] == empties > 0  # one atomic action per empty cell
    assert env.observation_space.contains(obs)


def test_module_qualified_id_imports_the_package() -> None:
    env = gymnasium.make("milepost.envs:milepost/Sudoku-v0", size=4)
    assert env.reset(seed=0)[1]["goal_distance"] > 0


def test_seeded_rollouts_match() -> None:
    def rollout(seed: int) -> list[tuple[str, float, bool, bool]]:
        env = SudokuEnv(size=6, level="S2")
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        out = [(obs, 0.0, False, False)]
        for i in range(12):
            state = env.state
            fill = oracle_fill(state)
            action = fill.text() if i % 3 and fill else env.action_space.sample()
            obs, reward, term, trunc, _ = env.step(action)
            out.append((obs, reward, term, trunc))
            if term or trunc:
                break
        return out

    assert rollout(11) == rollout(11)
    assert rollout(11) != rollout(12)


def test_oracle_solves_with_one_milestone_per_box(task9: Task) -> None:
    env = SudokuEnv(reward_weights={"milestone": 1.0}, max_steps=60)
    _, info = env.reset(options={"task": task9})
    assert info["goal_distance"] == PUZ9.count("0") == info["remaining_distance"]
    total, milestones = 0.0, 0
    terminated = truncated = False
    while not (terminated or truncated):
        fill = oracle_fill(env.state)
        assert fill is not None
        _, reward, terminated, truncated, info = env.step(f"<think>easy</think> REASON: forced. ACTION: {fill.text()}")
        total += reward
        milestones += int(info["reward_terms"]["milestone"])
        assert info["correct_actions"] == 1
    assert terminated and not truncated
    assert info["termination_reason"] == "solved" and info["solved"] and info["remaining_distance"] == 0
    assert info["steps"] == task9.goal_distance
    assert milestones == info["num_subgoals"] == 9
    assert total == pytest.approx(1.0 + 9)
    assert "".join(map(str, env.state.cells)) == SOL9


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("value(5, r3c7)", Fill(2, 6, 5)),
        ("value(r3c7, 5)", Fill(2, 6, 5)),
        ("  VALUE( 5 ,R3C7 ). ", Fill(2, 6, 5)),
        ("value(10, r1c1)", Fill(0, 0, 10)),
        ("value(5 r3c7)", None),
        ("value(5, 3,7)", None),
        ("fill r3c7 with 5", None),
        ("value(" + "9" * 5000 + ", r1c1)", None),
    ],
)
def test_parse_fill(text: str, expected: Fill | None) -> None:
    assert parse_fill(text.strip()) == expected


def test_format_and_invalid_penalties_leave_state_unchanged(task4: Task) -> None:
    env = SudokuEnv(size=4)
    env.reset(options={"task": task4})
    before = list(env.state.cells)
    cases = {
        "no action here": ("format", "cannot parse"),
        "": ("format", "no action"),
        "value(1, r1c2); value(4, r2c1)": ("format", "exactly one"),
        "value(2, r1c2)": ("valid", "given cell"),
        "value(2, r1c1)": ("valid", "already in row 1"),
        "value(4, r3c1)": ("valid", "already in row 3"),
        "value(3, r2c4)": ("valid", "already in column 4"),
        "value(1, r4c1)": ("valid", "already in the box of r4c1"),
        "value(9, r1c2)": ("valid", "not in 1-4"),
        "value(2, r5c1)": ("valid", "off the 4x4 board"),
    }
    for text, (term, message) in cases.items():
        _, reward, term_, trunc, info = env.step(text)
        assert info["reward_terms"][term] == -1.0, text
        assert message in (info["error"] or ""), (text, info["error"])
        assert reward == pytest.approx(-0.1)
        assert env.state.cells == before and not term_ and not trunc
        assert info["actions"] == []


def test_filled_cell_cannot_be_rewritten_by_default(task4: Task) -> None:
    env = SudokuEnv(size=4, wrong_fill="continue")
    env.reset(options={"task": task4})
    env.step("value(1, r1c1)")
    _, _, _, _, info = env.step("value(4, r1c1)")
    assert info["reward_terms"]["valid"] == -1.0 and "already filled" in info["error"]


def test_wrong_digit_is_a_dead_end_by_default(task4: Task) -> None:
    env = SudokuEnv(size=4)
    env.reset(options={"task": task4})
    state = env.state
    wrong = next(f for f in state.legal_actions() if f.digit != int(SOL4[f.row * 4 + f.col]))
    _, reward, terminated, truncated, info = env.step(wrong.text())
    assert terminated and not truncated
    assert info["termination_reason"] == "dead_end"
    assert info["correct_actions"] == 0 and info["remaining_distance"] is None
    assert reward == 0.0


def test_continue_with_overwrite_recovers_and_subgoals_latch(task4: Task) -> None:
    env = SudokuEnv(size=4, wrong_fill="continue", allow_overwrite=True, reward_weights={"milestone": 1.0})
    _, info = env.reset(options={"task": task4})
    sol = [int(c) for c in SOL4]
    # Complete box 1 (cells 0, 1, 4, 5): empties there are r1c1 and r2c1.
    env.step("value(1, r1c1)")
    _, reward, *_, info = env.step("value(3, r2c1)")
    assert 0 in info["new_subgoals"] and reward == pytest.approx(1.0)
    # A legal wrong fill elsewhere: play goes on, the distance counts the rewrite.
    state = env.state
    wrong = next(f for f in state.legal_actions() if f.digit != sol[f.row * 4 + f.col])
    _, _, terminated, _, info = env.step(wrong.text())
    assert not terminated and info["remaining_distance"] == state.empty + 1
    # Rewrite it correctly, then finish with a macro-free oracle.
    env.step(f"value({sol[wrong.row * 4 + wrong.col]}, r{wrong.row + 1}c{wrong.col + 1})")
    while not info["solved"]:
        fill = oracle_fill(env.state)
        assert fill is not None
        *_, info = env.step(fill.text())
    assert info["termination_reason"] == "solved"
    assert sorted(info["subgoals_completed"]) == list(range(info["num_subgoals"]))


def test_continue_without_overwrite_runs_to_budget(task4: Task) -> None:
    env = SudokuEnv(size=4, wrong_fill="continue", max_steps=4)
    env.reset(options={"task": task4})
    wrong = next(f for f in env.state.legal_actions() if f.digit != int(SOL4[f.row * 4 + f.col]))
    _, _, terminated, truncated, info = env.step(wrong.text())
    assert not terminated and not truncated and info["remaining_distance"] is None
    for _ in range(3):
        _, _, terminated, truncated, info = env.step("nonsense")
    assert truncated and not terminated and info["termination_reason"] == "budget_exhausted"
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("value(1, r1c1)")


def test_flexible_macro_applies_in_order_and_stops_at_first_invalid(task4: Task) -> None:
    env = SudokuEnv(size=4, action_mode="flexible", macro_k=3)
    env.reset(options={"task": task4})
    _, _, _, _, info = env.step("ACTION: value(1, r1c1); value(r2c1, 3); value(2, r1c2); value(1, r4c4)")
    assert info["reward_terms"]["format"] == -1.0 and "at most 3" in info["error"]
    _, _, _, _, info = env.step("ACTION: value(1, r1c1); value(r2c1, 3); value(2, r1c2)")
    assert info["actions"] == ["value(1, r1c1)", "value(3, r2c1)"]
    assert info["reward_terms"]["valid"] == -1.0 and info["correct_actions"] == 2 and info["n_requested"] == 3
    assert env.state.cells[0] == 1 and env.state.cells[4] == 3


def test_unbounded_and_fixed_macro_modes(task4: Task) -> None:
    sol = [int(c) for c in SOL4]
    empties = [i for i, c in enumerate(PUZ4) if c == "0"]
    everything = "; ".join(_cell_text(i, sol[i], 4) for i in empties)
    env = SudokuEnv(size=4, action_mode="flexible")
    env.reset(options={"task": task4})
    _, _, terminated, _, info = env.step(everything)
    assert terminated and info["solved"] and info["steps"] == 1 and len(info["actions"]) == len(empties)
    fixed = SudokuEnv(size=4, action_mode="fixed", macro_n=2)
    fixed.reset(options={"task": task4})
    _, _, _, _, info = fixed.step(_cell_text(empties[0], sol[empties[0]], 4))
    assert "exactly 2" in info["error"]
    _, _, _, _, info = fixed.step("\n".join(_cell_text(i, sol[i], 4) for i in empties[:2]))
    assert info["correct_actions"] == 2


# Action-shaped answers (fills in both argument orders, near misses out of range, up to three per turn, noise
# between them) mixed with plain text, so that the fuzzing reaches applied, illegal and unparsable actions.
_FILL = st.builds(
    lambda d, r, c, flip: f"value(r{r}c{c}, {d})" if flip else f"value({d}, r{r}c{c})",
    st.integers(1, 4) | st.sampled_from([0, 5]),
    st.integers(1, 4) | st.sampled_from([0, 5]),
    st.integers(1, 4) | st.sampled_from([0, 5]),
    st.booleans(),
)
_ANSWERS = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda pre, acts: f"{pre}ACTION: " + "; ".join(acts),
        st.sampled_from(["", "REASON: it fits ", "<think>x</think> "]),
        st.lists(st.one_of(_FILL, _FILL, st.text(max_size=8)), max_size=3),
    ),
)


def _fuzz_env() -> SudokuEnv:
    env = SudokuEnv(size=4, action_mode="flexible", macro_k=2, wrong_fill="continue")
    env.reset(seed=5)
    return env


@settings(max_examples=300, deadline=None)
@given(text=_ANSWERS)
def test_arbitrary_text_never_raises_and_errors_change_nothing(text: str) -> None:
    env = _fuzz_env()
    before = list(env.state.cells)
    obs, reward, _, _, info = env.step(text)
    assert isinstance(reward, float) and env.observation_space.contains(obs)
    changed = [i for i, (a, b) in enumerate(zip(before, env.state.cells)) if a != b]
    if info["reward_terms"]["format"]:
        # an unparsable answer or too many actions: nothing applied
        assert env.state.cells == before and info["actions"] == [] and info["error"]
    else:
        # each applied action wrote one empty cell; an illegal one stopped the macro with a reason
        assert len(changed) == len(info["actions"]) <= info["n_requested"] <= 2
        assert all(before[i] == 0 for i in changed)
        assert (info["reward_terms"]["valid"] == -1.0) == (info["error"] is not None)
        if info["error"] is not None:
            assert len(info["actions"]) < info["n_requested"]


_FIND = settings(max_examples=5000, phases=[Phase.generate])  # any example will do: no shrinking


def test_fuzz_answers_reach_applied_and_illegal_actions() -> None:
    """The strategy above is not vacuous: it draws answers that apply actions and answers that break a rule."""
    from hypothesis import find

    def outcome(text: str) -> dict:  # type: ignore[type-arg]
        return dict(_fuzz_env().step(text)[4])

    applied = find(_ANSWERS, lambda t: len(outcome(t)["actions"]) >= 1, settings=_FIND)
    assert len(outcome(applied)["actions"]) >= 1
    illegal = find(_ANSWERS, lambda t: outcome(t)["reward_terms"]["valid"] == -1.0, settings=_FIND)
    assert outcome(illegal)["reward_terms"]["valid"] == -1.0


@settings(max_examples=200, deadline=None)
@given(digit=st.integers(-5, 15), row=st.integers(-2, 11), col=st.integers(-2, 11), cell_first=st.booleans())
def test_wellformed_actions_are_applied_or_rejected_cleanly(digit: int, row: int, col: int, cell_first: bool) -> None:
    env = SudokuEnv(size=4, wrong_fill="continue")
    env.reset(seed=1)
    before = list(env.state.cells)
    text = f"value(r{row}c{col}, {digit})" if cell_first else f"value({digit}, r{row}c{col})"
    _, _, _, _, info = env.step(text)
    terms = info["reward_terms"]
    if info["actions"]:
        changed = [i for i in range(16) if env.state.cells[i] != before[i]]
        assert changed == [(row - 1) * 4 + (col - 1)] and env.state.cells[changed[0]] == digit
    else:
        assert env.state.cells == before
        assert terms["valid"] == -1.0 or terms["format"] == -1.0


def test_renderers(task9: Task) -> None:
    grid = SudokuEnv(render="grid").reset(options={"task": task9})[0]
    assert grid.splitlines()[1].startswith("r1   5  3  . |")
    cells = SudokuEnv(render="cells").reset(options={"task": task9})[0]
    assert cells.splitlines() == [PUZ9[i : i + 9].replace("0", ".") for i in range(0, 81, 9)]
    cand = SudokuEnv(render="candidates").reset(options={"task": task9})[0]
    assert "r1c3: 1 2 4" in cand
    env = SudokuEnv()
    env.reset(options={"task": task9})
    obs, *_ = env.step("value(5, r1c1)")
    assert obs.endswith("Last answer rejected: r1c1 is a given cell")


def test_hints_tail_lists_the_fewest_candidate_cells_last(task9: Task) -> None:
    """The 9x9 tiny-model view: board, then the 8 cells with the fewest candidates, the oracle's cell last."""
    env = SudokuEnv(render="hints_tail", max_steps=100)
    obs = env.reset(options={"task": task9})[0]
    lines = obs.splitlines()
    empties = PUZ9.count("0")
    assert lines[:9] == [PUZ9[i : i + 9].replace("0", ".") for i in range(0, 81, 9)]
    assert lines[9] == f"Candidates (8 of {empties} empty cells, fewest last):"
    shown = lines[10:]
    assert len(shown) == 8
    counts = [len(line.split(": ")[1].split()) for line in shown]
    assert counts == sorted(counts, reverse=True)
    every = SudokuEnv(render="candidates").reset(options={"task": task9})[0].splitlines()
    assert min(len(line.split(": ")[1].split()) for line in every if ": " in line) == counts[-1]
    fill = oracle_fill(env.state)
    assert fill is not None and shown[-1].startswith(f"r{fill.row + 1}c{fill.col + 1}: ")
    # Near the end fewer than 8 cells are empty: all of them are listed.
    left = [cell for cell in range(81) if PUZ9[cell] == "0"]
    for cell in left[:-3]:
        obs = env.step(f"value({SOL9[cell]}, r{cell // 9 + 1}c{cell % 9 + 1})")[0]
    assert "(3 of 3 empty cells, fewest last):" in obs


def test_bad_tasks_and_settings_are_one_line_errors(task4: Task) -> None:
    env = SudokuEnv(size=4)
    bad = task4.to_dict() | {"payload": {"puzzle": "12", "solution": SOL4}}
    with pytest.raises(InputError, match="expected 16 characters"):
        env.reset(options={"task": bad})
    bad = task4.to_dict() | {"payload": {"puzzle": "0214040001430020", "solution": SOL4}}
    with pytest.raises(InputError, match="contradicts a given"):
        env.reset(options={"task": bad})
    bad = task4.to_dict() | {"payload": {"puzzle": "2234040001430020", "solution": SOL4}}
    with pytest.raises(InputError, match="break a rule"):
        env.reset(options={"task": bad})
    with pytest.raises(InputError, match="is 4x4; this env is 9x9"):
        SudokuEnv().reset(options={"task": task4})
    with pytest.raises(InputError, match=r"env\.macro_k"):
        SudokuEnv(macro_k=3)
    with pytest.raises(InputError, match="unsupported size 5"):
        SudokuEnv(size=5)
    with pytest.raises(InputError, match="Rush Hour mode"):
        SudokuEnv(action_mode="slide")


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80))
def test_observation_stays_in_the_text_space(text: str) -> None:
    """Feedback quotes the answer back; unicode in it must not push the observation out of the space."""
    env = SudokuEnv(size=4)
    env.reset(seed=2)
    obs, *_ = env.step(text)
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize("mode", ["illegal", "wrong"])
def test_noisy_errors_follow_the_cell_first_style(task4: Task, mode: str) -> None:
    import random
    import re

    from milepost.backends.scripted import ScriptedPolicy

    env = SudokuEnv(size=4)
    env.reset(seed=0, options={"task": task4})
    for cell_first, pattern in ((True, r"value\(r\dc\d, \d\)"), (False, r"value\(\d, r\dc\d\)")):
        style = {"cell_first": True} if cell_first else {}
        policy = ScriptedPolicy("noisy-oracle", 0.0, mode, style=style)
        answers = [policy.answer(env, random.Random(i)) for i in range(10)]
        assert all(re.search(pattern, a) for a in answers), answers
