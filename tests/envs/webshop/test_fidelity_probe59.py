"""Issue 59, items 9-12: one query rule for the page and the text action, the file's breadcrumbs in the type reward,
WebShop's own action grammar under ``profile: webshop`` and text_rich's opened marks cleared by Back to Search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.goal import Requirement
from milepost.envs.webshop.html.app import ShopSession
from milepost.envs.webshop.original import read_catalogue
from milepost.envs.webshop.reward import original_score, type_fields
from milepost.envs.webshop.rules import order_of
from milepost.envs.webshop.state import BACK, RESULTS, SEARCH, parse_action, parse_original, search_query
from milepost.errors import InputError
from milepost.types import Task
from tests.envs.webshop.conftest import tasks_of
from tests.envs.webshop.test_original import write_fixture


@pytest.fixture(scope="module")
def task() -> Task:
    """A one-item task whose target has options."""
    return next(t for t in tasks_of(1, 30) if t.payload["items"][0]["options"])


def _target_page(env: WebShopEnv, task: Task) -> None:
    item = task.payload["items"][0]
    env.step(f"search[{item['query']}]")
    while item["product_id"] not in env.state.clickables():
        env.step("click[Next >]")
    env.step(f"click[{item['product_id']}]")


# -- item 9: one rule for a query ------------------------------------------------------------------------------


def test_a_non_ascii_query_searches_as_its_ascii_form_from_the_text_and_from_the_page(task: Task) -> None:
    assert search_query("caf\u00e9  \uff34ee \u65e5\u672c") == "cafe Tee"  # accent, fullwidth, no ASCII form
    assert parse_action("search[caf\u00e9]") == parse_action("search[cafe]")
    assert parse_action("click[caf\u00e9]") is None  # a click names a clickable, which is ASCII
    assert parse_action("\u212a" + "lick[Back to Search]") is None  # the Kelvin sign never folds into a tag
    env = WebShopEnv()
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step("search[caf\u00e9 tee]")
    assert info["error"] is None and reward == 0.0 and env.state.query == "cafe tee"
    page = ShopSession(task)
    page.act("search[caf\u00e9 tee]")  # what the page's search form posts (html/app.py /search)
    assert page.info["error"] is None and page.env.state.query == "cafe tee"
    assert page.env.state.results == env.state.results


# -- item 10: the file's breadcrumbs ---------------------------------------------------------------------------


def test_a_loaded_product_s_type_reward_reads_the_file_s_breadcrumbs(tmp_path: Path) -> None:
    src = write_fixture(tmp_path / "webshop")
    out = tmp_path / "data"
    assert main(["data", "webshop", "--from-webshop", str(src), "--out", str(out)]) == 0
    task = next(t for t in load_tasks(out, "train") + load_tasks(out, "test")
                if t.payload["items"][0]["product_id"] == "B000SOCKS1")  # fmt: skip
    catalogue = order_of(task).shop.catalogue
    socks, shirt = (catalogue.products[catalogue.by_id[a]] for a in ("B000SOCKS1", "B000SHIRT1"))
    crumbs = "Clothing, Shoes & Jewelry \u203a Men \u203a Clothing \u203a Shirts"  # the fixture's product_category
    assert type_fields(shirt)[1] == crumbs and socks.breadcrumbs() == crumbs
    # Socks bought for a shirt: another query and no title noun in common beyond 20%, but the same breadcrumbs
    # (four shared crumbs), so WebShop's type reward is 1; with milepost's own breadcrumbs (category "fashion"
    # shared by both, types differ: one shared crumb besides "milepost") it would be 0.5.
    req = Requirement.from_dict(task.payload["items"][0])
    full = original_score(req, socks, socks, tuple(v for _, v in req.options))
    assert full == pytest.approx(1.0)


def test_a_generated_product_writes_breadcrumbs_of_webshop_s_shape(task: Task) -> None:
    catalogue = order_of(task).shop.catalogue
    p = catalogue.products[catalogue.by_id[task.payload["items"][0]["product_id"]]]
    crumbs = p.breadcrumbs()
    assert crumbs.split(" \u203a ") == ["milepost", p.category, p.ptype] and type_fields(p)[1] == crumbs


# -- item 11: WebShop's grammar under profile: webshop ---------------------------------------------------------

IGNORED = ["Search[{q}]", "CLICK[Back to Search]", "search [{q}]", " search[{q}]", "ACTION: search[{q}]",
           "search[{q}] ", "click[ Back to Search]", "click[back  to search]", "REASON: go. ACTION: Search[{q}]",
           "reason: go. action: search[{q}]"]  # fmt: skip


@pytest.mark.parametrize("text", IGNORED)
def test_webshop_profile_ignores_what_webshop_s_text_env_ignores(task: Task, text: str) -> None:
    query = task.payload["items"][0]["query"]
    env = WebShopEnv(profile="webshop")
    env.reset(options={"task": task})
    env.step(f"search[{query}]")  # on the results page: both Back to Search and a search would change it
    before = env.state.key()
    _, reward, terminated, truncated, info = env.step(text.format(q=query + " x"))
    if text == "search[{q}] ":  # trailing text after the brackets is WebShop's too: re.match is not end-anchored
        assert env.state.key() != before
        return
    assert env.state.key() == before and reward == 0.0 and not (terminated or truncated)
    assert info["error"] is None and info["reward_terms"]["format"] == 0.0 and info["reward_terms"]["valid"] == 0.0


def test_webshop_profile_accepts_what_webshop_accepts_and_the_empty_answer_costs_nothing(task: Task) -> None:
    assert parse_original("click[Back to Search] please") is not None
    assert parse_original("click[search]") is None and parse_original("search[]") is None
    assert parse_original("search[a]\nclick[b]") == parse_original("search[a]")  # `.` stops at the newline
    env = WebShopEnv(profile="webshop")
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step("")
    assert reward == 0.0 and info["reward_terms"]["format"] == 0.0 and env.state.page == SEARCH
    env.step(f"search[{task.payload['items'][0]['query'].upper()}]")  # the argument is lower-cased
    assert env.state.page == RESULTS and env.state.query == task.payload["items"][0]["query"]
    _, reward, _, _, _ = env.step("click[Back to Search] please")
    assert env.state.page == SEARCH and reward == 0.0


def test_webshop_profile_hands_the_action_of_milepost_s_answer_format_to_webshop_s_parser(task: Task) -> None:
    """What milepost's agents write (``format_answer``) reaches WebShop's parser as the action part alone, as a
    WebShop harness strips ReAct's ``Action:``; the action part itself is read strictly."""
    query = task.payload["items"][0]["query"]
    env = WebShopEnv(profile="webshop")
    env.reset(options={"task": task})
    env.step(f"<think>the page</think> REASON: find it. ACTION: search[{query}]")
    assert env.state.page == RESULTS and env.state.query == query
    _, reward, _, _, _ = env.step("REASON: new search. ACTION: click[Back to Search] please")
    assert env.state.page == SEARCH and reward == 0.0


def test_the_milepost_profile_keeps_its_own_grammar(task: Task) -> None:
    env = WebShopEnv()
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step("")
    assert reward == pytest.approx(-0.1) and info["error"] == "no action given"
    _, _, _, _, info = env.step(f"REASON: look. ACTION: Search[{task.payload['items'][0]['query']}]")
    assert info["error"] is None and env.state.page == RESULTS
    _, _, _, _, info = env.step("click[Back to Search] please")
    assert info["error"] is not None and info["error"].startswith("cannot parse action")


# -- item 12: text_rich's opened marks -------------------------------------------------------------------------


def test_back_to_search_clears_text_rich_s_opened_marks_as_webshop_s_session_does(task: Task) -> None:
    item = task.payload["items"][0]
    env = WebShopEnv(profile="webshop", render="text_rich")
    env.reset(options={"task": task})
    _target_page(env, task)
    obs, *_ = env.step("click[< Prev]")
    marked = f"\n[clicked button] {item['product_id']} [clicked button_]\n"
    assert marked in obs
    obs, *_ = env.step(f"search[{item['query']}]")  # a new search from the results page keeps the session's asins
    assert marked in obs
    env.step(f"click[{BACK}]")
    obs, *_ = env.step(f"search[{item['query']}]")
    while item["product_id"] not in env.state.clickables():
        obs, *_ = env.step("click[Next >]")
    assert marked not in obs and f"\n[button] {item['product_id']} [button_]\n" in obs


def test_a_catalogue_converted_before_breadcrumbs_were_kept_is_refused_in_one_line(tmp_path: Path) -> None:
    src = write_fixture(tmp_path / "webshop")
    out = tmp_path / "data"
    assert main(["data", "webshop", "--from-webshop", str(src), "--out", str(out)]) == 0
    converted = json.loads((out / "catalogue.json").read_text())
    assert converted["products"][0]["product_category"].count(" \u203a ") == 3  # the separators survive
    converted["version"] = 1  # what milepost wrote before: breadcrumbs folded into one crumb
    (out / "catalogue.json").write_text(json.dumps(converted))
    with pytest.raises(InputError, match=r"catalogue\.json: converted by another milepost \(version 1") as err:
        read_catalogue(out / "catalogue.json")
    assert "\n" not in str(err.value)
