"""The SGO agent in the batched loop: reflection, validated claims, stuck -> replan / skip, episode records."""

from __future__ import annotations

import json
from collections.abc import Sequence

from milepost.agent.loop import AgentSettings, Job, LiveEpisode, run_episodes
from milepost.agent.parsing import format_answer
from milepost.backends.scripted import ScriptedPolicy
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.sudoku import SudokuEnv
from milepost.evaluation.failures import classify_failure
from milepost.planning import (
    FallbackPolicy,
    LLMJudge,
    LLMPlanner,
    SGOAgent,
    SGOConfig,
    parse_progress,
    summarise_sgo,
)
from milepost.types import Completion, Episode
from tests.planning.fakes import CannedBackend, rush_tasks, sudoku_tasks


def _sudoku(max_steps: int = 20) -> SudokuEnv:
    return SudokuEnv(size=4, max_steps=max_steps)


class TextPolicy:
    """Answers every turn with ``answer(ep)`` (a scripted test policy)."""

    name = "text"
    scripted = True

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.answer = answer

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]:
        return [Completion([], [], None, self.answer(ep), "stop") for ep in episodes]


def test_sgo_oracle_reflects_truthfully_and_solves() -> None:
    tasks = sudoku_tasks(6, 10)
    seen: list[list[dict[str, str]]] = []

    class Recording(ScriptedPolicy):
        def act(self, episodes):  # type: ignore[no-untyped-def]
            seen.extend(ep.messages() for ep in episodes)
            return super().act(episodes)

    eps = run_episodes(
        _sudoku,
        [Job(t) for t in tasks],
        Recording("oracle"),
        AgentSettings(batch_size=4),
        progress=False,
        agent=SGOAgent(),
    )
    assert all(e.success and e.steps == e.goal_distance for e in eps)
    for ep in eps:
        sgo = ep.meta["sgo"]
        assert sgo["z"] == [1] * len(sgo["z"]) and sgo["plan_source"] == "programmatic"
        assert sgo["progress_lines"] == sgo["turns"] == ep.steps
        assert sgo["claims_rejected"] == sgo["replans"] == sgo["skips"] == sgo["focus_mismatches"] == 0
        first = parse_progress(ep.turns[0].text)
        assert first.done == [] and first.current == 1 and first.next == 2
        # JSON round trip of the whole record.
        again = Episode.from_dict(json.loads(json.dumps(ep.to_dict())))
        assert again.meta["sgo"] == sgo
    system = seen[0][0]["content"]
    assert "Plan:\n1. [current]" in system and "PROGRESS: done=N,N" in system and "answer in PROGRESS" in system


def test_plain_agent_is_unchanged() -> None:
    eps = run_episodes(
        _sudoku, [Job(t) for t in sudoku_tasks(2, 8)], ScriptedPolicy("oracle"), AgentSettings(), progress=False
    )
    assert all("sgo" not in e.meta and not e.turns[0].text.startswith("PROGRESS") for e in eps)


def test_hallucinated_progress_never_moves_the_tracker() -> None:
    """A policy that claims every subgoal done each turn while playing oracle moves: with the tracker fed by
    claims only (observe off), an item counts exactly when its predicate holds at the claim."""
    oracle = ScriptedPolicy("oracle")

    def liar(ep: LiveEpisode) -> str:
        return "PROGRESS: done=1,2,3,4,17; current=1; next=2 " + oracle.answer(ep.env, ep.rng)

    agent = SGOAgent(config=SGOConfig(observe=False))
    eps = run_episodes(
        _sudoku, [Job(t) for t in sudoku_tasks(4, 10)], TextPolicy(liar), AgentSettings(), progress=False, agent=agent
    )
    for ep in eps:
        sgo = ep.meta["sgo"]
        assert sgo["claims_rejected"] > 0 and sgo["milestones_observed"] == 0
        refs = sgo["plan"]["subgoals"]
        for event in sgo["events"]:
            if event["kind"] == "milestone":
                assert event["source"] == "claim"
                # The environment had latched the item's subgoal by the end of that turn.
                assert refs[event["item"]]["env_subgoal"] in ep.turns[event["turn"]].subgoals_completed
        assert any(e["kind"] == "claim_rejected" and e.get("claimed") == 17 for e in sgo["events"])
        assert sum(sgo["z"]) == len(ep.turns[-1].subgoals_completed)


def test_stuck_agent_replans_within_the_bound_and_logs_why() -> None:
    plans: list[str] = []

    def again(ep: LiveEpisode) -> str:
        plans.append(ep.plan or "")
        return format_answer("again.", "value(4, r1c1)")  # a given cell: illegal

    stubborn = TextPolicy(again)
    agent = SGOAgent(config=SGOConfig(fallback=FallbackPolicy(max_replans=2)))
    eps = run_episodes(
        lambda: _sudoku(16),
        [Job(t) for t in sudoku_tasks(2, 10)],
        stubborn,
        AgentSettings(),
        progress=False,
        agent=agent,
    )
    for ep in eps:
        sgo = ep.meta["sgo"]
        kinds = [e["kind"] for e in sgo["events"]]
        assert sgo["replans"] == 2 and kinds.count("replan") == 2 and kinds.count("fallback_exhausted") == 1
        replan = next(e for e in sgo["events"] if e["kind"] == "replan")
        assert replan["turn"] == 2 and "the same state or action 3 times" in replan["reason"]
        assert classify_failure(ep) == "invalid_spiral"
    assert any("Last check: stuck, replanned from the current state" in p for p in plans)


def test_optional_judge_only_items_are_skipped_when_stuck() -> None:
    answer = json.dumps(["check that the corners look right", "box 1", "box 2", "box 3", "box 4"])
    planner = LLMPlanner(CannedBackend([answer]))
    idle = ScriptedPolicy("noisy-oracle", 0.0, "format")  # never makes progress
    eps = run_episodes(
        lambda: _sudoku(14),
        [Job(sudoku_tasks(1, 10)[0])],
        idle,
        AgentSettings(),
        progress=False,
        agent=SGOAgent(planner, config=SGOConfig(fallback=FallbackPolicy(max_replans=1))),
    )
    sgo = eps[0].meta["sgo"]
    assert sgo["plan_source"] == "llm" and sgo["initial_plan"]["subgoals"][0]["checkable"] is False
    skip = next(e for e in sgo["events"] if e["kind"] == "skip")
    assert skip["item"] == 0 and "optional" in skip["reason"] and sgo["skips"] >= 1
    assert sgo["replans"] == 1  # a required item is never skipped: the next stuck replans
    stats = summarise_sgo(eps)
    assert stats["all"]["skips"] == sgo["skips"] and stats["S4"]["plan_llm"] == 1


def test_the_judge_is_combined_with_the_predicate() -> None:
    """observe=False: only claims move the tracker; a NO-saying judge vetoes true claims (and is counted as
    disagreeing), a YES-saying one lets the true claims through."""
    task = sudoku_tasks(1, 10)[0]
    results = {}
    for verdict in ("NO", "YES"):
        agent = SGOAgent(judge=LLMJudge(CannedBackend([verdict])), config=SGOConfig(observe=False))
        eps = run_episodes(_sudoku, [Job(task)], ScriptedPolicy("oracle"), AgentSettings(), progress=False, agent=agent)
        results[verdict] = eps[0].meta["sgo"]
    assert sum(results["NO"]["z"]) == 0 and results["NO"]["judge_disagreements"] > 0
    # The solving move ends the episode before a PROGRESS line can claim the last subgoal.
    assert results["YES"]["z"] == [1, 1, 1, 0] and results["YES"]["judge_disagreements"] == 0
    assert results["YES"]["claims_accepted"] == 3 and results["YES"]["claims_rejected"] == 0


def test_rush_hour_sgo_episodes() -> None:
    tasks = rush_tasks(7, 12, 6)
    eps = run_episodes(
        RushHourEnv,
        [Job(t) for t in tasks],
        ScriptedPolicy("oracle"),
        AgentSettings(batch_size=3),
        progress=False,
        agent=SGOAgent(),
    )
    assert all(e.success and e.steps == e.goal_distance for e in eps)
    for ep in eps:
        sgo = ep.meta["sgo"]
        assert sgo["z"] == [1] * len(sgo["z"]) and sgo["claims_rejected"] == 0 and sgo["replans"] <= 2
        assert parse_progress(ep.turns[0].text).current == 1
    # A random mover on Rush Hour: never crashes, replans stay bounded.
    rand = run_episodes(
        RushHourEnv,
        [Job(t) for t in tasks[:3]],
        ScriptedPolicy("random"),
        AgentSettings(),
        progress=False,
        agent=SGOAgent(),
        seed=3,
    )
    assert all(e.meta["sgo"]["replans"] <= 2 for e in rand)
