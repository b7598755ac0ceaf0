"""Purchase requirements: WebShop-style instructions, the uniqueness check, and the exact-match reward of the
``milepost`` profile (WebShop's formula with exact matching and a flat type score; the ``webshop`` profile's
reward, WebShop's own, is ``milepost.envs.webshop.reward``).

A requirement names a product type, 1-3 attributes, one value per option dimension of the target and a price
limit. It is accepted only when the target is the one catalogue product that satisfies it (so success is
unambiguous) and the target is among the search results of the requirement's canonical query.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from milepost.envs.webshop.catalogue import Catalogue, Product, get_catalogue
from milepost.envs.webshop.search import SearchIndex
from milepost.errors import InputError

Selection = tuple[str | None, ...]  # one chosen value (or None) per option dimension of the open product
Line = tuple[int, Selection]  # a cart line: product index and its selection
MAX_PRICE_LIMIT = 1e9  # dollars; far above any catalogue price, and exact in cents as a float


@dataclass(frozen=True)
class Requirement:
    """One item of an order. ``price_limit`` is in cents; ``query`` is the canonical search query; ``text``, when
    set, is the item's instruction in other words (a paraphrase, or a person's instruction from WebShop's data)."""

    product_id: str
    ptype: str
    category: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_limit: int
    query: str
    text: str = ""

    def phrase(self) -> str:
        """The instruction text of this item (``text``, else WebShop's wording)."""
        if self.text:
            return self.text
        attrs = " and ".join(self.attributes)
        text = f"a {self.ptype} that is {attrs}"
        if self.options:
            text += ", with " + " and ".join(f"{dim}: {value}" for dim, value in self.options)
        return f"{text}, price lower than {self.price_limit // 100}.{self.price_limit % 100:02d} dollars"

    def satisfied_by(self, product: Product, selection: Selection) -> bool:
        """Every requirement met exactly by ``product`` bought with ``selection``."""
        return self.score(product, selection) == 1.0

    def score(self, product: Product, selection: Selection) -> float:
        """The ``milepost`` profile's reward: WebShop's formula with exact matching, the share of matched
        attributes, options and the price condition, times a flat type score (1 for the same product type, 0.5
        for the same category, else 0) where WebShop uses query, category and title-noun overlap."""
        if product.ptype == self.ptype:
            r_type = 1.0
        elif product.category == self.category:
            r_type = 0.5
        else:
            return 0.0
        chosen = dict(zip(product.dims, selection))
        hits = sum(a in product.attributes for a in self.attributes)
        hits += sum(chosen.get(dim) == value for dim, value in self.options)
        hits += product.price <= self.price_limit
        return r_type * hits / (len(self.attributes) + len(self.options) + 1)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "product_id": self.product_id,
            "product_type": self.ptype,
            "category": self.category,
            "attributes": list(self.attributes),
            "options": {dim: value for dim, value in self.options},
            "price_limit": self.price_limit / 100,
            "query": self.query,
        }
        if self.text:
            out["text"] = self.text
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Requirement:
        """The requirement of a task record's item.

        Raises:
            InputError: a missing or mistyped field, or a price limit that is not a finite number of dollars in
                0..``MAX_PRICE_LIMIT`` (1e308 or Infinity would overflow the conversion to cents).
        """
        try:
            price = float(data["price_limit"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"webshop item: malformed requirement ({exc})") from None
        if not (math.isfinite(price) and 0 <= price <= MAX_PRICE_LIMIT):
            raise InputError(f"webshop item: price_limit must be 0-{MAX_PRICE_LIMIT:g} dollars, not {price:g}")
        try:
            return cls(
                product_id=str(data["product_id"]),
                ptype=str(data["product_type"]),
                category=str(data["category"]),
                attributes=tuple(str(a) for a in data["attributes"]),
                options=tuple((str(d), str(v)) for d, v in dict(data["options"]).items()),
                price_limit=round(price * 100),
                query=str(data["query"]),
                text=str(data.get("text", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"webshop item: malformed requirement ({exc})") from None


class Shop:
    """A catalogue with its search index (cached per catalogue seed and size)."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self.index = SearchIndex(catalogue)


@functools.lru_cache(maxsize=4)
def get_shop(seed: int, size: int) -> Shop:
    return Shop(get_catalogue(seed, size))


def matching(catalogue: Catalogue, req: Requirement, limit: int = 2) -> list[int]:
    """Indices of products (up to ``limit``) that satisfy ``req`` with some choice of options."""
    out = []
    for i in catalogue.by_type.get(req.ptype, ()):
        p = catalogue.products[i]
        if (
            p.price <= req.price_limit
            and all(a in p.attributes for a in req.attributes)
            and all(p.offers(d, v) for d, v in req.options)
        ):
            out.append(i)
            if len(out) >= limit:
                break
    return out


def make_requirement(shop: Shop, target: Product, rng: random.Random, tries: int = 12) -> Requirement | None:
    """A requirement that only ``target`` satisfies and whose canonical query finds it, or None."""
    if not target.attributes:
        return None
    for _ in range(tries):
        attrs = tuple(sorted(rng.sample(target.attributes, rng.randint(1, min(3, len(target.attributes))))))
        options = tuple((dim, rng.choice(values)) for dim, values in target.options)
        dollars = -(-target.price // 100)  # whole dollars, rounded up
        limits = sorted({-(-dollars // 10) * 1000, -(-dollars // 5) * 500, dollars * 100 + 100}, reverse=True)
        for limit in limits:
            req = Requirement(
                product_id=target.pid,
                ptype=target.ptype,
                category=target.category,
                attributes=attrs,
                options=options,
                price_limit=limit,
                query=" ".join((*attrs, target.ptype)),
            )
            if matching(shop.catalogue, req) == [target.index] and target.index in shop.index.search(req.query):
                return req
    return None


def instruction_text(reqs: Sequence[Requirement]) -> str:
    """The whole order as WebShop-style text."""
    if len(reqs) == 1:
        return reqs[0].text or f"i am looking for {reqs[0].phrase()}"
    items = "; ".join(f"({i}) {r.phrase()}" for i, r in enumerate(reqs, 1))
    return f"i need to buy these {len(reqs)} items: {items}"


ItemScore = Callable[[Requirement, Product, Selection], float]


def exact_score(req: Requirement, product: Product, selection: Selection) -> float:
    return req.score(product, selection)


def order_score(
    catalogue: Catalogue, reqs: Sequence[Requirement], lines: Sequence[Line], item_score: ItemScore = exact_score
) -> tuple[float, list[int | None]]:
    """The reward of a multi-item purchase (WebShop buys one item; this extends its per-item reward): the best
    one-to-one assignment of bought lines to items, the mean ``item_score`` over ``max(items, lines)`` (extra
    lines dilute it). Returns the score and, per item, the index of the line assigned to it (None when none)."""
    k = len(reqs)
    n = len(lines)
    scores = [[item_score(r, catalogue.products[p], sel) for p, sel in lines] for r in reqs]
    best, best_assign = -1.0, list[int | None]([None] * k)
    # Slots n.. stand for "no line"; orders are at most 4 items and a cart at most 5 lines (a wrong line ends the
    # episode), so this is at most 9*8*7*6 assignments. The first best one in itertools order wins ties.
    for perm in permutations(range(n + k), k):
        total = sum(scores[i][j] for i, j in enumerate(perm) if j < n)
        if total > best:
            best, best_assign = total, [j if j < n else None for j in perm]
    return best / max(k, n, 1), best_assign
