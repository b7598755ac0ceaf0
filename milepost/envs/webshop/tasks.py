"""Web-shop tasks: orders of k items drawn from a catalogue, with their exact goal distance, as ``Task`` records.

Task ``index`` of a seed comes from ``Random(f"webshop-task:{seed}:{index}")`` alone (other difficulties:
``webshop-task:{difficulty}:{seed}:{index}``), so any task can be regenerated from (catalogue, seed, index, k,
pool, difficulty).

Difficulty. ``easy`` states each item in WebShop's generated wording ("a tee that is cotton and slim fit, with
size: large, price lower than 30.00 dollars"): the canonical query is in the instruction word for word.
``medium`` and ``hard`` draw from the catalogue of that difficulty (``catalogue``) and paraphrase the item:
``medium`` reorders the attributes, says about half of them and the product type in other words and varies the
sentence; ``hard`` says every attribute and the product type in other words and drops the ``dim:`` labels of the
options. The requirement itself (and so success, the reward and the goal distance) is the same structured record
at every difficulty; the canonical query stays its attributes and product type.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from milepost.envs.webshop.catalogue import CATALOGUE_VERSION, DIFFICULTIES
from milepost.envs.webshop.distance import INF, DistanceModel
from milepost.envs.webshop.goal import Requirement, Shop, instruction_text, make_requirement
from milepost.envs.webshop.sources import generated_shop
from milepost.envs.webshop.state import MAX_ITEMS, Order
from milepost.envs.webshop.vocab import ATTRIBUTE_PHRASES, TYPE_PHRASES
from milepost.errors import InputError
from milepost.types import Task

GENERATOR_VERSION = 1
DEFAULT_CATALOGUE_SEED = 0
DEFAULT_CATALOGUE_SIZE = 1000


def draw_order(
    shop: Shop, k: int, rng: random.Random, pool: Sequence[int] | None = None, difficulty: str = "easy"
) -> list[Requirement] | None:
    """k requirements on k distinct target products (from ``pool``, default the whole catalogue), or None when
    a drawn target admits no unique requirement. Past ``easy``, each requirement gets a paraphrased ``text``."""
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
        if difficulty != "easy":
            req = dataclasses.replace(req, text=paraphrase(req, rng, hard=difficulty == "hard"))
        reqs.append(req)
    return reqs


_OPENERS = ("i am looking for", "i need", "find me", "can you get me", "i want to buy", "please order")
_PRICES = ("price lower than {p} dollars", "at most {p} dollars", "no more than {p} dollars", "{p} dollars or less")


def paraphrase(req: Requirement, rng: random.Random, hard: bool = False) -> str:
    """The item as a shopper might say it, naming exactly the same requirement: attributes reordered, said in
    other words (``hard``: all of those that have other words; else about half), the product type by another
    name, options without their ``dim:`` labels (``hard``) or with them, and one of several price phrasings."""
    attrs = list(req.attributes)
    rng.shuffle(attrs)
    plain, said = [], []
    for a in attrs:
        phrases = ATTRIBUTE_PHRASES.get(a)
        if phrases and (hard or rng.random() < 0.5):
            said.append(rng.choice(phrases))
        else:
            plain.append(a)
    names = TYPE_PHRASES.get(req.ptype)
    ptype = rng.choice(names) if names and (hard or rng.random() < 0.5) else req.ptype
    words = " ".join((*plain, ptype))
    text = f"{rng.choice(_OPENERS)} {'an' if words[0] in 'aeiou' else 'a'} {words}"
    if said:
        text += " " + " and ".join(said)
    if req.options:
        if hard or rng.random() < 0.5:
            text += ", in " + " and ".join(value for _, value in req.options)
        else:
            text += ", with " + " and ".join(f"{dim}: {value}" for dim, value in req.options)
    price = f"{req.price_limit // 100}.{req.price_limit % 100:02d}"
    return f"{text}, {rng.choice(_PRICES).format(p=price)}"


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
    difficulty: str = "easy",
    shop: Shop | None = None,
    payload: dict[str, Any] | None = None,
) -> Task:
    """A web-shop ``Task`` (DESIGN: Contracts); ``size`` is the number of items, ``goal_distance`` the shortest
    number of actions to a successful purchase. ``meta`` gets the per-item result pages and option counts.
    ``shop`` and ``payload`` (extra payload fields) serve a catalogue loaded from files."""
    shop = shop if shop is not None else generated_shop(catalogue_seed, catalogue_size, difficulty)
    model = DistanceModel(Order(shop, tuple(reqs)))
    if any(p >= INF for p in model.best_page):
        raise InputError("webshop: a target is not found by any canonical query")
    tag = f"{split}-" if split else ""
    tag = tag if difficulty == "easy" else f"{difficulty}-{tag}"
    extra = dict(payload or {})
    if difficulty != "easy":
        extra["difficulty"] = difficulty
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
            **extra,
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
    difficulty: str = "easy",
) -> Task | None:
    """Task ``index`` of ``seed`` (None when its draw has no unique requirement; callers move to the next)."""
    if difficulty not in DIFFICULTIES:
        raise InputError(f"webshop: difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")
    shop = generated_shop(catalogue_seed, catalogue_size, difficulty)
    key = f"{seed}:{index}" if difficulty == "easy" else f"{difficulty}:{seed}:{index}"
    rng = random.Random(f"webshop-task:{key}")
    reqs = draw_order(shop, k, rng, pool, difficulty)
    if reqs is None:
        return None
    return make_task(
        reqs, catalogue_seed=catalogue_seed, catalogue_size=catalogue_size, seed=seed, index=index,
        difficulty=difficulty, shop=shop,
    )  # fmt: skip
