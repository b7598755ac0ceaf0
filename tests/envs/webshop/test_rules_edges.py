"""WebShopRules' edges that the mutation gate found unguarded after the profile and WebShop-data merges: the
payload checks of ``order_of`` (exact one-line messages), what ``apply`` returns (progress, or not), the silent
no-op of the webshop profile, and ``bfs_distance`` of a purchase already made."""

from __future__ import annotations

import copy

import pytest

from milepost.envs.actions import ActionMode
from milepost.envs.webshop.distance import bfs_distance
from milepost.envs.webshop.moves import best_action
from milepost.envs.webshop.profile import WEBSHOP
from milepost.envs.webshop.rules import NOOP, WebShopRules, order_of
from milepost.envs.webshop.state import BACK, Action, parse_action
from milepost.envs.webshop.tasks import generate_task
from milepost.errors import InputError
from milepost.types import Task


def _task() -> Task:
    for index in range(50):
        task = generate_task(0, index, 1)
        if task is not None and task.payload["items"][0]["options"]:
            return task
    raise AssertionError("no one-item task with options in 50 draws")


def _with_payload(task: Task, payload: object) -> Task:
    other = copy.deepcopy(task)
    other.payload = payload  # type: ignore[assignment]
    return other


def test_order_of_refuses_bad_payloads_in_one_line() -> None:
    task = _task()
    for payload in ({"items": []}, {"items": "x"}, ["not", "a", "dict"]):
        with pytest.raises(InputError) as err:
            order_of(_with_payload(task, payload))
        assert str(err.value) == f"task {task.task_id}: payload items must be a non-empty list"
    missing = copy.deepcopy(task.payload)
    missing["items"][0]["product_id"] = "B0NOTTHERE"
    with pytest.raises(InputError) as err:
        order_of(_with_payload(task, missing))
    seed, size = task.payload["catalogue_seed"], task.payload["catalogue_size"]
    assert str(err.value) == f"task {task.task_id}: product B0NOTTHERE is not in catalogue {seed}/{size}"
    unknown = copy.deepcopy(task.payload)
    unknown["catalogue_file"] = "/nonexistent/catalogue.json"
    with pytest.raises(InputError) as err:
        order_of(_with_payload(task, unknown))
    assert str(err.value).startswith(f"task {task.task_id}: ")


def test_apply_returns_whether_the_purchase_came_closer() -> None:
    rules = WebShopRules(_task(), action_mode=ActionMode())
    assert rules.remaining_distance() == bfs_distance(rules.state)
    good = best_action(rules)
    assert good is not None
    before = rules.remaining_distance()
    assert rules.apply(good) is True and rules.remaining_distance() == before - 1  # type: ignore[operator]
    # Going back to the search page loses ground: not progress.
    wasted = parse_action(f"click[{BACK}]")
    assert wasted is not None and rules.check(wasted) is None
    assert rules.apply(wasted) is False
    while not rules.is_solved():
        step = best_action(rules)
        assert step is not None
        rules.apply(step)
    assert bfs_distance(rules.state) == 0 == rules.remaining_distance()


def test_the_webshop_profile_turns_illegal_and_unparsable_actions_into_silent_no_ops() -> None:
    task = _task()
    rules = WebShopRules(task, action_mode=ActionMode(), profile=WEBSHOP)
    before = (rules.remaining_distance(), rules.state.page)
    illegal = parse_action("click[Buy Now]")  # no product page is open
    assert illegal is not None
    assert rules.apply(illegal) is False
    assert rules.noop_reason is not None and (rules.remaining_distance(), rules.state.page) == before
    garbled = rules.parse("buy the thing please")
    assert garbled == Action(NOOP, "buy the thing please")
    assert rules.apply(garbled) is False
    assert rules.noop_reason == "cannot parse action 'buy the thing please'"
    long_text = "x" * 100
    assert rules.apply(Action(NOOP, long_text)) is False
    assert rules.noop_reason == f"cannot parse action {long_text[:60]!r}"
    # and the milepost profile rejects the illegal action loudly
    with pytest.raises(ValueError):
        WebShopRules(task, action_mode=ActionMode()).apply(illegal)
