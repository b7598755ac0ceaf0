"""The generated product catalogue: vocabularies, products in near-miss families, and their page text.

Everything comes from a seed (no downloads). ``difficulty`` picks the generator: ``easy`` is the original one
(titles from one template, option dimensions per category, page text restating the attributes); ``medium`` and
``hard`` take options per product type, six title templates and page text in other words (``vocab``), and add
siblings that share the base product's title and differ only in their option values or price (``hard``: more of
them, and titles that show at most one attribute). Products are made in families: a base product and 1-4 near-miss
siblings of the same type that differ in exactly one way (one attribute swapped, one option value missing, or a
higher price), so every product that becomes a purchase target has distractors that a sloppy agent would buy.
Bullet points, descriptions and reviews are derived from the product's fields when a page shows them, so a
100,000-product catalogue keeps only the fields below in memory. All text is ASCII.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from milepost.envs.webshop.vocab import ATTRIBUTE_PHRASES, BLURBS, TITLE_TEMPLATES, TYPE_OPTIONS, USES
from milepost.errors import InputError

CATALOGUE_VERSION = 1
DIFFICULTIES = ("easy", "medium", "hard")
MIN_PRODUCTS = 50
MAX_PRODUCTS = 100_000


@dataclass(frozen=True)
class Category:
    """A department: its product types, attribute vocabulary and option dimensions (dimension -> values)."""

    name: str
    types: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]  # typical price range in dollars


CATEGORIES: tuple[Category, ...] = (
    Category(
        "clothing",
        ("tee", "hoodie", "jeans", "dress", "rain jacket", "running shorts"),
        ("cotton", "slim fit", "organic", "long sleeve", "machine washable", "lightweight", "waterproof",
         "breathable", "stretch", "recycled polyester"),
        (("size", ("x-small", "small", "medium", "large", "x-large", "xx-large")),
         ("color", ("black", "white", "navy", "heather grey", "red", "olive green", "beige"))),
        (12.0, 80.0),
    ),
    Category(
        "beauty",
        ("shampoo", "moisturizer", "lip balm", "face serum", "sunscreen", "hair oil"),
        ("paraben free", "fragrance free", "vegan", "organic", "sulfate free", "long lasting", "sensitive skin",
         "travel size", "cruelty free", "hyaluronic acid"),
        (("volume", ("1 fl oz", "2 fl oz", "4 fl oz", "8 fl oz", "16 fl oz")),
         ("scent", ("unscented", "lavender", "coconut", "citrus", "rose", "mint"))),
        (5.0, 45.0),
    ),
    Category(
        "grocery",
        ("green tea", "coffee beans", "granola", "dark chocolate", "pasta sauce", "almond butter"),
        ("gluten free", "sugar free", "non gmo", "keto friendly", "low sodium", "caffeine free", "kosher",
         "fair trade", "high protein", "dairy free"),
        (("flavor", ("original", "vanilla", "honey", "sea salt", "cinnamon", "berry")),
         ("pack", ("pack of 1", "pack of 2", "pack of 3", "pack of 6", "pack of 12"))),
        (3.0, 35.0),
    ),
    Category(
        "electronics",
        ("usb c cable", "phone case", "wireless earbuds", "power bank", "wireless charger", "hdmi adapter"),
        ("fast charging", "noise cancelling", "bluetooth", "water resistant", "braided", "magnetic", "compact",
         "shockproof", "long battery life", "led indicator"),
        (("color", ("black", "white", "silver", "space grey", "blue", "pink")),
         ("length", ("3 ft", "6 ft", "10 ft", "pack of 2", "pack of 3"))),
        (8.0, 120.0),
    ),
    Category(
        "home",
        ("throw pillow", "bath towel", "desk lamp", "storage basket", "bed sheet set", "shower curtain"),
        ("machine washable", "blackout", "hypoallergenic", "dimmable", "quick dry", "wrinkle free", "bamboo",
         "foldable", "non slip", "easy assembly"),
        (("color", ("white", "ivory", "charcoal", "sage green", "dusty blue", "terracotta")),
         ("size", ("twin", "full", "queen", "king", "standard"))),
        (10.0, 90.0),
    ),
    Category(
        "pets",
        ("dog bed", "cat toy", "dog leash", "pet shampoo", "cat litter", "chew toy"),
        ("durable", "orthopedic", "reflective", "odor control", "natural rubber", "washable cover", "tear resistant",
         "grain free", "dust free", "vet approved"),
        (("size", ("small", "medium", "large", "x-large")),
         ("color", ("brown", "grey", "blue", "orange", "green"))),
        (6.0, 70.0),
    ),
)  # fmt: skip

BRANDS: tuple[str, ...] = (
    "Acme", "Northwind", "Bluefin", "Oakridge", "Lumina", "Peakline", "Solace", "Verdant", "Copperleaf", "Brightway",
    "Maple & Co", "Tidewater", "Kestrel", "Halcyon", "Evergreen", "Nimbus", "Ardent", "Cobalt", "Wildroot", "Sundial",
    "Parkside", "Ironbark", "Juniper", "Quillon", "Riverstone", "Silverline", "Trailhead", "Urbanist", "Westbay",
    "Zephyr",
)  # fmt: skip
STYLES: tuple[str, ...] = ("classic", "premium", "everyday", "essential", "deluxe", "modern", "basic", "pro")
_PRAISE = ("great value", "works as described", "good quality", "would buy again", "fast shipping", "nice")
_COMPLAINT = ("runs a bit small", "took a while to arrive", "packaging was damaged", "color slightly different")
# The product-id alphabet and a multiplier coprime to 36**8, so index -> id is a bijection (ids never collide).
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ID_MULT = 2_654_435_761 % 36**8 | 1
while _ID_MULT % 3 == 0:  # pragma: no cover - the constant is fixed; the loop documents the coprimality rule
    _ID_MULT += 2


def product_id(index: int, seed: int) -> str:
    """The ASIN-like id of product ``index``: ``B0`` and 8 base-36 characters, unique within a catalogue."""
    value = (index * _ID_MULT + seed * 7_777_777) % 36**8
    chars = []
    for _ in range(8):
        value, digit = divmod(value, 36)
        chars.append(_ALPHABET[digit])
    return "B0" + "".join(reversed(chars))


BREADCRUMB = " \u203a "  # WebShop's breadcrumb separator (product_category)


class Product:
    """One catalogue product. ``options`` maps each option dimension the product has to its offered values;
    ``price`` is in cents (exact comparisons against price limits). ``variant`` is the catalogue's difficulty,
    which decides how the page text reads; ``title`` defaults to the easy catalogue's template."""

    __slots__ = ("attributes", "brand", "category", "family", "index", "options", "pid", "price", "ptype", "rating",
                 "style", "title", "variant")  # fmt: skip

    def __init__(
        self,
        index: int,
        pid: str,
        category: str,
        ptype: str,
        brand: str,
        style: str,
        attributes: tuple[str, ...],
        options: tuple[tuple[str, tuple[str, ...]], ...],
        price: int,
        rating: float,
        family: int,
        *,
        title: str | None = None,
        variant: str = "easy",
    ) -> None:
        self.index = index
        self.pid = pid
        self.category = category
        self.ptype = ptype
        self.brand = brand
        self.style = style
        self.attributes = attributes
        self.options = options
        self.price = price
        self.rating = rating
        self.family = family
        self.variant = variant
        if title is None:
            words = " ".join(a.title() for a in attributes)
            title = f"{brand} {style.title()} {words} {ptype.title()}"
        self.title = title

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.options)

    def breadcrumbs(self) -> str:
        """WebShop's ``product_category`` field: the breadcrumbs from the most general crumb to the most specific,
        joined by `` › `` as WebShop's scraped products write them (``get_type_reward`` splits on ``›``). A
        generated product's are ``milepost › category › type`` (two shared crumbs = the same category); a loaded
        WebShop product's are its file's (``original.WebShopProduct``)."""
        return BREADCRUMB.join(("milepost", self.category, self.ptype))

    def offers(self, dim: str, value: str) -> bool:
        return any(d == dim and value in values for d, values in self.options)

    def price_text(self) -> str:
        return f"${self.price // 100}.{self.price % 100:02d}"

    def bullets(self) -> list[str]:
        """Feature bullet points (the Features tab)."""
        if self.variant != "easy":
            # Each attribute in other words (a paraphrase the index picks), then one line about the range.
            out = [f"{_paraphrase(a, self.index).capitalize()}." for a in self.attributes]
            out.append(BLURBS[self.category][self.index % len(BLURBS[self.category])])
            return out
        out = [f"{a.capitalize()}: {_phrase(a, self.index)}" for a in self.attributes]
        out.append(f"A {self.style} {self.ptype} from {self.brand}, part of our {self.category} range.")
        return out

    def description(self) -> str:
        """The Description tab."""
        if self.variant != "easy":
            blurb = BLURBS[self.category][(self.index + 1) % len(BLURBS[self.category])]
            said = " and ".join(_paraphrase(a, self.index + 1) for a in self.attributes[:2])
            return f"Meet the {self.brand} {self.ptype}: {said}. {blurb} Backed by {self.brand}'s 30-day promise."
        attrs = ", ".join(self.attributes[:-1]) + (" and " if len(self.attributes) > 1 else "") + self.attributes[-1]
        return (
            f"The {self.brand} {self.style} {self.ptype} is {attrs}. Designed for everyday use and backed by "
            f"{self.brand}'s satisfaction guarantee."
        )

    def reviews(self) -> list[str]:
        """Two short reviews (the Reviews tab), derived from the product index."""
        rng = random.Random(self.index)
        stars = max(1, min(5, round(self.rating)))
        return [f"{stars} stars: {rng.choice(_PRAISE)}.", f"{max(1, stars - 1)} stars: {rng.choice(_COMPLAINT)}."]

    def search_text(self) -> str:
        """What the search index reads: title, attributes, type and category (medium and hard: and, as WebShop's
        search documents, the description, the features and the option values)."""
        text = f"{self.title} {' '.join(self.attributes)} {self.ptype} {self.category}"
        if self.variant != "easy":
            values = " ".join(v for _, vs in self.options for v in vs)
            text += f" {self.description()} {' '.join(self.bullets())} {values}"
        return text

    def __repr__(self) -> str:
        return f"Product({self.pid}, {self.title!r})"


def _paraphrase(attribute: str, index: int) -> str:
    phrases = ATTRIBUTE_PHRASES.get(attribute, (attribute,))
    return phrases[index % len(phrases)]


_PHRASES = ("for all-day comfort", "tested for quality", "a customer favourite", "made to last", "easy to use")


def _phrase(attribute: str, index: int) -> str:
    return _PHRASES[(len(attribute) + index) % len(_PHRASES)]


class Catalogue:
    """``size`` products generated from ``seed`` at ``difficulty``; ``by_type`` lists product indices per product
    type. ``source`` is empty for a generated catalogue and names the files of a loaded one (``from_products``)."""

    def __init__(self, seed: int, size: int, difficulty: str = "easy") -> None:
        if not MIN_PRODUCTS <= size <= MAX_PRODUCTS:
            raise InputError(f"catalogue size must be in {MIN_PRODUCTS}-{MAX_PRODUCTS}, got {size}")
        if difficulty not in DIFFICULTIES:
            raise InputError(f"webshop: difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")
        self.seed = seed
        self.size = size
        self.difficulty = difficulty
        self.source = ""
        self._index(_generate(seed, size) if difficulty == "easy" else _generate_v2(seed, size, difficulty))

    @classmethod
    def from_products(cls, products: list[Product], source: str) -> Catalogue:
        """A catalogue of given products (``products[i].index == i``), e.g. WebShop's data loaded from files."""
        self = object.__new__(cls)
        self.seed, self.size, self.difficulty, self.source = 0, len(products), "easy", source
        self._index(products)
        return self

    def _index(self, products: list[Product]) -> None:
        self.products: list[Product] = products
        self.by_id = {p.pid: p.index for p in self.products}
        self.by_type: dict[str, list[int]] = {}
        for p in self.products:
            self.by_type.setdefault(p.ptype, []).append(p.index)

    def __len__(self) -> int:
        return len(self.products)

    def __getitem__(self, index: int) -> Product:
        return self.products[index]


@functools.lru_cache(maxsize=4)
def get_catalogue(seed: int, size: int, difficulty: str = "easy") -> Catalogue:
    """The catalogue of (seed, size, difficulty), cached: every task of a dataset shares one."""
    return Catalogue(seed, size, difficulty)


def _generate(seed: int, size: int) -> list[Product]:
    rng = random.Random(f"webshop-catalogue:{CATALOGUE_VERSION}:{seed}")
    products: list[Product] = []
    family = 0
    while len(products) < size:
        base = _base_product(rng)
        members = [base]
        for _ in range(rng.randint(1, 4)):
            members.append(_near_miss(rng, base))
        for fields in members:
            if len(products) >= size:
                break
            index = len(products)
            products.append(Product(index, product_id(index, seed), *fields, family=family))
        family += 1
    return products


_Fields = tuple[str, str, str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], int, float]


def _base_product(rng: random.Random) -> _Fields:
    cat = rng.choice(CATEGORIES)
    ptype = rng.choice(cat.types)
    attrs = tuple(sorted(rng.sample(cat.attributes, rng.randint(2, 4))))
    n_dims = rng.choices((0, 1, 2), weights=(1, 4, 5))[0]
    options: list[tuple[str, tuple[str, ...]]] = []
    for dim, values in cat.options:  # the category's dimension order, so pages list them alike
        if len(options) < n_dims and rng.random() < 0.5 + 0.5 * (n_dims == 2):
            chosen = set(rng.sample(values, rng.randint(2, min(5, len(values)))))
            options.append((dim, tuple(v for v in values if v in chosen)))
    lo, hi = cat.price
    price = int(rng.uniform(lo, hi) * 100) // 100 * 100 + rng.choice((99, 49, 95, 0))
    rating = rng.choice((3.0, 3.5, 4.0, 4.0, 4.5, 4.5, 5.0))
    return (cat.name, ptype, rng.choice(BRANDS), rng.choice(STYLES), attrs, tuple(options), price, rating)


def _near_miss(rng: random.Random, base: _Fields) -> _Fields:
    """A sibling of ``base`` that differs in exactly one way: an attribute, an option value, or the price."""
    cat_name, ptype, brand, _, attrs, options, price, rating = base
    cat = next(c for c in CATEGORIES if c.name == cat_name)
    kinds = ["attribute", "price"] + (["option"] if options else [])
    kind = rng.choice(kinds)
    if rng.random() < 0.5:
        brand = rng.choice(BRANDS)
    if kind == "attribute":
        drop = rng.choice(attrs)
        new = rng.choice([a for a in cat.attributes if a not in attrs])
        attrs = tuple(sorted([a for a in attrs if a != drop] + [new]))
    elif kind == "option":
        k = rng.randrange(len(options))
        dim, values = options[k]
        full = dict(cat.options)[dim]
        missing = rng.choice(values)
        spare = [v for v in full if v not in values]
        kept = [v for v in values if v != missing] + ([rng.choice(spare)] if spare else [])
        values = tuple(v for v in full if v in kept)
        options = (*options[:k], (dim, values), *options[k + 1 :])
    else:
        price = price + max(100, int(price * rng.uniform(0.1, 0.6)) // 100 * 100)
    return (cat_name, ptype, brand, rng.choice(STYLES), attrs, options, price, rating)


# -- medium and hard ------------------------------------------------------------------------------------------

_V2 = tuple[str, str, str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], int, float, str]
_BARE_TITLES = ("{brand} {style} {ptype}", "{ptype} by {brand} ({style})", "{brand} {ptype}, {style} Edition")


def _title(rng: random.Random, brand: str, style: str, attrs: tuple[str, ...], ptype: str, cat: str, hard: bool) -> str:
    """A title from one of the templates, showing some of the attributes (hard: at most one)."""
    shown = list(attrs)
    rng.shuffle(shown)
    shown = shown[: rng.randint(0, 1)] if hard else shown[: rng.randint(1, len(shown))]
    words = {"brand": brand, "style": style.title(), "ptype": ptype.title(), "use": USES[cat]}
    if not shown:
        return rng.choice(_BARE_TITLES).format(**words)
    template = rng.choice(TITLE_TEMPLATES)
    sep = " " if template.startswith("{brand} {style}") or "{attrs} {ptype}" in template else ", "
    return template.format(attrs=sep.join(a.title() for a in shown), **words)


def _options_v2(rng: random.Random, ptype: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    dims = TYPE_OPTIONS[ptype]
    n_dims = min(len(dims), rng.choices((0, 1, 2), weights=(1, 4, 5))[0])
    keep = set(rng.sample(range(len(dims)), n_dims))
    out = []
    for k, (dim, values) in enumerate(dims):
        if k in keep:
            chosen = set(rng.sample(values, rng.randint(2, min(5, len(values)))))
            out.append((dim, tuple(v for v in values if v in chosen)))
    return tuple(out)


def _base_v2(rng: random.Random, hard: bool) -> _V2:
    cat = rng.choice(CATEGORIES)
    ptype = rng.choice(cat.types)
    attrs = tuple(sorted(rng.sample(cat.attributes, rng.randint(2, 4))))
    lo, hi = cat.price
    price = int(rng.uniform(lo, hi) * 100) // 100 * 100 + rng.choice((99, 49, 95, 0))
    rating = rng.choice((3.0, 3.5, 4.0, 4.0, 4.5, 4.5, 5.0))
    brand, style = rng.choice(BRANDS), rng.choice(STYLES)
    title = _title(rng, brand, style, attrs, ptype, cat.name, hard)
    return (cat.name, ptype, brand, style, attrs, _options_v2(rng, ptype), price, rating, title)


def _other_values(rng: random.Random, ptype: str, options: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple:
    """``options`` with one dimension's offer changed: one value dropped, and a value not offered added."""
    k = rng.randrange(len(options))
    dim, values = options[k]
    full = dict(TYPE_OPTIONS[ptype])[dim]
    missing = rng.choice(values)
    spare = [v for v in full if v not in values]
    kept = [v for v in values if v != missing] + ([rng.choice(spare)] if spare else [])
    return (*options[:k], (dim, tuple(v for v in full if v in kept)), *options[k + 1 :])


def _higher(rng: random.Random, price: int) -> int:
    return price + max(100, int(price * rng.uniform(0.1, 0.6)) // 100 * 100)


def _twin_v2(rng: random.Random, base: _V2) -> _V2:
    """A sibling with the base's title, brand and attributes that differs only in its option values or price."""
    cat_name, ptype, brand, style, attrs, options, price, _, title = base
    if options and rng.random() < 0.6:
        options = _other_values(rng, ptype, options)
    else:
        price = _higher(rng, price)
    return (cat_name, ptype, brand, style, attrs, options, price, rng.choice((3.5, 4.0, 4.5)), title)


def _near_miss_v2(rng: random.Random, base: _V2, hard: bool) -> _V2:
    """A sibling of the same type that differs in one attribute, option offer or price, under its own title."""
    cat_name, ptype, brand, style, attrs, options, price, rating, _ = base
    cat = next(c for c in CATEGORIES if c.name == cat_name)
    kind = rng.choice(["attribute", "price"] + (["option"] if options else []))
    if rng.random() < 0.5:
        brand = rng.choice(BRANDS)
    if kind == "attribute":
        drop = rng.choice(attrs)
        new = rng.choice([a for a in cat.attributes if a not in attrs])
        attrs = tuple(sorted([a for a in attrs if a != drop] + [new]))
    elif kind == "option":
        options = _other_values(rng, ptype, options)
    else:
        price = _higher(rng, price)
    style = rng.choice(STYLES)
    title = _title(rng, brand, style, attrs, ptype, cat_name, hard)
    return (cat_name, ptype, brand, style, attrs, options, price, rating, title)


def _generate_v2(seed: int, size: int, difficulty: str) -> list[Product]:
    hard = difficulty == "hard"
    rng = random.Random(f"webshop-catalogue:{CATALOGUE_VERSION}:{difficulty}:{seed}")
    products: list[Product] = []
    family = 0
    while len(products) < size:
        base = _base_v2(rng, hard)
        members = [base] + [_near_miss_v2(rng, base, hard) for _ in range(rng.randint(1, 3))]
        members += [_twin_v2(rng, base) for _ in range(rng.randint(5, 12) if hard else rng.randint(0, 3))]
        rng.shuffle(members)  # the base is not always first, so ties in search do not favour it
        seen: set[tuple[object, ...]] = set()
        unique = []
        for m in members:  # two siblings drawn alike (the rating aside) would be one product twice
            if (key := (*m[:7], m[8])) not in seen:
                seen.add(key)
                unique.append(m)
        members = unique
        for cat_name, ptype, brand, style, attrs, options, price, rating, title in members:
            if len(products) >= size:
                break
            index = len(products)
            products.append(
                Product(index, product_id(index, seed), cat_name, ptype, brand, style, attrs, options, price, rating,
                        family, title=title, variant=difficulty)
            )  # fmt: skip
        family += 1
    return products
