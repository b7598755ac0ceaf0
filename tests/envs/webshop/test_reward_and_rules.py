"""The web shop's reward per term, its page and cart rules and the goal distance they give, asserted exactly on
hand-built requirements and states of the small test catalogue (the mutation gate's ``webshop`` group)."""

from __future__ import annotations

import pytest

from milepost.envs.actions import ActionMode
from milepost.envs.webshop.catalogue import Product
from milepost.envs.webshop.goal import Requirement, get_shop, matching, order_score
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.search import PAGE_SIZE
from milepost.envs.webshop.state import BACK, NEXT, PREV, Action, ShopState
from milepost.envs.webshop.tasks import make_task
from milepost.types import Task
from tests.envs.webshop.conftest import CATALOGUE, tasks_of

SHOP = get_shop(0, CATALOGUE)
PRODUCTS = SHOP.catalogue.products


def _rich_product() -> Product:
    """A product with two option dimensions and at least two attributes."""
    return next(p for p in PRODUCTS if len(p.options) == 2 and len(p.attributes) >= 2)


def _requirement(product: Product, **change: object) -> Requirement:
    p = product
    fields = {
        "product_id": p.pid,
        "ptype": p.ptype,
        "category": p.category,
        "attributes": tuple(p.attributes[:2]),
        "options": tuple((dim, values[0]) for dim, values in p.options),
        "price_limit": p.price,
        "query": " ".join((*p.attributes[:2], p.ptype)),
    }
    fields.update(change)
    return Requirement(**fields)  # type: ignore[arg-type]


def test_each_term_is_one_share_of_the_credit_and_the_price_limit_itself_passes() -> None:
    p = _rich_product()
    first = tuple(values[0] for _, values in p.options)
    req = _requirement(p)  # 2 attributes + 2 options + the price: 5 terms
    assert req.score(p, first) == 1.0 and req.satisfied_by(p, first)  # price == limit: the condition holds
    assert _requirement(p, price_limit=p.price - 1).score(p, first) == pytest.approx(4 / 5)
    assert _requirement(p, price_limit=p.price + 1).score(p, first) == 1.0
    assert _requirement(p, attributes=(p.attributes[0], "no such attribute")).score(p, first) == pytest.approx(4 / 5)
    assert _requirement(p, attributes=("nope", "none")).score(p, first) == pytest.approx(3 / 5)
    one_wrong = (first[0], p.options[1][1][1])
    assert req.score(p, one_wrong) == pytest.approx(4 / 5) and not req.satisfied_by(p, one_wrong)
    assert req.score(p, (None, None)) == pytest.approx(3 / 5)
    assert req.score(p, (first[0],)) == pytest.approx(4 / 5)  # a dimension left out counts as unselected
    # Every term missed at once: only a same-type product's zero.
    worst = _requirement(p, attributes=("x", "y"), price_limit=p.price - 1)
    assert worst.score(p, (None, None)) == 0.0
    # One attribute, no options: 2 terms.
    assert _requirement(p, attributes=("x",), options=()).score(p, first) == pytest.approx(1 / 2)


def test_the_type_factor_is_one_half_for_the_category_and_zero_outside_it() -> None:
    p = _rich_product()
    first = tuple(values[0] for _, values in p.options)
    assert _requirement(p, ptype="another type").score(p, first) == pytest.approx(0.5)
    assert _requirement(p, ptype="another type", price_limit=p.price - 1).score(p, first) == pytest.approx(0.4)
    assert _requirement(p, ptype="another type", category="another category").score(p, first) == 0.0
    assert not _requirement(p, ptype="another type").satisfied_by(p, first)


def test_the_order_score_assigns_lines_to_items_and_extra_lines_dilute_it() -> None:
    p = _rich_product()
    q = next(o for o in PRODUCTS if o.category != p.category and not o.options and len(o.attributes) >= 2)
    first = tuple(values[0] for _, values in p.options)
    a, b = _requirement(p), _requirement(q)
    good_a, good_b, half_a = (p.index, first), (q.index, ()), (p.index, (None, None))
    assert order_score(SHOP.catalogue, [a, b], [good_a, good_b]) == (1.0, [0, 1])
    assert order_score(SHOP.catalogue, [a, b], [good_b, good_a]) == (1.0, [1, 0])
    assert order_score(SHOP.catalogue, [a, b], [half_a]) == (pytest.approx(0.3), [0, None])  # (3/5 + 0) / 2
    # Three lines for two items: the sum of the best assignment over three.
    score, assign = order_score(SHOP.catalogue, [a, b], [half_a, good_b, good_a])
    assert score == pytest.approx(2 / 3) and assign == [2, 1]
    assert order_score(SHOP.catalogue, [a], []) == (0.0, [None])


def test_a_price_limit_in_dollars_becomes_exact_cents() -> None:
    p = _rich_product()
    data = _requirement(p, price_limit=1999).to_dict()
    assert data["price_limit"] == 19.99
    assert Requirement.from_dict(data).price_limit == 1999
    assert Requirement.from_dict({**data, "price_limit": 0.29}).price_limit == 29  # 28.999999999999996 * 100


# -- pages -------------------------------------------------------------------------------------------------------


def _query_with(count: int) -> str:
    """A query of the test catalogue with exactly ``count`` results."""
    words = sorted({w for p in PRODUCTS for w in (*p.attributes, p.ptype)})
    for query in (*words, *(f"{a} {b}" for a in words[:40] for b in words[:40])):
        if len(SHOP.index.search(query)) == count:
            return query
    raise AssertionError(f"no query with {count} results")


def _rules(task: Task) -> WebShopRules:
    return WebShopRules(task, action_mode=ActionMode())


@pytest.mark.parametrize("count", [50, 23])
def test_results_pages_end_at_the_last_full_or_partial_page(count: int, one_item_tasks: list[Task]) -> None:
    state = ShopState(_rules(one_item_tasks[0]).order)
    state.apply(Action("search", _query_with(count)))
    pages = -(-count // PAGE_SIZE)
    seen: list[int] = []
    for page in range(pages):
        assert state.page_no == page
        clickables = state.clickables()
        assert clickables[0] == BACK
        assert (PREV in clickables) == (page > 0)
        assert (NEXT in clickables) == (page < pages - 1), f"page {page + 1} of {pages}"
        shown = state.page_results()
        assert len(shown) == (PAGE_SIZE if page < pages - 1 else count - PAGE_SIZE * (pages - 1))
        assert clickables[-len(shown) :] == [PRODUCTS[i].pid for i in shown]
        seen += shown
        if page < pages - 1:
            state.apply(Action("click", NEXT))
    assert seen == list(state.results) and len(seen) == count
    assert state.why_illegal(Action("click", NEXT)) is not None  # no page after the last
    state.apply(Action("click", "< prev"))  # case and spacing do not matter
    assert state.page_no == pages - 2


def test_the_item_page_lists_options_tabs_and_the_purchase_buttons(one_item_tasks: list[Task]) -> None:
    task = next(t for t in one_item_tasks if len(t.payload["items"][0]["options"]) == 2)
    rules = _rules(task)
    state = rules.state
    assert state.clickables() == [] and [a.kind for a in state.legal_actions()] == ["search"]
    assert state.why_illegal(Action("click", "Checkout")) is not None
    item = task.payload["items"][0]
    state.apply(Action("search", item["query"]))
    assert state.why_illegal(Action("search", "again")) is not None  # search works only on the search page
    while item["product_id"] not in state.clickables():
        state.apply(Action("click", NEXT))
    page_no = state.page_no
    state.apply(Action("click", item["product_id"]))
    product = state.open_product()
    values = [v for _, vs in product.options for v in vs]
    assert state.clickables() == [BACK, PREV, *values, "Description", "Features", "Reviews", "Add to Cart", "Buy Now"]
    assert state.selection == (None, None)
    second = product.options[1][1][-1]
    state.apply(Action("click", second))
    assert state.selection == (None, second)
    state.apply(Action("click", "Features"))
    assert (state.page, state.tab, state.clickables()) == ("tab", "Features", [BACK, PREV])
    state.apply(Action("click", PREV))
    assert (state.page, state.tab, state.selection) == ("item", "", (None, second))  # the tab keeps the options
    state.apply(Action("click", PREV))
    assert (state.page, state.page_no, state.product, state.selection) == ("results", page_no, -1, ())
    state.apply(Action("click", BACK))
    assert (state.page, state.query, state.results, state.page_no) == ("search", "", (), 0)


# -- the cart and the distance ---------------------------------------------------------------------------------


def _open_target(rules: WebShopRules, i: int) -> None:
    item = rules.task.payload["items"][i]
    rules.apply(Action("search", item["query"]))
    while item["product_id"] not in rules.state.clickables():
        rules.apply(Action("click", NEXT))
    rules.apply(Action("click", item["product_id"]))


def _select(rules: WebShopRules, i: int) -> None:
    for value in rules.task.payload["items"][i]["options"].values():
        rules.apply(Action("click", value))


def test_each_right_cart_line_leaves_the_other_items_from_the_search_page(two_item_tasks: list[Task]) -> None:
    task = two_item_tasks[0]
    rules = _rules(task)
    model = rules.model
    assert rules.remaining_distance() == task.goal_distance == sum(model.from_search)
    assert model.from_search == [3 + p + o for p, o in zip(task.meta["result_pages"], task.meta["option_clicks"])]
    _open_target(rules, 0)
    # On the target's page with nothing selected: its option clicks and Add to Cart, then item 2 from search.
    assert rules.remaining_distance() == model.n_options[0] + 1 + model.from_search[1]
    _select(rules, 0)
    assert rules.remaining_distance() == 1 + model.from_search[1]
    rules.apply(Action("click", "Add to Cart"))
    assert rules.state.cart and not rules.is_dead()
    assert rules.remaining_distance() == model.from_search[1]
    _open_target(rules, 1)
    _select(rules, 1)
    assert rules.remaining_distance() == 1  # Buy Now buys the cart and the open product
    rules.apply(Action("click", "Add to Cart"))
    assert rules.remaining_distance() == 1  # Checkout from the search page
    rules.apply(Action("search", task.payload["items"][0]["query"]))
    assert rules.remaining_distance() == 2  # Back to Search, then Checkout
    rules.apply(Action("click", BACK))
    rules.apply(Action("click", "Checkout"))
    assert rules.is_solved() and rules.remaining_distance() == 0 and rules.state.outcome() == 1.0


def test_a_cart_line_no_item_can_take_is_a_dead_end_with_no_distance(two_item_tasks: list[Task]) -> None:
    task = next(t for t in two_item_tasks if t.payload["items"][0]["options"])
    # The same right line twice: the second one can never be matched to an item (lines cannot be removed).
    rules = _rules(task)
    for _ in range(2):
        _open_target(rules, 0)
        _select(rules, 0)
        assert not rules.is_dead()
        rules.apply(Action("click", "Add to Cart"))
    assert rules.state.satisfied() == [True, False]
    assert rules.is_dead() and rules.remaining_distance() is None and rules.state.is_dead()
    # A line with the options left unset meets no item.
    rules = _rules(task)
    _open_target(rules, 0)
    rules.apply(Action("click", "Add to Cart"))
    assert rules.is_dead() and rules.remaining_distance() is None
    # Checking it out is a wrong purchase: dead, with WebShop's partial credit.
    rules.apply(Action("click", "Checkout"))
    assert rules.state.purchased is not None and not rules.is_solved()
    assert rules.is_dead() and rules.remaining_distance() is None
    req = rules.order.items[0]
    n = len(req.attributes) + len(req.options) + 1
    assert rules.state.outcome() == pytest.approx((n - len(req.options)) / n / 2)  # one of two items, options unset


def test_the_distance_from_a_later_results_page_counts_the_clicks_back(two_item_tasks: list[Task]) -> None:
    found = None
    for task in tasks_of(1, 40):
        if task.meta["result_pages"][0] == 0:
            query = task.payload["items"][0]["query"]
            if len(SHOP.index.search(query)) > 2 * PAGE_SIZE:
                found = task
                break
    assert found is not None
    rules = _rules(found)
    rules.apply(Action("search", found.payload["items"][0]["query"]))
    onward = rules.model.n_options[0] + 2  # the product, its options, Add to Cart
    assert rules.remaining_distance() == onward
    rules.apply(Action("click", NEXT))
    rules.apply(Action("click", NEXT))
    assert rules.remaining_distance() == 2 + onward  # two clicks of < Prev
    assert rules.model.first(rules.state, 0) == 2 + onward
    rules.apply(Action("click", PREV))
    assert rules.remaining_distance() == 1 + onward


def test_a_task_whose_target_no_query_finds_is_refused() -> None:
    p = _rich_product()
    with pytest.raises(Exception, match="not found by any canonical query"):
        make_task([_requirement(p, query="zzzz qqqq")], catalogue_seed=0, catalogue_size=CATALOGUE)


def test_matching_counts_a_product_priced_at_the_limit_and_stops_at_the_limit_count() -> None:
    p = _rich_product()
    req = _requirement(p)
    assert matching(SHOP.catalogue, req) == [p.index]  # price == limit matches
    assert matching(SHOP.catalogue, _requirement(p, price_limit=p.price - 1)) == []
    loose = _requirement(p, attributes=(), options=(), price_limit=10**9)
    same_type = list(SHOP.catalogue.by_type[p.ptype])
    assert len(same_type) >= 3
    assert matching(SHOP.catalogue, loose) == same_type[:2]
    assert matching(SHOP.catalogue, loose, limit=3) == same_type[:3]
