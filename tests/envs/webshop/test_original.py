"""``milepost data webshop --from-webshop DIR``: WebShop's own file formats (written here, a few products) become
tasks whose goal distance breadth-first search confirms, and bad files are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.actions import ActionMode
from milepost.envs.webshop.distance import bfs_distance
from milepost.envs.webshop.moves import best_action
from milepost.envs.webshop.profile import WEBSHOP
from milepost.envs.webshop.rules import WebShopRules


def _product(asin: str, name: str, query: str, pricing: str, options: dict[str, list[str]] | None) -> dict[str, Any]:
    """A product as WebShop's items_shuffle*.json holds it (the fields load_products reads, plus a few it drops)."""
    return {
        "asin": asin,
        "name": name,
        "category": "fashion",
        "query": query,
        "product_category": "Clothing, Shoes & Jewelry \u203a Men \u203a Clothing \u203a Shirts",
        "full_description": f"{name}. Soft fabric for every day.",
        "small_description": [f"{name} \u2013 machine wash", "Imported"],
        "pricing": pricing,
        "list_price": "",
        "brand": "Acme",
        "images": ["https://example.invalid/a.jpg"],
        "customization_options": None
        if options is None
        else {dim: [{"value": v, "image": None} for v in values] for dim, values in options.items()},
        "product_information": {},
    }


def write_fixture(folder: Path) -> Path:
    """Six products (two of them near-identical shirts told apart by color), their attributes and instructions."""
    folder.mkdir(parents=True, exist_ok=True)
    products = [
        _product(
            "B000SHIRT1",
            "Acme Men's Cotton Shirt Long Sleeve",
            "men's shirts",
            "$24.99",
            {"Color": ["Black", "Navy/White"], "Size": ["Large", "X-Large"]},
        ),
        _product(
            "B000SHIRT2",
            "Acme Men's Cotton Shirt Long Sleeve",
            "men's shirts",
            "$24.99",
            {"Color": ["Grey", "Red"], "Size": ["Large", "X-Large"]},
        ),
        _product("B000SOCKS1", "Trail Wool Socks for Hiking", "men's socks", "$9.99 - $14.99", {"Size": ["M", "L"]}),
        _product("B000CAPS01", "Sun Cap with Wide Brim", "sun hats", "", None),
        _product("B000JACKT1", "Caf\u00e9 Rain Jacket [Waterproof]", "rain jackets", "$59.00", {"color": ["Olive"]}),
        _product("nan", "a scraped row without an asin", "x", "$1.00", None),
    ]
    attributes = {
        "B000SHIRT1": {"attributes": ["cotton", "long sleeve", "machine wash"],
                       "instruction": "i need a long sleeve cotton shirt", "instruction_attributes": ["long sleeve"]},
        "B000SHIRT2": {"attributes": ["cotton", "long sleeve", "machine wash"],
                       "instruction": "a cotton shirt", "instruction_attributes": ["cotton"]},
        "B000SOCKS1": {"attributes": ["wool", "cushioned"], "instruction": "wool socks",
                       "instruction_attributes": ["wool"]},
        "B000CAPS01": {"attributes": ["wide brim", "uv protection"], "instruction": "a wide brim sun cap",
                       "instruction_attributes": ["wide brim"]},
        "B000JACKT1": {"attributes": ["waterproof"], "instruction": "a waterproof rain jacket",
                       "instruction_attributes": ["waterproof"]},
    }  # fmt: skip
    human = {
        "B000SHIRT1": [
            {"asin": "B000SHIRT1", "instruction": "i want a long sleeve cotton shirt in navy/white, x-large.",
             "instruction_attributes": ["long sleeve", "cotton"], "instruction_options": ["navy/white", "x-large"]},
            {"asin": "B000SHIRT1", "instruction": "a shirt", "instruction_attributes": [],
             "instruction_options": []},
        ],
        "B000SOCKS1": [{"asin": "B000SOCKS1", "instruction": "find me cushioned wool socks in size l",
                        "instruction_attributes": ["wool", "cushioned"], "instruction_options": ["L"]}],
        "B000CAPS01": [{"asin": "B000CAPS01", "instruction": "i need a sun cap with a wide brim",
                        "instruction_attributes": ["wide brim"], "instruction_options": []}],
        "B000JACKT1": [{"asin": "B000JACKT1", "instruction": "a rain jacket in blue", "instruction_attributes":
                        ["waterproof"], "instruction_options": ["blue"]}],
        "B000GONE00": [{"asin": "B000GONE00", "instruction": "gone", "instruction_attributes": ["x"],
                        "instruction_options": []}],
    }  # fmt: skip
    (folder / "items_shuffle_1000.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(attributes))
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    return folder


def test_from_webshop_loads_human_instructions_with_exact_goal_distances(tmp_path: Path) -> None:
    src = write_fixture(tmp_path / "webshop")
    out = tmp_path / "data"
    assert main(["data", "webshop", "--from-webshop", str(src), "--out", str(out)]) == 0
    tasks = load_tasks(out, "train") + load_tasks(out, "test")  # load_tasks re-checks every record
    by_asin = {t.payload["items"][0]["product_id"]: t for t in tasks}
    assert set(by_asin) == {"B000SHIRT1", "B000SOCKS1", "B000CAPS01"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["instructions"]["skipped"] == {
        "no instruction attributes": 1,
        "an option value the product does not offer": 1,
        "product not in the products file": 1,
    }
    shirt = by_asin["B000SHIRT1"].payload["items"][0]
    # WebShop's option normalisation ("Navy/White" -> "navy | white"), dimensions lower-cased, the person's words
    # kept as the instruction with WebShop's price sentence, and the attributes as the canonical query.
    assert shirt["options"] == {"color": "navy | white", "size": "x-large"}
    assert shirt["query"] == "long sleeve cotton"
    assert by_asin["B000SHIRT1"].payload["instruction"].startswith("i want a long sleeve cotton shirt in navy/white")
    assert "and price lower than" in shirt["text"] and shirt["price_limit"] in (30.0, 40.0, 50.0)
    assert by_asin["B000CAPS01"].payload["items"][0]["price_limit"] >= 110.0  # no pricing: WebShop's $100
    for task in tasks:
        rules = WebShopRules(task, action_mode=ActionMode())
        assert bfs_distance(rules.state) == task.goal_distance == rules.remaining_distance()
        steps = 0
        while not rules.is_solved():
            action = best_action(rules)
            assert action is not None
            rules.apply(action)
            steps += 1
        assert steps == task.goal_distance and rules.state.outcome() == 1.0
        # Under WebShop's own rules and reward (profile webshop) the same task is as far and pays 1.0 too.
        original = WebShopRules(task, action_mode=ActionMode(), profile=WEBSHOP)
        assert bfs_distance(original.state) == task.goal_distance == original.remaining_distance()
        while not original.is_solved():
            action = best_action(original)
            assert action is not None
            original.apply(action)
        assert original.state.outcome() == 1.0
    # The socks instruction names one of the two dimensions' values: one option click.
    assert by_asin["B000SOCKS1"].meta["option_clicks"] == [1]
    catalogue = json.loads((out / "catalogue.json").read_text())
    names = {p["asin"]: p["title"] for p in catalogue["products"]}
    assert "nan" not in names and names["B000JACKT1"] == "Cafe Rain Jacket (Waterproof)"  # ASCII, no brackets


def test_from_webshop_generated_instructions(tmp_path: Path) -> None:
    src = write_fixture(tmp_path / "webshop")
    out = tmp_path / "gen"
    assert main(["data", "webshop", "--from-webshop", str(src), "--instructions", "generated", "--out", str(out)]) == 0
    tasks = load_tasks(out, "train") + load_tasks(out, "test")
    texts = {t.payload["items"][0]["product_id"]: t.payload["instruction"] for t in tasks}
    # Both shirts carry the same attributes and title: a goal naming only "cotton" may be met by the other
    # one, unless the drawn colour tells them apart (their colours differ), so both are kept; the socks' goal
    # names a size, drawn as WebShop's synthetic goals do.
    assert texts["B000SOCKS1"].startswith("wool socks with size: ")
    assert {"B000SHIRT1", "B000SHIRT2"} <= set(texts)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda d: (d / "items_shuffle_1000.json").unlink(), "no items_shuffle*.json"),
        (lambda d: (d / "items_human_ins.json").unlink(), "no items_human_ins.json"),
        (lambda d: (d / "items_shuffle_1000.json").write_text("{not json"), "items_shuffle_1000.json: not JSON"),
        (lambda d: (d / "items_shuffle_1000.json").write_text('{"a": 1}'), "must be a JSON list of products"),
        (lambda d: (d / "items_shuffle_1000.json").write_text('[{"name": "x"}]'), "product 0 has no asin"),
        (lambda d: (d / "items_shuffle.json").write_text("[]"), "several items_shuffle*.json files"),
        (
            lambda d: (d / "items_shuffle_1000.json").write_text(json.dumps([_product("B1", "x", "q", "$abc", None)])),
            "pricing '$abc' is not a dollar amount",
        ),
        (
            lambda d: (d / "items_shuffle_1000.json").write_text(json.dumps([_product("B1", "x", "q", "12.99", None)])),
            "names no $ amount",
        ),
        (lambda d: (d / "items_human_ins.json").write_text('{"B000SHIRT1": [{"x": 1}]}'), "needs an 'instruction'"),
    ],
)
def test_bad_webshop_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], breakage: Any, message: str
) -> None:
    src = write_fixture(tmp_path / "webshop")
    breakage(src)
    assert main(["data", "webshop", "--from-webshop", str(src), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("milepost: error:") and message in err[0], err


def test_a_moved_catalogue_file_is_a_one_line_error(tmp_path: Path) -> None:
    from milepost.errors import InputError

    src = write_fixture(tmp_path / "webshop")
    out = tmp_path / "data"
    assert main(["data", "webshop", "--from-webshop", str(src), "--out", str(out)]) == 0
    (out / "catalogue.json").unlink()
    with pytest.raises(InputError, match=r"catalogue file .* not found"):
        load_tasks(out, "train")
