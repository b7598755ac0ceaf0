"""Answer parsing, memory, prompts and the batched loop with scripted policies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.agent.memory import MemoryItem, SlidingWindowMemory
from milepost.agent.parsing import format_answer, parse_answer
from milepost.agent.prompts import build_messages
from milepost.backends.scripted import ScriptedPolicy
from milepost.envs.sudoku import SudokuEnv, make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.types import TerminationReason


def test_parse_answer_parts() -> None:
    a = parse_answer("<think>row 3 lacks a 5\nso...</think> REASON: only 5 fits, ACTION: value(5, r3c7)")
    assert a.think.startswith("row 3") and a.reason == "only 5 fits" and a.action == "value(5, r3c7)"
    b = parse_answer("REASON: x ACTION: a; ACTION: b")
    assert b.action == "b"
    c = parse_answer("<think>unfinished thought ACTION: value(1, r1c1)")
    assert c.action == "" and c.think.startswith("unfinished")
    assert parse_answer("value(1, r1c1)").action == ""
    assert parse_answer(format_answer("why", "move(B, up)", think="t")).action == "move(B, up)"
    # a character whose upper case is longer ("ß" -> "SS") before the tag must not shift it
    assert parse_answer("REASON: Straße ß ACTION: value(1, r1c1)").action == "value(1, r1c1)"


def _free(text: str) -> bool:
    """No tag of the answer format inside (any case), so the text can fill one part of an answer."""
    low = text.lower()
    return not any(tag in low for tag in ("action", "reason", "<think>", "</think>"))


_PART = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40).filter(_free)
_ACTIONS = st.one_of(
    _PART, st.from_regex(r"value\([1-9], r[1-9]c[1-9]\)(; value\([1-9], r[1-9]c[1-9]\))*", fullmatch=True)
)


@given(
    st.one_of(
        st.text(max_size=300),
        st.builds(
            lambda *p: "".join(p),
            _PART,
            st.sampled_from(["ACTION:", "REASON:", "<think>", "</think>", "action :"]),
            _PART,
        ),
    )
)
def test_parse_answer_never_raises(text: str) -> None:
    parsed = parse_answer(text)
    assert isinstance(parsed.action, str) and isinstance(parsed.reason, str)
    assert parsed.action == parsed.action.strip() and parsed.reason == parsed.reason.strip()
    if "action" not in text.lower():
        assert parsed.action == ""


@given(
    think=st.one_of(st.none(), _PART.filter(str.strip)),
    reason=_PART,
    action=_ACTIONS,
    tail=st.sampled_from(["", "\n", "  "]),
)
def test_parse_answer_recovers_a_well_formed_answer(think: str | None, reason: str, action: str, tail: str) -> None:
    """Whatever fills the parts, an answer in the format parses back to its parts."""
    parsed = parse_answer(format_answer(reason, action, think=think) + tail)
    assert parsed.action == action.strip()
    assert parsed.reason == reason.strip().rstrip(",").strip()
    assert parsed.think == (think or "").strip()


def test_memory_window_and_prompt() -> None:
    mem = SlidingWindowMemory(2)
    for i in range(4):
        mem.add(MemoryItem(f"obs{i}", f"r{i}", f"a{i}", "bad" if i == 3 else None))
    assert [m.observation for m in mem.items()] == ["obs2", "obs3"]
    msgs = build_messages("GOAL", "NOW", mem.items(), plan="PLAN")
    assert msgs[0]["content"].startswith("GOAL\n\nPLAN\nAnswer as:")
    user = msgs[1]["content"]
    assert "obs1" not in user and "REASON: r3 ACTION: a3" in user and "Rejected: bad" in user
    assert user.endswith("Current observation:\nNOW")
    assert len(SlidingWindowMemory(0).items()) == 0
    with pytest.raises(ValueError, match="K must be >= 0"):
        SlidingWindowMemory(-1)


def _tasks(n: int, empties: int) -> list:
    return [make_task(*generate_easy(4, empties, 3, i), level="S3", index=i) for i in range(n)]


def test_oracle_solves_every_task_in_goal_distance_turns() -> None:
    tasks = _tasks(10, 8)
    eps = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=20),
        [Job(t) for t in tasks],
        ScriptedPolicy("oracle"),
        AgentSettings(batch_size=3),
        progress=False,
    )
    assert len(eps) == 10 and all(e.success and e.steps == 8 for e in eps)
    assert {e.task_id for e in eps} == {t.task_id for t in tasks}
    assert all(t.logprobs is None and t.state_key for e in eps for t in e.turns)


def test_noisy_oracle_format_errors_follow_the_binomial_tail() -> None:
    """Format errors leave the state unchanged and spend one turn, so P(success) = P(Bin(H, P) >= d)."""
    p, horizon, d = 0.7, 12, 8
    tasks = _tasks(50, d)
    jobs = [Job(t, s) for t in tasks for s in range(12)]
    eps = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=horizon),
        jobs,
        ScriptedPolicy("noisy-oracle", p, "format"),
        AgentSettings(),
        progress=False,
        seed=4,
    )
    rate = sum(e.success for e in eps) / len(eps)
    expected = sum(math.comb(horizon, k) * p**k * (1 - p) ** (horizon - k) for k in range(d, horizon + 1))
    sigma = math.sqrt(expected * (1 - expected) / len(eps))
    assert abs(rate - expected) < 4 * sigma, (rate, expected)
    assert {e.termination for e in eps} <= {TerminationReason.SOLVED, TerminationReason.BUDGET_EXHAUSTED}


def test_error_modes_do_what_they_say() -> None:
    tasks = _tasks(8, 8)
    jobs = [Job(t) for t in tasks]
    wrong = run_episodes(
        lambda: SudokuEnv(size=4),
        jobs,
        ScriptedPolicy("noisy-oracle", 0.0, "wrong"),
        AgentSettings(),
        progress=False,
    )
    # A legal wrong digit when one exists (a dead end), else an illegal move.
    assert all(e.termination is TerminationReason.DEAD_END or e.turns[0].reward_terms["valid"] < 0 for e in wrong)
    illegal = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=3),
        jobs,
        ScriptedPolicy("noisy-oracle", 0.0, "illegal"),
        AgentSettings(),
        progress=False,
    )
    assert all(t.reward_terms["valid"] == -1.0 for e in illegal for t in e.turns)
    rand = run_episodes(lambda: SudokuEnv(size=4), jobs, ScriptedPolicy("random"), AgentSettings(), progress=False)
    assert all(t.reward_terms["valid"] == 0.0 and t.reward_terms["format"] == 0.0 for e in rand for t in e.turns)


def test_same_seed_same_episodes() -> None:
    tasks = _tasks(6, 8)
    pol = ScriptedPolicy("noisy-oracle", 0.6, "mixed")

    def play(seed: int) -> list:
        eps = run_episodes(
            lambda: SudokuEnv(size=4),
            [Job(t, s) for t in tasks for s in range(2)],
            pol,
            AgentSettings(batch_size=5),
            progress=False,
            seed=seed,
        )
        return sorted((e.task_id, e.sample, [t.text for t in e.turns]) for e in eps)

    assert play(1) == play(1)
    assert play(1) != play(2)
