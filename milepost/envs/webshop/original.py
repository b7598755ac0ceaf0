"""WebShop's own data (princeton-nlp/WebShop) as a milepost catalogue and one-item tasks with exact goal distances.

Files read from one folder (names as WebShop's ``setup.sh`` downloads them and ``web_agent_site/utils.py`` names
them): ``items_shuffle*.json`` (the scraped products: a JSON list), ``items_ins_v2*.json`` (per ASIN: the
product's ``attributes``, and a generated ``instruction`` with its ``instruction_attributes``) and
``items_human_ins.json`` (per ASIN: a list of human-written instructions, each with ``instruction``,
``instruction_attributes`` and ``instruction_options``).

Products follow WebShop's ``engine.load_products`` (read for the facts, not copied): ASINs that are ``nan`` or
longer than 10 characters and repeated ASINs are skipped; the title is ``name``, the description
``full_description``, the features ``small_description``; option names are lower-cased and option values
stripped, lower-cased and ``/`` written `` | ``; the price is the one price of ``pricing``, or for a range a
draw between its two ends (WebShop draws it at every start; here once, from ``Random(seed, asin)``), or $100 when
there is none. The product type (``Requirement.ptype``) is the product's ``query`` and its category
``category``, the two fields WebShop's type reward compares. The search index reads what WebShop's index
reads (title, description, first feature and option text). Text is folded to printable ASCII (the text space of
every milepost environment) and brackets become parentheses (``click[...]`` cannot hold them).

Instructions (``engine.goal.get_human_goals`` / ``get_synthetic_goals``): the item's ``instruction`` with
WebShop's price sentence appended (``, and price lower than X dollars``, X drawn as WebShop draws it: two of
the first four multiples of 10 dollars above the price, the larger, from ``Random(seed, asin, n)``; none when
fewer than two exist), the instruction's attributes, and its options (human: the listed values, each matched to
the product's dimension offering it; generated: one value per dimension drawn from ``Random``, where WebShop
makes one goal per combination). The canonical query (the search an oracle types, from which goal distances
count) is the instruction's attributes joined by spaces.

A goal becomes a task only when milepost can score it exactly: at least one attribute, every attribute among
the product's attributes, every option value offered by the product, no other product meeting it (milepost's
success is a unique exact purchase), and the canonical query finding the target. Every skipped goal is counted
by reason in the manifest. Bad files raise ``InputError`` with one line naming the file and the problem.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from milepost.envs.webshop.catalogue import BREADCRUMB, Catalogue, Product
from milepost.envs.webshop.goal import Requirement, Shop, matching
from milepost.errors import InputError

HUMAN_FILE = "items_human_ins.json"
PRICE_STEPS = [10.0 * i for i in range(1, 100)]  # WebShop's PRICE_RANGE
NO_LIMIT = 1_000_000  # dollars: WebShop's price_upper when it states no price
MAX_DESCRIPTION = 1500  # characters of a description kept (a product page must fit an observation)
MAX_BULLETS = 6
MAX_VALUE = 120  # characters of an option value or title kept (a click value is at most 200)
CONVERTED_VERSION = 2  # 2: product_category keeps its ' › ' separators (1 folded them away)


def ascii_text(value: Any, limit: int | None = None) -> str:
    """``value`` as one line of printable ASCII: accents folded, other characters dropped, brackets as
    parentheses, whitespace collapsed; cut at ``limit`` characters."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode("ascii")
    text = " ".join(text.translate(str.maketrans("[]{}", "()()")).split())
    return text[:limit].rstrip() if limit is not None else text


def option_value(raw: Any) -> str:
    """An option value as WebShop's ``load_products`` writes it (stripped, ``/`` as `` | ``, lower case)."""
    return ascii_text(str(raw).strip().replace("/", " | ").lower(), MAX_VALUE)


class WebShopProduct(Product):
    """A product of WebShop's data: its own title, description and features, and WebShop's search document."""

    __slots__ = ("description_text", "feature_lines", "product_category")

    def __init__(self, index: int, record: dict[str, Any]) -> None:
        options = tuple((str(d), tuple(str(v) for v in vs)) for d, vs in record["options"])
        super().__init__(
            index, record["asin"], record["category"], record["query"], "", "", tuple(record["attributes"]),
            options, int(record["price"]), 0.0, index, title=record["title"], variant="webshop",
        )  # fmt: skip
        self.description_text = str(record["description"])
        self.feature_lines = [str(b) for b in record["bullets"]]
        self.product_category = str(record.get("product_category", ""))

    def breadcrumbs(self) -> str:
        # The file's own product_category (deep Amazon breadcrumbs), which WebShop's get_type_reward reads.
        return self.product_category

    def bullets(self) -> list[str]:
        return list(self.feature_lines)

    def description(self) -> str:
        return self.description_text

    def reviews(self) -> list[str]:
        return ["No reviews yet."]  # WebShop's released data carries no reviews (load_products leaves them empty)

    def search_text(self) -> str:
        # WebShop's search document (search_engine/convert_product_file_format.py): title, description, the first
        # feature and "dim: v1, v2, and dim2: ..." of the options.
        options = ", and ".join(f"{d}: {', '.join(vs)}" for d, vs in self.options)
        first = self.feature_lines[0] if self.feature_lines else ""
        return f"{self.title} {self.description_text} {first} {options}"

    def to_record(self) -> dict[str, Any]:
        return {
            "asin": self.pid, "title": self.title, "category": self.category, "query": self.ptype,
            "product_category": self.product_category, "attributes": list(self.attributes),
            "options": [[d, list(vs)] for d, vs in self.options], "price": self.price,
            "description": self.description_text, "bullets": self.feature_lines,
        }  # fmt: skip


def _one(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise InputError(f"{folder}: several {pattern} files ({names}); keep one in the folder")
    return found[0] if found else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None


def _price(raw: Any, rng: random.Random, where: str) -> float:
    """WebShop's price of a ``pricing`` string: ``$12.99`` or a range ``$10.99 - $15.99``."""
    if raw is None or raw == "" or raw == []:
        return 100.0
    if not isinstance(raw, str):
        raise InputError(f"{where}: pricing must be a string like '$12.99', not {type(raw).__name__}")
    try:
        prices = [float(Decimal(re.sub(r"[^\d.]", "", piece))) for piece in raw.split("$")[1:]]
    except InvalidOperation:
        raise InputError(f"{where}: pricing {raw[:40]!r} is not a dollar amount") from None
    if not prices:
        raise InputError(f"{where}: pricing {raw[:40]!r} names no $ amount")
    return prices[0] if len(prices) == 1 else rng.uniform(prices[0], prices[1])


def _product_record(p: Any, n: int, attrs: dict[str, Any], path: Path, seed: int) -> dict[str, Any] | None:
    where = f"{path.name}: product {n}"
    if not isinstance(p, dict):
        raise InputError(f"{where} is a {type(p).__name__}, not an object")
    asin = p.get("asin")
    if not isinstance(asin, str):
        raise InputError(f"{where} has no asin string")
    if asin == "nan" or len(asin) > 10:
        return None
    for key in ("name", "category", "query"):
        if not isinstance(p.get(key), str):
            raise InputError(f"{where} ({asin}): {key} must be a string")
    where = f"{path.name}: product {n} ({asin})"
    bullets = p.get("small_description", "")
    bullets = bullets if isinstance(bullets, list) else [bullets]
    options: list[list[Any]] = []
    custom = p.get("customization_options") or {}
    if not isinstance(custom, dict):
        raise InputError(f"{where}: customization_options must be an object of option lists")
    for name, contents in custom.items():
        if contents is None:
            continue
        if not isinstance(contents, list) or not all(isinstance(c, dict) and "value" in c for c in contents):
            raise InputError(f"{where}: option {name!r} must be a list of {{'value': ...}} objects")
        values = list(dict.fromkeys(v for v in (option_value(c["value"]) for c in contents) if v))
        if values:
            options.append([ascii_text(str(name).lower(), MAX_VALUE), values])
    info = attrs.get(asin)
    product_attrs = info.get("attributes", []) if isinstance(info, dict) else []
    if not isinstance(product_attrs, list):
        raise InputError(f"items_ins_v2: {asin}: attributes must be a list")
    price = _price(p.get("pricing"), random.Random(f"webshop-price:{seed}:{asin}"), where)
    return {
        "asin": ascii_text(asin),
        "title": ascii_text(p["name"], MAX_VALUE * 2) or asin,
        "category": ascii_text(p["category"]).lower(),
        "query": ascii_text(p["query"]).lower().strip(),
        # Crumb by crumb, so the separator get_type_reward splits on survives the ASCII folding.
        "product_category": BREADCRUMB.join(
            ascii_text(c) for c in str(p.get("product_category") or "").split("\u203a")
        ),
        "attributes": [ascii_text(a).lower() for a in product_attrs if ascii_text(a)],
        "options": options,
        "price": round(price * 100),
        "description": ascii_text(p.get("full_description") or "", MAX_DESCRIPTION),
        "bullets": [ascii_text(b, 400) for b in bullets[:MAX_BULLETS] if ascii_text(b)],
    }


def catalogue_of(records: list[dict[str, Any]], source: str) -> Catalogue:
    return Catalogue.from_products([WebShopProduct(i, r) for i, r in enumerate(records)], source)


def read_catalogue(path: Path) -> Catalogue:
    """A catalogue converted by ``load_webshop`` (``catalogue.json`` of a dataset folder)."""
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("format") != "milepost-webshop-catalogue":
        raise InputError(f"{path}: not a converted WebShop catalogue")
    if data.get("version") != CONVERTED_VERSION:
        raise InputError(
            f"{path}: converted by another milepost (version {data.get('version')!r}, this one reads "
            f"{CONVERTED_VERSION}: breadcrumbs kept for the type reward); re-run the command in the manifest"
        )
    try:
        return catalogue_of(list(data["products"]), str(path))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: malformed product ({exc})") from None


@dataclass
class Loaded:
    """What ``load_webshop`` read: the catalogue records, the goals that became requirements and the skips."""

    records: list[dict[str, Any]]
    catalogue: Catalogue
    goals: list[tuple[Requirement, str]] = field(default_factory=list)  # (requirement, goal key)
    skipped: Counter[str] = field(default_factory=Counter)
    files: dict[str, str] = field(default_factory=dict)


def _price_limit(price_cents: int, rng: random.Random) -> tuple[int, str]:
    """WebShop's price_upper (cents) and the sentence it appends (``get_human_goals``)."""
    price = price_cents / 100
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) >= 2:
        upper = sorted(rng.sample(steps, 2))[1]
        return round(upper * 100), f", and price lower than {upper:.2f} dollars"
    return NO_LIMIT * 100, ""


def _goal_options(raw: Any, product: Product, rng: random.Random) -> list[tuple[str, str]] | str:
    """The goal's (dimension, value) pairs on ``product``, or why they cannot be matched exactly."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        pairs = [(ascii_text(str(d).lower()), option_value(v)) for d, v in raw.items()]
        for dim, value in pairs:
            if not product.offers(dim, value):
                return "an option value the product does not offer"
        return pairs
    if not isinstance(raw, list):
        return "instruction_options is neither a list nor an object"
    out: list[tuple[str, str]] = []
    for value in (option_value(v) for v in raw):
        dims = [d for d, values in product.options if value in values and d not in {x for x, _ in out}]
        if not dims:
            return "an option value the product does not offer"
        out.append((dims[0], value))
    return out


def _requirement(
    product: Product, text: str, attributes: Any, options: list[tuple[str, str]], rng: random.Random
) -> Requirement | str:
    if not isinstance(attributes, list) or not attributes:
        return "no instruction attributes"
    attrs = tuple(dict.fromkeys(ascii_text(a).lower() for a in attributes if ascii_text(a)))
    if not attrs:
        return "no instruction attributes"
    if any(a not in product.attributes for a in attrs):
        return "an instruction attribute the product does not list"
    limit, sentence = _price_limit(product.price, rng)
    return Requirement(
        product_id=product.pid,
        ptype=product.ptype,
        category=product.category,
        attributes=attrs,
        options=tuple(options),
        price_limit=limit,
        query=" ".join(attrs),
        text=ascii_text(text.strip().strip(".")) + sentence,
    )


def load_webshop(folder: str | Path, *, seed: int = 0, instructions: str = "human") -> Loaded:
    """Read WebShop's files in ``folder`` (see the module docstring) into a catalogue and requirements.

    Args:
        folder: holds one ``items_shuffle*.json``, one ``items_ins_v2*.json`` and (for human instructions)
            ``items_human_ins.json``.
        seed: seeds the price draws of price ranges and price limits, and the options of generated goals.
        instructions: ``human`` (``items_human_ins.json``) or ``generated`` (the ``instruction`` of
            ``items_ins_v2``).

    Raises:
        InputError: a missing folder or file, a file that is not in WebShop's format (one line naming it).
    """
    if instructions not in ("human", "generated"):
        raise InputError(f"--instructions must be human or generated, not {instructions!r}")
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"--from-webshop: {root} is not a folder")
    products_path = _one(root, "items_shuffle*.json")
    attrs_path = _one(root, "items_ins_v2*.json")
    if products_path is None:
        raise InputError(f"{root}: no items_shuffle*.json (WebShop's products file)")
    if attrs_path is None:
        raise InputError(f"{root}: no items_ins_v2*.json (WebShop's attributes file)")
    human_path = root / HUMAN_FILE
    if instructions == "human" and not human_path.is_file():
        raise InputError(f"{root}: no {HUMAN_FILE} (WebShop's human instructions; or pass --instructions generated)")
    raw_products = _read_json(products_path)
    if not isinstance(raw_products, list):
        raise InputError(f"{products_path}: must be a JSON list of products")
    attrs = _read_json(attrs_path)
    if not isinstance(attrs, dict):
        raise InputError(f"{attrs_path}: must be a JSON object keyed by ASIN")
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, p in enumerate(raw_products):
        record = _product_record(p, n, attrs, products_path, seed)
        if record is None or record["asin"] in seen:
            continue
        seen.add(record["asin"])
        records.append(record)
    if not records:
        raise InputError(f"{products_path}: no products")
    catalogue = catalogue_of(records, str(products_path))
    files = {"products": products_path.name, "attributes": attrs_path.name}
    loaded = Loaded(records, catalogue, files=files)
    if instructions == "human":
        loaded.files["instructions"] = HUMAN_FILE
        human = _read_json(human_path)
        if not isinstance(human, dict):
            raise InputError(f"{human_path}: must be a JSON object keyed by ASIN")
        goals = []
        for asin, entries in human.items():
            if not isinstance(entries, list):
                raise InputError(f"{human_path}: {asin}: must be a list of instructions")
            for n, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("instruction"), str):
                    raise InputError(f"{human_path}: {asin}: instruction {n} needs an 'instruction' string")
                goals.append((asin, n, entry["instruction"], entry.get("instruction_attributes"),
                              entry.get("instruction_options")))  # fmt: skip
    else:
        goals = []
        for asin, info in attrs.items():
            if isinstance(info, dict) and isinstance(info.get("instruction"), str):
                goals.append((asin, 0, info["instruction"], info.get("instruction_attributes"), None))
    _make_goals(loaded, goals, seed, generated=instructions == "generated")
    return loaded


def _make_goals(loaded: Loaded, goals: list[tuple[Any, ...]], seed: int, *, generated: bool) -> None:
    catalogue = loaded.catalogue
    shop = Shop(catalogue)
    for asin, n, text, attributes, raw_options in goals:
        index = catalogue.by_id.get(asin)
        if index is None:
            loaded.skipped["product not in the products file"] += 1
            continue
        product = catalogue.products[index]
        rng = random.Random(f"webshop-goal:{seed}:{asin}:{n}")
        if generated:
            # WebShop's generated goals: " with dim: v, and dim2: v2" over the option names in sorted order.
            options: list[tuple[str, str]] | str = [(d, rng.choice(vs)) for d, vs in sorted(product.options)]
            text += "".join(f", and {d}: {v}" if i else f" with {d}: {v}" for i, (d, v) in enumerate(options))
        else:
            options = _goal_options(raw_options, product, rng)
        if isinstance(options, str):
            loaded.skipped[options] += 1
            continue
        req = _requirement(product, text, attributes, options, rng)
        if isinstance(req, str):
            loaded.skipped[req] += 1
            continue
        if matching(catalogue, req, limit=2) != [index]:
            loaded.skipped["another product meets it too"] += 1
            continue
        if index not in shop.index.search(req.query):
            loaded.skipped["the canonical query does not find the product"] += 1
            continue
        loaded.goals.append((req, f"{asin}:{n}"))
