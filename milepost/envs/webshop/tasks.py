"""Web-shop tasks: orders of k items drawn from a catalogue, with their exact goal distance, as ``Task`` records.

Task ``index`` of a seed comes from ``Random(f"webshop-task:{seed}:{index}")`` alone, so any task can be
regenerated from (catalogue, seed, index, k, pool).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from milepost.envs.webshop.catalogue import CATALOGUE_VERSION
from milepost.envs.webshop.distance import INF, DistanceModel
from milepost.envs.webshop.goal import Requirement, Shop, get_shop, instruction_text, make_requirement
from milepost.envs.webshop.state import MAX_ITEMS, Order
from milepost.errors import InputError
from milepost.types import Task

GENERATOR_VERSION = 1
DEFAULT_CATALOGUE_SEED = 0
DEFAULT_CATALOGUE_SIZE = 1000


def draw_order(shop: Shop, k: int, rng: random.Random, pool: Sequence[int] | None = None) -> list[Requirement] | None:
    """k requirements on k distinct target products (from ``pool``, default the whole catalogue), or None when
    a drawn target admits no unique requirement."""
    if not 1 <= k <= MAX_ITEMS:
        raise InputError(f"webshop: items per order must be in 1-{MAX_ITEMS}, got {k}")
    products = shop.catalogue.products
    candidates = pool if pool is not None else range(len(products))
    if len(candidates) < k:
        raise InputError(f"webshop: the product pool has {len(candidates)} products, fewer than {k}")
    targets = rng.sample(candidates, k)
    reqs = []
    for t in targets:
        req = make_requirement(shop, products[t], rng)
        if req is None:
            return None
        reqs.append(req)
    return reqs


def make_task(
    reqs: Sequence[Requirement],
    *,
    catalogue_seed: int,
    catalogue_size: int,
    level: str = "",
    split: str = "",
    seed: int = 0,
    index: int = 0,
    meta: dict[str, Any] | None = None,
) -> Task:
    """A web-shop ``Task`` (DESIGN: Contracts); ``size`` is the number of items, ``goal_distance`` the shortest
    number of actions to a successful purchase. ``meta`` gets the per-item result pages and option counts."""
    shop = get_shop(catalogue_seed, catalogue_size)
    model = DistanceModel(Order(shop, tuple(reqs)))
    if any(p >= INF for p in model.best_page):
        raise InputError("webshop: a target is not found by any canonical query")
    tag = f"{split}-" if split else ""
    info: dict[str, Any] = {
        "result_pages": list(model.best_page),
        "option_clicks": list(model.n_options),
        "catalogue_version": CATALOGUE_VERSION,
        "generator": GENERATOR_VERSION,
    }
    info.update(meta or {})
    return Task(
        task_id=f"webshop-{tag}{level or 'x'}-{seed}-{index}",
        env="webshop",
        size=len(reqs),
        level=level,
        goal_distance=model.goal_distance(),
        split=split,
        seed=seed,
        index=index,
        payload={
            "catalogue_seed": catalogue_seed,
            "catalogue_size": catalogue_size,
            "instruction": instruction_text(reqs),
            "items": [r.to_dict() for r in reqs],
        },
        meta=info,
    )


def generate_task(
    seed: int,
    index: int,
    k: int,
    *,
    catalogue_seed: int = DEFAULT_CATALOGUE_SEED,
    catalogue_size: int = DEFAULT_CATALOGUE_SIZE,
    pool: Sequence[int] | None = None,
) -> Task | None:
    """Task ``index`` of ``seed`` (None when its draw has no unique requirement; callers move to the next)."""
    shop = get_shop(catalogue_seed, catalogue_size)
    rng = random.Random(f"webshop-task:{seed}:{index}")
    reqs = draw_order(shop, k, rng, pool)
    if reqs is None:
        return None
    return make_task(reqs, catalogue_seed=catalogue_seed, catalogue_size=catalogue_size, seed=seed, index=index)
