"""Catalogue generation, requirements (uniqueness, canonical query) and search."""

from __future__ import annotations

import random

import pytest

from milepost.envs.webshop.catalogue import Catalogue, get_catalogue
from milepost.envs.webshop.goal import get_shop, make_requirement, matching, order_score
from milepost.envs.webshop.search import MAX_RESULTS, SearchIndex, tokenize
from milepost.errors import InputError


def test_catalogue_is_deterministic_in_its_seed_and_ids_are_unique() -> None:
    a, b, c = Catalogue(3, 500), Catalogue(3, 500), Catalogue(4, 500)
    assert [p.title for p in a.products] == [p.title for p in b.products]
    assert [p.pid for p in a.products] != [p.pid for p in c.products]
    assert len({p.pid for p in a.products}) == 500
    assert all(p.title.isascii() and len(p.pid) == 10 for p in a.products)


def test_catalogue_size_is_checked() -> None:
    with pytest.raises(InputError):
        Catalogue(0, 10)
    with pytest.raises(InputError):
        Catalogue(0, 100_001)


def test_every_family_has_near_miss_siblings_that_differ_in_one_way() -> None:
    cat = get_catalogue(0, 1000)
    families: dict[int, list[int]] = {}
    for p in cat.products:
        families.setdefault(p.family, []).append(p.index)
    checked = 0
    for members in list(families.values())[:-1]:  # the last family may be cut by the size
        base = cat.products[members[0]]
        assert len(members) >= 2
        for i in members[1:]:
            sib = cat.products[i]
            assert sib.ptype == base.ptype
            diffs = (sib.attributes != base.attributes) + (sib.options != base.options) + (sib.price != base.price)
            assert diffs == 1
            checked += 1
    assert checked > 300


def test_requirements_are_unique_and_found_by_their_query() -> None:
    shop = get_shop(0, 1000)
    rng = random.Random(5)
    made = 0
    for t in range(0, 1000, 7):
        target = shop.catalogue.products[t]
        req = make_requirement(shop, target, rng)
        if req is None:
            continue
        made += 1
        assert matching(shop.catalogue, req, limit=5) == [t]
        assert t in shop.index.search(req.query)
        sel = tuple(dict(req.options)[d] for d in target.dims)
        assert req.satisfied_by(target, sel)
        assert order_score(shop.catalogue, [req], [(t, sel)])[0] == 1.0
        # A near-miss sibling never satisfies the requirement.
        for sib in shop.catalogue.products:
            if sib.family == target.family and sib.index != t:
                wanted = dict(req.options)
                sib_sel = tuple(wanted.get(d) if sib.offers(d, wanted.get(d, "")) else None for d in sib.dims)
                assert not req.satisfied_by(sib, sib_sel)
    assert made > 50


def test_reward_is_webshops_formula_with_exact_matching() -> None:
    shop = get_shop(0, 1000)
    rng = random.Random(1)
    target = next(p for p in shop.catalogue.products if len(p.options) == 2 and len(p.attributes) >= 2)
    req = None
    while req is None:
        req = make_requirement(shop, target, rng)
    wrong_first = tuple(None if k == 0 else dict(req.options)[d] for k, d in enumerate(target.dims))
    n = len(req.attributes) + len(req.options) + 1
    assert req.score(target, wrong_first) == pytest.approx((n - 1) / n)
    other_type = next(p for p in shop.catalogue.products if p.category != target.category)
    assert req.score(other_type, (None,) * len(other_type.options)) == 0.0
    # Two lines for one item: the extra line halves the credit.
    sel = tuple(dict(req.options)[d] for d in target.dims)
    assert order_score(shop.catalogue, [req], [(target.index, sel), (target.index, sel)])[0] == 0.5


def test_search_ranks_by_bm25_with_ties_by_index() -> None:
    shop = get_shop(0, 1000)
    index = shop.index
    results = index.search("cotton slim fit tee")
    assert 0 < len(results) <= MAX_RESULTS
    scores = index.scores(tuple(tokenize("cotton slim fit tee")))
    keys = [(-scores[i], i) for i in results]
    assert keys == sorted(keys)
    # Nothing left out scores above the last result.
    assert all(scores[i] <= scores[results[-1]] for i in range(len(scores)) if i not in set(results))
    assert index.search("Cotton  SLIM fit tee!") == results  # case, spacing and punctuation do not matter
    assert index.search("zzzz qqqq") == ()


def test_search_matches_a_reference_bm25() -> None:
    """Okapi BM25 (Lucene idf) scored document by document agrees with the inverted index."""
    import math
    from collections import Counter

    cat = Catalogue(7, 200)
    index = SearchIndex(cat)
    docs = [Counter(tokenize(p.search_text())) for p in cat.products]
    avgdl = sum(sum(d.values()) for d in docs) / len(docs)
    query = tokenize("organic vegan shampoo lavender")
    for i, doc in enumerate(docs):
        ref = 0.0
        for q in query:
            df = sum(q in d for d in docs)
            if not df:
                continue
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            tf = doc[q]
            ref += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * sum(doc.values()) / avgdl))
        assert index.scores(tuple(query))[i] == pytest.approx(ref)


def test_record_check_recomputes_the_goal_distance_and_uniqueness() -> None:
    from milepost.envs.webshop.records import check_record
    from tests.envs.webshop.conftest import tasks_of

    task = tasks_of(1, 1)[0]
    task.level = "3-5" if task.goal_distance <= 5 else "6-8"
    assert check_record(task) is None
    task.goal_distance += 1
    assert check_record(task) == ("goal_distance", f"{task.goal_distance}, but the shortest purchase takes "
                                  f"{task.goal_distance - 1} actions")  # fmt: skip
    task.goal_distance -= 1
    task.payload["items"][0]["attributes"] = task.payload["items"][0]["attributes"][:0]
    task.payload["items"][0]["price_limit"] = 10_000.0
    field, why = check_record(task) or ("", "")
    assert field == "payload" and "not the one product" in why
