"""Web-shop rules for the text layer: WebShop's grammar, legality, latched subgoals, distances and the goal text."""

from __future__ import annotations

from collections.abc import Callable

from milepost.envs.actions import ActionMode
from milepost.envs.webshop.distance import DistanceModel
from milepost.envs.webshop.goal import Requirement
from milepost.envs.webshop.profile import MILEPOST, Profile
from milepost.envs.webshop.render import TEXTBOX, elements, render_text
from milepost.envs.webshop.sources import shop_for
from milepost.envs.webshop.state import (
    ADD,
    BUY,
    CHECKOUT,
    ITEM,
    TAB,
    Action,
    Order,
    ShopState,
    original_click,
    parse_action,
    parse_original,
)
from milepost.errors import InputError
from milepost.types import Subgoal, Task

SUBGOAL_KINDS = ("search", "open", "options", "cart")
NOOP = "noop"  # the kind of an Action that the webshop profile turns into a silent no-op


def order_of(task: Task, profile: Profile = MILEPOST) -> Order:
    """The shop and items of a web-shop task's payload.

    Raises:
        InputError: a payload without the catalogue fields or items, or naming a product the catalogue lacks.
    """
    payload = task.payload if isinstance(task.payload, dict) else {}
    items = payload.get("items")
    if not isinstance(items, list) or not items:
        raise InputError(f"task {task.task_id}: payload items must be a non-empty list")
    reqs = tuple(Requirement.from_dict(item) for item in items)
    try:
        shop = shop_for(payload)  # a generated catalogue (seed, size, difficulty) or a loaded WebShop one
    except InputError as exc:
        raise InputError(f"task {task.task_id}: {exc}") from None
    for req in reqs:
        if req.product_id not in shop.catalogue.by_id:
            name = shop.catalogue.source or f"{shop.catalogue.seed}/{shop.catalogue.size}"
            raise InputError(f"task {task.task_id}: product {req.product_id} is not in catalogue {name}")
    return Order(shop, reqs, profile)


def _searched(target: int) -> Callable[[ShopState], bool]:
    return lambda s: target in s.results


def _opened(target: int) -> Callable[[ShopState], bool]:
    return lambda s: s.page in (ITEM, TAB) and s.product == target


def _options_set(target: int, req: Requirement) -> Callable[[ShopState], bool]:
    def check(s: ShopState) -> bool:
        if s.page not in (ITEM, TAB) or s.product != target:
            return False
        chosen = dict(zip(s.open_product().dims, s.selection))
        return all(chosen.get(dim) == value for dim, value in req.options)

    return check


def _in_cart(i: int) -> Callable[[ShopState], bool]:
    return lambda s: s.satisfied()[i]


def make_subgoals(order: Order, model: DistanceModel) -> tuple[list[Subgoal], dict[str, list[int]]]:
    """Per item: a search whose results hold the target, the target's page opened, its options set (items with
    options), the item in the cart (or bought); then the purchase. Returns the subgoals and, per subgoal kind,
    their indices (which subgoals an action of that kind can complete)."""
    goals: list[Subgoal] = []
    kinds: dict[str, list[int]] = {k: [] for k in (*SUBGOAL_KINDS, "checkout")}
    for i, (req, target) in enumerate(zip(order.items, order.targets)):
        n = i + 1
        first = len(goals)
        specs: list[tuple[str, str, str, int, Callable[[ShopState], bool]]] = [
            ("search", f"Search so that the results list item {n} (the {req.ptype})",
             f"the results of the last search contain the {req.ptype} that item {n} asks for", 1, _searched(target)),
            ("open", f"Open the page of item {n} (the {req.ptype})",
             f"the page of the {req.ptype} that meets item {n} is open",
             model.best_page[i] + 1, _opened(target)),
        ]  # fmt: skip
        if req.options:
            wanted = ", ".join(f"{d}: {v}" for d, v in req.options)
            specs.append(
                ("options", f"Select the options of item {n} ({wanted})", f"on that product's page, {wanted} selected",
                 len(req.options), _options_set(target, req))
            )  # fmt: skip
        specs.append(("cart", f"Put item {n} (the {req.ptype}) in the cart", f"a cart line is {req.phrase()}", 1,
                      _in_cart(i)))  # fmt: skip
        for kind, description, criteria, steps, predicate in specs:
            kinds[kind].append(len(goals))
            goals.append(
                Subgoal(
                    index=len(goals),
                    description=description,
                    success_criteria=criteria,
                    preconditions=list(range(first, len(goals))),
                    estimated_steps=max(steps, 1),
                    predicate=predicate,
                )
            )
    kinds["checkout"].append(len(goals))
    goals.append(
        Subgoal(
            index=len(goals),
            description="Check out: buy exactly the ordered items",
            success_criteria="the purchase is one right line per item and nothing else",
            preconditions=list(range(len(goals))),
            estimated_steps=1,
            predicate=lambda s: s.is_solved(),
        )
    )
    return goals, kinds


class WebShopRules:
    """The per-task rules object that ``TextEnv`` composes (see ``milepost.envs.base.Rules``)."""

    def __init__(
        self, task: Task, *, action_mode: ActionMode, render: str = "text", profile: Profile = MILEPOST
    ) -> None:
        self.task = task
        self.profile = profile
        self.order = order_of(task, profile)
        self.action_mode = action_mode
        self.render_mode = render
        self.state = ShopState(self.order)
        self.model = DistanceModel(self.order)
        self.goal_distance = self.model.goal_distance()
        self._distance: int | None = self.goal_distance
        self.subgoals, self._kinds = make_subgoals(self.order, self.model)
        self._last = Action("click", "")  # the plain form of the last applied action
        self.noop_reason: str | None = None  # why the last action was a silent no-op (webshop profile)

    # -- Rules protocol ------------------------------------------------------------------------------------

    def parse(self, piece: str) -> Action | None:
        if self.profile.original_grammar:
            # WebShop's own reading of the text; the numbered-element forms exist only in milepost's accessibility
            # tree (which WebShop has not), so there they are read as milepost reads them.
            action = parse_original(piece)
            if action is None and self.render_mode == "accessibility":
                ref = parse_action(piece)
                action = ref if ref is not None and ref.ref else None
            return action if action is not None else Action(NOOP, piece[:200])
        action = parse_action(piece)
        if action is not None and action.ref and self.render_mode != "accessibility":
            action = None  # element numbers exist only in the accessibility-tree observation
        if action is None and self.profile.silent_invalid:
            # WebShop's text env performs nothing for text it cannot parse (reward 0, no feedback).
            return Action(NOOP, piece[:200])
        return action

    def resolve(self, action: Action) -> Action | str:
        """A numbered-element action as the plain action it stands for on the current page, or why it is not one."""
        if not action.ref:
            if action.kind == "click" and self.profile.original_grammar:
                hit = original_click(action.value, self.state.clickables())
                return Action("click", hit) if hit is not None else f"{action.value[:60]!r} is not clickable here"
            return action
        items = elements(self.state)
        if not 2 <= action.ref <= len(items) + 1:
            return f"there is no element [{action.ref}] on this page (elements 1-{len(items) + 1})"
        role, name, value = items[action.ref - 2]
        if action.kind == "search":
            return (
                Action("search", action.value)
                if role == TEXTBOX
                else f"[{action.ref}] {role} {name[:40]!r} is not a text box"
            )
        if role == TEXTBOX:
            return f"[{action.ref}] is the search box: type [{action.ref}] [your query]"
        return Action("click", value) if value else f"[{action.ref}] {role} {name[:40]!r} is not clickable"

    def check(self, action: Action) -> str | None:
        if action.kind == NOOP:
            return None if self.profile.silent_invalid else f"cannot parse action {action.value[:60]!r}"
        plain = self.resolve(action)
        why = plain if isinstance(plain, str) else self.state.why_illegal(plain)
        return None if self.profile.silent_invalid else why

    def apply(self, action: Action) -> bool:
        """Apply a legal action; under a profile with ``silent_invalid`` an illegal one changes nothing (its reason
        kept in ``noop_reason``). Returns whether the action brought the purchase closer."""
        self.noop_reason = None
        if action.kind == NOOP:
            self.noop_reason = f"cannot parse action {action.value[:60]!r}"
            return False
        plain = self.resolve(action)
        if self.profile.silent_invalid:
            why = plain if isinstance(plain, str) else self.state.why_illegal(plain)
            if why is not None:
                self.noop_reason = why
                return False
        if isinstance(plain, str):
            raise ValueError(plain)
        self._last = plain
        before = self._distance
        self.state.apply(plain)
        self._distance = self.model.remaining(self.state)
        return before is not None and self._distance is not None and self._distance < before

    def is_solved(self) -> bool:
        return self.state.is_solved()

    def is_dead(self) -> bool:
        return self._distance is None

    def remaining_distance(self) -> int | None:
        return self._distance

    def touched_subgoals(self, action: Action) -> list[int]:
        if self.noop_reason is not None:
            return []
        action = self._last if action.ref else action  # called right after apply
        kinds = self._kinds
        if action.kind == "search":
            return kinds["search"]
        value = action.value.lower()
        if value in (ADD.lower(), BUY.lower(), CHECKOUT.lower()):
            return kinds["cart"] + kinds["checkout"]
        return kinds["open"] + kinds["options"]

    def format_action(self, action: Action) -> str:
        if self.noop_reason is not None:
            return f"{action.value if action.kind == NOOP else action.text()} (no-op)"
        return self._last.text() if action.ref or self.profile.original_grammar else action.text()

    def render(self, feedback: str | None) -> str:
        page = render_text(self.state, self.render_mode)
        if feedback is None or self.profile.silent_invalid:
            return page  # WebShop shows no feedback
        return f"{page}\nLast action rejected: {feedback}"

    def goal_text(self) -> str:
        mode = self.action_mode
        if mode.kind == "atomic":
            how = "Give exactly one action per turn."
        elif mode.kind == "fixed":
            how = f"Give exactly {mode.n} actions per turn, separated by ';'; they are applied in order."
        elif mode.k is None:
            how = "Give one or more actions per turn, separated by ';'; they are applied in order."
        else:
            how = f"Give between 1 and {mode.k} actions per turn, separated by ';'; they are applied in order."
        refs = (
            " The page is an accessibility tree of numbered elements: click [N] clicks element N and "
            "type [N] [QUERY] searches from the search box N (search[...] and click[...] work too)."
            if self.render_mode == "accessibility"
            else ""
        )
        if self.profile.silent_invalid:
            cart = (
                " Add to Cart adds the open product with the selected options and returns to the search page; Buy "
                "Now buys the cart plus the open product; Checkout (search page) buys the cart."
                if self.order.has_cart
                else " Buy Now buys the open product with the selected options and ends the episode."
            )
            return (
                f"You are shopping in a web store. Instruction: {self.order.instruction()}. Actions: search[QUERY] "
                "on any page; click[VALUE] where VALUE is a clickable of the current page (a product id, an option "
                "value, Next >, < Prev, Back to Search, Description, Features, Reviews, Buy Now"
                f"{', Add to Cart, Checkout' if self.order.has_cart else ''}).{cart} An action the page cannot "
                f"take does nothing.{refs} {how}"
            )
        return (
            f"You are shopping in a web store. Instruction: {self.order.instruction()}. Actions: search[QUERY] on "
            "the search page; click[VALUE] where VALUE is a clickable of the current page (a product id, an option "
            "value, Next >, < Prev, Back to Search, Description, Features, Reviews, Add to Cart, Buy Now, "
            "Checkout). Add to Cart adds the open product with the selected options and returns to the search "
            "page; Buy Now buys the cart plus the open product and ends the episode; Checkout (search page) buys "
            f"the cart. A cart line cannot be removed.{refs} {how}"
        )
