"""The shop's page for a person, through the real FastAPI app: titles are the product links, the cart lists name,
options and price, the order's subgoals carry ticks, "remaining" says what it counts, and a replayed episode
lists each step's action with the agent's reasoning."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from milepost.envs.webshop import WebShopEnv
from milepost.envs.webshop.moves import best_action
from milepost.types import Task

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from milepost.envs.webshop.html import create_app, element_id


def oracle_actions(task: Task) -> list[str]:
    env = WebShopEnv(size=task.size)
    env.reset(options={"task": task})
    out = []
    while True:
        action = best_action(env.rules)  # type: ignore[arg-type]
        assert action is not None
        out.append(action.text())
        _, _, term, trunc, _ = env.step(action.text())
        if term or trunc:
            return out


def post(client: TestClient, action: str) -> str:
    if action.startswith("search["):
        return client.post("/search", data={"query": action[7:-1]}).text
    return client.post("/act", data={"action": action}).text


def section(page: str, element: str) -> str:
    m = re.search(rf'id="{element}".*?</(div|ol)>', page, re.DOTALL)
    assert m is not None, element
    return html.unescape(m.group(0))


def test_titles_link_to_products_and_the_cart_lists_name_options_and_price(one_item_tasks: list[Task]) -> None:
    task = next(t for t in one_item_tasks if t.payload["items"][0]["options"])
    item = task.payload["items"][0]
    actions = oracle_actions(task)
    client = TestClient(create_app(task))
    page = post(client, actions[0])  # the search
    while item["product_id"] not in re.findall(r'class="pid"[^>]*>(B0\w+)<', page):
        page = post(client, "click[Next >]")
    env = WebShopEnv(size=1)
    env.reset(options={"task": task})
    product = env.state.order.shop.catalogue.products[env.state.order.shop.catalogue.by_id[item["product_id"]]]
    button = re.search(rf'<button type="submit" id="{element_id(product.pid)}" class="title-link">(.*?)</button>', page)
    assert button is not None and html.unescape(button.group(1)) == product.title  # the title is the link
    page = post(client, f"click[{product.pid}]")
    assert html.unescape(re.search(r'id="product-title">(.*?)<', page).group(1)) == product.title  # type: ignore[union-attr]
    for action in actions[2:-1]:  # the options
        page = post(client, action)
    page = post(client, "click[Add to Cart]")
    cart = section(page, "cart")
    wanted = ", ".join(f"{d}: {v}" for d, v in item["options"].items())
    assert product.title in cart and product.pid in cart and wanted in cart and product.price_text() in cart
    assert "Cart (1 item," in cart


def test_subgoals_are_ticked_and_remaining_says_what_it_counts(one_item_tasks: list[Task]) -> None:
    task = one_item_tasks[0]
    actions = oracle_actions(task)
    client = TestClient(create_app(task))
    page = client.get("/").text
    goals = section(page, "subgoals")
    _, info = WebShopEnv(size=1).reset(options={"task": task})
    assert goals.count("\u2610") == goals.count("<li") == info["num_subgoals"] > 2
    assert "\u2713" not in goals
    remaining = section(page, "status")
    assert f"remaining: {task.goal_distance} actions (search / click) to a successful purchase, at the fewest" in (
        remaining
    )
    for n, action in enumerate(actions, 1):
        page = post(client, action)
        snapshot = client.get("/state.json").json()
        goals = section(page, "subgoals")
        assert goals.count("\u2713") == len(snapshot["subgoals_completed"])  # one tick per latched subgoal
        left = task.goal_distance - n
        if left:
            assert f"remaining: {left} action{'s' if left != 1 else ''} (search" in page
    assert snapshot["solved"] and "\u2610" not in goals


def test_a_dead_end_says_no_purchase_can_succeed(one_item_tasks: list[Task]) -> None:
    task = next(t for t in one_item_tasks if t.payload["items"][0]["options"] and t.meta["result_pages"] == [0])
    client = TestClient(create_app(task))
    actions = oracle_actions(task)
    post(client, actions[0])
    assert 'id="product-title"' in post(client, actions[1])  # the target, from the first results page
    page = post(client, "click[Add to Cart]")  # no options chosen: a wrong line
    assert "no purchase can succeed from here" in section(page, "status")


def replay_page(task: Task, answers: list[str], explain: Any = None) -> TestClient:
    kwargs = {"explain": explain} if explain else {}
    return TestClient(create_app(task, replay=answers, **kwargs))


def test_replay_lists_each_steps_action_and_reasoning(one_item_tasks: list[Task]) -> None:
    from milepost.cli.show import explain

    task = one_item_tasks[1]
    actions = oracle_actions(task)
    answers = [f"<think>step {n} thought</think> REASON: because {n}. ACTION: {a}" for n, a in enumerate(actions)]
    answers.insert(1, "REASON: try a button that is not there. ACTION: click[Checkout]")
    client = replay_page(task, answers, explain)
    page = html.unescape(client.get("/").text)
    assert f"Replay next step ({len(answers)} left)" in page
    assert f'next: <code>{actions[0]}</code> <span class="reasoning">(thinking: step 0 thought) because 0.' in page
    for _ in answers:
        page = client.post("/replay/next").text
    steps = section(page, "steps")
    for n, action in enumerate(actions):
        assert f'<code>{action}</code> <span class="reasoning">- (thinking: step {n} thought) because {n}.' in steps
    assert "try a button that is not there." in steps and "(rejected:" in steps  # a refused step, explained
    assert steps.count('class="step"') == len(answers)
