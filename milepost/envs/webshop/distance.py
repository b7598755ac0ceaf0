"""Exact goal distance in closed form, and the breadth-first search over the page graph that checks it.

Distances count ``search[...]`` / ``click[...]`` actions, with searches drawn from the task's canonical query set
(each item's instruction query), as WebShop's oracle would type them; an agent may type other queries, and from a
results page of any query the distance uses the results actually shown.

Closed form. ``Add to Cart`` always lands on the search page, so after the first item every item i left to buy
costs ``c_i = 3 + p_i + o_i`` from the search page: one search, ``p_i`` clicks of ``Next >`` (``p_i`` = the best
results page of the target over the canonical queries, 0-based), one click on the product, ``o_i`` option clicks
(one per option the item names; generated items name every dimension of the target), and ``Add to Cart`` (or
``Buy Now`` for the last item). Only the first item can use where the shopper stands now (an open target with some
options set, a results list holding a target, the tab of a target), so with U the items still unmet

    d = sum_{i in U} c_i + min_{j in U} (first_j - c_j)

where ``first_j`` is the cost of buying j from the current page (the minimum over staying on the target's page,
going back to the results it came from, and ``Back to Search``). With U empty, ``Checkout`` remains (one click
from the search page, two from elsewhere). A cart holding a line no item wants is a dead end (no distance).

Under a profile that searches from any page (``webshop``), the fresh search costs ``c_j`` from every page instead
of ``1 + c_j`` (no ``Back to Search`` first); pages past the last results page (``Next >`` is always shown there)
are ``|target page - page|`` clicks of ``< Prev`` from the target's page like any other.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from milepost.envs.webshop.search import PAGE_SIZE
from milepost.envs.webshop.state import DONE, ITEM, RESULTS, SEARCH, TAB, Action, Order, ShopState

INF = 10**9


class DistanceModel:
    """Per-task constants of the closed form: each item's target, option count and best canonical page."""

    def __init__(self, order: Order) -> None:
        self.order = order
        self.targets = order.targets
        self.n_options = [len(req.options) for req in order.items]  # clicks: one per option the item names
        index = order.shop.index
        self.best_page: list[int] = []
        for t in self.targets:
            pages = [index.search(q).index(t) // PAGE_SIZE for q in order.queries if t in index.search(q)]
            self.best_page.append(min(pages) if pages else INF)
        self.from_search = [3 + p + o for p, o in zip(self.best_page, self.n_options)]
        self._rank_cache: dict[tuple[int, ...], dict[int, int]] = {}

    def goal_distance(self) -> int:
        """d(s0, g): every item from the search page."""
        return sum(self.from_search)

    def _ranks(self, results: tuple[int, ...]) -> dict[int, int]:
        ranks = self._rank_cache.get(results)
        if ranks is None:
            wanted = set(self.targets)
            ranks = {p: r for r, p in enumerate(results) if p in wanted}
            if len(self._rank_cache) > 256:
                self._rank_cache.clear()
            self._rank_cache[results] = ranks
        return ranks

    def _from_results(self, state: ShopState, j: int) -> int:
        """Buy item j from the results page the state shows (or would return to)."""
        rank = self._ranks(state.results).get(self.targets[j])
        if rank is None:
            return INF
        return abs(rank // PAGE_SIZE - state.page_no) + 1 + self.n_options[j] + 1

    def _from_item(self, state: ShopState, j: int) -> int:
        """Buy item j from the open product's page (staying, or via ``< Prev`` to its results)."""
        best = 1 + self._from_results(state, j)
        if state.product == self.targets[j]:
            req = self.order.items[j]
            chosen = dict(zip(state.open_product().dims, state.selection))
            wrong = sum(chosen.get(dim) != value for dim, value in req.options)
            best = min(best, wrong + 1)
        return best

    def first(self, state: ShopState, j: int) -> int:
        """Actions to add (or buy) item j starting from the current page."""
        back = (0 if self.order.profile.search_anywhere else 1) + self.from_search[j]
        page = state.page
        if page == SEARCH:
            return self.from_search[j]
        if page == RESULTS:
            return min(back, self._from_results(state, j))
        if page == ITEM:
            return min(back, self._from_item(state, j))
        if page == TAB:
            return min(back, 1 + self._from_item(state, j))
        return INF

    def remaining(self, state: ShopState) -> int | None:
        """The exact distance from ``state`` to a successful purchase; None from a dead end, 0 once solved."""
        if state.page == DONE:
            return 0 if state.is_solved() else None
        if state.wrong_lines(state.cart):
            return None
        unmet = state.unmet()
        if not unmet:
            return 1 if state.page == SEARCH else 2
        total = sum(self.from_search[i] for i in unmet)
        extra = min(self.first(state, j) - self.from_search[j] for j in unmet)
        result = total + extra
        return result if result < INF else None


def successors(state: ShopState) -> Iterable[tuple[Action, ShopState]]:
    """Every legal action (canonical queries for the search box) and the state it leads to."""
    for action in state.legal_actions():
        child = state.clone()
        child.apply(action)
        yield action, child


def bfs_distance(start: ShopState, limit: int = 60) -> int | None:
    """Shortest number of actions to a solved state by breadth-first search over the page graph (dead ends
    are not expanded); None when none is found within ``limit`` actions."""
    if start.is_solved():
        return 0
    seen = {start.key()}
    frontier = deque([(start, 0)])
    while frontier:
        state, depth = frontier.popleft()
        if depth >= limit:
            continue
        for _, child in successors(state):
            if child.is_solved():
                return depth + 1
            key = child.key()
            if key in seen or child.is_dead():
                continue
            seen.add(key)
            frontier.append((child, depth + 1))
    return None
