"""Exact goal distance: the closed form against breadth-first search, and the oracle's exactness, under both
profiles (``webshop`` searches from any page and shows ``Next >`` past the last results page)."""

from __future__ import annotations

import random

import pytest

from milepost.envs.actions import ActionMode
from milepost.envs.webshop.distance import bfs_distance
from milepost.envs.webshop.moves import best_action
from milepost.envs.webshop.profile import PROFILES
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.state import ShopState
from milepost.types import Task
from tests.envs.webshop.conftest import tasks_of

PROFILE_NAMES = list(PROFILES)


def _rules(task: Task, profile: str = "milepost") -> WebShopRules:
    return WebShopRules(task, action_mode=ActionMode(), profile=PROFILES[profile])


def _walk_states(rules: WebShopRules, rng: random.Random, length: int) -> list[ShopState]:
    """States along a random walk that mixes oracle and random legal actions, dead ends excluded."""
    state = rules.state.clone()
    out = [state.clone()]
    for _ in range(length):
        actions = state.legal_actions()
        oracle = best_action(rules, state)
        action = oracle if oracle is not None and rng.random() < 0.5 else rng.choice(actions)
        child = state.clone()
        child.apply(action)
        if child.purchased is not None or rules.model.remaining(child) is None:
            continue
        state = child
        out.append(state.clone())
    return out


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_goal_distance_equals_breadth_first_search_one_item(one_item_tasks: list[Task], profile: str) -> None:
    for task in one_item_tasks:
        rules = _rules(task, profile)
        assert bfs_distance(rules.state) == task.goal_distance == rules.remaining_distance()


@pytest.mark.parametrize("profile", PROFILE_NAMES)
@pytest.mark.parametrize("k", [1, 2])
def test_closed_form_equals_bfs_from_states_along_random_walks(k: int, profile: str) -> None:
    rng = random.Random(k)
    checked = 0
    for task in tasks_of(k, 4 if k == 1 else 2, seed=11):
        rules = _rules(task, profile)
        for state in _walk_states(rules, rng, 14 if k == 1 else 10):
            assert rules.model.remaining(state) == bfs_distance(state), repr(state)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_two_item_goal_distance_equals_bfs(two_item_tasks: list[Task], profile: str) -> None:
    for task in two_item_tasks[:3]:
        rules = _rules(task, profile)
        assert bfs_distance(rules.state) == task.goal_distance


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_oracle_buys_every_task_in_exactly_its_goal_distance(profile: str) -> None:
    for k in (1, 2, 3):
        for task in tasks_of(k, 10, seed=3):
            rules = _rules(task, profile)
            steps = 0
            while not rules.is_solved():
                action = best_action(rules)
                assert action is not None and rules.check(action) is None
                rules.apply(action)
                steps += 1
                assert steps <= task.goal_distance
            assert steps == task.goal_distance
            assert rules.state.outcome() == 1.0


def test_a_wrong_cart_line_is_a_dead_end(one_item_tasks: list[Task]) -> None:
    from milepost.envs.webshop.state import Action

    task = next(t for t in one_item_tasks if t.payload["items"][0]["options"])
    rules = _rules(task)
    rules.apply(Action("search", task.payload["items"][0]["query"]))
    target = task.payload["items"][0]["product_id"]
    while target not in rules.state.clickables():
        rules.apply(Action("click", "Next >"))
    rules.apply(Action("click", target))
    rules.apply(Action("click", "Add to Cart"))  # no options chosen: the line is wrong
    assert rules.is_dead() and rules.remaining_distance() is None


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_closed_form_equals_bfs_when_the_target_is_on_a_later_results_page(profile: str) -> None:
    deep = [t for t in tasks_of(1, 100, size=3000) if t.meta["result_pages"][0] > 0][:3]
    assert len(deep) == 3
    rng = random.Random(7)
    for task in deep:
        rules = _rules(task, profile)
        assert bfs_distance(rules.state) == task.goal_distance
        for state in _walk_states(rules, rng, 16):
            assert rules.model.remaining(state) == bfs_distance(state), repr(state)


def test_noisy_oracle_error_modes_do_what_they_say(two_item_tasks: list[Task]) -> None:
    from milepost.envs.webshop import moves
    from milepost.envs.webshop.state import parse_action

    rng = random.Random(3)
    for task in two_item_tasks[:3]:
        rules = _rules(task)
        while not rules.is_solved():
            here = rules.remaining_distance()
            assert here is not None
            bad = parse_action(moves.illegal(rules, rng))
            assert bad is not None and rules.check(bad) is not None
            assert parse_action(moves.malformed(rng)) is None
            detour = moves.wrong(rules, rng)
            if detour is not None:
                probe = _rules(task)
                probe.state = rules.state.clone()
                probe.apply(parse_action(detour))  # type: ignore[arg-type]
                assert probe.remaining_distance() is not None and probe.remaining_distance() >= here  # type: ignore[operator]
                assert probe.state.purchased is None
            legal = parse_action(moves.random_legal(rules, rng) or "")
            assert legal is not None and rules.check(legal) is None
            rules.apply(best_action(rules))  # type: ignore[arg-type]
