"""The shop's game state: pages, WebShop's action grammar, the cart and the purchase.

Pages (WebShop's, plus a cart): ``search`` (the search box; ``Checkout`` once the cart holds something),
``results`` (10 per page, ``< Prev`` / ``Next >`` / ``Back to Search``, product ids), ``item`` (option values,
the ``Description`` / ``Features`` / ``Reviews`` tabs, ``Add to Cart``, ``Buy Now``, ``< Prev`` back to the
results) and ``tab`` (``< Prev`` back to the item). ``Add to Cart`` adds the open product with its selected
options and returns to the search page; ``Buy Now`` buys the cart plus the open product; ``Checkout`` buys the
cart. Either purchase ends the episode. Option values start unselected when a product is opened from the results.

The order's ``Profile`` changes three rules (``search[...]`` from any page, ``Next >`` on every results page, the
cart buttons only for orders of several items under the ``webshop`` profile) and the purchase's credit. States do
not render: ``milepost.envs.webshop.render`` reads them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Self

from milepost.envs.webshop.catalogue import Product
from milepost.envs.webshop.goal import Line, Requirement, Selection, Shop, instruction_text, order_score
from milepost.envs.webshop.profile import MILEPOST, Profile
from milepost.envs.webshop.reward import original_score
from milepost.envs.webshop.search import PAGE_SIZE

SEARCH, RESULTS, ITEM, TAB, DONE = "search", "results", "item", "tab", "done"
BACK, PREV, NEXT = "Back to Search", "< Prev", "Next >"
TABS = ("Description", "Features", "Reviews")
BUY, ADD, CHECKOUT = "Buy Now", "Add to Cart", "Checkout"
MAX_ITEMS = 4
MAX_QUERY_CHARS = 200
# milepost's grammar: search[query] or click[value], the tag in any ASCII case (re.ASCII: no Kelvin sign or dotless
# i folds into a tag); the value is text without brackets or newlines.
_ACTION = re.compile(r"\s*(search|click)\s*\[([^\[\]\n]{1,200})\]\s*\.?\s*", re.IGNORECASE | re.ASCII)
# WebArena's forms over numbered elements: click [12]; type [3] [cotton tee] with an optional [0|1] (press enter).
_CLICK_REF = re.compile(r"\s*click\s*\[\s*(\d{1,4})\s*\]\s*\.?\s*", re.IGNORECASE | re.ASCII)
_TYPE_REF = re.compile(
    r"\s*type\s*\[\s*(\d{1,4})\s*\]\s*\[([^\[\]\n]{1,200})\](?:\s*\[\s*[01]\s*\])?\s*\.?\s*", re.IGNORECASE | re.ASCII
)
# princeton-nlp/WebShop's grammar, web_agent_site/engine/engine.py `parse_action` (commit 64fa2a5): re.match, so
# anchored at the start only; `.` stops at a newline; both groups greedy.
_ORIGINAL_ACTION = re.compile(r"(.+)\[(.+)\]")


class Action(NamedTuple):
    """``search[value]`` or ``click[value]``; with ``ref`` > 0, the accessibility-tree forms ``type [ref] [value]``
    and ``click [ref]``, which the rules resolve against the current page's numbered elements."""

    kind: str  # "search" | "click"
    value: str
    ref: int = 0

    def text(self) -> str:
        if self.ref:
            return f"type [{self.ref}] [{self.value}]" if self.kind == "search" else f"click [{self.ref}]"
        return f"{self.kind}[{self.value}]"


def search_query(text: str) -> str:
    """The one rule for a search query, whether typed into the page's search box or written as ``search[...]``:
    letters with accents or compatibility forms fold to ASCII (``café`` -> ``cafe``, fullwidth letters to plain
    ones; Unicode NFKD without combining marks), characters with no ASCII form are dropped (the search index reads
    only ``[a-z0-9]`` words, so they could never match), spacing is collapsed. "" when nothing is left."""
    if not text.isascii():
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
        text = "".join(ch if ch.isascii() else " " for ch in text)
    return " ".join(text.split())


def parse_action(text: str) -> Action | None:
    """``search[...]`` or ``click[...]`` to an ``Action`` (milepost's grammar); None for anything else, including
    text with a control character or a click value outside ASCII. A search's query goes through ``search_query``,
    so every observation that quotes an action stays inside the Text space."""
    if not text.isprintable():
        return None
    m = _CLICK_REF.fullmatch(text)
    if m is not None:
        return Action("click", "", int(m[1])) if int(m[1]) > 0 else None
    m = _TYPE_REF.fullmatch(text)
    if m is not None:
        value = search_query(m[2])
        return Action("search", value, int(m[1])) if value and int(m[1]) > 0 else None
    m = _ACTION.fullmatch(text)
    if m is None:
        return None
    kind = m[1].lower()
    if kind == "search":
        value = search_query(m[2])
    elif m[2].isascii():
        value = " ".join(m[2].split())
    else:
        return None
    return Action(kind, value) if value else None


def parse_original(text: str) -> Action | None:
    r"""An action exactly as princeton-nlp/WebShop's text env reads it, or None where that env does nothing.

    ``web_agent_site/envs/web_agent_text_env.py`` ``WebAgentTextEnv.step`` (commit 64fa2a5): ``parse_action``
    (``web_agent_site/engine/engine.py``: ``re.match(r'(.+)\[(.+)\]', action)``) splits the text into a name and
    an argument, the argument is lower-cased, and the env searches when the name is exactly ``search`` (argument
    non-empty) and clicks when the name is exactly ``click`` and the argument is a key of ``text_to_clickable``
    other than ``search`` (``original_click``); anything else returns reward 0 and changes nothing. So
    ``Search[x]``, ``CLICK[x]``, ``search [x]``, `` search[x]``, ``ACTION: search[x]`` do nothing, while
    ``click[Back to Search] please`` clicks (the match is not anchored at the end), and the empty string does
    nothing. The query gets milepost's one query rule (``search_query``) for the search index; a click's value is
    the lower-cased argument, matched against the page when it is taken.
    """
    m = _ORIGINAL_ACTION.match(text)
    if m is None:
        return None
    name, arg = m[1], m[2].lower()
    if name == "search" and arg != "":
        query = search_query(arg)
        return Action("search", query) if query else None
    if name == "click" and arg != "search":
        return Action("click", arg)
    return None


def original_click(value: str, clickables: Sequence[str]) -> str | None:
    """The clickable that WebShop's text env clicks for the lower-cased argument ``value``, or None.

    ``text_to_clickable`` (``WebAgentTextEnv.get_available_actions``) is keyed by the page's button and
    product-link texts lower-cased and by its option values (lower-cased on load, ``engine.load_products``), and
    ``step`` looks the argument up as is: no spacing is forgiven (``click[ back to search]`` does nothing)."""
    key = value.lower()  # parse_original lower-cases already; an Action built in code (the oracle's) may not be
    return next((v for v in clickables if v.lower() == key), None)


def _key(value: str) -> str:
    return " ".join(value.lower().split())


@dataclass(frozen=True, eq=False)
class Order:
    """One task's fixed context: the shop, the items to buy, their target products and the canonical queries."""

    shop: Shop
    items: tuple[Requirement, ...]
    profile: Profile = MILEPOST

    @property
    def has_cart(self) -> bool:
        """Whether the pages show ``Add to Cart`` / ``Checkout`` (always, except one-item orders under a profile
        whose pages are WebShop's, which has no cart)."""
        return len(self.items) > 1 or not self.profile.original_text

    @property
    def targets(self) -> tuple[int, ...]:
        by_id = self.shop.catalogue.by_id
        return tuple(by_id[r.product_id] for r in self.items)

    @property
    def queries(self) -> tuple[str, ...]:
        """The canonical query set: each item's query, in item order, without repeats."""
        return tuple(dict.fromkeys(r.query for r in self.items))

    def instruction(self) -> str:
        return instruction_text(self.items)

    @functools.cached_property
    def click_maps(self) -> dict[tuple[object, ...], dict[str, str]]:
        """Memo of each page's clickables by their matching key (``ShopState.resolve_click``), shared by clones."""
        return {}


class ShopState:
    """Where the shopper is and what the cart holds.

    ``results`` are the product indices of the last search (at most 50), ``page_no`` the 0-based results page,
    ``product`` the open product (-1 when none), ``selection`` one value or None per option dimension of it,
    ``cart`` the lines added so far, ``purchased`` the bought lines once the episode's purchase happened.
    """

    __slots__ = ("cart", "order", "page", "page_no", "product", "purchased", "query", "results", "selection", "tab",
                 "visited")  # fmt: skip

    def __init__(self, order: Order) -> None:
        self.order = order
        self.page = SEARCH
        self.query = ""
        self.results: tuple[int, ...] = ()
        self.page_no = 0
        self.product = -1
        self.selection: Selection = ()
        self.tab = ""
        self.cart: tuple[Line, ...] = ()
        self.purchased: tuple[Line, ...] | None = None
        # Products opened since the last Back to Search (WebShop's text_rich marks their ids as clicked); it changes
        # no future, so it is not part of ``key``.
        self.visited: frozenset[int] = frozenset()

    # -- game-state API ------------------------------------------------------------------------------------

    def clickables(self) -> list[str]:
        """The values ``click[...]`` accepts on this page, in page order."""
        page = self.page
        if page == SEARCH:
            return [CHECKOUT] if self.cart else []
        if page == RESULTS:
            out = [BACK]
            if self.page_no > 0:
                out.append(PREV)
            if self.has_next_page():
                out.append(NEXT)
            products = self.order.shop.catalogue.products
            out.extend(products[i].pid for i in self.page_results())
            return out
        if page == ITEM:
            out = [BACK, PREV]
            for _, values in self.open_product().options:
                out.extend(values)
            out.extend((*TABS, ADD, BUY) if self.order.has_cart else (*TABS, BUY))
            return out
        if page == TAB:
            return [BACK, PREV]
        return []

    def legal_actions(self) -> list[Action]:
        """Every legal action, with the canonical queries standing for the (unbounded) search box."""
        acts = [Action("search", q) for q in self.order.queries] if self.can_search() else []
        return acts + [Action("click", v) for v in self.clickables()]

    def can_search(self) -> bool:
        """Whether ``search[...]`` works here: on the search page, or on any page but the last under a profile
        that searches from anywhere."""
        return self.page == SEARCH or (self.order.profile.search_anywhere and self.page != DONE)

    def has_next_page(self) -> bool:
        """Whether the results page shows ``Next >``: while results remain, or always (``next_on_last_page``)."""
        return self.order.profile.next_on_last_page or (self.page_no + 1) * PAGE_SIZE < len(self.results)

    def why_illegal(self, action: Action) -> str | None:
        """Why ``action`` cannot be taken on this page, or None when it can."""
        if self.page == DONE:
            return "the purchase is made; nothing more can be done"
        if action.kind == "search":
            if not self.can_search():
                return f"search[...] works only on the search page (click[{BACK}] first)"
            if not action.value.strip():
                return "search[...] needs a query"
            return None
        if self.resolve_click(action.value) is None:
            shown = ", ".join(self.clickables()) or "nothing (use search[...])"
            return f"{action.value[:60]!r} is not clickable on this page (clickable: {shown[:300]})"
        return None

    def resolve_click(self, value: str) -> str | None:
        """The page's clickable that ``value`` names (case and spacing ignored), or None."""
        memo = self.order.click_maps
        where = (self.page, self.query, self.page_no, self.product, bool(self.cart))
        table = memo.get(where)
        if table is None:
            if len(memo) > 4096:
                memo.clear()
            table = memo[where] = {_key(v): v for v in self.clickables()}
        return table.get(_key(value))

    def apply(self, action: Action) -> None:
        """Take a legal action; raises ``ValueError`` naming the reason when it is not legal."""
        why = self.why_illegal(action)
        if why is not None:
            raise ValueError(why)
        if action.kind == "search":
            self.query = action.value
            self.results = self.order.shop.index.search(action.value)
            self.page, self.page_no = RESULTS, 0
            self.product, self.selection, self.tab = -1, (), ""
            return
        value = self.resolve_click(action.value)
        assert value is not None  # checked by why_illegal
        self.click(value)

    def click(self, value: str) -> None:
        """Follow a clickable of this page (``value`` exactly as ``clickables`` lists it)."""
        page = self.page
        if value == BACK:
            self.page, self.query, self.results, self.page_no = SEARCH, "", (), 0
            self.product, self.selection, self.tab = -1, (), ""
            # WebShop's Back to Search re-enters the index page, which resets the session's opened asins
            # (web_agent_text_env.py SimServer.receive, `if not kwargs:`): text_rich's marks start afresh.
            self.visited = frozenset()
        elif value == CHECKOUT:
            self.purchased, self.page = self.cart, DONE
        elif page == RESULTS:
            if value == NEXT:
                self.page_no += 1
            elif value == PREV:
                self.page_no -= 1
            else:
                self.product = self.order.shop.catalogue.by_id[value]
                self.visited = self.visited | {self.product}
                self.selection = (None,) * len(self.open_product().options)
                self.page = ITEM
        elif page == ITEM:
            if value == PREV:
                self.page, self.product, self.selection = RESULTS, -1, ()
            elif value in TABS:
                self.page, self.tab = TAB, value
            elif value == ADD:
                self.cart = (*self.cart, (self.product, self.selection))
                self.page, self.query, self.results, self.page_no = SEARCH, "", (), 0
                self.product, self.selection = -1, ()
            elif value == BUY:
                self.purchased, self.page = (*self.cart, (self.product, self.selection)), DONE
            else:
                for k, (_, values) in enumerate(self.open_product().options):
                    if value in values:
                        self.selection = (*self.selection[:k], value, *self.selection[k + 1 :])
        elif page == TAB and value == PREV:
            self.page, self.tab = ITEM, ""

    def is_solved(self) -> bool:
        """Bought, and the purchase is exactly one right line per item."""
        if self.purchased is None or len(self.purchased) != len(self.order.items):
            return False
        return self.unmet() == [] and not self.wrong_lines(self.purchased)

    def clone(self) -> Self:
        other = object.__new__(type(self))
        for name in ShopState.__slots__:
            setattr(other, name, getattr(self, name))
        return other

    # -- helpers -------------------------------------------------------------------------------------------

    def open_product(self) -> Product:
        return self.order.shop.catalogue.products[self.product]

    def page_results(self) -> tuple[int, ...]:
        start = self.page_no * PAGE_SIZE
        return self.results[start : start + PAGE_SIZE]

    def lines(self) -> tuple[Line, ...]:
        """The lines that count: the purchase once made, else the cart."""
        return self.purchased if self.purchased is not None else self.cart

    def satisfied(self) -> list[bool]:
        """Per item, whether a line of the cart (or purchase) meets it exactly."""
        products = self.order.shop.catalogue.products
        lines = self.lines()
        return [any(r.satisfied_by(products[p], sel) for p, sel in lines) for r in self.order.items]

    def unmet(self) -> list[int]:
        return [i for i, ok in enumerate(self.satisfied()) if not ok]

    def wrong_lines(self, lines: tuple[Line, ...]) -> bool:
        """True when some line meets no item, or two lines meet the same item."""
        products = self.order.shop.catalogue.products
        used: set[int] = set()
        for p, sel in lines:
            hit = next((i for i, r in enumerate(self.order.items) if r.satisfied_by(products[p], sel)), None)
            if hit is None or hit in used:
                return True
            used.add(hit)
        return False

    def is_dead(self) -> bool:
        """A wrong purchase, or a cart line that no item wants (lines cannot be removed)."""
        if self.purchased is not None:
            return not self.is_solved()
        return self.wrong_lines(self.cart)

    def outcome(self) -> float:
        """The purchase's partial credit (0 before one): the exact-match score, or WebShop's own reward under a
        profile with ``original_reward``; either way the best assignment of bought lines to items."""
        if self.purchased is None:
            return 0.0
        catalogue = self.order.shop.catalogue
        if not self.order.profile.original_reward:
            return order_score(catalogue, self.order.items, self.purchased)[0]
        products = catalogue.products

        def score(req: Requirement, product: Product, selection: Selection) -> float:
            return original_score(req, products[catalogue.by_id[req.product_id]], product, selection)

        return order_score(catalogue, self.order.items, self.purchased, score)[0]

    def key(self) -> tuple[object, ...]:
        """Everything that decides the future (the breadth-first search's visited key)."""
        return (self.page, self.query, self.page_no, self.product, self.selection, self.tab, self.cart,
                self.purchased)  # fmt: skip

    def __repr__(self) -> str:
        where = {SEARCH: "", RESULTS: f" {self.query!r} p{self.page_no + 1}", DONE: ""}.get(self.page, "")
        if self.page in (ITEM, TAB):
            where = f" {self.open_product().pid} {self.selection} {self.tab}".rstrip()
        return f"ShopState({self.page}{where}, cart={len(self.cart)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShopState) and other.order is self.order and other.key() == self.key()

    def __hash__(self) -> int:
        return hash(self.key())
