"""experiments/plan_check.py: reading a written Rush Hour plan and grading it against the solved cluster."""

from __future__ import annotations

import random

import pytest

from milepost.envs.rushhour.solver import solve_board
from milepost.envs.rushhour.state import Move, RushHourState
from milepost.types import Episode
from tests.planning.fakes import rush_tasks
from tests.turns import graded_turn


@pytest.fixture(scope="module")
def puzzle():  # type: ignore[no-untyped-def]
    task = rush_tasks(4, 6, 1)[0]
    cluster = solve_board(task.payload["board"])
    start = RushHourState(cluster.layout, cluster.layout.unpack(cluster.start))
    return task, cluster, start


def _optimal_first(cluster, state):  # type: ignore[no-untyped-def]
    from experiments.sft_starts import optimal_moves

    return optimal_moves(cluster, state)[0]


def test_a_written_plan_reads_back_in_play_order() -> None:
    from experiments.plan_check import parse_plan

    back = parse_plan("A right 3 < B up 2 < C up 1.")
    forward = parse_plan("C up 1 > B up 2 > A right 3.")
    assert back == forward == [Move("C", "up", 1), Move("B", "up", 2), Move("A", "right", 3)]
    assert parse_plan("A right 4.") == [Move("A", "right", 4)]
    assert parse_plan("legal: A right, B up, C up. plan: A right 3 < B up 2 < C up 1.") == back  # legal-plan-back
    for text in ("C makes room.", "A right 3 < B up 2 > C up 1.", "A right 0.", "", "A sideways 2."):
        assert parse_plan(text) is None, text


@pytest.mark.parametrize("order", ["back", "forward"])
def test_the_solvers_plan_grades_step_optimal_and_a_broken_one_does_not(puzzle, order: str) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_check import grade_plan, parse_plan
    from experiments.sft_starts import plan_reason

    _, cluster, start = puzzle
    distance = int(cluster.steps[cluster.index(start.key)])
    plan = parse_plan(plan_reason(cluster, start, _optimal_first(cluster, start), order))
    assert plan is not None
    assert grade_plan(cluster, start, plan) == {
        "cells": distance,
        "legal_cells": distance,
        "legal": True,
        "solves": True,
        "optimal": True,
    }
    # One cell short of the goal: legal, does not reach it.
    short = plan[:-1] + ([Move("A", "right", plan[-1].cells - 1)] if plan[-1].cells > 1 else [])
    g = grade_plan(cluster, start, short)
    assert g["legal"] and not g["solves"] and not g["optimal"] and g["legal_cells"] == distance - 1
    # A slide pushed one cell past what the board allows: illegal there, the cells before it counted.
    first = plan[0]
    too_far = [Move(first.vehicle, first.direction, 7), *plan[1:]]
    g = grade_plan(cluster, start, too_far)
    assert not g["legal"] and not g["solves"] and not g["optimal"]
    assert 0 <= g["legal_cells"] < 7


def test_a_legal_plan_with_a_detour_reaches_the_goal_but_is_not_step_optimal(puzzle) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_check import grade_plan, parse_plan
    from experiments.sft_starts import optimal_moves, plan_reason

    _, cluster, _ = puzzle
    dist = cluster.steps
    # A state with a legal move that does not bring it closer; that move, then the solver's plan from there.
    start, detour = next(
        (s, m)
        for s in (RushHourState(cluster.layout, cluster.layout.unpack(k)) for k in cluster.states.tolist())
        if int(dist[cluster.index(s.key)]) >= 2
        for m in s.legal_actions()
        if m not in optimal_moves(cluster, s)
    )
    here = int(dist[cluster.index(start.key)])
    after = start.clone()
    after.apply(detour)
    rest = parse_plan(plan_reason(cluster, after, _optimal_first(cluster, after), "forward"))
    assert rest is not None
    g = grade_plan(cluster, start, [detour, *rest])
    assert g["legal"] and g["solves"] and not g["optimal"]
    assert g["cells"] == 1 + int(dist[cluster.index(after.key)]) > here


def test_turns_are_graded_from_the_observations_board(puzzle) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_check import grade_turns, summarise
    from experiments.sft_starts import answer_text

    task, cluster, start = puzzle
    move = _optimal_first(cluster, start)
    good = answer_text(move, cluster, start, "plan-back")
    wrong_vehicle = good.replace(f"ACTION: move({move.vehicle},", "ACTION: move(Z,")
    turns = []
    for i, (text, correct) in enumerate(
        ((good, 1), ("REASON: C makes room. ACTION: move(A, left)", 0), (wrong_vehicle, 0))
    ):
        obs = start.render_text() + ("\nLast answer rejected: something" if i else "")
        turns.append(graded_turn(i, correct, observation=obs, text=text))
    ep = Episode(task.task_id, "sft", 0, 0, "truncated", False, task.goal_distance, 3, "4-6", turns)
    rows = grade_turns([ep], {task.task_id: cluster})
    assert [r["plan"] is not None for r in rows] == [True, False, True]
    assert rows[0]["plan"]["optimal"] and rows[0]["plan"]["agrees"] and rows[0]["action_optimal"]
    assert rows[2]["plan"]["optimal"] and not rows[2]["plan"]["agrees"]
    assert rows[0]["first"] and not rows[1]["first"]
    assert {r["distance"] for r in rows} == {int(cluster.steps[cluster.index(start.key)])}
    s = summarise(rows)
    assert s["all turns"]["parsed"] == pytest.approx(2 / 3)
    assert s["all turns"]["agrees"] == pytest.approx(1 / 2)
    assert s["all turns"]["optimal"] == 1.0
    assert s["first turns"]["turns"] == 1 and s["solved episodes"]["turns"] == 0
    assert s["all turns"]["action_optimal_plan_optimal"] == pytest.approx(1 / 2)
    # A board that is not a state of the puzzle is an error, not a silent skip.
    other = solve_board(random.Random(0).choice(rush_tasks(7, 9, 3)).payload["board"])
    turns[0].observation = RushHourState(other.layout, other.layout.unpack(other.start)).render_text()
    with pytest.raises(SystemExit, match="not a state"):
        grade_turns([ep], {task.task_id: cluster})


def test_turns_are_binned_by_the_states_distance() -> None:
    from experiments.plan_check import by_distance

    def row(d: int, plan_optimal: bool | None, action: bool):  # type: ignore[no-untyped-def]
        plan = None if plan_optimal is None else {"optimal": plan_optimal}
        return {"distance": d, "plan": plan, "action_optimal": action}

    rows = [row(2, True, True), row(3, False, True), row(5, None, False), row(15, True, True)]
    bins = by_distance(rows)
    assert list(bins) == ["1-3", "4-6", "7-9", "10-12", "13+"]
    assert bins["1-3"] == {"turns": 2, "plan_optimal": 0.5, "action_optimal": 1.0}
    assert bins["4-6"] == {"turns": 1, "plan_optimal": 0.0, "action_optimal": 0.0}
    assert bins["7-9"]["turns"] == 0 and bins["7-9"]["plan_optimal"] is None
    assert bins["13+"]["plan_optimal"] == 1.0


def test_a_listed_set_of_legal_moves_is_graded_against_the_board(puzzle) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_check import grade_legal, parse_legal

    _, _, start = puzzle
    truth = [f"{m.vehicle} {m.direction}" for m in start.legal_actions()]
    assert parse_legal(f"legal: {', '.join(truth)}. plan: A right 2.") == truth
    assert parse_legal("A right 2.") is None and parse_legal("legal: A right.") is None
    g = grade_legal(start, truth, start.legal_actions()[0])
    assert g == {"exact": True, "tp": len(truth), "fp": 0, "fn": 0, "action_listed": True}
    wrong = [*truth[1:], "Z up"]  # one legal move missed, one invented
    g = grade_legal(start, wrong, start.legal_actions()[0])
    assert g == {"exact": False, "tp": len(truth) - 1, "fp": 1, "fn": 1, "action_listed": False}
