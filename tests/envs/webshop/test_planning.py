"""Web-shop planning: the programmatic order follows the oracle, LLM plan items map onto the subgoal predicates."""

from __future__ import annotations

import json

import pytest

from milepost.envs.webshop import WebShopEnv
from milepost.envs.webshop.moves import best_action
from milepost.planning import PlanLimits, PlanRejected, ProgrammaticPlanner, domain_for
from milepost.planning.schema import plan_from_answer
from milepost.types import Task


def _env(task: Task) -> WebShopEnv:
    env = WebShopEnv(size=task.size)
    env.reset(options={"task": task})
    return env


def test_programmatic_plan_is_the_order_an_oracle_episode_latches(two_item_tasks: list[Task]) -> None:
    for task in two_item_tasks[:3]:
        env = _env(task)
        plan = ProgrammaticPlanner().plan(env)
        assert sorted(plan.refs) == list(range(len(env.subgoals)))  # type: ignore[type-var]
        while True:
            action = best_action(env.rules)  # type: ignore[arg-type]
            assert action is not None
            *_, term, _, info = env.step(action.text())
            if term:
                break
        assert plan.refs == info["subgoals_completed"]
        assert sum(g.estimated_steps for g in plan.subgoals) >= task.goal_distance - len(plan.subgoals)


def test_llm_plan_items_map_onto_webshop_predicates(two_item_tasks: list[Task]) -> None:
    env = _env(two_item_tasks[0])
    domain = domain_for(env)
    vocab = domain.vocabulary(env)
    pid2 = two_item_tasks[0].payload["items"][1]["product_id"]
    answer = json.dumps(
        [
            {"description": "search for item 1"},
            {"description": f"open the product page of {pid2}"},
            {"description": "add the 2nd item to the cart"},
            {"description": "check out"},
            {"description": "compare prices carefully"},
        ]
    )
    plan = plan_from_answer(answer, env, domain, vocab, PlanLimits())
    labels = [vocab.for_env(r).label if r is not None else None for r in plan.refs[:5]]  # type: ignore[union-attr]
    assert labels == ["search 1", "open 2", "cart 2", "checkout", None]
    assert any("judge-only" in note for note in plan.notes)


def test_a_product_outside_the_order_rejects_the_plan(two_item_tasks: list[Task]) -> None:
    env = _env(two_item_tasks[0])
    domain = domain_for(env)
    with pytest.raises(PlanRejected, match="not in the order"):
        domain.resolve({"description": "open B0ZZZZZZZZ"}, env, domain.vocabulary(env))
    with pytest.raises(PlanRejected, match="does not exist"):
        domain.resolve({"description": "search for item 7"}, env, domain.vocabulary(env))


def test_subgoal_texts_do_not_reveal_the_target_products(two_item_tasks: list[Task]) -> None:
    for task in two_item_tasks:
        env = _env(task)
        texts = " ".join(f"{g.description} {g.success_criteria}" for g in env.subgoals)
        ids = [item["product_id"] for item in task.payload["items"]]
        assert all(pid not in texts and pid.lower() not in texts.lower() for pid in ids)
        assert "item 2" in texts
