"""Web-shop planning knowledge: per-item search / open / options / cart subgoals and the checkout as the vocabulary.

This is the environment where plans are written in words. An LLM plan item maps onto a subgoal when it names a
step kind (search, open, options, cart, checkout) and an item (``item 2``, a target's product id, or the
product type of exactly one item); anything else stays judge-only. A product id that the order does not contain
contradicts the instruction and rejects the plan. The programmatic order is the order in which the oracle's
shortest purchase from the current state reaches the pending subgoals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from milepost.envs.webshop.moves import best_action
from milepost.planning.domains.base import PlanRejected, Resolution, Term, Vocabulary

_ENV_GOAL = re.compile(r"(Search so that the results list|Open the page of|Select the options of|Put) item (\d+)")
_ENV_KIND = {"Search so that the results list": "search", "Open the page of": "open",
             "Select the options of": "options", "Put": "cart"}  # fmt: skip
_ENV_CHECKOUT = "Check out"
_ITEM = re.compile(r"\b(?:item|product|#)\s*(\d{1,2})\b|\b(\d)(?:st|nd|rd|th)\s+item\b", re.IGNORECASE)
_PID = re.compile(r"\bB0[0-9A-Z]{8}\b", re.IGNORECASE)
# Checked in this order: the first kind whose words appear wins ("add the item to the cart" is a cart step).
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("checkout", re.compile(r"\b(check ?out|purchase|complete the order|place the order)\b", re.IGNORECASE)),
    ("cart", re.compile(r"\b(cart|add to|buy now|buy)\b", re.IGNORECASE)),
    ("options", re.compile(r"\b(option|options|select|choose|size|color|colour|flavor|scent|pack|volume)\b", re.I)),
    ("open", re.compile(r"\b(open|click on|view|product page|go to the page)\b", re.IGNORECASE)),
    ("search", re.compile(r"\b(search|query|look for|find)\b", re.IGNORECASE)),
)


def _target_text(target: Any) -> str:
    if isinstance(target, Mapping):
        kind = str(target.get("kind", ""))
        ident = target.get("item", target.get("index", target.get("id", "")))
        return f"{kind} item {ident}".strip() if ident != "" else kind
    return str(target) if isinstance(target, str | int) else ""


class WebShopDomain:
    """The web-shop ``Domain`` (see ``milepost.planning.domains``)."""

    name = "webshop"

    def vocabulary(self, env: Any) -> Vocabulary:
        terms = []
        for goal in env.subgoals:
            m = _ENV_GOAL.match(goal.description)
            if m is not None:
                terms.append(Term(_ENV_KIND[m[1]], m[2], goal.index))
            elif goal.description.startswith(_ENV_CHECKOUT):
                terms.append(Term("checkout", "", goal.index))
            else:  # pragma: no cover - the env's descriptions are pinned by the tests
                raise RuntimeError(f"webshop: cannot name subgoal {goal.description!r}")
        return Vocabulary(terms)

    def resolve(self, item: Mapping[str, Any], env: Any, vocab: Vocabulary) -> Resolution:
        order = env.rules.order
        products = order.shop.catalogue.products
        target = item.get("target")
        text = _target_text(target) if target is not None else ""
        text = f"{text} {item.get('description', '')}".strip()
        items: set[int] = set()
        ids = {products[t].pid: n for n, t in enumerate(order.targets, 1)}
        for m in _PID.finditer(text):
            pid = m[0].upper()
            if pid not in ids:
                raise PlanRejected(f"product {pid} is not in the order (items: {', '.join(ids)})")
            items.add(ids[pid])
        for m in _ITEM.finditer(text):
            n = int(m[1] or m[2])
            if not 1 <= n <= len(order.items):
                raise PlanRejected(f"item {n} does not exist (the order has {len(order.items)})")
            items.add(n)
        if not items:
            lowered = text.lower()
            typed = [n for n, r in enumerate(order.items, 1) if r.ptype in lowered]
            if len(typed) == 1:
                items.add(typed[0])
        kind = next((k for k, pattern in _KINDS if pattern.search(text)), None)
        if kind == "cart" and not items and len(order.items) == 1:
            items.add(1)
        if kind == "checkout" or (kind == "cart" and len(order.items) > 1 and not items and "buy" in text.lower()):
            term = vocab.lookup("checkout", "")
        elif kind is None or len(items) != 1:
            why = "names no step kind" if kind is None else ("names no item" if not items else "names several items")
            return Resolution(None, f"'{text[:60]}' {why}: judge-only")
        else:
            term = vocab.lookup(kind, str(next(iter(items))))
            if term is None:
                return Resolution(None, f"item {next(iter(items))} has no {kind} step", drop=True)
        if term is None:  # pragma: no cover - every order has the checkout subgoal
            return Resolution(None, "no checkout subgoal")
        if term.env_index in env.completed:
            return Resolution(None, f"{term.label} is already done", drop=True)
        return Resolution(term)

    def order(self, env: Any, vocab: Vocabulary, pending: Sequence[int]) -> list[tuple[int, int]]:
        rules = env.rules
        state = rules.state.clone()
        waiting = [i for i in pending if vocab.for_env(i) is not None]
        out: list[tuple[int, int]] = []
        since = 0
        for _ in range(rules.goal_distance + 8 * len(rules.order.items)):
            action = best_action(rules, state)
            if action is None or not waiting:
                break
            state.apply(action)
            since += 1
            for index in list(waiting):
                predicate = env.subgoals[index].predicate
                if predicate is not None and predicate(state):
                    out.append((index, max(since, 1)))
                    waiting.remove(index)
                    since = 0
        return out + [(index, 1) for index in waiting]

    def focus_move(self, env: Any, term: Term | None, **style: Any) -> tuple[str, str] | None:
        # The oracle's shortest purchase already reaches the subgoals in plan order.
        return None
