"""Programmatic planners, the milestone tracker, the validator and judge, and the reflection line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.backends.scripted import ScriptedPolicy
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.sudoku import SudokuEnv
from milepost.planning import (
    LLMJudge,
    MilestoneTracker,
    ProgrammaticPlanner,
    SubgoalValidator,
    domain_for,
    format_progress,
    parse_progress,
    render_checklist,
)
from milepost.planning.domains.sudoku import unit_cells
from milepost.planning.validator import parse_verdict
from milepost.types import Subgoal
from tests.planning.fakes import CannedBackend, rush_env, rush_tasks, sudoku_env, sudoku_tasks


def test_every_environment_subgoal_has_a_vocabulary_term() -> None:
    for env in (sudoku_env(), SudokuEnv(size=9, subgoals=("boxes", "rows", "cols")), rush_env()):
        if env.task is None:
            env.reset(seed=4)
        vocab = domain_for(env).vocabulary(env)
        assert [t.env_index for t in vocab.terms] == [g.index for g in env.subgoals]
        assert len(set(vocab.labels())) == len(vocab)
    nine = SudokuEnv(size=9, subgoals=("boxes", "rows", "cols"))
    nine.reset(seed=4)
    terms = domain_for(nine).vocabulary(nine).terms
    assert {t.kind for t in terms} == {"box", "row", "col"}
    for t in terms:  # the unit a term names is the unit the env subgoal checks
        cells = unit_cells(nine.state, t.kind, t.ident)
        assert nine.subgoals[t.env_index].estimated_steps == sum(1 for c in cells if not nine.state.cells[c])


def test_sudoku_programmatic_plan_is_deterministic_complete_and_followable() -> None:
    env = sudoku_env()
    plan = ProgrammaticPlanner().plan(env)
    assert plan.source == "programmatic" and sorted(plan.refs) == [g.index for g in env.subgoals]  # type: ignore[type-var]
    assert plan.refs == ProgrammaticPlanner().plan(sudoku_env()).refs
    assert [g.estimated_steps for g in plan.subgoals] == [env.subgoals[r].estimated_steps for r in plan.refs]  # type: ignore[index]
    # Followable: working on the first unfinished item with its focus moves solves the puzzle, every move is
    # the solution's digit, and the environment latches the subgoals in exactly the plan's order.
    refs, latched, fallbacks = _follow(sudoku_env())
    assert latched == refs
    # The 9x9 planner orders all 27 units and follows them without ever needing the oracle's help.
    for seed in (0, 2):
        nine = SudokuEnv(size=9, level="L3", subgoals=("boxes", "rows", "cols"), max_steps=200)
        nine.reset(seed=seed)
        refs, latched, fallbacks = _follow(nine)
        assert sorted(refs) == list(range(len(nine.subgoals))) == sorted(latched)  # type: ignore[type-var]
        assert latched == refs and fallbacks == 0


def _follow(env: SudokuEnv) -> tuple[list[int | None], list[int], int]:
    """Play ``env`` along its programmatic plan: (plan refs, subgoals in the order the env latched them, turns
    on which the current item had no focus move and the oracle's best cell was played instead)."""
    from milepost.envs.sudoku.rules import oracle_fill

    plan = ProgrammaticPlanner().plan(env)
    domain = domain_for(env)
    vocab = domain.vocabulary(env)
    latched: list[int] = []
    fallbacks = 0
    solved = False
    for _ in range(env.max_steps):
        pending = [r for r in plan.refs if r is not None and r not in latched]
        if not pending:
            break
        move = domain.focus_move(env, vocab.for_env(pending[0]))
        if move is None:
            fallbacks += 1
            fill = oracle_fill(env.state)
            assert fill is not None
            action = fill.text()
        else:
            action = move[0]
        _, _, terminated, truncated, info = env.step(action)
        assert info["correct_actions"] == 1 and info["error"] is None, action  # the solution's digit
        latched += info["new_subgoals"]
        solved = info["solved"]
        if terminated or truncated:
            break
    assert solved
    return plan.refs, latched, fallbacks


def test_rush_hour_programmatic_plan_is_the_optimal_clearing_order() -> None:
    for task in rush_tasks(7, 12, 8):
        env = RushHourEnv()
        env.reset(options={"task": task})
        plan = ProgrammaticPlanner().plan(env)
        # The environment orders its subgoals by the same tie-broken optimal solution from the start.
        assert plan.refs == [g.index for g in env.subgoals]
        assert [g.estimated_steps for g in plan.subgoals] == [g.estimated_steps for g in env.subgoals]
        assert plan.subgoals[-1].preconditions == list(range(len(plan) - 1))


def test_tracker_latches_in_any_order_skips_and_replans() -> None:
    env = sudoku_env()
    plan = ProgrammaticPlanner().plan(env)
    tracker = MilestoneTracker(plan)
    assert tracker.current == 0 and tracker.vector() == [0, 0, 0, 0]
    assert tracker.mark(2, 1, "claim") and not tracker.mark(2, 2, "env")
    assert tracker.current == 0 and tracker.done() == [2]
    tracker.skip(0, 3, "optional")
    assert tracker.current == 1 and tracker.next_open(1) == 3
    tracker.tick(0)
    tracker.tick(0)
    assert tracker.steps_since_milestone == 2
    tracker.replace_plan(ProgrammaticPlanner().plan(env), 4, "stuck")
    assert tracker.vector() == [1, 0, 0, 0, 0] and tracker.plan.refs[0] == plan.refs[2]
    assert tracker.current == 1 and tracker.steps_since_milestone == 0
    assert [e["kind"] for e in tracker.events] == ["plan", "milestone", "skip", "replan"]
    text = render_checklist(tracker, "claim 9 rejected")
    assert "1. [done]" in text and "2. [current]" in text and "3. [next]" in text and "Last check: claim 9" in text


def test_tracker_observe_reads_predicates_and_latches() -> None:
    env = sudoku_env()
    tracker = MilestoneTracker(ProgrammaticPlanner().plan(env))
    box4 = tracker.plan.refs.index(3)
    env.step("ACTION: value(3, r4c4)")
    assert tracker.observe(env.state, env.completed, 1) == []
    env.step("ACTION: value(1, r3c3)")
    assert tracker.observe(env.state, env.completed, 2) == [box4]
    assert tracker.events[-1] == {"turn": 2, "kind": "milestone", "item": box4, "env_subgoal": 3, "source": "env"}


def _goal(pred: bool | None) -> Subgoal:
    return Subgoal(0, "box 1", "box 1 solved", predicate=None if pred is None else (lambda s: pred))


@pytest.mark.parametrize(
    ("pred", "judge_text", "accepted", "disagreement"),
    [
        (True, None, True, False),
        (False, None, False, False),
        (True, "YES", True, False),
        (False, "YES, it is done", False, True),  # a YES never substitutes for a false predicate
        (True, "NO", False, True),  # combined: both must agree
        (True, "I cannot tell", True, False),  # an abstaining judge leaves the predicate to decide
        (None, "yes.", True, False),  # no predicate: the judge is the only check
        (None, "No", False, False),
        (None, "maybe", False, False),
        (None, None, False, False),
    ],
)
def test_validator_combines_predicate_and_judge(
    pred: bool | None, judge_text: str | None, accepted: bool, disagreement: bool
) -> None:
    judge = LLMJudge(CannedBackend([judge_text])) if judge_text is not None else None
    validator = SubgoalValidator(judge)
    verdict = validator.validate(_goal(pred), None, "board")
    assert verdict.accepted is accepted
    assert validator.stats.disagreements == int(disagreement)
    assert validator.stats.accepted + validator.stats.rejected + validator.stats.unverifiable == 1


def test_latched_subgoals_validate_and_the_judge_sees_the_state() -> None:
    backend = CannedBackend(["YES"])
    validator = SubgoalValidator(LLMJudge(backend))
    assert validator.validate(_goal(False), None, "STATE-TEXT", latched=True).accepted
    prompt = backend.requests[0].messages[-1]["content"]  # type: ignore[index]
    assert "STATE-TEXT" in prompt and "box 1 solved" in prompt and "YES or NO" in prompt
    assert LLMJudge(CannedBackend(["error"])).judge(_goal(True), "s") is None
    assert parse_verdict("no, yes") is False and parse_verdict("YESTERDAY") is None


def test_progress_lines_parse_leniently() -> None:
    p = parse_progress("<think>PROGRESS: done=9</think> PROGRESS: done=[1, 3]; current=2; next=4 REASON: x ACTION: y")
    assert p.present and p.done == [1, 3] and p.current == 2 and p.next == 4
    assert parse_progress("progress: current = 5 done: none").done == []
    assert parse_progress("progress: current = 5 done: none").current == 5
    assert not parse_progress("REASON: x ACTION: value(1, r1c1)").present
    assert parse_progress("PROGRESS: done=1,1,2").done == [1, 2]
    assert format_progress({0, 2}, 1, None) == "PROGRESS: done=1,3; current=2; next=none"
    assert format_progress([], None, None) == "PROGRESS: done=none; current=none; next=none"


@given(st.text(max_size=300))
def test_progress_parsing_never_raises(text: str) -> None:
    claim = parse_progress(text)
    assert len(claim.done) <= 64


def test_directed_oracle_follows_the_plan_and_solves() -> None:
    """The SGO demonstrator's moves stay in the current subgoal's unit whenever that unit has a cell as
    constrained as the best one, and still solve every puzzle in goal-distance turns."""
    from milepost.planning import SGOAgent

    tasks = sudoku_tasks(12, 10, seed=7)
    eps = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=20),
        [Job(t) for t in tasks],
        ScriptedPolicy("oracle"),
        AgentSettings(batch_size=4),
        progress=False,
        agent=SGOAgent(),
    )
    assert all(e.success and e.steps == e.goal_distance for e in eps)
    in_order = sum(
        1
        for e in eps
        if [ev["item"] for ev in e.meta["sgo"]["events"] if ev["kind"] == "milestone"]
        == list(range(len(e.meta["sgo"]["z"])))
    )
    assert in_order == len(eps)  # milestones arrive in plan order


def test_focus_moves_follow_the_oracle_text_style() -> None:
    env = sudoku_env()
    state = _sgo_state(env)
    plain, cell_first = state.oracle_action(env), state.oracle_action(env, cell_first=True)
    assert plain is not None and cell_first is not None
    # Box 4 is current; of its empty cells r3c3 (candidates 1, 3) and r4c4 (only 3), the forced one is taken.
    assert plain == ("value(3, r4c4)", "only 3 fits r4c4.")
    assert cell_first == ("value(r4c4, 3)", "r4c4 can only be 3.")


def _sgo_state(env):  # type: ignore[no-untyped-def]
    """The SGO agent's per-episode state for a reset env (as ``SGOAgent.start`` builds it)."""
    from milepost.planning import SGOState, SubgoalValidator, domain_for

    return SGOState(env, domain_for(env), MilestoneTracker(ProgrammaticPlanner().plan(env)), SubgoalValidator())
