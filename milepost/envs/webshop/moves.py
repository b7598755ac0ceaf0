"""Scripted web-shop actions: the oracle's next action and the error modes of the noisy oracle.

These read the game state directly (they are policies, not text generators); ``milepost.backends.scripted``
turns them into answers. The oracle takes the first legal action, in page order with the canonical queries
first, that lowers the exact distance by one, so it buys every task in exactly its goal distance.
"""

from __future__ import annotations

import math
import random
from typing import Any

from milepost.envs.actions import ActionMode
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.state import ADD, BACK, BUY, CHECKOUT, NEXT, PREV, TABS, Action, ShopState
from milepost.types import Task


def _reason(state: ShopState, action: Action) -> str:
    # Short on purpose: SFT teaches these reasons to small models.
    if action.kind == "search":
        return "Search for the next item."
    value = action.value
    reasons = {NEXT: "The item is on a later page.", PREV: "Go back.", BACK: "Start a new search.",
               ADD: "Add the item to the cart.", BUY: "Buy the order.", CHECKOUT: "Buy the cart."}  # fmt: skip
    if value in reasons:
        return reasons[value]
    return "Open the item." if state.page != "item" else "Choose the required option."


def best_action(rules: WebShopRules, state: ShopState | None = None) -> Action | None:
    """The oracle's action from ``state`` (default: the live state); None when solved or dead."""
    state = state if state is not None else rules.state
    here = rules.model.remaining(state)
    if not here:
        return None
    for action in state.legal_actions():
        child = state.clone()
        child.apply(action)
        if child.is_solved() or rules.model.remaining(child) == here - 1:
            return action
    return None  # pragma: no cover - the closed form always has a successor one closer (tested)


def oracle(rules: WebShopRules, **style: Any) -> tuple[str, str] | None:
    """The next action of a shortest purchase and a reason."""
    action = best_action(rules)
    return None if action is None else (action.text(), _reason(rules.state, action))


def oracle_sequence(rules: WebShopRules, count: int | None, **style: Any) -> list[tuple[str, str]]:
    """Up to ``count`` actions of a shortest purchase (None: all of them), planned on a copy."""
    state = rules.state.clone()
    out: list[tuple[str, str]] = []
    while count is None or len(out) < count:
        action = best_action(rules, state)
        if action is None:
            break
        out.append((action.text(), _reason(state, action)))
        state.apply(action)
    return out


def illegal(rules: WebShopRules, rng: random.Random, **style: Any) -> str:
    """A well-formed action the page refuses: a search away from the search page (where the profile refuses it), or
    a click on something this page does not show (under the ``webshop`` profile it is a silent no-op)."""
    state = rules.state
    if not state.can_search() and rng.random() < 0.3:
        return f"search[{rules.order.items[0].query}]"
    shown = set(state.clickables())
    pool = [v for v in (BUY, ADD, CHECKOUT, NEXT, PREV, BACK, *TABS) if v not in shown]
    return f"click[{rng.choice(pool)}]"


def wrong(rules: WebShopRules, rng: random.Random, **style: Any) -> str | None:
    """A legal action that brings the purchase no closer and does not end the episode: a detour."""
    state = rules.state
    here = rules.model.remaining(state)
    choices = []
    for action in state.legal_actions():
        child = state.clone()
        child.apply(action)
        there = rules.model.remaining(child)
        if there is not None and here is not None and there >= here and child.purchased is None:
            choices.append(action)
    return rng.choice(choices).text() if choices else None


def random_legal(rules: WebShopRules, rng: random.Random, **style: Any) -> str | None:
    """A uniformly random legal action (canonical queries for the search box)."""
    choices = rules.state.legal_actions()
    return rng.choice(choices).text() if choices else None


def malformed(rng: random.Random) -> str:
    """An answer no parser accepts."""
    return rng.choice(["click Buy Now", "I am not sure.", "search(tee)", "click[]", "buy[B0ABC]", ""])


def optimal_turns(task: Task, mode: ActionMode) -> int:
    """Fewest turns that can finish ``task`` under ``mode`` (at most ``max_actions`` actions per turn)."""
    per_turn = mode.max_actions
    if per_turn is None:
        return 1 if task.goal_distance else 0
    return math.ceil(task.goal_distance / per_turn)
