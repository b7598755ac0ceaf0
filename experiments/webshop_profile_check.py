"""Does the ``webshop`` profile's reward equal princeton-nlp/WebShop's? Runs the original ``goal.py`` itself.

Over a generated set of purchases (per task: the target with the right options, the target with each wrong value
of each option dimension, the target with no option chosen, every near-miss sibling of the target's family and a
few random products, each with the ordered option values where offered), it scores each purchase with
milepost's ``original_score`` and with WebShop's ``get_reward`` imported from a checkout of the WebShop repo
(``--webshop DIR``: a directory holding ``web_agent_site/engine/goal.py``), and lists every difference.

WebShop's goal.py needs ``thefuzz`` and ``spacy``: ``--thefuzz DIR`` puts a thefuzz install first on the path
(WebShop pins 0.19.0, which without python-Levenshtein scores with difflib; 0.20+ scores with rapidfuzz), and
``spacy`` is replaced by a stand-in whose ``load()`` tags with the same tagger milepost uses (the rule fallback,
or spaCy's en_core_web_sm found through ``--spacy-site DIR``), so the comparison isolates the formula. With
``--spacy-site`` it also measures how often the rule fallback's reward differs from the one with spaCy's nouns.

    python -m experiments.webshop_profile_check --webshop /path/to/WebShop --thefuzz /path/to/thefuzz019 \\
        --tasks 300 --out docs/results/webshop/profile_check.json
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
import types
from pathlib import Path
from typing import Any

from milepost.envs.webshop.catalogue import Product
from milepost.envs.webshop.goal import Requirement, get_shop
from milepost.envs.webshop.reward import SPACY_MODELS, Tagger, original_score, rule_nouns, type_fields
from milepost.envs.webshop.tasks import generate_task
from milepost.io import atomic_write_json


class _Token:
    def __init__(self, text: str, pos: str) -> None:
        self.text, self.pos_ = text, pos


def _spacy_stand_in(tagger: Tagger) -> types.ModuleType:
    """A ``spacy`` module whose ``load()`` returns an nlp that yields the tagger's nouns as NOUN tokens."""
    module = types.ModuleType("spacy")

    def load(_name: str) -> Any:
        return lambda text: [_Token(t, "NOUN") for t in tagger(text)]

    module.load = load  # type: ignore[attr-defined]
    return module


def import_original(webshop: Path, thefuzz: Path | None, tagger: Tagger) -> types.ModuleType:
    """WebShop's ``web_agent_site.engine.goal`` with the spaCy stand-in (and the given thefuzz first on the path)."""
    if not (webshop / "web_agent_site" / "engine" / "goal.py").is_file():
        raise SystemExit(f"error: {webshop} holds no web_agent_site/engine/goal.py")
    if thefuzz is not None:
        sys.path.insert(0, str(thefuzz))
    sys.path.insert(0, str(webshop))
    sys.modules["spacy"] = _spacy_stand_in(tagger)
    # web_agent_site/engine/__init__.py is empty; goal.py imports only normalize.py from the package.
    return importlib.import_module("web_agent_site.engine.goal")


def purchases(seed: int, size: int, tasks: int, randoms: int) -> list[tuple[Requirement, Product, tuple]]:
    """(requirement, product, selection) triples as the module docstring lists them."""
    shop = get_shop(seed, size)
    products = shop.catalogue.products
    out: list[tuple[Requirement, Product, tuple]] = []
    index = 0
    done = 0
    while done < tasks:
        task = generate_task(seed, index, 1, catalogue_seed=seed, catalogue_size=size)
        index += 1
        if task is None:
            continue
        done += 1
        req = Requirement.from_dict(task.payload["items"][0])
        target = products[shop.catalogue.by_id[req.product_id]]
        wanted = dict(req.options)
        right = tuple(wanted.get(d) for d in target.dims)
        out.append((req, target, right))
        out.append((req, target, (None,) * len(target.dims)))
        for k, (dim, values) in enumerate(target.options):
            for v in values:
                if v != wanted.get(dim):
                    out.append((req, target, (*right[:k], v, *right[k + 1 :])))
        rng = random.Random(f"check:{seed}:{index}")
        family = [p for p in products if p.family == target.family and p.index != target.index]
        for p in family + rng.sample(products, randoms):
            sel = tuple(wanted[d] if p.offers(d, wanted.get(d, "")) else rng.choice(vs) for d, vs in p.options)
            out.append((req, p, sel))
    return out


def original_reward(goal_mod: types.ModuleType, req: Requirement, target: Product, p: Product, sel: tuple) -> float:
    """WebShop's get_reward on the purchase, with milepost's products in WebShop's fields (see reward.py)."""
    query, crumbs, name = type_fields(p)
    purchased = {"query": query, "product_category": crumbs, "name": name, "Title": p.title,
                 "Attributes": list(p.attributes), "BulletPoints": p.bullets(),
                 "Description": p.description()}  # fmt: skip
    g_query, g_crumbs, g_name = type_fields(target)
    goal = {"query": g_query, "product_category": g_crumbs, "name": g_name, "attributes": list(req.attributes),
            "goal_options": [v for _, v in req.options], "price_upper": req.price_limit / 100}  # fmt: skip
    options = {d: v for d, v in zip(p.dims, sel) if v is not None}
    return float(goal_mod.get_reward(purchased, goal, price=p.price / 100, options=options))


def spacy_tagger(site: Path) -> Tagger:
    sys.path.append(str(site))
    import spacy

    for name in SPACY_MODELS:
        try:
            nlp = spacy.load(name)
            break
        except OSError:
            continue
    else:
        raise SystemExit(f"error: no en_core_web_sm under {site}")
    cache: dict[str, list[str]] = {}

    def nouns(title: str) -> list[str]:
        if title not in cache:
            cache[title] = [t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]
        return cache[title]

    return nouns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--webshop", type=Path, required=True, help="checkout of princeton-nlp/WebShop")
    p.add_argument("--thefuzz", type=Path, default=None, help="directory with a thefuzz install to use")
    p.add_argument("--spacy-site", type=Path, default=None, help="site-packages holding spaCy + en_core_web_sm")
    p.add_argument("--catalogue-seed", type=int, default=0)
    p.add_argument("--catalogue-size", type=int, default=1000)
    p.add_argument("--tasks", type=int, default=300)
    p.add_argument("--randoms", type=int, default=4, help="random products per task")
    p.add_argument("--out", type=Path, required=True, help="JSON summary")
    args = p.parse_args(argv)

    tagger: Tagger = rule_nouns
    tagger_name = "rule"
    spacy_nouns: Tagger | None = None
    if args.spacy_site is not None:
        spacy_nouns = spacy_tagger(args.spacy_site)
    goal_mod = import_original(args.webshop, args.thefuzz, tagger)
    fuzz_mod = sys.modules.get("thefuzz")
    fuzz_version = getattr(fuzz_mod, "__version__", "?")
    t0 = time.time()
    rows = purchases(args.catalogue_seed, args.catalogue_size, args.tasks, args.randoms)
    same = 0
    diffs: list[dict[str, Any]] = []
    exact_same = tagger_same = wrong_full = 0
    catalogue = get_shop(args.catalogue_seed, args.catalogue_size).catalogue
    for req, p_, sel in rows:
        target = catalogue.products[catalogue.by_id[req.product_id]]
        mine = original_score(req, target, p_, sel, tagger)
        theirs = original_reward(goal_mod, req, target, p_, sel)
        if abs(mine - theirs) < 1e-12:
            same += 1
        else:
            diffs.append({"product": p_.pid, "target": target.pid, "selection": list(sel), "ordered": dict(req.options),
                          "attributes": list(req.attributes), "milepost": mine, "webshop": theirs})  # fmt: skip
        exact_same += abs(req.score(p_, sel) - mine) < 1e-12
        wrong_full += mine == 1.0 and not req.satisfied_by(p_, sel)
        if spacy_nouns is not None:
            tagger_same += abs(original_score(req, target, p_, sel, spacy_nouns) - mine) < 1e-12
    n = len(rows)
    summary = {
        "catalogue": [args.catalogue_seed, args.catalogue_size],
        "tasks": args.tasks,
        "purchases": n,
        "thefuzz": fuzz_version,
        "tagger": tagger_name,
        "agree": same,
        "agreement": same / n,
        "differences": diffs,
        "same_as_milepost_profile": exact_same / n,
        "wrong_purchases_scoring_1": wrong_full,
        "rule_vs_spacy_same_reward": (tagger_same / n) if spacy_nouns is not None else None,
        "seconds": round(time.time() - t0, 1),
    }
    atomic_write_json(args.out, summary)
    print(f"{n} purchases, thefuzz {fuzz_version}: milepost's webshop reward == WebShop's get_reward on {same} "
          f"({100 * same / n:.2f}%); {len(diffs)} differ; same as the milepost profile's reward on "
          f"{100 * exact_same / n:.1f}%; {wrong_full} wrong purchases score 1.0")  # fmt: skip
    if spacy_nouns is not None:
        print(f"rule fallback vs spaCy nouns: same reward on {tagger_same} ({100 * tagger_same / n:.2f}%)")
    for d in diffs[:20]:
        print("  differs:", d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
