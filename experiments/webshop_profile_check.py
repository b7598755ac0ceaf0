"""Does the ``webshop`` profile's reward equal princeton-nlp/WebShop's? Runs the original ``goal.py`` itself.

Over a set of purchases (per task: the target with the right options, the target with each wrong value of each
option dimension, the target with no option chosen, every near-miss sibling of the target's family, or on a
loaded catalogue up to 6 products of the target's type, and a few random products, each with the ordered option
values where offered), it scores each purchase with milepost's ``original_score`` and with WebShop's
``get_reward`` imported from a checkout of the WebShop repo (``--webshop DIR``: a directory holding
``web_agent_site/engine/goal.py``), and lists every difference. Each purchase is also scored by the default
``milepost`` profile's exact-match reward (``Requirement.score``); the summary counts how often that equals
WebShop's reward (``same_as_milepost_profile``).

The catalogue is a generated one (``--catalogue-seed``, ``--catalogue-size``, ``--difficulty``; WebShop's side
reads the products' fields as ``reward.py`` maps them, the breadcrumbs from ``Product.breadcrumbs``) or one loaded
from WebShop-format files as ``milepost data webshop --from-webshop DIR`` loads them (``--from-webshop DIR``).
With ``--write-webshop DIR`` the generated catalogue and one human instruction per task are first written in
WebShop's file format, each product with breadcrumbs of Amazon's shape (``amazon_breadcrumbs``), so
``--write-webshop D --from-webshop D`` checks a loaded catalogue whose breadcrumbs are not milepost's own. On a
loaded catalogue WebShop's side reads the raw files as its ``load_products`` does (``file_fields``) and
milepost's side its converted catalogue.

WebShop's goal.py needs ``thefuzz`` and ``spacy``: ``--thefuzz DIR`` puts a thefuzz install first on the path
(WebShop pins 0.19.0, which without python-Levenshtein scores with difflib; 0.20+ scores with rapidfuzz), and
``spacy`` is replaced by a stand-in whose ``load()`` tags with the same tagger milepost uses (the rule fallback,
or spaCy's en_core_web_sm found through ``--spacy-site DIR``), so the comparison isolates the formula. With
``--spacy-site`` it also measures how often the rule fallback's reward differs from the one with spaCy's nouns.

    python -m experiments.webshop_profile_check --webshop /path/to/WebShop --thefuzz /path/to/thefuzz019 \\
        --tasks 300 --out docs/results/webshop/profile_check.json
    python -m experiments.webshop_profile_check --webshop /path/to/WebShop --thefuzz /path/to/thefuzz019 \\
        --catalogue-seed 3 --write-webshop runs/ws3 --from-webshop runs/ws3 --out ...loaded.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
import types
from pathlib import Path
from typing import Any

from milepost.envs.webshop.catalogue import BREADCRUMB, Catalogue, Product, get_catalogue
from milepost.envs.webshop.goal import Requirement
from milepost.envs.webshop.original import load_webshop
from milepost.envs.webshop.reward import SPACY_MODELS, Tagger, original_score, rule_nouns, type_fields
from milepost.envs.webshop.tasks import generate_task
from milepost.io import atomic_write_json

Purchase = tuple[Requirement, Product, tuple]


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


def generated_requirements(seed: int, size: int, tasks: int, difficulty: str) -> list[tuple[Requirement, str]]:
    """The one-item requirements of the first ``tasks`` generated tasks of catalogue (seed, size, difficulty), each
    with the seed of its random purchases (``seed:index`` after the task's draw, the earlier runs' key; for
    medium and hard prefixed by the difficulty)."""
    out: list[tuple[Requirement, str]] = []
    index = 0
    while len(out) < tasks:
        task = generate_task(seed, index, 1, catalogue_seed=seed, catalogue_size=size, difficulty=difficulty)
        index += 1
        if task is not None:
            key = f"{seed}:{index}" if difficulty == "easy" else f"{difficulty}:{seed}:{index}"
            out.append((Requirement.from_dict(task.payload["items"][0]), key))
    return out


def purchases(catalogue: Catalogue, reqs: list[tuple[Requirement, str]], randoms: int) -> list[Purchase]:
    """(requirement, product, selection) triples as the module docstring lists them; each requirement comes with
    the seed of its random products."""
    products = catalogue.products
    out: list[Purchase] = []
    for req, key in reqs:
        target = products[catalogue.by_id[req.product_id]]
        wanted = dict(req.options)
        right = tuple(wanted.get(d) for d in target.dims)
        out.append((req, target, right))
        out.append((req, target, (None,) * len(target.dims)))
        for k, (dim, values) in enumerate(target.options):
            for v in values:
                if v != wanted.get(dim):
                    out.append((req, target, (*right[:k], v, *right[k + 1 :])))
        rng = random.Random(f"check:{key}")
        family = [p for p in products if p.family == target.family and p.index != target.index]
        if not family:  # a loaded catalogue: each product is its own family
            family = [p for p in products if p.ptype == target.ptype and p.index != target.index][:6]
        for p in family + rng.sample(products, min(randoms, len(products))):
            sel = tuple(wanted[d] if p.offers(d, wanted.get(d, "")) else rng.choice(vs) for d, vs in p.options)
            out.append((req, p, sel))
    return out


def generated_fields(p: Product) -> dict[str, Any]:
    """A generated product in WebShop's product fields (see reward.py)."""
    query, crumbs, name = type_fields(p)
    return {"query": query, "product_category": crumbs, "name": name, "Title": p.title,
            "Attributes": list(p.attributes), "BulletPoints": p.bullets(), "Description": p.description()}  # fmt: skip


def file_fields(folder: Path) -> dict[str, dict[str, Any]]:
    """Per asin, the fields WebShop's ``load_products`` (``web_agent_site/engine/engine.py``) hands the reward,
    read from the raw files: query lower-cased and stripped, product_category and name as written,
    small_description as BulletPoints, full_description as Description, items_ins_v2's attributes."""
    shuffle = sorted(folder.glob("items_shuffle*.json"))[0]
    attrs = json.loads(sorted(folder.glob("items_ins_v2*.json"))[0].read_text())
    out: dict[str, dict[str, Any]] = {}
    for raw in json.loads(shuffle.read_text()):
        bullets = raw["small_description"]
        out[raw["asin"]] = {
            "query": raw["query"].lower().strip(), "product_category": raw["product_category"], "name": raw["name"],
            "Title": raw["name"], "Attributes": attrs.get(raw["asin"], {}).get("attributes", ["DUMMY_ATTR"]),
            "BulletPoints": bullets if isinstance(bullets, list) else [bullets], "Description": raw["full_description"],
        }  # fmt: skip
    return out


def original_reward(
    goal_mod: types.ModuleType, req: Requirement, fields: dict[str, Any], goal_fields: dict[str, Any], p: Product,
    sel: tuple,
) -> float:  # fmt: skip
    """WebShop's get_reward on the purchase: the bought product's WebShop fields, the goal from the target's."""
    goal = {"query": goal_fields["query"], "product_category": goal_fields["product_category"],
            "name": goal_fields["name"], "attributes": list(req.attributes),
            "goal_options": [v for _, v in req.options], "price_upper": req.price_limit / 100}  # fmt: skip
    options = {d: v for d, v in zip(p.dims, sel) if v is not None}
    return float(goal_mod.get_reward(fields, goal, price=p.price / 100, options=options))


# Amazon-shaped breadcrumbs for the generated categories (department, an aisle, the type): two products share two
# crumbs when department and aisle agree, which is not milepost's own "same category" rule.
_DEPARTMENTS = {
    "clothing": ("Clothing, Shoes & Jewelry", ("Women", "Men")),
    "beauty": ("Beauty & Personal Care", ("Skin Care", "Hair Care")),
    "electronics": ("Electronics", ("Accessories & Supplies", "Headphones")),
    "grocery": ("Grocery & Gourmet Food", ("Pantry", "Snacks")),
    "home": ("Home & Kitchen", ("Kitchen & Dining", "Bedding")),
    "pets": ("Pet Supplies", ("Dogs", "Cats")),
}


def amazon_breadcrumbs(p: Product) -> str:
    department, aisles = _DEPARTMENTS[p.category]
    return BREADCRUMB.join((department, aisles[p.index % len(aisles)], p.ptype.title()))


def write_webshop_files(catalogue: Catalogue, reqs: list[tuple[Requirement, str]], folder: Path) -> None:
    """``catalogue`` and one human instruction per requirement in WebShop's file format (items_shuffle_N.json,
    items_ins_v2_N.json, items_human_ins.json), each product with ``amazon_breadcrumbs``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {"asin": p.pid, "name": p.title, "category": p.category, "query": p.ptype,
         "product_category": amazon_breadcrumbs(p), "full_description": p.description(),
         "small_description": p.bullets(), "pricing": p.price_text(), "images": [""],
         "customization_options": {d: [{"value": v, "image": None} for v in vs] for d, vs in p.options} or None}
        for p in catalogue.products
    ]  # fmt: skip
    ins = {p.pid: {"attributes": list(p.attributes), "instruction": p.title,
                   "instruction_attributes": list(p.attributes)} for p in catalogue.products}  # fmt: skip
    human: dict[str, list[dict[str, Any]]] = {}
    for req, _ in reqs:
        human.setdefault(req.product_id, []).append(
            {"asin": req.product_id, "instruction": req.phrase(), "instruction_attributes": list(req.attributes),
             "instruction_options": [v for _, v in req.options]}
        )  # fmt: skip
    count = len(rows)
    (folder / f"items_shuffle_{count}.json").write_text(json.dumps(rows))
    (folder / f"items_ins_v2_{count}.json").write_text(json.dumps(ins))
    (folder / "items_human_ins.json").write_text(json.dumps(human))


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
    p.add_argument("--difficulty", choices=("easy", "medium", "hard"), default="easy")
    p.add_argument("--tasks", type=int, default=300)
    p.add_argument("--randoms", type=int, default=4, help="random products per task")
    p.add_argument("--write-webshop", type=Path, default=None, help="write the generated catalogue as WebShop files")
    p.add_argument("--from-webshop", type=Path, default=None, help="check the catalogue loaded from WebShop files")
    p.add_argument("--out", type=Path, required=True, help="JSON summary")
    args = p.parse_args(argv)

    tagger: Tagger = rule_nouns
    spacy_nouns: Tagger | None = None
    if args.spacy_site is not None:
        spacy_nouns = spacy_tagger(args.spacy_site)
    goal_mod = import_original(args.webshop, args.thefuzz, tagger)
    fuzz_version = getattr(sys.modules.get("thefuzz"), "__version__", "?")
    t0 = time.time()
    generated = get_catalogue(args.catalogue_seed, args.catalogue_size, args.difficulty)
    reqs = generated_requirements(args.catalogue_seed, args.catalogue_size, args.tasks, args.difficulty)
    if args.write_webshop is not None:
        write_webshop_files(generated, reqs, args.write_webshop)
    raw: dict[str, dict[str, Any]] | None = None
    catalogue = generated
    if args.from_webshop is not None:
        loaded = load_webshop(args.from_webshop, seed=args.catalogue_seed)
        catalogue = loaded.catalogue
        goals = loaded.goals[: args.tasks]
        reqs = [(req, f"loaded:{args.catalogue_seed}:{n}") for n, (req, _) in enumerate(goals)]
        raw = file_fields(args.from_webshop)
    rows = purchases(catalogue, reqs, args.randoms)
    same = exact_same = tagger_same = wrong_full = 0
    diffs: list[dict[str, Any]] = []
    for req, bought, sel in rows:
        target = catalogue.products[catalogue.by_id[req.product_id]]
        fields = raw[bought.pid] if raw is not None else generated_fields(bought)
        goal_fields = raw[target.pid] if raw is not None else generated_fields(target)
        mine = original_score(req, target, bought, sel, tagger)
        theirs = original_reward(goal_mod, req, fields, goal_fields, bought, sel)
        if abs(mine - theirs) < 1e-12:
            same += 1
        else:
            diffs.append({"product": bought.pid, "target": target.pid, "selection": list(sel),
                          "ordered": dict(req.options), "attributes": list(req.attributes), "milepost": mine,
                          "webshop": theirs})  # fmt: skip
        exact_same += abs(req.score(bought, sel) - theirs) < 1e-12
        wrong_full += mine == 1.0 and not req.satisfied_by(bought, sel)
        if spacy_nouns is not None:
            tagger_same += abs(original_score(req, target, bought, sel, spacy_nouns) - mine) < 1e-12
    n = len(rows)
    summary = {
        "catalogue": [args.catalogue_seed, args.catalogue_size],
        "difficulty": args.difficulty,
        "source": "generated" if raw is None else "loaded from WebShop-format files (amazon_breadcrumbs)",
        "tasks": len(reqs),
        "purchases": n,
        "thefuzz": fuzz_version,
        "tagger": "rule",
        "agree": same,
        "agreement": same / n,
        "differences": diffs,
        "milepost_profile_agree": exact_same,
        "same_as_milepost_profile": exact_same / n,
        "wrong_purchases_scoring_1": wrong_full,
        "rule_vs_spacy_same_reward": (tagger_same / n) if spacy_nouns is not None else None,
        "seconds": round(time.time() - t0, 1),
    }
    atomic_write_json(args.out, summary)
    print(f"{n} purchases ({summary['source']}, {len(reqs)} tasks), thefuzz {fuzz_version}: milepost's webshop "
          f"reward == WebShop's get_reward on {same} ({100 * same / n:.2f}%); {len(diffs)} differ; the milepost "
          f"profile's reward == WebShop's on {exact_same} ({100 * exact_same / n:.1f}%); {wrong_full} wrong "
          "purchases score 1.0")  # fmt: skip
    if spacy_nouns is not None:
        print(f"rule fallback vs spaCy nouns: same reward on {tagger_same} ({100 * tagger_same / n:.2f}%)")
    for d in diffs[:20]:
        print("  differs:", d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
